// parse_format (minifloat/format_name.hpp): the named formats and fp(e,m,b).
#include <catch2/catch.hpp>

#include <stdexcept>

#include <minifloat/format_name.hpp>

TEST_CASE("parse_format reads the named formats") {
  CHECK(minifloat::parse_format("bf16") == minifloat::bfloat16);
  CHECK(minifloat::parse_format("bfloat16") == minifloat::bfloat16);
  CHECK(minifloat::parse_format("fp16") == minifloat::binary16);
  CHECK(minifloat::parse_format("half") == minifloat::binary16);
  CHECK(minifloat::parse_format("e4m3") == minifloat::e4m3);
  CHECK(minifloat::parse_format("e5m2") == minifloat::e5m2);
  CHECK(minifloat::parse_format("fp32") == minifloat::binary32);
}

TEST_CASE("parse_format reads fp(e,m,b) as the papers' format, negative bias included") {
  CHECK(minifloat::parse_format("fp(4,3,4)") == minifloat::fp_4_3_4);
  CHECK(minifloat::parse_format("fp(6,9,0)") == minifloat::fp_6_9_0);
  CHECK(minifloat::parse_format("fp(5,2,-3)") == minifloat::paper_format(5, 2, -3));
}

TEST_CASE("parse_format rejects what is not a format, naming the text") {
  for (const char* bad : {"", "bf", "fp(4,3)", "fp(4,3,4", "fp(4,3,4) ", "fp(a,3,4)", "fp(0,3,4)", "fp(12,3,0)",
                          "fp(4,60,0)", "fp(4,3,4)x", "FP16"})
    REQUIRE_THROWS_AS(minifloat::parse_format(bad), std::invalid_argument);
  REQUIRE_THROWS_WITH(minifloat::parse_format("fp(4,3)"), Catch::Contains("'fp(4,3)'"));
}
