// A rounding site applies the core with its role's overflow policy and its current format,
// counts like minifloat::quantize with stats (overflows on the unrounded input), accumulates the
// counts over a step's applications until begin_step(), keys stochastic rounding by
// (site seed, step) chunk-safely, and passes values through untouched when disabled.
#include <catch2/catch.hpp>

#include <minifloat/minifloat.hpp>
#include <minifloat/training/site.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace mt = minifloat::training;
using minifloat::overflow;
using minifloat::rounding;

namespace {

std::vector<float> random_values(std::size_t n, float scale, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

const mt::format_pair forward_pair{minifloat::fp_6_9_0, minifloat::fp_4_3_4};
const mt::format_pair backward_pair{minifloat::fp_6_9_0, minifloat::fp_5_2_0};

}  // namespace

TEST_CASE("forward roles saturate and gradient roles overflow to infinity by default", "[site]") {
  CHECK(mt::site("a", mt::role::activation, 1).on_overflow() == overflow::saturate);
  CHECK(mt::site("w", mt::role::weight, 1).on_overflow() == overflow::saturate);
  CHECK(mt::site("ga", mt::role::activation_gradient, 1).on_overflow() == overflow::infinity);
  CHECK(mt::site("gw", mt::role::weight_gradient, 1).on_overflow() == overflow::infinity);
  CHECK(mt::site("a", mt::role::activation, 1).mode() == rounding::nearest_even);
  CHECK(mt::is_forward(mt::role::weight));
  CHECK_FALSE(mt::is_forward(mt::role::weight_gradient));
}

TEST_CASE("a low activation site saturates at 30 and counts overflows from the unrounded threshold 31", "[site]") {
  mt::site s("act", mt::role::activation, 6, forward_pair);
  s.set_level(mt::precision::low);
  std::vector<float> v = {30.9f, 31.0f, -40.0f, 1.0f, std::numeric_limits<float>::quiet_NaN(), 0.0f};
  s.apply(v);
  CHECK(v[0] == 30.0f);  // rounds down to max: not an overflow
  CHECK(v[1] == 30.0f);  // at the threshold: an overflow, saturated
  CHECK(v[2] == -30.0f);
  CHECK(v[3] == 1.0f);
  CHECK(std::isnan(v[4]));  // NaN stays NaN and counts as an overflow
  CHECK(s.step_stats().values == 6);
  CHECK(s.step_stats().overflows == 3);
  CHECK(s.step_stats().nans == 1);
  CHECK(s.overflow_ratio() == 0.5);
}

TEST_CASE("a low gradient site overflows to infinity above fp(5,2,0)'s threshold 122880", "[site]") {
  mt::site s("grad", mt::role::activation_gradient, 3, backward_pair);
  s.set_level(mt::precision::low);
  std::vector<float> v = {122879.0f, 122880.0f, -1.0e6f};
  s.apply(v);
  CHECK(v[0] == 114688.0f);
  CHECK(v[1] == std::numeric_limits<float>::infinity());
  CHECK(v[2] == -std::numeric_limits<float>::infinity());
  CHECK(s.step_stats().overflows == 2);
}

TEST_CASE("apply equals minifloat::quantize with the site's options, bits and counts", "[site]") {
  for (auto kind : {mt::role::activation, mt::role::weight, mt::role::activation_gradient, mt::role::weight_gradient}) {
    for (auto level : {mt::precision::high, mt::precision::low}) {
      for (auto mode : {rounding::nearest_even, rounding::nearest_away, rounding::stochastic}) {
        mt::site s("t", kind, 1000, mt::is_forward(kind) ? forward_pair : backward_pair, 42);
        s.set_level(level);
        s.set_mode(mode);
        s.begin_step(3);
        const auto input = random_values(1000, 40.0f, 5);
        auto got = input;
        s.apply(got);

        auto want = input;
        minifloat::rounding_stats st;
        minifloat::quantize(std::span<float>(want), s.current_format(), s.options(), st);
        CHECK(same_bits(got, want));
        CHECK(s.step_stats() == st);
        CHECK(s.options().on_overflow == mt::default_overflow(kind));
        CHECK(s.options().mode == mode);
      }
    }
  }
}

TEST_CASE("nearest_away reproduces the reference code's ties, nearest_even is the default", "[site]") {
  mt::site s("a", mt::role::activation, 1, forward_pair);
  s.set_level(mt::precision::low);
  std::vector<float> tie = {1.0625f};  // halfway between 1 and 1.125 in fp(4,3,4)
  s.apply(tie);
  CHECK(tie[0] == 1.0f);
  s.set_mode(rounding::nearest_away);
  tie = {1.0625f};
  s.apply(tie);
  CHECK(tie[0] == 1.125f);
}

TEST_CASE("stats accumulate over a step's applications and reset at begin_step", "[site]") {
  mt::site s("a", mt::role::activation, 4, forward_pair);
  s.set_level(mt::precision::low);
  std::vector<float> a = {100.0f, 1.0f};
  std::vector<float> b = {2.0f, 3.0f};
  s.apply(a);
  s.apply(b, 2);
  CHECK(s.step_stats().values == 4);
  CHECK(s.step_stats().overflows == 1);
  CHECK(s.overflow_ratio() == 0.25);
  s.begin_step(1);
  CHECK(s.step_stats() == minifloat::rounding_stats{});
  CHECK(s.step() == 1);

  minifloat::rounding_stats local;
  std::vector<float> c = {500.0f};
  s.apply(c, 0, local);  // counted into the caller's stats only
  CHECK(local.overflows == 1);
  CHECK(s.step_stats().values == 0);
  s.add_stats(local);
  CHECK(s.step_stats().overflows == 1);

  std::vector<float> d = {500.0f};
  s.apply_uncounted(d);
  CHECK(d[0] == 30.0f);
  CHECK(s.step_stats().values == 1);
}

TEST_CASE("stochastic rounding is keyed by (seed, step) and chunk-safe through the offset", "[site]") {
  mt::site s("a", mt::role::activation, 4096, forward_pair, 9);
  s.set_level(mt::precision::low);
  s.set_mode(rounding::stochastic);
  const auto input = random_values(4096, 3.0f, 11);

  s.begin_step(5);
  auto whole = input;
  s.apply(whole);
  const auto whole_stats = s.step_stats();

  s.begin_step(5);
  auto chunked = input;
  std::span<float> all(chunked);
  s.apply(all.subspan(0, 1000), 0);
  s.apply(all.subspan(1000, 3000), 1000);
  s.apply(all.subspan(4000), 4000);
  CHECK(same_bits(whole, chunked));
  CHECK(s.step_stats() == whole_stats);

  s.begin_step(6);
  auto next_step = input;
  s.apply(next_step);
  CHECK_FALSE(same_bits(whole, next_step));

  mt::site other("b", mt::role::activation, 4096, forward_pair, 10);
  other.set_level(mt::precision::low);
  other.set_mode(rounding::stochastic);
  other.begin_step(5);
  auto other_seed = input;
  other.apply(other_seed);
  CHECK_FALSE(same_bits(whole, other_seed));

  CHECK(s.step_seed() == minifloat::counter_rng{9}.bits64(6));
}

TEST_CASE("a disabled site passes values through, counts nothing and costs 32 bits", "[site]") {
  mt::site s("a", mt::role::activation, 3, forward_pair);
  s.set_level(mt::precision::low);
  CHECK(s.bits_per_element() == 8);
  CHECK(s.is_low());
  s.set_enabled(false);
  std::vector<float> v = {1000.0f, 0.1f, -3.3f};
  const auto before = v;
  s.apply(v);
  CHECK(same_bits(v, before));
  CHECK(s.step_stats().values == 0);
  CHECK(s.bits_per_element() == 32);
  CHECK_FALSE(s.is_low());
}

TEST_CASE("bits per element follow the format in force", "[site]") {
  mt::site s("a", mt::role::activation, 3, forward_pair);
  CHECK(s.bits_per_element() == 16);
  s.set_level(mt::precision::low);
  CHECK(s.bits_per_element() == 8);
  s.set_formats({minifloat::binary16, minifloat::e4m3});
  CHECK(s.current_format() == minifloat::e4m3);
  CHECK(s.bits_per_element() == 8);
}

TEST_CASE("a format that float cannot hold is rejected when set", "[site]") {
  mt::site s("a", mt::role::activation, 3, forward_pair);
  CHECK_THROWS_AS(s.set_formats({minifloat::ieee_format(11, 52), minifloat::fp_4_3_4}), std::invalid_argument);
}
