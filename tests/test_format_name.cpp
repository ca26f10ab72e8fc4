// parse_format (minifloat/format_name.hpp): the named formats, the papers' paper_fp(e,m,b) (and
// its older spelling fp(e,m,b)), the explicit ENCODING(E,M,bias=B[,no_subnormals]); to_string
// reads back over the whole grid of valid formats; hostile numbers are rejected naming the field
// (the sanitize preset runs this file under UBSan, so an overflow would fail it).
#include <catch2/catch.hpp>

#include <climits>
#include <sstream>
#include <stdexcept>
#include <string>

#include <minifloat/minifloat.hpp>

namespace mf = minifloat;

namespace {
#if MINIFLOAT_TEST_SANITIZE
constexpr int kBiasStride = 13;
#else
constexpr int kBiasStride = 1;
#endif
}  // namespace

TEST_CASE("parse_format reads the named formats") {
  CHECK(mf::parse_format("bf16") == mf::bfloat16);
  CHECK(mf::parse_format("bfloat16") == mf::bfloat16);
  CHECK(mf::parse_format("fp16") == mf::binary16);
  CHECK(mf::parse_format("half") == mf::binary16);
  CHECK(mf::parse_format("e4m3") == mf::e4m3);
  CHECK(mf::parse_format("e5m2") == mf::e5m2);
  CHECK(mf::parse_format("fp32") == mf::binary32);
}

TEST_CASE("parse_format reads paper_fp(e,m,b) and the older fp(e,m,b) as the papers' format") {
  CHECK(mf::parse_format("paper_fp(4,3,4)") == mf::fp_4_3_4);
  CHECK(mf::parse_format("fp(4,3,4)") == mf::fp_4_3_4);
  CHECK(mf::parse_format("fp(6,9,0)") == mf::fp_6_9_0);
  CHECK(mf::parse_format("paper_fp(5,2,-3)") == mf::paper_format(5, 2, -3));
  // The template world agrees: paper_fp<4,3,4> is the paper's, fp<4,3,4> has bias 4 and IEEE specials.
  static_assert(std::is_same_v<mf::paper_fp<4, 3, 4>, mf::fp_4_3_4_t>);
  CHECK(static_cast<double>(std::numeric_limits<mf::paper_fp<4, 3, 4>>::max()) == 30.0);
  CHECK(static_cast<double>(std::numeric_limits<mf::fp<4, 3, 4>>::max()) == 1920.0);
  CHECK(mf::parse_format("ieee(4,3,bias=4)") == mf::fp<4, 3, 4>::fmt);
}

TEST_CASE("parse_format reads the explicit ENCODING(E,M,bias=B) names") {
  CHECK(mf::parse_format("ieee(5,10,bias=15)") == mf::binary16);
  CHECK(mf::parse_format("nan_only(4,3,bias=7)") == mf::e4m3);
  CHECK(mf::parse_format("all_finite(4,3,bias=11)") == mf::fp_4_3_4);
  CHECK(mf::parse_format("ieee(5,10,bias=15,no_subnormals)") == mf::format{5, 10, 15, false, mf::specials::ieee});
  CHECK(mf::parse_format("all_finite(3,0,bias=-5)") == mf::format{3, 0, -5, true, mf::specials::all_finite});
}

TEST_CASE("to_string of every valid format reads back through parse_format, and operator<< prints it") {
  std::uint64_t checked = 0;
  for (int E = 1; E <= 11; ++E)
    for (int M = 0; M <= 52; ++M)
      for (const auto enc : {mf::specials::ieee, mf::specials::nan_only, mf::specials::all_finite})
        for (const bool sub : {true, false})
          for (int bias = -1030; bias <= 1030; bias += kBiasStride) {
            const mf::format f{E, M, bias, sub, enc};
            if (!f.problem().empty()) continue;
            const std::string name = mf::to_string(f);
            INFO(name);
            REQUIRE(mf::parse_format(name) == f);
            ++checked;
          }
  CHECK(checked > (kBiasStride == 1 ? 4000000u : 300000u));
  std::ostringstream os;
  os << mf::fp_4_3_4 << ' ' << mf::e5m2 << ' ' << mf::format{4, 3, 4, true, mf::specials::ieee};
  CHECK(os.str() == "paper_fp(4,3,4) e5m2 ieee(4,3,bias=4)");
}

TEST_CASE("parse_format rejects what is not a format, naming the text") {
  for (const char* bad : {"", "bf", "fp(4,3)", "fp(4,3,4", "fp(4,3,4) ", "fp(a,3,4)", "fp(0,3,4)", "fp(12,3,0)",
                          "fp(4,60,0)", "fp(4,3,4)x", "FP16", "ieee(5,10,15)", "ieee(5,10,bias=15", "ieee(1,3,bias=0)",
                          "ieee(5,0,bias=15)", "nan_only(4,0,bias=7)", "ieee(5,10,bias=15,subnormals)", "paper_fp(+4,3,4)"})
    REQUIRE_THROWS_AS(mf::parse_format(bad), std::invalid_argument);
  REQUIRE_THROWS_WITH(mf::parse_format("fp(4,3)"), Catch::Contains("'fp(4,3)'"));
  REQUIRE_THROWS_WITH(mf::parse_format("ieee(5,10,15)"), Catch::Contains("bias="));
}

TEST_CASE("hostile numbers in format names are rejected naming the field, without overflow") {
  // fp(8,7,2147483647) must not overflow the bias and emax arithmetic and come back "valid".
  REQUIRE_THROWS_WITH(mf::parse_format("fp(8,7,2147483647)"), Catch::Contains("b = 2147483647"));
  REQUIRE_THROWS_WITH(mf::parse_format("fp(1,3,-2147483648)"), Catch::Contains("b = -2147483648"));
  REQUIRE_THROWS_WITH(mf::parse_format("paper_fp(11,52,2147483647)"), Catch::Contains("b = "));
  REQUIRE_THROWS_WITH(mf::parse_format("fp(8,7,99999999999999999999)"), Catch::Contains("integer b"));
  REQUIRE_THROWS_WITH(mf::parse_format("fp(2147483647,7,0)"), Catch::Contains("e = 2147483647"));
  REQUIRE_THROWS_WITH(mf::parse_format("fp(-2147483648,7,0)"), Catch::Contains("e = -2147483648"));
  REQUIRE_THROWS_WITH(mf::parse_format("fp(8,-2147483648,0)"), Catch::Contains("m = -2147483648"));
  REQUIRE_THROWS_WITH(mf::parse_format("fp(8,2147483647,0)"), Catch::Contains("m = 2147483647"));
  REQUIRE_THROWS_WITH(mf::parse_format("ieee(8,7,bias=-2147483648)"), Catch::Contains("exponent_bias = -2147483648"));
  REQUIRE_THROWS_WITH(mf::parse_format("ieee(8,7,bias=2147483647)"), Catch::Contains("exponent_bias = 2147483647"));
  REQUIRE_THROWS_WITH(mf::parse_format("all_finite(2147483647,7,bias=0)"), Catch::Contains("exponent_bits"));
  REQUIRE_THROWS_WITH(mf::parse_format("all_finite(8,-1,bias=0)"), Catch::Contains("mantissa_bits"));
  // Format validation itself is overflow-free on hostile descriptors.
  for (const int bias : {INT_MIN, INT_MIN + 1, -1023, 1024, INT_MAX - 1, INT_MAX})
    for (const int E : {1, 2, 8, 11})
      for (const auto enc : {mf::specials::ieee, mf::specials::nan_only, mf::specials::all_finite}) {
        const mf::format f{E, 7, bias, true, enc};
        if (E == 1 && enc == mf::specials::ieee) continue;  // invalid for another reason, named first
        CHECK_THROWS_WITH(f.validate(), Catch::Contains("exponent_bias"));
        CHECK_FALSE(mf::source_problem<double>(f).empty());
        CHECK_THROWS_AS(mf::rounder<double>(f), std::invalid_argument);
      }
  for (const int E : {INT_MIN, -1, 0, 12, INT_MAX})
    CHECK_THROWS_WITH((mf::format{E, 7, 0, true, mf::specials::ieee}.validate()), Catch::Contains("exponent_bits"));
  for (const int M : {INT_MIN, -1, 53, INT_MAX})
    CHECK_THROWS_WITH((mf::format{8, M, 127, true, mf::specials::ieee}.validate()), Catch::Contains("mantissa_bits"));
}
