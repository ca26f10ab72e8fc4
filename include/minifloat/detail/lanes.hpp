// minifloat/detail/lanes.hpp — the few operations the rounding core needs beyond C++ operators,
// written once so the same core compiles for one value (scalar unsigned integers, host or device)
// and for a SIMD register of values (GCC/Clang vector extensions, host bulk kernels).
// The templates that take a lane type L (these, round.hpp's round_bits, encode.hpp's code_lanes
// and value_lanes, random.hpp's mix32) are plain constexpr, not __host__ __device__: nvcc would
// otherwise compile their SIMD instantiations for the device, which has no vector types. Device
// code reaches them through --expt-relaxed-constexpr, with scalar lanes only.
#pragma once

#include "../config.hpp"

namespace minifloat::detail {

/// m ? a : b, lane by lane. For scalars m is a bool; for vectors it is a comparison mask.
template <class M, class L>
constexpr L select(M m, L a, L b) {
  return m ? a : b;
}
template <class L>
constexpr L lane_min(L a, L b) {
  return a < b ? a : b;
}
template <class L>
constexpr L lane_max(L a, L b) {
  return a < b ? b : a;
}

}  // namespace minifloat::detail
