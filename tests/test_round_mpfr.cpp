// minifloat::round against MPFR on a grid of formats, modes and overflow policies.
//
// Oracle: GNU MPFR, used two independent ways that must agree with each other before the library
// is compared with them:
//  (A) MPFR's own emulation of a small format: round to M+1 bits in MPFR's full exponent range,
//      narrow emin to the format's smallest subnormal, then mpfr_check_range + mpfr_subnormalize
//      (the procedure of the MPFR manual, "Exceptions"). MPFR writes x = 0.1b..b * 2^e, so the
//      smallest subnormal 2^(emin - M) = 0.1 * 2^(emin - M + 1): emin_mpfr = emin - M + 1.
//      MPFR_RNDN, MPFR_RNDZ and MPFR_RNDU on |x| (toward_positive / toward_negative are RNDU or
//      RNDZ on the magnitude, by sign). MPFR implements neither ties-away for mpfr_set nor
//      round-to-odd.
//  (B) Exact arithmetic in MPFR: t = |x| / q with q the format's spacing at x (2^(max(e, emin) - M)),
//      split t into its integer part n and the remainder, and round by comparing the remainder
//      with 1/2 — this is where ties-away (nearest_away) and round-to-odd (truncate, then step up
//      when inexact and the truncated multiple is even) come from.
// The rules MPFR does not model are then applied exactly as round.hpp's header documents them:
// overflow policy (saturate -> ±max; infinity -> ±Inf, NaN for nan_only; toward_zero and to_odd
// always ±max for finite input, directed modes ±max on the side they round toward),
// subnormals off (flush_mode::after_rounding: round as if on, then a result below the smallest
// normal becomes a signed zero; flush_mode::onto_values: the nearer, or per mode the chosen, of 0
// and the smallest normal, decided by an exact MPFR comparison), NaN -> NaN, ±Inf -> ±Inf (NaN
// for nan_only) or ±max per policy, the result keeps the input's sign.
#include <catch2/catch.hpp>

#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <minifloat/minifloat.hpp>

#include "support.hpp"

namespace mf = minifloat;

namespace {

constexpr bool kSanitize = test_support::sanitize;
using test_support::bits_of;

template <class S>
bits_of<S> to_bits(S x) {
  return std::bit_cast<bits_of<S>>(x);
}

template <class S>
const char* source_name() {
  return sizeof(S) == 4 ? "float" : "double";
}

const char* mode_name(mf::rounding m) {
  switch (m) {
    case mf::rounding::nearest_even: return "nearest_even";
    case mf::rounding::nearest_away: return "nearest_away";
    case mf::rounding::toward_zero: return "toward_zero";
    case mf::rounding::stochastic: return "stochastic";
    case mf::rounding::toward_positive: return "toward_positive";
    case mf::rounding::toward_negative: return "toward_negative";
    case mf::rounding::to_odd: return "to_odd";
  }
  return "?";
}

/// The mode as it acts on |x|: directed modes round the magnitude up (reported as
/// toward_positive) or truncate it, depending on the sign.
mf::rounding magnitude_mode(mf::rounding m, bool negative) {
  if (m == mf::rounding::toward_positive) return negative ? mf::rounding::toward_zero : mf::rounding::toward_positive;
  if (m == mf::rounding::toward_negative) return negative ? mf::rounding::toward_positive : mf::rounding::toward_zero;
  return m;
}

/// Restores MPFR's exponent range on scope exit.
struct mpfr_range_guard {
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  ~mpfr_range_guard() {
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
  }
};

class mpfr_oracle {
 public:
  mpfr_oracle() {
    mpfr_inits2(64, t_, n_, r_, static_cast<mpfr_ptr>(nullptr));
    mpfr_init2(y_, 2);
  }
  ~mpfr_oracle() {
    mpfr_clears(t_, n_, r_, static_cast<mpfr_ptr>(nullptr));
    mpfr_clear(y_);
  }
  mpfr_oracle(const mpfr_oracle&) = delete;
  mpfr_oracle& operator=(const mpfr_oracle&) = delete;

  /// (A): ax > 0 finite, rounded to M + 1 bits with subnormals below 2^emin, unbounded above.
  double emulate(double ax, int M, int emin, mpfr_rnd_t rnd) {
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    mpfr_set_prec(y_, M + 1);
    int t = mpfr_set_d(y_, ax, rnd);
    mpfr_set_emin(emin - M + 1);
    t = mpfr_check_range(y_, t, rnd);
    t = mpfr_subnormalize(y_, t, rnd);
    (void)t;
    const double r = mpfr_get_d(y_, MPFR_RNDN);  // exact: every value of the format is a double
    mpfr_set_emin(mpfr_get_emin_min());
    return r;
  }

  /// Formats without subnormals under flush_mode::onto_values, for 0 < ax < 2^emin: 0 or 2^emin,
  /// chosen by an exact comparison of ax with 2^(emin-1). mode as for exact().
  double onto_zero_or_min_normal(double ax, int emin, mf::rounding mode) {
    const double min_normal = std::ldexp(1.0, emin);
    mpfr_set_d(t_, ax, MPFR_RNDN);
    const int c = mpfr_cmp_d(t_, min_normal / 2);
    bool up = false;
    switch (mode) {
      case mf::rounding::nearest_even: up = c > 0; break;  // a tie goes to 0, whose last bit is even
      case mf::rounding::nearest_away: up = c >= 0; break;
      case mf::rounding::toward_positive:
      case mf::rounding::to_odd: up = true; break;  // inexact: away from the truncation 0
      default: up = false; break;
    }
    return up ? min_normal : 0.0;
  }

  /// (B): ax > 0 finite; exact remainder comparison. mode (a magnitude mode): nearest_even,
  /// nearest_away, toward_zero, toward_positive (up in magnitude), to_odd.
  double exact(double ax, int M, int emin, mf::rounding mode) {
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    const int e = std::ilogb(ax);  // exact binade of ax, also for subnormal doubles
    const int qe = std::max(e, emin) - M;
    mpfr_set_d(t_, ax, MPFR_RNDN);      // exact (64 >= 53 bits)
    mpfr_mul_2si(t_, t_, -qe, MPFR_RNDN);  // exact: a power of two
    mpfr_trunc(n_, t_);                    // n < 2^(M+1) <= 2^53: exact at 64 bits
    mpfr_sub(r_, t_, n_, MPFR_RNDN);       // the remainder: exact, t has at most 53 significant bits
    const int c = mpfr_cmp_d(r_, 0.5);
    bool up = false;
    switch (mode) {
      case mf::rounding::nearest_even: up = c > 0 || (c == 0 && mpfr_get_ui(n_, MPFR_RNDN) % 2 == 1); break;
      case mf::rounding::nearest_away: up = c >= 0; break;
      case mf::rounding::toward_positive: up = mpfr_sgn(r_) != 0; break;
      case mf::rounding::to_odd: up = mpfr_sgn(r_) != 0 && mpfr_get_ui(n_, MPFR_RNDN) % 2 == 0; break;
      default: up = false; break;
    }
    if (up) mpfr_add_ui(n_, n_, 1, MPFR_RNDN);
    mpfr_mul_2si(n_, n_, qe, MPFR_RNDN);
    return mpfr_get_d(n_, MPFR_RNDN);  // exact, or +Inf past DBL_MAX (an overflow either way)
  }

 private:
  mpfr_t t_, n_, r_, y_;
};

/// What round.hpp documents for x, given the oracle's magnitude r_on (subnormals on, no upper
/// bound) for finite x.
template <class S>
S apply_rules(S x, const mf::format& f, const mf::rounding_options& o, double r_on, double r_onto) {
  const bool saturate = o.on_overflow == mf::overflow::saturate;
  const double max = f.max_finite();
  const double overflow_signal = f.encoding == mf::specials::nan_only ? std::numeric_limits<double>::quiet_NaN()
                                                                      : std::numeric_limits<double>::infinity();
  if (std::isnan(x)) return std::numeric_limits<S>::quiet_NaN();
  if (std::isinf(x)) return std::copysign(static_cast<S>(saturate ? max : overflow_signal), x);
  double r = r_on;
  if (!f.subnormals && o.flush == mf::flush_mode::onto_values && std::fabs(static_cast<double>(x)) < f.min_normal())
    r = r_onto;
  else if (!f.subnormals && r < f.min_normal())
    r = 0.0;
  const mf::rounding m = magnitude_mode(o.mode, std::signbit(x));
  const bool stays_finite = m == mf::rounding::toward_zero || m == mf::rounding::to_odd;
  if (r > max) r = (saturate || stays_finite) ? max : overflow_signal;
  return std::copysign(static_cast<S>(r), x);
}

template <class S>
bool representable(double v) {
  if constexpr (sizeof(S) == 4) {
    return std::isfinite(v) && std::fabs(v) <= std::numeric_limits<float>::max() &&
           static_cast<double>(static_cast<float>(v)) == v;
  } else {
    return std::isfinite(v);
  }
}

/// Boundary values of f for source S: binade boundaries, ties, the overflow threshold, the
/// subnormal range, each with its neighbours one source ulp away, both signs, plus specials.
template <class S>
std::vector<S> boundary_values(const mf::format& f) {
  const int M = f.mantissa_bits, emin = f.emin(), emax = f.emax();
  const double q_sub = std::ldexp(1.0, emin - M);
  const double max = f.max_finite();
  const double top_ulp = std::ldexp(1.0, emax - M);
  std::vector<double> base;
  for (int k = emin - M - 3; k <= emax + 2; ++k) {
    const double b = std::ldexp(1.0, k);
    base.push_back(b);
    const bool edge = k <= emin + 2 || k >= emax - 2 || (k - emin) % 7 == 0;
    if (k >= emin && edge) {
      const double ulp = std::ldexp(1.0, k - M);
      base.push_back(b + 0.5 * ulp);          // first tie of the binade (even below)
      base.push_back(b + 1.5 * ulp);          // second tie (odd below)
      base.push_back(2 * b - 0.5 * ulp);      // last tie: carries into the next binade
      base.push_back(2 * b - 1.5 * ulp);
      base.push_back(b + 0.25 * ulp);
      base.push_back(b + 0.75 * ulp);
    }
  }
  const double subnormal_count = std::ldexp(1.0, M);
  for (double j : {0.0, 1.0, 2.0, 3.0, subnormal_count - 2, subnormal_count - 1}) {
    if (j < 0 || j >= subnormal_count) continue;
    base.push_back((j + 0.5) * q_sub);
    base.push_back((j + 0.25) * q_sub);
    base.push_back((j + 0.75) * q_sub);
    base.push_back(j * q_sub);
  }
  for (double v : {q_sub / 2, q_sub / 4, q_sub * 0.75, q_sub * 1.25, q_sub * 0.375, f.min_normal(),
                   f.min_normal() - q_sub / 2, f.min_normal() + q_sub / 2, max, max - top_ulp / 2,
                   max + top_ulp / 2, max + top_ulp, max + 1.5 * top_ulp, 2 * max, f.overflow_threshold(),
                   4 * max, 1.0, 1.5, 3.0})
    base.push_back(v);

  std::vector<S> out;
  for (double v : base) {
    if (!representable<S>(v)) continue;
    const S s = static_cast<S>(v);
    for (S w : {s, std::nextafter(s, S(0)), std::nextafter(s, std::numeric_limits<S>::infinity())}) {
      if (!std::isfinite(w)) continue;
      out.push_back(w);
      out.push_back(-w);
    }
  }
  using L = std::numeric_limits<S>;
  for (S v : {S(0), L::denorm_min(), 2 * L::denorm_min(), 3 * L::denorm_min(), L::min(), L::min() / 2, L::max(),
              L::infinity(), L::quiet_NaN(), L::signaling_NaN()}) {
    out.push_back(v);
    out.push_back(-v);
  }
  return out;
}

/// Random values of S spread over f's range (and sometimes anywhere): random sign, random
/// mantissa, often cut to a few bits past the format's precision so that ties come up.
template <class S>
std::vector<S> random_values(const mf::format& f, std::mt19937_64& rng, int n) {
  using L = std::numeric_limits<S>;
  const int M = f.mantissa_bits;
  const int lo = std::max(f.emin() - M - 4, L::min_exponent - L::digits);
  const int hi = std::min(f.emax() + 2, L::max_exponent - 1);
  std::uniform_int_distribution<int> exp_dist(lo, hi);
  std::vector<S> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const std::uint64_t w = rng();
    if (w % 16 == 0) {  // any bit pattern: source subnormals, huge values, NaN, Inf
      out.push_back(std::bit_cast<S>(static_cast<bits_of<S>>(rng())));
      continue;
    }
    std::uint64_t mant = rng() >> 12;  // 52 random bits
    const int keep = static_cast<int>((w >> 8) % 4);
    if (keep < 3) {  // keep M + 1 + keep fraction bits only
      const int bits = std::min(52, M + 1 + keep);
      mant &= ~((std::uint64_t{1} << (52 - bits)) - 1);
    }
    const double v = std::ldexp(1.0 + std::ldexp(static_cast<double>(mant), -52), exp_dist(rng));
    S s = static_cast<S>(v);
    if ((w >> 4) & 1) s = -s;
    out.push_back(s);
  }
  return out;
}

struct failure_log {
  std::uint64_t count = 0;
  std::vector<std::string> first;
  void add(const std::string& s) {
    ++count;
    if (first.size() < 12) first.push_back(s);
  }
  std::string text() const {
    std::ostringstream o;
    o << count << " mismatches";
    for (const auto& s : first) o << "\n  " << s;
    return o.str();
  }
};

template <class S>
std::string describe(S x, const mf::format& f, const mf::rounding_options& o, S got, S want) {
  std::ostringstream s;
  s.precision(std::numeric_limits<S>::max_digits10);
  s << source_name<S>() << " " << mf::to_string(f) << " " << mode_name(o.mode)
    << (o.on_overflow == mf::overflow::saturate ? " saturate" : " infinity")
    << (o.flush == mf::flush_mode::onto_values ? " onto_values" : "") << " x=" << std::hexfloat << x
    << " got=" << got << " want=" << want;
  return s.str();
}

/// The formats of the grid: E 1..8, M 0..10, four biases (IEEE default, the paper's +4, and two
/// others), three encodings; only valid descriptors that fit S.
template <class S>
std::vector<mf::format> format_grid() {
  std::vector<mf::format> out;
  for (int E = 1; E <= 8; ++E)
    for (int M = 0; M <= 10; ++M)
      for (int offset : {0, 4, 1, -3})
        for (auto enc : {mf::specials::ieee, mf::specials::nan_only, mf::specials::all_finite}) {
          const mf::format f{E, M, mf::default_bias(E) + offset, true, enc};
          if (mf::source_problem<S>(f).empty()) out.push_back(f);
        }
  for (const mf::format& f : {mf::binary16, mf::bfloat16, mf::e4m3, mf::e5m2, mf::fp_4_3_4, mf::fp_5_2_0,
                              mf::fp_6_9_0, mf::binary32})
    if (mf::source_problem<S>(f).empty()) out.push_back(f);
  if constexpr (sizeof(S) == 8) {  // wider formats that only double holds
    out.push_back(mf::format{11, 52, 1023, true, mf::specials::ieee});  // binary64 itself: identity
    out.push_back(mf::format{11, 10, 1023, true, mf::specials::ieee});
    out.push_back(mf::format{9, 30, 255, true, mf::specials::all_finite});
    out.push_back(mf::format{10, 45, 520, true, mf::specials::nan_only});
    out.push_back(mf::format{8, 23, 130, true, mf::specials::all_finite});
    out.push_back(mf::format{10, 51, 511, true, mf::specials::all_finite});
  }
  return out;
}

template <class S>
void compare_grid_with_mpfr() {
  mpfr_range_guard guard;
  mpfr_oracle oracle;
  std::mt19937_64 rng(0x5eed0000u + sizeof(S));
  const auto grid = format_grid<S>();
  const std::size_t stride = kSanitize ? 3 : 1;
  const int n_random = kSanitize ? 150 : 1000;
  const mf::rounding modes[] = {mf::rounding::nearest_even,    mf::rounding::toward_zero,
                                mf::rounding::nearest_away,    mf::rounding::toward_positive,
                                mf::rounding::toward_negative, mf::rounding::to_odd};

  failure_log oracle_disagreement, rounding, roundtrip;
  std::uint64_t compared = 0;
  for (std::size_t gi = 0; gi < grid.size(); gi += stride) {
    const mf::format base = grid[gi];
    std::vector<S> xs = boundary_values<S>(base);
    const auto rs = random_values<S>(base, rng, n_random);
    xs.insert(xs.end(), rs.begin(), rs.end());
    for (const mf::rounding mode : modes) {
      for (const S x : xs) {
        double r_on = 0.0, r_onto = 0.0;
        if (std::isfinite(x) && x != 0) {
          const double ax = std::fabs(static_cast<double>(x));
          const mf::rounding m = magnitude_mode(mode, std::signbit(x));
          r_on = oracle.exact(ax, base.mantissa_bits, base.emin(), m);
          r_onto = oracle.onto_zero_or_min_normal(ax, base.emin(), m);
          if (m != mf::rounding::nearest_away && m != mf::rounding::to_odd) {
            const mpfr_rnd_t rnd = m == mf::rounding::nearest_even ? MPFR_RNDN
                                   : m == mf::rounding::toward_zero ? MPFR_RNDZ
                                                                    : MPFR_RNDU;
            const double a = oracle.emulate(ax, base.mantissa_bits, base.emin(), rnd);
            if (a != r_on) {
              std::ostringstream s;
              s << std::hexfloat << "oracles disagree: " << mf::to_string(base) << " " << mode_name(mode) << " |x|=" << ax
                << " mpfr_subnormalize=" << a << " exact=" << r_on;
              oracle_disagreement.add(s.str());
            }
          }
        }
        for (const int sub : {0, 1, 2}) {  // subnormals; none, flushed after rounding; none, onto values
          mf::format f = base;
          f.subnormals = sub == 0;
          for (const auto pol : {mf::overflow::saturate, mf::overflow::infinity}) {
            mf::rounding_options o;
            o.mode = mode;
            o.on_overflow = pol;
            o.flush = sub == 2 ? mf::flush_mode::onto_values : mf::flush_mode::after_rounding;
            const S got = mf::round(x, f, o);
            const S want = apply_rules(x, f, o, r_on, r_onto);
            ++compared;
            const bool same = std::isnan(want) ? static_cast<bool>(std::isnan(got)) : to_bits(got) == to_bits(want);
            if (!same) rounding.add(describe(x, f, o, got, want));

            // encode/decode: decode(encode(x)) is round(x) whenever the result has a code.
            const mf::code_result c = mf::try_encode(x, f, o);
            const bool has_code = f.encoding != mf::specials::all_finite || std::isfinite(got);
            // Formats without Inf never return one: nan_only signals overflow with NaN.
            if (f.encoding == mf::specials::nan_only && std::isinf(got)) rounding.add("Inf from nan_only: " + describe(x, f, o, got, want));
            bool ok = c.representable == has_code;
            if (ok && c.representable) {
              ok = f.bit_width() >= 64 || (c.code >> f.bit_width()) == 0;
              const S d = mf::decode<S>(c.code, f);
              if (std::isnan(got) || (std::isinf(got) && f.encoding == mf::specials::nan_only))
                ok = ok && std::isnan(d);
              else
                ok = ok && to_bits(d) == to_bits(got);
            }
            if (!ok) {
              std::ostringstream s;
              s << describe(x, f, o, got, want) << " code=0x" << std::hex << c.code
                << " representable=" << c.representable;
              roundtrip.add(s.str());
            }
          }
        }
      }
    }
  }
  INFO(source_name<S>() << ": " << compared << " roundings compared over " << grid.size() / stride << " formats");
  {
    INFO("oracle self-check (MPFR subnormalize vs exact remainder): " << oracle_disagreement.text());
    CHECK(oracle_disagreement.count == 0);
  }
  {
    INFO("minifloat::round vs MPFR: " << rounding.text());
    CHECK(rounding.count == 0);
  }
  {
    INFO("decode(encode(x)) vs round(x): " << roundtrip.text());
    CHECK(roundtrip.count == 0);
  }
  CHECK(compared > (kSanitize ? 10000u : 1000000u));
}

}  // namespace

TEST_CASE("round from float matches MPFR for every format, mode and overflow policy of the grid", "[mpfr]") {
  compare_grid_with_mpfr<float>();
}

TEST_CASE("round from double matches MPFR for every format, mode and overflow policy of the grid", "[mpfr]") {
  compare_grid_with_mpfr<double>();
}

TEST_CASE("the MPFR oracle reproduces known binary16 roundings", "[mpfr][oracle]") {
  // Guards the oracle itself against a wrong exponent convention: hand-known binary16 results.
  mpfr_range_guard guard;
  mpfr_oracle o;
  const int M = 10, emin = -14;
  CHECK(o.emulate(1.0 + 0x1p-11, M, emin, MPFR_RNDN) == 1.0);
  CHECK(o.emulate(1.0 + 0x1p-11 + 0x1p-30, M, emin, MPFR_RNDN) == 1.0 + 0x1p-10);
  CHECK(o.emulate(0x1p-25, M, emin, MPFR_RNDN) == 0.0);             // half the smallest subnormal: tie to 0
  CHECK(o.emulate(0x1p-25 * 1.5, M, emin, MPFR_RNDN) == 0x1p-24);
  CHECK(o.emulate(0x1p-24 * 2.5, M, emin, MPFR_RNDN) == 0x1p-23);  // subnormal tie to even
  CHECK(o.emulate(0x1p-24 * 2.5, M, emin, MPFR_RNDZ) == 0x1p-23);
  CHECK(o.emulate(0x1p-24 * 3.5, M, emin, MPFR_RNDZ) == 0x1p-24 * 3);
  CHECK(o.exact(0x1p-24 * 2.5, M, emin, mf::rounding::nearest_away) == 0x1p-24 * 3);
  CHECK(o.exact(65520.0, M, emin, mf::rounding::nearest_even) == 65536.0);
  CHECK(o.exact(65519.0, M, emin, mf::rounding::nearest_even) == 65504.0);
}

TEST_CASE("decode gives the value its fields stand for, and encode(decode(c)) == c, for every code",
          "[mpfr][codes]") {
  // Hand formula: (-1)^s * 2^(e - bias) * (1 + m / 2^M), or (-1)^s * m * 2^(emin - M) for e = 0;
  // the top exponent field holds Inf/NaN (ieee) or NaN at all ones (nan_only).
  std::vector<mf::format> formats = {mf::binary16, mf::bfloat16, mf::e4m3, mf::e5m2, mf::fp_4_3_4, mf::fp_5_2_0,
                                     mf::fp_6_9_0};
  for (int E = 1; E <= 6; ++E)
    for (int M = 0; M <= 5; ++M)
      for (auto enc : {mf::specials::ieee, mf::specials::nan_only, mf::specials::all_finite}) {
        const mf::format f{E, M, mf::default_bias(E) + (E % 3) - 1, true, enc};
        if (mf::source_problem<float>(f).empty()) formats.push_back(f);
      }
  failure_log log;
  std::uint64_t checked = 0;
  for (const auto& f : formats) {
    const std::uint64_t ncodes = std::uint64_t{1} << f.bit_width();
    const std::uint64_t step = kSanitize && ncodes > 4096 ? 7 : 1;
    const int M = f.mantissa_bits;
    const std::uint64_t top = (std::uint64_t{1} << f.exponent_bits) - 1;
    for (std::uint64_t c = 0; c < ncodes; c += step) {
      const bool neg = (c >> (f.exponent_bits + M)) & 1;
      const std::uint64_t e = (c >> M) & top;
      const std::uint64_t m = c & ((std::uint64_t{1} << M) - 1);
      double want;
      bool nan = false, inf = false;
      if (f.encoding == mf::specials::ieee && e == top) {
        nan = m != 0;
        inf = m == 0;
        want = std::numeric_limits<double>::infinity();
      } else if (f.encoding == mf::specials::nan_only && e == top && m == (std::uint64_t{1} << M) - 1) {
        nan = true;
        want = 0;
      } else if (e == 0) {
        want = std::ldexp(static_cast<double>(m), f.emin() - M);
      } else {
        want = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -M), static_cast<int>(e) - f.exponent_bias);
      }
      if (neg) want = -want;
      const float d = mf::decode<float>(c, f);
      const double dd = mf::decode<double>(c, f);
      ++checked;
      bool ok;
      if (nan) ok = std::isnan(d) && std::isnan(dd) && std::signbit(d) == neg;
      else ok = to_bits(d) == to_bits(static_cast<float>(want)) && to_bits(dd) == to_bits(want);
      // Back to the same code (NaN codes map to the canonical NaN code, so skip them).
      if (ok && !nan) {
        mf::rounding_options o;  // Inf comes back as Inf under the default infinity policy
        ok = mf::encode(d, f, o) == c && mf::encode(dd, f, o) == c;
      }
      (void)inf;
      if (!ok) {
        std::ostringstream s;
        s << mf::to_string(f) << " code=0x" << std::hex << c << std::hexfloat << " decode=" << d << " want=" << want;
        log.add(s.str());
      }
    }
  }
  INFO(log.text());
  CHECK(log.count == 0);
  CHECK(checked > (kSanitize ? 50000u : 100000u));
}
