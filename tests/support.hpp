// Helpers shared by the core tests: the sanitizer switch, raw-bit views of float/double, bitwise
// comparison of float vectors and seeded normal test data.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <minifloat/round.hpp>

namespace test_support {

/// Under the ASan/UBSan preset long sweeps take a stride so the run stays short.
#if MINIFLOAT_TEST_SANITIZE
inline constexpr bool sanitize = true;
#else
inline constexpr bool sanitize = false;
#endif

/// Exhaustive sweeps visit every bit pattern, or every 61st under the sanitizer.
inline constexpr std::uint64_t exhaustive_stride = sanitize ? 61 : 1;

template <class S>
using bits_of = typename minifloat::source_layout<S>::bits;

template <class S>
bits_of<S> to_bits(S x) {
  return std::bit_cast<bits_of<S>>(x);
}

/// The number of oracle mismatches of a sweep and the first few, for the failure message.
struct mismatch_log {
  std::uint64_t count = 0;
  std::string first;
  void add(std::uint32_t u, std::uint32_t got, std::uint32_t want) {
    if (count++ < 8) {
      std::ostringstream s;
      s << std::hex << "\n  input 0x" << u << ": minifloat 0x" << got << ", oracle 0x" << want;
      first += s.str();
    }
  }
};

/// Whether a and b hold the same float bit patterns (NaN payloads and the sign of zero count).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

/// n draws of N(0, scale^2) from a generator seeded with `seed` (the same values on every run).
inline std::vector<float> normal_floats(std::size_t n, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace test_support
