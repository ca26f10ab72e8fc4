// Property tests of the number type fp<> against GNU MPFR: for a representative set of
// instantiations (exponent and mantissa widths, biases that put 1 below or above the normal range,
// every encoding of the special values, subnormals on and off), random and edge inputs are
// converted from double, float and integers of every width in every rounding mode, and
// + − × ÷, sqrt and fma are applied to random and edge values of the type.
//
// Oracle: the exact input or exact result in MPFR (at a precision that holds it: sums of two
// doubles span 2^1024..2^-1074, and x·y + z twice that), or for ÷ and √ the result truncated at 300
// bits with MPFR's ternary value as a sticky bit; then ONE rounding by exact arithmetic:
// t = |x| / q with q = 2^(max(e, emin) − M) the format's step at x, n = ⌊t⌋, and the remainder t − n
// compared with 1/2 (nearest-even, nearest-away), tested for zero (directed, to_odd). The rules MPFR
// does not model are those docs/formats.md §2–3 and §7 state: subnormals off flush a result below
// the smallest normal to a signed zero after rounding (E8M0: to its smallest value), overflow gives
// ±max (saturate, and always for toward_zero and to_odd and for the directed mode rounding toward
// zero), else ±Inf (ieee), NaN (nan_only, fnuz, E8M0); fnuz has no −0; E8M0 gives NaN for zero and
// negative inputs. Stochastic rounding must give one of the two neighbours (truncated, or one step
// away) of the exact value.
// Each case draws from std::mt19937_64 seeded with a fixed seed per type and input kind; a
// failure reports the seed, the format, the input and both results.
#include <catch2/catch.hpp>
#include <mpfr.h>

#include <minifloat/minifloat.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "support.hpp"

using namespace minifloat;

namespace {

constexpr int kTrials = test_support::sanitize ? 150 : 1500;  // inputs per type and source
constexpr mpfr_prec_t kSumPrecision = 2200;                   // exact for a ± b and a · b of doubles
constexpr mpfr_prec_t kFmaPrecision = 3400;                   // exact for a · b + c
constexpr mpfr_prec_t kQuotientPrecision = 300;               // ÷ and √: truncated, with a sticky bit

template <class... T>
struct type_list {};

/// The instantiations under test. Arithmetic is checked where docs/formats.md §7 promises one
/// correct rounding (checks_arithmetic below).
using tested_types = type_list<
    binary16_t, bfloat16_t, e4m3_t, e5m2_t, e4m3fnuz_t, e5m2fnuz_t, e2m1_t, e3m2_t, fp_4_3_4_t, fp_6_9_0_t, e8m0_t,
    fp<5, 10, 15, false>,                         // binary16 without subnormals
    fp<5, 10, 10, false, specials::nan_only>,     // 2^-M below the smallest normal, no subnormals
    fp<2, 5, 1, false>,                           // two binades, no subnormals
    fp<3, 2, -3>,                                 // emin = 4: 1 is below the normal range
    fp<4, 3, 20, true, specials::all_finite>,     // every value below 2^-12
    fp<8, 23>,                                    // binary32's shape, computed in double
    fp<8, 24>,                                    // the widest mantissa double arithmetic rounds once
    fp<11, 40>, fp<10, 50>,                       // beyond M = 24: conversions, sqrt
    fp<11, 52>,                                   // binary64's shape
    fp<2, 52, -60, false>>;                       // integers above 2^53 below its normal range

template <class... T, class Body>
void for_each_type(type_list<T...>, Body body) {
  (body.template operator()<T>(), ...);
}

/// Restores MPFR's exponent range on scope exit.
struct mpfr_range_guard {
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  ~mpfr_range_guard() {
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
  }
};

/// An MPFR number that frees itself.
struct real {
  mpfr_t v;
  explicit real(mpfr_prec_t p) { mpfr_init2(v, p); }
  ~real() { mpfr_clear(v); }
  real(const real&) = delete;
  real& operator=(const real&) = delete;
};

/// What a mode does to a magnitude.
enum class magnitude_rule { truncate, away, nearest_even, nearest_away, odd };

magnitude_rule rule_for(rounding m, bool negative) {
  switch (m) {
    case rounding::nearest_even: return magnitude_rule::nearest_even;
    case rounding::nearest_away: return magnitude_rule::nearest_away;
    case rounding::toward_zero: return magnitude_rule::truncate;
    case rounding::toward_positive: return negative ? magnitude_rule::truncate : magnitude_rule::away;
    case rounding::toward_negative: return negative ? magnitude_rule::away : magnitude_rule::truncate;
    case rounding::to_odd: return magnitude_rule::odd;
    case rounding::stochastic: break;
  }
  return magnitude_rule::truncate;
}

const char* mode_name(rounding m) {
  switch (m) {
    case rounding::nearest_even: return "nearest_even";
    case rounding::nearest_away: return "nearest_away";
    case rounding::toward_zero: return "toward_zero";
    case rounding::stochastic: return "stochastic";
    case rounding::toward_positive: return "toward_positive";
    case rounding::toward_negative: return "toward_negative";
    case rounding::to_odd: return "to_odd";
  }
  return "?";
}

/// |x| (finite, nonzero) rounded once onto F's values, subnormals on and no upper bound. When
/// `sticky`, the true magnitude lies strictly above |x| and below its next value at x's precision
/// (x is a truncation).
double round_magnitude(mpfr_srcptr x, bool sticky, const format& F, magnitude_rule rule) {
  mpfr_range_guard guard;
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
  const mpfr_prec_t p = mpfr_get_prec(x) + 64;
  real t(p), n(p), r(p);
  const long binade = static_cast<long>(mpfr_get_exp(x)) - 1;  // MPFR writes x = 0.1b... * 2^exp
  const long step = std::max<long>(binade, F.emin()) - F.mantissa_bits;
  mpfr_abs(t.v, x, MPFR_RNDN);
  mpfr_mul_2si(t.v, t.v, -step, MPFR_RNDN);  // exact
  mpfr_floor(n.v, t.v);                      // below 2^(M+1) <= 2^53
  mpfr_sub(r.v, t.v, n.v, MPFR_RNDN);        // exact
  int half = mpfr_cmp_d(r.v, 0.5);
  if (sticky && half == 0) half = 1;  // truncated below the true remainder, which is above 1/2
  const bool exact = mpfr_zero_p(r.v) && !sticky;
  const bool odd = mpfr_get_ui(n.v, MPFR_RNDN) % 2 == 1;
  bool up = false;
  switch (rule) {
    case magnitude_rule::truncate: up = false; break;
    case magnitude_rule::away: up = !exact; break;
    case magnitude_rule::nearest_even: up = half > 0 || (half == 0 && odd); break;
    case magnitude_rule::nearest_away: up = half >= 0; break;
    case magnitude_rule::odd: up = !exact && !odd; break;
  }
  if (up) mpfr_add_ui(n.v, n.v, 1, MPFR_RNDN);
  mpfr_mul_2si(n.v, n.v, step, MPFR_RNDN);
  return mpfr_get_d(n.v, MPFR_RNDN);  // exact, or +Inf beyond double's range (an overflow either way)
}

/// The one rounding of the exact value x (plus a sticky bit) to F under `rule` and the overflow
/// policy, with F's rules for special values, flushing, overflow and signs (header comment).
double reference(mpfr_srcptr x, bool sticky, const format& F, magnitude_rule rule, overflow policy) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const bool saturate = policy == overflow::saturate;
  const bool nan_for_inf = F.encoding == specials::nan_only || F.encoding == specials::fnuz ||
                           F.encoding == specials::unsigned_exponent;
  const bool negative = mpfr_signbit(x) != 0;
  if (mpfr_nan_p(x)) return nan;
  if (F.encoding == specials::unsigned_exponent && (negative || mpfr_zero_p(x))) return nan;
  if (mpfr_inf_p(x)) return std::copysign(saturate ? F.max_finite() : (nan_for_inf ? nan : inf), negative ? -1.0 : 1.0);
  double r = 0;
  if (!mpfr_zero_p(x)) {
    r = round_magnitude(x, sticky, F, rule);
    if (!F.subnormals && r < F.min_normal())
      r = F.encoding == specials::unsigned_exponent ? F.min_normal() : 0.0;
    if (r > F.max_finite()) {
      const bool stays_finite = rule == magnitude_rule::truncate || rule == magnitude_rule::odd;
      if (saturate || stays_finite) r = F.max_finite();
      else if (nan_for_inf) return nan;
      else r = inf;
    }
  }
  if (r == 0 && F.encoding == specials::fnuz) return 0.0;
  return negative ? -r : r;
}

bool same_value(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

/// The overflow policies a type can take explicitly: all_finite types have no code for the
/// emulation-level Inf, so only saturation.
template <class T>
std::vector<overflow> policies() {
  if (T::fmt.encoding == specials::all_finite) return {overflow::saturate};
  return {overflow::saturate, overflow::infinity};
}

/// Mismatches of one property over many inputs, with the first few for the failure message.
struct tally {
  std::uint64_t checked = 0, wrong = 0;
  std::ostringstream first;
  template <class Describe>
  void record(bool ok, Describe describe) {
    ++checked;
    if (!ok && wrong++ < 6) {
      first << "\n  ";
      describe(first);
    }
  }
};

/// T(input, options) for every mode and policy against the reference, for one input whose exact
/// value is x. Stochastic rounding: one of the truncated and the stepped-away references.
template <class T, class Input>
void check_conversion(const Input& input, mpfr_srcptr x, std::uint64_t index, tally& t) {
  constexpr format F = T::fmt;
  const bool negative = mpfr_signbit(x) != 0;
  for (const overflow policy : policies<T>()) {
    for (const rounding mode : {rounding::nearest_even, rounding::nearest_away, rounding::toward_zero,
                                rounding::toward_positive, rounding::toward_negative, rounding::to_odd,
                                rounding::stochastic}) {
      const rounding_options o{mode, policy, 0, 99, index};
      const double got = static_cast<double>(T(input, o));
      bool ok;
      double want;
      if (mode == rounding::stochastic) {
        want = reference(x, false, F, magnitude_rule::truncate, policy);
        const double away = reference(x, false, F, magnitude_rule::away, policy);
        ok = same_value(got, want) || same_value(got, away);
      } else {
        want = reference(x, false, F, rule_for(mode, negative), policy);
        ok = same_value(got, want);
      }
      t.record(ok, [&](std::ostream& os) {
        os << std::hexfloat << "input " << +input << " " << mode_name(mode)
           << (policy == overflow::saturate ? " saturate" : " infinity") << ": got " << got << ", want " << want;
      });
    }
  }
}

/// The format's edge values as doubles: zeros, the smallest subnormal and normal, max, 1 and
/// its neighbours, plus random codes; each with the midpoints to its neighbouring value and
/// one double ulp either side of those. `gen` supplies the random codes.
template <class T>
std::vector<double> edge_values(std::mt19937_64& gen) {
  constexpr format F = T::fmt;
  using S = typename T::storage_type;
  const auto value_of = [](std::uint64_t code) { return static_cast<double>(T::from_bits(static_cast<S>(code))); };
  const std::uint64_t codes = std::uint64_t{1} << (F.bit_width() - (F.has_sign() ? 1 : 0));  // magnitudes
  const std::uint64_t max_code = (static_cast<std::uint64_t>(F.max_exponent_field()) << F.mantissa_bits) | F.max_mantissa_field();
  std::vector<std::uint64_t> picks = {0, 1, 2, std::uint64_t{1} << F.mantissa_bits, max_code, max_code - 1};
  for (std::uint64_t c = 0; c < codes; c += std::max<std::uint64_t>(1, codes / 64)) picks.push_back(c);  // evenly spread
  std::uniform_int_distribution<std::uint64_t> any(0, max_code);
  for (int i = 0; i < 64; ++i) picks.push_back(any(gen));
  std::vector<double> out;
  const bool regular = F.subnormals || F.encoding == specials::unsigned_exponent;
  for (std::uint64_t c : picks) {
    if (c > max_code) continue;
    if (!regular && c != 0 && c < (std::uint64_t{1} << F.mantissa_bits)) c = std::uint64_t{1} << F.mantissa_bits;
    const double v = value_of(c);
    // The next value up: the next code, or one step beyond max (the overflow threshold's other side).
    const double next = c < max_code ? value_of(c + 1) : F.max_finite() + std::ldexp(1.0, F.emax() - F.mantissa_bits);
    const double mid = v + (next - v) / 2;  // exact: both are multiples of half a step
    for (const double d : {v, mid}) {
      out.push_back(d);
      out.push_back(std::nextafter(d, 0.0));
      out.push_back(std::nextafter(d, INFINITY));
    }
  }
  out.push_back(F.min_positive() / 2);
  out.push_back(std::nextafter(F.min_positive() / 2, INFINITY));
  out.push_back(std::nextafter(F.min_positive() / 2, 0.0));
  out.push_back(F.min_positive() / 4);
  out.push_back(std::numeric_limits<double>::max());
  out.push_back(std::numeric_limits<double>::denorm_min());
  return out;
}

template <class T>
std::uint64_t type_seed(int kind) {
  constexpr format F = T::fmt;
  return 0x5eed0000ULL + static_cast<std::uint64_t>(kind) * 1000003ULL + static_cast<std::uint64_t>(F.exponent_bits) * 7919ULL +
         static_cast<std::uint64_t>(F.mantissa_bits) * 104729ULL + static_cast<std::uint64_t>(F.exponent_bias + 2000) * 31ULL +
         static_cast<std::uint64_t>(F.encoding) * 3ULL + (F.subnormals ? 1 : 0);
}

template <class T>
void conversions_from_floating_point_match_mpfr() {
  constexpr format F = T::fmt;
  const std::uint64_t seed = type_seed<T>(1);
  std::mt19937_64 gen(seed);
  std::vector<double> inputs = edge_values<T>(gen);
  std::uniform_int_distribution<int> exponent(F.emin() - F.mantissa_bits - 3, F.emax() + 2);
  for (int i = 0; i < kTrials; ++i) {
    const double random_bits = std::bit_cast<double>(gen());
    inputs.push_back(std::isnan(random_bits) ? 1.0 : random_bits);
    inputs.push_back(std::ldexp(static_cast<double>(gen() >> 11), exponent(gen) - 52));
  }
  if (F.has_nan()) inputs.push_back(std::numeric_limits<double>::quiet_NaN());
  inputs.push_back(std::numeric_limits<double>::infinity());
  real x(64);
  tally from_double, from_float;
  std::uint64_t index = 0;
  for (const double magnitude : inputs) {
    for (const double d : {magnitude, -magnitude}) {
      mpfr_set_d(x.v, d, MPFR_RNDN);  // exact
      check_conversion<T>(d, x.v, index, from_double);
      const float f = static_cast<float>(d);
      mpfr_set_flt(x.v, f, MPFR_RNDN);  // exact
      check_conversion<T>(f, x.v, index, from_float);
      ++index;
    }
  }
  INFO("seed " << seed << ", " << to_string(F) << ": from double " << from_double.checked << " checked, "
               << from_double.wrong << " wrong" << from_double.first.str() << "\nfrom float " << from_float.checked
               << " checked, " << from_float.wrong << " wrong" << from_float.first.str());
  CHECK(from_double.wrong == 0);
  CHECK(from_float.wrong == 0);
  CHECK(from_double.checked > 1000);
}

/// Random integers of I: random bit patterns, random lengths, ties at every bit position (with
/// neighbours one either side), and I's own edges.
template <class I>
std::vector<I> integer_inputs(std::mt19937_64& gen) {
  using U = std::make_unsigned_t<I>;
  constexpr int width = std::numeric_limits<U>::digits;
  std::vector<I> out = {I{0}, I{1}, std::numeric_limits<I>::min(), std::numeric_limits<I>::max(),
                        static_cast<I>(std::numeric_limits<I>::max() - 1), static_cast<I>(std::numeric_limits<I>::min() + 1)};
  if constexpr (std::is_signed_v<I>) out.push_back(I{-1});
  for (int i = 0; i < kTrials / 4; ++i) {
    out.push_back(static_cast<I>(static_cast<U>(gen())));
    const int length = 1 + static_cast<int>(gen() % width);
    U m = static_cast<U>(gen() >> (64 - length));
    if (length > 1) {
      const int tie_bit = 1 + static_cast<int>(gen() % static_cast<unsigned>(length - 1));
      m = static_cast<U>((m >> tie_bit << tie_bit) | (U{1} << (tie_bit - 1)));
      m = static_cast<U>(m + static_cast<U>(gen() % 3) - 1);  // the tie, or one either side
    }
    I v = static_cast<I>(m);
    if (std::is_signed_v<I> && gen() % 2 && v != std::numeric_limits<I>::min()) v = static_cast<I>(-v);
    out.push_back(v);
  }
  return out;
}

template <class T, class I>
void conversions_from_integer_type_match_mpfr(tally& t, std::mt19937_64& gen) {
  real x(80);
  std::uint64_t index = 0;
  for (const I v : integer_inputs<I>(gen)) {
    if constexpr (std::is_signed_v<I>) mpfr_set_sj(x.v, static_cast<std::intmax_t>(v), MPFR_RNDN);
    else mpfr_set_uj(x.v, static_cast<std::uintmax_t>(v), MPFR_RNDN);
    check_conversion<T>(v, x.v, index++, t);
  }
}

template <class T>
void conversions_from_integers_match_mpfr() {
  constexpr format F = T::fmt;
  const std::uint64_t seed = type_seed<T>(2);
  std::mt19937_64 gen(seed);
  tally t;
  conversions_from_integer_type_match_mpfr<T, signed char>(t, gen);
  conversions_from_integer_type_match_mpfr<T, unsigned char>(t, gen);
  conversions_from_integer_type_match_mpfr<T, short>(t, gen);
  conversions_from_integer_type_match_mpfr<T, unsigned short>(t, gen);
  conversions_from_integer_type_match_mpfr<T, int>(t, gen);
  conversions_from_integer_type_match_mpfr<T, unsigned>(t, gen);
  conversions_from_integer_type_match_mpfr<T, long>(t, gen);
  conversions_from_integer_type_match_mpfr<T, unsigned long>(t, gen);
  conversions_from_integer_type_match_mpfr<T, long long>(t, gen);
  conversions_from_integer_type_match_mpfr<T, unsigned long long>(t, gen);
  INFO("seed " << seed << ", " << to_string(F) << ": " << t.checked << " checked, " << t.wrong << " wrong" << t.first.str());
  CHECK(t.wrong == 0);
  CHECK(t.checked > 1000);
}

/// Where docs/formats.md §7 promises one correct rounding of + − × ÷: compute_type float, or
/// double with M <= 24 (Figueroa's condition), or M = 52 (double's own rounding is the one).
/// Elsewhere (and for fma beyond M = 25) the result must be one of the exact result's two
/// neighbours in the format.
template <class T>
constexpr bool checks_arithmetic = T::fmt.mantissa_bits <= 24 || T::fmt.mantissa_bits == 52;

/// Random finite values of T: random codes, and the edge values rounded to T.
template <class T>
std::vector<T> operands(std::mt19937_64& gen) {
  constexpr format F = T::fmt;
  using S = typename T::storage_type;
  std::vector<T> out;
  const std::uint64_t mask = F.bit_width() >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << F.bit_width()) - 1;
  for (const double d : edge_values<T>(gen)) out.push_back(T(d, rounding_options{rounding::nearest_even, overflow::saturate}));
  for (int i = 0; i < kTrials; ++i) out.push_back(T::from_bits(static_cast<S>(gen() & mask)));
  std::erase_if(out, [](T v) { return !isfinite(v); });
  if (!F.subnormals && F.encoding != specials::unsigned_exponent)  // codes that rounding never produces
    std::erase_if(out, [](T v) { return v.value() != 0 && abs(v) < std::numeric_limits<T>::min(); });
  return out;
}

template <class T>
void arithmetic_matches_mpfr() {
  constexpr format F = T::fmt;
  const std::uint64_t seed = type_seed<T>(3);
  std::mt19937_64 gen(seed);
  const std::vector<T> values = operands<T>(gen);
  const overflow implicit = F.encoding == specials::all_finite ? overflow::saturate : overflow::infinity;
  real a(64), b(64), c(64), exact(kFmaPrecision), quotient(kQuotientPrecision);
  tally t;
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  const auto check = [&](double got, mpfr_srcptr x, bool sticky, auto describe) {
    const double want = reference(x, sticky, F, magnitude_rule::nearest_even, implicit);
    t.record(same_value(got, want), [&](std::ostream& os) {
      describe(os);
      os << std::hexfloat << ": got " << got << ", want " << want;
    });
  };
  // Beyond what is promised: one of the two neighbours of the exact result (a rounding of the
  // double result, itself within half a double ulp).
  const auto check_faithful = [&](double got, mpfr_srcptr x, bool sticky, auto describe) {
    const double down = reference(x, sticky, F, magnitude_rule::truncate, implicit);
    const double up = reference(x, sticky, F, magnitude_rule::away, implicit);
    t.record(same_value(got, down) || same_value(got, up), [&](std::ostream& os) {
      describe(os);
      os << std::hexfloat << ": got " << got << ", not " << down << " or " << up;
    });
  };
  for (int i = 0; i < 4 * kTrials; ++i) {
    const T x = values[pick(gen)], y = values[pick(gen)], z = values[pick(gen)];
    const double dx = static_cast<double>(x), dy = static_cast<double>(y), dz = static_cast<double>(z);
    mpfr_set_d(a.v, dx, MPFR_RNDN);
    mpfr_set_d(b.v, dy, MPFR_RNDN);
    mpfr_set_d(c.v, dz, MPFR_RNDN);
    const auto operands_of = [&](char op) {
      return [=](std::ostream& os) { os << std::hexfloat << dx << ' ' << op << ' ' << dy; };
    };
    {
      const auto check_operator = [&](double got, mpfr_srcptr r, bool sticky, auto describe) {
        if constexpr (checks_arithmetic<T>) check(got, r, sticky, describe);
        else check_faithful(got, r, sticky, describe);
      };
      mpfr_set_prec(exact.v, kSumPrecision);
      mpfr_add(exact.v, a.v, b.v, MPFR_RNDN);  // exact
      check_operator(static_cast<double>(x + y), exact.v, false, operands_of('+'));
      mpfr_sub(exact.v, a.v, b.v, MPFR_RNDN);
      check_operator(static_cast<double>(x - y), exact.v, false, operands_of('-'));
      mpfr_mul(exact.v, a.v, b.v, MPFR_RNDN);
      check_operator(static_cast<double>(x * y), exact.v, false, operands_of('*'));
      if (dy != 0) {
        const bool sticky = mpfr_div(quotient.v, a.v, b.v, MPFR_RNDZ) != 0;
        check_operator(static_cast<double>(x / y), quotient.v, sticky, operands_of('/'));
      }
    }
    {
      if (dx >= 0 || F.encoding != specials::all_finite) {  // sqrt(-x): NaN, which all_finite cannot hold
        const bool sticky = mpfr_sqrt(quotient.v, a.v, MPFR_RNDZ) != 0;
        check(static_cast<double>(sqrt(x)), quotient.v, sticky, [=](std::ostream& os) { os << std::hexfloat << "sqrt " << dx; });
      }
    }
    {
      mpfr_set_prec(exact.v, kFmaPrecision);
      mpfr_fma(exact.v, a.v, b.v, c.v, MPFR_RNDN);  // exact
      const auto describe = [=](std::ostream& os) { os << std::hexfloat << "fma " << dx << ' ' << dy << ' ' << dz; };
      if constexpr (F.mantissa_bits <= 25) check(static_cast<double>(fma(x, y, z)), exact.v, false, describe);
      else check_faithful(static_cast<double>(fma(x, y, z)), exact.v, false, describe);
    }
  }
  INFO("seed " << seed << ", " << to_string(F) << ": " << t.checked << " checked, " << t.wrong << " wrong" << t.first.str());
  CHECK(t.wrong == 0);
}

}  // namespace

TEST_CASE("fp<> from double and float: one rounding of the exact input in every mode and policy (MPFR)", "[mpfr][properties]") {
  for_each_type(tested_types{}, []<class T>() { conversions_from_floating_point_match_mpfr<T>(); });
}

TEST_CASE("fp<> from integers of every width: one rounding of the exact integer in every mode and policy (MPFR)", "[mpfr][properties]") {
  for_each_type(tested_types{}, []<class T>() { conversions_from_integers_match_mpfr<T>(); });
}

TEST_CASE("fp<> + - * / sqrt fma: one rounding of the exact result where documented, else a neighbour of it (MPFR)", "[mpfr][properties]") {
  for_each_type(tested_types{}, []<class T>() {
    if constexpr (T::fmt.encoding != specials::unsigned_exponent) arithmetic_matches_mpfr<T>();
  });
}
