// nn/detail/lane_sum.hpp — reductions the compiler can vectorise without -ffast-math: sixteen
// independent float partial sums (each a short strict-order chain), combined in double.
// Batch norm's statistics run over whole planes of every image, where a single sequential
// accumulator would be latency-bound.
#pragma once

#include <array>
#include <cstddef>

namespace nn::detail {

/// Σ term(i) for i in [0, n).
template <class Term>
[[nodiscard]] inline double lane_sum(std::size_t n, Term term) {
  constexpr std::size_t width = 16;
  std::array<float, width> acc{};
  std::size_t i = 0;
  for (; i + width <= n; i += width)
    for (std::size_t j = 0; j < width; ++j) acc[j] += term(i + j);
  double total = 0.0;
  for (; i < n; ++i) total += term(i);
  for (float a : acc) total += a;
  return total;
}

}  // namespace nn::detail
