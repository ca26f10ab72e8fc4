// minifloat/storage/pair_forms/scaled_binary16.hpp — pair_form::scaled_binary16: split
// storage's pairs of 8-bit visible codes and 8-bit extra fields (extra-mantissa-bits paper
// §3.1) that are binary16 codes once scaled, through the processor's binary16 conversions
// (AVX-512 with BW, DQ and VL).
//
// Applies where R = fp(E, 10, bias) has binary16's 10 mantissa bits and an exponent field that
// binary16 reads the same way (E <= 4, or E = 5 with ieee's specials, which binary16 shares):
// e4m3 + 8 and fp(4, 3, b) + 8 stochastic, e5m2 + 8 truncating (scaled_binary16_layout). Why it
// gives the core's bits: R's values times s = 2^(bias - 15) are binary16 values with the same
// exponent field and the same code bits below the sign, R's subnormals included. So R's code of
// x toward zero is vcvtps2ph(x * s) toward zero (x first limited to the largest pair value, with
// its sign; x * s is exact, and where it is a float subnormal, so that DAZ or FTZ may zero it,
// the result is 0 either way), and a code's value is vcvtph2ps(code) / s. The code's sign is
// binary16's bit 15, h's magnitude its next 7 bits below any zero bit 14 (E = 4), the extra field
// its low n bits: a stochastic split adds one code to h and sets the field's flag where it rounds
// away from zero, and a stochastic field sign-extended from its byte subtracts that code again on
// restore. Registers with a NaN or Inf lane in x, or a restored code at or above Inf's or the NaN
// code's first pair (a flagged zero h too), take the rebiased form (rebiased.hpp). Tests: every
// pair restored, floats of every class split, with DAZ and FTZ set (tests/storage/test_split.cpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../split_layout.hpp"
#include "lanes.hpp"
#include "rebiased.hpp"

namespace minifloat::storage::detail {

/// Whether a layout's pairs are binary16 codes once scaled (pair_form::scaled_binary16's
/// conditions, the instructions aside).
constexpr bool scaled_binary16_layout(const split_layout& l) {
  const format r = l.restored();
  return l.visible_bits() == 8 && l.extra_bits == 8 && r.mantissa_bits == 10 && rebiased_floats(l) &&
         (r.exponent_bits <= 4 || (r.exponent_bits == 5 && r.encoding == specials::ieee));
}

#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && !defined(__CUDA_ARCH__)
/// pair_form::scaled_binary16's split and restore of 16 pairs, for a layout that
/// scaled_binary16_layout accepts: n = 8 truncating (E = 5) or 7 stochastic (E = 4).
class scaled_binary16_pairs {
 public:
  explicit scaled_binary16_pairs(const split_layout& l)
      : scale_(_mm512_set1_ps(std::ldexp(1.0f, l.visible.exponent_bias - 15))),
        inverse_scale_(_mm512_set1_ps(std::ldexp(1.0f, 15 - l.visible.exponent_bias))),
        limit_(_mm512_set1_ps(largest_pair_value(l))),
        first_special_(_mm256_set1_epi16(static_cast<short>(std::min<std::uint32_t>(first_special_code(l), 0xFFFFU)))),
        flag_step_(_mm256_set1_epi16(0x180)),
        stochastic_(l.mode == split_mode::stochastic) {}

  /// Stores the fields of the 16 finite floats x at vbytes and ebytes; `up`: the lanes a
  /// stochastic split rounds away from zero (none for a truncating one).
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void split(__m512 x, __mmask16 up, unsigned char* vbytes, unsigned char* ebytes) const {
    namespace core = minifloat::detail;
    // vrangeps 0b0010: the smaller magnitude, with the sign of the first operand.
    const __m512 limited = _mm512_maskz_range_ps(core::all_lanes16, x, limit_, 0b0010);
    // sign << 15 | R's magnitude code: for E = 4, h's 7 magnitude bits (13..7), then the next n
    __m256i code = _mm512_maskz_cvtps_ph(core::all_lanes16, _mm512_mul_ps(limited, scale_), _MM_FROUND_TO_ZERO);
    if (stochastic_) {
      // h's magnitude one bit up (bit 14 is zero), so that each 16-bit lane is h << 8 | e; a lane
      // that rounds away from zero adds one code to h and sets the field's flag (bit 7).
      code = _mm256_add_epi16(code, _mm256_and_si256(code, _mm256_set1_epi16(0x3F80)));
      code = _mm256_mask_add_epi16(code, up, code, flag_step_);
    }
    // Each 128-bit half's low bytes (e) to its first 8 bytes and high bytes (h) to its last 8,
    // then the halves' e bytes together (low 128 bits) and their h bytes (high 128 bits).
    const __m256i apart = _mm256_shuffle_epi8(
        code, _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5,
                               7, 9, 11, 13, 15));
    const __m256i fields = _mm256_permute4x64_epi64(apart, 0b11011000);
    const __m128i e = _mm256_castsi256_si128(fields), h = _mm256_extracti128_si256(fields, 1);
    std::memcpy(ebytes, &e, sizeof e);
    std::memcpy(vbytes, &h, sizeof h);
  }

  /// Stores R's values of the 16 pairs at vbytes and ebytes; false, storing nothing, where a
  /// restored code is Inf's or NaN's or above (first_special_code), or negative (a flagged zero h).
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  bool restore(const unsigned char* vbytes, const unsigned char* ebytes, float* out) const {
    namespace core = minifloat::detail;
    __m128i h_bytes, e_bytes;
    std::memcpy(&h_bytes, vbytes, sizeof h_bytes);
    std::memcpy(&e_bytes, ebytes, sizeof e_bytes);
    const __m256i h = _mm256_cvtepu8_epi16(h_bytes);
    __m256i magnitude;
    if (stochastic_) {
      // The field sign-extended from its byte: the flag (bit 7) subtracts 2^7 codes of R, one of h.
      magnitude = _mm256_add_epi16(_mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7F)), 7),
                                   _mm256_cvtepi8_epi16(e_bytes));
    } else {
      magnitude = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7F)), 8),
                                  _mm256_cvtepu8_epi16(e_bytes));
    }
    if (_mm256_cmpge_epu16_mask(magnitude, first_special_) != 0) return false;
    // 0xE4: c ? a : b, bitwise: h's sign bit (moved to bit 15) over the magnitude.
    const __m256i code = _mm256_ternarylogic_epi32(_mm256_slli_epi16(h, 8), magnitude,
                                                   _mm256_set1_epi16(static_cast<short>(0x8000)), 0xE4);
    const __m512 value = _mm512_mul_ps(_mm512_maskz_cvtph_ps(core::all_lanes16, code), inverse_scale_);
    std::memcpy(out, &value, sizeof value);
    return true;
  }

 private:
  // Broadcast once: GCC otherwise broadcast the scales from a scalar register every register.
  __m512 scale_, inverse_scale_, limit_;
  __m256i first_special_;  ///< first_special_code in every 16-bit lane (all_finite E = 4: 2^14)
  __m256i flag_step_;      ///< a stochastic split's h one code up and its flag, in the lanes h << 8 | e
  bool stochastic_;
};
#endif

}  // namespace minifloat::storage::detail
