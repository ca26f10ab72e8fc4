// Hand-checked semantics, one rule per test case, named by the behaviour it pins down.
//
// Every expected value here was worked out by hand from the formats' definitions (IEEE 754,
// OCP FP8 v1.0, docs/semantics.md §1-2) and the rules in round.hpp's header; hex
// float literals keep them exact. A few cases are also checked against QPyTorch's published
// "nearest" algorithm (add half a step to the bit pattern, then truncate).
#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <minifloat/minifloat.hpp>

namespace mf = minifloat;
using mf::overflow;
using mf::rounding;

namespace {

template <class S>
std::string hex(S x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(x));
  return buf;
}

constexpr mf::rounding_options opts(rounding m, overflow p = overflow::infinity) {
  mf::rounding_options o;
  o.mode = m;
  o.on_overflow = p;
  return o;
}

mf::format no_subnormals(mf::format f) {
  f.subnormals = false;
  return f;
}

const rounding kDeterministic[] = {rounding::nearest_even, rounding::nearest_away, rounding::toward_zero};
const rounding kAllModes[] = {rounding::nearest_even,    rounding::nearest_away,    rounding::toward_zero,
                              rounding::stochastic,      rounding::toward_positive, rounding::toward_negative,
                              rounding::to_odd};
const overflow kPolicies[] = {overflow::saturate, overflow::infinity};

std::vector<mf::format> every_kind_of_format() {
  std::vector<mf::format> v = {mf::binary16, mf::bfloat16, mf::e4m3,     mf::e5m2,
                               mf::fp_4_3_4, mf::fp_5_2_0, mf::fp_6_9_0, mf::format{3, 0, 3, true, mf::specials::all_finite}};
  const std::size_t n = v.size();
  for (std::size_t i = 0; i < n; ++i) v.push_back(no_subnormals(v[i]));
  return v;
}

/// Checks round(x) for float and, when x is exact in float, also from double.
void expect(double x, const mf::format& f, const mf::rounding_options& o, double want) {
  INFO("x = " << hex(x) << " into " << mf::to_string(f) << " mode " << static_cast<int>(o.mode) << " policy "
              << static_cast<int>(o.on_overflow));
  CHECK(hex(mf::round(x, f, o)) == hex(want));
  if (static_cast<double>(static_cast<float>(x)) == x) CHECK(hex(mf::round(static_cast<float>(x), f, o)) == hex(want));
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TEST_CASE("nearest_even sends a tie to the neighbour with an even mantissa", "[semantics][ties]") {
  const auto ne = opts(rounding::nearest_even);
  expect(1.0 + 0x1p-11, mf::binary16, ne, 1.0);                  // 1.0000000000|1: even below
  expect(1.0 + 3 * 0x1p-11, mf::binary16, ne, 1.0 + 0x1p-9);     // 1.0000000001|1: odd below, go up
  expect(-(1.0 + 0x1p-11), mf::binary16, ne, -1.0);
  expect(1.0 + 0x1p-11 + 0x1p-40, mf::binary16, ne, 1.0 + 0x1p-10);  // just past the tie
  expect(1.0625, mf::fp_4_3_4, ne, 1.0);                         // 1.000|1
  expect(1.1875, mf::fp_4_3_4, ne, 1.25);                        // 1.001|1
  expect(2.5 * 0x1p-24, mf::binary16, ne, 2 * 0x1p-24);          // subnormal tie, even below
  expect(3.5 * 0x1p-24, mf::binary16, ne, 4 * 0x1p-24);          // subnormal tie, odd below
  expect(0x1p-25, mf::binary16, ne, 0.0);                        // half the smallest subnormal: 0 is even
  expect(-0x1p-25, mf::binary16, ne, -0.0);
  expect(1.5 * 0x1p-25, mf::binary16, ne, 0x1p-24);
}

TEST_CASE("nearest_even ties at the top of a binade carry into the next binade", "[semantics][ties]") {
  const auto ne = opts(rounding::nearest_even);
  expect(2.0 - 0x1p-11, mf::binary16, ne, 2.0);       // 1.1111111111|1 -> 10.0
  expect(-(2.0 - 0x1p-11), mf::binary16, ne, -2.0);
  expect(1.9375, mf::fp_4_3_4, ne, 2.0);              // 1.111|1
  expect(0x1p8 - 0x1p-1, mf::bfloat16, ne, 0x1p8);    // 255.5 = 1.1111111|1 * 2^7
  expect(3.75, mf::e5m2, ne, 4.0);                    // 1.11|1 * 2
  // The largest subnormal plus half a step carries into the smallest normal.
  expect(1023.5 * 0x1p-24, mf::binary16, ne, 0x1p-14);
  expect(7.5 * 0x1p-9, mf::e4m3, ne, 0x1p-6);
  // nearest_away does the same; toward_zero stays in the binade.
  expect(2.0 - 0x1p-11, mf::binary16, opts(rounding::nearest_away), 2.0);
  expect(2.0 - 0x1p-11, mf::binary16, opts(rounding::toward_zero), 2.0 - 0x1p-10);
}

TEST_CASE("a tie above the largest finite value carries into overflow: Inf or max per policy", "[semantics][ties]") {
  for (rounding m : {rounding::nearest_even, rounding::nearest_away}) {
    expect(65520.0, mf::binary16, opts(m, overflow::infinity), kInf);
    expect(-65520.0, mf::binary16, opts(m, overflow::infinity), -kInf);
    expect(65520.0, mf::binary16, opts(m, overflow::saturate), 65504.0);
    expect(-65520.0, mf::binary16, opts(m, overflow::saturate), -65504.0);
    expect(61440.0, mf::e5m2, opts(m, overflow::infinity), kInf);
    expect(31.0, mf::fp_4_3_4, opts(m, overflow::infinity), kInf);
    expect(31.0, mf::fp_4_3_4, opts(m, overflow::saturate), 30.0);
    expect(122880.0, mf::fp_5_2_0, opts(m, overflow::infinity), kInf);
    expect(122880.0, mf::fp_5_2_0, opts(m, overflow::saturate), 114688.0);
    expect(0x1p33 - 0x1p22, mf::fp_6_9_0, opts(m, overflow::saturate), 0x1p33 - 0x1p23);
    expect(0x1p33 - 0x1p22, mf::fp_6_9_0, opts(m, overflow::infinity), kInf);
  }
  // One source ulp below the tie stays at max.
  expect(static_cast<double>(std::nextafter(65520.0f, 0.0f)), mf::binary16, opts(rounding::nearest_even), 65504.0);
  expect(std::nextafter(31.0, 0.0), mf::fp_4_3_4, opts(rounding::nearest_away), 30.0);
}

TEST_CASE("e4m3: 464 ties to 448 (even) under nearest_even; nearest_away and larger values overflow to NaN",
          "[semantics][ties][e4m3]") {
  // e4m3 has no Inf: without saturation an overflow is NaN, as OCP's non-saturating conversion says.
  // 448 = 1.110 * 2^8 has an even mantissa; the code above it (1.111 * 2^8 = 480) is NaN.
  expect(464.0, mf::e4m3, opts(rounding::nearest_even), 448.0);
  expect(464.0, mf::e4m3, opts(rounding::nearest_away), kNaN);
  expect(464.0, mf::e4m3, opts(rounding::nearest_away, overflow::saturate), 448.0);
  expect(465.0, mf::e4m3, opts(rounding::nearest_even), kNaN);
  expect(-465.0, mf::e4m3, opts(rounding::nearest_even), -kNaN);
  expect(1000.0, mf::e4m3, opts(rounding::nearest_even), kNaN);  // not +Inf, a value e4m3 lacks
  expect(1000.0, mf::e4m3, opts(rounding::toward_positive), kNaN);
  expect(1000.0, mf::e4m3, opts(rounding::toward_negative), 448.0);
  expect(-1000.0, mf::e4m3, opts(rounding::toward_positive), -448.0);
  expect(1000.0, mf::e4m3, opts(rounding::to_odd), 448.0);
  expect(-465.0, mf::e4m3, opts(rounding::nearest_even, overflow::saturate), -448.0);
  expect(479.0, mf::e4m3, opts(rounding::toward_zero), 448.0);
  CHECK(mf::encode(464.0f, mf::e4m3) == 0x7e);
  CHECK(mf::encode(465.0f, mf::e4m3) == 0x7f);   // overflow to NaN
  CHECK(mf::encode(-465.0f, mf::e4m3) == 0xff);
  CHECK(mf::encode(465.0f, mf::e4m3, opts(rounding::nearest_even, overflow::saturate)) == 0x7e);
}

TEST_CASE("signed zero is preserved, and results that round to zero keep the input's sign", "[semantics][zero]") {
  for (const auto& f : every_kind_of_format())
    for (rounding m : kAllModes)
      for (overflow p : kPolicies) {
        mf::rounding_options o = opts(m, p);
        INFO(mf::to_string(f) << " mode " << static_cast<int>(m));
        CHECK(hex(mf::round(-0.0f, f, o)) == "-0x0p+0");
        CHECK(hex(mf::round(0.0f, f, o)) == "0x0p+0");
        CHECK(hex(mf::round(-0.0, f, o)) == "-0x0p+0");
        const float tiny = static_cast<float>(f.min_positive() / 1024);
        const float r = mf::round(-tiny, f, o);
        CHECK(std::signbit(r));
        // Modes that may step away from zero (stochastic; toward_negative and to_odd, which
        // must, when inexact) give -min_positive or a flushed -0.
        const bool steps_away = m == rounding::stochastic || m == rounding::toward_negative || m == rounding::to_odd;
        if (!steps_away) CHECK(hex(r) == "-0x0p+0");
        else CHECK((hex(r) == "-0x0p+0" || r == -static_cast<float>(f.min_positive())));
        if (m == rounding::toward_negative || m == rounding::to_odd)
          // With M = 0 the subnormal step is the smallest normal itself, which is never flushed.
          CHECK(hex(r) == hex(f.subnormals || f.mantissa_bits == 0 ? -f.min_subnormal() : -0.0));
        CHECK(hex(mf::round(tiny, f, opts(rounding::toward_zero, p))) == "0x0p+0");
      }
  CHECK(mf::encode(-0.0f, mf::binary16) == 0x8000);
  CHECK(mf::encode(-0x1p-30f, mf::binary16) == 0x8000);
  CHECK(mf::encode(-0.0f, mf::e4m3) == 0x80);
  CHECK(mf::encode(-0.0f, mf::fp_4_3_4) == 0x80);
}

TEST_CASE("NaN in gives NaN out in every mode, policy, encoding and source type — never max, never zero",
          "[semantics][nan]") {
  const float nans_f[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::signaling_NaN(), std::bit_cast<float>(0x7f800001u),
                          std::bit_cast<float>(0xffc12345u)};
  const double nans_d[] = {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::signaling_NaN(), std::bit_cast<double>(0x7ff0000000000001ull)};
  for (const auto& f : every_kind_of_format())
    for (rounding m : kAllModes)
      for (overflow p : kPolicies) {
        const auto o = opts(m, p);
        INFO(mf::to_string(f) << " mode " << static_cast<int>(m) << " policy " << static_cast<int>(p));
        for (float x : nans_f) {
          const float r = mf::round(x, f, o);
          CHECK(std::isnan(r));
          // Documented: sign and payload kept, quiet bit set.
          CHECK(std::bit_cast<std::uint32_t>(r) == (std::bit_cast<std::uint32_t>(x) | 0x00400000u));
          mf::rounding_stats st;
          CHECK(std::isnan(mf::round(x, f, o, st)));
          CHECK(st.nans == 1);
          CHECK(st.overflows == 1);  // docs/semantics.md §2: NaN counts as an overflow
        }
        for (double x : nans_d) {
          const double r = mf::round(x, f, o);
          CHECK(std::isnan(r));
          CHECK(std::bit_cast<std::uint64_t>(r) == (std::bit_cast<std::uint64_t>(x) | 0x0008000000000000ull));
        }
        // A NaN code, where the format has one.
        if (f.has_nan()) CHECK(std::isnan(mf::decode<float>(mf::encode(nans_f[0], f, o), f)));
      }
  CHECK((mf::encode(std::numeric_limits<float>::quiet_NaN(), mf::e4m3) & 0x7f) == 0x7f);
  const std::uint64_t h = mf::encode(-std::numeric_limits<float>::quiet_NaN(), mf::binary16);
  CHECK((h & 0x7c00) == 0x7c00);
  CHECK((h & 0x03ff) != 0);
  CHECK((h & 0x8000) != 0);
}

TEST_CASE("Inf in gives Inf (NaN for nan_only) under overflow::infinity and max under overflow::saturate, in every mode",
          "[semantics][inf]") {
  for (const auto& f : every_kind_of_format())
    for (rounding m : kAllModes) {
      INFO(mf::to_string(f) << " mode " << static_cast<int>(m));
      const double max = f.max_finite();
      for (double s : {1.0, -1.0}) {
        const double want = std::copysign(f.encoding == mf::specials::nan_only ? kNaN : kInf, s);
        CHECK(hex(mf::round(static_cast<float>(s * kInf), f, opts(m, overflow::infinity))) == hex(want));
        CHECK(hex(mf::round(s * kInf, f, opts(m, overflow::infinity))) == hex(want));
        CHECK(hex(mf::round(static_cast<float>(s * kInf), f, opts(m, overflow::saturate))) == hex(s * max));
        CHECK(hex(mf::round(s * kInf, f, opts(m, overflow::saturate))) == hex(s * max));
        mf::rounding_stats st;
        (void)mf::round(static_cast<float>(s * kInf), f, opts(m, overflow::saturate), st);
        CHECK(st.infinities == 1);
        CHECK(st.overflows == 1);
      }
    }
  CHECK(mf::encode(std::numeric_limits<float>::infinity(), mf::binary16) == 0x7c00);
  CHECK(mf::encode(-std::numeric_limits<float>::infinity(), mf::binary16) == 0xfc00);
  CHECK(mf::encode(-std::numeric_limits<float>::infinity(), mf::binary16, opts(rounding::nearest_even, overflow::saturate)) ==
        0xfbff);
}

TEST_CASE("values between max and the overflow threshold follow the rounding mode", "[semantics][overflow]") {
  for (overflow p : kPolicies) {
    for (rounding m : kDeterministic) {
      expect(65505.0, mf::binary16, opts(m, p), 65504.0);
      expect(65519.0, mf::binary16, opts(m, p), 65504.0);
      expect(-65519.0, mf::binary16, opts(m, p), -65504.0);
      expect(30.9375, mf::fp_4_3_4, opts(m, p), 30.0);
      expect(60000.0, mf::e5m2, opts(m, p), 57344.0);
    }
    // At and above the threshold: the nearest modes overflow, toward_zero stays at max.
    expect(65535.0, mf::binary16, opts(rounding::toward_zero, p), 65504.0);
    expect(65535.0, mf::binary16, opts(rounding::nearest_even, p), p == overflow::saturate ? 65504.0 : kInf);
    expect(65535.0, mf::binary16, opts(rounding::nearest_away, p), p == overflow::saturate ? 65504.0 : kInf);
  }
  // Stochastic rounding between max and the next value gives max or the overflow result.
  mf::rounding_options o = opts(rounding::stochastic);
  int maxes = 0, infs = 0;
  for (std::uint64_t i = 0; i < 2000; ++i) {
    o.index = i;
    const float r = mf::round(65520.0f, mf::binary16, o);
    maxes += r == 65504.0f;
    infs += std::isinf(r) && r > 0;
  }
  CHECK(maxes + infs == 2000);
  CHECK(maxes > 850);  // p = 1/2 each
  CHECK(infs > 850);
}

TEST_CASE("toward_zero never overflows to Inf for a finite input, even under overflow::infinity",
          "[semantics][overflow][toward_zero]") {
  for (const auto& f : every_kind_of_format()) {
    INFO(mf::to_string(f));
    const double max = f.max_finite();
    const auto o = opts(rounding::toward_zero, overflow::infinity);
    for (double x : {static_cast<double>(FLT_MAX), 1e30, 2 * max, f.overflow_threshold(), max})
      if (x <= FLT_MAX && x >= max) {
        CHECK(hex(mf::round(static_cast<float>(x), f, o)) == hex(max));
        CHECK(hex(mf::round(static_cast<float>(-x), f, o)) == hex(-max));
      }
    CHECK(hex(mf::round(DBL_MAX, f, o)) == hex(max));
    CHECK(hex(mf::round(-DBL_MAX, f, o)) == hex(-max));
    // Inf itself is not finite: it stays Inf under this policy (NaN in a format without Inf).
    const float r = mf::round(std::numeric_limits<float>::infinity(), f, o);
    CHECK((f.encoding == mf::specials::nan_only ? std::isnan(r) : std::isinf(r)));
  }
}

TEST_CASE("with subnormals off, results below the smallest normal flush to signed zero and count as underflows",
          "[semantics][subnormals]") {
  const mf::format f = no_subnormals(mf::binary16);
  const auto ne = opts(rounding::nearest_even);
  expect(0x1p-15, f, ne, 0.0);
  expect(-0x1p-15, f, ne, -0.0);
  expect(0x1p-24, f, ne, 0.0);
  expect(0x1p-14, f, ne, 0x1p-14);
  // Rounded as if subnormals were on first: these reach the smallest normal and are kept.
  expect(0x1p-14 - 0x1p-26, f, ne, 0x1p-14);
  expect(0x1p-14 - 0x1p-25, f, ne, 0x1p-14);                      // tie: 1023 is odd, so up
  expect(0x1p-14 - 0x1p-25, f, opts(rounding::nearest_away), 0x1p-14);
  expect(0x1p-14 - 0x1p-25 - 0x1p-40, f, ne, 0.0);               // -> 1023 * 2^-24, then flushed
  expect(0x1p-14 - 0x1p-40, f, opts(rounding::toward_zero), 0.0);
  expect(-(0x1p-14 - 0x1p-40), f, opts(rounding::toward_zero), -0.0);
  // The paper's subnormal-free variant of fp(4,3,4): smallest normal 2^-10.
  expect(0x1p-11, no_subnormals(mf::fp_4_3_4), ne, 0.0);
  expect(0x1p-10 * 1.0625, no_subnormals(mf::fp_4_3_4), ne, 0x1p-10);

  mf::rounding_stats st;
  for (float x : {0x1p-15f, -0x1p-20f, 0x1p-14f, 0x1p-14f - 0x1p-26f, 0.0f, 1.0f})
    (void)mf::round(x, f, ne, st);
  CHECK(st.values == 6);
  CHECK(st.underflows == 2);  // 2^-15 and -2^-20; 0 is not an underflow, the others are kept
  CHECK(st.overflows == 0);
  // The same values with subnormals on: only a value below half the smallest subnormal underflows.
  mf::rounding_stats on;
  for (float x : {0x1p-15f, -0x1p-20f, 0x1p-25f, 0x1p-25f * 1.5f, 0x1p-26f})
    (void)mf::round(x, mf::binary16, ne, on);
  CHECK(on.underflows == 2);  // 2^-25 (tie to 0) and 2^-26
  CHECK(hex(mf::round(0x1p-15f, mf::binary16)) == hex(0x1p-15));
}

TEST_CASE("nearest_away sends ties away from zero, reproducing QPyTorch's nearest", "[semantics][ties][qpytorch]") {
  const auto na = opts(rounding::nearest_away);
  expect(1.0625, mf::fp_4_3_4, na, 1.125);
  expect(-1.0625, mf::fp_4_3_4, na, -1.125);
  expect(1.1875, mf::fp_4_3_4, na, 1.25);
  expect(1.0 + 0x1p-11, mf::binary16, na, 1.0 + 0x1p-10);
  expect(2.5, mf::format{5, 1, 15, true, mf::specials::all_finite}, na, 3.0);
  expect(0.5 * 0x1p-13, mf::fp_4_3_4, na, 0x1p-13);    // subnormal tie with 0: away
  expect(2.5 * 0x1p-13, mf::fp_4_3_4, na, 3 * 0x1p-13);
  expect(1.5, mf::format{4, 0, 7, true, mf::specials::all_finite}, na, 2.0);
  expect(1.0625 - 0x1p-30, mf::fp_4_3_4, na, 1.0);      // not a tie: nearest

  // QPyTorch's float_quantize "nearest" on a float bit pattern u (normal range, no overflow):
  // (u + 2^(22 - M)) & ~(2^(23 - M) - 1), i.e. add half a step and truncate.
  std::mt19937_64 rng(7);
  int checked = 0;
  for (const auto& f : {mf::fp_4_3_4, mf::fp_5_2_0, mf::fp_6_9_0, mf::binary16, mf::bfloat16}) {
    const int M = f.mantissa_bits;
    for (int i = 0; i < 20000; ++i) {
      const int e = f.emin() + static_cast<int>(rng() % static_cast<unsigned>(f.emax() - f.emin()));
      std::uint32_t u = (static_cast<std::uint32_t>(e + 127) << 23) | static_cast<std::uint32_t>(rng() & 0x7fffff);
      if (i % 3 == 0) u = (u & ~((1u << (22 - M)) - 1)) | (1u << (22 - M));  // force a tie
      if (rng() & 1) u |= 0x80000000u;
      const std::uint32_t q = (u + (1u << (22 - M))) & ~((1u << (23 - M)) - 1);
      const float x = std::bit_cast<float>(u);
      if (std::fabs(std::bit_cast<float>(q)) > f.max_finite()) continue;
      ++checked;
      INFO(mf::to_string(f) << " x=" << hex(x));
      CHECK(hex(mf::round(x, f, na)) == hex(std::bit_cast<float>(q)));
    }
  }
  CHECK(checked > 90000);
}

TEST_CASE("encode of NaN or Inf into an all_finite format throws std::domain_error", "[semantics][encode]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const auto& f : {mf::fp_4_3_4, mf::fp_5_2_0, mf::fp_6_9_0}) {
    INFO(mf::to_string(f));
    CHECK_THROWS_AS(mf::encode(nan, f), std::domain_error);
    CHECK_THROWS_AS(mf::encode(inf, f), std::domain_error);
    CHECK_THROWS_AS(mf::encode(-inf, f), std::domain_error);
    CHECK_THROWS_AS(mf::encode(1e30f, f), std::domain_error);  // a finite overflow to Inf has no code either
    CHECK_THROWS_AS(mf::encode(static_cast<double>(nan), f), std::domain_error);
    CHECK_FALSE(mf::try_encode(nan, f).representable);
    CHECK_FALSE(mf::try_encode(inf, f).representable);
    // Saturation gives Inf and overflows a code: ±max, all ones.
    const auto sat = opts(rounding::nearest_even, overflow::saturate);
    const std::uint64_t ones = (std::uint64_t{1} << (f.bit_width() - 1)) - 1;
    CHECK(mf::encode(inf, f, sat) == ones);
    CHECK(mf::encode(-inf, f, sat) == (ones | (std::uint64_t{1} << (f.bit_width() - 1))));
    CHECK(mf::encode(1e30f, f, sat) == ones);
    CHECK_THROWS_AS(mf::encode(nan, f, sat), std::domain_error);
    CHECK(mf::decode<double>(ones, f) == f.max_finite());
  }
  // The bulk encoder stops at the first value without a code, after writing the ones before it.
  const std::vector<float> in = {1.0f, 2.0f, nan, 4.0f};
  std::vector<std::uint8_t> out(4, 0xaa);
  CHECK_THROWS_AS(mf::encode(std::span<const float>(in), std::span<std::uint8_t>(out), mf::fp_4_3_4),
                  std::domain_error);
  CHECK(out[0] == 0x58);  // 1.0: exponent field 11 -> 0 1011 000
  CHECK(out[1] == 0x60);  // 2.0: 0 1100 000
  CHECK(out[3] == 0xaa);
}

TEST_CASE("Inf into e4m3 encodes as the NaN code 0x7f / 0xff under overflow::infinity", "[semantics][encode][e4m3]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(mf::encode(inf, mf::e4m3) == 0x7f);
  CHECK(mf::encode(-inf, mf::e4m3) == 0xff);
  CHECK(mf::encode(static_cast<double>(-inf), mf::e4m3) == 0xff);
  CHECK(mf::try_encode(inf, mf::e4m3).representable);
  CHECK(mf::encode(inf, mf::e4m3, opts(rounding::nearest_even, overflow::saturate)) == 0x7e);
  CHECK(mf::encode(-inf, mf::e4m3, opts(rounding::toward_zero, overflow::saturate)) == 0xfe);
  CHECK(std::isnan(mf::decode<float>(0x7f, mf::e4m3)));
  CHECK(std::isnan(mf::decode<float>(0xff, mf::e4m3)));
  CHECK(mf::decode<float>(0x7e, mf::e4m3) == 448.0f);
  CHECK(mf::decode<float>(0x78, mf::e4m3) == 256.0f);  // the top binade is finite except all ones
  CHECK(mf::decode<float>(0x01, mf::e4m3) == 0x1p-9f);
  // Bits above the format's width are ignored by decode.
  CHECK(mf::decode<float>(0x17e, mf::e4m3) == 448.0f);
  CHECK(mf::decode<float>(0xffff0000003c00ull, mf::binary16) == 1.0f);
  // e5m2 and binary16 are ieee: Inf has its own code.
  CHECK(mf::encode(inf, mf::e5m2) == 0x7c);
  CHECK(mf::encode(-inf, mf::e5m2) == 0xfc);
}

TEST_CASE("stats count overflows on the unrounded input against the overflow threshold", "[semantics][stats]") {
  // docs/semantics.md §2: |t| >= 2^emax * (2 - 2^(-m-1)) overflows, whatever the rounding does.
  mf::rounding_stats st;
  const auto tz = opts(rounding::toward_zero);
  for (float x : {30.9f, 31.0f, -31.0f, 1000.0f, 30.0f, -29.0f}) (void)mf::round(x, mf::fp_4_3_4, tz, st);
  CHECK(st.values == 6);
  CHECK(st.overflows == 3);  // 31, -31, 1000 — though toward_zero rounds them to ±30
  CHECK(st.overflow_ratio() == 0.5);
  // e4m3: 464 counts, although nearest_even rounds it to 448.
  mf::rounding_stats e;
  (void)mf::round(464.0f, mf::e4m3, opts(rounding::nearest_even), e);
  (void)mf::round(463.9f, mf::e4m3, opts(rounding::nearest_even), e);
  CHECK(e.overflows == 1);
}

TEST_CASE("round is usable in constant expressions", "[semantics][constexpr]") {
  STATIC_REQUIRE(mf::round(65519.0f, mf::binary16) == 65504.0f);
  STATIC_REQUIRE(mf::round(1.0625, mf::fp_4_3_4) == 1.0);
  STATIC_REQUIRE(mf::round(1.0625, mf::fp_4_3_4, opts(rounding::nearest_away)) == 1.125);
}
