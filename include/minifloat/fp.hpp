// minifloat/fp.hpp — a compile-time format as a number type: `fp<E, M, Bias, Subnormals, Encoding>`.
//
// A value is stored as its code in the smallest unsigned integer that holds 1 + E + M bits.
// Conversions go through the one rounding core (round.hpp) with a plan computed at compile time.
// Arithmetic and comparisons are computed in `compute_type` and rounded once to the format
// (nearest-even). compute_type is float when float holds every product, quotient, sum and
// square root of two values exactly enough that rounding twice equals rounding once (p_compute
// >= 2p + 2 and no over/underflow in float; Figueroa 1995), else double — see docs/formats.md.
// Usable in CUDA device code (compile with --expt-relaxed-constexpr). Precision-assignment paper
// §3 (formats fp(e,m,b)); OCP FP8 for e4m3/e5m2.
#pragma once

#include <bit>
#include <compare>
#include <concepts>
#include <cstdint>
#include <functional>
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
  /// The source type conversions round from: float when every value of F is a float.
  using round_type = std::conditional_t<fits_source<float>(F), float, double>;

  constexpr basic_fp() = default;
  /// Rounds to nearest-even. Overflow: ±Inf where the format has it, NaN code for nan_only
  /// (OCP E4M3), ±max for all_finite; NaN into all_finite throws std::domain_error.
  MINIFLOAT_HD constexpr basic_fp(float x) : code_(convert(x, implicit_options())) {}
  MINIFLOAT_HD constexpr basic_fp(double x) : code_(convert(x, implicit_options())) {}
  template <std::integral I>
  MINIFLOAT_HD constexpr basic_fp(I x) : basic_fp(static_cast<double>(x)) {}
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

  /// IEEE comparisons: -0 == +0, NaN unordered.
  MINIFLOAT_HD friend constexpr bool operator==(basic_fp a, basic_fp b) { return a.value() == b.value(); }
  MINIFLOAT_HD friend constexpr std::partial_ordering operator<=>(basic_fp a, basic_fp b) {
    return a.value() <=> b.value();
  }

  friend std::ostream& operator<<(std::ostream& os, basic_fp x) { return os << x.value(); }

 private:
  static constexpr storage_type code_mask =
      static_cast<storage_type>(F.bit_width() >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << F.bit_width()) - 1);
  static constexpr storage_type sign_bit = static_cast<storage_type>(std::uint64_t{1} << (F.bit_width() - 1));

  MINIFLOAT_HD static constexpr rounding_options implicit_options() {
    return {rounding::nearest_even, F.encoding == specials::all_finite ? overflow::saturate : overflow::infinity};
  }

  template <std::floating_point S>
  MINIFLOAT_HD static constexpr storage_type convert(S x, const rounding_options& o, rounding_stats* st = nullptr) {
    using R = round_type;
    using bits = typename source_layout<R>::bits;
    const auto plan = detail::plan_unchecked<R>(F, o);
    const bits u = std::bit_cast<bits>(static_cast<R>(x));  // exact when S is wider: F fits R
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

/// fp<E, M> is IEEE-style with bias 2^(E-1)-1; every parameter can be set.
template <int E, int M, int Bias = default_bias(E), bool Subnormals = true, specials Encoding = specials::ieee>
using fp = basic_fp<format{E, M, Bias, Subnormals, Encoding}>;

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
  static constexpr int min_exponent10 = static_cast<int>(F.emin() * 0.30102999566398120);
  static constexpr int max_exponent = F.emax() + 1;
  static constexpr int max_exponent10 = static_cast<int>(F.emax() * 0.30102999566398120);
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr T min() noexcept { return T::from_bits(code(F.encoding == minifloat::specials::unsigned_exponent ? 0 : 1, 0)); }
  static constexpr T max() noexcept { return T::from_bits(code(static_cast<std::uint64_t>(F.max_exponent_field()), F.max_mantissa_field())); }
  static constexpr T lowest() noexcept { return F.has_sign() ? -max() : min(); }
  static constexpr T epsilon() noexcept { return T(F.epsilon()); }
  static constexpr T round_error() noexcept { return T(0.5); }
  static constexpr T infinity() noexcept { return has_infinity ? T::from_bits(code(top_exponent, 0)) : T(); }
  static constexpr T quiet_NaN() noexcept {
    return has_quiet_NaN ? T::from_bits(static_cast<S>(minifloat::detail::nan_code(F))) : T();
  }
  static constexpr T signaling_NaN() noexcept { return quiet_NaN(); }
  static constexpr T denorm_min() noexcept { return F.subnormals ? T::from_bits(code(0, 1)) : min(); }
};
