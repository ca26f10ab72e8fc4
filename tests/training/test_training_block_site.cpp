// Block formats (block.hpp) as precision candidates of a rounding site: the site rounds through
// quantize_blocks, counts what it saw for promotion, tells callers where a tensor may be cut,
// and counts the scales in the footprint.
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <catch2/catch.hpp>

#include <minifloat/training/training.hpp>

namespace mf = minifloat;
namespace mt = minifloat::training;

namespace {
std::vector<float> values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(gen);
  return x;
}
bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }
}  // namespace

TEST_CASE("a block-scaled level rounds through quantize_blocks and counts its saturations", "[training][block]") {
  mt::site s("fc1.Y", mt::role::activation, 1000, mt::format_pair::blocks(mf::mxfp8_e4m3, mf::mxfp4));
  s.set_level(mt::precision::low);
  s.begin_step(3);
  REQUIRE(s.current_block() == mf::mxfp4);
  std::vector<float> x = values(1000, 1), want(1000);
  mf::block_stats expected;
  mf::quantize_blocks(x, want, mf::mxfp4, {.seed = s.step_seed()}, {}, expected);
  s.apply(x);
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same_bits(x[i], want[i]));
  CHECK(s.step_stats() == expected.elements);
  CHECK(s.step_stats().overflows > 0);  // the floor rule saturates some block maxima of MXFP4
  CHECK(s.block_step_stats().blocks == 32);
  CHECK(s.bits_per_element() == 4);
  CHECK(s.storage_bits() == 1000 * 4 + 32 * 8);
  CHECK(s.split_unit() == 32);
  s.set_level(mt::precision::high);
  CHECK(s.current_block() == mf::mxfp8_e4m3);
  CHECK(s.bits_per_element() == 8);
  s.set_formats(mt::format_pair::blocks(mf::nvfp4, mf::nvfp4));
  CHECK(s.split_unit() == 0);  // NVFP4's per-tensor scale needs the whole tensor
  s.set_enabled(false);
  CHECK(s.split_unit() == 1);
  CHECK_THROWS_WITH(s.set_formats(mt::format_pair::blocks(mf::block_format{mf::e2m1, 0}, mf::mxfp4)),
                    Catch::Contains("block_size"));
}

TEST_CASE("a block site cut at whole blocks gives the result of one call, stochastic rounding included",
          "[training][block]") {
  mt::site s("fc1.GY", mt::role::activation_gradient, 4096, mt::format_pair::blocks(mf::mxfp8_e5m2, mf::mxfp8_e5m2));
  s.set_mode(mf::rounding::stochastic);
  s.begin_step(7);
  const std::vector<float> x = values(4096, 2);
  std::vector<float> whole = x, parts = x;
  s.apply_uncounted(whole);
  mf::rounding_stats a, b;
  const std::size_t cut = 3 * s.split_unit() * 11;
  s.apply(std::span(parts).first(cut), 0, a);
  s.apply(std::span(parts).subspan(cut), cut, b);
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same_bits(whole[i], parts[i]));
  a += b;
  CHECK(a.values == 4096);
}

TEST_CASE("the footprint counts block scales", "[training][block]") {
  std::vector<mt::site> sites;
  sites.emplace_back("a", mt::role::activation, 64, mt::format_pair::blocks(mf::mxfp8_e4m3, mf::mxfp4));
  sites.emplace_back("b", mt::role::weight, 32, mt::format_pair::blocks(mf::nvfp4, mf::nvfp4));
  const mt::footprint f = mt::measure_footprint(sites);
  CHECK(f.total_bits == 64 * 8 + 2 * 8 + 32 * 4 + 2 * 8 + 32);
}
