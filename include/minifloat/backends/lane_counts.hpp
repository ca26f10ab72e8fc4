// minifloat/backends/lane_counts.hpp — the counters of a bulk call (rounding_stats: overflows,
// underflows, NaNs, infinities), kept in SIMD lanes while the registers are rounded, whichever
// backend rounds them.
//
// A counter classifies a register's input and result bits exactly as the scalar core's count()
// does (round.hpp), so the backends share one definition of what is counted.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>

#include "../detail/simd.hpp"
#include "../round.hpp"
#include "../stats.hpp"

namespace minifloat::detail {

/// Counters of one kernel call, kept in SIMD lanes until the end.
template <class V>
struct lane_counts {
  V overflows{}, underflows{}, nans{}, infinities{};
  /// The finite AVX-512 form counts in general registers instead, from popcounts of its compare
  /// masks: the vector units are the loop's bottleneck, the scalar ones mostly idle.
  std::uint64_t mask_overflows = 0, mask_underflows = 0;
  /// When nonzero (a plan of first_nonzero_magnitude): the smallest input magnitude, as bits,
  /// whose result is nonzero, so the finite AVX-512 form counts underflows from the input alone
  /// with one compare.
  std::uint32_t first_nonzero = 0;
  /// Counts a register that took the full core; without NaN/Inf lanes (`Finite`) only
  /// overflows and underflows can occur.
  template <bool Finite, std::floating_point S>
  void add(const rounding_plan<S>& p, V u, V result, V valid) {
    using src = source_layout<S>;
    const V a = u & src::abs_mask;
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
    if constexpr (Finite && sizeof(V) == 64 && std::same_as<S, float>) {
      // Compares into mask registers and masked adds: 5 instructions where the generic form
      // below compiles to 8 (each compare widened to a vector of -1/0 and tested again).
      __m512i av, rv, vv;
      std::memcpy(&av, &a, 64);
      std::memcpy(&rv, &result, 64);
      std::memcpy(&vv, &valid, 64);
      const __mmask16 lanes = _mm512_test_epi32_mask(vv, vv);
      const __mmask16 over =
          _mm512_mask_cmpge_epu32_mask(lanes, av, _mm512_set1_epi32(static_cast<int>(p.threshold_bits)));
      // nonzero input, zero magnitude out: 1 <= |x| < first_nonzero when that is known
      const __mmask16 zeroed =
          first_nonzero != 0
              ? _mm512_mask_cmplt_epu32_mask(lanes, _mm512_sub_epi32(av, _mm512_set1_epi32(1)),
                                             _mm512_set1_epi32(static_cast<int>(first_nonzero - 1)))
              : _mm512_mask_testn_epi32_mask(_mm512_mask_test_epi32_mask(lanes, av, av), rv,
                                             _mm512_set1_epi32(0x7fffffff));
      mask_overflows += static_cast<unsigned>(std::popcount(static_cast<unsigned>(over)));
      mask_underflows += static_cast<unsigned>(std::popcount(static_cast<unsigned>(zeroed)));
      return;
    }
#endif
    // Comparison masks are all ones (-1) where true: subtracting them counts.
    overflows -= (a >= p.threshold_bits) & valid;
    if constexpr (Finite) {
      underflows -= (a != 0) & ((result & src::abs_mask) == 0) & valid;
    } else {
      underflows -= (a != 0) & (a < src::inf_bits) & ((result & src::abs_mask) == 0) & valid;
      nans -= (a > src::inf_bits) & valid;
      infinities -= (a == src::inf_bits) & valid;
    }
  }
  void merge(const lane_counts& o) {
    overflows += o.overflows;
    underflows += o.underflows;
    nans += o.nans;
    infinities += o.infinities;
    mask_overflows += o.mask_overflows;
    mask_underflows += o.mask_underflows;
  }
  void flush(rounding_stats& st, std::uint64_t values) const {
    st.values += values;
    st.overflows += sum_lanes(overflows) + mask_overflows;
    st.underflows += sum_lanes(underflows) + mask_underflows;
    st.nans += sum_lanes(nans);
    st.infinities += sum_lanes(infinities);
  }
};

/// For nearest-even, nearest-away and toward-zero from float: the smallest input magnitude (as
/// bits) that p rounds to a nonzero value, or 0 when the candidates below miss it. These modes
/// round magnitudes monotonically, so a candidate c is that boundary exactly when the core rounds
/// c to nonzero and c's predecessor to zero; the candidates are the smallest nonzero result v
/// (the smallest subnormal, or the smallest normal when results are flushed), v less half the
/// subnormal spacing, and its successor (ties), which covers every plan of these modes.
template <rounding Mode>
std::uint32_t first_nonzero_magnitude(const rounding_plan<float>& p) {
  static_assert(Mode == rounding::nearest_even || Mode == rounding::nearest_away || Mode == rounding::toward_zero);
  const auto nonzero = [&](std::uint32_t a) { return (round_bits<Mode, lane_path::any>(p, a, 0U) & 0x7fffffffU) != 0; };
  const std::uint32_t v = p.flush_below_bits != 0 ? p.flush_below_bits : p.denorm_min_bits;
  const float half_spacing = std::bit_cast<float>(p.denorm_min_bits) / 2;
  const std::uint32_t below = std::bit_cast<std::uint32_t>(std::bit_cast<float>(v) - half_spacing);
  for (const std::uint32_t c : {v, below, below + 1})
    if (c > 1 && nonzero(c) && !nonzero(c - 1)) return c;
  return 0;
}

}  // namespace minifloat::detail
