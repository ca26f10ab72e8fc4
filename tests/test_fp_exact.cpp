// fp<> rounds exactly once: conversions from double and from 64-bit integers, arithmetic that
// computes in double, epsilon; and the number type's functions (cmath overloads, classification,
// nextafter/frexp/ldexp, conversions between formats and to integers, ++/--, operator>>).
// Oracle: GNU MPFR (mpfr_set_d / mpfr_set_sj at full precision, rounded to M + 1 bits with the
// format's exponent range and mpfr_subnormalize), plus the format's documented overflow rule.
#include <catch2/catch.hpp>
#include <mpfr.h>

#include <minifloat/minifloat.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <sstream>
#include <vector>

using namespace minifloat;

namespace {

/// Restores MPFR's exponent range on scope exit.
struct mpfr_range_guard {
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  ~mpfr_range_guard() {
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
  }
};

/// The MPFR rounding of `exact` to format F in a magnitude-aware mode, with F's rules for
/// subnormals off (flushed after rounding) and for overflow (implicit options: Inf for ieee, NaN for nan_only, max for all_finite, except the
/// modes that stay finite). `exact` holds the exact input.
double mpfr_round_to(const format& F, mpfr_srcptr exact, rounding mode) {
  mpfr_range_guard guard;
  mpfr_t r;
  mpfr_init2(r, F.mantissa_bits + 1);
  const bool negative = mpfr_sgn(exact) < 0;
  // The MPFR manual's emulation ("Exceptions"): round in the full range, narrow emin to the
  // format's smallest subnormal, check the range, subnormalize. Unbounded above: overflow is
  // decided below.
  int ternary = 0;
  const auto emulate = [&](mpfr_rnd_t rnd) {
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    int t = mpfr_set(r, exact, rnd);
    mpfr_set_emin(F.emin() - F.mantissa_bits + 1);
    t = mpfr_check_range(r, t, rnd);
    ternary = mpfr_subnormalize(r, t, rnd);
    const double d = mpfr_get_d(r, MPFR_RNDN);
    mpfr_set_emin(mpfr_get_emin_min());
    return d;
  };
  double result;
  if (mode == rounding::to_odd) {
    // Truncate; if inexact and the truncated value's last bit is even, step away from zero.
    result = emulate(MPFR_RNDZ);
    if (ternary != 0) {
      const double az = std::fabs(result);
      const int e = az == 0 ? F.emin() : std::max(std::ilogb(az), F.emin());
      const double units = std::ldexp(az, F.mantissa_bits - e);  // exact integer
      if (std::fmod(units, 2.0) == 0.0) result = emulate(MPFR_RNDA);
    }
  } else {
    result = emulate(mode == rounding::nearest_even      ? MPFR_RNDN
                     : mode == rounding::toward_zero     ? MPFR_RNDZ
                     : mode == rounding::toward_positive ? MPFR_RNDU
                                                         : MPFR_RNDD);
  }
  mpfr_clear(r);
  // Without subnormals (flush_mode::after_rounding): rounded as if they existed, then flushed.
  if (!F.subnormals && std::fabs(result) < F.min_normal()) result = std::copysign(0.0, result);
  if (std::fabs(result) > F.max_finite()) {
    const bool away = mode == rounding::nearest_even || (mode == rounding::toward_positive && !negative) ||
                      (mode == rounding::toward_negative && negative);
    if (!away || F.encoding == specials::all_finite) result = std::copysign(F.max_finite(), result);
    else if (F.encoding == specials::nan_only) result = std::numeric_limits<double>::quiet_NaN();
    else result = std::copysign(std::numeric_limits<double>::infinity(), result);
  }
  return result;
}

const rounding kModes[] = {rounding::nearest_even, rounding::toward_zero, rounding::toward_positive,
                           rounding::toward_negative, rounding::to_odd};

rounding_options options_for(const format& F, rounding m) {
  return {m, F.encoding == specials::all_finite ? overflow::saturate : overflow::infinity};
}

bool same_value(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

/// T(x, options) against MPFR for every deterministic mode, on inputs from `draw(gen, exact)`,
/// which returns the input (a double or an int64) and sets `exact` to its value.
template <class T, class Draw>
void conversions_match_mpfr(std::uint64_t seed, Draw draw) {
  constexpr format F = T::fmt;
  std::mt19937_64 gen(seed);
  mpfr_t x;
  mpfr_init2(x, 64);
  int checked = 0, wrong = 0;
  std::ostringstream first;
  for (int i = 0; i < 40000; ++i) {
    const auto input = draw(gen, x);
    for (const rounding m : kModes) {
      const double want = mpfr_round_to(F, x, m);
      const double got = static_cast<double>(T(input, options_for(F, m)).value());
      ++checked;
      if (!same_value(got, want) && wrong++ < 5)
        first << std::hexfloat << "\n  x=" << input << " mode " << static_cast<int>(m) << " got " << got << " want " << want;
    }
  }
  mpfr_clear(x);
  INFO(to_string(F) << ": " << checked << " conversions, " << wrong << " wrong" << first.str());
  CHECK(wrong == 0);
  CHECK(checked > 100000);
}

/// Doubles around T's range with bits beyond float's precision (the double-rounding trap).
template <class T>
void conversions_from_double_match_mpfr(std::uint64_t seed) {
  constexpr format F = T::fmt;
  std::uniform_int_distribution<int> exponent(F.emin() - F.mantissa_bits - 3, F.emax() + 2);
  conversions_match_mpfr<T>(seed, [&](std::mt19937_64& gen, mpfr_t x) {
    // A significand with the format's bits, then a tie or near-tie pattern in the bits below.
    std::uint64_t mant = gen() >> 11;  // 53 bits
    const int kind = static_cast<int>(gen() % 4);
    const int below = 52 - F.mantissa_bits;  // bits of a double below the format's last bit
    if (below >= 2 && kind == 0) mant = (mant >> below << below) | (std::uint64_t{1} << (below - 1)) | 1;  // tie + sticky
    if (below >= 2 && kind == 1) mant = (mant >> below << below) | (std::uint64_t{1} << (below - 1));      // exact tie
    double v = std::ldexp(static_cast<double>(mant | (std::uint64_t{1} << 52)), exponent(gen) - 52);
    if (!std::isfinite(v)) v = std::numeric_limits<double>::max();  // above double's range: its max
    const double xd = gen() % 2 ? -v : v;
    mpfr_set_d(x, xd, MPFR_RNDN);  // exact
    return xd;
  });
}

/// 64-bit integers of every magnitude, many above 2^53 with low bits that only a sticky bit keeps.
template <class T>
void conversions_from_int64_match_mpfr(std::uint64_t seed) {
  constexpr format F = T::fmt;
  conversions_match_mpfr<T>(seed, [&](std::mt19937_64& gen, mpfr_t x) {
    const int bits = 1 + static_cast<int>(gen() % 63);
    std::uint64_t mag = gen() >> (64 - bits);
    const int kind = static_cast<int>(gen() % 3);
    if (kind == 0 && bits > 20) mag = (mag >> 12 << 12) | 1;  // one low bit far below
    if (kind == 1 && bits > 20 && bits - F.mantissa_bits - 2 > 0)
      mag = mag >> (bits - F.mantissa_bits - 2) << (bits - F.mantissa_bits - 2);  // ties
    const std::int64_t xi = gen() % 2 ? -static_cast<std::int64_t>(mag) : static_cast<std::int64_t>(mag);
    mpfr_set_sj(x, xi, MPFR_RNDN);  // exact at 64 bits
    return xi;
  });
}

}  // namespace

TEST_CASE("fp<> conversions and arithmetic round once: the issue-13 reproducers") {
  CHECK(static_cast<double>(binary16_t(1.0 + 0x1p-11 + 0x1p-40)) == 0x1.004p+0);
  CHECK(static_cast<double>(binary16_t(2 - 0x1p-40, {rounding::toward_zero})) == 0x1.ffcp+0);
  CHECK(static_cast<double>(bfloat16_t(std::int64_t{(1LL << 40) + (1LL << 32) + 1})) == 0x1.02p+40);
  fp_4_3_4_t below_threshold;
  CHECK_NOTHROW(below_threshold = fp_4_3_4_t(30.9999999999, {rounding::nearest_even, overflow::infinity}));
  CHECK(static_cast<double>(below_threshold) == 30.0);
  CHECK(static_cast<double>(fp<8, 15>(-0x1.e9d2p+104) + fp<8, 15>(-0x1.8056p+89)) == -0x1.e9d6p+104);
  CHECK(static_cast<double>(fp<8, 10>(0x1.05p-60) * fp<8, 10>(0x1.f64p-78)) == 0x1p-136);
  // Stochastic rounding of 1 + 2^-25 + 2^-26 to fp<8,22> goes up with probability 3/16.
  const double x = 1 + 0x1p-25 + 0x1p-26;
  const int n = 20000;
  int ups = 0;
  for (int i = 0; i < n; ++i) {
    const fp<8, 22> r(x, {rounding::stochastic, overflow::infinity, 0, 5, static_cast<std::uint64_t>(i)});
    ups += static_cast<double>(r) > 1.0;
  }
  CHECK(std::fabs(ups / double(n) - 0.1875) < 5 * std::sqrt(0.1875 * 0.8125 / n));
  // Stats of a finite 1e300: an overflow, not an infinity.
  rounding_stats st;
  const binary16_t big(1e300, {rounding::nearest_even, overflow::saturate}, st);
  CHECK(static_cast<double>(big) == 65504.0);
  CHECK(st.infinities == 0);
  CHECK(st.overflows == 1);
}

TEST_CASE("integers above 2^53 convert with a sticky bit: one rounding of the exact integer") {
  // 2^60 + 2^52 + 1 lies just above the tie between 2^60 and 2^60 + 2^53 of a 7-bit... format; in
  // double it is 2^60 + 2^52 (a tie), which nearest-even would send down.
  const std::int64_t just_above_tie = (std::int64_t{1} << 60) + (std::int64_t{1} << 52) + 1;
  CHECK(static_cast<double>(fp<11, 7>(just_above_tie)) == 0x1p60 + 0x1p53);
  CHECK(static_cast<double>(fp<11, 7>(-just_above_tie)) == -(0x1p60 + 0x1p53));
  CHECK(static_cast<double>(fp<11, 50>(std::numeric_limits<std::int64_t>::min())) == -0x1p63);
  CHECK(static_cast<double>(fp<11, 50>(std::numeric_limits<std::uint64_t>::max())) == 0x1p64);
  CHECK(static_cast<double>(binary16_t(std::uint8_t{200})) == 200.0);
}

TEST_CASE("integers beyond 53 bits round once to formats that keep 52 or 53 bits") {
  // The reported case: binary64 from an int64 of 55 bits. Rounded to odd at 53 bits first, it
  // became ...953p+54 (the odd neighbour), which binary64 keeps as it is.
  CHECK(static_cast<double>(fp<11, 52>(std::int64_t{-28412873611781455})) == -0x1.93c56e9ab6954p+54);
  CHECK(static_cast<double>(fp<11, 52>(std::int64_t{-28412873611781455}, {rounding::toward_zero})) == -0x1.93c56e9ab6953p+54);
  // 2^60 + 3 * 2^6 lies three quarters of the way from 2^60 to the next binary64 value 2^60 + 2^8.
  const std::uint64_t three_quarters = (std::uint64_t{1} << 60) + 192;
  CHECK(static_cast<double>(fp<11, 52>(three_quarters, {rounding::toward_zero})) == 0x1p60);
  CHECK(static_cast<double>(fp<11, 52>(three_quarters, {rounding::toward_negative})) == 0x1p60);
  CHECK(static_cast<double>(fp<11, 52>(three_quarters, {rounding::to_odd})) == 0x1p60 + 0x1p8);
  // Just above the tie 2^60 + 2^8 of a 52-bit significand: the sticky bit lands on the tie's own bit.
  CHECK(static_cast<double>(fp<11, 51>((std::uint64_t{1} << 60) + 257)) == 0x1p60 + 0x1p9);
  CHECK(static_cast<double>(fp<11, 51>((std::uint64_t{1} << 60) + 256)) == 0x1p60);
  // Stochastic rounding goes up with probability 3/4 (the sticky bit alone made it always go up).
  const int n = 4000;
  int ups = 0;
  for (int i = 0; i < n; ++i)
    ups += static_cast<double>(fp<11, 52>(three_quarters, {rounding::stochastic, overflow::infinity, 0, 9,
                                                           static_cast<std::uint64_t>(i)})) > 0x1p60;
  CHECK(std::fabs(ups / double(n) - 0.75) < 5 * std::sqrt(0.75 * 0.25 / n));
}

TEST_CASE("fp<> conversions from double match MPFR in every deterministic mode", "[mpfr]") {
  conversions_from_double_match_mpfr<binary16_t>(1);
  conversions_from_double_match_mpfr<bfloat16_t>(2);
  conversions_from_double_match_mpfr<e4m3_t>(3);
  conversions_from_double_match_mpfr<e5m2_t>(4);
  conversions_from_double_match_mpfr<fp_4_3_4_t>(5);
  conversions_from_double_match_mpfr<fp<8, 22>>(6);
  conversions_from_double_match_mpfr<fp<8, 15>>(7);
  conversions_from_double_match_mpfr<fp<11, 40>>(8);
  conversions_from_double_match_mpfr<paper_fp<6, 9, 0>>(9);
}

TEST_CASE("fp<> conversions from int64 match MPFR in every deterministic mode", "[mpfr]") {
  conversions_from_int64_match_mpfr<binary16_t>(11);
  conversions_from_int64_match_mpfr<bfloat16_t>(12);
  conversions_from_int64_match_mpfr<e4m3_t>(13);
  conversions_from_int64_match_mpfr<fp<8, 22>>(14);
  conversions_from_int64_match_mpfr<fp<11, 40>>(15);
  conversions_from_int64_match_mpfr<fp<11, 50>>(16);
  conversions_from_int64_match_mpfr<paper_fp<8, 30, 0>>(17);
  // 51 and 52 mantissa bits: a double cannot hold the integer rounded to odd two bits below them.
  conversions_from_int64_match_mpfr<fp<11, 52>>(18);
  conversions_from_int64_match_mpfr<fp<11, 51>>(19);
  // The smallest normal 2^61: integers from 2^52 up are subnormal there, 52 bits below 2^61.
  conversions_from_int64_match_mpfr<fp<2, 52, -60>>(20);
  conversions_from_int64_match_mpfr<fp<2, 52, -60, false>>(21);
  conversions_from_int64_match_mpfr<fp<3, 51, -40, true, specials::nan_only>>(22);
}

TEST_CASE("numeric_limits::epsilon is the distance from 1 to the next value of the format") {
  CHECK(static_cast<double>(std::numeric_limits<binary16_t>::epsilon()) == 0x1p-10);
  CHECK(static_cast<double>(std::numeric_limits<fp_4_3_4_t>::epsilon()) == 0.125);
  // bias 0: 1 is subnormal (emin = 1), the spacing there is 2^(1-2).
  CHECK(static_cast<double>(std::numeric_limits<fp<5, 2, 0, true, specials::all_finite>>::epsilon()) == 0.5);
  // bias -5: the values are 0, 64, 128, ...; the next value above 1 is 64, and 63 rounds to 64.
  CHECK(static_cast<double>(std::numeric_limits<fp<3, 0, -5, true, specials::all_finite>>::epsilon()) == 64.0);
  // Every finite value below 1: the spacing of the top binade.
  CHECK(static_cast<double>(std::numeric_limits<fp<4, 6, 30>>::epsilon()) == 0x1p-22);
  CHECK(static_cast<double>(std::numeric_limits<fp<8, 15, 327, true, specials::all_finite>>::epsilon()) == 0x1p-87);
  // Without subnormals and 1 below the smallest normal 4: 4 - 1 rounded onto the values {0, 4, 5, ...}.
  CHECK(static_cast<double>(std::numeric_limits<fp<5, 2, -1, false>>::epsilon()) == 4.0);
  // Without subnormals and 2^-M below the smallest normal, 1 + 2^-M is a value but 2^-M is not:
  // the least value not below it, the smallest normal (it was 0).
  CHECK(static_cast<double>(std::numeric_limits<fp<5, 10, 10, false, specials::nan_only>>::epsilon()) == 0x1p-9);
  CHECK(static_cast<double>(std::numeric_limits<fp<2, 5, 1, false>>::epsilon()) == 1.0);
  CHECK(static_cast<double>(fp<2, 5, 1, false>(1.0) + std::numeric_limits<fp<2, 5, 1, false>>::epsilon()) > 1.0);
}

TEST_CASE("the cmath overloads: sqrt and fma correctly rounded, the rest rounded once from double") {
  // sqrt of every binary16 and e5m2 value against MPFR.
  for (std::uint32_t c = 0; c < 0x10000; ++c) {
    const binary16_t x = binary16_t::from_bits(static_cast<std::uint16_t>(c));
    if (isnan(x) || signbit(x)) continue;
    mpfr_t m;
    mpfr_init2(m, 80);
    mpfr_set_d(m, static_cast<double>(x), MPFR_RNDN);
    mpfr_sqrt(m, m, MPFR_RNDN);  // exact enough: 80 bits, and sqrt of an 11-bit value is never a tie at 11 bits
    const double want = mpfr_round_to(binary16, m, rounding::nearest_even);
    mpfr_clear(m);
    REQUIRE(static_cast<double>(sqrt(x)) == want);
  }
  // A 40-bit format: sqrt is made odd before the one rounding (plain double rounding can fail here).
  std::mt19937_64 gen(3);
  for (int i = 0; i < 20000; ++i) {
    const auto x = fp<11, 40>::from_bits(gen() & 0x3ffffffffffffULL);  // positive values
    if (!isfinite(x)) continue;
    mpfr_t exact;
    mpfr_init2(exact, 200);  // sqrt of a 41-bit value: a tie at 41 bits would need an exact 42-bit root
    mpfr_set_d(exact, static_cast<double>(x), MPFR_RNDN);
    mpfr_sqrt(exact, exact, MPFR_RNDN);
    const double want = mpfr_round_to(fp<11, 40>::fmt, exact, rounding::nearest_even);
    mpfr_clear(exact);
    REQUIRE(static_cast<double>(sqrt(x)) == want);
  }
  // 52 and 51 mantissa bits: double's root is already the rounding (52), or decides between two
  // values with its residual (51); made odd first it was the wrong neighbour for half the roots.
  CHECK(static_cast<double>(sqrt(fp<11, 52>(3))) == std::sqrt(3.0));
  int differ = 0;
  for (int i = 2; i < 2000; ++i) differ += static_cast<double>(sqrt(fp<11, 52>(i))) != std::sqrt(static_cast<double>(i));
  CHECK(differ == 0);
  for (int i = 2; i < 2000; ++i) {
    mpfr_t root;
    mpfr_init2(root, 200);
    mpfr_set_si(root, i, MPFR_RNDN);
    mpfr_sqrt(root, root, MPFR_RNDN);  // a tie at 52 bits would need an exact 53-bit root of an integer: none
    const double want = mpfr_round_to(fp<11, 51>::fmt, root, rounding::nearest_even);
    mpfr_clear(root);
    INFO("sqrt " << i);
    REQUIRE(static_cast<double>(sqrt(fp<11, 51>(i))) == want);
  }
  // fma: one rounding of a*b+c (here a*b+c is a tie only a fused operation sees).
  const binary16_t a(1.0 + 0x1p-10), b(1.0 + 0x1p-10), c(-(1.0 + 0x1p-9));
  CHECK(static_cast<double>(fma(a, b, c)) == 0x1p-20);  // a * b + c unfused: 0
  CHECK(static_cast<double>(a * b + c) == 0.0);
  for (int i = 0; i < 20000; ++i) {
    const auto pick = [&] { return binary16_t::from_bits(static_cast<std::uint16_t>(gen() & 0x7bff) | (gen() % 2 ? 0x8000 : 0)); };
    const binary16_t x = pick(), y = pick(), z = pick();
    mpfr_t m, t;
    mpfr_inits2(200, m, t, static_cast<mpfr_ptr>(nullptr));
    mpfr_set_d(m, static_cast<double>(x), MPFR_RNDN);
    mpfr_set_d(t, static_cast<double>(y), MPFR_RNDN);
    mpfr_mul(m, m, t, MPFR_RNDN);
    mpfr_set_d(t, static_cast<double>(z), MPFR_RNDN);
    mpfr_add(m, m, t, MPFR_RNDN);  // exact at 200 bits
    const double want = mpfr_round_to(binary16, m, rounding::nearest_even);
    mpfr_clears(m, t, static_cast<mpfr_ptr>(nullptr));
    const double got = static_cast<double>(fma(x, y, z));
    INFO(static_cast<double>(x) << " * " << static_cast<double>(y) << " + " << static_cast<double>(z));
    REQUIRE((got == want || (got == 0 && want == 0)));
  }
  // The rest: the double function rounded once.
  const binary16_t h(0.3);
  CHECK(exp(h).bits() == binary16_t(std::exp(static_cast<double>(h))).bits());
  CHECK(log(h).bits() == binary16_t(std::log(static_cast<double>(h))).bits());
  CHECK(pow(h, binary16_t(2.5)).bits() == binary16_t(std::pow(static_cast<double>(h), 2.5)).bits());
  CHECK(tanh(h).bits() == binary16_t(std::tanh(static_cast<double>(h))).bits());
  CHECK(static_cast<double>(floor(binary16_t(-2.5))) == -3.0);
  CHECK(static_cast<double>(ceil(binary16_t(2.25))) == 3.0);
  CHECK(static_cast<double>(trunc(binary16_t(-2.75))) == -2.0);
  CHECK(static_cast<double>(round(binary16_t(2.5))) == 3.0);
  CHECK(static_cast<double>(abs(binary16_t(-2.5))) == 2.5);
  CHECK(static_cast<double>(fmod(binary16_t(7.0), binary16_t(2.5))) == 2.0);
}

TEST_CASE("classification, nextafter, frexp and ldexp of fp<> values") {
  using limits = std::numeric_limits<binary16_t>;
  CHECK(isnan(limits::quiet_NaN()));
  CHECK(isinf(limits::infinity()));
  CHECK_FALSE(isfinite(limits::infinity()));
  CHECK(isfinite(limits::max()));
  CHECK(signbit(binary16_t(-0.0)));
  CHECK(isnormal(limits::min()));
  CHECK_FALSE(isnormal(limits::denorm_min()));
  CHECK(fpclassify(limits::denorm_min()) == FP_SUBNORMAL);
  CHECK(fpclassify(binary16_t(0.0)) == FP_ZERO);
  const binary16_t one(1.0);
  CHECK(static_cast<double>(nextafter(one, binary16_t(2.0))) == 1.0 + 0x1p-10);
  CHECK(static_cast<double>(nextafter(one, binary16_t(0.0))) == 1.0 - 0x1p-11);
  CHECK(static_cast<double>(nextafter(binary16_t(0.0), one)) == 0x1p-24);
  CHECK(static_cast<double>(nextafter(binary16_t(0.0), -one)) == -0x1p-24);
  CHECK(isinf(nextafter(limits::max(), limits::infinity())));
  CHECK(nextafter(limits::infinity(), one) == limits::max());
  CHECK(static_cast<double>(nextafter(binary16_t(-1.0), binary16_t(0.0))) == -(1.0 - 0x1p-11));
  // Without Inf the largest value stays; without subnormals the step from zero is the smallest normal.
  CHECK(nextafter(std::numeric_limits<e4m3_t>::max(), e4m3_t(1000.0, {rounding::nearest_even, overflow::saturate})) ==
        std::numeric_limits<e4m3_t>::max());
  using ftz = fp<5, 10, 15, false>;
  CHECK(static_cast<double>(nextafter(ftz(0.0), ftz(1.0))) == 0x1p-14);
  CHECK(static_cast<double>(nextafter(ftz(0x1p-14), ftz(0.0))) == 0.0);
  int e = 0;
  const binary16_t m = frexp(binary16_t(48.0), &e);
  CHECK(static_cast<double>(m) == 0.75);
  CHECK(e == 6);
  CHECK(static_cast<double>(ldexp(binary16_t(0.75), 6)) == 48.0);
  CHECK(isinf(ldexp(binary16_t(1.0), 16)));
  CHECK(ilogb(binary16_t(48.0)) == 5);
}

TEST_CASE("explicit conversions between formats round once, and to integers truncate or throw") {
  // bfloat16 -> binary16: one rounding of the exact value.
  const bfloat16_t b(0x1.fep-1);
  CHECK(static_cast<double>(binary16_t(b)) == 0x1.fep-1);
  const binary16_t h(1.0 + 0x1p-9 + 0x1p-10);  // 1.0000000011b: a tie at 8 bits
  CHECK(static_cast<double>(bfloat16_t(h)) == 1.0);
  CHECK(static_cast<double>(bfloat16_t(h, {rounding::toward_positive})) == 1.0 + 0x1p-7);
  CHECK(static_cast<double>(paper_fp<4, 3, 4>(binary16_t(1000.0))) == 30.0);  // all_finite saturates
  CHECK(isnan(e4m3_t(binary16_t(1000.0))));                                     // e4m3 overflow: NaN
  CHECK_THROWS_AS(fp_4_3_4_t(std::numeric_limits<e4m3_t>::quiet_NaN()), std::domain_error);
  CHECK(static_cast<int>(binary16_t(-2.75)) == -2);
  CHECK(static_cast<std::uint8_t>(binary16_t(255.0)) == 255);
  CHECK(static_cast<std::int64_t>(fp<11, 52>(-0x1p63)) == std::numeric_limits<std::int64_t>::min());
  CHECK_THROWS_AS(static_cast<std::uint8_t>(binary16_t(256.0)), std::domain_error);
  CHECK_THROWS_AS(static_cast<int>(binary16_t(std::numeric_limits<float>::quiet_NaN())), std::domain_error);
  CHECK_THROWS_AS(static_cast<std::int64_t>(fp<11, 52>(0x1p63)), std::domain_error);
  CHECK_THROWS_AS(static_cast<unsigned>(binary16_t(-1.0)), std::domain_error);
  CHECK(static_cast<unsigned>(binary16_t(-0.5)) == 0u);  // truncates to 0, in range
  CHECK(static_cast<bool>(binary16_t(0.5)));
}

TEST_CASE("increment, decrement and reading from a stream round once") {
  binary16_t x(2047.0);
  ++x;
  CHECK(static_cast<double>(x) == 2048.0);
  ++x;  // 2049 is a tie between 2048 and 2050: even
  CHECK(static_cast<double>(x) == 2048.0);
  const binary16_t before = x--;
  CHECK(static_cast<double>(before) == 2048.0);
  CHECK(static_cast<double>(x) == 2047.0);
  std::istringstream in("0.1 1e300 -3");
  binary16_t a, b;
  fp_4_3_4_t c;
  in >> a >> b >> c;
  CHECK(a.bits() == 0x2e66);
  CHECK(isinf(b));
  CHECK(static_cast<double>(c) == -3.0);
  std::istringstream bad("abc");
  binary16_t unchanged(5.0);
  bad >> unchanged;
  CHECK(bad.fail());
  CHECK(static_cast<double>(unchanged) == 5.0);
}

TEST_CASE("a consumer uses fp<> maths, conversions and quantize(vector, ...) without a cast") {
  using half = binary16_t;
  std::vector<float> activations{0.1f, -2.5f, 1000.0f, 3e-8f};
  quantize(activations, e4m3, {rounding::nearest_even, overflow::saturate});
  std::array<double, 3> weights{1.0 / 3, 2.0 / 3, 1.0};
  quantize(weights, bfloat16);
  std::vector<half> hs(activations.size());
  quantize(activations, hs);
  half acc = 0;
  for (const half h : hs) acc += h * h;
  const half norm = sqrt(acc);
  const half scaled = ldexp(norm, -2) + exp(half(0.5));
  const bfloat16_t wide(scaled);
  int steps = 0;
  for (half t = 0; t < half(4); ++t) ++steps;
  std::ostringstream out;
  out << norm << ' ' << wide << ' ' << steps;
  CHECK(activations[2] == 448.0f);
  CHECK(weights[0] == 0x1.56p-2);
  CHECK(steps == 4);
  CHECK(out.str().size() > 4);
}

TEST_CASE("a sequential_rounder advances its index: one value rounded 1000 times averages to it") {
  const float x = 1.0f + 0x1p-13f;  // between 1 and 1 + 2^-10 in binary16: up with probability 1/8
  const rounding_options o{rounding::stochastic, overflow::infinity, 0, 3, 0};
  sequential_rounder<float> seq(binary16, o);
  const rounder<float> fixed(binary16, o);
  double sum = 0;
  int distinct_fixed = 0;
  for (int i = 0; i < 1000; ++i) {
    sum += seq(x);
    distinct_fixed += fixed(x) != fixed(x);
  }
  const double sigma = 0x1p-10 * std::sqrt(0.125 * 0.875 / 1000);
  CHECK(std::fabs(sum / 1000 - x) < 5 * sigma);
  CHECK(distinct_fixed == 0);  // the stateless rounder repeats its draw: that is its contract
  CHECK(seq.next_index() == 1000);
  // Bulk calls take as many indices as values: two calls equal one call over both halves.
  std::vector<float> a(100, x), b(100, x), whole(200, x);
  sequential_rounder<float> chunked(binary16, o);
  quantize(a, chunked);
  quantize(b, chunked);
  quantize(whole, binary16, o);
  CHECK(std::equal(a.begin(), a.end(), whole.begin()));
  CHECK(std::equal(b.begin(), b.end(), whole.begin() + 100));
  CHECK(chunked.next_index() == 200);
}

TEST_CASE("bulk functions take any contiguous range, fp<> arrays included") {
  const std::vector<float> in{0.1f, -3.3f, 70000.0f, 1e-9f};
  std::array<float, 4> out{};
  quantize(std::span<const float>(in), out, binary16);
  CHECK(out[0] == 0.0999755859375f);
  float c_array[4];
  quantize(in, c_array, binary16, {rounding::toward_zero});
  CHECK(c_array[1] == -3.298828125f);
  std::span<float> view(c_array);
  quantize(view, e5m2);
  CHECK(c_array[0] == 0.09375f);
  std::vector<std::uint16_t> codes(4);
  encode(in, codes, binary16);
  CHECK(codes[0] == 0x2e66);
  std::vector<double> back(4);
  decode(codes, back, binary16);
  CHECK(back[0] == 0.0999755859375);
  // fp<> arrays: rounded into with the element type's implicit rule, decoded exactly.
  std::vector<fp_4_3_4_t> low(4);
  quantize(in, low);
  CHECK(static_cast<double>(low[2]) == 30.0);  // all_finite saturates
  std::vector<float> from_low(4);
  decode(low, from_low);
  CHECK(from_low[2] == 30.0f);
  std::vector<binary16_t> halves(2000);
  std::vector<float> many(2000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<float>(i) * 0.37f - 300.0f;
  quantize(many, halves);  // crosses the internal chunk size
  for (std::size_t i = 0; i < many.size(); ++i) REQUIRE(halves[i].bits() == binary16_t(many[i]).bits());
  std::vector<fp_4_3_4_t> bad(3);
  const std::vector<float> with_nan{1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  CHECK_THROWS_AS(quantize(with_nan, bad), std::domain_error);
  CHECK(static_cast<double>(bad[0]) == 1.0);  // written before the failing element
}
