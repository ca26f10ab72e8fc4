// minifloat/round.hpp — the one rounding core: a float or double value to any format.
//
// Every path of the library (the scalar functions here, the template type in fp.hpp, the bulk
// kernels in bulk.hpp) calls `detail::round_bits`; nothing else holds rounding bit logic.
// Semantics (docs/formats.md states them with examples):
//  - nearest_even (default), nearest_away (QPyTorch's and the precision-assignment paper's
//    "nearest"), toward_zero (truncation), stochastic: round away from zero with probability
//    (|x| - down) / (up - down) (the corrected form of the mixed-precision paper's Appendix A (Micikevicius et al., ICLR 2018, arXiv:1710.03740)),
//    toward_positive / toward_negative (IEEE 754 roundTowardPositive / Negative), and to_odd
//    (truncate, then set the last kept bit when anything was dropped: rounding to odd at
//    p + 2 bits and then to p bits equals one rounding, Boldo & Melquiond 2008);
//  - subnormals per format; with subnormals off a result below the smallest normal is flushed
//    to a zero of the input's sign after rounding (flush_mode::after_rounding, the default), or
//    the input is rounded onto the format's actual values ±0, ±min normal
//    (flush_mode::onto_values);
//  - a finite result beyond the largest finite value becomes ±max (overflow::saturate) or, under
//    overflow::infinity, ±Inf for ieee and all_finite formats (all_finite: an emulation-level
//    signal for loss scaling) and NaN for the formats that have a NaN but no Inf (nan_only such as
//    OCP E4M3, fnuz, E8M0). toward_zero and to_odd never leave the finite range, and the directed
//    modes do not in the direction they round away from (IEEE 754);
//  - ±Inf input gives ±Inf (NaN where the format has NaN but no Inf) or ±max per policy; NaN input
//    gives NaN (sign and payload kept, quiet bit set); signed zero is kept;
//  - fnuz formats have no -0 (a zero result is +0) and E8M0 (unsigned_exponent) no zero and no
//    sign (zero and negative inputs give NaN, tiny positive ones its smallest value, whatever the
//    flush mode: E8M0 has no zero to flush to).
// The result is returned in the source type; encode/decode convert to and from bit codes.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backend.hpp"
#include "config.hpp"
#include "detail/lanes.hpp"
#include "format.hpp"
#include "random.hpp"
#include "stats.hpp"

namespace minifloat {

enum class rounding : std::uint8_t {
  nearest_even,
  nearest_away,
  toward_zero,
  stochastic,
  toward_positive,  ///< IEEE roundTowardPositive (ceiling)
  toward_negative,  ///< IEEE roundTowardNegative (floor)
  to_odd,           ///< truncate and set the last kept bit if inexact (a safe first rounding)
};
enum class overflow : std::uint8_t { saturate, infinity };

/// Formats without subnormals: what happens to a result below the smallest normal.
enum class flush_mode : std::uint8_t {
  after_rounding,  ///< round as if subnormals existed, then replace a result below min normal by ±0
  onto_values,     ///< round correctly onto the format's values there: ±0 and ±min normal
};

/// Per-call options. `index` is the element index of the value (scalar) or of the first value
/// (bulk); with `seed` it selects the random draw of stochastic rounding.
struct rounding_options {
  rounding mode = rounding::nearest_even;
  overflow on_overflow = overflow::infinity;
  int random_bits = 0;  ///< stochastic only: 1..width of the source word; 0 = the whole word (32 / 64)
  std::uint64_t seed = 0;
  std::uint64_t index = 0;
  flush_mode flush = flush_mode::after_rounding;  ///< formats without subnormals only
  /// Bulk calls only: whether they may take a fast backend or must run the reference core
  /// (backend.hpp). Results are the same bits either way.
  backend_policy backend = backend_policy::from_environment;
};

/// The IEEE 754 layout of a source type.
template <std::floating_point S>
struct source_layout {
  static_assert(std::numeric_limits<S>::is_iec559 && (sizeof(S) == 4 || sizeof(S) == 8),
                "minifloat rounds from IEEE binary32 (float) or binary64 (double)");
  using bits = std::conditional_t<sizeof(S) == 4, std::uint32_t, std::uint64_t>;
  static constexpr int width = static_cast<int>(sizeof(S) * 8);
  static constexpr int mantissa_bits = std::numeric_limits<S>::digits - 1;
  static constexpr int bias = std::numeric_limits<S>::max_exponent - 1;
  static constexpr int emax = bias;
  static constexpr int emin = 1 - bias;
  static constexpr bits sign_mask = bits{1} << (width - 1);
  static constexpr bits abs_mask = ~sign_mask;
  static constexpr bits inf_bits = ((bits{1} << (width - 1 - mantissa_bits)) - 1) << mantissa_bits;
  static constexpr bits quiet_bit = bits{1} << (mantissa_bits - 1);
  static constexpr bits mantissa_mask = (bits{1} << mantissa_bits) - 1;
};

/// Why `f` cannot be rounded to by S's own plan, or an empty string. Every value of the format must
/// be a value of S, so results are exact in S. (rounder<float> also takes the formats that
/// rounds_through_double, E8M0, through the double plan.)
template <std::floating_point S>
std::string source_problem(const format& f) {
  using src = source_layout<S>;
  if (auto p = f.problem(); !p.empty()) return p;
  const char* name = sizeof(S) == 4 ? "float" : "double";
  if (f.mantissa_bits > src::mantissa_bits)
    return "mantissa_bits = " + std::to_string(f.mantissa_bits) + " is more than " + name + " holds (" +
           std::to_string(src::mantissa_bits) + ")";
  if (f.emax() > src::emax || f.emin() < src::emin)
    return "exponent_bias = " + std::to_string(f.exponent_bias) + " with exponent_bits = " +
           std::to_string(f.exponent_bits) + " gives exponents " + std::to_string(f.emin()) + ".." +
           std::to_string(f.emax()) + ", outside " + name + "'s normal range " + std::to_string(src::emin) +
           ".." + std::to_string(src::emax);
  return {};
}

/// Everything the core needs, derived once from (format, options) for source type S.
template <std::floating_point S>
struct rounding_plan {
  using bits = typename source_layout<S>::bits;
  format fmt{};
  rounding mode = rounding::nearest_even;
  bits d_normal = 0;          ///< source mantissa bits dropped in the format's normal range
  bits emin_field = 1;        ///< source exponent field of the format's smallest normal binade
  bits max_bits = 0;          ///< |max finite| as source bits
  bits overflow_bits = 0;     ///< result for a finite overflow: max or Inf
  bits inf_result_bits = 0;   ///< result for an Inf input: max or Inf
  bits flush_below_bits = 0;  ///< results below this become zero (smallest normal, or 0 with subnormals)
  bits denorm_min_bits = 0;   ///< smallest positive value as source bits
  bits threshold_bits = 0;    ///< inputs with |x| >= this count as overflows
  bits random_mask = 0;       ///< keeps the top random_bits of a random word
  bits subnormal_drop = 0;    ///< extra bits dropped below the smallest normal (flush_mode::onto_values)
  bool plain_path = true;     ///< mantissa_bits >= 1: the single-binade shortcut of the bulk kernels is exact
  bits plain_even_bias = 0;   ///< half a step minus one (0 without a step): nearest_even's addend
  bits plain_odd_mask = 0;    ///< 1, or 0 without a step: picks the kept parity bit
  bits plain_half = 0;        ///< half a step: nearest_away's addend
  bits plain_keep = 0;        ///< clears the dropped bits
  bits plain_below = 0;       ///< the dropped bits (a step minus one)
  bits underflow_bits = 0;    ///< result below flush_below_bits: 0, or the smallest value (unsigned_exponent)
  bool unsigned_zero = false; ///< fnuz: a zero result is +0 (the -0 code is NaN)
  bool positive_only = false; ///< unsigned_exponent: zero and negative inputs give NaN
  backend_policy policy = backend_policy::from_environment;  ///< rounding_options::backend, for the bulk kernels' choice

  /// The format's smallest normal value, as source bits.
  MINIFLOAT_HD constexpr bits smallest_normal_bits() const { return emin_field << source_layout<S>::mantissa_bits; }
  /// True when a finite result beyond max becomes max itself (saturation, or a format that
  /// stays finite), so the kernels may clamp with a minimum instead of selecting.
  MINIFLOAT_HD constexpr bool saturates() const { return overflow_bits == max_bits; }
  /// True when every finite input rounds onto the signed grid of the format's values, subnormals
  /// included, keeping its sign: no flushing of either kind, no unsigned zero (fnuz) and no
  /// unsigned exponent (E8M0). The bulk kernels' stochastic float form and the split's successor
  /// codes rely on it.
  MINIFLOAT_HD constexpr bool keeps_signed_grid() const {
    return flush_below_bits == 0 && subnormal_drop == 0 && !unsigned_zero && !positive_only;
  }
};

/// Builds the plan; throws std::invalid_argument naming the bad field (a compile error when
/// evaluated as a constant expression).
template <std::floating_point S>
constexpr rounding_plan<S> make_plan(const format& f, const rounding_options& o = {});

/// True when every value of f is a value of S (checkable at compile time).
template <std::floating_point S>
MINIFLOAT_HD constexpr bool fits_source(const format& f) {
  using src = source_layout<S>;
  return f.exponent_bits >= 1 && f.exponent_bits <= 11 && f.mantissa_bits >= 0 &&
         f.mantissa_bits <= src::mantissa_bits && f.emax() <= src::emax && f.emin() >= src::emin &&
         !(f.encoding == specials::ieee && (f.exponent_bits < 2 || f.mantissa_bits < 1)) &&
         !(f.encoding == specials::nan_only && f.mantissa_bits < 1) &&
         !(f.encoding == specials::unsigned_exponent && (f.mantissa_bits != 0 || f.subnormals));
}

/// True when S is float and f is a format float's own plan cannot serve although every value of
/// f is a float: an unsigned_exponent format (E8M0) whose smallest value lies below float's normal
/// range (E8M0's 2^-127 is a float subnormal; the core counts binades from the source's smallest
/// normal, so a format binade inside the source's subnormals has no place in a float plan).
/// rounder<float> rounds such formats through the double plan instead: float -> double is exact,
/// the double core rounds, and the result (a power of two in float's range, or NaN) converts back
/// exactly. Only these formats take that detour, and it is chosen once per call: the float plan
/// and the SIMD kernels of every other format are unchanged (no per-lane test, no wider lanes);
/// the scalar rounder<float> pays one predictable flag test per value. Extending the float plan
/// instead would put a leading-bit count on the core's subnormal path for every format.
template <std::floating_point S>
MINIFLOAT_HD constexpr bool rounds_through_double(const format& f) {
  if constexpr (sizeof(S) == 8) {
    return false;
  } else {
    return f.encoding == specials::unsigned_exponent && !fits_source<float>(f) && fits_source<double>(f) &&
           f.emin() >= std::numeric_limits<float>::min_exponent - std::numeric_limits<float>::digits &&  // -149
           f.emax() <= std::numeric_limits<float>::max_exponent - 1;
  }
}

/// Why the conversion functions (rounder, quantize, encode, decode) cannot take format f for
/// values of type S; empty when they can, through S's own plan or through double
/// (rounds_through_double). Stricter users (packed storage, block elements) use source_problem.
template <std::floating_point S>
std::string conversion_problem(const format& f) {
  return rounds_through_double<S>(f) ? std::string{} : source_problem<S>(f);
}

namespace detail {
/// The plan without validation: for formats already checked (the template type checks at compile time).
template <std::floating_point S>
MINIFLOAT_HD constexpr rounding_plan<S> plan_unchecked(const format& f, const rounding_options& o) {
  using src = source_layout<S>;
  using bits = typename src::bits;
  rounding_plan<S> p;
  p.fmt = f;
  p.mode = o.mode;
  const int shift = src::mantissa_bits - f.mantissa_bits;
  p.d_normal = static_cast<bits>(shift);
  p.emin_field = static_cast<bits>(f.emin() + src::bias);
  p.max_bits = (static_cast<bits>(f.emax() + src::bias) << src::mantissa_bits) |
               (static_cast<bits>(f.max_mantissa_field()) << shift);
  // The midpoint above max; when the format keeps every source bit there is no midpoint and the
  // next source value already lies beyond it.
  p.threshold_bits = shift > 0 ? p.max_bits + (bits{1} << (shift - 1)) : p.max_bits + 1;
  const bool saturate = o.on_overflow == overflow::saturate;
  // A format with NaN but without Inf (OCP E4M3, fnuz, E8M0) signals overflow with NaN, as the
  // specs' non-saturating conversions do; all_finite formats keep the emulation-level Inf.
  const bool nan_for_inf = f.encoding == specials::nan_only || f.encoding == specials::fnuz ||
                           f.encoding == specials::unsigned_exponent;
  const bits infinity_bits = nan_for_inf ? (src::inf_bits | src::quiet_bit) : src::inf_bits;
  const bool stays_finite = o.mode == rounding::toward_zero || o.mode == rounding::to_odd;
  p.overflow_bits = (saturate || stays_finite) ? p.max_bits : infinity_bits;
  p.inf_result_bits = saturate ? p.max_bits : infinity_bits;
  // E8M0 has no zero: its tiny values always go to its smallest value (underflow_bits below).
  const bool onto_values =
      !f.subnormals && o.flush == flush_mode::onto_values && f.encoding != specials::unsigned_exponent;
  p.flush_below_bits = f.subnormals || onto_values ? 0 : p.smallest_normal_bits();
  p.subnormal_drop = onto_values ? static_cast<bits>(f.mantissa_bits) : 0;
  // The smallest positive value: of the format, or of its subnormals when they are flushed after rounding.
  const int denorm_exp = onto_values ? f.emin() : f.emin() - f.mantissa_bits;  // >= source denorm exponent
  p.denorm_min_bits = denorm_exp >= src::emin ? static_cast<bits>(denorm_exp + src::bias) << src::mantissa_bits
                                              : bits{1} << (denorm_exp - (src::emin - src::mantissa_bits));
  const int r = o.random_bits == 0 ? src::width : o.random_bits;
  p.random_mask = r == src::width ? ~bits{0} : ~((bits{1} << (src::width - r)) - 1);
  p.plain_path = f.mantissa_bits >= 1;
  const bits step = bits{1} << shift;
  p.plain_half = step >> 1;
  p.plain_even_bias = shift == 0 ? 0 : p.plain_half - 1;
  p.plain_odd_mask = shift == 0 ? 0 : 1;
  p.plain_keep = ~(step - 1);
  p.plain_below = step - 1;
  p.unsigned_zero = f.encoding == specials::fnuz;
  p.positive_only = f.encoding == specials::unsigned_exponent;
  p.underflow_bits = p.positive_only ? p.flush_below_bits : 0;
  p.policy = o.backend;
  return p;
}
}  // namespace detail

template <std::floating_point S>
constexpr rounding_plan<S> make_plan(const format& f, const rounding_options& o) {
  using src = source_layout<S>;
#if defined(__CUDA_ARCH__)
  // Device code cannot throw: an invalid format or option stops the kernel.
  if (!fits_source<S>(f) || o.random_bits < 0 || o.random_bits > src::width) __trap();
#else
  if (!std::is_constant_evaluated()) {
    if (auto p = source_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat::format: " + p);
  } else if (!fits_source<S>(f)) {
    throw std::invalid_argument("minifloat::format does not fit the source type");
  }
  if (o.random_bits < 0 || o.random_bits > src::width)
    throw std::invalid_argument("minifloat::rounding_options: random_bits = " + std::to_string(o.random_bits) +
                                " is outside 0.." + std::to_string(src::width));
#endif
  return detail::plan_unchecked<S>(f, o);
}

namespace detail {

enum class lane_path : std::uint8_t { plain, finite, any };

/// lane_path::plain's condition (below) for one value: the format has a mantissa bit and |u| is
/// zero or lies from the smallest normal up to, not including, the overflow threshold. Such a
/// value has nothing to count but itself. The CUDA kernels take the plain path for a warp whose
/// values all meet it; the bulk kernels test the same condition a register at a time.
template <std::floating_point S>
MINIFLOAT_HD constexpr bool plain_input(const rounding_plan<S>& p, typename source_layout<S>::bits u) {
  const auto a = u & ~source_layout<S>::sign_mask;
  return p.plain_path && (a == 0 || (a >= p.smallest_normal_bits() && a < p.threshold_bits));
}

/// Stochastic rounding's decision, lane-wise: whether a value whose dropped part is `fraction`
/// (the dropped bits as a W-bit fixed-point fraction of a step, aligned to the word's top) rounds
/// away from zero with the uniform word `random`. Both keep only their top random_bits, so
/// P(away) = floor(fraction * 2^random_bits) / 2^random_bits. Every stochastic path decides by it:
/// the core's general path, plain_stochastic_carries, and the float forms (bulk.hpp) and split
/// storage, which find the fraction their own way.
/// Written as (random | low) < fraction, low = ~random_mask: one operation fewer than comparing
/// both words masked, and the same decision. With a = random & random_mask and s = low + 1 (one
/// step of the kept bits), a and fraction & random_mask are multiples of s, so a < fraction &
/// random_mask <=> a + s <= fraction & random_mask <=> a + s <= fraction (the masked fraction is
/// the largest multiple of s not above fraction; a + s = 2^W exceeds both) <=> a + low < fraction,
/// and a + low = random | low: the threshold, which a fraction must exceed (stochastic_threshold;
/// the AVX-512 paths of split storage compare with it into a mask register).
template <std::floating_point S, class L>
constexpr L stochastic_threshold(const rounding_plan<S>& p, L random) {
  return random | static_cast<typename source_layout<S>::bits>(~p.random_mask);
}
template <std::floating_point S, class L>
constexpr auto stochastic_rounds_away(const rounding_plan<S>& p, L fraction, L random) {
  return stochastic_threshold(p, random) < fraction;
}

/// What stochastic rounding on lane_path::plain (below) adds to the source bits before clearing
/// the dropped ones: the complemented random word's top d bits, for d dropped bits. It carries
/// into the kept bits exactly when stochastic_rounds_away holds, so both paths draw the same
/// results.
template <std::floating_point S, class L>
constexpr L plain_stochastic_addend(const rounding_plan<S>& p, L random) {
  constexpr int W = source_layout<S>::width;
  return (~random & p.random_mask) >> (W - 1 - static_cast<int>(p.d_normal)) >> 1;
}

/// Lane-wise, whether stochastic rounding on lane_path::plain rounds u away from zero, before
/// any saturation (where plain_stochastic_addend carries): stochastic_rounds_away of the d
/// dropped bits moved to the word's top (two shifts, so that d = 0 gives 0).
template <std::floating_point S, class L>
constexpr auto plain_stochastic_carries(const rounding_plan<S>& p, L u, L random) {
  constexpr int W = source_layout<S>::width;
  return stochastic_rounds_away(p, (u << (W - 1 - static_cast<int>(p.d_normal))) << 1, random);
}

/// The rounding core. `u` holds source bits (a scalar or a SIMD vector of them), `random` a
/// uniform word per value (read by stochastic rounding only). Returns the rounded value's bits.
///
/// `Path` narrows what the caller guarantees about the inputs, so the bulk kernels can skip work
/// a register does not need; every path gives the same bits as lane_path::any for its inputs.
///  - plain: every |u| is zero or at least the format's smallest normal and below its overflow
///    threshold, and the format has a mantissa bit, so one constant shift serves all values and
///    only stochastic rounding can step beyond max;
///  - finite: no NaN or Inf;
///  - any: no assumption (the scalar entry point).
///
/// How it works: sig is the significand with its implicit bit, counted in units of the source's
/// ulp in x's binade; `drop` is how many of its low bits the format cannot keep there (more
/// below the smallest normal, where the format's spacing stops shrinking). Rounding sig to a
/// multiple of 2^drop and adding back the binade base gives the result's bits, because a carry
/// out of the significand lands exactly on the next binade's first value.
template <rounding Mode, lane_path Path, std::floating_point S, class L>
constexpr L round_bits(const rounding_plan<S>& p, L u, L random) {
  using src = source_layout<S>;
  using bits = typename src::bits;
  constexpr int P = src::mantissa_bits;
  constexpr int W = src::width;
  const L zero{};
  if constexpr (Path == lane_path::plain) {
    // One binade's worth of spacing for every lane: round the bit pattern itself; the sign bit is
    // untouched because no finite input carries into it.
    const int d = static_cast<int>(p.d_normal);
    L r;
    if constexpr (Mode == rounding::toward_zero) r = u & p.plain_keep;
    else if constexpr (Mode == rounding::nearest_even) r = (u + p.plain_even_bias + ((u >> d) & p.plain_odd_mask)) & p.plain_keep;
    else if constexpr (Mode == rounding::nearest_away) r = (u + p.plain_half) & p.plain_keep;
    else if constexpr (Mode == rounding::stochastic) {
      r = (u + plain_stochastic_addend(p, random)) & p.plain_keep;
    } else if constexpr (Mode == rounding::to_odd) {
      // (dropped + below) reaches the step bit exactly when a dropped bit is set: no compare.
      r = (u & p.plain_keep) | (((u & p.plain_below) + p.plain_below) & (p.plain_below + 1));
    } else {  // directed: up in magnitude on the lanes whose sign points the mode's way
      const L ceiling = (u + p.plain_below) & p.plain_keep;
      const L truncated = u & p.plain_keep;
      if constexpr (Mode == rounding::toward_positive) r = select((u & src::sign_mask) == zero, ceiling, truncated);
      else r = select((u & src::sign_mask) == zero, truncated, ceiling);
    }
    if constexpr (Mode == rounding::stochastic || Mode == rounding::to_odd || Mode == rounding::toward_positive ||
                  Mode == rounding::toward_negative)
      r = select((r << 1) > (p.max_bits << 1), (r & src::sign_mask) | p.overflow_bits, r);
    if (p.unsigned_zero) r = select(r == src::sign_mask, zero, r);
    return r;
  }
  const L one = zero + 1;
  const L sign = u & src::sign_mask;
  const L a = u ^ sign;

  const L e = lane_max(a >> P, one);  // source subnormals share the first binade's spacing
  L drop = lane_max(e, zero + p.emin_field) - e + p.d_normal;
  if (p.subnormal_drop != 0) drop = select(a < p.smallest_normal_bits(), drop + p.subnormal_drop, drop);
  const L base = (e - 1) << P;
  const L sig = a - base;
  // Clamped so shifts stay defined: at P + 2 dropped bits every significand is below half a step.
  const L step_shift = lane_min(drop, zero + bits{P + 2});
  // Stochastic, directed and to_odd: all ones where the result moves one step away from zero.
  [[maybe_unused]] L round_up;
  constexpr bool steps_away = Mode == rounding::stochastic || Mode == rounding::toward_positive ||
                              Mode == rounding::toward_negative || Mode == rounding::to_odd;
  // Directed modes: all ones on the lanes whose sign lets them round up in magnitude.
  [[maybe_unused]] L away;
  if constexpr (Mode == rounding::toward_positive) away = select(sign == zero, ~zero, zero);
  if constexpr (Mode == rounding::toward_negative) away = select(sign == zero, zero, ~zero);
  const L below = (one << step_shift) - 1;  // the dropped bits

  L rounded;
  if constexpr (Mode == rounding::toward_zero) {
    rounded = sig & ~below;
  } else if constexpr (Mode == rounding::nearest_even) {
    // Add just under half a step, or exactly half when the kept part is odd: a tie then carries
    // only from an odd kept part. With nothing dropped the addend is 0.
    rounded = (sig + ((below + ((sig >> step_shift) & 1)) >> 1)) & ~below;
  } else if constexpr (Mode == rounding::nearest_away) {
    rounded = (sig + ((below + 1) >> 1)) & ~below;
  } else if constexpr (Mode == rounding::toward_positive || Mode == rounding::toward_negative) {
    const L rem = sig & below;
    round_up = away & select(rem != zero, ~zero, zero);
    rounded = (sig - rem) + (round_up & (below + 1));
  } else if constexpr (Mode == rounding::to_odd) {
    // Truncate; when inexact the last kept bit is set, which steps up only from an even part.
    const L rem = sig & below;
    round_up = select(rem != zero, ~zero, zero);
    rounded = (sig - rem) | (round_up & (below + 1));
  } else {
    // The fraction rem / 2^drop as a W-bit fixed-point number, for stochastic_rounds_away.
    const L rem = sig & below;
    const L left = lane_min(zero + bits{W} - lane_min(drop, zero + bits{W}), zero + bits{W - 1});
    const L right = lane_min(lane_max(drop, zero + bits{W}) - bits{W}, zero + bits{W - 1});
    const L fraction = select(drop <= bits{W}, rem << left, rem >> right);
    round_up = select(stochastic_rounds_away(p, fraction, random), ~zero, zero);
    rounded = (sig - rem) + (round_up & (below + 1));
  }
  L result = select(rounded == zero, zero, base + rounded);
  if constexpr (steps_away) {
    // Beyond P + 1 dropped bits the one step up is the format's smallest positive value.
    result = select(drop > bits{P + 1}, round_up & p.denorm_min_bits, result);
  }
  if (p.flush_below_bits != 0) result = select(result < p.flush_below_bits, zero + p.underflow_bits, result);
  if constexpr (Mode == rounding::toward_positive || Mode == rounding::toward_negative) {
    // Only lanes that round up in magnitude get the overflow result; the others stay at ±max.
    const L over = (away & p.overflow_bits) | (~away & p.max_bits);
    result = select(result > p.max_bits, over, result);
  } else {
    result = select(result > p.max_bits, zero + p.overflow_bits, result);
  }
  if constexpr (Path == lane_path::any) {
    const L special = select(a > src::inf_bits, a | src::quiet_bit, zero + p.inf_result_bits);
    result = select(a >= src::inf_bits, special, result);
  }
  if (p.unsigned_zero) return result | select(result == zero, zero, sign);
  if (p.positive_only) return select((sign != zero) | (a == zero), a | src::inf_bits | src::quiet_bit, result);
  return result | sign;
}

/// Adds one value's classification to `st` (scalar helper; the bulk kernels count in SIMD).
template <std::floating_point S>
MINIFLOAT_HD constexpr void count(const rounding_plan<S>& p, typename source_layout<S>::bits u,
                                  typename source_layout<S>::bits result, rounding_stats& st) {
  using src = source_layout<S>;
  const auto a = u & src::abs_mask;
  st.values += 1;
  st.overflows += a >= p.threshold_bits;
  st.underflows += (a != 0) & (a < src::inf_bits) & ((result & src::abs_mask) == 0);
  st.nans += a > src::inf_bits;
  st.infinities += a == src::inf_bits;
}

/// The scalar entry: dispatches the mode once, draws the random word for stochastic rounding.
template <std::floating_point S>
MINIFLOAT_HD constexpr typename source_layout<S>::bits round_one(const rounding_plan<S>& p,
                                                                 typename source_layout<S>::bits u,
                                                                 const counter_rng& rng, std::uint64_t index) {
  switch (p.mode) {
    case rounding::nearest_even: return round_bits<rounding::nearest_even, lane_path::any>(p, u, decltype(u){});
    case rounding::nearest_away: return round_bits<rounding::nearest_away, lane_path::any>(p, u, decltype(u){});
    case rounding::toward_zero: return round_bits<rounding::toward_zero, lane_path::any>(p, u, decltype(u){});
    case rounding::toward_positive:
      return round_bits<rounding::toward_positive, lane_path::any>(p, u, decltype(u){});
    case rounding::toward_negative:
      return round_bits<rounding::toward_negative, lane_path::any>(p, u, decltype(u){});
    case rounding::to_odd: return round_bits<rounding::to_odd, lane_path::any>(p, u, decltype(u){});
    case rounding::stochastic: {
      decltype(u) r;
      if constexpr (sizeof(S) == 4) r = rng.bits32(index);
      else r = rng.bits64(index);
      return round_bits<rounding::stochastic, lane_path::any>(p, u, r);
    }
  }
  return u;
}

}  // namespace detail

/// A validated plan with its options: reuse one to round many scalars without re-validating.
///
/// A rounder<float> for a format that rounds_through_double (E8M0) holds the double plan and
/// rounds every value through it, so its results, counts and stochastic draws (the double path's
/// 64-bit words) are those of rounder<double> on the same value; its plan() then carries only the
/// format and the mode, and the bulk functions run such a rounder's through_double() in chunks.
template <std::floating_point S>
class rounder {
  struct no_widening {};
  using wide_plan = std::conditional_t<sizeof(S) == 4, rounding_plan<double>, no_widening>;

 public:
  using bits = typename source_layout<S>::bits;
  constexpr rounder(const format& f, const rounding_options& o = {}) : rng_{o.seed}, first_index_(o.index) {
    if constexpr (sizeof(S) == 4) {
      if (rounds_through_double<S>(f)) {
        wide_ = make_plan<double>(f, o);
        widened_ = true;
        plan_.fmt = f;
        plan_.mode = o.mode;
        return;
      }
    }
    plan_ = make_plan<S>(f, o);
  }

  /// Rounds x; `index` picks the random draw (stochastic rounding only).
  MINIFLOAT_HD constexpr S operator()(S x, std::uint64_t index) const {
    if constexpr (sizeof(S) == 4)
      if (widened_) return static_cast<S>(std::bit_cast<double>(detail::round_one(wide_, wide_bits(x), rng_, index)));
    return std::bit_cast<S>(detail::round_one(plan_, std::bit_cast<bits>(x), rng_, index));
  }
  MINIFLOAT_HD constexpr S operator()(S x) const { return (*this)(x, first_index_); }
  MINIFLOAT_HD constexpr S operator()(S x, std::uint64_t index, rounding_stats& st) const {
    if constexpr (sizeof(S) == 4) {
      if (widened_) {
        const std::uint64_t u = wide_bits(x);
        const std::uint64_t r = detail::round_one(wide_, u, rng_, index);
        detail::count(wide_, u, r, st);
        return static_cast<S>(std::bit_cast<double>(r));
      }
    }
    const bits u = std::bit_cast<bits>(x);
    const bits r = detail::round_one(plan_, u, rng_, index);
    detail::count(plan_, u, r, st);
    return std::bit_cast<S>(r);
  }
  /// True when this rounder rounds through double (rounds_through_double); always false for double.
  constexpr bool widened() const { return widened_; }
  /// The double rounder this one rounds through: same format, options, seed and element index
  /// (only meaningful when widened()).
  constexpr rounder<double> through_double() const
    requires(sizeof(S) == 4)
  {
    rounder<double> r(wide_, rng_, first_index_);
    return r;
  }
  /// The same rounder with its first element index moved on by `offset` (for chunked calls).
  constexpr rounder advanced(std::uint64_t offset) const {
    rounder r = *this;
    r.first_index_ += offset;
    return r;
  }
  constexpr const rounding_plan<S>& plan() const { return plan_; }
  constexpr const counter_rng& rng() const { return rng_; }
  constexpr std::uint64_t first_index() const { return first_index_; }

 private:
  template <std::floating_point>
  friend class rounder;
  constexpr rounder(const rounding_plan<S>& p, const counter_rng& rng, std::uint64_t first_index)
      : plan_(p), rng_(rng), first_index_(first_index) {}
  /// float bits widened exactly to double bits (float -> double is exact).
  MINIFLOAT_HD static constexpr std::uint64_t wide_bits(S x) {
    return std::bit_cast<std::uint64_t>(static_cast<double>(x));
  }

  rounding_plan<S> plan_{};
  counter_rng rng_;
  std::uint64_t first_index_;
  bool widened_ = false;
  [[no_unique_address]] wide_plan wide_{};
};

/// A rounder that advances the element index itself: its i-th value (counting values of bulk
/// calls too) uses index options.index + i, so rounding one value n times with stochastic
/// rounding averages to the value, where a plain `rounder` repeats one draw. Results depend only
/// on (seed, starting index, the number of values rounded before, value); one object belongs to
/// one thread.
template <std::floating_point S>
class sequential_rounder {
 public:
  constexpr sequential_rounder(const format& f, const rounding_options& o = {}) : rounder_(f, o), next_(o.index) {}
  MINIFLOAT_HD constexpr S operator()(S x) { return rounder_(x, next_++); }
  MINIFLOAT_HD constexpr S operator()(S x, rounding_stats& st) { return rounder_(x, next_++, st); }
  /// Reserves the next n indices and returns the stateless rounder that starts at the first.
  constexpr rounder<S> take(std::uint64_t n) {
    const rounder<S> at = rounder_.advanced(next_ - rounder_.first_index());
    next_ += n;
    return at;
  }
  constexpr std::uint64_t next_index() const { return next_; }
  constexpr const rounding_plan<S>& plan() const { return rounder_.plan(); }

 private:
  rounder<S> rounder_;
  std::uint64_t next_;
};

/// x rounded to format f, returned in x's type.
template <std::floating_point S>
constexpr S round(S x, const format& f, const rounding_options& o = {}) {
  return rounder<S>(f, o)(x);
}
template <std::floating_point S>
constexpr S round(S x, const format& f, const rounding_options& o, rounding_stats& st) {
  return rounder<S>(f, o)(x, o.index, st);
}

}  // namespace minifloat
