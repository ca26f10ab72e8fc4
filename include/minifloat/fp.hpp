// minifloat/fp.hpp — a compile-time format as a number type: `fp<E, M, Bias, Subnormals, Encoding>`.
//
// A value is stored as its code in the smallest unsigned integer that holds 1 + E + M bits.
// Conversions go through the one rounding core (round.hpp) with a plan computed at compile time,
// from the source's own type: a double is rounded from double, never through float, and an
// integer beyond 2^53 is split so that the core rounds its low part onto the format's step there
// (integer_for_rounding): one correct rounding for every format and mode.
// Arithmetic and comparisons are computed in `compute_type` and rounded once to the format
// (nearest-even). compute_type is float when float holds every product, quotient, sum and
// square root of two values exactly enough that rounding twice equals rounding once (p_compute
// >= 2p + 2 and no over/underflow in float; Figueroa 1995), else double — see docs/formats.md.
// <cmath>-style functions, classification and std::formatter are in fp_math.hpp (included below).
// Usable in CUDA device code (compile with --expt-relaxed-constexpr). Precision-assignment paper
// §3 (formats fp(e,m,b)); OCP FP8 for e4m3/e5m2.
#pragma once

#include <bit>
#include <compare>
#include <concepts>
#include <cstdint>
#include <functional>
#include <istream>
#include <limits>
#include <ostream>
#include <stdexcept>
#include <type_traits>

#include "config.hpp"
#include "encode.hpp"
#include "format.hpp"
#include "round.hpp"
#include "stats.hpp"

namespace minifloat {

namespace detail {
template <int Bits>
using smallest_unsigned =
    std::conditional_t<(Bits <= 8), std::uint8_t,
                       std::conditional_t<(Bits <= 16), std::uint16_t,
                                          std::conditional_t<(Bits <= 32), std::uint32_t, std::uint64_t>>>;

/// float is exact enough for one-rounding arithmetic on this format (see the header comment).
MINIFLOAT_HD constexpr bool float_computes_exactly(const format& f) {
  const int p = f.mantissa_bits + 1;
  return fits_source<float>(f) && 2 * p + 2 <= 24 && 2 * (f.emax() + 1) <= 127 &&
         2 * (f.emin() - f.mantissa_bits) >= -126 && (f.emax() + 1) - (f.emin() - f.mantissa_bits) <= 127;
}

[[noreturn]] inline void no_code_for(const format& f) {
  throw std::domain_error("minifloat::basic_fp: " + to_string(f) + " has no code for this value (NaN, or Inf without saturation)");
}
[[noreturn]] inline void no_integer_for(const format& f) {
  throw std::domain_error("minifloat::basic_fp: a value of " + to_string(f) +
                          " is NaN, infinite or outside the integer type's range");
}

/// An unsigned integer of up to 64 bits as a double, rounded to odd: exact below 2^53; above,
/// the bits beyond 53 collapse into a sticky last bit.
MINIFLOAT_HD constexpr double magnitude_to_double_odd(std::uint64_t magnitude) {
  if (magnitude < (std::uint64_t{1} << 53)) return static_cast<double>(magnitude);
  const int drop = 11 - std::countl_zero(magnitude);  // 1..11 bits beyond 53
  std::uint64_t kept = magnitude >> drop;
  if ((magnitude & ((std::uint64_t{1} << drop) - 1)) != 0) kept |= 1;
  return static_cast<double>(kept) * format::exp2i(drop);  // exact: kept < 2^53
}

/// An integer of up to 64 bits as the double that the rounding core, with f's plan for the
/// options o, rounds to the integer's one correct rounding (docs/formats.md §7).
/// Below 2^53 that is the integer itself. Above, rounding the integer to odd at 53 bits would
/// keep the answer only where f's step at the integer is at least 4 of those 53-bit units (the
/// sticky bit must lie below the rounding bit: Boldo & Melquiond 2008), which fails for 52 and 53
/// significant bits, and stochastic rounding would read the sticky bit as part of its fraction.
/// So the magnitude a is split at two bits above f's step q there: a = high + low, high a multiple
/// of 4q, low < 4q. The core rounds low onto the multiples of q, in the options' mode with the
/// options' random draw, through a helper format whose values below 4q are exactly those
/// multiples (its subnormal spacing is q, its first normal binade has the same spacing); high + that
/// rounding is exact in double and one of f's values, or beyond its range, so the core's second
/// pass with f's plan applies only f's range rules (overflow, flushing, encoding).
template <std::integral I>
MINIFLOAT_HD constexpr double integer_for_rounding(const format& f, I x, const rounding_options& o) {
  static_assert(sizeof(I) <= 8, "minifloat::basic_fp converts integers of up to 64 bits");
  if constexpr (sizeof(I) <= 4) {
    return static_cast<double>(x);  // exact
  } else {
    const bool negative = x < 0;
    const std::uint64_t a = negative ? std::uint64_t{0} - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x);
    if (a < (std::uint64_t{1} << 53)) return negative ? -static_cast<double>(a) : static_cast<double>(a);
    // The exponent of f's step at a, as the core derives it from its plan (round_bits' `drop`).
    using src = source_layout<double>;
    const auto plan = plan_unchecked<double>(f, o);
    const int binade = 63 - std::countl_zero(a);  // 53..63
    const int field = binade + src::bias;
    const int emin_field = static_cast<int>(plan.emin_field);
    int drop = (field > emin_field ? field : emin_field) - field + static_cast<int>(plan.d_normal);
    if (field < emin_field) drop += static_cast<int>(plan.subnormal_drop);
    const int step = binade - src::mantissa_bits + drop;  // >= 1
    if (step + 2 >= 64) {
      // f keeps at most 2 bits of a: rounding to odd at 53 bits keeps the answer.
      const double odd = magnitude_to_double_odd(a);
      return negative ? -odd : odd;
    }
    const std::uint64_t low = a & ((std::uint64_t{1} << (step + 2)) - 1);
    const double high = static_cast<double>(a - low);  // exact: at most 51 significant bits
    const format multiples_of_step{2, 1, -step, true, specials::all_finite};  // spacing 2^step up to 2^(step+2)
    const double low_double = magnitude_to_double_odd(low);  // exact, or odd far below the step
    const auto low_bits = std::bit_cast<std::uint64_t>(negative ? -low_double : low_double);
    const double low_rounded = std::bit_cast<double>(
        round_one(plan_unchecked<double>(multiples_of_step, o), low_bits, counter_rng{o.seed}, o.index));
    const double magnitude = high + (negative ? -low_rounded : low_rounded);  // exact
    return negative ? -magnitude : magnitude;
  }
}

/// floor(log10(v)) and ceil(log10(v)) for v > 0 finite, by comparing v with powers of ten made by
/// repeated multiplication or division: exact for 10^0..10^22, otherwise within 2^-44 relative,
/// which matters only for a v that close to a power of ten (powers of two never are: the nearest
/// pair in double's range, 2^485 and 10^146, differ by 0.1 %).
MINIFLOAT_HD constexpr int floor_log10(double v) {
  int n = 0;
  double p = 1.0;
  while (p <= 1e307 && p * 10.0 <= v) { p *= 10.0; ++n; }  // p * 10 stays below DBL_MAX
  while (p > v) { p /= 10.0; --n; }
  return n;
}
MINIFLOAT_HD constexpr int ceil_log10(double v) {
  const int n = floor_log10(v);
  double p = 1.0;
  for (int i = 0; i < (n >= 0 ? n : -n); ++i) p = n >= 0 ? p * 10.0 : p / 10.0;
  return p == v ? n : n + 1;
}
}  // namespace detail

template <format F>
class basic_fp {
  static_assert(F.exponent_bits >= 1 && F.exponent_bits <= 11, "minifloat::fp: exponent_bits must be in 1..11");
  static_assert(F.mantissa_bits >= 0 && F.mantissa_bits <= 52, "minifloat::fp: mantissa_bits must be in 0..52");
  static_assert(!(F.encoding == specials::ieee && F.exponent_bits < 2),
                "minifloat::fp: an ieee encoding needs exponent_bits >= 2 (one binade besides Inf/NaN)");
  static_assert(!(F.encoding == specials::ieee && F.mantissa_bits < 1),
                "minifloat::fp: an ieee encoding needs mantissa_bits >= 1 (for a NaN code)");
  static_assert(!(F.encoding == specials::nan_only && F.mantissa_bits < 1),
                "minifloat::fp: a nan_only encoding needs mantissa_bits >= 1");
  static_assert(!(F.encoding == specials::unsigned_exponent && (F.mantissa_bits != 0 || F.subnormals)),
                "minifloat::fp: an unsigned_exponent encoding needs mantissa_bits = 0 and no subnormals");
  static_assert(fits_source<double>(F), "minifloat::fp: exponent_bias puts the format's range outside double's");

 public:
  static constexpr format fmt = F;
  using storage_type = detail::smallest_unsigned<F.bit_width()>;
  using compute_type = std::conditional_t<detail::float_computes_exactly(F), float, double>;
  /// float when every value of F is a float (then value() of a float-computing type is exact as
  /// a float); conversions from double round from double regardless.
  using round_type = std::conditional_t<fits_source<float>(F), float, double>;

  constexpr basic_fp() = default;
  /// Rounds to nearest-even. Overflow: ±Inf where the format has it, NaN code for nan_only
  /// (OCP E4M3), ±max for all_finite; NaN into all_finite throws std::domain_error.
  MINIFLOAT_HD constexpr basic_fp(float x) : code_(convert(x, implicit_options())) {}
  MINIFLOAT_HD constexpr basic_fp(double x) : code_(convert(x, implicit_options())) {}
  /// Integers of every width round once, in every mode (see integer_for_rounding).
  template <std::integral I>
  MINIFLOAT_HD constexpr basic_fp(I x) : basic_fp(x, implicit_options()) {}
  template <std::integral I>
  MINIFLOAT_HD constexpr basic_fp(I x, const rounding_options& o) : code_(convert(detail::integer_for_rounding(F, x, o), o)) {}
  /// Another format's value, rounded once (every format's values are doubles).
  template <format G>
    requires(G != F)
  MINIFLOAT_HD constexpr explicit basic_fp(basic_fp<G> x) : code_(convert(static_cast<double>(x.value()), implicit_options())) {}
  template <format G>
    requires(G != F)
  MINIFLOAT_HD constexpr basic_fp(basic_fp<G> x, const rounding_options& o) : code_(convert(static_cast<double>(x.value()), o)) {}
  /// Rounds with any mode and overflow policy (options.index selects the stochastic draw).
  template <std::floating_point S>
  MINIFLOAT_HD constexpr basic_fp(S x, const rounding_options& o) : code_(convert(x, o)) {}
  /// As above, and adds what it saw to a caller-owned stats object (no shared state).
  template <std::floating_point S>
  MINIFLOAT_HD constexpr basic_fp(S x, const rounding_options& o, rounding_stats& st) : code_(convert(x, o, &st)) {}

  MINIFLOAT_HD static constexpr basic_fp from_bits(storage_type code) {
    basic_fp r;
    r.code_ = static_cast<storage_type>(code & code_mask);
    return r;
  }
  MINIFLOAT_HD constexpr storage_type bits() const { return code_; }

  MINIFLOAT_HD constexpr compute_type value() const {
    return std::bit_cast<compute_type>(detail::bits_of_code<compute_type>(F, code_));
  }
  MINIFLOAT_HD constexpr explicit operator float() const { return static_cast<float>(value()); }
  MINIFLOAT_HD constexpr explicit operator double() const { return static_cast<double>(value()); }
  /// Truncates toward zero, as C++ does for float; NaN, Inf and values outside I's range throw
  /// std::domain_error (trap on a CUDA device) instead of being undefined behaviour.
  template <std::integral I>
  MINIFLOAT_HD constexpr explicit operator I() const {
    const double v = static_cast<double>(value());
    if constexpr (std::is_same_v<I, bool>) {
      return v != 0;
    } else {
      const double lo = static_cast<double>(std::numeric_limits<I>::min());  // 0 or -2^k: exact
      const double hi = 2.0 * static_cast<double>(std::numeric_limits<I>::max() / 2 + 1);  // 2^k: exact
      if (!((v >= lo || v > lo - 1.0) && v < hi)) {
#if defined(__CUDA_ARCH__)
        __trap();
#else
        detail::no_integer_for(F);
#endif
      }
      return static_cast<I>(v);
    }
  }

  MINIFLOAT_HD friend constexpr basic_fp operator+(basic_fp a, basic_fp b) { return basic_fp(a.value() + b.value()); }
  MINIFLOAT_HD friend constexpr basic_fp operator-(basic_fp a, basic_fp b) { return basic_fp(a.value() - b.value()); }
  MINIFLOAT_HD friend constexpr basic_fp operator*(basic_fp a, basic_fp b) { return basic_fp(a.value() * b.value()); }
  MINIFLOAT_HD friend constexpr basic_fp operator/(basic_fp a, basic_fp b) { return basic_fp(a.value() / b.value()); }
  MINIFLOAT_HD friend constexpr basic_fp operator-(basic_fp a) {
    if constexpr (!F.has_sign()) {
      return basic_fp(-a.value());  // E8M0 has no negative values: NaN
    } else if constexpr (F.encoding == specials::fnuz) {
      return (a.code_ & ~sign_bit) == 0 ? a : from_bits(static_cast<storage_type>(a.code_ ^ sign_bit));  // 0 and NaN stay
    } else {
      return from_bits(static_cast<storage_type>(a.code_ ^ sign_bit));  // exact: every format is sign-symmetric
    }
  }
  MINIFLOAT_HD friend constexpr basic_fp operator+(basic_fp a) { return a; }
  MINIFLOAT_HD constexpr basic_fp& operator+=(basic_fp b) { return *this = *this + b; }
  MINIFLOAT_HD constexpr basic_fp& operator-=(basic_fp b) { return *this = *this - b; }
  MINIFLOAT_HD constexpr basic_fp& operator*=(basic_fp b) { return *this = *this * b; }
  MINIFLOAT_HD constexpr basic_fp& operator/=(basic_fp b) { return *this = *this / b; }
  /// x + 1 and x - 1, rounded once (computed in double).
  MINIFLOAT_HD constexpr basic_fp& operator++() { return *this = basic_fp(static_cast<double>(value()) + 1.0); }
  MINIFLOAT_HD constexpr basic_fp& operator--() { return *this = basic_fp(static_cast<double>(value()) - 1.0); }
  MINIFLOAT_HD constexpr basic_fp operator++(int) {
    const basic_fp old = *this;
    ++*this;
    return old;
  }
  MINIFLOAT_HD constexpr basic_fp operator--(int) {
    const basic_fp old = *this;
    --*this;
    return old;
  }

  /// IEEE comparisons: -0 == +0, NaN unordered.
  MINIFLOAT_HD friend constexpr bool operator==(basic_fp a, basic_fp b) { return a.value() == b.value(); }
  MINIFLOAT_HD friend constexpr std::partial_ordering operator<=>(basic_fp a, basic_fp b) {
    return a.value() <=> b.value();
  }

  friend std::ostream& operator<<(std::ostream& os, basic_fp x) { return os << x.value(); }
  /// Reads a decimal number and rounds it once (from double); NaN into a format without NaN
  /// sets failbit and leaves x unchanged.
  friend std::istream& operator>>(std::istream& is, basic_fp& x) {
    double d = 0;
    if (is >> d) {
      if (d != d && !F.has_nan()) is.setstate(std::ios_base::failbit);
      else x = basic_fp(d);
    }
    return is;
  }

 private:
  static constexpr storage_type code_mask =
      static_cast<storage_type>(F.bit_width() >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << F.bit_width()) - 1);
  static constexpr storage_type sign_bit = static_cast<storage_type>(std::uint64_t{1} << (F.bit_width() - 1));

  MINIFLOAT_HD static constexpr rounding_options implicit_options() {
    return {rounding::nearest_even, F.encoding == specials::all_finite ? overflow::saturate : overflow::infinity};
  }

  template <std::floating_point S>
  MINIFLOAT_HD static constexpr storage_type convert(S x, const rounding_options& o, rounding_stats* st = nullptr) {
    // Round from the source's own type (a double never passes through float); a float is widened
    // exactly when F does not fit float.
    using R = std::conditional_t<sizeof(S) == 8 || !fits_source<float>(F), double, float>;
    using bits = typename source_layout<R>::bits;
    const auto plan = detail::plan_unchecked<R>(F, o);
    const bits u = std::bit_cast<bits>(static_cast<R>(x));  // exact: R is S, or wider
    const bits rounded = detail::round_one(plan, u, counter_rng{o.seed}, o.index);
    if (st != nullptr) detail::count(plan, u, rounded, *st);
    const code_result c = detail::code_of_rounded<R>(F, rounded);
    if (!c.representable) {
#if defined(__CUDA_ARCH__)
      __trap();
#else
      detail::no_code_for(F);
#endif
    }
    return static_cast<storage_type>(c.code);
  }

  storage_type code_ = 0;
};

/// fp<E, M> is IEEE-style with bias 2^(E-1)-1; every parameter can be set. The third argument
/// is the whole exponent bias: fp<4, 3, 4> has bias 4 and IEEE Inf/NaN (max 1920).
template <int E, int M, int Bias = default_bias(E), bool Subnormals = true, specials Encoding = specials::ieee>
using fp = basic_fp<format{E, M, Bias, Subnormals, Encoding}>;

/// The papers' fp(e, m, b): bias 2^(e-1) - 1 + b (b is the *additional* bias), subnormals on,
/// every code finite — paper_format(e, m, b) at run time, "paper_fp(e,m,b)" in names.
/// paper_fp<4, 3, 4> has bias 11 and max 30.
template <int E, int M, int AdditionalBias>
using paper_fp = basic_fp<paper_format(E, M, AdditionalBias)>;

using binary16_t = basic_fp<binary16>;
using bfloat16_t = basic_fp<bfloat16>;
using e5m2_t = basic_fp<e5m2>;
using e4m3_t = basic_fp<e4m3>;
using fp_6_9_0_t = basic_fp<fp_6_9_0>;
using fp_4_3_4_t = basic_fp<fp_4_3_4>;
using fp_5_2_0_t = basic_fp<fp_5_2_0>;
using e4m3fnuz_t = basic_fp<e4m3fnuz>;
using e5m2fnuz_t = basic_fp<e5m2fnuz>;
using e8m0_t = basic_fp<e8m0>;
using e2m3_t = basic_fp<e2m3>;
using e3m2_t = basic_fp<e3m2>;
using e2m1_t = basic_fp<e2m1>;

}  // namespace minifloat

template <minifloat::format F>
struct std::hash<minifloat::basic_fp<F>> {
  std::size_t operator()(const minifloat::basic_fp<F>& x) const noexcept {
    // -0 and +0 compare equal, so they hash alike.
    const auto v = x.value();
    return std::hash<typename minifloat::basic_fp<F>::storage_type>{}(v == 0 ? 0 : x.bits());
  }
};

template <minifloat::format F>
class std::numeric_limits<minifloat::basic_fp<F>> {
  using T = minifloat::basic_fp<F>;
  using S = typename T::storage_type;
  static constexpr S code(std::uint64_t exponent, std::uint64_t mantissa) {
    return static_cast<S>((exponent << F.mantissa_bits) | mantissa);
  }
  static constexpr std::uint64_t top_exponent = (std::uint64_t{1} << F.exponent_bits) - 1;
  /// The least value of the type not below v > 0 (v itself when it is one), max above max: v
  /// rounded toward +Inf onto the type's values (below the smallest normal without subnormals,
  /// onto 0 and the smallest normal rather than flushed).
  static constexpr T at_least(double v) {
    minifloat::rounding_options o{minifloat::rounding::toward_positive, minifloat::overflow::saturate};
    o.flush = minifloat::flush_mode::onto_values;
    return T(v, o);
  }

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = F.has_sign();
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = F.has_infinity();
  static constexpr bool has_quiet_NaN = F.has_nan();
  static constexpr bool has_signaling_NaN = false;
  static constexpr std::float_denorm_style has_denorm = F.subnormals ? std::denorm_present : std::denorm_absent;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = F.mantissa_bits + 1;
  static constexpr int digits10 = static_cast<int>((digits - 1) * 0.30102999566398120);
  static constexpr int max_digits10 = static_cast<int>(digits * 0.30102999566398120 + 2.0 - 1e-9);
  static constexpr int radix = 2;
  static constexpr int min_exponent = F.emin() + 1;
  static constexpr int min_exponent10 = minifloat::detail::ceil_log10(F.min_normal());
  static constexpr int max_exponent = F.emax() + 1;
  static constexpr int max_exponent10 = minifloat::detail::floor_log10(F.max_finite());
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr T min() noexcept { return T::from_bits(code(F.encoding == minifloat::specials::unsigned_exponent ? 0 : 1, 0)); }
  static constexpr T max() noexcept { return T::from_bits(code(static_cast<std::uint64_t>(F.max_exponent_field()), F.max_mantissa_field())); }
  static constexpr T lowest() noexcept { return F.has_sign() ? -max() : min(); }
  /// The distance from 1 to the next larger value of the format; where every finite value is
  /// below 1, the spacing of the top binade (there is no value above 1). Either is returned as
  /// the least value of the type not below it: without subnormals the distance can lie below the
  /// smallest normal (nan_only(5,10,bias=10,no_subnormals): 2^-10 < 2^-9), and then epsilon() is
  /// the smallest normal, never 0, so that 1 + epsilon() > 1 still holds.
  static constexpr T epsilon() noexcept {
    const double max = F.max_finite();
    if (max <= 1.0) return at_least(minifloat::format::exp2i(F.emax() - F.mantissa_bits));
    // The spacing at 1: of 1's binade when 1 is normal, else the subnormal spacing (or, without
    // subnormals below 1, the first value above 1 is the smallest normal).
    double next_above_one;
    if (F.emin() <= 0) next_above_one = 1.0 + minifloat::format::exp2i(-F.mantissa_bits);
    else if (F.subnormals) {
      const double step = minifloat::format::exp2i(F.emin() - F.mantissa_bits);  // 1 is a multiple, or below it
      next_above_one = step <= 1.0 ? 1.0 + step : step;
    } else {
      next_above_one = F.min_normal();
    }
    if (next_above_one > max) next_above_one = max;  // 1 lies in the top binade's last step
    return at_least(next_above_one - 1.0);
  }
  /// Half a unit in the last place (round to nearest): 0.5, or the least value of the type not
  /// below it where 0.5 is not a value (max where every finite value is below 0.5).
  static constexpr T round_error() noexcept { return at_least(0.5); }
  static constexpr T infinity() noexcept { return has_infinity ? T::from_bits(code(top_exponent, 0)) : T(); }
  static constexpr T quiet_NaN() noexcept {
    return has_quiet_NaN ? T::from_bits(static_cast<S>(minifloat::detail::nan_code(F))) : T();
  }
  static constexpr T signaling_NaN() noexcept { return quiet_NaN(); }
  static constexpr T denorm_min() noexcept { return F.subnormals ? T::from_bits(code(0, 1)) : min(); }
};

#include "fp_math.hpp"  // the <cmath> overloads and std::formatter belong with the type
