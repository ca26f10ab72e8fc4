// minifloat/bulk.hpp — rounding, encoding and decoding whole spans.
//
// Every kernel applies the one core of round.hpp to each element. Stochastic rounding draws
// element i's random word from (seed, options.index + i), so a span can be cut into chunks and
// rounded by any number of threads: give each chunk its own subspan and options.index = the
// chunk's offset, and the result is bit-identical to one call over the whole span.
// In-place rounding is allowed (in and out may be the same span).
// Every function also takes any contiguous range (std::vector, std::array, C arrays, spans of
// const or mutable elements), and arrays of fp<> values stand for their codes: quantize(floats,
// fp_values) rounds into them, decode(fp_values, floats) reads them back.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <algorithm>
#include <ranges>
#include <type_traits>

#include "detail/simd.hpp"
#include "encode.hpp"
#include "fp.hpp"
#include "round.hpp"
#include "stats.hpp"

namespace minifloat {

namespace detail {
inline void check_same_size(std::size_t in, std::size_t out) {
  if (in != out) throw std::invalid_argument("minifloat: input and output spans differ in size");
}

/// Random words of stochastic rounding for lanes first..first+lanes-1, identical to
/// counter_rng::bits32 / bits64 of each index (random.hpp). A register of draws that starts at a
/// multiple of its lane count is whole ARS blocks: on VAES one 512-bit (or 256-bit) computation
/// with the round keys held in registers; elsewhere one ARS call per 128-bit block. A register
/// that starts elsewhere joins two such aligned registers. Each call also computes the aligned
/// register after its own and keeps it for the next call.
template <class V>
struct lane_random {
  using B = std::remove_cvref_t<decltype(V{}[0])>;
  static constexpr std::size_t lanes = sizeof(V) / sizeof(B);
  static constexpr std::size_t blocks = sizeof(V) / 16;
  static constexpr std::uint64_t draws_per_block = 16 / sizeof(B);
  static constexpr std::uint64_t domain = sizeof(B) == 4 ? domain_bits32 : domain_bits64;
  static_assert(sizeof(V) % 16 == 0, "registers of whole 128-bit blocks");

  block128 key;
  block128 round_keys[ars_rounds + 1];
  bool have_next = false;
  std::uint64_t next_first = 0;
  V next{};

  explicit lane_random(const counter_rng& r) : key(r.key()) {
    round_keys[0] = key;
    for (int k = 1; k <= ars_rounds; ++k) round_keys[k] = ars_next_key(round_keys[k - 1]);
  }

#if defined(__VAES__) && defined(__AES__) && defined(__AVX2__) && !defined(__CUDA_ARCH__)
  /// b in every 128-bit lane (set from two words: the broadcast intrinsics trip GCC 12's
  /// maybe-uninitialized warning).
  static __m256i every_block256(const block128& b) {
    const auto lo = static_cast<long long>(b.low()), hi = static_cast<long long>(b.high());
    return _mm256_set_epi64x(hi, lo, hi, lo);
  }
#if defined(__AVX512F__)
  static __m512i every_block512(const block128& b) {
    const auto lo = static_cast<long long>(b.low()), hi = static_cast<long long>(b.high());
    return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
  }
#endif
#endif

#if defined(__VAES__) && defined(__AES__) && defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  /// The four ARS counter blocks (block_index + j, domain), j < 4, of one 512-bit register.
  [[gnu::always_inline]] static __m512i counters512(std::uint64_t block_index) {
    const __m512i offsets = _mm512_set_epi64(static_cast<long long>(domain), 3, static_cast<long long>(domain), 2,
                                             static_cast<long long>(domain), 1, static_cast<long long>(domain), 0);
    return _mm512_mask_add_epi64(offsets, 0x55, offsets, _mm512_set1_epi64(static_cast<long long>(block_index)));
  }
  /// ARS-5 of four counter blocks: the register of draws they give.
  [[gnu::always_inline]] V encrypted(__m512i x) const {
    x = _mm512_xor_si512(x, every_block512(round_keys[0]));
    for (int k = 1; k < ars_rounds; ++k) x = _mm512_aesenc_epi128(x, every_block512(round_keys[k]));
    x = _mm512_aesenclast_epi128(x, every_block512(round_keys[ars_rounds]));
    V v;
    std::memcpy(&v, &x, sizeof v);
    return v;
  }
#endif

  /// Calls f(k, aligned(first + k * lanes)) for k = 0, 1, ..., count - 1 in order (first a
  /// multiple of lanes). With AVX-512 and VAES the counters advance by one vector add per
  /// register instead of being rebuilt from the index (lea, shift, broadcast and masked add),
  /// unless the index wraps past 2^64 - 1 inside the run.
  template <class F>
  [[gnu::always_inline]] void aligned_run(std::uint64_t first, std::size_t count, F f) const {
#if defined(__VAES__) && defined(__AES__) && defined(__AVX512F__) && !defined(__CUDA_ARCH__)
    if constexpr (blocks == 4) {
      if (first <= ~std::uint64_t{0} - count * lanes) {
        __m512i counters = counters512(first / draws_per_block);
        const __m512i advance = _mm512_maskz_set1_epi64(0x55, static_cast<long long>(blocks));
        for (std::size_t k = 0; k < count; ++k) {
          f(k, encrypted(counters));
          counters = _mm512_add_epi64(counters, advance);
        }
        return;
      }
    }
#endif
    for (std::size_t k = 0; k < count; ++k) f(k, aligned(first + k * lanes));
  }

  /// The draws of indices first..first+lanes-1, first a multiple of lanes.
  [[gnu::always_inline]] V aligned(std::uint64_t first) const {
    const std::uint64_t block_index = first / draws_per_block;
    V v;
#if defined(__VAES__) && defined(__AES__) && defined(__AVX512F__) && !defined(__CUDA_ARCH__)
    if constexpr (blocks == 4) return encrypted(counters512(block_index));
#endif
#if defined(__VAES__) && defined(__AES__) && defined(__AVX2__) && !defined(__CUDA_ARCH__)
    if constexpr (blocks == 2) {
      const __m256i offsets =
          _mm256_set_epi64x(static_cast<long long>(domain), 1, static_cast<long long>(domain), 0);
      __m256i x = _mm256_add_epi64(offsets, _mm256_set_epi64x(0, static_cast<long long>(block_index), 0,
                                                              static_cast<long long>(block_index)));
      x = _mm256_xor_si256(x, every_block256(round_keys[0]));
      for (int k = 1; k < ars_rounds; ++k)
        x = _mm256_aesenc_epi128(x, every_block256(round_keys[k]));
      x = _mm256_aesenclast_epi128(x, every_block256(round_keys[ars_rounds]));
      std::memcpy(&v, &x, sizeof v);
      return v;
    }
#endif
    block128 out[blocks];
    for (std::size_t j = 0; j < blocks; ++j) out[j] = ars<ars_rounds>(block128::from(block_index + j, domain), key);
    std::memcpy(&v, out, sizeof v);
    return v;
  }

  V operator()(std::uint64_t first) {
    const std::uint64_t shift = first % lanes;
    const std::uint64_t base = first - shift;
    const V low = have_next && next_first == base ? next : aligned(base);
    // The next aligned register is computed now, a call before it is needed: its AES chain then
    // overlaps this register's rounding instead of stalling the next one.
    next_first = base + lanes;  // wraps to 0 past 2^64 - 1, as the index does
    next = aligned(next_first);
    have_next = true;
    if (shift == 0) return low;
    B joined[2 * lanes];
    std::memcpy(joined, &low, sizeof(V));
    std::memcpy(joined + lanes, &next, sizeof(V));
    V v;
    std::memcpy(&v, joined + shift, sizeof(V));
    return v;
  }
};

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

/// A hardware conversion that rounds a plan's registers to the core's bits, chosen once per
/// kernel call: F16C's vcvtps2ph (embedded nearest-even or toward-zero) and vcvtph2ps for
/// binary16, AVX512-BF16's vcvtneps2bf16 (nearest-even only) for bfloat16. These are the
/// hardware's rounding, not a copy of the core's bit logic, and they serve only the registers
/// where they agree with the core (hardware_misses): for binary16 every finite register
/// (float subnormal inputs round to ±0 whether or not DAZ zeroes them first, the format's
/// subnormal results are exact, and F16C ignores MXCSR's rounding field with an embedded mode);
/// for bfloat16 registers whose lanes are zero or normal floats below Inf (vcvtneps2bf16 flushes
/// float subnormal inputs, whose bfloat16 roundings are subnormals, and ignores MXCSR; a normal
/// input never rounds to a subnormal). NaN lanes take the core (it keeps the whole payload,
/// the hardware truncates it), as do Inf lanes (the core's result depends on the policy). A
/// finite lane that overflows becomes Inf in the hardware and the plan's overflow result in the
/// core: max under saturate (restored by one vrangeps, the minimum of magnitudes with the
/// lane's sign), Inf otherwise; toward zero F16C stops at max as the core does.
/// tests/test_bulk.cpp checks these registers against the scalar core, fall-back lanes
/// included; the exhaustive tests compare every float with F16C / AVX512-BF16 themselves.
enum class hardware_form { none, f16c, bf16 };

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__F16C__) && !defined(__CUDA_ARCH__)
template <rounding Mode>
inline hardware_form hardware_form_for(const rounding_plan<float>& p) {
  if ((Mode == rounding::nearest_even || Mode == rounding::toward_zero) && p.fmt == binary16) return hardware_form::f16c;
#if defined(__AVX512BF16__)
  if (Mode == rounding::nearest_even && p.fmt == bfloat16) return hardware_form::bf16;
#endif
  return hardware_form::none;
}

/// True when the register must take the core rather than the hardware form H: one vfpclassps
/// (NaN and Inf lanes; for bfloat16 also float subnormals). vfpclassps classifies a subnormal
/// as zero when MXCSR.DAZ is set, so for bfloat16 the caller passes Daz (read once per kernel
/// call) and the test is then on the bits: a lane that is neither zero nor in [smallest normal, Inf).
template <hardware_form H, bool Daz = false>
[[gnu::always_inline]] inline bool hardware_misses(simd_t<std::uint32_t> u) {
  __m512i t;
  std::memcpy(&t, &u, 64);
  // vfpclassps categories: 0x01 quiet NaN, 0x08 +Inf, 0x10 -Inf, 0x20 subnormal, 0x80 signalling NaN.
  if constexpr (H == hardware_form::f16c) return _mm512_fpclass_ps_mask(_mm512_castsi512_ps(t), 0x99) != 0;
  if constexpr (!Daz) return _mm512_fpclass_ps_mask(_mm512_castsi512_ps(t), 0xB9) != 0;
  constexpr std::uint32_t inf2 = 0x7f800000U << 1, normal2 = 0x00800000U << 1;
  const __m512i twice = _mm512_maskz_slli_epi32(all_lanes16, t, 1);  // zero-masked: see float_add_rounding
  const __mmask16 nonzero = _mm512_test_epi32_mask(twice, twice);
  return _mm512_mask_cmpge_epu32_mask(nonzero, _mm512_sub_epi32(twice, _mm512_set1_epi32(static_cast<int>(normal2))),
                                      _mm512_set1_epi32(static_cast<int>(inf2 - normal2))) != 0;
}

/// The hardware form's result for a register that hardware_misses let through; `max` is the
/// format's largest value, applied where the plan saturates.
template <rounding Mode, hardware_form H>
[[gnu::always_inline]] inline simd_t<std::uint32_t> hardware_rounding(simd_t<std::uint32_t> u, bool saturates,
                                                                      __m512 max) {
  __m512 x, y;
  std::memcpy(&x, &u, 64);
  if constexpr (H == hardware_form::f16c) {
    constexpr int embedded =
        (Mode == rounding::nearest_even ? _MM_FROUND_TO_NEAREST_INT : _MM_FROUND_TO_ZERO) | _MM_FROUND_NO_EXC;
    // The zero-masked forms with a full mask, for GCC 12 (see float_add_rounding).
    y = _mm512_maskz_cvtph_ps(all_lanes16, _mm512_maskz_cvtps_ph(all_lanes16, x, embedded));
  } else {
#if defined(__AVX512BF16__)
    const __m256bh h = _mm512_cvtneps_pbh(x);
    __m256i narrow;
    std::memcpy(&narrow, &h, sizeof narrow);
    y = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all_lanes16, _mm512_maskz_cvtepu16_epi32(all_lanes16, narrow), 16));
#else
    static_assert(H != hardware_form::bf16, "vcvtneps2bf16 needs AVX512-BF16");
#endif
  }
  // imm 0b0010: the smaller magnitude, with the sign of the first operand.
  if (Mode != rounding::toward_zero && saturates) y = _mm512_maskz_range_ps(all_lanes16, y, max, 0b0010);
  simd_t<std::uint32_t> result;
  std::memcpy(&result, &y, 64);
  return result;
}
#endif

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
  // Both evaluated (no short circuit): testing plain_path first made a stochastic bf16 + 9 split
  // step (the chunked path's encode) 13 % slower.
  const bool within = zero_or_within(twice, normal2, static_cast<bits>((p.threshold_bits << 1) - normal2));
  return p.plain_path && within;
}

/// True when Mode, S and V have the float-arithmetic form (float_add_rounding).
template <rounding Mode, std::floating_point S, class V>
inline constexpr bool has_float_add =
    (Mode == rounding::nearest_even || Mode == rounding::nearest_away || Mode == rounding::toward_zero) &&
    std::same_as<S, float> && float_add_form<V>;

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

/// Rounds one register (and counts it) on the cheapest path its lanes allow: the single-binade
/// shortcut, the full core without NaN/Inf handling (or its float-arithmetic form, when
/// `float_add` = use_float_add(p), decided once per kernel), or the full core. FloatAddFirst (only
/// with has_float_add and float_add) skips the single-binade test and sends every finite
/// register to the float-arithmetic form (float_add_run: quantize from float with AVX-512 for
/// these modes, whatever the data); the block kernels and the other modes keep the test. Shape
/// (float_add_shape) is what the caller knows of the plan, for the float-arithmetic forms.
template <rounding Mode, bool Count, bool FloatAddFirst = false, float_add_shape Shape = float_add_shape::any,
          std::floating_point S, class V>
[[gnu::always_inline]] inline V round_lanes(const rounding_plan<S>& p, V u, V random,
                                            [[maybe_unused]] lane_counts<V>& counts, [[maybe_unused]] V valid,
                                            [[maybe_unused]] bool float_add = false) {
  using src = source_layout<S>;
  // Stochastic rounding with its float form skips the single-binade test: that form is exact on
  // plain lanes too, and where registers mix (e4m3 on N(0,1)) the test's branch is unpredictable.
  constexpr bool stochastic_float = Mode == rounding::stochastic && has_stochastic_float<S, V>;
  if constexpr (!FloatAddFirst) {
    if (!(stochastic_float && float_add) && plain_register(p, u << 1)) return round_bits<Mode, lane_path::plain>(p, u, random);
  }
  // NaN and Inf lanes: the float-arithmetic and stochastic float forms compute the magnitude anyway (one
  // and, where the shift of u << 1 costs more), the others have u << 1 from the test above.
  const bool special = FloatAddFirst || stochastic_float ? any_lane_at_least(u & src::abs_mask, src::inf_bits)
                                                   : any_lane_at_least(u << 1, src::inf_bits << 1);
  if (special) {
    const V result = round_bits<Mode, lane_path::any>(p, u, random);
    if constexpr (Count) counts.template add<false>(p, u, result, valid);
    return result;
  }
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  if constexpr (Mode == rounding::stochastic && has_stochastic_float<S, V>) {
    if (float_add) {  // for stochastic rounding: stochastic_float_applies (use_float_add)
      const V result = stochastic_float_rounding<Shape>(p, u, random);
      if constexpr (Count) counts.template add<true>(p, u, result, valid);
      return result;
    }
  }
#endif
  if constexpr (has_float_add<Mode, S, V>) {
    if (FloatAddFirst || float_add) {
      const float_add_plan<V> fa(p);
      return round_finite_lanes<Mode, Count, Shape>(p, &fa, u, random, counts, valid);
    }
  }
  return round_finite_lanes<Mode, Count>(p, nullptr, u, random, counts, valid);
}

/// float_add_applies (stochastic_float_applies for stochastic rounding) where that form exists,
/// else false.
template <std::floating_point S>
inline bool use_float_add([[maybe_unused]] const rounding_plan<S>& p) {
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  if constexpr (std::same_as<S, float>)
    return p.mode == rounding::stochastic ? stochastic_float_applies(p) : float_add_applies(p);
#endif
  return false;
}

/// Rounds every whole register of `in` from element i on by the float-arithmetic form
/// (FloatAddFirst: no single-binade test, which costs more than it saves where registers mix, as
/// e4m3's do on N(0,1) data, and mispredicts there); returns the index after the last whole
/// register. A function of its own, never inlined, with counters of its own: inside
/// quantize_lanes the counters lived on the stack (a load and a store per counter and register),
/// which made counting on wide data cost +75 %. The plan's shape (float_add_shape) is decided
/// here once.
template <rounding Mode, bool Count, std::floating_point S, class V>
[[gnu::noinline]] std::size_t float_add_run(const rounding_plan<S>& plan, const S* in, S* out, std::size_t i,
                                            std::size_t n, lane_counts<V>& counts) {
  constexpr std::size_t lanes = sizeof(V) / sizeof(S);
  const rounding_plan<S> p = plan;  // a local copy: stores to out cannot alias it
  lane_counts<V> local;
  if constexpr (Count) local.first_nonzero = first_nonzero_magnitude<Mode>(p);
  const auto run = [&]<float_add_shape Shape>() {
    for (; i + lanes <= n; i += lanes) {
      prefetch_stream(in, out, i, n);
      store_lanes(out + i, round_lanes<Mode, Count, true, Shape>(p, load_lanes<V>(in + i), V{}, local, ~V{}, true));
    }
  };
  if (p.flush_below_bits != 0 || p.unsigned_zero) run.template operator()<float_add_shape::any>();
  else if (p.saturates()) run.template operator()<float_add_shape::saturating>();
  else run.template operator()<float_add_shape::to_overflow_result>();
  if constexpr (Count) counts.merge(local);
  return i;
}

/// stochastic_run's loop over `registers` whole registers, for a plan of the shape Shape.
template <bool Count, float_add_shape Shape, std::floating_point S, class V>
[[gnu::always_inline]] inline void stochastic_registers(const rounding_plan<S>& p, const lane_random<V>& draw,
                                                        bool float_add, std::uint64_t first_index, const S* in,
                                                        S* out, std::size_t registers, std::size_t n,
                                                        lane_counts<V>& counts) {
  constexpr std::size_t lanes = sizeof(V) / sizeof(S);
  // Inlined by request: without it GCC 12 calls the lambda per register where the caller's
  // clone (IPA-SRA, Count false) loses gnu::flatten (0.2x memcpy in cache instead of 0.3x).
  draw.aligned_run(first_index, registers, [&](std::size_t k, V random) __attribute__((always_inline)) {
    const std::size_t i = k * lanes;
    prefetch_stream(in, out, i, n);
    store_lanes(out + i,
                round_lanes<rounding::stochastic, Count, false, Shape>(p, load_lanes<V>(in + i), random, counts, ~V{}, float_add));
  });
}

/// Rounds every whole register of `in` stochastically, for a first index (of the rounder's
/// numbering) that is a multiple of the register's lanes, the usual case: the words come from
/// whole ARS blocks in order (lane_random::aligned_run, whose counters advance by one vector add
/// per register), and the plan's overflow result is decided here once (float_add_shape), not per
/// register. Returns the index after the last whole register. Never inlined, with counters and
/// copies of the plan and the generator of its own, for the reasons given at float_add_run.
template <bool Count, std::floating_point S, class V>
[[gnu::noinline, gnu::flatten]] std::size_t stochastic_run(const rounding_plan<S>& plan, const lane_random<V>& words,
                                                           std::uint64_t first_index, const S* in, S* out,
                                                           std::size_t n, lane_counts<V>& counts) {
  constexpr std::size_t lanes = sizeof(V) / sizeof(S);
  const rounding_plan<S> p = plan;
  const lane_random<V> draw = words;
  const bool float_add = use_float_add(p);
  const std::size_t registers = n / lanes;
  lane_counts<V> local;
  if (p.saturates())
    stochastic_registers<Count, float_add_shape::saturating>(p, draw, float_add, first_index, in, out, registers, n, local);
  else
    stochastic_registers<Count, float_add_shape::to_overflow_result>(p, draw, float_add, first_index, in, out, registers,
                                                                     n, local);
  if constexpr (Count) counts.merge(local);
  return registers * lanes;
}

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__F16C__) && !defined(__CUDA_ARCH__)
/// Rounds every whole register of `in` by the hardware form H where hardware_misses allows it,
/// by round_lanes otherwise; returns the index after the last whole register. Never inlined,
/// with counters of its own, for the reason given at float_add_run. Daz: MXCSR.DAZ is set (see
/// hardware_misses), read once per kernel call by quantize_lanes.
template <rounding Mode, bool Count, hardware_form H, bool Daz>
[[gnu::noinline]] std::size_t hardware_run(const rounding_plan<float>& plan, const float* in, float* out,
                                           std::size_t n, lane_counts<simd_t<std::uint32_t>>& counts) {
  using V = simd_t<std::uint32_t>;
  constexpr std::size_t lanes = simd_lanes<std::uint32_t>;
  const rounding_plan<float> p = plan;  // a local copy: stores to out cannot alias it
  const bool float_add = use_float_add(p);
  const bool saturates = p.saturates();
  const __m512 max = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(p.max_bits)));
  lane_counts<V> local;
  if constexpr (Count) local.first_nonzero = first_nonzero_magnitude<Mode>(p);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    prefetch_stream(in, out, i, n);
    const V u = load_lanes<V>(in + i);
    if (hardware_misses<H, Daz>(u)) {
      store_lanes(out + i, round_lanes<Mode, Count>(p, u, V{}, local, ~V{}, float_add));
      continue;
    }
    const V result = hardware_rounding<Mode, H>(u, saturates, max);
    if constexpr (Count && H == hardware_form::bf16) {
      // Every lane is zero or a normal float, which rounds to a nonzero value: nothing underflows.
      __m512i a;
      std::memcpy(&a, &u, 64);
      a = _mm512_and_si512(a, _mm512_set1_epi32(0x7fffffff));
      local.mask_overflows += static_cast<unsigned>(std::popcount(static_cast<unsigned>(
          _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(static_cast<int>(p.threshold_bits))))));
    } else if constexpr (Count) {
      local.template add<true>(p, u, result, ~V{});
    }
    store_lanes(out + i, result);
  }
  if constexpr (Count) counts.merge(local);
  return i;
}
#endif

// The SIMD kernels below are host code. In a CUDA translation unit nvcc's device pass
// (__CUDA_ARCH__) still instantiates host templates that host functions use, and its compiler
// aborts on GCC vector code there, so that pass sees these three kernels with empty bodies; the
// host pass, which is what runs, compiles them in full.
// Never inlined into a caller: there GCC 12 would see the size of the caller's array (a one-float
// std::vector in a test) and, not tracking n through the runs above, report the whole-register
// loads as -Warray-bounds.
template <rounding Mode, bool Count, std::floating_point S>
[[gnu::flatten, gnu::noinline]] void quantize_lanes(const S* in, S* out, std::size_t n, const rounder<S>& r, rounding_stats* st) {
#if !defined(__CUDA_ARCH__)  // host-only SIMD (see the note above quantize_lanes)
  using bits = typename source_layout<S>::bits;
  using V = simd_t<bits>;
  constexpr std::size_t lanes = simd_lanes<bits>;
  const rounding_plan<S> p = r.plan();  // a local copy: stores to out cannot alias it
  lane_random<V> draw(r.rng());
  lane_counts<V> counts;
  const bool float_add = use_float_add(p);
  std::size_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__F16C__)
  if constexpr (std::same_as<S, float> && sizeof(V) == 64 &&
                (Mode == rounding::nearest_even || Mode == rounding::toward_zero)) {
    switch (hardware_form_for<Mode>(p)) {
      case hardware_form::f16c: i = hardware_run<Mode, Count, hardware_form::f16c, false>(p, in, out, n, counts); break;
#if defined(__AVX512BF16__)
      case hardware_form::bf16:
        // MXCSR.DAZ (bit 6) changes what vfpclassps calls a subnormal (hardware_misses); F16C's
        // test does not look at subnormals.
        if ((_mm_getcsr() & 0x40U) != 0) i = hardware_run<Mode, Count, hardware_form::bf16, true>(p, in, out, n, counts);
        else i = hardware_run<Mode, Count, hardware_form::bf16, false>(p, in, out, n, counts);
        break;
#endif
      default: break;
    }
  }
#endif
  if constexpr (has_float_add<Mode, S, V>) {
    // Which path a register takes only changes speed, never bits.
    if (float_add) i = float_add_run<Mode, Count>(p, in, out, i, n, counts);
  }
  if constexpr (Mode == rounding::stochastic) {
    if (r.first_index() % lanes == 0) i = stochastic_run<Count>(p, draw, r.first_index(), in, out, n, counts);
  }
  for (; i + lanes <= n; i += lanes) {
    prefetch_stream(in, out, i, n);
    const V u = load_lanes<V>(in + i);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    store_lanes(out + i, round_lanes<Mode, Count>(p, u, random, counts, ~V{}, float_add));
  }
  if (i < n) {  // the tail goes through the same register path, padded with zeros
    const std::size_t m = n - i;
    const V u = load_lanes<V>(in + i, m);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    const V valid = select(lane_indices<V>() < static_cast<bits>(m), ~V{}, V{});
    store_lanes(out + i, round_lanes<Mode, Count>(p, u, random, counts, valid, float_add), m);
  }
  if constexpr (Count) counts.flush(*st, n);
#else
  (void)in, (void)out, (void)n, (void)r, (void)st;
#endif
}

/// Codes of one register's lanes, narrowed or widened to C and stored (count lanes).
template <class C, class V>
inline void store_codes(C* out, V codes, std::size_t count) {
  using B = std::remove_cvref_t<decltype(codes[0])>;
  using CV = typename vector_of<C, sizeof(V) / sizeof(B) * sizeof(C)>::type;
  const CV narrow = __builtin_convertvector(codes, CV);
  std::memcpy(out, &narrow, count * sizeof(C));
}

/// Rounds and encodes; returns the index of the first value without a code, or in.size().
template <rounding Mode, std::floating_point S, std::unsigned_integral C>
[[gnu::flatten]] std::size_t encode_lanes(std::span<const S> in, std::span<C> out, const rounder<S>& r) {
#if !defined(__CUDA_ARCH__)  // host-only SIMD (see the note above quantize_lanes)
  using src = source_layout<S>;
  using bits = typename src::bits;
  using V = simd_t<bits>;
  constexpr std::size_t lanes = simd_lanes<bits>;
  const rounding_plan<S> p = r.plan();
  const codec_plan<S> c = make_codec_plan<S>(p.fmt);
  const bool all_finite = p.fmt.encoding == specials::all_finite;
  lane_random<V> draw(r.rng());
  lane_counts<V> unused;
  const bool float_add = use_float_add(p);
  const std::size_t n = in.size();
  // Returns the lane of the first value without a code, or m. Called with m = lanes in the main
  // loop, so its copies have a constant size once inlined.
  const auto step = [&](std::size_t i, std::size_t m) {
    const V u = load_lanes<V>(in.data() + i, m);
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(r.first_index() + i);
    const V rounded = round_lanes<Mode, false>(p, u, random, unused, ~V{}, float_add);
    const V codes = code_lanes(c, rounded);
    if (all_finite && any_lane((rounded << 1) >= (src::inf_bits << 1))) {
      std::size_t k = 0;
      while (k < m && (rounded[k] << 1) < (src::inf_bits << 1)) ++k;
      store_codes(out.data() + i, codes, k);
      return k;
    }
    store_codes(out.data() + i, codes, m);
    return m;
  };
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    prefetch_stream(in.data(), out.data(), i, n);
    if (const std::size_t k = step(i, lanes); k < lanes) return i + k;
  }
  if (i < n)
    if (const std::size_t k = step(i, n - i); k < n - i) return i + k;
  return n;
#else
  (void)in, (void)out, (void)r;
  return 0;
#endif
}

template <std::floating_point S, std::unsigned_integral C>
[[gnu::flatten]] void decode_lanes(std::span<const C> in, std::span<S> out, const codec_plan<S>& c) {
#if !defined(__CUDA_ARCH__)  // host-only SIMD (see the note above quantize_lanes)
  using bits = typename source_layout<S>::bits;
  using V = simd_t<bits>;
  constexpr std::size_t lanes = simd_lanes<bits>;
  using CV = typename vector_of<C, lanes * sizeof(C)>::type;
  const auto step = [&](std::size_t i, std::size_t m) {
    CV narrow{};  // loaded in place: a function returning a register wider than the ISA's would change ABI
    std::memcpy(&narrow, in.data() + i, m * sizeof(C));
    const V codes = __builtin_convertvector(narrow, V);
    store_lanes(out.data() + i, value_lanes(c, codes, [](V v) { return integer_to_float_bits(v); }), m);
  };
  std::size_t i = 0;
  for (; i + lanes <= in.size(); i += lanes) {
    prefetch_stream(in.data(), out.data(), i, in.size());
    step(i, lanes);
  }
  if (i < in.size()) step(i, in.size() - i);
#else
  (void)in, (void)out, (void)c;
#endif
}

/// Values a widened rounder<float> (rounds_through_double) widens to double per pass: the
/// double kernels round them, and the results narrow back exactly.
inline constexpr std::size_t widen_chunk = 1024;

template <bool Count, std::floating_point S>
void quantize_span(std::span<const S> in, std::span<S> out, const rounder<S>& r, rounding_stats* st);

/// quantize_span for a widened rounder<float>: through the double kernels in chunks (in place
/// allowed: each chunk is read before it is written).
template <bool Count>
void quantize_through_double(std::span<const float> in, std::span<float> out, const rounder<float>& r,
                             rounding_stats* st) {
  const rounder<double> wide = r.through_double();
  double buffer[widen_chunk];
  for (std::size_t start = 0; start < in.size(); start += widen_chunk) {
    const std::size_t n = std::min(widen_chunk, in.size() - start);
    for (std::size_t i = 0; i < n; ++i) buffer[i] = in[start + i];
    const std::span<double> chunk(buffer, n);
    quantize_span<Count>(std::span<const double>(chunk), chunk, wide.advanced(start), st);
    for (std::size_t i = 0; i < n; ++i) out[start + i] = static_cast<float>(buffer[i]);  // exact: E8M0 values are floats
  }
}

template <bool Count, std::floating_point S>
void quantize_span(std::span<const S> in, std::span<S> out, const rounder<S>& r, rounding_stats* st) {
  check_same_size(in.size(), out.size());
  if constexpr (sizeof(S) == 4) {
    if (r.widened()) return quantize_through_double<Count>(in, out, r, st);
  }
  // Counts are kept in 32-bit (float) lanes: cut very long spans into pieces that cannot overflow them.
  constexpr std::size_t piece = std::size_t{1} << 30;
  for (std::size_t start = 0; start < in.size(); start += piece) {
    const std::size_t n = std::min(piece, in.size() - start);
    const rounder<S> at = r.advanced(start);
    const S* src = in.data() + start;
    S* dst = out.data() + start;
    switch (r.plan().mode) {
      case rounding::nearest_even: quantize_lanes<rounding::nearest_even, Count>(src, dst, n, at, st); break;
      case rounding::nearest_away: quantize_lanes<rounding::nearest_away, Count>(src, dst, n, at, st); break;
      case rounding::toward_zero: quantize_lanes<rounding::toward_zero, Count>(src, dst, n, at, st); break;
      case rounding::stochastic: quantize_lanes<rounding::stochastic, Count>(src, dst, n, at, st); break;
      case rounding::toward_positive: quantize_lanes<rounding::toward_positive, Count>(src, dst, n, at, st); break;
      case rounding::toward_negative: quantize_lanes<rounding::toward_negative, Count>(src, dst, n, at, st); break;
      case rounding::to_odd: quantize_lanes<rounding::to_odd, Count>(src, dst, n, at, st); break;
    }
  }
}
}  // namespace detail

/// out[i] = in[i] rounded by r (element index r.first_index() + i).
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const rounder<S>& r) {
  detail::quantize_span<false>(in, out, r, nullptr);
}
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const rounder<S>& r, rounding_stats& st) {
  detail::quantize_span<true>(in, out, r, &st);
}
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const format& f, const rounding_options& o = {}) {
  quantize(in, out, rounder<S>(f, o));
}
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const format& f, const rounding_options& o,
              rounding_stats& st) {
  quantize(in, out, rounder<S>(f, o), st);
}
/// In place.
template <std::floating_point S>
void quantize(std::span<S> values, const format& f, const rounding_options& o = {}) {
  quantize(std::span<const S>(values), values, rounder<S>(f, o));
}
template <std::floating_point S>
void quantize(std::span<S> values, const format& f, const rounding_options& o, rounding_stats& st) {
  quantize(std::span<const S>(values), values, rounder<S>(f, o), st);
}

/// out[i] = code of in[i] rounded by r, up to the first value without a code (NaN or Inf into
/// an all_finite format); returns that value's index, or in.size() when every value has a code.
template <std::floating_point S, std::unsigned_integral C>
std::size_t try_encode(std::span<const S> in, std::span<C> out, const rounder<S>& r) {
  detail::check_same_size(in.size(), out.size());
  const format& f = r.plan().fmt;
  if (f.bit_width() > static_cast<int>(sizeof(C) * 8))
    throw std::invalid_argument("minifloat::encode: codes of " + to_string(f) + " do not fit the output type");
  if constexpr (sizeof(S) == 4) {
    if (r.widened()) {  // rounds_through_double (E8M0): the double kernels, a chunk at a time
      const rounder<double> wide = r.through_double();
      double buffer[detail::widen_chunk];
      for (std::size_t start = 0; start < in.size(); start += detail::widen_chunk) {
        const std::size_t n = std::min(detail::widen_chunk, in.size() - start);
        for (std::size_t i = 0; i < n; ++i) buffer[i] = in[start + i];
        const std::size_t done =
            try_encode(std::span<const double>(buffer, n), out.subspan(start, n), wide.advanced(start));
        if (done < n) return start + done;
      }
      return in.size();
    }
  }
  switch (r.plan().mode) {
    case rounding::nearest_even: return detail::encode_lanes<rounding::nearest_even>(in, out, r);
    case rounding::nearest_away: return detail::encode_lanes<rounding::nearest_away>(in, out, r);
    case rounding::toward_zero: return detail::encode_lanes<rounding::toward_zero>(in, out, r);
    case rounding::stochastic: return detail::encode_lanes<rounding::stochastic>(in, out, r);
    case rounding::toward_positive: return detail::encode_lanes<rounding::toward_positive>(in, out, r);
    case rounding::toward_negative: return detail::encode_lanes<rounding::toward_negative>(in, out, r);
    case rounding::to_odd: return detail::encode_lanes<rounding::to_odd>(in, out, r);
  }
  return 0;
}

/// out[i] = code of in[i] rounded to f. Throws std::domain_error at the first value without a
/// code (NaN or Inf into an all_finite format); the codes before it are written.
template <std::floating_point S, std::unsigned_integral C>
void encode(std::span<const S> in, std::span<C> out, const rounder<S>& r) {
  if (const std::size_t first = try_encode(in, out, r); first < in.size())
    throw std::domain_error("minifloat::encode: element " + std::to_string(first) + " has no code in " +
                            to_string(r.plan().fmt));
}
template <std::floating_point S, std::unsigned_integral C>
void encode(std::span<const S> in, std::span<C> out, const format& f, const rounding_options& o = {}) {
  encode(in, out, rounder<S>(f, o));
}

/// out[i] = value of code in[i]; bits above the format's width are ignored.
template <std::floating_point S, std::unsigned_integral C>
void decode(std::span<const C> in, std::span<S> out, const format& f) {
  detail::check_same_size(in.size(), out.size());
  if constexpr (sizeof(S) == 4) {
    if (rounds_through_double<S>(f)) {  // E8M0: every value is a float, 2^-127 a subnormal; via double
      const detail::codec_plan<double> c = detail::make_codec_plan<double>(f);
      double buffer[detail::widen_chunk];
      for (std::size_t start = 0; start < in.size(); start += detail::widen_chunk) {
        const std::size_t n = std::min(detail::widen_chunk, in.size() - start);
        detail::decode_lanes(in.subspan(start, n), std::span<double>(buffer, n), c);
        for (std::size_t i = 0; i < n; ++i) out[start + i] = static_cast<float>(buffer[i]);
      }
      return;
    }
  }
  if (auto p = source_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat::format: " + p);
  detail::decode_lanes(in, out, detail::make_codec_plan<S>(f));
}

// --- any contiguous range ---------------------------------------------------------------------

namespace detail {
template <class T>
inline constexpr bool is_fp_type = false;
template <format F>
inline constexpr bool is_fp_type<basic_fp<F>> = true;

/// A contiguous, sized range of elements of type satisfying Element (const or not).
template <class R>
concept contiguous_sized = std::ranges::contiguous_range<R> && std::ranges::sized_range<R>;
template <class R>
using element_t = std::remove_cv_t<std::ranges::range_value_t<R>>;
template <class R>
concept float_range = contiguous_sized<R> && std::floating_point<element_t<R>>;
template <class R>
concept mutable_range = contiguous_sized<R> &&
                        !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;
template <class R>
concept fp_range = contiguous_sized<R> && is_fp_type<element_t<R>>;
template <class R>
concept code_range = contiguous_sized<R> && std::unsigned_integral<element_t<R>>;

template <class R>
auto const_span(const R& r) {
  return std::span<const element_t<R>>(std::ranges::data(r), std::ranges::size(r));
}
template <class R>
auto mutable_span(R& r) {
  return std::span<element_t<R>>(std::ranges::data(r), std::ranges::size(r));
}
/// Codes of an fp<> array pass through a small buffer: fp<> objects are copied as bytes
/// (trivially copyable, the size of their code) rather than aliased as integers.
inline constexpr std::size_t fp_chunk = 1024;
}  // namespace detail

/// In place, any mutable contiguous range of float or double.
template <class R>
  requires(detail::float_range<R> && detail::mutable_range<R>)
void quantize(R&& values, const format& f, const rounding_options& o = {}) {
  auto v = detail::mutable_span(values);
  quantize(std::span<const detail::element_t<R>>(v), v, f, o);
}
template <class R>
  requires(detail::float_range<R> && detail::mutable_range<R>)
void quantize(R&& values, const format& f, const rounding_options& o, rounding_stats& st) {
  auto v = detail::mutable_span(values);
  quantize(std::span<const detail::element_t<R>>(v), v, f, o, st);
}
/// Out of place, any contiguous ranges of the same floating type.
template <detail::float_range In, class Out>
  requires(detail::float_range<Out> && detail::mutable_range<Out>)
void quantize(const In& in, Out&& out, const format& f, const rounding_options& o = {}) {
  quantize(detail::const_span(in), detail::mutable_span(out), f, o);
}
template <detail::float_range In, class Out>
  requires(detail::float_range<Out> && detail::mutable_range<Out>)
void quantize(const In& in, Out&& out, const format& f, const rounding_options& o, rounding_stats& st) {
  quantize(detail::const_span(in), detail::mutable_span(out), f, o, st);
}
/// A sequential_rounder takes as many indices as there are values (see round.hpp).
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, sequential_rounder<S>& r) {
  detail::check_same_size(in.size(), out.size());
  quantize(in, out, r.take(in.size()));
}
template <class R>
  requires(detail::float_range<R> && detail::mutable_range<R>)
void quantize(R&& values, sequential_rounder<detail::element_t<R>>& r) {
  auto v = detail::mutable_span(values);
  quantize(std::span<const detail::element_t<R>>(v), v, r);
}

/// Floats rounded into an array of fp<> values (the format and the implicit overflow rule of
/// the element type unless `o` says otherwise). Throws std::domain_error at the first value
/// without a code (NaN into an all_finite type); the values before it are written.
template <detail::float_range In, class Out>
  requires(detail::fp_range<Out> && detail::mutable_range<Out>)
void quantize(const In& in, Out&& out, const rounding_options& o) {
  using T = detail::element_t<Out>;
  using S = detail::element_t<In>;
  using C = typename T::storage_type;
  static_assert(sizeof(T) == sizeof(C) && std::is_trivially_copyable_v<T>);
  detail::check_same_size(std::ranges::size(in), std::ranges::size(out));
  const auto src = detail::const_span(in);
  T* dst = std::ranges::data(out);
  const rounder<S> r(T::fmt, o);
  C codes[detail::fp_chunk];
  for (std::size_t start = 0; start < src.size(); start += detail::fp_chunk) {
    const std::size_t n = std::min(detail::fp_chunk, src.size() - start);
    const std::size_t done = try_encode(src.subspan(start, n), std::span<C>(codes, n), r.advanced(start));
    std::memcpy(static_cast<void*>(dst + start), codes, done * sizeof(C));
    if (done < n)
      throw std::domain_error("minifloat::quantize: element " + std::to_string(start + done) + " has no code in " +
                              to_string(T::fmt));
  }
}
template <detail::float_range In, class Out>
  requires(detail::fp_range<Out> && detail::mutable_range<Out>)
void quantize(const In& in, Out&& out) {
  using T = detail::element_t<Out>;
  quantize(in, out,
           rounding_options{rounding::nearest_even,
                            T::fmt.encoding == specials::all_finite ? overflow::saturate : overflow::infinity});
}
/// The values of an array of fp<> values, exactly, in float or double.
template <detail::fp_range In, class Out>
  requires(detail::float_range<Out> && detail::mutable_range<Out>)
void decode(const In& in, Out&& out) {
  using T = detail::element_t<In>;
  using C = typename T::storage_type;
  detail::check_same_size(std::ranges::size(in), std::ranges::size(out));
  const T* src = std::ranges::data(in);
  const auto dst = detail::mutable_span(out);
  C codes[detail::fp_chunk];
  for (std::size_t start = 0; start < dst.size(); start += detail::fp_chunk) {
    const std::size_t n = std::min(detail::fp_chunk, dst.size() - start);
    std::memcpy(codes, static_cast<const void*>(src + start), n * sizeof(C));
    decode(std::span<const C>(codes, n), dst.subspan(start, n), T::fmt);
  }
}

/// encode / decode of codes with any contiguous ranges.
template <detail::float_range In, class Out>
  requires(detail::code_range<Out> && detail::mutable_range<Out>)
void encode(const In& in, Out&& codes, const format& f, const rounding_options& o = {}) {
  encode(detail::const_span(in), detail::mutable_span(codes), f, o);
}
template <detail::code_range In, class Out>
  requires(detail::float_range<Out> && detail::mutable_range<Out>)
void decode(const In& codes, Out&& out, const format& f) {
  decode(detail::const_span(codes), detail::mutable_span(out), f);
}

}  // namespace minifloat
