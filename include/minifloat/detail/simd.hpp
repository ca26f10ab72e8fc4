// minifloat/detail/simd.hpp — SIMD registers for the bulk kernels, through the GCC/Clang vector
// extensions, so the rounding core compiles unchanged for whatever vector ISA the including
// program enables: 64-byte registers with AVX-512, 32 with AVX, 16 (SSE2, the x86-64 baseline)
// otherwise. Matching the enabled ISA keeps every register in hardware and the calling
// convention of these inline helpers unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#endif
#include <cmath>

namespace minifloat::detail {

#if defined(__AVX512F__)
inline constexpr std::size_t simd_bytes = 64;
#elif defined(__AVX__)
inline constexpr std::size_t simd_bytes = 32;
#else
inline constexpr std::size_t simd_bytes = 16;
#endif

/// `Bytes` bytes of unsigned lanes of type B.
template <class B, std::size_t Bytes>
struct vector_of;
template <std::size_t Bytes>
struct vector_of<std::uint32_t, Bytes> {
  typedef std::uint32_t type __attribute__((vector_size(Bytes)));
};
template <std::size_t Bytes>
struct vector_of<std::uint64_t, Bytes> {
  typedef std::uint64_t type __attribute__((vector_size(Bytes)));
};
template <std::size_t Bytes>
struct vector_of<std::uint8_t, Bytes> {
  typedef std::uint8_t type __attribute__((vector_size(Bytes)));
};
template <std::size_t Bytes>
struct vector_of<std::uint16_t, Bytes> {
  typedef std::uint16_t type __attribute__((vector_size(Bytes)));
};
template <std::size_t Bytes>
struct vector_of<float, Bytes> {
  typedef float type __attribute__((vector_size(Bytes)));
};
template <std::size_t Bytes>
struct vector_of<double, Bytes> {
  typedef double type __attribute__((vector_size(Bytes)));
};

/// A register of lanes of type B, and as many lanes of type H.
template <class B>
using simd_t = typename vector_of<B, simd_bytes>::type;
template <class B>
inline constexpr std::size_t simd_lanes = simd_bytes / sizeof(B);
template <class H, class B>
using simd_with_lanes_of = typename vector_of<H, simd_lanes<B> * sizeof(H)>::type;

/// Lanes of V converted to the floating type of the same width, returned as that type's bits
/// (exact for the small integers the codec converts).
template <class V>
inline V integer_to_float_bits(V v) {
  using B = std::remove_cvref_t<decltype(v[0])>;
  using F = typename vector_of<std::conditional_t<sizeof(B) == 4, float, double>, sizeof(V)>::type;
  const F f = __builtin_convertvector(v, F);
  V out;
  std::memcpy(&out, &f, sizeof(V));
  return out;
}

/// 0, 1, 2, … in the lanes of V.
template <class V>
inline V lane_indices() {
  V v{};
  for (std::size_t i = 0; i < sizeof(V) / sizeof(v[0]); ++i) v[i] = static_cast<std::remove_cvref_t<decltype(v[0])>>(i);
  return v;
}

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

/// How far ahead of a streaming loop's position its input and output are requested: one 4 KiB
/// page. With the hardware prefetcher alone, large quantize calls stayed below memcpy's speed
/// (most for stochastic rounding, whose AES chain delays the loads so the prefetcher falls
/// behind); requesting the input line, and the output line for writing, a page ahead brought them
/// to memcpy's speed; in cache it costs nothing measurable.
inline constexpr std::size_t prefetch_ahead_bytes = 4096;

/// Requests the cache lines of p[first, first + count) that lie inside the array's n elements
/// (none past its end), for reading or, for an output, for writing (prefetchw: the line arrives
/// owned, so the store that reaches it later does not wait for it).
template <bool ForWriting = false, class T>
[[gnu::always_inline]] inline void prefetch_range(const T* p, std::size_t first, std::size_t count, std::size_t n) {
  constexpr std::size_t per_line = 64 / sizeof(T);
  const std::size_t end = first + count < n ? first + count : n;
  for (std::size_t k = first; k < end; k += per_line) __builtin_prefetch(p + k, ForWriting ? 1 : 0, 3);
}
/// Both arrays of an elementwise loop over n elements at position i (i < n): the line of each
/// that lies prefetch_ahead_bytes ahead, for reading the input and writing the output. Near the
/// end the address is clamped to the last element instead of skipped, which keeps a branch out of
/// the loop: skipping measured 10-20 % slower in cache.
template <class T, class U>
[[gnu::always_inline]] inline void prefetch_stream(const T* in, const U* out, std::size_t i, std::size_t n) {
  constexpr std::size_t in_ahead = prefetch_ahead_bytes / sizeof(T), out_ahead = prefetch_ahead_bytes / sizeof(U);
  __builtin_prefetch(in + (i + in_ahead < n ? i + in_ahead : n - 1), 0, 3);
  __builtin_prefetch(out + (i + out_ahead < n ? i + out_ahead : n - 1), 1, 3);
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

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
/// The mask of all 16 lanes, for the zero-masked intrinsics (GCC 12's unmasked forms start from
/// _mm512_undefined_ps(), which -Wmaybe-uninitialized reports). A typed constant: at -O0 the
/// embedded-rounding intrinsics are macros, and a literal 0xffff passed through them draws
/// -Woverflow.
inline constexpr __mmask16 all_lanes16 = 0xffff;
#endif

/// True when any lane of v is at least t (unsigned): on 64-byte registers of 32-bit lanes one
/// compare into a mask register (GCC turns the generic form's compare into a vector of -1/0 and
/// tests that again).
template <class V, class B>
[[gnu::always_inline]] inline bool any_lane_at_least(const V& v, B t) {
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64 && sizeof(v[0]) == 4) {
    __m512i w;
    std::memcpy(&w, &v, 64);
    return _mm512_cmpge_epu32_mask(w, _mm512_set1_epi32(static_cast<int>(t))) != 0;
  }
#endif
  return any_lane(v >= t);
}

/// out[i] = the correctly rounded square root of in[i] (IEEE 754 sqrt), i < n. The same bits as
/// std::sqrt, but through the vector instruction: under the default -fmath-errno GCC keeps
/// std::sqrt's errno branch in loops and does not vectorise them.
inline void sqrt_floats(const float* in, float* out, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_maskz_sqrt_ps(all_lanes16, _mm512_loadu_ps(in + i)));
  // The last n - i < 16 lanes masked, not a scalar loop: inlined into a tile step of constant size,
  // GCC 12 warned of that loop's undefined behaviour at an iteration it never reaches.
  if (i < n) {
    const auto tail = static_cast<__mmask16>((1U << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, tail, _mm512_maskz_sqrt_ps(tail, _mm512_maskz_loadu_ps(tail, in + i)));
  }
#elif (defined(__AVX__) || defined(__SSE2__)) && !defined(__CUDA_ARCH__)
#if defined(__AVX__)
  constexpr std::size_t lanes = 8;
  const auto sqrt_lanes = [](const float* from, float* to) {
    _mm256_storeu_ps(to, _mm256_sqrt_ps(_mm256_loadu_ps(from)));
  };
#else
  constexpr std::size_t lanes = 4;
  const auto sqrt_lanes = [](const float* from, float* to) { _mm_storeu_ps(to, _mm_sqrt_ps(_mm_loadu_ps(from))); };
#endif
  for (; i + lanes <= n; i += lanes) sqrt_lanes(in + i, out + i);
  // The last n - i < lanes values as one more vector through a zero-padded copy, not a scalar loop
  // (the same GCC 12 warning as above; AVX and SSE2 have no masked sqrt).
  if (i < n) {
    float padded[lanes] = {};
    std::memcpy(padded, in + i, (n - i) * sizeof(float));
    sqrt_lanes(padded, padded);
    std::memcpy(out + i, padded, (n - i) * sizeof(float));
  }
#else
  for (; i < n; ++i) out[i] = std::sqrt(in[i]);
#endif
}

/// Sum of the lanes, widened.
template <class V>
inline std::uint64_t sum_lanes(const V& v) {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < sizeof(V) / sizeof(v[0]); ++i) total += v[i];
  return total;
}

}  // namespace minifloat::detail
