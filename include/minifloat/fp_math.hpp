// minifloat/fp_math.hpp — the <cmath> functions, classification and std::formatter for the
// number type of fp.hpp, so that fp<> values work where a float would (found by ADL:
// `sqrt(x)`, or `using std::sqrt; sqrt(x)` in generic code).
//
// Accuracy (docs/formats.md §7):
//  - exact: abs/fabs, copysign, signbit and the classification functions, nextafter, frexp,
//    ldexp/scalbn (up to the one rounding of a result outside the format's range), ilogb, logb,
//    fmin/fmax, fmod, modf, floor/ceil/trunc/round/nearbyint/rint (the integer rounded once when
//    the format cannot hold it);
//  - correctly rounded (one rounding of the exact result): sqrt for every M (the double root
//    with its exact residual made a double that rounds correctly, see nearest_proxy), fma for
//    M <= 25 (the exact sum made a double by rounding to odd, then rounded once);
//  - the rest (exp, log, pow, sin, cos, tanh, ...): glibc's double function (documented error
//    below 1 ulp of double, most are correctly rounded) rounded once to the format: the result is
//    the correctly rounded one except when the exact value lies within one double ulp
//    (relative 2^-52) of a rounding boundary of the format.
// Results round to nearest-even with the format's implicit overflow rule (fp.hpp).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <version>
#if defined(__cpp_lib_format)
#include <format>
#endif

#include "config.hpp"
#include "fp.hpp"

namespace minifloat {

namespace detail {
/// The double next to d toward +Inf (up) or -Inf, by its bits; d finite.
MINIFLOAT_HD constexpr double step_double(double d, bool up) {
  if (d == 0) return up ? std::numeric_limits<double>::denorm_min() : -std::numeric_limits<double>::denorm_min();
  const auto b = std::bit_cast<std::uint64_t>(d);
  return std::bit_cast<double>((d > 0) == up ? b + 1 : b - 1);
}
/// A format value as a double (exact).
template <format F>
MINIFLOAT_HD constexpr double as_double(basic_fp<F> x) {
  return static_cast<double>(x.value());
}
/// Round-to-odd of an exact value given its nearest double `s` and the sign of the exact
/// residual (exact - s): the odd one of the two doubles around the exact value.
MINIFLOAT_HD constexpr double odd_double(double s, double residual) {
  if (residual == 0 || (std::bit_cast<std::uint64_t>(s) & 1) != 0) return s;
  return step_double(s, residual > 0);
}
/// From s, the nearest double to an exact value, and the sign of (exact - s): a double that F's
/// one rounding to nearest-even takes to the exact value's correct rounding; s a normal double.
/// It depends on how many bits F keeps at s (M + 1 in its normal range, fewer below):
///  - 53: F's values there are the doubles, and s is the rounding;
///  - 52: s is either one of F's values (even last bit: the exact value lies within a quarter of
///    F's step of it) or the midpoint between two, and then the residual says which side:
///    stepping one double toward it lands on F's value on that side;
///  - 51 or fewer: s made odd with the residual's sign (rounding to odd at two or more bits
///    beyond the target's, Boldo & Melquiond 2008).
template <format F>
MINIFLOAT_HD constexpr double nearest_proxy(double s, double residual) {
  const int binade = static_cast<int>((std::bit_cast<std::uint64_t>(s) >> 52) & 0x7ff) - 1023;
  const int kept = F.mantissa_bits + 1 - (F.emin() > binade ? F.emin() - binade : 0);
  if (kept >= 53 || residual == 0) return s;
  if (kept == 52) return (std::bit_cast<std::uint64_t>(s) & 1) == 0 ? s : step_double(s, residual > 0);
  return odd_double(s, residual);
}
}  // namespace detail

// --- classification (exact) --------------------------------------------------------------------
template <format F>
MINIFLOAT_HD constexpr bool isnan(basic_fp<F> x) {
  const auto v = x.value();
  return v != v;
}
template <format F>
MINIFLOAT_HD constexpr bool isinf(basic_fp<F> x) {
  const double v = static_cast<double>(x.value());
  return v == std::numeric_limits<double>::infinity() || v == -std::numeric_limits<double>::infinity();
}
template <format F>
MINIFLOAT_HD constexpr bool isfinite(basic_fp<F> x) {
  return !isnan(x) && !isinf(x);
}
template <format F>
MINIFLOAT_HD constexpr bool signbit(basic_fp<F> x) {
  return (x.bits() >> (F.bit_width() - 1)) != 0;
}
/// Normal: finite, nonzero and at least the smallest normal in magnitude.
template <format F>
MINIFLOAT_HD constexpr bool isnormal(basic_fp<F> x) {
  const double v = static_cast<double>(x.value());
  return isfinite(x) && (v >= F.min_normal() || v <= -F.min_normal());
}
template <format F>
MINIFLOAT_HD constexpr int fpclassify(basic_fp<F> x) {
  if (isnan(x)) return FP_NAN;
  if (isinf(x)) return FP_INFINITE;
  if (x.value() == 0) return FP_ZERO;
  return isnormal(x) ? FP_NORMAL : FP_SUBNORMAL;
}

// --- exact operations ----------------------------------------------------------------------------
template <format F>
MINIFLOAT_HD constexpr basic_fp<F> abs(basic_fp<F> x) {
  using T = basic_fp<F>;
  constexpr auto sign = static_cast<typename T::storage_type>(std::uint64_t{1} << (F.bit_width() - 1));
  return T::from_bits(static_cast<typename T::storage_type>(x.bits() & ~sign));
}
template <format F>
MINIFLOAT_HD constexpr basic_fp<F> fabs(basic_fp<F> x) {
  return abs(x);
}
template <format F>
MINIFLOAT_HD constexpr basic_fp<F> copysign(basic_fp<F> x, basic_fp<F> y) {
  return signbit(x) == signbit(y) ? x : -x;
}
template <format F>
MINIFLOAT_HD constexpr basic_fp<F> fmin(basic_fp<F> x, basic_fp<F> y) {
  if (isnan(x)) return y;
  if (isnan(y)) return x;
  return y < x ? y : x;
}
template <format F>
MINIFLOAT_HD constexpr basic_fp<F> fmax(basic_fp<F> x, basic_fp<F> y) {
  if (isnan(x)) return y;
  if (isnan(y)) return x;
  return x < y ? y : x;
}

/// The next value of the format after x toward y (IEEE nextafter on the format's values; codes
/// below the smallest normal are skipped when the format has no subnormals). Past the largest
/// finite value: Inf where the format has it, otherwise x stays at ±max.
template <format F>
MINIFLOAT_HD constexpr basic_fp<F> nextafter(basic_fp<F> x, basic_fp<F> y) {
  using T = basic_fp<F>;
  using S = typename T::storage_type;
  if (isnan(x) || isnan(y)) return isnan(x) ? x : y;
  if (x == y) return y;
  const bool up = x < y;
  const std::uint64_t sign = std::uint64_t{1} << (F.bit_width() - 1);
  const std::uint64_t mag = x.bits() & (sign - 1);
  const std::uint64_t min_normal_code = std::uint64_t{1} << F.mantissa_bits;
  const std::uint64_t max_code = (static_cast<std::uint64_t>(F.max_exponent_field()) << F.mantissa_bits) | F.max_mantissa_field();
  if (mag == 0) {  // ±0: the smallest value of y's side
    const std::uint64_t first = F.subnormals ? 1 : min_normal_code;
    return T::from_bits(static_cast<S>(up ? first : (sign | first)));
  }
  const bool grow = up != signbit(x);  // the magnitude moves away from zero
  std::uint64_t next;
  if (grow) {
    if (mag >= max_code) return isinf(x) ? x : (F.has_infinity() ? T::from_bits(static_cast<S>((x.bits() & sign) | (max_code + 1))) : x);
    next = mag + 1;
  } else {
    next = mag > max_code ? max_code : mag - 1;  // from Inf: max
    if (!F.subnormals && next < min_normal_code) next = 0;
  }
  return T::from_bits(static_cast<S>((x.bits() & sign) | next));
}
template <format F>
MINIFLOAT_HD constexpr basic_fp<F> nexttoward(basic_fp<F> x, long double y) {
  return nextafter(x, basic_fp<F>(static_cast<double>(y)));
}

/// x = m * 2^e with 0.5 <= |m| < 1 (m rounded to the format when it cannot hold m).
template <format F>
MINIFLOAT_HD basic_fp<F> frexp(basic_fp<F> x, int* e) {
  return basic_fp<F>(std::frexp(static_cast<double>(x.value()), e));
}
template <format F>
MINIFLOAT_HD basic_fp<F> ldexp(basic_fp<F> x, int e) {
  return basic_fp<F>(std::ldexp(static_cast<double>(x.value()), e));
}
template <format F>
MINIFLOAT_HD basic_fp<F> scalbn(basic_fp<F> x, int e) {
  return ldexp(x, e);
}
template <format F>
MINIFLOAT_HD int ilogb(basic_fp<F> x) {
  return std::ilogb(static_cast<double>(x.value()));
}
template <format F>
MINIFLOAT_HD basic_fp<F> logb(basic_fp<F> x) {
  return basic_fp<F>(std::logb(static_cast<double>(x.value())));
}
template <format F>
MINIFLOAT_HD basic_fp<F> modf(basic_fp<F> x, basic_fp<F>* integral_part) {
  double i = 0;
  const double f = std::modf(static_cast<double>(x.value()), &i);
  *integral_part = basic_fp<F>(i);
  return basic_fp<F>(f);
}

// --- correctly rounded ---------------------------------------------------------------------------
/// sqrt: the double square root s (correctly rounded) with the sign of its exact residual, as a
/// double whose one rounding to F is the correctly rounded root (detail::nearest_proxy).
template <format F>
MINIFLOAT_HD basic_fp<F> sqrt(basic_fp<F> x) {
  const double v = static_cast<double>(x.value());
  const double s = std::sqrt(v);
  if (!(v > 0) || s == std::numeric_limits<double>::infinity()) return basic_fp<F>(s);  // 0, <0 (NaN), Inf, NaN
  return basic_fp<F>(detail::nearest_proxy<F>(s, -std::fma(s, s, -v)));  // v - s^2, exact
}
/// fma: x * y + z rounded once (M <= 25, where x * y is exact in double).
template <format F>
MINIFLOAT_HD basic_fp<F> fma(basic_fp<F> x, basic_fp<F> y, basic_fp<F> z) {
  const double a = static_cast<double>(x.value()), b = static_cast<double>(y.value()),
               c = static_cast<double>(z.value());
  if constexpr (F.mantissa_bits <= 25) {
    const double p = a * b;  // exact: two significands of at most 26 bits
    const double s = p + c;
    if (!(s - s == 0)) return basic_fp<F>(std::fma(a, b, c));  // Inf or NaN somewhere
    // TwoSum: the exact error of p + c.
    const double pp = s - c, cc = s - pp;
    const double err = (p - pp) + (c - cc);
    return basic_fp<F>(detail::odd_double(s, err));
  } else {
    return basic_fp<F>(std::fma(a, b, c));
  }
}

// --- exact integer rounding (the integer rounded once when the format cannot hold it) -----------
template <format F>
MINIFLOAT_HD basic_fp<F> floor(basic_fp<F> x) { return basic_fp<F>(std::floor(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> ceil(basic_fp<F> x) { return basic_fp<F>(std::ceil(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> trunc(basic_fp<F> x) { return basic_fp<F>(std::trunc(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> round(basic_fp<F> x) { return basic_fp<F>(std::round(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> nearbyint(basic_fp<F> x) { return basic_fp<F>(std::nearbyint(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> rint(basic_fp<F> x) { return basic_fp<F>(std::rint(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> fmod(basic_fp<F> x, basic_fp<F> y) { return basic_fp<F>(std::fmod(detail::as_double(x), detail::as_double(y))); }
template <format F>
MINIFLOAT_HD basic_fp<F> remainder(basic_fp<F> x, basic_fp<F> y) { return basic_fp<F>(std::remainder(detail::as_double(x), detail::as_double(y))); }
template <format F>
MINIFLOAT_HD basic_fp<F> fdim(basic_fp<F> x, basic_fp<F> y) { return basic_fp<F>(std::fdim(detail::as_double(x), detail::as_double(y))); }
// --- the double function rounded once (see the header comment for the accuracy) ------------------
template <format F>
MINIFLOAT_HD basic_fp<F> cbrt(basic_fp<F> x) { return basic_fp<F>(std::cbrt(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> exp(basic_fp<F> x) { return basic_fp<F>(std::exp(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> exp2(basic_fp<F> x) { return basic_fp<F>(std::exp2(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> expm1(basic_fp<F> x) { return basic_fp<F>(std::expm1(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> log(basic_fp<F> x) { return basic_fp<F>(std::log(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> log2(basic_fp<F> x) { return basic_fp<F>(std::log2(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> log10(basic_fp<F> x) { return basic_fp<F>(std::log10(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> log1p(basic_fp<F> x) { return basic_fp<F>(std::log1p(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> sin(basic_fp<F> x) { return basic_fp<F>(std::sin(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> cos(basic_fp<F> x) { return basic_fp<F>(std::cos(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> tan(basic_fp<F> x) { return basic_fp<F>(std::tan(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> asin(basic_fp<F> x) { return basic_fp<F>(std::asin(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> acos(basic_fp<F> x) { return basic_fp<F>(std::acos(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> atan(basic_fp<F> x) { return basic_fp<F>(std::atan(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> sinh(basic_fp<F> x) { return basic_fp<F>(std::sinh(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> cosh(basic_fp<F> x) { return basic_fp<F>(std::cosh(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> tanh(basic_fp<F> x) { return basic_fp<F>(std::tanh(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> asinh(basic_fp<F> x) { return basic_fp<F>(std::asinh(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> acosh(basic_fp<F> x) { return basic_fp<F>(std::acosh(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> atanh(basic_fp<F> x) { return basic_fp<F>(std::atanh(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> erf(basic_fp<F> x) { return basic_fp<F>(std::erf(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> erfc(basic_fp<F> x) { return basic_fp<F>(std::erfc(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> tgamma(basic_fp<F> x) { return basic_fp<F>(std::tgamma(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> lgamma(basic_fp<F> x) { return basic_fp<F>(std::lgamma(detail::as_double(x))); }
template <format F>
MINIFLOAT_HD basic_fp<F> pow(basic_fp<F> x, basic_fp<F> y) { return basic_fp<F>(std::pow(detail::as_double(x), detail::as_double(y))); }
template <format F>
MINIFLOAT_HD basic_fp<F> atan2(basic_fp<F> x, basic_fp<F> y) { return basic_fp<F>(std::atan2(detail::as_double(x), detail::as_double(y))); }
template <format F>
MINIFLOAT_HD basic_fp<F> hypot(basic_fp<F> x, basic_fp<F> y) { return basic_fp<F>(std::hypot(detail::as_double(x), detail::as_double(y))); }

}  // namespace minifloat

#if defined(__cpp_lib_format)
/// std::format support where the standard library has <format> (libstdc++ 13 and later; GCC 12's
/// libstdc++ has none, so there this is compiled out): formats the value with double's
/// format specification, e.g. std::format("{:.3e}", x).
template <minifloat::format F>
struct std::formatter<minifloat::basic_fp<F>> : std::formatter<double> {
  auto format(minifloat::basic_fp<F> x, std::format_context& ctx) const {
    return std::formatter<double>::format(static_cast<double>(x.value()), ctx);
  }
};
#endif
