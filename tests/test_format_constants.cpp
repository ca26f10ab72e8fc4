// Named formats against their published constants, and descriptor validation.
//
// Oracles: the values below are the published ones (IEEE 754 binary16/binary32, Google's
// bfloat16, OCP FP8 v1.0 E4M3/E5M2, and the precision-assignment paper's fp(e,m,b) table in
// docs/semantics.md §1), written as literals, not derived from the library.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

#include <minifloat/minifloat.hpp>

namespace mf = minifloat;

namespace {

struct published {
  const char* name;
  mf::format fmt;
  int width;
  double max_finite;
  double min_normal;
  double min_subnormal;
  double epsilon;
  double overflow_threshold;  // max finite + half an ulp of the top binade (docs/semantics.md §2)
  bool has_inf;
  bool has_nan;
};

// Every number is a literal: hex floats are exact powers of two or exact sums of them.
const published kPublished[] = {
    {"binary32", mf::binary32, 32, 3.4028234663852886e38, 0x1p-126, 0x1p-149, 0x1p-23,
     3.4028234663852886e38 + 0x1p103, true, true},
    {"binary16", mf::binary16, 16, 65504.0, 0x1p-14, 0x1p-24, 0x1p-10, 65520.0, true, true},
    {"bfloat16", mf::bfloat16, 16, 3.3895313892515355e38, 0x1p-126, 0x1p-133, 0x1p-7,
     3.3895313892515355e38 + 0x1p119, true, true},
    {"e5m2", mf::e5m2, 8, 57344.0, 0x1p-14, 0x1p-16, 0.25, 61440.0, true, true},
    {"e4m3", mf::e4m3, 8, 448.0, 0x1p-6, 0x1p-9, 0.125, 464.0, false, true},
    {"fp(6,9,0)", mf::fp_6_9_0, 16, 8581545984.0 /* (2 - 2^-9) * 2^32 */, 0x1p-30, 0x1p-39, 0x1p-9,
     8585740288.0, false, false},
    {"fp(4,3,4)", mf::fp_4_3_4, 8, 30.0, 0x1p-10, 0x1p-13, 0.125, 31.0, false, false},
    {"fp(5,2,0)", mf::fp_5_2_0, 8, 114688.0, 0x1p-14, 0x1p-16, 0.25, 122880.0, false, false},
};

bool message_names(const std::invalid_argument& e, const std::string& field) {
  return std::string(e.what()).find(field) != std::string::npos;
}

// Runs f, which must throw std::invalid_argument whose message names `field`.
template <class F>
void require_invalid_naming(F&& f, const std::string& field) {
  bool threw = false;
  try {
    f();
  } catch (const std::invalid_argument& e) {
    threw = true;
    INFO("message: " << e.what());
    CHECK(message_names(e, field));
  }
  CHECK(threw);
}

}  // namespace

TEST_CASE("named formats have the published largest finite value", "[format]") {
  for (const auto& p : kPublished) {
    INFO(p.name);
    CHECK(p.fmt.max_finite() == p.max_finite);
  }
  // The paper's fp(6,9,0) maximum spelled out: (2 - 2^-9) * 2^32.
  CHECK(mf::fp_6_9_0.max_finite() == (2.0 - 0x1p-9) * 0x1p32);
  CHECK(mf::binary32.max_finite() == static_cast<double>(FLT_MAX));
}

TEST_CASE("named formats have the published smallest normal and subnormal values", "[format]") {
  for (const auto& p : kPublished) {
    INFO(p.name);
    CHECK(p.fmt.min_normal() == p.min_normal);
    CHECK(p.fmt.min_subnormal() == p.min_subnormal);
    CHECK(p.fmt.min_positive() == p.min_subnormal);  // every named format has subnormals
  }
  CHECK(mf::binary32.min_normal() == static_cast<double>(FLT_MIN));
  CHECK(mf::binary32.min_subnormal() == static_cast<double>(FLT_TRUE_MIN));
}

TEST_CASE("min_positive is the smallest normal when subnormals are off", "[format]") {
  mf::format f = mf::binary16;
  f.subnormals = false;
  CHECK(f.min_positive() == 0x1p-14);
  CHECK(f.min_subnormal() == 0x1p-24);  // still the value the code would have
}

TEST_CASE("named formats have the published epsilon and bit width", "[format]") {
  for (const auto& p : kPublished) {
    INFO(p.name);
    CHECK(p.fmt.epsilon() == p.epsilon);
    CHECK(p.fmt.bit_width() == p.width);
  }
  CHECK(mf::binary32.epsilon() == static_cast<double>(FLT_EPSILON));
}

TEST_CASE("overflow_threshold is the rounding midpoint above the largest finite value", "[format]") {
  for (const auto& p : kPublished) {
    INFO(p.name);
    CHECK(p.fmt.overflow_threshold() == p.overflow_threshold);
  }
  // docs/semantics.md §2: 2^emax * (2 - 2^(-m-1)) for the paper formats.
  CHECK(mf::fp_4_3_4.overflow_threshold() == 0x1p4 * (2.0 - 0x1p-4));
  CHECK(mf::fp_5_2_0.overflow_threshold() == 0x1p16 * (2.0 - 0x1p-3));
  CHECK(mf::fp_6_9_0.overflow_threshold() == 0x1p32 * (2.0 - 0x1p-10));
}

TEST_CASE("named formats reserve Inf and NaN codes as their encodings say", "[format]") {
  for (const auto& p : kPublished) {
    INFO(p.name);
    CHECK(p.fmt.has_infinity() == p.has_inf);
    CHECK(p.fmt.has_nan() == p.has_nan);
    CHECK(p.fmt.problem().empty());
    CHECK_NOTHROW(p.fmt.validate());
  }
}

TEST_CASE("named formats have the published field layout and exponent range", "[format]") {
  CHECK(mf::binary16.exponent_bits == 5);
  CHECK(mf::binary16.mantissa_bits == 10);
  CHECK(mf::binary16.exponent_bias == 15);
  CHECK(mf::bfloat16.exponent_bias == 127);
  CHECK(mf::e5m2.exponent_bias == 15);
  CHECK(mf::e4m3.exponent_bias == 7);
  CHECK(mf::e4m3.encoding == mf::specials::nan_only);
  // The paper formats: bias 2^(e-1) - 1 + b, every code finite.
  CHECK(mf::fp_4_3_4.exponent_bias == 11);  // HFP8 1-4-3 with bias 11
  CHECK(mf::fp_5_2_0.exponent_bias == 15);
  CHECK(mf::fp_6_9_0.exponent_bias == 31);
  CHECK(mf::fp_4_3_4.encoding == mf::specials::all_finite);
  // emax / emin from docs/semantics.md §1: emax = 2^(e-1) - b, emin = 2 - 2^(e-1) - b.
  CHECK(mf::fp_4_3_4.emax() == 4);
  CHECK(mf::fp_4_3_4.emin() == -10);
  CHECK(mf::fp_5_2_0.emax() == 16);
  CHECK(mf::fp_5_2_0.emin() == -14);
  CHECK(mf::fp_6_9_0.emax() == 32);
  CHECK(mf::fp_6_9_0.emin() == -30);
  CHECK(mf::binary16.emax() == 15);
  CHECK(mf::binary16.emin() == -14);
  CHECK(mf::e4m3.emax() == 8);
  CHECK(mf::e4m3.emin() == -6);
  CHECK(mf::e4m3.max_mantissa_field() == 6);  // S.1111.111 is NaN
  CHECK(mf::e5m2.max_mantissa_field() == 3);
  CHECK(mf::binary32.emax() == 127);
  CHECK(mf::binary32.emin() == -126);
}

TEST_CASE("paper_format and ieee_format build the descriptors the paper and IEEE define", "[format]") {
  const mf::format f = mf::paper_format(4, 3, 4);
  CHECK(f == mf::format{4, 3, 11, true, mf::specials::all_finite});
  CHECK(mf::ieee_format(5, 10) == mf::format{5, 10, 15, true, mf::specials::ieee});
  CHECK(mf::ieee_format(8, 23) == mf::format{});  // the default descriptor is binary32
}

TEST_CASE("the format descriptor's constants are usable in constant expressions", "[format]") {
  STATIC_REQUIRE(mf::binary16.max_finite() == 65504.0);
  STATIC_REQUIRE(mf::e4m3.max_finite() == 448.0);
  STATIC_REQUIRE(mf::fp_4_3_4.overflow_threshold() == 31.0);
  STATIC_REQUIRE(mf::format::exp2i(-149) == 0x1p-149);
  STATIC_REQUIRE(mf::format::exp2i(1023) == 0x1p1023);
}

TEST_CASE("validate rejects out-of-range exponent_bits and names the field", "[format][validate]") {
  for (int e : {0, -1, 12, 40}) {
    INFO("exponent_bits = " << e);
    mf::format f{e, 3, 7, true, mf::specials::all_finite};
    CHECK_FALSE(f.problem().empty());
    require_invalid_naming([&] { f.validate(); }, "exponent_bits");
  }
  // An ieee encoding needs two exponent bits (one binade plus the Inf/NaN binade).
  require_invalid_naming([] { mf::format{1, 3, 0, true, mf::specials::ieee}.validate(); }, "exponent_bits");
  CHECK_NOTHROW(mf::format{1, 3, 0, true, mf::specials::all_finite}.validate());
  CHECK_NOTHROW(mf::format{11, 52, 1023, true, mf::specials::ieee}.validate());
}

TEST_CASE("validate rejects out-of-range mantissa_bits and names the field", "[format][validate]") {
  for (int m : {-1, 53, 64}) {
    INFO("mantissa_bits = " << m);
    require_invalid_naming([&] { mf::format{5, m, 15, true, mf::specials::all_finite}.validate(); },
                           "mantissa_bits");
  }
  // ieee needs a mantissa bit for NaN; nan_only needs one so its top binade keeps a finite value.
  require_invalid_naming([] { mf::format{5, 0, 15, true, mf::specials::ieee}.validate(); }, "mantissa_bits");
  require_invalid_naming([] { mf::format{5, 0, 15, true, mf::specials::nan_only}.validate(); }, "mantissa_bits");
  CHECK_NOTHROW(mf::format{5, 0, 15, true, mf::specials::all_finite}.validate());
}

TEST_CASE("validate rejects a bias that puts the range outside double and names exponent_bias",
          "[format][validate]") {
  // emax = 2046 - 0 > 1023
  require_invalid_naming([] { mf::format{11, 10, 0, true, mf::specials::ieee}.validate(); }, "exponent_bias");
  // emin = 1 - 1100 < -1022
  require_invalid_naming([] { mf::format{5, 10, 1100, true, mf::specials::ieee}.validate(); }, "exponent_bias");
  // The edges themselves are fine: emax = 1023, emin = -1022.
  CHECK_NOTHROW(mf::format{11, 10, 1023, true, mf::specials::ieee}.validate());
}

TEST_CASE("make_plan<float> rejects formats that float cannot hold and names the field", "[format][plan]") {
  require_invalid_naming([] { (void)mf::make_plan<float>(mf::format{8, 30, 127, true, mf::specials::ieee}); },
                         "mantissa_bits");
  require_invalid_naming([] { (void)mf::make_plan<float>(mf::format{8, 24, 127, true, mf::specials::ieee}); },
                         "mantissa_bits");
  // bias 130 gives emin = -129 < -126.
  require_invalid_naming([] { (void)mf::make_plan<float>(mf::format{8, 7, 130, true, mf::specials::ieee}); },
                         "exponent_bias");
  // bias 126 gives emax = 128 > 127.
  require_invalid_naming([] { (void)mf::make_plan<float>(mf::format{8, 7, 126, true, mf::specials::ieee}); },
                         "exponent_bias");
  // all_finite with the IEEE bias gains a binade: emax = 128 does not fit float.
  require_invalid_naming([] { (void)mf::make_plan<float>(mf::format{8, 7, 127, true, mf::specials::all_finite}); },
                         "exponent_bias");
  // An invalid descriptor is rejected before the source check, with its own field.
  require_invalid_naming([] { (void)mf::make_plan<float>(mf::format{0, 7, 127, true, mf::specials::ieee}); },
                         "exponent_bits");
  // The edges of float are accepted: binary32 itself and M = 23.
  CHECK_NOTHROW(mf::make_plan<float>(mf::binary32));
  // An all_finite format with 8 exponent bits has 255 normal binades; float has 254.
  require_invalid_naming([] { (void)mf::make_plan<float>(mf::format{8, 23, 128, true, mf::specials::all_finite}); },
                         "exponent_bias");
  // So does nan_only (its top binade holds finite values): emax = 128.
  require_invalid_naming([] { (void)mf::make_plan<float>(mf::format{8, 3, 127, true, mf::specials::nan_only}); },
                         "exponent_bias");
  CHECK_NOTHROW(mf::make_plan<float>(mf::format{8, 3, 127, true, mf::specials::ieee}));
  // double holds what float does not.
  CHECK_NOTHROW(mf::make_plan<double>(mf::format{8, 30, 127, true, mf::specials::ieee}));
  CHECK_NOTHROW(mf::make_plan<double>(mf::format{8, 7, 130, true, mf::specials::ieee}));
  CHECK_NOTHROW(mf::make_plan<double>(mf::format{11, 52, 1023, true, mf::specials::ieee}));
  require_invalid_naming([] { (void)mf::make_plan<double>(mf::format{11, 52, 1022, true, mf::specials::ieee}); },
                         "exponent_bias");
}

TEST_CASE("every entry point that builds a plan rejects a format the source type cannot hold",
          "[format][plan]") {
  const mf::format too_wide{8, 30, 127, true, mf::specials::ieee};
  CHECK_THROWS_AS(mf::round(1.0f, too_wide), std::invalid_argument);
  CHECK_THROWS_AS(mf::rounder<float>(too_wide), std::invalid_argument);
  CHECK_THROWS_AS(mf::encode(1.0f, too_wide), std::invalid_argument);
  CHECK_THROWS_AS(mf::decode<float>(0, too_wide), std::invalid_argument);
  CHECK_NOTHROW(mf::round(1.0, too_wide));
  CHECK_NOTHROW(mf::decode<double>(0, too_wide));
}

TEST_CASE("random_bits outside 0..source width is rejected and named", "[format][plan]") {
  for (int r : {-1, 33, 64, 65}) {
    INFO("float, random_bits = " << r);
    mf::rounding_options o;
    o.mode = mf::rounding::stochastic;
    o.random_bits = r;
    require_invalid_naming([&] { (void)mf::make_plan<float>(mf::binary16, o); }, "random_bits");
  }
  for (int r : {-1, 65, 100}) {
    INFO("double, random_bits = " << r);
    mf::rounding_options o;
    o.mode = mf::rounding::stochastic;
    o.random_bits = r;
    require_invalid_naming([&] { (void)mf::make_plan<double>(mf::binary16, o); }, "random_bits");
  }
  mf::rounding_options o;
  o.mode = mf::rounding::stochastic;
  for (int r : {0, 1, 12, 32}) {
    o.random_bits = r;
    CHECK_NOTHROW(mf::make_plan<float>(mf::binary16, o));
  }
  o.random_bits = 64;
  CHECK_NOTHROW(mf::make_plan<double>(mf::binary16, o));
  // The check does not depend on the rounding mode.
  o.mode = mf::rounding::nearest_even;
  o.random_bits = 33;
  CHECK_THROWS_AS(mf::make_plan<float>(mf::binary16, o), std::invalid_argument);
}

TEST_CASE("to_string names the named formats, the papers' notation and the fields of the rest", "[format]") {
  CHECK(mf::to_string(mf::binary16) == "binary16");
  CHECK(mf::to_string(mf::e4m3) == "e4m3");
  CHECK(mf::to_string(mf::fp_4_3_4) == "paper_fp(4,3,4)");
  CHECK(mf::to_string(mf::paper_format(5, 2, -3)) == "paper_fp(5,2,-3)");
  CHECK(mf::to_string(mf::format{4, 3, 4, true, mf::specials::ieee}) == "ieee(4,3,bias=4)");
  CHECK(mf::to_string(mf::format{4, 3, 8, true, mf::specials::nan_only}) == "nan_only(4,3,bias=8)");
  mf::format f = mf::binary16;
  f.subnormals = false;
  CHECK(mf::to_string(f) == "ieee(5,10,bias=15,no_subnormals)");
  f = mf::fp_4_3_4;
  f.subnormals = false;
  CHECK(mf::to_string(f) == "all_finite(4,3,bias=11,no_subnormals)");
}
