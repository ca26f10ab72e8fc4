// minifloat/training/parameter_seed.hpp — the seed of one parameter's stochastic draws (a weight
// store's stochastic split or rounding, storage/: split_tensor, low_tensor, low_block_tensor) from
// the run's seed. Both trainers (examples/weight_storage.cpp and minifloat.optim) number the
// parameters in the model's order from 0 and call this one rule, so one run seed gives every
// parameter the same draws in C++ and Python, and two parameters independent streams.
#pragma once

#include <cstdint>

#include "../random.hpp"

namespace minifloat::training {

/// fold_seed(seed, index): the parameter's position folded into the run's seed (random.hpp).
constexpr std::uint64_t parameter_seed(std::uint64_t seed, std::uint64_t index) { return fold_seed(seed, index); }

}  // namespace minifloat::training
