// Extra-mantissa split storage: exhaustive bf16 + 16 and fp16 + 13 over every fp32 bit pattern,
// the general rule (reconstruct = x rounded toward zero to fp(E, M + n, bias)), special values,
// the stochastic split's unbiasedness and un-round recovery, and the layout's validation.
#include <catch2/catch.hpp>

#include <minifloat/minifloat.hpp>
#include <minifloat/storage/split.hpp>

#include "split_oracle.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace ms = minifloat::storage;
using minifloat::format;

namespace {

struct split_words {
  std::vector<std::uint32_t> visible, extra;
  split_words(std::size_t n, const ms::split_layout& l)
      : visible(ms::packed_words(n, l.visible_bits())), extra(ms::packed_words(n, l.extra_bits)) {}
};

std::vector<float> round_trip(const std::vector<float>& x, const ms::split_layout& l, const ms::split_options& o = {}) {
  split_words w(x.size(), l);
  ms::split(x, l, w.visible, w.extra, o);
  std::vector<float> out(x.size());
  ms::reconstruct(w.visible, w.extra, l, out);
  return out;
}

/// x rounded toward zero to the layout's restored format: what reconstruct must return.
std::vector<float> truncated(const std::vector<float>& x, const format& f) {
  std::vector<float> out(x.size());
  minifloat::quantize(std::span<const float>(x), std::span<float>(out), f,
                      {minifloat::rounding::toward_zero, minifloat::overflow::infinity});
  return out;
}

bool same(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) && std::signbit(a) == std::signbit(b);
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

/// Sweeps fp32 bit patterns j * stride (mod 2^32), j < 2^32 / stride, in blocks of 2^20 spread
/// over the hardware threads; check(x, reconstructed, counts) tallies each block into its
/// thread's counts, which are summed. Under the sanitizers a prime stride keeps it short.
template <std::size_t N, class Check>
std::array<std::uint64_t, N> sweep_all_floats(const ms::split_layout& l, Check check) {
  const std::uint64_t stride = MINIFLOAT_TEST_SANITIZE ? 65537 : 1;
  const std::uint64_t count = (std::uint64_t{1} << 32) / stride;
  constexpr std::size_t block = std::size_t{1} << 20;
  const std::uint64_t blocks = (count + block - 1) / block;
  const unsigned threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<std::array<std::uint64_t, N>> counts(threads, std::array<std::uint64_t, N>{});
  auto work = [&](unsigned t) {
    std::vector<float> x(block), out(block);
    split_words w(block, l);
    for (std::uint64_t b = t; b < blocks; b += threads) {
      const std::uint64_t first = b * block;
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(block, count - first));
      for (std::size_t i = 0; i < n; ++i) x[i] = std::bit_cast<float>(static_cast<std::uint32_t>((first + i) * stride));
      const std::span<const float> in(x.data(), n);
      ms::split(in, l, w.visible, w.extra);
      ms::reconstruct(w.visible, w.extra, l, std::span<float>(out.data(), n));
      check(in, std::span<const float>(out.data(), n), counts[t]);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  std::array<std::uint64_t, N> total{};
  for (const auto& c : counts)
    for (std::size_t i = 0; i < N; ++i) total[i] += c[i];
  return total;
}

}  // namespace

// The per-element checks of the sweeps stay branch-free on the bits, so they cost little next to
// splitting and restoring.
constexpr bool is_nan_bits(std::uint32_t a) { return a > 0x7f800000U; }

TEST_CASE("bf16 + 16 truncating split restores every fp32 bit for bit (NaN: a NaN of the same sign)",
          "[split][exhaustive]") {
  const ms::split_layout l{minifloat::bfloat16, 16};
  CHECK(l.restored() == minifloat::binary32);
  // counts: wrong results, NaN inputs
  const auto c = sweep_all_floats<2>(l, [](std::span<const float> x, std::span<const float> r, auto& counts) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint32_t xb = std::bit_cast<std::uint32_t>(x[i]), rb = std::bit_cast<std::uint32_t>(r[i]);
      const bool nan = is_nan_bits(xb & 0x7fffffffU);
      counts[0] += nan ? !is_nan_bits(rb & 0x7fffffffU) || (rb >> 31) != (xb >> 31) : rb != xb;
      counts[1] += nan;
    }
  });
  CHECK(c[0] == 0);
  if (!MINIFLOAT_TEST_SANITIZE) CHECK(c[1] == 2 * ((std::uint64_t{1} << 23) - 1));
}

TEST_CASE("fp16 + 13 truncating split restores every fp32 in fp16's normal range and truncates the rest",
          "[split][exhaustive]") {
  const ms::split_layout l{minifloat::binary16, 13};
  const format restored = l.restored();  // fp(5, 23, bias 15); its largest value is the largest pair
  CHECK(minifloat::decode((std::uint64_t{0x7bff} << 13) | 0x1fff, restored) == 65535.99609375f);
  constexpr std::uint32_t min_normal = 0x38800000U;  // 2^-14
  constexpr std::uint32_t overflow = 0x47800000U;    // 65536
  // counts: results other than x rounded toward zero to R, lossy results in fp16's normal range,
  // lossy results below it
  const auto c = sweep_all_floats<3>(l, [&](std::span<const float> x, std::span<const float> r, auto& counts) {
    thread_local std::vector<float> expected;
    expected.resize(x.size());
    minifloat::quantize(x, std::span<float>(expected), restored,
                        {minifloat::rounding::toward_zero, minifloat::overflow::infinity});
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint32_t xb = std::bit_cast<std::uint32_t>(x[i]), rb = std::bit_cast<std::uint32_t>(r[i]);
      const std::uint32_t a = xb & 0x7fffffffU;
      const bool nan = is_nan_bits(a);
      counts[0] += nan ? !is_nan_bits(rb & 0x7fffffffU) || (rb >> 31) != (xb >> 31)
                       : rb != std::bit_cast<std::uint32_t>(expected[i]);
      counts[1] += (a >= min_normal) & (a < overflow) & (rb != xb);
      counts[2] += (a < min_normal) & (rb != xb);
    }
  });
  CHECK(c[0] == 0);
  CHECK(c[1] == 0);
  CHECK(c[2] > 0);  // the rule's limit is real: fp16's subnormals keep fewer bits
}

TEST_CASE("every core format: reconstruct is x rounded toward zero to fp(E, M + k, bias), h is x truncated",
          "[split]") {
  std::mt19937 gen(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  std::vector<float> x(4099);
  for (auto& v : x) v = std::ldexp(normal(gen), exponent(gen));
  x[0] = 0.0f;
  x[1] = -0.0f;
  const format formats[] = {minifloat::bfloat16, minifloat::binary16, minifloat::e5m2, minifloat::fp_6_9_0,
                            minifloat::fp_4_3_4, minifloat::fp_5_2_0};
  for (const format& f : formats) {
    for (int k : {1, 4, 8, 23 - f.mantissa_bits}) {
      const ms::split_layout l{f, k};
      INFO(minifloat::to_string(f) << " + " << k);
      split_words w(x.size(), l);
      ms::split(x, l, w.visible, w.extra);
      std::vector<float> out(x.size()), h(x.size());
      ms::reconstruct(w.visible, w.extra, l, out);
      const auto expected = truncated(x, l.restored());
      const auto expected_h = truncated(x, f);
      ms::decode_packed(w.visible, h, f);
      for (std::size_t i = 0; i < x.size(); ++i) {
        REQUIRE(same(out[i], expected[i]));
        REQUIRE(same(h[i], expected_h[i]));
      }
    }
  }
}

TEST_CASE("special values: signed zeros, infinities, NaN and overflow saturation", "[split]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{0.0f, -0.0f, inf, -inf, nan, -nan, 1e6f, -1e30f, 65504.0f};
  const auto r = round_trip(x, {minifloat::binary16, 13});
  CHECK(same(r[0], 0.0f));
  CHECK(same(r[1], -0.0f));
  CHECK(r[2] == inf);
  CHECK(r[3] == -inf);
  CHECK(same(r[4], nan));
  CHECK(same(r[5], -nan));
  CHECK(r[6] == 65535.99609375f);  // saturated to the largest pair, not Inf
  CHECK(r[7] == -65535.99609375f);
  CHECK(r[8] == 65504.0f);
  // e4m3 has no Inf and its top code is NaN: finite values saturate below it, Inf becomes NaN.
  const ms::split_layout e4m3_8{minifloat::e4m3, 8};
  const auto e = round_trip({470.0f, 1e9f, inf, 448.0f}, e4m3_8);
  CHECK(e[0] == 470.0f);            // 448 + 22: in the pairs' range (448 + (1 - 2^-8) * 32)
  CHECK(e[1] == 479.875f);          // the largest pair
  CHECK(std::isnan(e[2]));
  CHECK(e[3] == 448.0f);
  // An all_finite format has no code for NaN or Inf.
  std::vector<std::uint32_t> v(1), ex(1);
  CHECK_THROWS_AS(ms::split(std::vector<float>{nan}, {minifloat::fp_4_3_4, 8}, v, ex), std::domain_error);
  CHECK_THROWS_AS(ms::split(std::vector<float>{inf}, {minifloat::fp_4_3_4, 8, ms::split_mode::stochastic}, v, ex),
                  std::domain_error);
}

TEST_CASE("stochastic split: h is unbiased and its flag recovers the truncated value", "[split][stochastic]") {
  // x = 1 + 0.3 ulp of bfloat16: h is 1 or 1 + 2^-7, the latter with probability 0.3.
  const float x = 1.0f + 0.3f * 0x1p-7f;
  const std::size_t n = 200000;
  const std::vector<float> xs(n, x);
  const ms::split_layout l{minifloat::bfloat16, 9, ms::split_mode::stochastic};
  split_words w(n, l);
  ms::split(xs, l, w.visible, w.extra, {123, 0});
  std::vector<float> h(n), r(n);
  ms::decode_packed(w.visible, h, minifloat::bfloat16);
  ms::reconstruct(w.visible, w.extra, l, r);
  const float restored = truncated({x}, l.restored())[0];
  double sum = 0;
  std::size_t up = 0;
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE((h[i] == 1.0f || h[i] == 1.0f + 0x1p-7f));
    const bool away = h[i] != 1.0f;
    up += away;
    REQUIRE(ms::get_field(w.extra, 9, i) >> 8 == static_cast<std::uint32_t>(away));  // the un-round flag
    REQUIRE(r[i] == restored);  // the same restored value either way
    sum += h[i];
  }
  const double p = static_cast<double>(up) / n;
  const double sigma = std::sqrt(0.3 * 0.7 / n);
  CHECK(std::fabs(p - 0.3) < 5 * sigma + 1.0 / 512);  // the draw keeps 32 random bits; x's fraction is not exact
  CHECK(std::fabs(sum / n - x) < 5 * sigma * 0x1p-7);
}

TEST_CASE("stochastic split with k bits restores what a truncating split with k - 1 bits does", "[split][stochastic]") {
  std::mt19937 gen(9);
  std::vector<float> x(1 << 16);
  for (auto& v : x) v = std::bit_cast<float>(static_cast<std::uint32_t>(gen()));
  x[0] = std::numeric_limits<float>::infinity();
  x[1] = -0.0f;
  for (const auto& [f, k] : {std::pair{minifloat::bfloat16, 17}, std::pair{minifloat::bfloat16, 9},
                             std::pair{minifloat::binary16, 14}, std::pair{minifloat::binary16, 5},
                             std::pair{minifloat::e5m2, 12}}) {
    INFO(minifloat::to_string(f) << " + " << k);
    const auto stochastic = round_trip(x, {f, k, ms::split_mode::stochastic}, {77, 1000});
    const auto truncating = round_trip(x, {f, k - 1});
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(stochastic[i], truncating[i]));
  }
  // bf16 + 17 stochastic keeps 16 bits below h: lossless like bf16 + 16.
  const auto r = round_trip(x, {minifloat::bfloat16, 17, ms::split_mode::stochastic}, {5, 0});
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(same(r[i], x[i]));
}

TEST_CASE("stochastic draws depend on (seed, index + i) only: chunked splits give the same words", "[split][stochastic]") {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> x(3000);
  for (auto& v : x) v = u(gen);
  const ms::split_layout l{minifloat::e5m2, 6, ms::split_mode::stochastic};
  split_words whole(x.size(), l), parts(x.size(), l);
  ms::split(x, l, whole.visible, whole.extra, {99, 500});
  for (std::size_t start = 0; start < x.size(); start += 1024) {
    const std::size_t m = std::min<std::size_t>(1024, x.size() - start);
    ms::split(std::span<const float>(x).subspan(start, m), l,
              std::span<std::uint32_t>(parts.visible).subspan(start / 32 * 8),
              std::span<std::uint32_t>(parts.extra).subspan(start / 32 * 6), {99, 500 + start});
  }
  CHECK(whole.visible == parts.visible);
  CHECK(whole.extra == parts.extra);
  split_words other(x.size(), l);
  ms::split(x, l, other.visible, other.extra, {100, 500});
  CHECK(other.visible != whole.visible);
}

TEST_CASE("split layouts are validated: extra bits in 1..32 and within float's significand", "[split]") {
  CHECK(ms::split_layout{minifloat::bfloat16, 16}.problem().empty());
  CHECK(ms::split_layout{minifloat::bfloat16, 17, ms::split_mode::stochastic}.problem().empty());
  CHECK_THROWS_WITH((ms::split_layout{minifloat::bfloat16, 17}.validate()), Catch::Contains("float has 16"));
  CHECK_THROWS_AS((ms::split_layout{minifloat::binary16, 0}.validate()), std::invalid_argument);
  CHECK(ms::split_layout{minifloat::binary16, 1, ms::split_mode::stochastic}.problem().empty());  // the flag only
  std::vector<std::uint32_t> v(1), e(1);
  CHECK_THROWS_AS(ms::split(std::vector<float>(33, 1.0f), {minifloat::bfloat16, 16}, v, e), std::invalid_argument);
  CHECK_THROWS_AS(ms::split(std::vector<float>{1.0f}, {format{9, 3, 255}, 4}, v, e), std::invalid_argument);
}

TEST_CASE("split_tensor: chunked load and store agree with the whole-tensor functions", "[split][split_tensor]") {
  std::mt19937 gen(4);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(5000);
  for (auto& v : x) v = normal(gen);
  const ms::split_layout l{minifloat::binary16, 8};
  ms::split_tensor t(x, l);
  CHECK(t.size() == x.size());
  CHECK(t.visible().bits() == 16);
  CHECK(t.extra().bits() == 8);
  CHECK(t.reconstruct() == round_trip(x, l));
  std::vector<float> part(64);
  t.load(4096, part);
  CHECK(std::equal(part.begin(), part.end(), round_trip(x, l).begin() + 4096));
  CHECK_THROWS_AS(t.load(4095, part), std::out_of_range);
  CHECK_THROWS_AS(t.store(32, std::vector<float>(33)), std::out_of_range);  // ends inside a shared word
  CHECK_THROWS_AS(t.store(4992, std::vector<float>(9)), std::out_of_range);  // past the end
  t.store(4992, std::vector<float>(8, 1.0f));  // the final range may end anywhere
  CHECK(t.reconstruct()[4999] == 1.0f);
  std::vector<float> h(x.size());
  t.visible_values(h);
  CHECK(h == truncated(t.reconstruct(), minifloat::binary16));
}

TEST_CASE("bfloat16 + 8 and + 16 truncating splits (the float-prefix path) store the core's codes and restore its values",
          "[split]") {
  // Values: every special, float's subnormals and extremes, NaN payloads of both signs, random bits.
  std::mt19937 gen(7);
  std::vector<float> x;
  for (std::uint32_t b : {0x00000000U, 0x80000000U, 0x00000001U, 0x807fffffU, 0x00800000U, 0x7f7fffffU, 0xff7fffffU,
                          0x7f800000U, 0xff800000U, 0x7fc00000U, 0xffc00000U, 0x7f800001U, 0xff800001U, 0x7fbfffffU,
                          0xffffffffU, 0x7fc12345U, 0x3f800000U, 0x3f80ffffU, 0xbf80ff00U})
    x.push_back(std::bit_cast<float>(b));
  std::uniform_int_distribution<std::uint32_t> bits;
  while (x.size() < 1037) x.push_back(std::bit_cast<float>(bits(gen)));  // not a multiple of 32: a partial last word
  for (int k : {8, 16}) {
    const ms::split_layout l{minifloat::bfloat16, k};
    const format restored = l.restored();
    INFO("bfloat16 + " << k);
    split_words w(x.size(), l);
    std::fill(w.visible.begin(), w.visible.end(), 0xA5A5A5A5U);  // the padding after the last field must be cleared
    std::fill(w.extra.begin(), w.extra.end(), 0xA5A5A5A5U);
    ms::split(x, l, w.visible, w.extra);
    std::vector<float> out(x.size());
    ms::reconstruct(w.visible, w.extra, l, out);
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO(i << ": " << std::hex << std::bit_cast<std::uint32_t>(x[i]));
      const std::uint64_t code = minifloat::encode(x[i], restored, {minifloat::rounding::toward_zero,
                                                                    minifloat::overflow::infinity});
      REQUIRE(ms::get_field(w.visible, l.visible_bits(), i) == code >> k);
      REQUIRE(ms::get_field(w.extra, k, i) == (code & ((std::uint64_t{1} << k) - 1)));
      REQUIRE(std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(minifloat::decode(code, restored)));
    }
    // The same words as the bit-packing of those codes, padding included.
    std::vector<std::uint32_t> codes_h(x.size()), codes_e(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint64_t code = minifloat::encode(x[i], restored, {minifloat::rounding::toward_zero,
                                                                    minifloat::overflow::infinity});
      codes_h[i] = static_cast<std::uint32_t>(code >> k);
      codes_e[i] = static_cast<std::uint32_t>(code & ((std::uint64_t{1} << k) - 1));
    }
    CHECK(ms::packed_array::from_values(codes_h, l.visible_bits()).words().size() == w.visible.size());
    CHECK(std::ranges::equal(ms::packed_array::from_values(codes_h, l.visible_bits()).words(), w.visible));
    CHECK(std::ranges::equal(ms::packed_array::from_values(codes_e, k).words(), w.extra));
    // Arbitrary words (NaN codes with any payload among them) restore to the core's decode.
    for (auto& v : w.visible) v = bits(gen);
    for (auto& v : w.extra) v = bits(gen);
    ms::reconstruct(w.visible, w.extra, l, out);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint64_t code = (std::uint64_t{ms::get_field(w.visible, 16, i)} << k) | ms::get_field(w.extra, k, i);
      REQUIRE(std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(minifloat::decode(code, restored)));
    }
  }
}

namespace {

using split_oracle::scalar_fields;
using split_oracle::split_specials;

const ms::split_layout byte_field_layouts[] = {
    {minifloat::binary16, 8},
    {minifloat::e4m3, 8},
    {minifloat::e5m2, 8},
    {minifloat::e4m3fnuz, 8},
    {minifloat::e4m3, 16},
    {minifloat::fp_6_9_0, 8},  // all_finite
    {minifloat::bfloat16, 8, ms::split_mode::stochastic},
    {minifloat::binary16, 8, ms::split_mode::stochastic},
    {minifloat::e4m3, 8, ms::split_mode::stochastic},
    {minifloat::e5m2, 16, ms::split_mode::stochastic},
    {minifloat::fp_6_9_0, 8, ms::split_mode::stochastic},
    {minifloat::fp_4_3_4, 8, ms::split_mode::stochastic},  // all_finite, the scaled_binary16 pair form
};

}  // namespace

TEST_CASE("layouts with 8- and 16-bit fields store the scalar core's fields and the bit-packing path's words",
          "[split][byte_fields]") {
  for (const auto& l : byte_field_layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits
                                         << (l.mode == ms::split_mode::stochastic ? " stochastic" : ""));
    REQUIRE(ms::detail::byte_field_layout(l));
    std::mt19937 gen(11);
    const std::vector<float> x = split_specials(l, 1037, gen);  // a partial last word and register
    for (const ms::split_options o : {ms::split_options{}, ms::split_options{77, 12345}, ms::split_options{5, 31}}) {
      INFO("seed " << o.seed << ", index " << o.index);
      split_words fast(x.size(), l), packed(x.size(), l);
      std::fill(fast.visible.begin(), fast.visible.end(), 0xA5A5A5A5U);  // the padding must be cleared
      std::fill(fast.extra.begin(), fast.extra.end(), 0xA5A5A5A5U);
      ms::split(x, l, fast.visible, fast.extra, o);
      ms::detail::split_packed(ms::detail::split_plan(l, o), x, 0, packed.visible, packed.extra);
      CHECK(fast.visible == packed.visible);
      CHECK(fast.extra == packed.extra);
      std::vector<float> out(x.size()), out_packed(x.size());
      ms::reconstruct(fast.visible, fast.extra, l, out);
      ms::detail::reconstruct_packed(fast.visible, fast.extra, l, out_packed);
      for (std::size_t i = 0; i < x.size(); ++i) {
        INFO(i << ": " << std::hex << std::bit_cast<std::uint32_t>(x[i]));
        const auto [h, e] = scalar_fields(l, x[i], o.seed, o.index + i);
        REQUIRE(ms::get_field(fast.visible, l.visible_bits(), i) == h);
        REQUIRE(ms::get_field(fast.extra, l.extra_bits, i) == e);
        REQUIRE(std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(out_packed[i]));
      }
    }
    // Arbitrary words restore as the unpacking path and the scalar decode restore them.
    split_words w(x.size(), l);
    std::uniform_int_distribution<std::uint32_t> bits;
    for (auto& v : w.visible) v = bits(gen);
    for (auto& v : w.extra) v = bits(gen);
    std::vector<float> out(x.size()), out_packed(x.size());
    ms::reconstruct(w.visible, w.extra, l, out);
    ms::detail::reconstruct_packed(w.visible, w.extra, l, out_packed);
    const int kept = l.kept_bits();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::uint32_t h = ms::get_field(w.visible, l.visible_bits(), i), e = ms::get_field(w.extra, l.extra_bits, i);
      const std::uint32_t code = l.mode == ms::split_mode::truncate
                                     ? (h << kept) | e
                                     : ((h - (e >> kept)) << kept) | (e & ((std::uint32_t{1} << kept) - 1));
      REQUIRE(std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(out_packed[i]));
      REQUIRE(std::bit_cast<std::uint32_t>(out[i]) == std::bit_cast<std::uint32_t>(minifloat::decode(code, l.restored())));
    }
  }
}

TEST_CASE("layouts with 8- and 16-bit fields: chunked stores at any 32-aligned offset give the same words, and a "
          "value without a code throws as the packing path does, its block untouched",
          "[split][byte_fields]") {
  for (const auto& l : byte_field_layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits);
    std::mt19937 gen(12);
    std::vector<float> x = split_specials(l, 1500, gen);
    ms::split_tensor whole(x, l, 9);
    ms::split_tensor pieces(std::vector<float>(x.size(), 0.0f), l, 9);
    for (std::size_t start = 0; start < x.size(); start += 96)
      pieces.store(start, std::span<const float>(x).subspan(start, std::min<std::size_t>(96, x.size() - start)));
    CHECK(whole.visible() == pieces.visible());
    CHECK(whole.extra() == pieces.extra());
    if (l.visible.encoding != minifloat::specials::all_finite) continue;
    x[700] = std::numeric_limits<float>::quiet_NaN();
    split_words fast(x.size(), l), packed(x.size(), l);
    std::string fast_error, packed_error;
    try {
      ms::split(x, l, fast.visible, fast.extra);
    } catch (const std::domain_error& e) {
      fast_error = e.what();
    }
    try {
      ms::detail::split_packed(ms::detail::split_plan(l, {}), x, 0, packed.visible, packed.extra);
    } catch (const std::domain_error& e) {
      packed_error = e.what();
    }
    CHECK(fast_error.find("element 700 ") != std::string::npos);
    CHECK(fast_error == packed_error);
    CHECK(fast.visible == packed.visible);  // blocks before the bad value's written, the rest not
    CHECK(fast.extra == packed.extra);
  }
}

TEST_CASE("the reference-core switch (split_options::backend, MINIFLOAT_REFERENCE_CORE) forces pair_form::core, "
          "which stores the pair forms' words and restores their values",
          "[split][byte_fields][backend]") {
  using ms::detail::pair_form;
  const bool forced = minifloat::reference_core_from_environment();
  std::vector<ms::split_layout> layouts(std::begin(byte_field_layouts), std::end(byte_field_layouts));
  layouts.push_back({minifloat::bfloat16, 8});  // the float-prefix layouts' scalar pass
  layouts.push_back({minifloat::bfloat16, 16});
  const ms::split_options reference{77, 12345, minifloat::backend_policy::reference_core};
  const ms::split_options fastest{77, 12345, minifloat::backend_policy::fastest};
  for (const auto& l : layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits
                                         << (l.mode == ms::split_mode::stochastic ? " stochastic" : ""));
    CHECK(ms::detail::split_plan(l, reference).form == pair_form::core);
    CHECK(ms::detail::split_plan(l, fastest).form == ms::detail::pair_form_for(l));
    CHECK(ms::detail::split_plan(l, {77, 12345}).form == (forced ? pair_form::core : ms::detail::pair_form_for(l)));
    std::mt19937 gen(5);
    const std::vector<float> x = split_specials(l, 1037, gen);
    split_words core(x.size(), l), fast(x.size(), l);
    ms::split(x, l, core.visible, core.extra, reference);
    ms::split(x, l, fast.visible, fast.extra, fastest);
    CHECK(core.visible == fast.visible);
    CHECK(core.extra == fast.extra);
    std::vector<float> out_core(x.size()), out_fast(x.size());
    ms::reconstruct(fast.visible, fast.extra, l, out_core, minifloat::backend_policy::reference_core);
    ms::reconstruct(fast.visible, fast.extra, l, out_fast, minifloat::backend_policy::fastest);
    for (std::size_t i = 0; i < x.size(); ++i) {
      INFO(i << ": " << std::hex << std::bit_cast<std::uint32_t>(x[i]));
      REQUIRE(std::bit_cast<std::uint32_t>(out_core[i]) == std::bit_cast<std::uint32_t>(out_fast[i]));
    }
  }
}

TEST_CASE("a split_tensor keeps the backend it was given for every later store and restore, with the same words "
          "under the reference core and the fastest backend",
          "[split][byte_fields][backend]") {
  using ms::detail::pair_form;
  std::vector<ms::split_layout> layouts(std::begin(byte_field_layouts), std::end(byte_field_layouts));
  layouts.push_back({minifloat::bfloat16, 8});
  for (const auto& l : layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits
                                         << (l.mode == ms::split_mode::stochastic ? " stochastic" : ""));
    std::mt19937 gen(11);
    const std::vector<float> x = split_specials(l, 517, gen), y = split_specials(l, 517, gen);
    ms::split_tensor core(x, l, 9, minifloat::backend_policy::reference_core);
    ms::split_tensor fast(x, l, 9, minifloat::backend_policy::fastest);
    CHECK(core.backend() == minifloat::backend_policy::reference_core);
    CHECK(fast.backend() == minifloat::backend_policy::fastest);
    core.assign(y);  // a second generation: the plan rebuilt must keep the policy
    fast.assign(y);
    CHECK(std::ranges::equal(core.visible().words(), fast.visible().words()));
    CHECK(std::ranges::equal(core.extra().words(), fast.extra().words()));
    // a byte-field rewrite runs through the plan's pair form: the core's for the forced tensor
    bool core_form = false, fast_form = false;
    core.rewrite_byte_fields([&](auto w) { core_form = decltype(w)::form == pair_form::core; });
    fast.rewrite_byte_fields([&](auto w) { fast_form = decltype(w)::form == pair_form::core; });
    if (ms::detail::byte_field_layout(l)) {
      CHECK(core_form);
      CHECK(fast_form == (ms::detail::pair_form_for(l) == pair_form::core));
    }
    const ms::split_tensor restored = ms::split_tensor::from_parts(l, 9, core.generation(), core.visible(),
                                                                   core.extra(), minifloat::backend_policy::reference_core);
    CHECK(restored.backend() == minifloat::backend_policy::reference_core);
    const std::vector<float> a = restored.reconstruct(), b = fast.reconstruct();
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO(i);
      REQUIRE(std::bit_cast<std::uint32_t>(a[i]) == std::bit_cast<std::uint32_t>(b[i]));
    }
  }
}

TEST_CASE("binary16-, bfloat16-, e4m3- and e5m2-visible layouts (the float-prefix, rebiased, hardware_binary16 and "
          "scaled_binary16 pair forms) "
          "store the scalar core's fields for floats of every class and restore every pair as the core decodes it",
          "[split][byte_fields]") {
  const ms::split_layout layouts[] = {
      {minifloat::binary16, 8},
      {minifloat::binary16, 8, ms::split_mode::stochastic},
      {minifloat::bfloat16, 8, ms::split_mode::stochastic},
      {minifloat::bfloat16, 16, ms::split_mode::stochastic},
      {minifloat::e4m3, 8},
      {minifloat::e4m3, 8, ms::split_mode::stochastic},
      {minifloat::e4m3, 16},
      {minifloat::e5m2, 8},
      {minifloat::e5m2, 16, ms::split_mode::stochastic},
      {minifloat::fp_4_3_4, 8, ms::split_mode::stochastic},  // all_finite: the papers' formats
      {minifloat::fp_5_2_0, 8},
      {minifloat::fp_6_9_0, 8},
  };
#if defined(__AVX512F__)
  // The forms under test are the ones these layouts take (the core would pass trivially).
  for (const auto& l : layouts) {
    ms::detail::pair_form expected =
        l.visible == minifloat::bfloat16 ? ms::detail::pair_form::float_prefix : ms::detail::pair_form::rebiased;
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
    if (l.visible == minifloat::binary16 && l.extra_bits == 8) expected = ms::detail::pair_form::hardware_binary16;
    // R = fp(4, 10, bias) or binary16 itself: binary16's codes once scaled.
    const bool stochastic = l.mode == ms::split_mode::stochastic;
    if (l.extra_bits == 8 && (((l.visible == minifloat::e4m3 || l.visible == minifloat::fp_4_3_4) && stochastic) ||
                              (l.visible == minifloat::e5m2 && !stochastic)))
      expected = ms::detail::pair_form::scaled_binary16;
#endif
    CHECK(ms::detail::pair_form_for(l) == expected);
  }
#endif
  // Floats of every class: a sweep of all bit patterns, and dense runs where the forms change
  // rule — the visible formats' subnormals, smallest normal binades, largest binades and beyond,
  // R's smallest values, float's subnormals — then shuffled so that registers mix them.
  const std::uint32_t stride = MINIFLOAT_TEST_SANITIZE ? 1000003 : 4099;
  std::vector<float> every_class;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += stride) every_class.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  for (const float start : {0x1p-25f, 0x1p-15f, 0x1p-14f, 32768.0f, 65504.0f, 65520.0f, 0x1p-33f, 1e-45f,  // binary16
                            0x1p-10f, 0x1p-7f, 0x1p-6f, 0x1p-18f, 448.0f, 479.0f, 240.0f,                 // e4m3
                            0x1p-17f, 57344.0f, 61440.0f,                                               // e5m2
                            0x1p-11f, 0x1p-3f, 3840.0f, 4096.0f,                                        // fp(4,3,4)
                            0x1p-9f, 0x1p31f, 0x1p63f})                                                // fp(5,2,0), fp(6,9,0)
    for (std::uint32_t i = 0; i < (MINIFLOAT_TEST_SANITIZE ? 300u : 30000u); ++i)
      for (const float sign : {1.0f, -1.0f}) every_class.push_back(sign * std::bit_cast<float>(std::bit_cast<std::uint32_t>(start) + 37 * i));
  std::mt19937 gen(21);
  std::shuffle(every_class.begin(), every_class.end(), gen);
  // Then whole registers that the processor's conversions take for binary16 + 8 (every lane zero
  // or in binary16's normal binades below its top one), which a shuffle of every class rarely makes.
  std::uniform_int_distribution<std::uint32_t> binary16_normal(std::bit_cast<std::uint32_t>(0x1p-14f),
                                                               std::bit_cast<std::uint32_t>(0x1p15f) - 1);
  for (std::uint32_t i = 0; i < (MINIFLOAT_TEST_SANITIZE ? 1024u : 65536u); ++i) {
    const std::uint32_t magnitude = i % 37 == 0 ? 0 : binary16_normal(gen);
    every_class.push_back(std::bit_cast<float>(magnitude | (gen() % 2 == 0 ? 0 : 0x80000000U)));
  }
  std::vector<float> finite_x;  // what an all_finite format stores
  std::copy_if(every_class.begin(), every_class.end(), std::back_inserter(finite_x), [](float v) { return std::isfinite(v); });
  for (const auto& l : layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits
                                         << (l.mode == ms::split_mode::stochastic ? " stochastic" : ""));
    const std::vector<float>& x = l.visible.encoding == minifloat::specials::all_finite ? finite_x : every_class;
    const ms::split_options o{31, 1000};
    split_words w(x.size(), l);
    ms::split(x, l, w.visible, w.extra, o);
    std::vector<float> out(x.size());
    ms::reconstruct(w.visible, w.extra, l, out);
    // x rounded toward zero to R, a finite x beyond the largest pair value saturating to it (R's
    // codes above it are not pairs where the visible format is nan_only).
    std::vector<float> expected = truncated(x, l.restored());
    const float limit = ms::detail::largest_pair_value(l);
    for (float& v : expected)
      if (std::isfinite(v) && std::fabs(v) > limit) v = std::copysign(limit, v);
    // The first element whose fields or restored value differ, reported once (per-element
    // assertions would cost more than the sweep).
    std::size_t bad = x.size();
    for (std::size_t i = 0; i < x.size() && bad == x.size(); ++i) {
      const auto [h, e] = scalar_fields(l, x[i], o.seed, o.index + i);
      if (ms::get_field(w.visible, l.visible_bits(), i) != h || ms::get_field(w.extra, l.extra_bits, i) != e ||
          !same(out[i], expected[i]))
        bad = i;
    }
    if (bad < x.size()) {
      INFO(bad << ": x bits " << std::hex << std::bit_cast<std::uint32_t>(x[bad]));
      const auto [h, e] = scalar_fields(l, x[bad], o.seed, o.index + bad);
      CHECK(ms::get_field(w.visible, l.visible_bits(), bad) == h);
      CHECK(ms::get_field(w.extra, l.extra_bits, bad) == e);
      CHECK(std::bit_cast<std::uint32_t>(out[bad]) == std::bit_cast<std::uint32_t>(expected[bad]));
    }
    CHECK(bad == x.size());
    // Every pair (for 16-bit extra fields, a sample) restores to the scalar decode of its code.
    const int vb = l.visible_bits();
    const std::size_t pairs = l.extra_bits == 8 ? std::size_t{1} << (vb + 8) : std::size_t{1} << 22;
    const std::uint32_t visible_mask = (std::uint32_t{1} << vb) - 1;
    std::vector<std::uint32_t> hs(pairs), es(pairs);
    std::uniform_int_distribution<std::uint32_t> bits;
    for (std::size_t p = 0; p < pairs; ++p) {
      hs[p] = l.extra_bits == 8 ? static_cast<std::uint32_t>(p >> 8) : bits(gen) & visible_mask;
      es[p] = l.extra_bits == 8 ? static_cast<std::uint32_t>(p & 0xFF) : bits(gen) & 0xFFFFU;
    }
    const auto visible = ms::packed_array::from_values(hs, vb), extra = ms::packed_array::from_values(es, l.extra_bits);
    std::vector<float> restored(pairs);
    ms::reconstruct(visible.words(), extra.words(), l, restored);
    const int kept = l.kept_bits();
    std::size_t wrong = pairs;
    for (std::size_t p = 0; p < pairs && wrong == pairs; ++p) {
      const std::uint32_t code = l.mode == ms::split_mode::truncate
                                     ? (hs[p] << kept) | es[p]
                                     : ((hs[p] - (es[p] >> kept)) << kept) | (es[p] & ((std::uint32_t{1} << kept) - 1));
      if (std::bit_cast<std::uint32_t>(restored[p]) != std::bit_cast<std::uint32_t>(minifloat::decode(code, l.restored())))
        wrong = p;
    }
    INFO("pair " << wrong << (wrong < pairs ? ": h " + std::to_string(hs[wrong]) + ", e " + std::to_string(es[wrong]) : ""));
    CHECK(wrong == pairs);
  }
}

#if defined(__SSE__)
TEST_CASE("with MXCSR's DAZ or FTZ set, e4m3-, e5m2- and binary16-visible layouts (the rebiased, hardware_binary16 "
          "and scaled_binary16 pair forms) store and restore the same bits",
          "[split][byte_fields]") {
  const ms::split_layout layouts[] = {{minifloat::e4m3, 8},
                                      {minifloat::e4m3, 8, ms::split_mode::stochastic},
                                      {minifloat::e5m2, 8},
                                      {minifloat::binary16, 8},
                                      {minifloat::binary16, 8, ms::split_mode::stochastic}};
  // Float subnormals (which DAZ zeroes), R's and the visible formats' subnormals and normals.
  std::vector<float> x;
  for (const float start : {1e-45f, 0x1p-130f, 0x1p-26f, 0x1p-18f, 0x1p-15f, 0x1p-10f, 0x1p-7f, 0.02f, 1.0f})
    for (std::uint32_t i = 0; i < 2000; ++i)
      for (const float sign : {1.0f, -1.0f}) x.push_back(sign * std::bit_cast<float>(std::bit_cast<std::uint32_t>(start) + 977 * i));
  std::mt19937 gen(23);
  std::shuffle(x.begin(), x.end(), gen);
  const unsigned saved = _mm_getcsr();
  for (const auto& l : layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits);
    const ms::split_options o{3, 64};
    split_words clear(x.size(), l);
    ms::split(x, l, clear.visible, clear.extra, o);
    std::vector<float> out_clear(x.size());
    ms::reconstruct(clear.visible, clear.extra, l, out_clear);
    for (const unsigned flags : {0x40U, 0x8000U, 0x8040U}) {  // DAZ, FTZ, both
      INFO("MXCSR flags " << std::hex << flags);
      split_words w(x.size(), l);
      std::vector<float> out(x.size());
      _mm_setcsr(saved | flags);
      ms::split(x, l, w.visible, w.extra, o);
      ms::reconstruct(w.visible, w.extra, l, out);
      _mm_setcsr(saved);
      CHECK(w.visible == clear.visible);
      CHECK(w.extra == clear.extra);
      CHECK(std::equal(out.begin(), out.end(), out_clear.begin(), [](float a, float b) { return same(a, b); }));
    }
  }
}
#endif
