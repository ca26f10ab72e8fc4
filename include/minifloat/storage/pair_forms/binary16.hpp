// minifloat/storage/pair_forms/binary16.hpp — pair_form::hardware_binary16: split storage's
// binary16 + 8 pairs (extra-mantissa-bits paper §3.1) through the processor's conversions
// between float and binary16 (AVX-512 with BW, DQ and VL).
//
// Applies to a binary16 visible format with 8-bit extra fields, so n = 8 truncating or 7
// stochastic, R = fp(5, 10 + n, 15). The conversions, whose results are exact, take a register
// whose lanes allow them; the rebiased form (rebiased.hpp; binary16's pairs meet its conditions)
// takes the others. Why it gives the core's bits:
//  - Split: where every lane is zero or in binary16's normal binades below the top one,
//    vcvtps2ph toward zero is h (the truncation), the float's next n mantissa bits are the extra
//    field (float's binades are binary16's there, each a multiple of ulp(h) / 2^n apart), and a
//    stochastic h is the next code up.
//  - Restore: h's float f = vcvtph2ps(h) (exact; the instruction ignores DAZ), then for
//    |h| >= 2^-13 R's value is f's bits plus e << (13 - n) (e sign-extended from its byte for a
//    stochastic layout: its flag bit 7 then subtracts 2^13, one step of h, which moves across
//    binades as float bits do), and below that, in binary16's subnormals and first normal binade
//    where R's step is 2^-(24 + n) throughout, sign(h) * (|f| + e * 2^-(24 + n)) (exact in one
//    fused multiply-add). Registers with NaN or Inf h, or a flagged zero h (not a split's pair),
//    take the rebiased form.
// Tests: every pair restored, floats of every class split, runs of normal-range weights that fill
// whole registers, with DAZ and FTZ set (tests/storage/test_split.cpp).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../split_layout.hpp"
#include "lanes.hpp"

namespace minifloat::storage::detail {

/// Whether a layout's pairs are binary16 + 8 (pair_form::hardware_binary16's condition, the
/// instructions aside).
constexpr bool binary16_byte_layout(const split_layout& l) { return l.visible == binary16 && l.extra_bits == 8; }

#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) && !defined(__CUDA_ARCH__)
/// pair_form::hardware_binary16's split and restore of 16 pairs, for a binary16_byte_layout.
class binary16_pairs {
 public:
  explicit binary16_pairs(const split_layout& l)
      : kept_(l.kept_bits()),
        stochastic_(l.mode == split_mode::stochastic),
        small_step_(std::ldexp(1.0f, -24 - l.kept_bits())),
        binary16_field_shift_(_mm512_set1_epi32(13 - l.kept_bits())),
        kept_mask_lanes_(_mm512_set1_epi32(static_cast<int>(low_bits(l.kept_bits())))),
        field_flag_lanes_(_mm512_set1_epi32(1 << l.kept_bits())),
        minus_one16_(_mm256_set1_epi16(-1)) {}

  /// Stores the fields of the 16 floats u, each zero or in binary16's normal binades below the
  /// top one (the caller tests that), at vbytes and ebytes; `up`: the lanes a stochastic split
  /// rounds away from zero (none for a truncating one).
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void split(field_lanes u, __mmask16 up, unsigned char* vbytes, unsigned char* ebytes) const {
    const __m512i x = std::bit_cast<__m512i>(u);
    __m256i h =
        _mm512_maskz_cvtps_ph(minifloat::detail::all_lanes16, std::bit_cast<__m512>(u), _MM_FROUND_TO_ZERO);
    // The next n bits below h's last one; the byte store drops the bits above.
    __m512i e = _mm512_maskz_srlv_epi32(minifloat::detail::all_lanes16, x, binary16_field_shift_);
    if (stochastic_) {
      // A flag: h one code up, the field's bit 7 set (its low 7 bits are the float's).
      h = _mm256_mask_sub_epi16(h, up, h, minus_one16_);
      e = _mm512_and_si512(e, kept_mask_lanes_);
      e = _mm512_mask_or_epi32(e, up, e, field_flag_lanes_);
    }
    std::memcpy(vbytes, &h, sizeof h);
    const __m128i e_bytes = _mm512_maskz_cvtepi32_epi8(minifloat::detail::all_lanes16, e);
    std::memcpy(ebytes, &e_bytes, sizeof e_bytes);
  }

  /// Stores R's values of the 16 pairs (binary16 codes at vbytes, extra bytes at ebytes) at out;
  /// false, storing nothing, where an h is NaN or Inf or a flagged zero.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  bool restore(const unsigned char* vbytes, const unsigned char* ebytes, float* out) const {
    namespace core = minifloat::detail;
    __m256i h;
    std::memcpy(&h, vbytes, sizeof h);
    const __m512 f = _mm512_maskz_cvtph_ps(core::all_lanes16, h);
    // A stochastic field's flag (bit 7) counts -2^7 steps of R: one step of h down.
    const __m512i e = std::bit_cast<__m512i>(stochastic_ ? load_fields<std::uint8_t, true>(ebytes, field_lane_count)
                                                         : load_fields<std::uint8_t>(ebytes, field_lane_count));
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000U));
    const __m512i f_bits = _mm512_castps_si512(f);
    const __m512 magnitude = _mm512_castsi512_ps(_mm512_maskz_andnot_epi32(core::all_lanes16, sign, f_bits));
    // |h| < 2^-13 (exponent field 0 or 1): sign(h) * (|f| + e * step); NaN or Inf h gives NaN or
    // +Inf here, a flagged zero h a negative magnitude, and those registers take the rebiased form.
    const __m512 small_magnitude =
        _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(core::all_lanes16, e), _mm512_set1_ps(small_step_), magnitude);
    if (_mm512_fpclass_ps_mask(small_magnitude, not_a_magnitude) != 0) return false;
    const __m512i normal =
        _mm512_add_epi32(f_bits, _mm512_maskz_sllv_epi32(core::all_lanes16, e, _mm512_set1_epi32(13 - kept_)));
    const __mmask16 small = _mm256_testn_epi16_mask(h, _mm256_set1_epi16(0x7800));
    const __m512i value =
        _mm512_mask_or_epi32(normal, small, _mm512_castps_si512(small_magnitude), _mm512_and_si512(f_bits, sign));
    std::memcpy(out, &value, sizeof value);
    return true;
  }
  /// vfpclassps categories that are not the magnitude of a pair value: QNaN, SNaN, +Inf, negative.
  static constexpr int not_a_magnitude = 0x01 | 0x80 | 0x08 | 0x40;

 private:
  int kept_;
  bool stochastic_;
  float small_step_;  ///< R's step below 2^-13: 2^-(24 + n)
  // Constants as registers made once: GCC rebuilt them every register where they were written in the loop.
  __m512i binary16_field_shift_;  ///< 13 - n: the extra field from the float's bits
  __m512i kept_mask_lanes_;       ///< the low n bits: a stochastic field below its flag
  __m512i field_flag_lanes_;      ///< 1 << n: a stochastic field's flag
  __m256i minus_one16_;           ///< -1 in every 16-bit lane: h one code up
};
#endif

}  // namespace minifloat::storage::detail
