// The template type fp<E, M, ...>: storage, conversions, agreement with the runtime descriptor
// bit for bit, arithmetic that is correctly rounded (MPFR as oracle), limits, hash, printing.
#include <catch2/catch.hpp>
#include <mpfr.h>

#include <minifloat/minifloat.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <unordered_set>
#include <vector>

using namespace minifloat;

static_assert(std::is_same_v<e4m3_t::storage_type, std::uint8_t>);
static_assert(std::is_same_v<fp<5, 2>::storage_type, std::uint8_t>);
static_assert(std::is_same_v<binary16_t::storage_type, std::uint16_t>);
static_assert(std::is_same_v<fp<8, 10>::storage_type, std::uint32_t>);
static_assert(std::is_same_v<fp<11, 40>::storage_type, std::uint64_t>);
static_assert(std::is_same_v<binary16_t::compute_type, float>);
static_assert(std::is_same_v<bfloat16_t::compute_type, double>);
static_assert(std::is_same_v<fp_6_9_0_t::compute_type, float>);
static_assert(binary16_t(0.1f).bits() == 0x2e66, "conversions are constexpr");
static_assert(float(binary16_t(1.0f) + binary16_t(2.0f)) == 3.0f, "arithmetic is constexpr");

namespace {

template <class T>
void check_template_matches_runtime(std::uint64_t seed) {
  constexpr format F = T::fmt;
  using R = typename T::round_type;
  using bits = typename source_layout<R>::bits;
  std::mt19937_64 gen(seed);
  const rounding_options implicit{rounding::nearest_even,
                                  F.encoding == specials::all_finite ? overflow::saturate : overflow::infinity};
  for (int i = 0; i < 200000; ++i) {
    R x = std::bit_cast<R>(static_cast<bits>(gen()));
    if (std::isnan(x) && !F.has_nan()) continue;
    if (i % 2 == 0) x = static_cast<R>(std::ldexp(std::uniform_real_distribution<double>(-2, 2)(gen), int(gen() % 70) - 35));
    const T t(x);
    const code_result c = try_encode(x, F, implicit);
    REQUIRE(c.representable);
    INFO("x = " << x);
    REQUIRE(t.bits() == c.code);
    const R back = static_cast<R>(t.value());
    const R runtime = decode<R>(c.code, F);
    REQUIRE(std::bit_cast<bits>(back) == std::bit_cast<bits>(runtime));
  }
}

template <class T>
void check_every_code_decodes_like_runtime() {
  constexpr format F = T::fmt;
  using R = typename T::round_type;
  using bits = typename source_layout<R>::bits;
  for (std::uint64_t code = 0; code < (std::uint64_t{1} << F.bit_width()); ++code) {
    const T t = T::from_bits(static_cast<typename T::storage_type>(code));
    const R a = static_cast<R>(t.value());
    const R b = decode<R>(code, F);
    if (std::isnan(a)) {
      REQUIRE(std::isnan(b));
      continue;
    }
    REQUIRE(std::bit_cast<bits>(a) == std::bit_cast<bits>(b));
    // Every value re-encodes to its own code.
    REQUIRE(T(a).bits() == code);
  }
}

// Correct rounding of a op b to the format with MPFR: exact operation at high precision, then
// rounding at precision M + 1 with the format's exponent range and subnormals.
template <class T>
double mpfr_reference(double a, double b, char op) {
  constexpr format F = T::fmt;
  mpfr_t x, y, exact, r;
  mpfr_inits2(200, x, y, exact, static_cast<mpfr_ptr>(nullptr));
  mpfr_init2(r, F.mantissa_bits + 1);
  mpfr_set_d(x, a, MPFR_RNDN);
  mpfr_set_d(y, b, MPFR_RNDN);
  switch (op) {
    case '+': mpfr_add(exact, x, y, MPFR_RNDN); break;
    case '-': mpfr_sub(exact, x, y, MPFR_RNDN); break;
    case '*': mpfr_mul(exact, x, y, MPFR_RNDN); break;
    default: mpfr_div(exact, x, y, MPFR_RNDN); break;
  }
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  mpfr_set_emin(F.emin() - F.mantissa_bits + 1);
  mpfr_set_emax(F.emax() + 1);
  const int t = mpfr_set(r, exact, MPFR_RNDN);
  const int t2 = mpfr_check_range(r, t, MPFR_RNDN);
  mpfr_subnormalize(r, t2, MPFR_RNDN);
  double result = mpfr_get_d(r, MPFR_RNDN);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  mpfr_clears(x, y, exact, r, static_cast<mpfr_ptr>(nullptr));
  if (std::fabs(result) > F.max_finite()) {  // beyond max: the implicit conversion's overflow rule
    if (F.encoding == specials::all_finite) result = std::copysign(F.max_finite(), result);
    else if (F.encoding == specials::nan_only) result = std::numeric_limits<double>::quiet_NaN();
  }
  return result;
}

template <class T>
void check_arithmetic_is_correctly_rounded(std::uint64_t seed) {
  constexpr format F = T::fmt;
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::uint64_t> any_code(0, (std::uint64_t{1} << F.bit_width()) - 1);
  int checked = 0;
  while (checked < 100000) {
    const T a = T::from_bits(static_cast<typename T::storage_type>(any_code(gen)));
    const T b = T::from_bits(static_cast<typename T::storage_type>(any_code(gen)));
    const double da = static_cast<double>(a), db = static_cast<double>(b);
    if (!std::isfinite(da) || !std::isfinite(db) || db == 0) continue;
    for (char op : {'+', '-', '*', '/'}) {
      const T r = op == '+' ? a + b : op == '-' ? a - b : op == '*' ? a * b : a / b;
      const double want = mpfr_reference<T>(da, db, op);
      const double got = static_cast<double>(r);
      INFO(da << ' ' << op << ' ' << db);
      if (std::isnan(want)) REQUIRE(std::isnan(got));
      else REQUIRE(got == want);
      if (want == 0) REQUIRE(std::signbit(got) == std::signbit(want));
    }
    ++checked;
  }
}

}  // namespace

TEST_CASE("the template type and the runtime descriptor give the same codes for the same inputs") {
  check_template_matches_runtime<binary16_t>(1);
  check_template_matches_runtime<bfloat16_t>(2);
  check_template_matches_runtime<e4m3_t>(3);
  check_template_matches_runtime<e5m2_t>(4);
  check_template_matches_runtime<fp_4_3_4_t>(5);
  check_template_matches_runtime<fp_5_2_0_t>(6);
  check_template_matches_runtime<fp_6_9_0_t>(7);
  check_template_matches_runtime<fp<5, 10, 15, false>>(8);
  check_template_matches_runtime<fp<10, 30>>(9);  // rounds from double
}

TEST_CASE("every code of a 16- or 8-bit template type decodes as the runtime path decodes it") {
  check_every_code_decodes_like_runtime<binary16_t>();
  check_every_code_decodes_like_runtime<bfloat16_t>();
  check_every_code_decodes_like_runtime<e4m3_t>();
  check_every_code_decodes_like_runtime<e5m2_t>();
  check_every_code_decodes_like_runtime<fp_4_3_4_t>();
  check_every_code_decodes_like_runtime<fp_5_2_0_t>();
  check_every_code_decodes_like_runtime<fp_6_9_0_t>();
}

TEST_CASE("template arithmetic equals one correct rounding of the exact result (MPFR)") {
  check_arithmetic_is_correctly_rounded<binary16_t>(11);
  check_arithmetic_is_correctly_rounded<bfloat16_t>(12);
  check_arithmetic_is_correctly_rounded<e4m3_t>(13);
  check_arithmetic_is_correctly_rounded<e5m2_t>(14);
  check_arithmetic_is_correctly_rounded<fp_4_3_4_t>(15);
  check_arithmetic_is_correctly_rounded<fp_6_9_0_t>(16);
  // Types that compute in double although every value is a float: the double result is rounded
  // from double, not through float.
  check_arithmetic_is_correctly_rounded<fp<8, 15>>(17);
  check_arithmetic_is_correctly_rounded<fp<8, 10>>(18);
  check_arithmetic_is_correctly_rounded<fp<8, 22>>(19);
  check_arithmetic_is_correctly_rounded<paper_fp<8, 20, 3>>(20);
}

TEST_CASE("implicit conversion overflows to Inf, to the NaN code or to max depending on the encoding") {
  CHECK(std::isinf(static_cast<float>(binary16_t(1e6f))));
  CHECK(e4m3_t(1000.0f).bits() == 0x7f);
  CHECK(static_cast<float>(fp_4_3_4_t(1000.0f)) == 30.0f);
  CHECK(static_cast<float>(fp_4_3_4_t(-1000.0f)) == -30.0f);
  CHECK(static_cast<float>(fp_4_3_4_t(std::numeric_limits<float>::infinity())) == 30.0f);
  CHECK_THROWS_AS(fp_4_3_4_t(std::numeric_limits<float>::quiet_NaN()), std::domain_error);
  CHECK(std::isnan(static_cast<float>(binary16_t(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(static_cast<float>(e4m3_t(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("explicit conversion takes any mode and can count into a caller-owned stats object") {
  CHECK(static_cast<float>(binary16_t(0.1f, {rounding::toward_zero})) == 0.0999755859375f);
  CHECK(static_cast<float>(binary16_t(1.0f + 0x1p-11f, {rounding::nearest_away})) == 1.0f + 0x1p-10f);
  CHECK(static_cast<float>(binary16_t(1.0f + 0x1p-11f)) == 1.0f);
  rounding_stats stats;
  const e5m2_t a(1e6f, {rounding::nearest_even, overflow::saturate}, stats);
  const e5m2_t b(1e-9f, {rounding::nearest_even, overflow::saturate}, stats);
  const e5m2_t c(2.0f, {}, stats);
  CHECK(static_cast<float>(a) == 57344.0f);
  CHECK(static_cast<float>(b) == 0.0f);
  CHECK(static_cast<float>(c) == 2.0f);
  CHECK(stats.values == 3);
  CHECK(stats.overflows == 1);
  CHECK(stats.underflows == 1);
}

TEST_CASE("numeric_limits of the template type carry the format's constants") {
  using L16 = std::numeric_limits<binary16_t>;
  CHECK(static_cast<float>(L16::max()) == 65504.0f);
  CHECK(static_cast<float>(L16::lowest()) == -65504.0f);
  CHECK(static_cast<float>(L16::min()) == 0x1p-14f);
  CHECK(static_cast<float>(L16::denorm_min()) == 0x1p-24f);
  CHECK(static_cast<float>(L16::epsilon()) == 0x1p-10f);
  CHECK(std::isinf(static_cast<float>(L16::infinity())));
  CHECK(std::isnan(static_cast<float>(L16::quiet_NaN())));
  CHECK(L16::digits == 11);
  CHECK(L16::max_exponent == 16);
  CHECK(L16::min_exponent == -13);
  CHECK(static_cast<float>(std::numeric_limits<e4m3_t>::max()) == 448.0f);
  CHECK_FALSE(std::numeric_limits<e4m3_t>::has_infinity);
  CHECK(std::numeric_limits<e4m3_t>::has_quiet_NaN);
  CHECK(static_cast<double>(std::numeric_limits<fp_5_2_0_t>::max()) == 114688.0);
  CHECK(static_cast<double>(std::numeric_limits<fp_4_3_4_t>::max()) == 30.0);
  CHECK_FALSE(std::numeric_limits<fp_4_3_4_t>::has_quiet_NaN);
  CHECK(static_cast<double>(std::numeric_limits<fp_6_9_0_t>::max()) == (2.0 - 0x1p-9) * 0x1p32);
  CHECK(static_cast<float>(std::numeric_limits<fp<5, 10, 15, false>>::denorm_min()) == 0x1p-14f);
}

namespace {

/// numeric_limits<T> against a scan of every code of T (at most 16 bits): max, lowest, min (the
/// smallest positive normal), denorm_min (the smallest positive value), epsilon (the distance from
/// 1 to the least value above 1, or with no value above 1 the top binade's spacing, each the least
/// value of T not below that distance) and round_error (the least value not below 0.5, or max).
template <class T>
void check_limits_against_every_code() {
  constexpr format F = T::fmt;
  using L = std::numeric_limits<T>;
  double max = -INFINITY, lowest = INFINITY, min_normal = INFINITY, min_positive = INFINITY, above_one = INFINITY;
  std::vector<double> positive;
  for (std::uint64_t code = 0; code < (std::uint64_t{1} << F.bit_width()); ++code) {
    const double v = static_cast<double>(T::from_bits(static_cast<typename T::storage_type>(code)));
    if (!std::isfinite(v)) continue;
    // Without subnormals the codes of exponent field 0 other than zero are never produced.
    if (!F.subnormals && v != 0 && std::fabs(v) < std::ldexp(1.0, F.emin())) continue;
    max = std::max(max, v);
    lowest = std::min(lowest, v);
    if (v > 0) {
      positive.push_back(v);
      min_positive = std::min(min_positive, v);
      if (v >= std::ldexp(1.0, F.emin())) min_normal = std::min(min_normal, v);
      if (v > 1) above_one = std::min(above_one, v);
    }
  }
  const auto least_not_below = [&](double d) {
    double best = INFINITY;
    for (const double v : positive)
      if (v >= d) best = std::min(best, v);
    return best == INFINITY ? max : best;
  };
  double top_spacing = INFINITY;  // the smallest gap between positive values in the top binade
  for (const double v : positive)
    if (v < max && v >= std::ldexp(1.0, F.emax())) top_spacing = std::min(top_spacing, max - v);
  if (top_spacing == INFINITY) top_spacing = max - std::ldexp(1.0, F.emax());  // M = 0
  const double epsilon = above_one != INFINITY ? least_not_below(above_one - 1.0) : least_not_below(top_spacing);
  INFO(to_string(F));
  CHECK(static_cast<double>(L::max()) == max);
  CHECK(static_cast<double>(L::lowest()) == lowest);
  CHECK(static_cast<double>(L::min()) == min_normal);
  CHECK(static_cast<double>(L::denorm_min()) == min_positive);
  CHECK(static_cast<double>(L::epsilon()) == epsilon);
  CHECK(static_cast<double>(L::epsilon()) > 0);
  CHECK(static_cast<double>(L::round_error()) == least_not_below(0.5));
  // The C++ definitions of the decimal exponents, by exact scans over powers of ten.
  int max10 = 0;
  while (std::pow(10.0, max10 + 1) <= max) ++max10;
  while (std::pow(10.0, max10) > max) --max10;
  int min10 = 0;
  while (std::pow(10.0, min10 - 1) >= min_normal) --min10;
  while (std::pow(10.0, min10) < min_normal) ++min10;
  CHECK(L::max_exponent10 == max10);
  CHECK(L::min_exponent10 == min10);
}

}  // namespace

TEST_CASE("numeric_limits members equal a scan of every code, formats without subnormals included") {
  check_limits_against_every_code<binary16_t>();
  check_limits_against_every_code<bfloat16_t>();
  check_limits_against_every_code<e4m3_t>();
  check_limits_against_every_code<e5m2_t>();
  check_limits_against_every_code<e4m3fnuz_t>();
  check_limits_against_every_code<e8m0_t>();
  check_limits_against_every_code<e2m1_t>();
  check_limits_against_every_code<fp_4_3_4_t>();
  check_limits_against_every_code<fp<5, 10, 15, false>>();
  // 2^-M lies below the smallest normal and there are no subnormals: 1 + 2^-M is a value, 2^-M not.
  check_limits_against_every_code<fp<5, 10, 10, false, specials::nan_only>>();
  check_limits_against_every_code<fp<2, 5, 1, false>>();
  check_limits_against_every_code<fp<3, 4, -2, false, specials::all_finite>>();  // 1 below min normal 8
  check_limits_against_every_code<fp<3, 0, -5, true, specials::all_finite>>();
  check_limits_against_every_code<fp<5, 2, -1, false>>();
  check_limits_against_every_code<fp<4, 6, 30>>();           // every value below 1
  check_limits_against_every_code<fp<2, 5, 5, false>>();     // every value below 1, spacing below min normal
  check_limits_against_every_code<fp<4, 3, 20, false>>();    // every value below 0.5
}

TEST_CASE("numeric_limits of binary32- and binary64-shaped types equal float's and double's") {
  const auto same = [](auto l, auto s) {
    using LT = decltype(l);
    using ST = decltype(s);
    CHECK(LT::digits == ST::digits);
    CHECK(LT::digits10 == ST::digits10);
    CHECK(LT::max_digits10 == ST::max_digits10);
    CHECK(LT::min_exponent == ST::min_exponent);
    CHECK(LT::max_exponent == ST::max_exponent);
    CHECK(LT::min_exponent10 == ST::min_exponent10);
    CHECK(LT::max_exponent10 == ST::max_exponent10);
    CHECK(static_cast<double>(LT::max()) == static_cast<double>(ST::max()));
    CHECK(static_cast<double>(LT::lowest()) == static_cast<double>(ST::lowest()));
    CHECK(static_cast<double>(LT::min()) == static_cast<double>(ST::min()));
    CHECK(static_cast<double>(LT::denorm_min()) == static_cast<double>(ST::denorm_min()));
    CHECK(static_cast<double>(LT::epsilon()) == static_cast<double>(ST::epsilon()));
    CHECK(static_cast<double>(LT::round_error()) == static_cast<double>(ST::round_error()));
  };
  same(std::numeric_limits<fp<8, 23>>{}, std::numeric_limits<float>{});
  same(std::numeric_limits<fp<11, 52>>{}, std::numeric_limits<double>{});
}

TEST_CASE("comparisons follow IEEE: signed zeros are equal and NaN is unordered") {
  const binary16_t pz(0.0f), nz(-0.0f), nan(std::numeric_limits<float>::quiet_NaN()), one(1.0f);
  CHECK(pz == nz);
  CHECK(pz.bits() != nz.bits());
  CHECK_FALSE(nan == nan);
  CHECK((nan <=> one) == std::partial_ordering::unordered);
  CHECK(one > pz);
  CHECK(-one < nz);
  CHECK((-one).bits() == 0xbc00);
}

TEST_CASE("hash treats signed zeros alike and printing shows the value") {
  std::unordered_set<binary16_t> set{binary16_t(0.0f), binary16_t(-0.0f), binary16_t(1.5f)};
  CHECK(set.size() == 2);
  std::ostringstream os;
  os << binary16_t(0.1f) << ' ' << fp_4_3_4_t(100.0f);
  CHECK(os.str() == "0.0999756 30");
}
