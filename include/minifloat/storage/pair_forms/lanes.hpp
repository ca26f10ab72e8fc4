// minifloat/storage/pair_forms/lanes.hpp — what the pair forms of split storage (split.hpp)
// share: the forms' names, and the byte-wide fields of a layout whose visible codes and extra
// fields are each 8 or 16 bits wide, loaded into and stored from SIMD registers of 32-bit lanes.
//
// A pair form is one way of computing, a register at a time, the core's split of floats into
// pairs (h, e) and the core's values of pairs (extra-mantissa-bits paper §3.1; docs/storage.md).
// Each is a backend of the split: split_plan chooses one per layout, once (pair_form_for), and
// tests/storage/test_split.cpp compares each with the scalar core bit for bit. The reference is
// pair_form::core, the core's lane kernels; every other form says in its header why it gives the
// same bits. Their register-level functions are forced inline only when the compiler optimises
// (split.hpp says why).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../detail/simd.hpp"
#include "../bitpack.hpp"

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
#include <immintrin.h>
#endif

namespace minifloat::storage::detail {

/// The ways of splitting and restoring a register of pairs (each form's header says when it
/// applies and why it gives the core's bits).
enum class pair_form : std::uint8_t {
  core,               ///< the core's lane kernels: round_lanes, code_lanes and value_lanes (the reference)
  float_prefix,       ///< bfloat16 visible: R's codes are float bits' prefixes (float_prefix.hpp)
  rebiased,           ///< R's codes are float bits with the exponent rebiased (rebiased.hpp)
  hardware_binary16,  ///< binary16 + 8: the processor's binary16 conversions (binary16.hpp)
  scaled_binary16,    ///< 8-bit codes + 8: binary16 codes once scaled (scaled_binary16.hpp)
};

/// Whether a form is the rebiased form or starts from it (its registers the others leave).
constexpr bool rebiased_based(pair_form f) {
  return f == pair_form::rebiased || f == pair_form::hardware_binary16 || f == pair_form::scaled_binary16;
}

/// As pack: the bits after the last of n byte-wide fields in its word are zero (no words for
/// no values).
template <class Visible, class Extra>
void clear_padding(unsigned char* vbytes, unsigned char* ebytes, std::size_t n) {
  if (n == 0) return;
  const std::size_t vend = packed_words(n, 8 * sizeof(Visible)) * 4, eend = packed_words(n, 8 * sizeof(Extra)) * 4;
  std::memset(vbytes + n * sizeof(Visible), 0, vend - n * sizeof(Visible));
  std::memset(ebytes + n * sizeof(Extra), 0, eend - n * sizeof(Extra));
}

// The byte-wide kernels are host code: in a CUDA translation unit nvcc's device pass
// (__CUDA_ARCH__) aborts on GCC vector code in functions that host functions use (as bulk.hpp's
// kernels note), so that pass does not see them, and split_into, reconstruct and
// rewrite_byte_fields take the other paths there; the host pass, which is what runs, has them.
#if !defined(__CUDA_ARCH__)
/// A register of 32-bit lanes, as the core's SIMD kernels use them.
using field_lanes = minifloat::detail::simd_t<std::uint32_t>;
inline constexpr std::size_t field_lane_count = minifloat::detail::simd_lanes<std::uint32_t>;

/// `count` (at most field_lane_count) byte-wide fields of type Field from `bytes`, widened to
/// 32-bit lanes (the rest zero): zero-extended, or with SignExtend sign-extended from the field's
/// width (two's complement bits).
template <class Field, bool SignExtend = false>
#if defined(__OPTIMIZE__)
[[gnu::always_inline]]
#endif
inline field_lanes load_fields(const unsigned char* bytes, std::size_t count) {
  using FV = minifloat::detail::simd_with_lanes_of<Field, std::uint32_t>;
  FV narrow{};
  std::memcpy(&narrow, bytes, count * sizeof(Field));
#if defined(__AVX512F__)
  if constexpr (sizeof(field_lanes) == 64) {
    // GCC widens bytes through general registers otherwise. The zero-masked forms with a full
    // mask: GCC 12's unmasked ones start from _mm512_undefined_epi32() (-Wmaybe-uninitialized).
    const __mmask16 all = minifloat::detail::all_lanes16;
    __m512i wide;
    if constexpr (sizeof(Field) == 1)
      wide = SignExtend ? _mm512_maskz_cvtepi8_epi32(all, std::bit_cast<__m128i>(narrow))
                        : _mm512_maskz_cvtepu8_epi32(all, std::bit_cast<__m128i>(narrow));
    else
      wide = SignExtend ? _mm512_maskz_cvtepi16_epi32(all, std::bit_cast<__m256i>(narrow))
                        : _mm512_maskz_cvtepu16_epi32(all, std::bit_cast<__m256i>(narrow));
    return std::bit_cast<field_lanes>(wide);
  }
#endif
  const field_lanes wide = __builtin_convertvector(narrow, field_lanes);
  if constexpr (!SignExtend) return wide;
  constexpr std::uint32_t top = std::uint32_t{1} << (8 * sizeof(Field) - 1);
  return (wide ^ top) - top;
}

/// The low bytes of `count` lanes stored as byte-wide fields of type Field.
template <class Field>
#if defined(__OPTIMIZE__)
[[gnu::always_inline]]
#endif
inline void store_fields(unsigned char* bytes, field_lanes codes, std::size_t count) {
#if defined(__AVX512F__)
  if constexpr (sizeof(field_lanes) == 64 && sizeof(Field) == 2) {
    const __m256i narrow = _mm512_maskz_cvtepi32_epi16(minifloat::detail::all_lanes16, std::bit_cast<__m512i>(codes));
    std::memcpy(bytes, &narrow, count * sizeof(Field));
    return;
  }
  if constexpr (sizeof(field_lanes) == 64 && sizeof(Field) == 1) {
    // vpmovdb: GCC 12 built the generic narrowing below from byte inserts in some loops.
    const __m128i narrow = _mm512_maskz_cvtepi32_epi8(minifloat::detail::all_lanes16, std::bit_cast<__m512i>(codes));
    std::memcpy(bytes, &narrow, count * sizeof(Field));
    return;
  }
#endif
  using FV = minifloat::detail::simd_with_lanes_of<Field, std::uint32_t>;
  const FV narrow = __builtin_convertvector(codes, FV);
  std::memcpy(bytes, &narrow, count * sizeof(Field));
}

#endif  // !defined(__CUDA_ARCH__)

}  // namespace minifloat::storage::detail
