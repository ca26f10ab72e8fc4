// decode_sum / sum_decoded (decode_accumulate.hpp) against a scalar reference: each contribution's
// codes decoded one at a time by the scalar minifloat::decode and added left to right in float,
// bit for bit (NaN: both NaN), across chunk boundaries and for several formats and code widths.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include <minifloat/decode_accumulate.hpp>
#include <minifloat/encode.hpp>
#include <minifloat/format.hpp>

namespace mf = minifloat;

namespace {

template <class C>
std::vector<C> random_codes(std::size_t n, const mf::format& f, std::mt19937_64& rng) {
  std::vector<C> codes(n);
  const std::uint64_t mask = (std::uint64_t{1} << f.bit_width()) - 1;
  for (auto& c : codes) c = static_cast<C>(rng() & mask);
  return codes;
}

/// The reference: scalar decode, then v_0 + v_1 + ... in float, left to right.
template <class C>
std::vector<float> scalar_sum(const std::vector<std::vector<C>>& parts, std::size_t n, const mf::format& f) {
  std::vector<float> out(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    float sum = mf::decode<float>(parts[0][i], f);
    for (std::size_t r = 1; r < parts.size(); ++r) sum += mf::decode<float>(parts[r][i], f);
    out[i] = sum;
  }
  return out;
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

template <class C>
void check_format(const mf::format& f) {
  std::mt19937_64 rng(20261128);
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{33}, mf::decode_sum_chunk - 1,
                              mf::decode_sum_chunk, 2 * mf::decode_sum_chunk + 5}) {
    for (const std::size_t k : {1, 2, 3, 5}) {
      std::vector<std::vector<C>> parts;
      for (std::size_t r = 0; r < k; ++r) parts.push_back(random_codes<C>(n, f, rng));
      std::vector<std::span<const C>> spans(parts.begin(), parts.end());
      std::vector<float> got(n, 12345.0f);  // overwritten, not added to
      mf::decode_sum(std::span<const std::span<const C>>(spans), std::span<float>(got), f);
      const std::vector<float> want = scalar_sum(parts, n, f);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < n; ++i) mismatches += same(got[i], want[i]) ? 0 : 1;
      INFO(mf::to_string(f) << ", n = " << n << ", contributions = " << k);
      CHECK(mismatches == 0);
    }
  }
}

}  // namespace

TEST_CASE("decode_sum equals scalar decode summed left to right in float, for every contribution count and chunk boundary") {
  check_format<std::uint8_t>(mf::e4m3);
  check_format<std::uint8_t>(mf::e5m2);
  check_format<std::uint8_t>(mf::fp_4_3_4);
  check_format<std::uint8_t>(mf::e2m1);
  check_format<std::uint16_t>(mf::bfloat16);
  check_format<std::uint16_t>(mf::binary16);
  check_format<std::uint32_t>(mf::binary32);
}

TEST_CASE("decode_sum starts the sum at the first contribution, so a lone negative zero stays negative") {
  const std::vector<std::uint8_t> minus_zero{0x80};  // e4m3's -0
  const std::vector<std::span<const std::uint8_t>> one{minus_zero};
  float out = 1.0f;
  mf::decode_sum(std::span<const std::span<const std::uint8_t>>(one), std::span<float>(&out, 1), mf::e4m3);
  CHECK(std::bit_cast<std::uint32_t>(out) == 0x80000000u);
}

TEST_CASE("sum_decoded hands out chunks at multiples of the chunk size and leaves zeros for no contribution") {
  std::vector<float> out(100, 7.0f);
  std::vector<std::size_t> starts;
  mf::sum_decoded(std::span<float>(out), 2, 32, [&](std::size_t r, std::size_t start, std::span<float> dst) {
    if (r == 0) starts.push_back(start);
    for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(start + i) + static_cast<float>(r);
  });
  CHECK(starts == std::vector<std::size_t>{0, 32, 64, 96});
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(out[i] == 2.0f * static_cast<float>(i) + 1.0f);
  mf::sum_decoded(std::span<float>(out), 0, 32, [](std::size_t, std::size_t, std::span<float>) {});
  for (const float v : out) CHECK(v == 0.0f);
  CHECK_THROWS_AS(mf::sum_decoded(std::span<float>(out), 1, 0, [](std::size_t, std::size_t, std::span<float>) {}),
                  std::invalid_argument);
}

TEST_CASE("decode_sum refuses a contribution of another length, writing nothing") {
  const std::vector<std::uint8_t> a(4, 0x38), b(3, 0x38);
  const std::vector<std::span<const std::uint8_t>> parts{a, b};
  std::vector<float> out(4, 5.0f);
  CHECK_THROWS_AS(mf::decode_sum(std::span<const std::span<const std::uint8_t>>(parts), std::span<float>(out), mf::e4m3),
                  std::invalid_argument);
  for (const float v : out) CHECK(v == 5.0f);
}
