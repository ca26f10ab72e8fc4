// minifloat/compat/qtorch.hpp: QPyTorch's float_quantize, pinned by examples worked by hand from
// its CPU kernel (quant_cpu.cpp float_quantize, round_bitwise; bit_helper.cpp clip_exponent).
#include <catch2/catch.hpp>

#include <minifloat/compat/qtorch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mc = minifloat::compat;

namespace {
std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
float nearest(float x, int e, int m) { return mc::qtorch_quantizer(e, m, false)(x, 0); }
}  // namespace

TEST_CASE("qtorch nearest rounds ties away from zero in the value's own binade", "[qtorch]") {
  CHECK(nearest(1.125f, 5, 2) == 1.25f);   // tie between 1.0 and 1.25: away (nearest-even would give 1.0)
  CHECK(nearest(-1.125f, 5, 2) == -1.25f);
  CHECK(nearest(1.0625f, 5, 2) == 1.0f);   // below the tie
  CHECK(nearest(1.875f, 5, 2) == 2.0f);    // carry into the next binade
  CHECK(nearest(0.1f, 8, 7) == 0.10009765625f);
}

TEST_CASE("qtorch's top binade is finite and everything above it saturates to +-max, Inf and NaN too", "[qtorch]") {
  const float max = 114688.0f;  // 2^(2^4) * 1.75 for exp = 5, man = 2
  CHECK(nearest(114688.0f, 5, 2) == max);
  CHECK(nearest(1e10f, 5, 2) == max);
  CHECK(nearest(-1e10f, 5, 2) == -max);
  CHECK(nearest(std::numeric_limits<float>::infinity(), 5, 2) == max);
  CHECK(nearest(-std::numeric_limits<float>::infinity(), 5, 2) == -max);
  CHECK(nearest(std::numeric_limits<float>::quiet_NaN(), 5, 2) == max);
  CHECK(nearest(131071.0f, 5, 2) == max);  // rounds to 2^17, whose exponent field is past the top: clipped
  // exp = 8 never clips: past FLT_MAX the carry gives Inf, as QPyTorch's bit addition does.
  CHECK(std::isinf(nearest(std::numeric_limits<float>::max(), 8, 7)));
  CHECK(std::isinf(nearest(std::numeric_limits<float>::infinity(), 8, 7)));
  CHECK(std::isnan(nearest(std::numeric_limits<float>::quiet_NaN(), 8, 7)));
}

TEST_CASE("qtorch's subnormal path: an add of 2^min_exp, rounding, and zero results that are +0", "[qtorch]") {
  // exp = 5: min_exp = -14, subnormal spacing 2^-16 with man = 2.
  CHECK(nearest(std::ldexp(1.5f, -16), 5, 2) == std::ldexp(1.0f, -15));  // tie: away
  CHECK(nearest(-std::ldexp(1.0f, -17), 5, 2) == -std::ldexp(1.0f, -16));
  CHECK(bits(nearest(std::ldexp(1.0f, -18), 5, 2)) == 0u);
  CHECK(bits(nearest(-std::ldexp(1.0f, -18), 5, 2)) == 0u);  // +0: the sign is lost
  CHECK(bits(nearest(-0.0f, 5, 2)) == 0u);
  // Double rounding: 2^-17 - 2^-40 first becomes the tie 2^-14 + 2^-17 in float, which then goes away.
  CHECK(nearest(std::ldexp(1.0f, -17) - std::ldexp(1.0f, -40), 5, 2) == std::ldexp(1.0f, -16));
  // exp = 8, man = 23 keeps every float, subnormals included.
  CHECK(nearest(std::numeric_limits<float>::denorm_min(), 8, 23) == std::numeric_limits<float>::denorm_min());
  CHECK(nearest(0.1f, 8, 23) == 0.1f);
}

TEST_CASE("qtorch stochastic rounding is unbiased and reproducible per (seed, index)", "[qtorch]") {
  const mc::qtorch_quantizer q(5, 2, true, 7);
  const float x = 1.0f + 0.25f * 0.3f;  // 30 % of a step above 1.0
  int up = 0;
  constexpr int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float r = q(x, static_cast<std::uint64_t>(i));
    REQUIRE((r == 1.0f || r == 1.25f));
    up += r == 1.25f;
    REQUIRE(r == mc::qtorch_quantizer(5, 2, true, 7)(x, static_cast<std::uint64_t>(i)));
  }
  CHECK(std::abs(up - 0.3 * n) < 5 * std::sqrt(n * 0.3 * 0.7));
  std::vector<float> in(100, x), out(100), shifted(60);
  q.apply(in, out);
  q.advanced(40).apply(std::span<const float>(in).subspan(40), shifted);
  CHECK(std::equal(shifted.begin(), shifted.end(), out.begin() + 40));
}

TEST_CASE("qtorch formats outside exp 1..8, man 0..23 are rejected naming the field", "[qtorch]") {
  CHECK_THROWS_WITH(mc::qtorch_quantizer(9, 2, false), Catch::Contains("exp = 9"));
  CHECK_THROWS_WITH(mc::qtorch_quantizer(5, 24, false), Catch::Contains("man = 24"));
  CHECK_THROWS_WITH(mc::qtorch_quantizer(5, -1, false), Catch::Contains("man = -1"));
}
