// Packed block tensors (storage/packed_block.hpp): element codes bit-packed at 4, 6 and 8 bits
// with their scales decode bit for bit to what quantize_blocks gives, and take the byte counts
// the formats promise (MXFP4: 4.25 bits per value).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include <minifloat/storage/packed_block.hpp>
#include <minifloat/storage/packed_minifloat.hpp>

namespace mf = minifloat;
namespace ms = minifloat::storage;

namespace {

std::vector<float> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<double> wide(-20, 20);
  std::vector<float> x(n);
  for (auto& v : x) v = gen() % 3 == 0 ? static_cast<float>(std::exp2(wide(gen))) * (gen() % 2 ? 1.f : -1.f) : normal(gen);
  return x;
}

bool same_bits(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

const mf::block_format all_formats[] = {mf::mxfp8_e4m3, mf::mxfp8_e5m2, mf::mxfp6_e3m2, mf::mxfp6_e2m3,
                                        mf::mxfp4,      mf::mxint8,     mf::nvfp4};

}  // namespace

TEST_CASE("packed block tensors decode to quantize_blocks' values bit for bit", "[storage][block]") {
  for (const auto& f : all_formats)
    for (const std::size_t n : {std::size_t{1}, std::size_t{33}, std::size_t{1000}, std::size_t{20011}})
      for (const auto mode : {mf::rounding::nearest_even, mf::rounding::stochastic}) {
        INFO("element " << mf::to_string(f.element) << " n " << n << " mode " << int(mode));
        std::vector<float> x = random_values(n, n);
        if (n > 40) x[35] = std::numeric_limits<float>::quiet_NaN();
        const mf::block_options o{.mode = mode, .seed = 77, .index = 5};
        mf::block_stats packed_stats, direct_stats;
        const ms::packed_block_tensor t(x, f, o, {}, &packed_stats);
        std::vector<float> want(n);
        mf::quantize_blocks(x, want, f, o, {}, direct_stats);
        const std::vector<float> got = t.decode();
        for (std::size_t i = 0; i < n; ++i) {
          INFO("i = " << i);
          REQUIRE(same_bits(got[i], want[i]));
        }
        CHECK(packed_stats == direct_stats);
        CHECK(t.elements().bits() == f.element.bit_width());
        // the packed fields are the byte codes of encode_blocks
        std::vector<std::uint8_t> codes(n), scales(mf::block_count(n, f, {}));
        mf::encode_blocks(x, codes, scales, f, o);
        for (std::size_t i = 0; i < n; ++i) REQUIRE(t.elements().get(i) == codes[i]);
        CHECK(std::vector<std::uint8_t>(t.scales().begin(), t.scales().end()) == scales);
      }
}

TEST_CASE("packed block tensors in 2-D layouts, both axes", "[storage][block]") {
  for (const auto& f : {mf::mxfp4, mf::mxfp6_e2m3, mf::mxfp8_e4m3})
    for (const int axis : {0, 1}) {
      const std::size_t rows = 45, cols = 70;
      const std::vector<float> x = random_values(rows * cols, 3);
      const mf::block_layout l{rows, cols, axis};
      const ms::packed_block_tensor t(x, f, {}, l);
      std::vector<float> want(x.size());
      mf::quantize_blocks(x, want, f, {}, l);
      const std::vector<float> got = t.decode();
      for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same_bits(got[i], want[i]));
    }
}

TEST_CASE("byte counts: MXFP4 4.25 bits per value, MXFP6 6.25, MXFP8 8.25, NVFP4 4.5 plus the fp32 scale",
          "[storage][block]") {
  const std::size_t n = 32 * 1024;
  CHECK(ms::packed_block_tensor::bytes_for(n, mf::mxfp4) * 8 == n * 425 / 100);
  CHECK(ms::packed_block_tensor::bytes_for(n, mf::mxfp6_e3m2) * 8 == n * 625 / 100);
  CHECK(ms::packed_block_tensor::bytes_for(n, mf::mxfp8_e5m2) * 8 == n * 825 / 100);
  CHECK(ms::packed_block_tensor::bytes_for(n, mf::mxint8) * 8 == n * 825 / 100);
  CHECK(ms::packed_block_tensor::bytes_for(n, mf::nvfp4) == n * 45 / 80 + 4);
  const std::vector<float> x = random_values(n, 1);
  const ms::packed_block_tensor t(x, mf::mxfp4);
  CHECK(t.bytes() == n / 2 + n / 32);
  CHECK(t.elements().words().size() * 4 + t.scales().size() == t.bytes());
  // odd sizes round the packed words up to whole 32-bit words
  CHECK(ms::packed_block_tensor::bytes_for(33, mf::mxfp4) == 5 * 4 + 2);  // 132 bits: 5 words
}

TEST_CASE("raw parts are adopted only when they fit", "[storage][block]") {
  const std::vector<float> x = random_values(100, 9);
  const ms::packed_block_tensor t(x, mf::mxfp6_e2m3);
  const auto words = t.elements().words();
  const auto copy = ms::packed_block_tensor::from_parts(mf::mxfp6_e2m3, {}, 100, words, t.scales());
  CHECK(copy == t);
  CHECK(copy.decode() == t.decode());
  CHECK_THROWS_WITH(ms::packed_block_tensor::from_parts(mf::mxfp6_e2m3, {}, 100, words.first(words.size() - 1), t.scales()),
                    Catch::Contains("words"));
  CHECK_THROWS_WITH(ms::packed_block_tensor::from_parts(mf::mxfp6_e2m3, {}, 100, words, t.scales().first(3)),
                    Catch::Contains("scales has 3 codes"));
  CHECK_THROWS_WITH(ms::packed_block_tensor(x, mf::mxfp4, {}, {7, 7, 1}), Catch::Contains("does not hold"));
  std::vector<float> wrong(99);
  CHECK_THROWS(t.decode(wrong));
}

TEST_CASE("the 4- and 6-bit element formats and the fnuz formats pack at their own width", "[storage][block]") {
  const std::vector<float> x = random_values(333, 12);
  for (const mf::format f : {mf::e2m1, mf::e2m3, mf::e3m2, mf::e4m3fnuz, mf::e5m2fnuz}) {
    INFO(mf::to_string(f));
    const mf::rounding_options o{mf::rounding::nearest_even, mf::overflow::saturate};
    const ms::packed_minifloat p(x, f, o);
    CHECK(p.bits() == f.bit_width());
    std::vector<float> want(x.size());
    mf::quantize(std::span<const float>(x), std::span<float>(want), f, o);
    const std::vector<float> got = p.decode();
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same_bits(got[i], want[i]));
  }
}

TEST_CASE("codes written straight from registers equal encoding to 32-bit codes and packing them", "[storage][block]") {
  // The constructor writes 4- and 8-bit fields from the block kernel's registers; the two-pass
  // form (encode_blocks into 32-bit codes, then bitpack.hpp's pack) is the reference. Odd
  // lengths, block sizes that put registers off a byte (17, 20), strided blocks (axis 0), NaN
  // and Inf blocks, every mode.
  const mf::block_format formats[] = {mf::mxfp4, mf::nvfp4, mf::mxfp8_e4m3, mf::mxint8, mf::mxfp6_e2m3,
                                      mf::block_format{mf::e2m1, 17}, mf::block_format{mf::e2m1, 20},
                                      mf::block_format{mf::e4m3, 17}, mf::block_format{mf::e2m1, 64}};
  struct shape {
    std::size_t n;
    mf::block_layout layout;
  };
  const shape shapes[] = {{1, {}},        {7, {}},          {15, {}},         {17, {}},         {31, {}},
                          {33, {}},       {531, {}},        {16 * 32 * 3 + 5, {}}, {16 * 64 * 2 + 33, {}},
                          {9 * 70, {9, 70, 1}}, {9 * 70, {9, 70, 0}}, {37 * 5, {37, 5, 0}}};
  for (const auto& f : formats)
    for (const auto& s : shapes)
      for (const auto mode : {mf::rounding::nearest_even, mf::rounding::nearest_away, mf::rounding::toward_zero,
                              mf::rounding::toward_negative, mf::rounding::to_odd, mf::rounding::stochastic}) {
        INFO(mf::to_string(f) << " n " << s.n << " rows " << s.layout.rows << " axis " << s.layout.axis << " mode "
                              << int(mode));
        std::vector<float> x = random_values(s.n, s.n + 3);
        if (s.n > 300) {
          x[70] = std::numeric_limits<float>::quiet_NaN();
          x[290] = -std::numeric_limits<float>::infinity();
        }
        const mf::block_options o{.mode = mode, .seed = 9, .index = 3};
        const ms::packed_block_tensor t(x, f, o, s.layout);
        std::vector<std::uint32_t> codes(s.n);
        std::vector<std::uint8_t> scales(mf::block_count(s.n, f, s.layout));
        const float tensor_scale = mf::encode_blocks<std::uint32_t>(x, codes, scales, f, o, s.layout);
        std::vector<std::uint32_t> words(ms::packed_words(s.n, f.element.bit_width()));
        ms::pack(codes, f.element.bit_width(), words);
        CHECK(std::vector<std::uint32_t>(t.elements().words().begin(), t.elements().words().end()) == words);
        CHECK(std::vector<std::uint8_t>(t.scales().begin(), t.scales().end()) == scales);
        CHECK(t.tensor_scale() == tensor_scale);
      }
}

TEST_CASE("from_parts refuses too many words, a bad NVFP4 tensor scale and a tensor scale on MX formats",
          "[storage][block]") {
  const std::vector<float> x = random_values(100, 10);
  const ms::packed_block_tensor t(x, mf::mxfp6_e2m3);
  std::vector<std::uint32_t> longer(t.elements().words().begin(), t.elements().words().end());
  longer.push_back(0xFFFFFFFFu);
  CHECK_THROWS_WITH(ms::packed_block_tensor::from_parts(mf::mxfp6_e2m3, {}, 100, longer, t.scales()),
                    Catch::Contains("from_parts") && Catch::Contains("words has"));
  const ms::packed_block_tensor n(x, mf::nvfp4);
  const float inf = std::numeric_limits<float>::infinity();
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf, -1.0f, 0.0f}) {
    INFO("tensor scale " << bad);
    CHECK_THROWS_WITH(ms::packed_block_tensor::from_parts(mf::nvfp4, {}, 100, n.elements().words(), n.scales(), bad),
                      Catch::Contains("tensor_scale"));
  }
  CHECK(ms::packed_block_tensor::from_parts(mf::nvfp4, {}, 100, n.elements().words(), n.scales(), n.tensor_scale()) == n);
  // MX formats have no tensor scale: from_parts refuses one, the constructor ignores options.tensor_scale
  CHECK_THROWS_WITH(ms::packed_block_tensor::from_parts(mf::mxfp6_e2m3, {}, 100, t.elements().words(), t.scales(), 2.0f),
                    Catch::Contains("no per-tensor scale"));
  const ms::packed_block_tensor given(x, mf::mxfp6_e2m3, {.tensor_scale = 3.0f});
  CHECK(given.tensor_scale() == 1.0f);
  CHECK(given == t);
}

TEST_CASE("a layout whose rows x cols wraps to the size is refused by the constructor and from_parts",
          "[storage][block]") {
  const std::vector<float> x(16, 1.5f);
  const mf::block_layout wraps{(std::size_t{1} << 62) + 4, 4, 1};
  CHECK_THROWS_WITH(ms::packed_block_tensor(x, mf::mxfp8_e4m3, {}, wraps), Catch::Contains("does not hold 16 values"));
  const ms::packed_block_tensor t(x, mf::mxfp8_e4m3);
  const std::vector<std::uint8_t> scales(4, 127);
  CHECK_THROWS_WITH(ms::packed_block_tensor::from_parts(mf::mxfp8_e4m3, wraps, 16, t.elements().words(), scales),
                    Catch::Contains("does not hold"));
  CHECK_THROWS_WITH(ms::packed_block_tensor::bytes_for(16, mf::mxfp8_e4m3, wraps), Catch::Contains("does not hold"));
  // no values in 2^62 empty rows: an empty tensor, at once
  const ms::packed_block_tensor empty(std::span<const float>{}, mf::mxfp4, {}, {std::size_t{1} << 62, 0, 1});
  CHECK(empty.size() == 0);
  CHECK(empty.decode().empty());
}
