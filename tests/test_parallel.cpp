// The parallel forms of the bulk kernels (parallel.hpp, bitpack.hpp) against the one-thread
// calls, bit for bit, for several thread counts and span lengths around the chunk boundaries.
#include <catch2/catch.hpp>

#include <minifloat/minifloat.hpp>
#include <minifloat/storage/bitpack.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include "support.hpp"

namespace mf = minifloat;
namespace ms = minifloat::storage;
using test_support::to_bits;

namespace {

constexpr bool kSanitize = test_support::sanitize;
const unsigned kThreads[] = {0, 1, 2, 3, 5};

std::vector<std::size_t> lengths() {
  const std::size_t c = mf::parallel_min_chunk;
  if (kSanitize) return {0, 1, 2 * c + 5};
  return {0, 1, 1000, c - 1, 2 * c, 2 * c + 5, 3 * c + mf::parallel_grain + 17, 5 * c + 3};
}

/// N(0,1)·2^U[-40,40] with NaN, Inf and subnormals sprinkled in.
std::vector<float> values(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::vector<float> v(n);
  for (auto& x : v) {
    x = std::ldexp(normal(rng), exponent(rng));
    switch (rng() % 500) {
      case 0: x = std::numeric_limits<float>::quiet_NaN(); break;
      case 1: x = -std::numeric_limits<float>::infinity(); break;
      case 2: x = std::numeric_limits<float>::denorm_min() * 77.0f; break;
      default: break;
    }
  }
  return v;
}

std::size_t differences(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += to_bits(a[i]) != to_bits(b[i]);
  return d;
}

}  // namespace

TEST_CASE("parallel quantize gives the one-thread bits and counts for every thread count", "[parallel][quantize]") {
  std::mt19937_64 rng(31);
  for (const std::size_t n : lengths()) {
    const std::vector<float> in = values(n, rng);
    for (const auto mode : {mf::rounding::nearest_even, mf::rounding::nearest_away, mf::rounding::toward_zero,
                            mf::rounding::stochastic, mf::rounding::to_odd}) {
      const mf::rounder<float> r(mf::e4m3, {mode, mf::overflow::infinity, 0, 99, 12345});
      std::vector<float> one(n), counted_one(n);
      mf::rounding_stats st_one;
      mf::quantize(std::span<const float>(in), std::span<float>(one), r);
      mf::quantize(std::span<const float>(in), std::span<float>(counted_one), r, st_one);
      for (const unsigned t : kThreads) {
        INFO("n " << n << " mode " << static_cast<int>(mode) << " threads " << t);
        std::vector<float> many(n, 7.0f), counted(n, 7.0f);
        mf::rounding_stats st{1, 0, 0, 0, 0};  // added to, as the one-thread overload does
        mf::quantize(std::span<const float>(in), std::span<float>(many), r, mf::threads{t});
        mf::quantize(std::span<const float>(in), std::span<float>(counted), r, st, mf::threads{t});
        CHECK(differences(one, many) == 0);
        CHECK(differences(one, counted) == 0);
        st.values -= 1;
        CHECK(st == st_one);
      }
    }
  }
}

TEST_CASE("parallel encode and decode give the one-thread codes and values", "[parallel][encode]") {
  std::mt19937_64 rng(32);
  for (const std::size_t n : lengths()) {
    const std::vector<float> in = values(n, rng);
    const mf::rounder<float> r(mf::binary16, {mf::rounding::stochastic, mf::overflow::infinity, 0, 5, 0});
    std::vector<std::uint16_t> one(n);
    mf::encode(std::span<const float>(in), std::span<std::uint16_t>(one), r);
    std::vector<float> back_one(n);
    mf::decode(std::span<const std::uint16_t>(one), std::span<float>(back_one), mf::binary16);
    for (const unsigned t : kThreads) {
      INFO("n " << n << " threads " << t);
      std::vector<std::uint16_t> many(n);
      mf::encode(std::span<const float>(in), std::span<std::uint16_t>(many), r, mf::threads{t});
      CHECK(many == one);
      std::vector<float> back(n);
      mf::decode(std::span<const std::uint16_t>(many), std::span<float>(back), mf::binary16, mf::threads{t});
      CHECK(differences(back, back_one) == 0);
    }
  }
}

TEST_CASE("parallel try_encode reports the first value without a code, whichever chunk holds it",
          "[parallel][encode][errors]") {
  const std::size_t n = kSanitize ? 3 * mf::parallel_min_chunk : 6 * mf::parallel_min_chunk;
  const mf::format finite{4, 3, 7, true, mf::specials::all_finite};
  const mf::rounder<float> r(finite, {mf::rounding::nearest_even, mf::overflow::saturate});
  for (const std::size_t bad_late : {n - 1, n / 2 + 3}) {
    for (const std::size_t bad_early : {std::size_t{5}, n / 3, n}) {  // n: only the late one
      std::vector<float> in(n, 1.5f);
      in[bad_late] = std::numeric_limits<float>::quiet_NaN();
      if (bad_early < n) in[bad_early] = -std::numeric_limits<float>::quiet_NaN();
      const std::size_t want = std::min(bad_early, bad_late);
      std::vector<std::uint8_t> one(n), many(n);
      REQUIRE(mf::try_encode(std::span<const float>(in), std::span<std::uint8_t>(one), r) == want);
      for (const unsigned t : kThreads) {
        INFO("threads " << t << " first bad " << want);
        CHECK(mf::try_encode(std::span<const float>(in), std::span<std::uint8_t>(many), r, mf::threads{t}) == want);
        CHECK(std::equal(one.begin(), one.begin() + static_cast<std::ptrdiff_t>(want), many.begin()));
        CHECK_THROWS_AS(mf::encode(std::span<const float>(in), std::span<std::uint8_t>(many), r, mf::threads{t}),
                        std::domain_error);
      }
    }
  }
}

TEST_CASE("parallel pack and unpack give the one-thread words and fields for every width", "[parallel][bitpack]") {
  std::mt19937_64 rng(33);
  for (const std::size_t n : lengths()) {
    for (const int bits : {1, 3, 8, 13, 31, 32}) {
      std::vector<std::uint32_t> v(n);
      for (auto& x : v) x = static_cast<std::uint32_t>(rng()) & ms::field_mask(bits);
      std::vector<std::uint32_t> one(ms::packed_words(n, bits) + 2, 0xdeadbeef);
      ms::pack(v, bits, one);
      for (const unsigned t : kThreads) {
        INFO("n " << n << " bits " << bits << " threads " << t);
        std::vector<std::uint32_t> many(one.size(), 0xdeadbeef);
        ms::pack(v, bits, many, mf::threads{t});
        CHECK(many == one);
        std::vector<std::uint32_t> back(n + 1, 0xabcdef01);
        ms::unpack(std::span<const std::uint32_t>(many), bits, n, back, mf::threads{t});
        CHECK(std::equal(v.begin(), v.end(), back.begin()));
        CHECK(back[n] == 0xabcdef01);
      }
    }
  }
}

TEST_CASE("parallel kernels check sizes before starting any thread", "[parallel][errors]") {
  std::vector<float> in(10), out(9);
  const mf::rounder<float> r(mf::binary16);
  CHECK_THROWS_AS(mf::quantize(std::span<const float>(in), std::span<float>(out), r, mf::threads{2}),
                  std::invalid_argument);
  std::vector<std::uint32_t> v(100), words(3);
  CHECK_THROWS_AS(ms::pack(v, 8, words, mf::threads{2}), std::invalid_argument);
}
