// Every one of the 2^32 float bit patterns rounded to bfloat16 (nearest_even, overflow to Inf),
// against the CPU's AVX512-BF16 conversion VCVTNEPS2BF16.
//
// Oracle: VCVTNEPS2BF16 rounds to nearest even and ignores MXCSR, but it treats subnormal
// inputs as zero (DAZ). So inputs whose exponent field is zero (±0 and the float subnormals) are
// compared against a hand-derived exact rule instead: bfloat16 keeps the top 16 bits of a float,
// so rounding to nearest even is (u + 0x7fff + ((u >> 16) & 1)) >> 16 on the bit pattern, which
// for a zero exponent field cannot carry into the sign. That rule is itself checked against MPFR
// (precision 8, emin/subnormalize emulation of bfloat16's subnormals) on every positive float
// subnormal. NaN: the instruction keeps part of the payload, minifloat does not promise the same
// code, so NaN inputs only have to give NaN codes on both sides.
#include <catch2/catch.hpp>

#include <immintrin.h>
#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <minifloat/minifloat.hpp>

#include "support.hpp"

namespace mf = minifloat;

namespace {

constexpr std::uint64_t kStride = test_support::exhaustive_stride;
constexpr std::size_t kBlock = std::size_t{1} << 20;
constexpr std::uint64_t kAll = ((std::uint64_t{1} << 32) + kStride - 1) / kStride;

bool has_avx512bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512vl");
}

__attribute__((target("avx512bf16,avx512f,avx512vl"))) void cpu_bf16_codes(const float* in, std::uint16_t* out,
                                                                             std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(in + i));
    std::memcpy(out + i, &h, sizeof(h));
  }
  if (i < n) {
    float pad[16] = {};
    std::memcpy(pad, in + i, (n - i) * sizeof(float));
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(pad));
    std::uint16_t codes[16];
    std::memcpy(codes, &h, sizeof(h));
    std::memcpy(out + i, codes, (n - i) * sizeof(std::uint16_t));
  }
}

/// The hand rule for a float with a zero exponent field (see the file comment).
std::uint16_t zero_field_rule(std::uint32_t u) { return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }

/// The oracle code: the instruction, except for a zero exponent field.
void oracle_codes(const float* in, std::uint16_t* out, std::size_t n) {
  cpu_bf16_codes(in, out, n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = std::bit_cast<std::uint32_t>(in[i]);
    if ((u & 0x7f800000u) == 0) out[i] = zero_field_rule(u);
  }
}

bool is_nan_code(std::uint16_t c) { return (c & 0x7f80) == 0x7f80 && (c & 0x007f) != 0; }

using test_support::mismatch_log;

/// Calls check(in, n) on blocks of kBlock floats covering every kStride-th bit pattern.
template <class F>
std::uint64_t for_each_block(F&& check) {
  std::vector<float> in(kBlock);
  std::uint64_t visited = 0;
  for (std::uint64_t first = 0; first < (std::uint64_t{1} << 32);) {
    const std::uint64_t count = std::min<std::uint64_t>(kBlock, ((std::uint64_t{1} << 32) - first + kStride - 1) / kStride);
    const auto n = static_cast<std::size_t>(count);
    const auto base = static_cast<std::uint32_t>(first), step = static_cast<std::uint32_t>(kStride);
    for (std::size_t i = 0; i < n; ++i) in[i] = std::bit_cast<float>(base + static_cast<std::uint32_t>(i) * step);
    check(in.data(), n);
    visited += count;
    first += count * kStride;
  }
  return visited;
}

}  // namespace

TEST_CASE("the bfloat16 rule for zero-exponent floats agrees with MPFR on every float subnormal", "[bf16][mpfr]") {
  // bfloat16 as MPFR sees it: precision 8, smallest subnormal 2^-133 = 0.1 * 2^-132.
  const mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
  mpfr_t y;
  mpfr_init2(y, 8);
  std::uint64_t bad = 0, checked = 0;
  std::string first;
  const std::uint32_t step = MINIFLOAT_TEST_SANITIZE ? 97 : 1;
  for (std::uint32_t m = 1; m < (1u << 23); m += step) {
    const double x = std::ldexp(static_cast<double>(m), -149);  // the float subnormal with field m
    mpfr_set_emin(mpfr_get_emin_min());
    int t = mpfr_set_d(y, x, MPFR_RNDN);
    mpfr_set_emin(-132);
    t = mpfr_check_range(y, t, MPFR_RNDN);
    mpfr_subnormalize(y, t, MPFR_RNDN);
    const double want = mpfr_get_d(y, MPFR_RNDN);
    const double rule = static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(zero_field_rule(m)) << 16));
    ++checked;
    if (want != rule && bad++ < 5) first += "\n  m=" + std::to_string(m);
  }
  mpfr_clear(y);
  mpfr_set_emin(old_emin);
  mpfr_set_emax(old_emax);
  INFO(checked << " subnormals, " << bad << " disagreements:" << first);
  CHECK(bad == 0);
  // Spot checks of the rule: a tie below an even code stays, the largest subnormal carries into
  // the smallest normal, the sign is kept.
  CHECK(zero_field_rule(0x00008000u) == 0x0000);
  CHECK(zero_field_rule(0x00018000u) == 0x0002);
  CHECK(zero_field_rule(0x007fffffu) == 0x0080);
  CHECK(zero_field_rule(0x80000000u) == 0x8000);
  CHECK(zero_field_rule(0x80010001u) == 0x8001);
}

// Subnormal inputs are checked against the exact rule instead (VCVTNEPS2BF16 flushes them). The
// name is kept short: Catch2 2.13's console reporter crashes wrapping a long name with a
// parenthesis when it prints this case's warning.
TEST_CASE("bfloat16 nearest_even codes of every float equal VCVTNEPS2BF16", "[exhaustive][bf16][cpu-oracle]") {
  if (!has_avx512bf16()) {
    WARN("SKIPPED: this CPU has no AVX512-BF16; the bfloat16 exhaustive oracle is unavailable");
    return;
  }
  std::vector<std::uint16_t> got(kBlock), want(kBlock);
  const mf::rounding_options o{mf::rounding::nearest_even, mf::overflow::infinity};
  mismatch_log log;
  const std::uint64_t n = for_each_block([&](const float* in, std::size_t count) {
    mf::encode(std::span<const float>(in, count), std::span<std::uint16_t>(got.data(), count), mf::bfloat16, o);
    oracle_codes(in, want.data(), count);
    if (std::memcmp(got.data(), want.data(), count * sizeof(std::uint16_t)) == 0) return;
    for (std::size_t i = 0; i < count; ++i) {
      if (got[i] == want[i] || (is_nan_code(got[i]) && is_nan_code(want[i]))) continue;
      log.add(std::bit_cast<std::uint32_t>(in[i]), got[i], want[i]);
    }
  });
  INFO(n << " inputs, " << log.count << " code mismatches:" << log.first);
  CHECK(log.count == 0);
  CHECK(n == kAll);
}

TEST_CASE("quantize to bfloat16 gives the oracle's value for every float", "[exhaustive][bf16][cpu-oracle]") {
  if (!has_avx512bf16()) {
    WARN("SKIPPED: this CPU has no AVX512-BF16; the bfloat16 exhaustive oracle is unavailable");
    return;
  }
  std::vector<float> got(kBlock), want(kBlock);
  std::vector<std::uint16_t> codes(kBlock);
  const mf::rounding_options o{mf::rounding::nearest_even, mf::overflow::infinity};
  mismatch_log log;
  const std::uint64_t n = for_each_block([&](const float* in, std::size_t count) {
    mf::quantize(std::span<const float>(in, count), std::span<float>(got.data(), count), mf::bfloat16, o);
    oracle_codes(in, codes.data(), count);
    for (std::size_t i = 0; i < count; ++i) want[i] = std::bit_cast<float>(static_cast<std::uint32_t>(codes[i]) << 16);
    if (std::memcmp(got.data(), want.data(), count * sizeof(float)) == 0) return;
    for (std::size_t i = 0; i < count; ++i) {
      const auto g = std::bit_cast<std::uint32_t>(got[i]), w = std::bit_cast<std::uint32_t>(want[i]);
      if (g == w || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
      log.add(std::bit_cast<std::uint32_t>(in[i]), g, w);
    }
  });
  INFO(n << " inputs, " << log.count << " value mismatches:" << log.first);
  CHECK(log.count == 0);
  CHECK(n == kAll);
}
