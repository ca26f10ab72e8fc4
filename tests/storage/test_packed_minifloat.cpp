// Packed minifloat codes: floats encoded straight into packed words at 1 + E + M (or E + M)
// bits give the core's codes and values, for every rounding mode and the paper / OCP formats.
#include <catch2/catch.hpp>

#include <minifloat/minifloat.hpp>
#include <minifloat/storage/packed_minifloat.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace ms = minifloat::storage;
using minifloat::format;
using minifloat::rounding;
using minifloat::rounding_options;

namespace {

std::vector<float> sample(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-24, 12);
  std::vector<float> x(n);
  for (auto& v : x) v = std::ldexp(normal(gen), exponent(gen));
  return x;
}

bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

const format formats[] = {minifloat::bfloat16, minifloat::binary16, minifloat::e4m3,    minifloat::e5m2,
                          minifloat::fp_6_9_0, minifloat::fp_4_3_4, minifloat::fp_5_2_0};

}  // namespace

TEST_CASE("encode_packed writes the core's codes packed at 1 + E + M bits; decode_packed gives the core's values",
          "[packed_minifloat]") {
  const auto x = sample(2053, 1);
  for (const format& f : formats) {
    for (rounding mode : {rounding::nearest_even, rounding::nearest_away, rounding::toward_zero, rounding::stochastic}) {
      INFO(minifloat::to_string(f) << " mode " << static_cast<int>(mode));
      const rounding_options o{mode, minifloat::overflow::saturate, 0, 31, 7};
      std::vector<std::uint32_t> codes(x.size());
      minifloat::encode(std::span<const float>(x), std::span<std::uint32_t>(codes), f, o);
      const int bits = ms::code_bits(f, ms::sign_storage::stored);
      CHECK(bits == f.bit_width());
      std::vector<std::uint32_t> expected(ms::packed_words(x.size(), bits)), words(expected.size());
      ms::pack(codes, bits, expected);
      ms::encode_packed(x, words, f, o);
      REQUIRE(words == expected);
      std::vector<float> values(x.size()), rounded(x.size());
      ms::decode_packed(words, values, f);
      minifloat::quantize(std::span<const float>(x), std::span<float>(rounded), f, o);
      for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(values[i], rounded[i]));
    }
  }
}

TEST_CASE("packed_minifloat holds 8-bit formats in a byte each and 16-bit ones in two", "[packed_minifloat]") {
  const auto x = sample(1000, 2);
  const ms::packed_minifloat a(x, minifloat::e4m3, {rounding::nearest_even, minifloat::overflow::saturate});
  CHECK(a.size() == 1000);
  CHECK(a.bits() == 8);
  CHECK(a.codes().words().size() == 250);
  const ms::packed_minifloat b(x, minifloat::fp_6_9_0);
  CHECK(b.codes().words().size() == 500);
  std::vector<float> rounded(x.size());
  minifloat::quantize(std::span<const float>(x), std::span<float>(rounded), minifloat::fp_6_9_0);
  const auto decoded = b.decode();
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(decoded[i], rounded[i]));
  CHECK(b.get(17) == rounded[17]);
}

TEST_CASE("get and set encode and decode one value in place", "[packed_minifloat]") {
  ms::packed_minifloat a(minifloat::binary16, 40);
  CHECK(a.get(39) == 0.0f);
  a.set(5, 0.1f);
  CHECK(a.get(5) == 0.0999755859375f);
  a.set(6, 0.1f, {rounding::toward_zero});
  CHECK(a.get(6) == 0.0999755859375f);
  a.set(7, 1e9f);
  CHECK(a.get(7) == std::numeric_limits<float>::infinity());
  CHECK(a.get(4) == 0.0f);
  CHECK(a.get(8) == 0.0f);
  CHECK_THROWS_AS(a.set(40, 1.0f), std::out_of_range);
  CHECK_THROWS_AS(a.get(40), std::out_of_range);
}

TEST_CASE("with the sign omitted codes take E + M bits; negatives are rejected, -0 becomes +0", "[packed_minifloat]") {
  auto x = sample(777, 3);
  for (auto& v : x) v = std::fabs(v);
  x[0] = -0.0f;
  x[1] = -std::numeric_limits<float>::quiet_NaN();
  const ms::packed_minifloat a(x, minifloat::e5m2, {}, ms::sign_storage::omitted);
  CHECK(a.bits() == 7);
  CHECK(a.codes().words().size() == ms::packed_words(777, 7));
  const auto d = a.decode();
  CHECK(std::bit_cast<std::uint32_t>(d[0]) == 0u);
  CHECK(std::isnan(d[1]));
  std::vector<float> rounded(x.size());
  minifloat::quantize(std::span<const float>(x), std::span<float>(rounded), minifloat::e5m2);
  for (std::size_t i = 2; i < x.size(); ++i) REQUIRE(same(d[i], rounded[i]));
  std::vector<std::uint32_t> words(ms::packed_words(3, 7));
  CHECK_THROWS_WITH(ms::encode_packed(std::vector<float>{1.0f, -2.0f, 3.0f}, words, minifloat::e5m2, {},
                                      ms::sign_storage::omitted),
                    Catch::Contains("element 1"));
}

TEST_CASE("values without a code and wrong sizes are errors", "[packed_minifloat]") {
  std::vector<std::uint32_t> words(4);
  CHECK_THROWS_AS(ms::encode_packed(std::vector<float>{std::numeric_limits<float>::quiet_NaN()}, words,
                                    minifloat::fp_4_3_4),
                  std::domain_error);
  CHECK_THROWS_AS(ms::encode_packed(std::vector<float>(17, 1.0f), words, minifloat::bfloat16), std::invalid_argument);
  std::vector<float> out(17);
  CHECK_THROWS_AS(ms::decode_packed(words, out, minifloat::bfloat16), std::invalid_argument);
  CHECK_THROWS_AS(ms::packed_minifloat(format{9, 3, 255}, 4), std::invalid_argument);  // wider than float
  ms::packed_minifloat a(minifloat::bfloat16, 4);
  CHECK_THROWS_AS(a.assign(std::vector<float>(5)), std::invalid_argument);
}
