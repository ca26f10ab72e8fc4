// minifloat/detail/simd.hpp — SIMD registers for the bulk kernels, through the GCC/Clang vector
// extensions, so the rounding core compiles unchanged for 64-byte vectors on any target ISA
// (AVX-512, AVX2 or SSE code is chosen by the compiler flags of the including program).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace minifloat::detail {

/// 64 bytes of unsigned lanes of type B.
template <class B>
struct simd;
template <>
struct simd<std::uint32_t> {
  using type = std::uint32_t __attribute__((vector_size(64)));
  static constexpr type iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
};
template <>
struct simd<std::uint64_t> {
  using type = std::uint64_t __attribute__((vector_size(64)));
  static constexpr type iota = {0, 1, 2, 3, 4, 5, 6, 7};
};
template <class B>
using simd_t = typename simd<B>::type;
template <class B>
inline constexpr std::size_t simd_lanes = 64 / sizeof(B);

template <class V, class T>
inline V load_lanes(const T* p, std::size_t count = sizeof(V) / sizeof(T)) {
  V v{};
  std::memcpy(&v, p, count * sizeof(T));
  return v;
}
template <class V, class T>
inline void store_lanes(T* p, const V& v, std::size_t count = sizeof(V) / sizeof(T)) {
  std::memcpy(p, &v, count * sizeof(T));
}

/// True when any lane of v is nonzero.
template <class V>
[[gnu::always_inline]] inline bool any_lane(const V& v) {
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64) {  // one test into a mask register instead of a reduction tree
    __m512i w;
    std::memcpy(&w, &v, 64);
    return _mm512_test_epi64_mask(w, w) != 0;
  }
#endif
  std::uint64_t words[sizeof(V) / 8];
  std::memcpy(words, &v, sizeof(V));
  std::uint64_t acc = 0;
  for (std::uint64_t w : words) acc |= w;
  return acc != 0;
}

/// Sum of the lanes, widened.
template <class V>
inline std::uint64_t sum_lanes(const V& v) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < sizeof(V) / sizeof(v[0]); ++i) total += v[i];
  return total;
}

}  // namespace minifloat::detail
