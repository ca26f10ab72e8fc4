// minifloat/backends/register_paths.hpp — one register of source bits rounded by the plan's
// backend: the core's lane kernels (round.hpp's round_bits on its single-binade, finite or full
// path, whichever the register's lanes allow) or, where the plan chose one, a float form
// (float_arithmetic.hpp, stochastic_float.hpp). The loops of bulk.hpp, block.hpp and split
// storage round their registers through here.
//
// Which path a register takes changes only the speed, never the bits: each lane_path gives
// round_bits' bits for the inputs it admits, and each float form gives the core's bits (see their
// headers).
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../detail/simd.hpp"
#include "../round.hpp"
#include "float_arithmetic.hpp"
#include "lane_counts.hpp"
#include "stochastic_float.hpp"

namespace minifloat::detail {

/// True when every lane of the register of source bits shifted left once (`twice`) is zero or in
/// [low2, low2 + span2), bounds given the same way.
template <class V, class Bits>
[[gnu::always_inline]] inline bool zero_or_within(V twice, Bits low2, Bits span2) {
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  if constexpr (sizeof(V) == 64 && sizeof(Bits) == 4) {
    // Compares into mask registers: the generic form below compiles to a vector of -1/0 that is
    // turned back into a mask and tested again (3 more instructions per register).
    __m512i t;
    std::memcpy(&t, &twice, 64);
    const __mmask16 off =
        _mm512_mask_cmpge_epu32_mask(_mm512_test_epi32_mask(t, t), _mm512_sub_epi32(t, _mm512_set1_epi32(static_cast<int>(low2))),
                                     _mm512_set1_epi32(static_cast<int>(span2)));
    return off == 0;
  }
#endif
  return !any_lane((twice - low2 >= span2) & (twice != 0));
}

/// True when every lane of the register (given as u << 1) is zero or plain: between the smallest
/// normal and the overflow threshold, where nothing is counted (round_lanes' single-binade shortcut).
template <std::floating_point S, class V>
[[gnu::always_inline]] inline bool plain_register(const rounding_plan<S>& p, V twice) {
  using bits = typename source_layout<S>::bits;
  const bits normal2 = p.smallest_normal_bits() << 1;
  // Both evaluated (no short circuit): a branch on plain_path costs more than the second test in
  // the stochastic bf16 + 9 split step (the chunked path's encode).
  const bool within = zero_or_within(twice, normal2, static_cast<bits>((p.threshold_bits << 1) - normal2));
  return p.plain_path && within;
}

/// Rounds one register without NaN or Inf lanes (and counts it): by the float-arithmetic form
/// when `fa` is given (the caller checked float_add_applies(p) once per kernel) and the mode has
/// it, else by the core's finite path. Both give the same bits; the block kernels (block.hpp)
/// call this for blocks whose extremes rule out the single-binade shortcut.
template <rounding Mode, bool Count, float_add_shape Shape = float_add_shape::any, std::floating_point S, class V>
[[gnu::always_inline]] inline V round_finite_lanes(const rounding_plan<S>& p,
                                                   [[maybe_unused]] const std::type_identity_t<float_add_plan<V>>* fa,
                                                   V u, V random, [[maybe_unused]] lane_counts<V>& counts,
                                                   [[maybe_unused]] V valid) {
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  if constexpr (has_float_add<Mode, S, V>) {
    if (fa != nullptr) {
      const V result = float_add_rounding<Mode, Shape>(*fa, u);
      if constexpr (Count) counts.template add<true>(p, u, result, valid);
      return result;
    }
  }
#endif
  const V result = round_bits<Mode, lane_path::finite>(p, u, random);
  if constexpr (Count) counts.template add<true>(p, u, result, valid);
  return result;
}

/// Rounds one register (and counts it) on the cheapest path its lanes allow: the core's
/// single-binade shortcut, its full path without NaN/Inf handling (or, when `float_form` says the
/// plan's backend is a float form (register_float_form), that form), or its full path. The
/// single-binade test is skipped by the stochastic float form, which is exact on those lanes too
/// and cheaper than the test's unpredictable branch where registers mix (e4m3 on N(0,1)). Shape
/// (float_add_shape) is what the caller knows of the plan, for the float forms.
template <rounding Mode, bool Count, float_add_shape Shape = float_add_shape::any, std::floating_point S, class V>
[[gnu::always_inline]] inline V round_lanes(const rounding_plan<S>& p, V u, V random,
                                            [[maybe_unused]] lane_counts<V>& counts, [[maybe_unused]] V valid,
                                            [[maybe_unused]] bool float_form = false) {
  using src = source_layout<S>;
  constexpr bool stochastic_float = Mode == rounding::stochastic && has_stochastic_float<S, V>;
  if (!(stochastic_float && float_form) && plain_register(p, u << 1)) return round_bits<Mode, lane_path::plain>(p, u, random);
  // NaN and Inf lanes: the stochastic float form computes the magnitude anyway (one and, where
  // the shift of u << 1 costs more), the others have u << 1 from the test above.
  const bool special = stochastic_float ? any_lane_at_least(u & src::abs_mask, src::inf_bits)
                                                   : any_lane_at_least(u << 1, src::inf_bits << 1);
  if (special) {
    const V result = round_bits<Mode, lane_path::any>(p, u, random);
    if constexpr (Count) counts.template add<false>(p, u, result, valid);
    return result;
  }
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  if constexpr (Mode == rounding::stochastic && has_stochastic_float<S, V>) {
    if (float_form) {
      const V result = stochastic_float_rounding<Shape>(p, u, random);
      if constexpr (Count) counts.template add<true>(p, u, result, valid);
      return result;
    }
  }
#endif
  if constexpr (has_float_add<Mode, S, V>) {
    if (float_form) {
      const float_add_plan<V> fa(p);
      return round_finite_lanes<Mode, Count, Shape>(p, &fa, u, random, counts, valid);
    }
  }
  return round_finite_lanes<Mode, Count>(p, nullptr, u, random, counts, valid);
}


}  // namespace minifloat::detail
