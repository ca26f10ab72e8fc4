// minifloat/backends/stochastic_float.hpp — the stochastic float backend: stochastic rounding
// from float on AVX-512 in float arithmetic (a scaling by the lane's step, an exact fraction, a
// fused multiply-add), instead of the core's integer steps.
//
// Why it gives the core's bits: every intermediate is exact (powers-of-two scalings, an exact
// integer part and fraction, an exact fused product; details at stochastic_float_rounding), so
// the fraction it compares with the random word is the core's fixed-point fraction of the
// dropped bits, and the decision is the core's own (round.hpp's stochastic_rounds_away: the same
// threshold). It serves only the plans stochastic_float_applies accepts, and only finite
// registers. tests/test_bulk.cpp compares its decisions and results with the core, and the suite
// passes with it and with the reference core forced (backend.hpp).
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>

#include "../detail/simd.hpp"
#include "../round.hpp"
#include "float_arithmetic.hpp"

namespace minifloat::detail {

/// True when S and V have stochastic_float_rounding (float, 64-byte registers, AVX-512).
template <std::floating_point S, class V>
inline constexpr bool has_stochastic_float = std::same_as<S, float> && float_add_form<V>;

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
/// -log2 of the format's subnormal spacing q = 2^(emin - m), i.e. m - emin, from the plan's fields.
inline int minus_log2_subnormal_step(const rounding_plan<float>& p) {
  return 150 - static_cast<int>(p.d_normal) - static_cast<int>(p.emin_field);  // (23 - d) - (field - 127)
}

/// The plans stochastic_float_rounding serves: a mantissa bit (the plain path's condition),
/// subnormals kept (no flushing of either kind), not fnuz or E8M0, and a subnormal spacing
/// q = 2^(emin - m) with 2^-94 <= q <= 1 (see below).
inline bool stochastic_float_applies(const rounding_plan<float>& p) {
  const int k = minus_log2_subnormal_step(p);
  return p.plain_path && p.keeps_signed_grid() && k >= 0 && k <= 94;
}

/// Stochastic rounding of a register of finite floats (lane_path::finite's bits) in float
/// arithmetic, every lane on the grid of its binade: the step is q = 2^(e - m) for a lane in
/// binade e at or above the format's smallest normal, and the subnormal spacing 2^(emin - m) below
/// it. t = |x| / q is exact (a power-of-two scaling, t < 2^(m+1)), its integer part n = trunc(t)
/// and fraction f = t - n are exact, floor(f * 2^32) is the core's fixed-point fraction (the
/// dropped bits aligned to the top of a 32-bit word), n * q = |x| - f * q and n * q + q are exact
/// (n + 1 <= 2^(m+1)); a result beyond max becomes the overflow result, and a sum that reaches
/// 2^128 is Inf, beyond max as well. q and 1/q are normal floats: q >= 2^-94 and m >= 1 (the
/// plain path's condition). With q >= 2^-94 every float subnormal input has t < 2^-32, so its
/// fraction is 0 and it rounds to ±0 with or without DAZ; no other intermediate or result is a
/// float subnormal, so FTZ changes nothing either.
/// tests/test_bulk.cpp checks it against the core.
/// The first half of stochastic_float_rounding (below), for the magnitudes `a` (finite) of a
/// register: each lane's step q, the fraction f of |x| / q, and the lanes that round away from
/// zero (before any saturation).
struct stochastic_float_decision {
  __m512 q, f;
  __mmask16 up;
};
[[gnu::always_inline]] inline stochastic_float_decision stochastic_float_decide(const rounding_plan<float>& p,
                                                                                simd_t<std::uint32_t> a,
                                                                                simd_t<std::uint32_t> random) {
  using V = simd_t<std::uint32_t>;
  // q's bits: the lane's exponent field, at least the smallest normal's, less the m mantissa bits.
  const V q_bits = lane_max(a & 0x7f800000U, V{} + p.smallest_normal_bits()) - ((23U - p.d_normal) << 23);
  const V over_q_bits = (254U << 23) - q_bits;  // 1/q
  __m512i av, qv, oqv;
  std::memcpy(&av, &a, 64);
  std::memcpy(&qv, &q_bits, 64);
  std::memcpy(&oqv, &over_q_bits, 64);
  const __m512 t = _mm512_mul_ps(_mm512_castsi512_ps(av), _mm512_castsi512_ps(oqv));
  // f = t - trunc(t), exact: in one vreduceps where AVX512DQ has it, else trunc by AVX512F's
  // vrndscaleps and a subtraction (the same bits; zero-masked: see float_add_rounding).
#if defined(__AVX512DQ__)
  const __m512 f = _mm512_maskz_reduce_round_ps(all_lanes16, t, _MM_FROUND_TO_ZERO, _MM_FROUND_NO_EXC);
#else
  const __m512 f = _mm512_sub_ps(t, _mm512_maskz_roundscale_ps(all_lanes16, t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC));
#endif
  const __m512i fraction = _mm512_maskz_cvttps_epu32(all_lanes16, _mm512_mul_ps(f, _mm512_set1_ps(0x1p32f)));
  // stochastic_rounds_away (round.hpp) straight into a mask register: its generic form compiles
  // to the same compare followed by a vpmovm2d and a vptestmd.
  const __m512i low = _mm512_set1_epi32(static_cast<int>(~p.random_mask));
  return {_mm512_castsi512_ps(qv), f, _mm512_cmplt_epu32_mask(_mm512_or_si512(std::bit_cast<__m512i>(random), low), fraction)};
}

/// Shape: what the caller knows of the plan's overflow result (float_add_shape; the plans this
/// form serves neither flush nor have an unsigned zero): saturating or not, else tested here.
template <float_add_shape Shape = float_add_shape::any>
[[gnu::always_inline]] inline simd_t<std::uint32_t> stochastic_float_rounding(const rounding_plan<float>& p,
                                                                              simd_t<std::uint32_t> u,
                                                                              simd_t<std::uint32_t> random) {
  using V = simd_t<std::uint32_t>;
  const V a = u & 0x7fffffffU;
  const stochastic_float_decision d = stochastic_float_decide(p, a, random);
  __m512i av;
  std::memcpy(&av, &a, 64);
  // n * q = |x| - f * q, exact, in one fused multiply-add.
  const __m512 down = _mm512_maskz_fnmadd_ps(all_lanes16, d.f, d.q, _mm512_castsi512_ps(av));
  const __m512 magnitude = _mm512_mask_add_ps(down, d.up, down, d.q);
  V result;
  std::memcpy(&result, &magnitude, 64);
  const bool saturates = Shape == float_add_shape::any ? p.saturates() : Shape == float_add_shape::saturating;
  if (saturates) result = lane_min(result, V{} + p.max_bits);
  else result = select(result > p.max_bits, V{} + p.overflow_bits, result);
  return with_sign_of(result, u);
}
#endif

}  // namespace minifloat::detail
