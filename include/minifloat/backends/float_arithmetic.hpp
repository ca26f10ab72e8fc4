// minifloat/backends/float_arithmetic.hpp — the float-arithmetic backend: nearest-even,
// nearest-away and toward-zero rounding from float on AVX-512 by one float addition and one
// subtraction per register, (x + C) - C, instead of the core's integer steps.
//
// Why it gives the core's bits: C is chosen per lane so that its float ulp is exactly the
// format's step in x's binade, so the hardware's own correctly rounded addition (IEEE 754) does
// the rounding, and the subtraction is exact; the core's last steps (flush, overflow result,
// sign) are then applied from the same plan fields (details at float_add_rounding). It serves only
// the plans float_add_applies accepts and only finite registers; NaN and Inf registers take the
// core. tests/test_bulk.cpp compares it with the scalar core on both benchmark data sets, with
// specials and subnormals sprinkled in, and the whole suite passes with it and with the reference
// core forced (backend.hpp).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../detail/simd.hpp"
#include "../round.hpp"
#include "lane_counts.hpp"

namespace minifloat::detail {

/// The float-arithmetic form of lane_path::finite for nearest_even, nearest_away and toward_zero
/// from float, on AVX-512: each lane's magnitude x is rounded to a multiple of its binade's step
/// 2^k (the format's spacing there, 2^(emin - m) below the smallest normal) by (x + C) - C with
/// C = 1.5 * 2^(k + 23), whose float ulp is exactly 2^k, so the addition performs the rounding
/// (the embedded rounding mode picks nearest-even or toward-zero, whatever MXCSR says) and the
/// subtraction is exact. Ties go to even because C / 2^k is even. nearest_away truncates
/// x + 2^(k-1) (see below). The magnitude is clamped to max under saturate, else to the first
/// value beyond the format's largest binade, which keeps C finite and gives the overflow result
/// exactly as in round_bits. Source subnormals round to zero either way: the format's half step
/// is at least 2^-126 (float_add_applies), so whether DAZ zeroes them first does not matter,
/// and no nonzero result is a float subnormal, so FTZ does not either. Callers guarantee finite
/// lanes; results are then the core's bits (tests/test_bulk.cpp checks them against the scalar
/// core on both benchmark data sets, specials and subnormals sprinkled in).
template <class V>
constexpr bool float_add_form = false;

/// What float_add_rounding (and stochastic_float_rounding) knows of its plan at compile time:
/// nothing (`any`: the plan's flags are tested per register), or that it neither flushes nor has
/// an unsigned zero and that it saturates or not. The kernels pick the shape once per call: the
/// two common shapes then have no flag tests, branches or register copies in their loops.
enum class float_add_shape { any, saturating, to_overflow_result };

/// float_add_rounding's constants as registers, derived from the plan once per kernel call. The
/// block kernels keep the plan in memory, and rebuilding these from its fields (loads, shifts
/// and broadcasts) took about a third of their instructions per register.
template <class V>
struct float_add_plan {
  V low_binade{};   ///< exponent field bits of the format's smallest normal binade (the subnormals' spacing)
  V high_binade{};  ///< one binade above the format's largest
  V magic{};        ///< C's bits above its binade's: C = 1.5 * 2^(k + 23) for step 2^k
  V flush_below{}, underflow{}, max_bits{}, overflow{};  ///< the plan's fields of the same names, broadcast
  bool flush = false, unsigned_zero = false;
  bool saturates = false;  ///< the overflow result is max itself
  float_add_plan() = default;
  explicit float_add_plan(const rounding_plan<float>& p)
      : low_binade(V{} + p.smallest_normal_bits()), high_binade(V{} + (((p.max_bits >> 23) + 1) << 23)),
        magic(V{} + ((p.d_normal << 23) | 0x400000U)), flush_below(V{} + p.flush_below_bits),
        underflow(V{} + p.underflow_bits), max_bits(V{} + p.max_bits), overflow(V{} + p.overflow_bits),
        flush(p.flush_below_bits != 0), unsigned_zero(p.unsigned_zero), saturates(p.saturates()) {}
};

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
template <>
inline constexpr bool float_add_form<simd_t<std::uint32_t>> = sizeof(simd_t<std::uint32_t>) == 64;

/// magnitude | (u & sign bit), in one vpternlogd (GCC emits an and and an or for the generic form).
[[gnu::always_inline]] inline simd_t<std::uint32_t> with_sign_of(simd_t<std::uint32_t> magnitude,
                                                                 simd_t<std::uint32_t> u) {
  __m512i r, s;
  std::memcpy(&r, &magnitude, 64);
  std::memcpy(&s, &u, 64);
  r = _mm512_ternarylogic_epi32(r, s, _mm512_set1_epi32(static_cast<int>(0x80000000U)), 0xF8);
  simd_t<std::uint32_t> result;
  std::memcpy(&result, &r, 64);
  return result;
}

/// The plans float_add_rounding serves: at least two dropped bits (x + C stays in C's binade),
/// C finite for every clamped binade, a half step of at least 2^-126 (see above), no
/// onto_values flushing, and not E8M0 (unsigned_exponent: its zero and negative inputs are NaN).
inline bool float_add_applies(const rounding_plan<float>& p) {
  constexpr std::uint32_t P = 23;
  const std::uint32_t emax_field = p.max_bits >> P;
  return p.d_normal >= 2 && emax_field + 1 + p.d_normal <= 254 && p.emin_field >= 2 + (P - p.d_normal) &&
         p.subnormal_drop == 0 && !p.positive_only;
}

template <rounding Mode, float_add_shape Shape = float_add_shape::any>
[[gnu::always_inline]] inline simd_t<std::uint32_t> float_add_rounding(const float_add_plan<simd_t<std::uint32_t>>& k,
                                                                       simd_t<std::uint32_t> u) {
  constexpr bool known = Shape != float_add_shape::any;
  const bool flush = !known && k.flush, unsigned_zero = !known && k.unsigned_zero;
  const bool saturates = known ? Shape == float_add_shape::saturating : k.saturates;
  using V = simd_t<std::uint32_t>;
  constexpr int embedded = (Mode == rounding::nearest_even ? _MM_FROUND_TO_NEAREST_INT : _MM_FROUND_TO_ZERO) |
                           _MM_FROUND_NO_EXC;
  const V zero{};
  const V a = u & 0x7fffffffU;
  // The magnitude is clamped first, which bounds the binade from above. These modes round
  // magnitudes monotonically, so under saturate every magnitude from max on rounds to max (max
  // rounds to itself); otherwise every magnitude from 2^(emax+1) (high_binade) on is beyond max
  // and gives the overflow result, and 2^(emax+1) rounds to itself.
  const V clamped = lane_min(a, saturates ? k.max_bits : k.high_binade);
  // C's bits: the clamped exponent field, at least the format's smallest normal binade, moved up
  // by the dropped bits.
  const V c = lane_max(clamped & 0x7f800000U, k.low_binade) + k.magic;
  __m512 x, cf;
  std::memcpy(&x, &clamped, 64);
  std::memcpy(&cf, &c, 64);
  __m512 sum;
  if constexpr (Mode == rounding::nearest_away) {
    // Nearest-away is truncation of x + 2^(k-1) (half a step), and C + 2^(k-1) =
    // (3 * 2^23 + 1) * 2^(k-1) = (25 * 2^(k-1)) * 1006633, a product of two floats: one fused
    // multiply-add toward zero truncates the exact x + C + 2^(k-1) to a multiple of 2^k. A sum
    // that reaches the next binade (x below it by less than half a step, possible with two
    // dropped bits) is at most 2^(k+24) + 2^(k-1) and truncates to 2^(k+24), so the subtraction
    // below gives 2^(k+22), the value x rounds to. A float subnormal x (zeroed or not by DAZ)
    // truncates to C and gives 0, as it should. 25 * 2^(k-1) is C less 20 binades with the
    // mantissa 0x480000 for C's 0x400000; it is normal, as 2^(k-1) >= 2^-126.
    const V scaled_bits = c - ((20U << 23) - 0x80000U);
    __m512 scaled;
    std::memcpy(&scaled, &scaled_bits, 64);
    sum = _mm512_maskz_fmadd_round_ps(all_lanes16, scaled, _mm512_set1_ps(1006633.0f), x, embedded);
  } else {
    // The zero-masked forms with a full mask: GCC 12's unmasked ones start from
    // _mm512_undefined_ps(), which -Wmaybe-uninitialized reports.
    sum = _mm512_maskz_add_round_ps(all_lanes16, x, cf, embedded);
  }
  const __m512 rounded = _mm512_maskz_sub_round_ps(all_lanes16, sum, cf, embedded);
  V result;
  std::memcpy(&result, &rounded, 64);
  // The core's last steps (round_bits), on the same plan fields.
  if (flush) result = select(result < k.flush_below, k.underflow, result);
  if (!saturates) result = select(result > k.max_bits, k.overflow, result);
  if (unsigned_zero) return result | select(result == zero, zero, u & 0x80000000U);
  return with_sign_of(result, u);
}
#endif

/// True when Mode, S and V have the float-arithmetic form (float_add_rounding).
template <rounding Mode, std::floating_point S, class V>
inline constexpr bool has_float_add =
    (Mode == rounding::nearest_even || Mode == rounding::nearest_away || Mode == rounding::toward_zero) &&
    std::same_as<S, float> && float_add_form<V>;

/// The backend's loop: rounds every whole register of `in` from element i on; returns the index
/// after the last whole register. Every finite register takes the float-arithmetic form, without
/// the core's single-binade test (it costs more than it saves where registers mix, as e4m3's do on
/// N(0,1) data, and mispredicts there); a register with a NaN or Inf lane takes the core. A
/// function of its own, never inlined, with counters of its own: inside the caller's loop the
/// counters lived on the stack (a load and a store per counter and register). The plan's shape
/// (float_add_shape) is decided here once.
template <rounding Mode, bool Count, std::floating_point S, class V>
[[gnu::noinline]] std::size_t float_add_run(const rounding_plan<S>& plan, const S* in, S* out, std::size_t i,
                                            std::size_t n, lane_counts<V>& counts) {
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  if constexpr (has_float_add<Mode, S, V>) {
    constexpr std::size_t lanes = sizeof(V) / sizeof(S);
    const rounding_plan<S> p = plan;  // a local copy: stores to out cannot alias it
    const float_add_plan<V> fa(p);
    lane_counts<V> local;
    if constexpr (Count) local.first_nonzero = first_nonzero_magnitude<Mode>(p);
    const auto run = [&]<float_add_shape Shape>() {
      for (; i + lanes <= n; i += lanes) {
        prefetch_stream(in, out, i, n);
        const V u = load_lanes<V>(in + i);
        V result;
        if (any_lane_at_least(u & 0x7fffffffU, 0x7f800000U)) {
          result = round_bits<Mode, lane_path::any>(p, u, V{});
          if constexpr (Count) local.template add<false>(p, u, result, ~V{});
        } else {
          result = float_add_rounding<Mode, Shape>(fa, u);
          if constexpr (Count) local.template add<true>(p, u, result, ~V{});
        }
        store_lanes(out + i, result);
      }
    };
    if (p.flush_below_bits != 0 || p.unsigned_zero) run.template operator()<float_add_shape::any>();
    else if (p.saturates()) run.template operator()<float_add_shape::saturating>();
    else run.template operator()<float_add_shape::to_overflow_result>();
    if constexpr (Count) counts.merge(local);
  }
#else
  (void)plan, (void)in, (void)out, (void)n, (void)counts;
#endif
  return i;
}

}  // namespace minifloat::detail
