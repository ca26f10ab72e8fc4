// Every one of the 2^32 float bit patterns rounded to binary16, against the CPU's F16C
// conversion (VCVTPS2PH with an explicit rounding immediate, so MXCSR does not matter).
//
// Oracle: the F16C instruction for codes (nearest_even and toward_zero), and the compiler's
// _Float16 conversion for scalar round() values. NaN: F16C keeps the payload and minifloat does
// not promise the same code, so for NaN inputs both must merely be NaN codes.
// The overflow policy is overflow::infinity, which is IEEE 754's (F16C's) behaviour:
// nearest_even overflows to Inf, toward_zero stops at the largest finite value.
#include <catch2/catch.hpp>

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <minifloat/minifloat.hpp>

#include "support.hpp"

namespace mf = minifloat;

namespace {

constexpr std::uint64_t kStride = test_support::exhaustive_stride;
constexpr std::size_t kBlock = std::size_t{1} << 20;

bool has_f16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2");
}

template <int Imm>
__attribute__((target("avx2,f16c"))) void f16c_codes(const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, Imm));
  }
  for (; i < n; ++i) {
    const __m128 v = _mm_set_ss(in[i]);
    out[i] = static_cast<std::uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(v, Imm), 0));
  }
}

__attribute__((target("avx2,f16c"))) void f16c_values(const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(in[i])));
}

constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
constexpr int kTowardZero = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;

bool is_nan_code(std::uint16_t c) { return (c & 0x7c00) == 0x7c00 && (c & 0x03ff) != 0; }

/// Bit patterns visited by a sweep: [first, last) with a stride.
struct pattern_range {
  std::uint64_t first, last, stride;
};

/// Every pattern (a stride under the sanitizer).
std::vector<pattern_range> all_patterns() { return {{0, std::uint64_t{1} << 32, kStride}}; }

/// Calls check(in, n) for blocks of at most kBlock floats covering `ranges`.
template <class F>
std::uint64_t for_each_block(const std::vector<pattern_range>& ranges, F&& check) {
  std::vector<float> in(kBlock);
  std::uint64_t visited = 0;
  for (const auto& r : ranges) {
    for (std::uint64_t first = r.first; first < r.last;) {
      const std::uint64_t count = std::min<std::uint64_t>(kBlock, (r.last - first + r.stride - 1) / r.stride);
      const auto n = static_cast<std::size_t>(count);
      const auto base = static_cast<std::uint32_t>(first), step = static_cast<std::uint32_t>(r.stride);
      for (std::size_t i = 0; i < n; ++i) in[i] = std::bit_cast<float>(base + static_cast<std::uint32_t>(i) * step);
      check(in.data(), n);
      visited += count;
      first += count * r.stride;
    }
  }
  return visited;
}

using test_support::mismatch_log;

template <int Imm>
std::uint64_t sweep_codes(mf::rounding mode, const std::vector<pattern_range>& ranges, mismatch_log& log) {
  std::vector<std::uint16_t> got(kBlock), want(kBlock);
  const mf::rounding_options o{mode, mf::overflow::infinity};
  return for_each_block(ranges, [&](const float* in, std::size_t n) {
    mf::encode(std::span<const float>(in, n), std::span<std::uint16_t>(got.data(), n), mf::binary16, o);
    f16c_codes<Imm>(in, want.data(), n);
    if (std::memcmp(got.data(), want.data(), n * sizeof(std::uint16_t)) == 0) return;
    for (std::size_t i = 0; i < n; ++i) {
      if (got[i] == want[i] || (is_nan_code(got[i]) && is_nan_code(want[i]))) continue;
      log.add(std::bit_cast<std::uint32_t>(in[i]), got[i], want[i]);
    }
  });
}

template <int Imm>
std::uint64_t sweep_values(mf::rounding mode, mismatch_log& log) {
  std::vector<float> got(kBlock), want(kBlock);
  std::vector<std::uint16_t> codes(kBlock);
  const mf::rounding_options o{mode, mf::overflow::infinity};
  return for_each_block(all_patterns(), [&](const float* in, std::size_t n) {
    mf::quantize(std::span<const float>(in, n), std::span<float>(got.data(), n), mf::binary16, o);
    f16c_codes<Imm>(in, codes.data(), n);
    f16c_values(codes.data(), want.data(), n);
    if (std::memcmp(got.data(), want.data(), n * sizeof(float)) == 0) return;
    for (std::size_t i = 0; i < n; ++i) {
      const auto g = std::bit_cast<std::uint32_t>(got[i]), w = std::bit_cast<std::uint32_t>(want[i]);
      if (g == w || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
      log.add(std::bit_cast<std::uint32_t>(in[i]), g, w);
    }
  });
}

constexpr std::uint64_t kAll = ((std::uint64_t{1} << 32) + kStride - 1) / kStride;

}  // namespace

TEST_CASE("binary16 nearest_even codes of every float equal F16C's round-to-nearest-even", "[exhaustive][f16c][cpu-oracle]") {
  if (!has_f16c()) {
    WARN("SKIPPED: this CPU has no F16C (or AVX2); the binary16 exhaustive oracle is unavailable");
    return;
  }
  mismatch_log log;
  const std::uint64_t n = sweep_codes<kNearest>(mf::rounding::nearest_even, all_patterns(), log);
  INFO(n << " inputs, " << log.count << " code mismatches:" << log.first);
  CHECK(log.count == 0);
  CHECK(n == kAll);
}

// toward_zero codes of every pattern; the values follow through quantize below.
TEST_CASE("binary16 toward_zero codes equal F16C's round-toward-zero, which never overflows to Inf",
          "[exhaustive][f16c][cpu-oracle]") {
  if (!has_f16c()) {
    WARN("SKIPPED: this CPU has no F16C (or AVX2); the binary16 exhaustive oracle is unavailable");
    return;
  }
  mismatch_log log;
  const std::uint64_t n = sweep_codes<kTowardZero>(mf::rounding::toward_zero, all_patterns(), log);
  INFO(n << " inputs, " << log.count << " code mismatches:" << log.first);
  CHECK(log.count == 0);
  CHECK(n == kAll);
  // The finite inputs above binary16's range really are among them and stop at 0x7bff.
  float big = 1e30f;
  std::uint16_t code = 0;
  mf::encode(std::span<const float>(&big, 1), std::span<std::uint16_t>(&code, 1), mf::binary16,
             {mf::rounding::toward_zero, mf::overflow::infinity});
  CHECK(code == 0x7bff);
}

TEST_CASE("quantize to binary16 gives F16C's value for every float, nearest_even and toward_zero",
          "[exhaustive][f16c][cpu-oracle]") {
  if (!has_f16c()) {
    WARN("SKIPPED: this CPU has no F16C (or AVX2); the binary16 exhaustive oracle is unavailable");
    return;
  }
  SECTION("nearest_even") {
    mismatch_log log;
    const std::uint64_t n = sweep_values<kNearest>(mf::rounding::nearest_even, log);
    INFO(n << " inputs, " << log.count << " value mismatches:" << log.first);
    CHECK(log.count == 0);
    CHECK(n == kAll);
  }
  SECTION("toward_zero") {
    mismatch_log log;
    const std::uint64_t n = sweep_values<kTowardZero>(mf::rounding::toward_zero, log);
    INFO(n << " inputs, " << log.count << " value mismatches:" << log.first);
    CHECK(log.count == 0);
    CHECK(n == kAll);
  }
}

TEST_CASE("scalar round to binary16 equals the compiler's _Float16 conversion on random floats",
          "[f16c][Float16]") {
  std::mt19937_64 rng(20261121);
  const int n = MINIFLOAT_TEST_SANITIZE ? 200000 : 4000000;
  mismatch_log log;
  int tested = 0;
  for (int i = 0; i < n; ++i) {
    std::uint32_t u = static_cast<std::uint32_t>(rng());
    if (i % 2 == 0) {  // half of them inside binary16's range (exponent fields 96..145)
      const std::uint32_t e = 96 + static_cast<std::uint32_t>(rng() % 50);
      u = (u & 0x807fffffu) | (e << 23);
    }
    const float x = std::bit_cast<float>(u);
    const float got = mf::round(x, mf::binary16);  // defaults: nearest_even, overflow::infinity
    const float want = static_cast<float>(static_cast<_Float16>(x));
    ++tested;
    if (std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want) || (std::isnan(got) && std::isnan(want)))
      continue;
    log.add(u, std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want));
  }
  INFO(tested << " inputs, " << log.count << " mismatches:" << log.first);
  CHECK(log.count == 0);
}
