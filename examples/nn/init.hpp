// nn/init.hpp — seeded parameter initialisation that gives the same numbers with every
// standard library (std::uniform_real_distribution is implementation-defined; mt19937_64's
// output sequence is not).
#pragma once

#include <cmath>
#include <random>
#include <span>

namespace nn {

/// PyTorch's default for linear and convolution layers (kaiming_uniform with a = sqrt(5), and
/// the same bound for the bias): U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
inline void fill_uniform(std::span<float> values, double bound, std::mt19937_64& rng) {
  for (float& v : values) {
    const double u = static_cast<double>(rng() >> 11) * 0x1p-53;  // [0, 1), 53 random bits
    v = static_cast<float>((2.0 * u - 1.0) * bound);
  }
}

[[nodiscard]] inline double default_init_bound(std::size_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }

}  // namespace nn
