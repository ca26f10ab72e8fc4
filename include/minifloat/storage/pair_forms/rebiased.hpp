// minifloat/storage/pair_forms/rebiased.hpp — pair_form::rebiased: split storage's pairs
// (extra-mantissa-bits paper §3.1) whose restored values are zero or normal floats, computed by
// rebiasing float bits (AVX-512).
//
// Applies to visible formats with a sign, subnormals and an ieee, nan_only or all_finite
// encoding whose restored values R = fp(E, M', bias), M' = M + n, are all zero or normal floats
// (rebiased_floats): binary16, e4m3, e5m2, the papers' fp(e, m, b) with bias + M' <= 127.
// Why it gives the core's bits: R's normal codes are float bits with the exponent field
// rebiased, (bits - (127 - bias) * 2^23) >> (23 - M') (the shift truncates, so this is rounding
// toward zero), and R's subnormal codes count R's smallest step s = 2^(1 - bias - M'),
// trunc(|x| / s) (|x| / s exact, converted toward zero); |x| is first limited to the largest
// pair value, the sign goes above. A value of the visible format (a stochastic h) is a value of
// R, its code R's code shifted right by n. R's value of a code is the inverse: the rebiased bits,
// or the subnormal code times s (exact). No product or result is a float subnormal except
// |x| / s for a float subnormal x, which truncates to 0 whether or not DAZ or FTZ zero it first,
// so MXCSR does not change the bits. Registers with NaN or Inf lanes (in x, or among h's codes)
// take the core. Tests: every pair of binary16 + 8, e4m3 + 8, e5m2 + 8 and fp(6,9,0) + 8 restored,
// floats of every class split, with DAZ and FTZ set (tests/storage/test_split.cpp).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "../../round.hpp"
#include "../split_layout.hpp"
#include "lanes.hpp"

namespace minifloat::storage::detail {

/// Whether R's codes of a layout are rebiased floats (pair_form::rebiased's conditions).
constexpr bool rebiased_floats(const split_layout& l) {
  const format& v = l.visible;
  const format r = l.restored();
  const bool encoding = v.encoding == specials::ieee || v.encoding == specials::nan_only ||
                        v.encoding == specials::all_finite;
  return encoding && v.subnormals && r.emax() <= 127 && r.emin() - r.mantissa_bits >= -126;
}

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
/// The rebiased form's pieces (see the header's opening) on 16 lanes, for R = l.restored().
class rebiased_pairs {
 public:
  explicit rebiased_pairs(const split_layout& l)
      : fraction_shift_(23 - l.restored().mantissa_bits),
        sign_shift_(31 - (l.restored().exponent_bits + l.restored().mantissa_bits)),
        magnitude_mask_(low_bits(l.restored().exponent_bits + l.restored().mantissa_bits)),
        limit_bits_(std::bit_cast<std::uint32_t>(largest_pair_value(l))),
        rebias_(static_cast<std::uint32_t>(127 - l.visible.exponent_bias) << 23),
        min_normal_bits_(std::bit_cast<std::uint32_t>(std::ldexp(1.0f, l.restored().emin()))),
        first_normal_code_(std::uint32_t{1} << l.restored().mantissa_bits),
        first_special_(first_special_code(l)),
        step_(std::ldexp(1.0f, l.restored().emin() - l.restored().mantissa_bits)),
        inverse_step_(std::ldexp(1.0f, l.restored().mantissa_bits - l.restored().emin())) {}

  /// R's codes, toward zero, of the finite floats whose bits are u.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  field_lanes codes(field_lanes u) const {
    const field_lanes magnitude = minifloat::detail::lane_min(u & 0x7FFFFFFFU, field_lanes{} + limit_bits_);
    const __m512i normal = std::bit_cast<__m512i>((magnitude - rebias_) >> fraction_shift_);
    const __m512 a = std::bit_cast<__m512>(magnitude);
    const __mmask16 subnormal =
        _mm512_cmplt_epu32_mask(std::bit_cast<__m512i>(magnitude), _mm512_set1_epi32(static_cast<int>(min_normal_bits_)));
    const __m512i code = _mm512_mask_cvtt_roundps_epu32(normal, subnormal, _mm512_mul_ps(a, _mm512_set1_ps(inverse_step_)),
                                                        _MM_FROUND_NO_EXC);
    return std::bit_cast<field_lanes>(code) | ((u >> 31) << (31 - sign_shift_));
  }
  /// R's values (float bits) of the codes; false when one is NaN or Inf, or a code of R above
  /// the pairs of a nan_only format (first_special_code).
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  bool restore(field_lanes code, field_lanes& out) const {
    const field_lanes magnitude = code & magnitude_mask_;
    if (minifloat::detail::any_lane_at_least(magnitude, first_special_)) return false;
    const __m512i m = std::bit_cast<__m512i>(magnitude);
    const __mmask16 subnormal = _mm512_cmplt_epu32_mask(m, _mm512_set1_epi32(static_cast<int>(first_normal_code_)));
    const __m512 normal = std::bit_cast<__m512>((magnitude << fraction_shift_) + rebias_);
    const __m512 value =
        _mm512_mask_mul_ps(normal, subnormal, _mm512_maskz_cvtepi32_ps(minifloat::detail::all_lanes16, m), _mm512_set1_ps(step_));
    out = std::bit_cast<field_lanes>(value) | ((code << sign_shift_) & 0x80000000U);
    return true;
  }

 private:
  int fraction_shift_, sign_shift_;
  std::uint32_t magnitude_mask_, limit_bits_, rebias_, min_normal_bits_, first_normal_code_, first_special_;
  float step_, inverse_step_;
};
#endif

}  // namespace minifloat::storage::detail
