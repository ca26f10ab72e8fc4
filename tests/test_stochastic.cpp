// Stochastic rounding: the exact probability of rounding up, unbiasedness, reproducibility,
// and the documented direction.
//
// round.hpp documents: round away from zero with probability (|x| - down) / (up - down), where
// down and up are the neighbouring values of the format around |x|; with random_bits = R the
// probability is floor(fraction * 2^R) / 2^R. The oracle for (a) is exact counting over all 2^R
// random words, for which the expected count floor(fraction * 2^R) is computed exactly from
// values built by hand (down, the spacing q and the fraction are chosen, x is derived); the
// oracle for (b) is the binomial distribution.
#include <catch2/catch.hpp>

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
using test_support::to_bits;

template <class S>
constexpr int kWidth = static_cast<int>(sizeof(S) * 8);

/// One hand-built case: x lies between the format's neighbours down and up (= down + q).
template <class S>
struct between {
  S x;
  S down_result;  // what rounding down gives (signed)
  S up_result;    // what rounding up gives (signed): up, or ±max / ±Inf past the top
  double fraction;  // (|x| - down) / q, exact
};

/// x = sign * (down + q * fraction) with fraction = c / 2^b (+ a sliver below 2^-b when the
/// source has the bits), built so that every operation is exact in double and x is exact in S.
template <class S>
bool make_between(double down, double q, std::uint64_t c, int b, bool sliver, bool negative, between<S>& out) {
  double frac = std::ldexp(static_cast<double>(c), -b);
  if (sliver) frac += std::ldexp(1.0, -b - 3);
  const double x = down + q * frac;
  if (static_cast<double>(static_cast<S>(x)) != x || x - down != q * frac) return false;
  out.x = static_cast<S>(negative ? -x : x);
  out.down_result = static_cast<S>(negative ? -down : down);
  const double up = down + q;  // past the source's range it stands for Inf (callers replace it)
  const S up_s = up <= static_cast<double>(std::numeric_limits<S>::max()) ? static_cast<S>(up)
                                                                           : std::numeric_limits<S>::infinity();
  out.up_result = negative ? -up_s : up_s;
  out.fraction = frac;
  return true;
}

/// Rounds x with every one of the 2^R random words (random low bits below the kept R bits must
/// not matter) through the core, counts the results equal to up_result, and fails on any result
/// that is neither neighbour. Also runs the bulk kernels' single-binade path when it applies.
std::uint64_t g_exact_cases = 0;  // cases checked, so that a silently empty loop fails

template <class S>
void require_exact_count(const mf::format& f, const between<S>& c, int R, mf::overflow pol, std::mt19937_64& rng) {
  using bits = bits_of<S>;
  constexpr int W = kWidth<S>;
  mf::rounding_options o;
  o.mode = mf::rounding::stochastic;
  o.random_bits = R;
  o.on_overflow = pol;
  const auto plan = mf::make_plan<S>(f, o);
  ++g_exact_cases;
  const bits u = to_bits(c.x);
  // The bulk kernels' single-binade path is documented for |x| in [min normal, overflow threshold).
  const bool plain_ok = plan.plain_path && std::fabs(static_cast<double>(c.x)) >= f.min_normal() &&
                        std::fabs(static_cast<double>(c.x)) < f.overflow_threshold();
  std::uint64_t ups = 0, downs = 0, others = 0, plain_differs = 0;
  const bits low_mask = R == W ? bits{0} : static_cast<bits>((bits{1} << (W - R)) - 1);
  for (std::uint64_t r = 0; r < (std::uint64_t{1} << R); ++r) {
    const bits word = static_cast<bits>((R == W ? static_cast<bits>(r) : static_cast<bits>(r) << (W - R)) |
                                        (static_cast<bits>(rng()) & low_mask));
    const bits res = mf::detail::round_bits<mf::rounding::stochastic, mf::detail::lane_path::any>(plan, u, word);
    if (res == to_bits(c.up_result)) ++ups;
    else if (res == to_bits(c.down_result)) ++downs;
    else ++others;
    if (plain_ok && mf::detail::round_bits<mf::rounding::stochastic, mf::detail::lane_path::plain>(plan, u, word) != res) ++plain_differs;
  }
  const auto expected = static_cast<std::uint64_t>(std::floor(std::ldexp(c.fraction, R)));
  std::ostringstream s;
  s << (sizeof(S) == 4 ? "float " : "double ") << mf::to_string(f) << std::hexfloat << " x=" << c.x
    << " down=" << c.down_result << " up=" << c.up_result << std::defaultfloat << " fraction=" << c.fraction
    << " R=" << R << (pol == mf::overflow::saturate ? " saturate" : " infinity");
  INFO(s.str());
  if (c.up_result == c.down_result) {  // both sides give the same result (saturation)
    CHECK(others == 0);
  } else {
    CHECK(ups == expected);
    CHECK(downs == (std::uint64_t{1} << R) - expected);
    CHECK(others == 0);
  }
  CHECK(plain_differs == 0);
}

const mf::format kFormats[] = {mf::binary16, mf::bfloat16, mf::e4m3, mf::e5m2, mf::fp_4_3_4, mf::fp_5_2_0,
                               mf::fp_6_9_0, mf::format{4, 0, 7, true, mf::specials::all_finite},
                               mf::format{3, 1, 2, false, mf::specials::all_finite},
                               // smallest subnormal inside the source's own subnormal range:
                               // 2^-136 for float, 2^-1032 for double (float skips the latter)
                               mf::format{8, 10, 127, true, mf::specials::ieee},
                               mf::format{11, 10, 1023, true, mf::specials::ieee}};

template <class S>
void exact_counts_normal_range() {
  std::mt19937_64 rng(11);
  constexpr int P = std::numeric_limits<S>::digits - 1;
  for (const auto& f : kFormats) {
    if (!mf::source_problem<S>(f).empty()) continue;
    const int M = f.mantissa_bits;
    const int b = std::min(P - M, 18);  // fraction bits x can carry
    for (int trial = 0; trial < (kSanitize ? 3 : 40); ++trial) {
      const int k = f.emin() + static_cast<int>(rng() % static_cast<unsigned>(f.emax() - f.emin()));  // below the top binade
      const std::uint64_t j = M == 0 ? 0 : rng() % (std::uint64_t{1} << M);
      const double down = std::ldexp(1.0 + std::ldexp(static_cast<double>(j), -M), k);
      const double q = std::ldexp(1.0, k - M);
      const std::uint64_t c = 1 + rng() % ((std::uint64_t{1} << b) - 1);
      between<S> bt;
      if (!make_between<S>(down, q, c, b, false, trial % 2 == 1, bt)) continue;
      for (int R : {8, 12}) require_exact_count(f, bt, R, mf::overflow::infinity, rng);
    }
  }
}

template <class S>
void exact_counts_subnormal_range() {
  std::mt19937_64 rng(12);
  for (const auto& f : kFormats) {
    if (!mf::source_problem<S>(f).empty() || !f.subnormals) continue;
    const int M = f.mantissa_bits;
    const double q = f.min_subnormal();
    // Between two subnormals (or 0 and the smallest one), at several depths below q: x in
    // [q/2, q) is one binade under the format's spacing, x ~ q * 2^-16 is 16 binades under it.
    for (int trial = 0; trial < (kSanitize ? 4 : 40); ++trial) {
      const std::uint64_t j = M == 0 ? 0 : rng() % (std::uint64_t{1} << M);
      const std::uint64_t c = 1 + rng() % ((std::uint64_t{1} << 16) - 1);
      between<S> bt;
      if (make_between<S>(static_cast<double>(j) * q, q, c, 16, trial % 3 == 0, trial % 2 == 1, bt))
        for (int R : {8, 12, 16}) require_exact_count(f, bt, R, mf::overflow::saturate, rng);
      // Tiny: fraction c / 2^16 with c < 16, down = 0.
      if (make_between<S>(0.0, q, c % 16 + 1, 16, trial % 3 == 1, trial % 2 == 0, bt))
        require_exact_count(f, bt, 16, mf::overflow::infinity, rng);
      // Just under q / 2 and just over it.
      if (make_between<S>(0.0, q, trial % 2 ? (1u << 15) + 1 : (1u << 15) - 1, 16, false, trial % 2 == 0, bt))
        require_exact_count(f, bt, 16, mf::overflow::infinity, rng);
    }
  }
}

template <class S>
void exact_counts_near_max() {
  std::mt19937_64 rng(13);
  constexpr int P = std::numeric_limits<S>::digits - 1;
  for (const auto& f : kFormats) {
    if (!mf::source_problem<S>(f).empty()) continue;
    const int M = f.mantissa_bits;
    const int b = std::min(P - M, 18);
    const double max = f.max_finite();
    const double q = std::ldexp(1.0, f.emax() - M);
    for (int trial = 0; trial < (kSanitize ? 2 : 6); ++trial) {
      const std::uint64_t c = 1 + rng() % ((std::uint64_t{1} << b) - 1);
      const bool neg = trial % 2 == 1;
      between<S> bt;
      // Just below max: rounding up lands exactly on ±max, under either policy.
      if (max - q > 0 && make_between<S>(max - q, q, c, b, false, neg, bt)) {
        for (auto pol : {mf::overflow::saturate, mf::overflow::infinity}) require_exact_count(f, bt, 12, pol, rng);
      }
      // Between max and the next value the format would have: up overflows.
      if (make_between<S>(max, q, c, b, false, neg, bt)) {
        const S sign = neg ? S(-1) : S(1);
        // Overflow under overflow::infinity: Inf, or NaN in a format without Inf (e4m3).
        bt.up_result = std::copysign(f.encoding == mf::specials::nan_only ? std::numeric_limits<S>::quiet_NaN()
                                                                          : std::numeric_limits<S>::infinity(),
                                     sign);
        require_exact_count(f, bt, 12, mf::overflow::infinity, rng);
        bt.up_result = bt.down_result;  // saturate: both outcomes are ±max
        require_exact_count(f, bt, 12, mf::overflow::saturate, rng);
      }
    }
  }
}

/// Counts results equal to `up` among n stochastic roundings of x with the bulk API.
template <class S>
std::uint64_t bulk_ups(const mf::format& f, S x, S down, S up, std::size_t n, std::uint64_t seed, int R,
                       mf::overflow pol, std::uint64_t& others) {
  std::vector<S> v(n, x);
  mf::rounding_options o;
  o.mode = mf::rounding::stochastic;
  o.seed = seed;
  o.random_bits = R;
  o.on_overflow = pol;
  mf::quantize(std::span<S>(v), f, o);
  std::uint64_t ups = 0;
  others = 0;
  for (S r : v) {
    if (to_bits(r) == to_bits(up)) ++ups;
    else if (to_bits(r) != to_bits(down)) ++others;
  }
  return ups;
}

template <class S>
void unbiased_on_average() {
  const std::size_t n = kSanitize ? (1u << 14) : (1u << 20);
  struct item {
    mf::format f;
    double down, q, frac;
  };
  std::vector<item> items;
  for (const auto& f : {mf::binary16, mf::e4m3, mf::fp_4_3_4, mf::fp_5_2_0, mf::bfloat16}) {
    const double q_sub = f.min_subnormal();
    const double q_top = std::ldexp(1.0, f.emax() - f.mantissa_bits);
    items.push_back({f, 0.0, q_sub, 0.296875});                           // below the smallest subnormal
    items.push_back({f, 3 * q_sub, q_sub, 0.0625 + 0.125});           // between two subnormals
    items.push_back({f, f.max_finite() - q_top, q_top, 0.703125});         // right below max
    items.push_back({f, f.max_finite() - q_top, q_top, 0.01171875});  // right below max, rarely up
  }
  std::uint64_t seed = 100;
  for (const auto& it : items) {
    for (const bool neg : {false, true}) {
      const double xd = it.down + it.q * it.frac;
      REQUIRE(static_cast<double>(static_cast<S>(xd)) == xd);
      const S sign = neg ? S(-1) : S(1);
      const S x = sign * static_cast<S>(xd), down = sign * static_cast<S>(it.down), up = sign * static_cast<S>(it.down + it.q);
      std::uint64_t others = 0;
      const std::uint64_t ups = bulk_ups<S>(it.f, x, down, up, n, ++seed, 0, mf::overflow::saturate, others);
      const double p = it.frac;
      const double mean = static_cast<double>(n) * p, sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
      INFO(mf::to_string(it.f) << std::hexfloat << " x=" << x << " ups=" << ups << std::defaultfloat
                               << " expected " << mean << " +- " << sd);
      CHECK(others == 0);
      CHECK(std::fabs(static_cast<double>(ups) - mean) <= 5 * sd);
      // The mean of the rounded values is x within five standard errors.
      const double avg = (static_cast<double>(ups) * static_cast<double>(up) +
                          static_cast<double>(n - ups) * static_cast<double>(down)) / static_cast<double>(n);
      CHECK(std::fabs(avg - static_cast<double>(x)) <= 5 * it.q * sd / static_cast<double>(n) + 1e-300);
    }
  }
}

}  // namespace

TEST_CASE("stochastic rounding goes up for exactly floor(fraction * 2^R) of the 2^R random words, normal range",
          "[stochastic][exact]") {
  g_exact_cases = 0;
  exact_counts_normal_range<float>();
  exact_counts_normal_range<double>();
  CHECK(g_exact_cases >= (kSanitize ? 20u : 500u));
}

TEST_CASE("stochastic rounding goes up for exactly floor(fraction * 2^R) of the random words, subnormal range",
          "[stochastic][exact]") {
  g_exact_cases = 0;
  exact_counts_subnormal_range<float>();
  exact_counts_subnormal_range<double>();
  CHECK(g_exact_cases >= (kSanitize ? 20u : 500u));
}

TEST_CASE("stochastic rounding near max: up lands on max below it, and overflows per policy above it",
          "[stochastic][exact]") {
  g_exact_cases = 0;
  exact_counts_near_max<float>();
  exact_counts_near_max<double>();
  CHECK(g_exact_cases >= (kSanitize ? 20u : 100u));
}

TEST_CASE("with subnormals off, stochastic rounding rounds as if subnormals were on, then flushes to zero",
          "[stochastic][exact][subnormals]") {
  std::mt19937_64 rng(14);
  mf::format f = mf::binary16;
  f.subnormals = false;
  const double q = f.min_subnormal(), min_normal = f.min_normal();
  g_exact_cases = 0;
  for (const bool neg : {false, true}) {
    // Between the largest subnormal (flushed to ±0) and the smallest normal.
    between<float> bt;
    REQUIRE(make_between<float>(min_normal - q, q, 1234, 12, false, neg, bt));
    bt.down_result = neg ? -0.0f : 0.0f;
    for (int R : {8, 12}) require_exact_count(f, bt, R, mf::overflow::infinity, rng);
    // Between two smaller subnormals: both neighbours flush, every result is a signed zero.
    REQUIRE(make_between<float>(5 * q, q, 3000, 12, false, neg, bt));
    bt.down_result = bt.up_result = neg ? -0.0f : 0.0f;
    require_exact_count(f, bt, 12, mf::overflow::infinity, rng);
  }
  CHECK(g_exact_cases == 6);
}

TEST_CASE("stochastic rounding of a value of the format never moves it", "[stochastic][exact]") {
  std::mt19937_64 rng(5);
  mf::rounding_options o;
  o.mode = mf::rounding::stochastic;
  for (const auto& f : kFormats) {
    if (!mf::source_problem<float>(f).empty()) continue;
    const auto plan = mf::make_plan<float>(f, o);
    for (float x : {0.0f, -0.0f, static_cast<float>(f.min_positive()), static_cast<float>(f.min_normal()),
                    static_cast<float>(-f.max_finite()), 1.0f, -2.0f}) {
      std::uint64_t moved = 0;
      for (int i = 0; i < 4096; ++i) {
        const auto word = static_cast<std::uint32_t>(rng());
        moved += mf::detail::round_bits<mf::rounding::stochastic, mf::detail::lane_path::any>(plan, to_bits(x), word) != to_bits(x);
      }
      INFO(mf::to_string(f) << " x=" << x);
      CHECK(moved == 0);
    }
  }
}

TEST_CASE("stochastic rounding rounds away from zero with probability (|x|-down)/(up-down), not the reverse",
          "[stochastic][direction]") {
  // x = 1 + q/8 in binary16 (q = 2^-10): one eighth of the way from 1 to 1 + q. The documented
  // rule gives up with probability 1/8; the swapped rule of the paper's Appendix A would give 7/8.
  const int R = 12;
  for (const bool neg : {false, true}) {
    const float s = neg ? -1.0f : 1.0f;
    const float x = s * (1.0f + 0x1p-13f), down = s * 1.0f, up = s * (1.0f + 0x1p-10f);
    mf::rounding_options o;
    o.mode = mf::rounding::stochastic;
    o.random_bits = R;
    const auto plan = mf::make_plan<float>(mf::binary16, o);
    std::uint64_t ups = 0, downs = 0;
    for (std::uint32_t r = 0; r < (1u << R); ++r) {
      const std::uint32_t res = mf::detail::round_bits<mf::rounding::stochastic, mf::detail::lane_path::any>(plan, to_bits(x), r << (32 - R));
      ups += res == to_bits(up);
      downs += res == to_bits(down);
    }
    INFO((neg ? "negative" : "positive"));
    CHECK(ups == (1u << R) / 8);
    CHECK(downs == (1u << R) * 7 / 8);
    // Through the public API with the full random word: about 1/8 of a large sample goes up.
    std::uint64_t others = 0;
    const std::uint64_t n = 1 << 16;
    const std::uint64_t bulk = bulk_ups<float>(mf::binary16, x, down, up, n, 77, 0, mf::overflow::infinity, others);
    CHECK(others == 0);
    CHECK(bulk > n / 8 - 5 * 85);  // sd = sqrt(n * 1/8 * 7/8) ~ 84.7
    CHECK(bulk < n / 8 + 5 * 85);
  }
}

TEST_CASE("stochastic rounding is unbiased on average in the subnormal range and right below max",
          "[stochastic][statistics]") {
  unbiased_on_average<float>();
  unbiased_on_average<double>();
}

TEST_CASE("random_bits = R makes the probability floor(fraction * 2^R) / 2^R", "[stochastic][statistics]") {
  // fraction 0.3 with R = 3: floor(2.4) / 8 = 0.25, measurably not 0.3.
  const std::size_t n = kSanitize ? (1u << 14) : (1u << 20);
  const float x = 1.0f + 0.3f * 0x1p-10f;
  REQUIRE(x != 1.0f);
  const double frac = (static_cast<double>(x) - 1.0) / 0x1p-10;
  const double p = std::floor(frac * 8) / 8;
  REQUIRE(p == 0.25);
  std::uint64_t others = 0;
  const std::uint64_t ups = bulk_ups<float>(mf::binary16, x, 1.0f, 1.0f + 0x1p-10f, n, 9, 3, mf::overflow::infinity, others);
  const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
  INFO("ups=" << ups << " expected " << static_cast<double>(n) * p << " +- " << sd);
  CHECK(others == 0);
  CHECK(std::fabs(static_cast<double>(ups) - static_cast<double>(n) * p) <= 5 * sd);
}

namespace {

template <class S>
std::vector<S> mixed_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<S> v(n);
  for (auto& x : v) {
    const int e = static_cast<int>(rng() % 40) - 20;
    x = static_cast<S>(std::ldexp(std::ldexp(static_cast<double>(rng() >> 11), -53) + 0.5, e));
    if (rng() & 1) x = -x;
    if (rng() % 1000 == 0) x = std::numeric_limits<S>::quiet_NaN();
  }
  return v;
}

template <class S>
void chunking_is_invisible(const mf::format& f, std::uint64_t first_index) {
  const std::size_t n = kSanitize ? 20000 : 100000;
  const std::vector<S> in = mixed_values<S>(n, 3);
  mf::rounding_options o;
  o.mode = mf::rounding::stochastic;
  o.seed = 0xabcdef;
  o.index = first_index;
  std::vector<S> whole(n), chunked(n);
  mf::rounding_stats st_whole, st_chunked;
  mf::quantize(std::span<const S>(in), std::span<S>(whole), f, o, st_whole);
  std::mt19937_64 rng(4);
  for (std::size_t start = 0; start < n;) {
    const std::size_t len = std::min<std::size_t>(n - start, rng() % 3000);  // includes empty chunks
    mf::rounding_options oc = o;
    oc.index = first_index + start;
    mf::quantize(std::span<const S>(in).subspan(start, len), std::span<S>(chunked).subspan(start, len), f, oc,
                 st_chunked);
    start += len;
  }
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) differ += to_bits(whole[i]) != to_bits(chunked[i]);
  INFO(mf::to_string(f) << " first index " << first_index);
  CHECK(differ == 0);
  CHECK(st_whole == st_chunked);
  // Element i of a bulk call is the scalar rounding with index first_index + i.
  std::size_t scalar_differ = 0;
  for (std::size_t i = 0; i < n; i += 7) {
    mf::rounding_options os = o;
    os.index = first_index + i;
    scalar_differ += to_bits(mf::round(in[i], f, os)) != to_bits(whole[i]);
  }
  CHECK(scalar_differ == 0);
  // Encoding in chunks gives the codes of the whole call, and they decode to the rounded values.
  if (f.bit_width() <= 16 && f.encoding != mf::specials::all_finite) {
    std::vector<std::uint16_t> codes_whole(n), codes_chunked(n);
    mf::encode(std::span<const S>(in), std::span<std::uint16_t>(codes_whole), f, o);
    for (std::size_t start = 0; start < n; start += 4099) {
      const std::size_t len = std::min<std::size_t>(4099, n - start);
      mf::rounding_options oc = o;
      oc.index = first_index + start;
      mf::encode(std::span<const S>(in).subspan(start, len), std::span<std::uint16_t>(codes_chunked).subspan(start, len),
                 f, oc);
    }
    CHECK(codes_whole == codes_chunked);
    std::size_t decode_differ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const S d = mf::decode<S>(codes_whole[i], f);
      // Inf has no code in a nan_only format: it encodes as NaN.
      const bool nan = std::isnan(whole[i]) || (std::isinf(whole[i]) && f.encoding == mf::specials::nan_only);
      decode_differ += nan ? !std::isnan(d) : to_bits(d) != to_bits(whole[i]);
    }
    CHECK(decode_differ == 0);
  }
}

}  // namespace

TEST_CASE("stochastic rounding of a span in random chunks with index = offset is bit-identical to one call",
          "[stochastic][reproducible]") {
  for (const auto& f : {mf::binary16, mf::e4m3, mf::fp_4_3_4, mf::bfloat16}) {
    chunking_is_invisible<float>(f, 0);
    chunking_is_invisible<double>(f, 0);
    // Spans whose indices cross a multiple of 2^32, and start at no multiple of the register width.
    chunking_is_invisible<float>(f, (std::uint64_t{1} << 32) - 50000);
    chunking_is_invisible<double>(f, (std::uint64_t{5} << 32) - 12345);
  }
}

TEST_CASE("stochastic rounding with the same seed repeats, with another seed differs", "[stochastic][reproducible]") {
  const std::size_t n = 100000;
  const std::vector<float> in = mixed_values<float>(n, 8);
  mf::rounding_options o;
  o.mode = mf::rounding::stochastic;
  o.seed = 1;
  std::vector<float> a(n), b(n), c(n), t(n);
  mf::quantize(std::span<const float>(in), std::span<float>(a), mf::binary16, o);
  mf::quantize(std::span<const float>(in), std::span<float>(b), mf::binary16, o);
  o.seed = 2;
  mf::quantize(std::span<const float>(in), std::span<float>(c), mf::binary16, o);
  o.mode = mf::rounding::toward_zero;
  mf::quantize(std::span<const float>(in), std::span<float>(t), mf::binary16, o);
  std::size_t same_ab = 0, differ_ac = 0, inexact = 0;
  for (std::size_t i = 0; i < n; ++i) {
    same_ab += to_bits(a[i]) == to_bits(b[i]);
    differ_ac += to_bits(a[i]) != to_bits(c[i]);
    inexact += to_bits(t[i]) != to_bits(in[i]);
  }
  CHECK(same_ab == n);
  // Two independent draws disagree on an inexact value with probability 2p(1-p); with fractions
  // spread over (0, 1) that is a third of them on average.
  INFO("inexact " << inexact << ", differing " << differ_ac);
  CHECK(inexact > n / 2);
  CHECK(differ_ac > inexact / 5);
}

TEST_CASE("stochastic rounding of element i uses draw i of the seed's stream", "[stochastic][reproducible]") {
  // The scalar API's random word is counter_rng{seed}.bits32(index) for float and bits64 for
  // double, which makes results independent of call order and chunking.
  std::mt19937_64 rng(21);
  for (int i = 0; i < 2000; ++i) {
    mf::rounding_options o;
    o.mode = mf::rounding::stochastic;
    o.seed = rng();
    o.index = rng() >> (i % 64);
    const float xf = std::ldexp(static_cast<float>(rng() % 100000 + 1), -12);
    const double xd = std::ldexp(static_cast<double>(rng() % 100000 + 1), -12);
    const mf::counter_rng gen{o.seed};
    const auto pf = mf::make_plan<float>(mf::fp_4_3_4, o);
    const auto pd = mf::make_plan<double>(mf::fp_4_3_4, o);
    CHECK(to_bits(mf::round(xf, mf::fp_4_3_4, o)) ==
          mf::detail::round_bits<mf::rounding::stochastic, mf::detail::lane_path::any>(pf, to_bits(xf), gen.bits32(o.index)));
    CHECK(to_bits(mf::round(xd, mf::fp_4_3_4, o)) ==
          mf::detail::round_bits<mf::rounding::stochastic, mf::detail::lane_path::any>(pd, to_bits(xd), gen.bits64(o.index)));
  }
}

TEST_CASE("the 32-bit and 64-bit draws use every bit evenly, and other seeds and streams are unrelated",
          "[stochastic][rng]") {
  // random.hpp's ARS-5 stream: each bit of a draw is set half the time (binomial, 6 standard
  // deviations), the top four bits spread evenly, and the streams of another seed and of the
  // 64-bit draws share no more equal words than chance (about n / 2^32 of them).
  const std::uint64_t n = kSanitize ? (1u << 16) : (1u << 21);
  for (const std::uint64_t first : {std::uint64_t{0}, (std::uint64_t{7} << 32) - n / 2}) {
    const mf::counter_rng gen{12345}, other{12346};
    std::vector<std::uint64_t> ones(32, 0), ones64(64, 0), buckets(16, 0);
    std::uint64_t same_as_other_seed = 0, same_as_64_bit_stream = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint32_t d = gen.bits32(first + i);
      const std::uint64_t d64 = gen.bits64(first + i);
      for (int b = 0; b < 32; ++b) ones[b] += (d >> b) & 1;
      for (int b = 0; b < 64; ++b) ones64[b] += (d64 >> b) & 1;
      ++buckets[d >> 28];
      same_as_other_seed += d == other.bits32(first + i);
      same_as_64_bit_stream += d == static_cast<std::uint32_t>(d64);
    }
    const double half = static_cast<double>(n) / 2, sd_half = std::sqrt(static_cast<double>(n) / 4);
    for (std::uint64_t c : ones) CHECK(std::fabs(static_cast<double>(c) - half) < 6 * sd_half);
    for (std::uint64_t c : ones64) CHECK(std::fabs(static_cast<double>(c) - half) < 6 * sd_half);
    const double expected = static_cast<double>(n) / 16, sd = std::sqrt(expected * 15 / 16);
    for (std::uint64_t b : buckets) CHECK(std::fabs(static_cast<double>(b) - expected) < 6 * sd);
    CHECK(same_as_other_seed <= 3);
    CHECK(same_as_64_bit_stream <= 3);
  }
}
