// The 8/6/4-bit element and scale formats of OCP MX v1.0 (E8M0, FP6 E2M3 / E3M2, FP4 E2M1),
// the fnuz FP8 variants and MXINT8's element, checked code by code against values written from
// the specifications' formulas and tables (not from the library), and rounding checked against a
// brute-force nearest search over those values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include <minifloat/bulk.hpp>
#include <minifloat/encode.hpp>
#include <minifloat/format_name.hpp>
#include <minifloat/fp.hpp>
#include <minifloat/round.hpp>

namespace mf = minifloat;

namespace {

const double nan_value = std::numeric_limits<double>::quiet_NaN();

/// The value of a code as the OCP MX v1.0 spec (§5.3, "Element data types") and the fnuz
/// descriptions define it: (-1)^S 2^(E-bias) (1 + M/2^m) for E > 0, (-1)^S 2^(1-bias) (M/2^m)
/// for E = 0. fnuz: the code 1000…0 is NaN. Written from the text, independently of the library.
double spec_value(int e_bits, int m_bits, int bias, bool fnuz, std::uint32_t code) {
  const std::uint32_t sign = code >> (e_bits + m_bits) & 1;
  const std::uint32_t exponent = code >> m_bits & ((1u << e_bits) - 1);
  const std::uint32_t mantissa = code & ((1u << m_bits) - 1);
  if (fnuz && sign == 1 && exponent == 0 && mantissa == 0) return nan_value;
  const double frac = static_cast<double>(mantissa) / static_cast<double>(1u << m_bits);
  const double magnitude = exponent == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0 + frac, static_cast<int>(exponent) - bias);
  return sign ? -magnitude : magnitude;
}

struct element_case {
  const char* name;
  mf::format f;
  int e, m, bias;
  bool fnuz;
  double max, min_normal, min_subnormal;  // from the specs' tables
};

const element_case element_cases[] = {
    {"e2m1", mf::e2m1, 2, 1, 1, false, 6.0, 1.0, 0.5},
    {"e2m3", mf::e2m3, 2, 3, 1, false, 7.5, 1.0, 0.125},
    {"e3m2", mf::e3m2, 3, 2, 3, false, 28.0, 0.25, 0.0625},
    {"e4m3fnuz", mf::e4m3fnuz, 4, 3, 8, true, 240.0, 0x1p-7, 0x1p-10},
    {"e5m2fnuz", mf::e5m2fnuz, 5, 2, 16, true, 57344.0, 0x1p-15, 0x1p-17},
    {"int8_mx", mf::int8_mx, 1, 6, 1, false, 127.0 / 64, 1.0, 1.0 / 64},
};

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b)); }

/// Nearest-even over an explicit list of (value, code) pairs of non-negative values, sorted by
/// value; ties go to the even code, or up when every code in the tie is odd-free (M = 0: up).
std::uint32_t nearest_code(const std::vector<std::pair<double, std::uint32_t>>& table, double x, bool ties_up) {
  auto above = std::lower_bound(table.begin(), table.end(), x, [](const auto& p, double v) { return p.first < v; });
  if (above == table.end()) return table.back().second;  // saturation
  if (above->first == x || above == table.begin()) return above->second;
  const auto below = above - 1;
  const double d_lo = x - below->first, d_hi = above->first - x;
  if (d_lo < d_hi) return below->second;
  if (d_hi < d_lo) return above->second;
  if (ties_up) return above->second;
  return (below->second & 1) == 0 ? below->second : above->second;
}

}  // namespace

TEST_CASE("every code of the MX element and fnuz formats decodes to the value the spec's formula gives", "[mx]") {
  for (const auto& c : element_cases) {
    INFO(c.name);
    REQUIRE(c.f.bit_width() == 1 + c.e + c.m);
    REQUIRE(c.f.max_finite() == c.max);
    REQUIRE(c.f.min_normal() == c.min_normal);
    REQUIRE(c.f.min_subnormal() == c.min_subnormal);
    for (std::uint32_t code = 0; code < (1u << c.f.bit_width()); ++code) {
      INFO("code " << code);
      const double want = spec_value(c.e, c.m, c.bias, c.fnuz, code);
      REQUIRE(same(mf::decode<double>(code, c.f), want));
      REQUIRE(same(static_cast<double>(mf::decode<float>(code, c.f)), want));
      if (!std::isnan(want) && !(want == 0 && std::signbit(want) && c.fnuz)) {
        // every value re-encodes to its own code (+0 and -0 keep their codes where both exist)
        REQUIRE(mf::encode(static_cast<float>(want), c.f) == code);
        REQUIRE(mf::encode(want, c.f) == code);
      }
    }
  }
}

TEST_CASE("the spec tables' FP4 and FP6 values are the decoded codes", "[mx]") {
  const float e2m1_values[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (std::uint32_t code = 0; code < 8; ++code) {
    CHECK(mf::decode(code, mf::e2m1) == e2m1_values[code]);
    CHECK(mf::decode(code | 8, mf::e2m1) == -e2m1_values[code]);
  }
  // OCP MX v1.0 Table 3 (FP6): max normal, min normal, max subnormal, min subnormal
  CHECK(mf::decode(0b011111, mf::e2m3) == 7.5f);
  CHECK(mf::decode(0b001000, mf::e2m3) == 1.0f);
  CHECK(mf::decode(0b000111, mf::e2m3) == 0.875f);
  CHECK(mf::decode(0b000001, mf::e2m3) == 0.125f);
  CHECK(mf::decode(0b011111, mf::e3m2) == 28.0f);
  CHECK(mf::decode(0b000100, mf::e3m2) == 0.25f);
  CHECK(mf::decode(0b000011, mf::e3m2) == 0.1875f);
  CHECK(mf::decode(0b000001, mf::e3m2) == 0.0625f);
}

TEST_CASE("E8M0 codes are 2^(code-127) with 0xFF NaN, no sign, no zero", "[mx]") {
  REQUIRE(mf::e8m0.bit_width() == 8);
  REQUIRE_FALSE(mf::e8m0.has_sign());
  for (std::uint32_t code = 0; code < 255; ++code) {
    const double want = std::ldexp(1.0, static_cast<int>(code) - 127);
    REQUIRE(mf::decode<double>(code, mf::e8m0) == want);
    REQUIRE(mf::encode(want, mf::e8m0) == code);
    REQUIRE(mf::decode<double>(code | 0x100, mf::e8m0) == want);  // bits above the width are ignored
  }
  CHECK(std::isnan(mf::decode<double>(0xFF, mf::e8m0)));
  CHECK(std::isnan(mf::decode<float>(0xFF, mf::e8m0)));
  CHECK(mf::decode<float>(127, mf::e8m0) == 1.0f);
  CHECK(mf::decode<float>(0, mf::e8m0) == 0x1p-127f);  // a float subnormal, decoded exactly
  CHECK(mf::decode<float>(254, mf::e8m0) == 0x1p127f);
}

TEST_CASE("E8M0 rounding: powers of two, ties up, below the range to 2^-127, zero and negatives are NaN", "[mx]") {
  const mf::rounding_options sat{mf::rounding::nearest_even, mf::overflow::saturate};
  CHECK(mf::encode(3.0, mf::e8m0) == 129);          // 1.5 * 2 is a tie: up to 4 (M = 0: the next binade)
  CHECK(mf::encode(2.9, mf::e8m0) == 128);
  CHECK(mf::encode(0x1p-140, mf::e8m0) == 0);       // no zero: the smallest value is the nearest
  CHECK(mf::encode(0x1p-140, mf::e8m0, {mf::rounding::toward_zero}) == 0);
  CHECK(mf::encode(0.0, mf::e8m0) == 0xFF);
  CHECK(mf::encode(-1.0, mf::e8m0) == 0xFF);
  CHECK(mf::encode(nan_value, mf::e8m0) == 0xFF);
  CHECK(mf::encode(0x1.8p127, mf::e8m0) == 0xFF);   // overflow without saturation: NaN (no Inf)
  CHECK(mf::encode(0x1.8p127, mf::e8m0, sat) == 254);
  CHECK(mf::encode(std::numeric_limits<double>::infinity(), mf::e8m0, sat) == 254);
  CHECK(mf::encode(std::numeric_limits<double>::infinity(), mf::e8m0) == 0xFF);
  // 2^-127 is a float subnormal, yet float rounds to E8M0 (through double): the smallest value is a float
  CHECK(mf::round(0x1p-127f, mf::e8m0) == 0x1p-127f);
  CHECK(mf::encode(0x1p-127f, mf::e8m0) == 0);
  CHECK(mf::encode(0x1p-149f, mf::e8m0) == 0);
  CHECK(mf::encode(0x1.8p-127f, mf::e8m0) == 1);    // a subnormal tie goes up to 2^-126
  CHECK(mf::encode(std::numeric_limits<float>::quiet_NaN(), mf::e8m0) == 0xFF);
  // brute force over all positive values, nearest with ties up, saturating
  std::vector<std::pair<double, std::uint32_t>> table;
  for (std::uint32_t code = 0; code < 255; ++code) table.emplace_back(std::ldexp(1.0, static_cast<int>(code) - 127), code);
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> exponent(-135, 135);
  for (int i = 0; i < 20000; ++i) {
    const double x = std::exp2(exponent(gen));
    REQUIRE(mf::encode(x, mf::e8m0, sat) == nearest_code(table, x, true));
  }
}

namespace {
std::uint64_t bits_of(double x) { return std::bit_cast<std::uint64_t>(x); }

/// Float inputs of every class: every exponent field (subnormals included) with random mantissas,
/// the powers of two and their ties, zeros, negatives, Inf and NaNs with payloads.
std::vector<float> float_inputs_of_every_class() {
  std::mt19937 gen(2026);
  std::vector<float> v;
  for (std::uint32_t e = 0; e <= 255; ++e)
    for (int k = 0; k < 24; ++k) {
      std::uint32_t mantissa = gen() & 0x7fffffU;
      if (k == 0) mantissa = 0;
      if (k == 1) mantissa = 0x400000U;      // 1.5 * 2^e: a tie for E8M0
      if (k == 2) mantissa = 0x3fffffU;      // just below the tie
      if (k == 3) mantissa = 0x400001U;      // just above
      if (k == 4) mantissa = 0x7fffffU;
      if (e == 0 && k == 5) mantissa = 1;    // the smallest subnormal
      for (const std::uint32_t sign : {0U, 0x80000000U}) v.push_back(std::bit_cast<float>(sign | e << 23 | mantissa));
    }
  return v;
}

bool same_bits_in_double(float from_float, double from_double) {
  // The float path's result read as a double must be the double path's result bit for bit
  // (NaNs: both NaN with the same sign; float keeps the top 23 bits of the double's payload).
  if (std::isnan(from_double)) return std::isnan(from_float) && std::signbit(from_float) == std::signbit(from_double);
  return bits_of(static_cast<double>(from_float)) == bits_of(from_double);
}
}  // namespace

TEST_CASE("E8M0 from float equals E8M0 from double of the same value on every path, mode and overflow policy",
          "[mx]") {
  // The oracle is the double path, which tests/test_round_mpfr.cpp checks against MPFR; float -> double is exact.
  const std::vector<float> xs = float_inputs_of_every_class();
  std::vector<double> xd(xs.begin(), xs.end());
  const mf::rounding modes[] = {mf::rounding::nearest_even,    mf::rounding::nearest_away,    mf::rounding::toward_zero,
                                mf::rounding::stochastic,      mf::rounding::toward_positive, mf::rounding::toward_negative,
                                mf::rounding::to_odd};
  std::size_t checked = 0;
  for (const auto mode : modes)
    for (const auto policy : {mf::overflow::infinity, mf::overflow::saturate}) {
      mf::rounding_options o{mode, policy};
      o.seed = 99;
      o.index = 12345;
      INFO("mode " << static_cast<int>(mode) << " saturate " << (policy == mf::overflow::saturate));
      // scalar round, with counts
      const mf::rounder<float> rf(mf::e8m0, o);
      const mf::rounder<double> rd(mf::e8m0, o);
      REQUIRE(rf.widened());
      mf::rounding_stats sf, sd;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        INFO(std::hexfloat << "x = " << xs[i]);
        REQUIRE(same_bits_in_double(rf(xs[i], o.index + i, sf), rd(xd[i], o.index + i, sd)));
        REQUIRE(same_bits_in_double(mf::round(xs[i], mf::e8m0, o), mf::round(xd[i], mf::e8m0, o)));
        REQUIRE(mf::try_encode(xs[i], mf::e8m0, o).code == mf::try_encode(xd[i], mf::e8m0, o).code);
        ++checked;
      }
      CHECK(sf.values == sd.values);
      CHECK(sf.overflows == sd.overflows);
      CHECK(sf.underflows == sd.underflows);
      CHECK(sf.nans == sd.nans);
      CHECK(sf.infinities == sd.infinities);
      // bulk quantize (with counts) and in place, bulk encode, decode back
      std::vector<float> qf(xs.size());
      std::vector<double> qd(xd.size());
      mf::rounding_stats bf, bd;
      mf::quantize(std::span<const float>(xs), std::span<float>(qf), mf::e8m0, o, bf);
      mf::quantize(std::span<const double>(xd), std::span<double>(qd), mf::e8m0, o, bd);
      CHECK(bf.values == bd.values);
      CHECK(bf.overflows == bd.overflows);
      CHECK(bf.nans == bd.nans);
      std::vector<float> in_place = xs;
      mf::quantize(std::span<float>(in_place), mf::e8m0, o);
      std::vector<std::uint8_t> cf(xs.size()), cd(xd.size());
      mf::encode(xs, cf, mf::e8m0, o);
      mf::encode(xd, cd, mf::e8m0, o);
      std::vector<float> back(xs.size());
      mf::decode(cf, back, mf::e8m0);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        INFO(std::hexfloat << "x = " << xs[i] << " i = " << i);
        REQUIRE(same_bits_in_double(qf[i], qd[i]));
        REQUIRE(same_bits_in_double(in_place[i], qd[i]));
        REQUIRE(cf[i] == cd[i]);
        REQUIRE(same_bits_in_double(back[i], mf::decode<double>(cd[i], mf::e8m0)));
      }
      // a chunked bulk call (offsets in the element index) equals the whole call
      std::vector<float> chunked(xs.size());
      const std::size_t cut = 1500;
      mf::quantize(std::span<const float>(xs).first(cut), std::span<float>(chunked).first(cut), rf);
      mf::quantize(std::span<const float>(xs).subspan(cut), std::span<float>(chunked).subspan(cut), rf.advanced(cut));
      for (std::size_t i = 0; i < xs.size(); ++i) REQUIRE(same_bits_in_double(chunked[i], qd[i]));
    }
  CHECK(checked == 14 * xs.size());
  // the fp<> type from float: the code of the double path
  for (const float x : xs) {
    if (std::isnan(x)) continue;
    REQUIRE(mf::e8m0_t(x).bits() == mf::e8m0_t(static_cast<double>(x)).bits());
  }
  // the spec's facts from float: 2^-127 .. 2^127 each its code, 0xFF NaN
  for (int k = -127; k <= 127; ++k) REQUIRE(mf::encode(std::ldexp(1.0f, k), mf::e8m0) == static_cast<std::uint64_t>(k + 127));
  CHECK(std::isnan(mf::round(-1.0f, mf::e8m0)));
  CHECK(std::isnan(mf::round(0.0f, mf::e8m0)));
  CHECK(mf::encode(0x1.8p127f, mf::e8m0) == 0xFF);
  CHECK(mf::encode(std::numeric_limits<float>::infinity(), mf::e8m0, {mf::rounding::nearest_even, mf::overflow::saturate}) == 254);
}

TEST_CASE("fnuz: no -0, NaN is the -0 code, overflow and Inf give NaN unless saturating", "[mx]") {
  for (const mf::format f : {mf::e4m3fnuz, mf::e5m2fnuz}) {
    const std::uint64_t nan_code = std::uint64_t{1} << (f.bit_width() - 1);
    CHECK(mf::encode(-0.0f, f) == 0);
    CHECK_FALSE(std::signbit(mf::round(-0.0f, f)));
    CHECK_FALSE(std::signbit(mf::round(-1e-30f, f)));  // an underflow of a negative value is +0
    CHECK(mf::encode(std::numeric_limits<float>::quiet_NaN(), f) == nan_code);
    CHECK(mf::encode(-std::numeric_limits<float>::quiet_NaN(), f) == nan_code);
    CHECK(mf::encode(std::numeric_limits<float>::infinity(), f) == nan_code);
    CHECK(mf::encode(-1e30f, f) == nan_code);
    const mf::rounding_options sat{mf::rounding::nearest_even, mf::overflow::saturate};
    CHECK(mf::encode(1e30f, f, sat) == nan_code - 1);
    CHECK(mf::encode(-std::numeric_limits<float>::infinity(), f, sat) == 2 * nan_code - 1);
    CHECK(std::isnan(mf::round(1e30f, f)));
  }
  CHECK(mf::encode(248.0f, mf::e4m3fnuz) == 0x80);    // the overflow threshold of 240 is 248
  CHECK(mf::encode(247.0f, mf::e4m3fnuz) == 0x7F);
}

TEST_CASE("rounding to the element formats is the nearest table value (ties to even), saturating", "[mx]") {
  const mf::rounding_options sat{mf::rounding::nearest_even, mf::overflow::saturate};
  std::mt19937_64 gen(11);
  for (const auto& c : element_cases) {
    INFO(c.name);
    std::vector<std::pair<double, std::uint32_t>> table;
    for (std::uint32_t code = 0; code < (1u << (c.e + c.m)); ++code) table.emplace_back(spec_value(c.e, c.m, c.bias, c.fnuz, code), code);
    std::vector<float> xs;
    for (std::size_t k = 0; k + 1 < table.size(); ++k) {  // every midpoint and its neighbours
      const double mid = (table[k].first + table[k + 1].first) / 2;
      for (const double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e9), table[k].first})
        xs.push_back(static_cast<float>(x));
    }
    std::uniform_real_distribution<double> exponent(std::log2(c.min_subnormal) - 3, std::log2(c.max) + 2);
    for (int i = 0; i < 5000; ++i) xs.push_back(static_cast<float>(std::exp2(exponent(gen))));
    for (const float x : xs) {
      INFO("x = " << x);
      const std::uint32_t want = nearest_code(table, x, false);
      REQUIRE(mf::encode(x, c.f, sat) == want);
      const std::uint32_t sign = 1u << (c.e + c.m);
      if (!(c.fnuz && want == 0)) REQUIRE(mf::encode(-x, c.f, sat) == (want | sign));
    }
    // the bulk kernels agree with the scalar path, round and encode
    std::vector<float> in(xs);
    for (std::size_t i = 0; i < xs.size(); i += 2) in[i] = -in[i];
    std::vector<float> out(in.size());
    mf::quantize(std::span<const float>(in), std::span<float>(out), c.f, sat);
    std::vector<std::uint8_t> codes(in.size());
    mf::encode(std::span<const float>(in), std::span<std::uint8_t>(codes), c.f, sat);
    std::vector<float> back(in.size());
    mf::decode(std::span<const std::uint8_t>(codes), std::span<float>(back), c.f);
    for (std::size_t i = 0; i < in.size(); ++i) {
      REQUIRE(same(out[i], mf::round(in[i], c.f, sat)));
      REQUIRE(codes[i] == mf::encode(in[i], c.f, sat));
      REQUIRE(same(back[i], out[i]));
    }
  }
}

TEST_CASE("numeric_limits and the fp<> type of the new formats", "[mx]") {
  using L4 = std::numeric_limits<mf::e4m3fnuz_t>;
  CHECK(static_cast<double>(L4::max()) == 240.0);
  CHECK(static_cast<double>(L4::min()) == 0x1p-7);
  CHECK(static_cast<double>(L4::denorm_min()) == 0x1p-10);
  CHECK(static_cast<double>(L4::lowest()) == -240.0);
  CHECK_FALSE(L4::has_infinity);
  CHECK(L4::has_quiet_NaN);
  CHECK(L4::quiet_NaN().bits() == 0x80);
  CHECK(static_cast<double>(std::numeric_limits<mf::e5m2fnuz_t>::max()) == 57344.0);
  using L8 = std::numeric_limits<mf::e8m0_t>;
  CHECK_FALSE(L8::is_signed);
  CHECK(static_cast<double>(L8::max()) == 0x1p127);
  CHECK(static_cast<double>(L8::min()) == 0x1p-127);
  CHECK(static_cast<double>(L8::lowest()) == 0x1p-127);
  CHECK(L8::quiet_NaN().bits() == 0xFF);
  CHECK(L8::digits == 1);
  using L1 = std::numeric_limits<mf::e2m1_t>;
  CHECK(static_cast<double>(L1::max()) == 6.0);
  CHECK(static_cast<double>(L1::denorm_min()) == 0.5);
  CHECK_FALSE(L1::has_quiet_NaN);
  CHECK(static_cast<double>(std::numeric_limits<mf::e3m2_t>::max()) == 28.0);
  CHECK(static_cast<double>(std::numeric_limits<mf::e2m3_t>::max()) == 7.5);

  CHECK(static_cast<float>(mf::e2m1_t(2.0f) + mf::e2m1_t(3.0f)) == 4.0f);  // 5 ties to the even code of 4
  CHECK(static_cast<float>(mf::e2m1_t(100.0f)) == 6.0f);                    // all-finite types saturate
  CHECK((-mf::e4m3fnuz_t(0.0f)).bits() == 0);                                // no -0
  CHECK((-mf::e4m3fnuz_t(1.0f)).bits() == (mf::e4m3fnuz_t(-1.0f)).bits());
  CHECK(std::isnan(static_cast<double>(-mf::e8m0_t(4.0))));                // E8M0 has no negatives
  CHECK(mf::e8m0_t(4.0).bits() == 129);
  CHECK(static_cast<float>(mf::e4m3fnuz_t(1000.0f)) != static_cast<float>(mf::e4m3fnuz_t(1000.0f)));  // NaN
}

TEST_CASE("the new formats have names that parse", "[mx]") {
  CHECK(mf::parse_format("e4m3fnuz") == mf::e4m3fnuz);
  CHECK(mf::parse_format("e5m2fnuz") == mf::e5m2fnuz);
  CHECK(mf::parse_format("e8m0") == mf::e8m0);
  CHECK(mf::parse_format("e2m3") == mf::e2m3);
  CHECK(mf::parse_format("e3m2") == mf::e3m2);
  CHECK(mf::parse_format("e2m1") == mf::e2m1);
  CHECK_THROWS_WITH(mf::format({8, 1, 127, false, mf::specials::unsigned_exponent}).validate(),
                    Catch::Contains("mantissa_bits = 1"));
}
