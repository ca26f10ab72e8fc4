// Helpers shared by the core tests: the sanitizer switch and raw-bit views of float/double.
#pragma once

#include <bit>

#include <minifloat/round.hpp>

namespace test_support {

/// Under the ASan/UBSan preset long sweeps take a stride so the run stays short.
#if MINIFLOAT_TEST_SANITIZE
inline constexpr bool sanitize = true;
#else
inline constexpr bool sanitize = false;
#endif

template <class S>
using bits_of = typename minifloat::source_layout<S>::bits;

template <class S>
bits_of<S> to_bits(S x) {
  return std::bit_cast<bits_of<S>>(x);
}

}  // namespace test_support
