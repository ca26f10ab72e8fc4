// Gecko exponent codecs and the tensor codec (include/minifloat/storage/gecko.hpp,
// gecko_tensor.hpp): exact footprints on hand-computed groups, the documented byte layout against
// a plain reference encoder, round trips, special values, and rejection of bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include <minifloat/round.hpp>
#include <minifloat/storage/gecko.hpp>
#include <minifloat/storage/gecko_tensor.hpp>

using namespace minifloat;
using namespace minifloat::storage;
namespace gk = minifloat::storage::detail::gecko;

namespace {

constexpr gecko_variant both_variants[] = {gecko_variant::faithful, gecko_variant::improved};

std::uint8_t exponent_of(float x) { return static_cast<std::uint8_t>(std::bit_cast<std::uint32_t>(x) >> 23); }
float with_exponent(unsigned e, std::uint32_t mantissa = 0, bool negative = false) {
  return std::bit_cast<float>((negative ? 0x80000000U : 0U) | (e << 23) | mantissa);
}
std::vector<std::uint8_t> exponents_of(std::span<const float> v) {
  std::vector<std::uint8_t> e(v.size());
  std::transform(v.begin(), v.end(), e.begin(), exponent_of);
  return e;
}

/// Test data: 0 weight-like, 1 ReLU-like, 2 gradient-like, 3 random bit patterns (every
/// exponent, NaNs and subnormals included), 4 one binade with rare zeros and infinities.
std::vector<float> make_data(int kind, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<float> v(n);
  for (auto& x : v) {
    switch (kind) {
      case 0: x = 0.05F * normal(rng); break;
      case 1: x = (rng() & 1) != 0 ? std::fabs(normal(rng)) : 0.0F; break;
      case 2: x = 1e-4F * normal(rng); break;
      case 3: x = std::bit_cast<float>(static_cast<std::uint32_t>(rng())); break;
      default: {
        const auto r = rng() % 64;
        x = r == 0 ? 0.0F : r == 1 ? std::numeric_limits<float>::infinity() : 1.0F + static_cast<float>(r) / 64.0F;
      }
    }
  }
  return v;
}

// A plain bit-at-a-time writer: the reference encoders below follow docs/gecko.md literally.
struct ref_bits {
  std::vector<std::uint8_t> bytes;
  std::size_t bit = 0;
  void put(std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i, ++bit) {
      if (bit % 8 == 0) bytes.push_back(0);
      if ((value >> i) & 1) bytes.back() = static_cast<std::uint8_t>(bytes.back() | (1U << (bit % 8)));
    }
  }
};

int twos_width(int d) {  // smallest two's-complement width holding d
  int w = 1;
  while (d < -(1 << (w - 1)) || d > (1 << (w - 1)) - 1) ++w;
  return w;
}

/// Faithful Gecko by the paper's rule, laid out as docs/gecko.md says.
std::vector<std::uint8_t> reference_faithful(std::span<const float> v) {
  ref_bits headers, payload;
  for (std::size_t first = 0; first < v.size(); first += 8) {
    std::vector<int> e(8, 127);  // padding values: d = 0
    for (std::size_t i = first; i < std::min(first + 8, v.size()); ++i) e[i - first] = exponent_of(v[i]);
    int w = 1;
    for (int x : e) w = std::max(w, twos_width(x - 127));
    headers.put(w <= 7 ? static_cast<unsigned>(w - 1) : 7U, 3);
    for (int x : e) payload.put(w <= 7 ? static_cast<std::uint64_t>(x - 127) : static_cast<std::uint64_t>(x), w <= 7 ? w : 8);
  }
  std::vector<std::uint8_t> out = headers.bytes;
  out.insert(out.end(), payload.bytes.begin(), payload.bytes.end());
  return out;
}

/// Improved Gecko with a given base, laid out as docs/gecko.md says.
std::vector<std::uint8_t> reference_improved(std::span<const float> v, int base) {
  ref_bits headers, payload;
  std::vector<std::uint8_t> bitmaps;
  for (std::size_t first = 0; first < v.size(); first += 8) {
    std::vector<int> e(8, 0);  // padding values: zeros
    for (std::size_t i = first; i < std::min(first + 8, v.size()); ++i) e[i - first] = exponent_of(v[i]);
    unsigned zeros = 0;
    int w = 1;
    for (int i = 0; i < 8; ++i) {
      if (e[static_cast<std::size_t>(i)] == 0) zeros |= 1U << i;
      else w = std::max(w, twos_width(e[static_cast<std::size_t>(i)] - base));
    }
    const unsigned h = w <= 7 ? static_cast<unsigned>(w - 1) : 7U;
    headers.put(h | (zeros != 0 ? 8U : 0U), 4);
    if (zeros != 0) bitmaps.push_back(static_cast<std::uint8_t>(zeros));
    for (int x : e) {
      if (x == 0) continue;
      payload.put(w <= 7 ? static_cast<std::uint64_t>(x - base) : static_cast<std::uint64_t>(x), w <= 7 ? w : 8);
    }
  }
  // reserved first: GCC 12 -O3 reports a false -Warray-bounds for insert after a one-element init
  std::vector<std::uint8_t> out;
  out.reserve(1 + headers.bytes.size() + bitmaps.size() + payload.bytes.size());
  out.push_back(static_cast<std::uint8_t>(base));
  out.insert(out.end(), headers.bytes.begin(), headers.bytes.end());
  out.insert(out.end(), bitmaps.begin(), bitmaps.end());
  out.insert(out.end(), payload.bytes.begin(), payload.bytes.end());
  return out;
}

/// Payload bits of the improved codec for base b, by brute force.
std::uint64_t reference_payload_bits(std::span<const float> v, int b) {
  std::uint64_t bits = 0;
  for (std::size_t first = 0; first < v.size(); first += 8) {
    int w = 1, nz = 0;
    for (std::size_t i = first; i < std::min(first + 8, v.size()); ++i) {
      if (exponent_of(v[i]) == 0) continue;
      ++nz;
      w = std::max(w, twos_width(exponent_of(v[i]) - b));
    }
    bits += static_cast<std::uint64_t>(nz) * static_cast<std::uint64_t>(w <= 7 ? w : 8);
  }
  return bits;
}

gecko_errc decode(std::span<const std::uint8_t> buf, std::size_t count, gecko_variant v) {
  std::vector<std::uint8_t> out(count);
  return gecko_decode_exponents(buf, count, out, v);
}

}  // namespace

TEST_CASE("faithful footprint of hand-computed groups", "[gecko]") {
  SECTION("d in [-1, 0] needs w = 1: 3 + 8 bits") {
    const std::vector<float> v{1.0F, 0.5F, 1.5F, 0.75F, 1.0F, 0.5F, 1.0F, 0.5F};  // E = 127 or 126
    CHECK(gecko_encoded_size(v) == gecko_size{11, 2});
    const auto buf = gecko_encode_exponents(v);
    // Header 0 (w - 1) in bits 0-2; then field i = d mod 2 at bit i: d = -1 -> 1.
    CHECK(buf == std::vector<std::uint8_t>{0x00, 0b10101010});
  }
  SECTION("a zero forces the escape: 3 + 64 bits") {
    const std::vector<float> v{1.0F, 0.0F, 1.0F, 1.0F, 1.0F, 1.0F, 1.0F, 1.0F};
    CHECK(gecko_encoded_size(v) == gecko_size{67, 9});
    const auto buf = gecko_encode_exponents(v);
    CHECK(buf == std::vector<std::uint8_t>{0x07, 127, 0, 127, 127, 127, 127, 127, 127});
  }
  SECTION("Inf, NaN and subnormals escape too") {
    for (float special : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min()}) {
      std::vector<float> v(8, 1.0F);
      v[5] = special;
      CHECK(gecko_encoded_size(v) == gecko_size{67, 9});
    }
  }
  SECTION("each width's bounds: d = 2^(w-1) - 1 and d = -2^(w-1) fit w, one more needs w + 1") {
    for (int w = 1; w <= 7; ++w) {
      const int top = (1 << (w - 1)) - 1, bottom = -(1 << (w - 1));
      for (int d : {top, bottom}) {
        std::vector<float> v(8, 1.0F);
        v[3] = with_exponent(static_cast<unsigned>(127 + d));
        CHECK(gecko_encoded_size(v).bits == static_cast<std::uint64_t>(3 + 8 * w));
      }
      for (int d : {top + 1, bottom - 1}) {
        std::vector<float> v(8, 1.0F);
        v[3] = with_exponent(static_cast<unsigned>(127 + d));
        CHECK(gecko_encoded_size(v).bits == static_cast<std::uint64_t>(3 + 8 * std::min(w + 1, 8)));
      }
    }
  }
  SECTION("bits add up over groups; bytes pad the header section once") {
    std::vector<float> v(24, 1.0F);  // three groups of w = 1
    v[9] = 8.0F;                     // group 1: d = 3 -> w = 3
    v[17] = 0.0F;                    // group 2: escape
    CHECK(gecko_encoded_size(v) == gecko_size{(3 + 8) + (3 + 24) + (3 + 64), 2 + 1 + 3 + 8});
  }
  SECTION("a final partial group is padded with d = 0 and costs a whole group") {
    const std::vector<float> v{4.0F, 0.25F, 1.0F};  // d = 2, -2, 0 -> w = 3
    CHECK(gecko_encoded_size(v) == gecko_size{27, 4});
    CHECK(gecko_encoded_size(std::span(v).first(0)) == gecko_size{0, 0});
  }
}

TEST_CASE("improved footprint of hand-computed groups", "[gecko]") {
  SECTION("all zeros: base byte, header nibble, bitmap, no payload") {
    const std::vector<float> v(8, 0.0F);
    CHECK(gecko_encoded_size(v, gecko_variant::improved) == gecko_size{8 + 4 + 8, 3});
    CHECK(gecko_encode_exponents(v, gecko_variant::improved) == std::vector<std::uint8_t>{127, 0x08, 0xFF});
  }
  SECTION("ReLU-like: zeros leave the payload, the rest need one bit") {
    const std::vector<float> v{0.0F, 1.5F, 0.0F, 1.25F, 0.0F, 1.0F, 0.0F, 1.75F};
    CHECK(gecko_encoded_size(v, gecko_variant::improved) == gecko_size{8 + 4 + 8 + 4, 4});
    CHECK(gecko_encode_exponents(v, gecko_variant::improved) == std::vector<std::uint8_t>{127, 0x08, 0x55, 0x00});
  }
  SECTION("gradient-like: the base follows the data instead of 127") {
    std::vector<float> v(16, 1.5e-4F);  // E = 114
    v[3] = 3e-4F;                       // E = 115
    const auto buf = gecko_encode_exponents(v, gecko_variant::improved);
    CHECK(gecko_encoded_size(v, gecko_variant::improved) == gecko_size{8 + 8 + 16, 4});
    CHECK(buf[0] == 115);  // d in {-1, 0}: w = 1 in both groups (base 114 would need w = 2 for d = 1)
    CHECK(gecko_encoded_size(v).bits == 2 * (3 + 8 * 5));  // faithful: d = -13, -12 need w = 5
  }
  SECTION("a final partial group marks its padding as zeros") {
    const std::vector<float> v{1.0F, 1.0F, 1.0F};
    CHECK(gecko_encode_exponents(v, gecko_variant::improved) == std::vector<std::uint8_t>{127, 0x08, 0xF8, 0x00});
  }
}

TEST_CASE("encodings match the documented layout byte for byte", "[gecko]") {
  for (int kind = 0; kind < 5; ++kind) {
    for (std::size_t n : {0U, 1U, 7U, 8U, 9U, 31U, 32U, 33U, 63U, 64U, 65U, 127U, 128U, 129U, 1000U, 4099U}) {
      const auto v = make_data(kind, n, 1000 * static_cast<std::uint64_t>(kind) + n);
      INFO("kind " << kind << " n " << n);
      CHECK(gecko_encode_exponents(v) == reference_faithful(v));
      const auto improved = gecko_encode_exponents(v, gecko_variant::improved);
      REQUIRE(!improved.empty());
      CHECK(improved == reference_improved(v, improved[0]));
    }
  }
}

TEST_CASE("the improved base is the exact optimum", "[gecko]") {
  for (int kind = 0; kind < 5; ++kind) {
    for (std::size_t n : {1U, 9U, 100U, 5000U}) {
      const auto v = make_data(kind, n, 77 + n);
      const auto plan = gk::plan_improved(v);
      std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
      for (int b = 0; b < 256; ++b) best = std::min(best, reference_payload_bits(v, b));
      INFO("kind " << kind << " n " << n << " base " << plan.base);
      CHECK(plan.payload_bits == best);
      CHECK(reference_payload_bits(v, plan.base) == best);
    }
  }
}

TEST_CASE("exponent round trips: every length, both variants, unaligned spans", "[gecko]") {
  for (gecko_variant variant : both_variants) {
    for (int kind = 0; kind < 5; ++kind) {
      for (std::size_t n : {0U, 1U, 7U, 8U, 9U, 15U, 16U, 17U, 31U, 32U, 33U, 64U, 65U, 200U, 4096U, 4101U}) {
        for (std::size_t offset : {0U, 1U, 3U}) {
          INFO("variant " << static_cast<int>(variant) << " kind " << kind << " n " << n << " offset " << offset);
          const auto storage = make_data(kind, n + offset, 31 * n + offset);
          const std::span<const float> v = std::span(storage).subspan(offset);
          const gecko_size size = gecko_encoded_size(v, variant);
          // Encode into an odd address of a larger buffer; decode from another odd address.
          std::vector<std::uint8_t> big(size.bytes + 2 * offset + 5, 0xEE);
          const std::size_t written = gecko_encode_exponents(v, std::span(big).subspan(offset), variant);
          REQUIRE(written == size.bytes);
          CHECK(std::all_of(big.begin() + static_cast<std::ptrdiff_t>(offset + written), big.end(),
                            [](std::uint8_t b) { return b == 0xEE; }));
          std::vector<std::uint8_t> moved(written + 1);
          std::copy_n(big.begin() + static_cast<std::ptrdiff_t>(offset), written, moved.begin() + 1);
          std::vector<std::uint8_t> out(n + 2, 0xAB);
          REQUIRE(gecko_decode_exponents(std::span(moved).subspan(1), n, std::span(out).subspan(1, n), variant) ==
                  gecko_errc::ok);
          CHECK(std::equal(out.begin() + 1, out.end() - 1, exponents_of(v).begin()));
          CHECK(out.front() == 0xAB);
          CHECK(out.back() == 0xAB);
          CHECK(gecko_encode_exponents(v, variant) == std::vector(moved.begin() + 1, moved.end()));
        }
      }
    }
  }
}

TEST_CASE("special values keep their exponent field exactly", "[gecko]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v{0.0F, -0.0F, std::numeric_limits<float>::denorm_min(), -with_exponent(0, 0x7FFFFF),
                             inf, -inf, with_exponent(255, 1), with_exponent(255, 0x400123, true),
                             std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), 1.0F};
  for (gecko_variant variant : both_variants) {
    const auto buf = gecko_encode_exponents(v, variant);
    std::vector<std::uint8_t> out(v.size());
    REQUIRE(gecko_decode_exponents(buf, v.size(), out, variant) == gecko_errc::ok);
    CHECK(out == exponents_of(v));
  }
  SECTION("the tensor codec at n = 23 is bit-exact, NaN payloads and signs included") {
    for (gecko_variant variant : both_variants) {
      const auto d = gecko_decode_tensor(gecko_encode_tensor(v, {variant, 23}));
      REQUIRE(d.status == gecko_errc::ok);
      REQUIRE(d.values.size() == v.size());
      for (std::size_t i = 0; i < v.size(); ++i)
        CHECK(std::bit_cast<std::uint32_t>(d.values[i]) == std::bit_cast<std::uint32_t>(v[i]));
    }
  }
}

TEST_CASE("tensor codec: every n, both variants, truncation", "[gecko]") {
  for (gecko_variant variant : both_variants) {
    for (int n = 0; n <= 23; ++n) {
      for (std::size_t count : {0U, 1U, 7U, 8U, 9U, 31U, 32U, 33U, 300U}) {
        INFO("variant " << static_cast<int>(variant) << " n " << n << " count " << count);
        auto v = make_data(n % 2 == 0 ? 3 : 1, count, 7 * count + static_cast<std::uint64_t>(n));
        if (n == 0) std::replace_if(v.begin(), v.end(), [](float x) { return std::isnan(x); }, 1.0F);
        const gecko_tensor_options o{variant, n};
        const auto buf = gecko_encode_tensor(v, o);
        const gecko_size size = gecko_tensor_encoded_size(v, o);
        CHECK(size.bytes == buf.size());
        CHECK(size.bits == 128 + 32 + count * static_cast<std::uint64_t>(n + 1) + gecko_encoded_size(v, variant).bits);
        CHECK(gecko_tensor_encoded_size(v, {variant, n, {rounding::toward_zero}, false}).bytes == size.bytes - 4);
        gecko_tensor_header h;
        REQUIRE(gecko_read_tensor_header(buf, h) == gecko_errc::ok);
        CHECK(h.count == count);
        CHECK(h.mantissa_bits == n);
        CHECK(h.variant == variant);
        CHECK(h.checksum);
        std::vector<float> out(count);
        REQUIRE(gecko_decode_tensor(buf, out) == gecko_errc::ok);
        const std::uint32_t keep = ~((std::uint32_t{1} << (23 - n)) - 1);
        for (std::size_t i = 0; i < count; ++i) {
          const auto u = std::bit_cast<std::uint32_t>(v[i]);
          std::uint32_t expected = u & keep;
          if (std::isnan(v[i]) && (expected & 0x7FFFFFFFU) == 0x7F800000U) expected |= 1U << 22;
          CHECK(std::bit_cast<std::uint32_t>(out[i]) == expected);
        }
      }
    }
  }
}

TEST_CASE("tensor codec: rounding through the core", "[gecko]") {
  const auto v = make_data(0, 1000, 5);
  for (rounding mode : {rounding::nearest_even, rounding::nearest_away, rounding::stochastic}) {
    for (int n : {1, 3, 7, 10}) {
      const gecko_tensor_options o{gecko_variant::improved, n, {mode, overflow::infinity, 0, 99}};
      const auto d = gecko_decode_tensor(gecko_encode_tensor(v, o));
      REQUIRE(d.status == gecko_errc::ok);
      const rounder<float> r(ieee_format(8, n), o.mantissa_rounding);
      for (std::size_t i = 0; i < v.size(); ++i) CHECK(d.values[i] == r(v[i], i));
    }
  }
  // Rounding can carry into the exponent: 1.99 to 1 mantissa bit is 2.
  const std::vector<float> carry{1.99F};
  const auto d = gecko_decode_tensor(gecko_encode_tensor(carry, {gecko_variant::faithful, 1, {rounding::nearest_even}}));
  CHECK(d.values == std::vector<float>{2.0F});
}

TEST_CASE("encoder errors are exceptions", "[gecko]") {
  const auto v = make_data(0, 100, 1);
  for (gecko_variant variant : both_variants) {
    const std::size_t exact = gecko_encoded_size(v, variant).bytes;
    std::vector<std::uint8_t> out(exact - 1);
    CHECK_THROWS_AS(gecko_encode_exponents(v, out, variant), std::length_error);
    out.resize(exact);
    CHECK(gecko_encode_exponents(v, out, variant) == exact);
    CHECK(exact <= gecko_max_encoded_bytes(v.size(), variant));
  }
  CHECK_THROWS_AS(gecko_encode_tensor(v, {gecko_variant::faithful, 24}), std::invalid_argument);
  CHECK_THROWS_AS(gecko_encode_tensor(v, {gecko_variant::faithful, -1}), std::invalid_argument);
  CHECK_THROWS_AS(gecko_encode_tensor(v, {static_cast<gecko_variant>(2), 7}), std::invalid_argument);
  CHECK_THROWS_AS(gecko_encode_tensor(v, {gecko_variant::faithful, 0, {rounding::nearest_even}}), std::invalid_argument);
  const std::vector<float> nan{std::numeric_limits<float>::quiet_NaN()};
  CHECK_THROWS_AS(gecko_encode_tensor(nan, {gecko_variant::faithful, 0}), std::domain_error);
  CHECK_THROWS_AS(gecko_tensor_encoded_size(nan, {gecko_variant::improved, 0}), std::domain_error);
  CHECK(gecko_tensor_encoded_size(nan, {gecko_variant::improved, 1}).bytes ==
        gecko_encode_tensor(nan, {gecko_variant::improved, 1}).size());
  std::vector<std::uint8_t> small(10);
  CHECK_THROWS_AS(gecko_encode_tensor(v, small, {}), std::length_error);
  // Room for the body but not the checksum.
  std::vector<std::uint8_t> no_room(gecko_tensor_encoded_size(v).bytes - 1);
  CHECK_THROWS_AS(gecko_encode_tensor(v, no_room, {}), std::length_error);
}

TEST_CASE("exponent encoders refuse an unknown variant instead of using the faithful codec", "[gecko]") {
  const auto v = make_data(0, 100, 1);
  const auto unknown = static_cast<gecko_variant>(2);
  std::vector<std::uint8_t> out(gecko_max_encoded_bytes(v.size(), gecko_variant::improved));
  CHECK_THROWS_WITH(gecko_encode_exponents(v, out, unknown), Catch::Contains("unknown variant 2"));
  CHECK_THROWS_AS(gecko_encode_exponents(v, unknown), std::invalid_argument);
  CHECK_THROWS_AS(gecko_encoded_size(v, unknown), std::invalid_argument);
  CHECK_THROWS_AS(gecko_max_encoded_bytes(v.size(), unknown), std::invalid_argument);
}

TEST_CASE("tensor checksum: every single-bit flip of an encoded tensor is detected", "[gecko]") {
  std::size_t flips = 0, detected = 0, unchecked_accepted = 0;
  for (gecko_variant variant : both_variants) {
    for (int n : {0, 4, 23}) {
      for (std::size_t count : {1U, 9U, 100U}) {
        auto v = make_data(n == 0 ? 1 : 3, count, count + static_cast<std::uint64_t>(n));
        if (n == 0) std::replace_if(v.begin(), v.end(), [](float x) { return std::isnan(x); }, 1.0F);
        const auto buf = gecko_encode_tensor(v, {variant, n});
        const auto plain = gecko_encode_tensor(v, {variant, n, {rounding::toward_zero}, false});
        REQUIRE(gecko_decode_tensor(buf).status == gecko_errc::ok);
        for (std::size_t bit = 0; bit < 8 * buf.size(); ++bit) {
          auto b = buf;
          b[bit / 8] ^= static_cast<std::uint8_t>(1U << (bit % 8));
          const gecko_errc e = gecko_decode_tensor(b).status;
          ++flips;
          detected += e != gecko_errc::ok;
          if (e == gecko_errc::ok) FAIL_CHECK("undetected flip of bit " << bit << " (variant " << static_cast<int>(variant)
                                                                          << ", n " << n << ", count " << count << ")");
        }
        // Without the checksum many flips decode "successfully" to other values: what it is for.
        for (std::size_t bit = 8 * 16; bit < 8 * plain.size(); ++bit) {
          auto b = plain;
          b[bit / 8] ^= static_cast<std::uint8_t>(1U << (bit % 8));
          unchecked_accepted += gecko_decode_tensor(b).status == gecko_errc::ok;
        }
      }
    }
  }
  CHECK(detected == flips);
  CHECK(unchecked_accepted > 0);
}

TEST_CASE("decoders reject truncated, over-long and corrupt input", "[gecko]") {
  for (gecko_variant variant : both_variants) {
    for (std::size_t n : {1U, 8U, 9U, 33U, 70U}) {
      for (int kind : {0, 1, 3}) {
        INFO("variant " << static_cast<int>(variant) << " n " << n << " kind " << kind);
        const auto v = make_data(kind, n, n + 11);
        auto buf = gecko_encode_exponents(v, variant);
        REQUIRE(decode(buf, n, variant) == gecko_errc::ok);
        for (std::size_t len = 0; len < buf.size(); ++len)
          CHECK(decode(std::span(buf).first(len), n, variant) == gecko_errc::truncated);
        auto longer = buf;
        longer.push_back(0);
        CHECK(decode(longer, n, variant) == gecko_errc::trailing_bytes);
        std::vector<std::uint8_t> out(n - 1);
        CHECK(gecko_decode_exponents(buf, n, out, variant) == gecko_errc::output_too_small);
        CHECK(gecko_decode_exponents(buf, n, out, static_cast<gecko_variant>(9)) == gecko_errc::bad_variant);

        const auto tensor = gecko_encode_tensor(v, {variant, 5, {rounding::toward_zero}, false});
        for (std::size_t len = 0; len < tensor.size(); ++len)
          CHECK(gecko_decode_tensor(std::span(tensor).first(len)).status == gecko_errc::truncated);
        auto tensor_longer = tensor;
        tensor_longer.push_back(0);
        CHECK(gecko_decode_tensor(tensor_longer).status == gecko_errc::trailing_bytes);
        // With the checksum a prefix or an extension fails the size checks or the checksum.
        const auto checked = gecko_encode_tensor(v, {variant, 5});
        for (std::size_t len = 0; len < checked.size(); ++len) {
          const gecko_errc e = gecko_decode_tensor(std::span(checked).first(len)).status;
          CHECK((e == gecko_errc::truncated || e == gecko_errc::bad_checksum));
        }
        auto checked_longer = checked;
        checked_longer.push_back(0);
        CHECK(gecko_decode_tensor(checked_longer).status == gecko_errc::bad_checksum);
      }
    }
  }
  SECTION("non-canonical padding") {
    // Faithful, 9 values: 2 groups, 6 header bits; bits 6-7 of byte 0 must be zero.
    auto buf = gecko_encode_exponents(make_data(0, 9, 3));
    buf[0] |= 0x80;
    CHECK(decode(buf, 9, gecko_variant::faithful) == gecko_errc::bad_padding);
    // Faithful, a partial group's padding values must decode to E = 127.
    const std::vector<float> one{1.0F};
    auto single = gecko_encode_exponents(one);  // header 0, payload 0x00 (d = 0 everywhere)
    REQUIRE(single == std::vector<std::uint8_t>{0x00, 0x00});
    single[1] = 0x02;  // value 1 becomes d = -1
    CHECK(decode(single, 1, gecko_variant::faithful) == gecko_errc::bad_padding);
    // Improved: odd group count leaves the high nibble of the last header byte zero.
    auto imp = gecko_encode_exponents(one, gecko_variant::improved);
    REQUIRE(imp == std::vector<std::uint8_t>{127, 0x08, 0xFE, 0x00});
    auto bad = imp;
    bad[1] |= 0x10;
    CHECK(decode(bad, 1, gecko_variant::improved) == gecko_errc::bad_padding);
    bad = imp;  // padding lanes must be marked zero in the bitmap
    bad[2] = 0xFC;
    CHECK(decode(bad, 1, gecko_variant::improved) == gecko_errc::bad_padding);
    bad = imp;  // unused payload bits must be zero
    bad[3] = 0x02;
    CHECK(decode(bad, 1, gecko_variant::improved) == gecko_errc::bad_padding);
  }
  SECTION("tensor header fields") {
    const auto good = gecko_encode_tensor(make_data(0, 20, 4), {gecko_variant::improved, 7});
    REQUIRE(gecko_decode_tensor(good).status == gecko_errc::ok);
    const auto with = [&](std::size_t at, std::uint8_t value) {
      auto b = good;
      b[at] = value;
      return gecko_decode_tensor(b).status;
    };
    CHECK(with(0, 'X') == gecko_errc::bad_magic);
    CHECK(with(4, 2) == gecko_errc::bad_version);
    CHECK(with(5, 2) == gecko_errc::bad_variant);
    CHECK(with(6, 24) == gecko_errc::bad_mantissa_bits);
    CHECK(with(7, 3) == gecko_errc::bad_reserved);  // bit 0 is the checksum flag; the others are reserved
    CHECK(with(7, 0) == gecko_errc::trailing_bytes);  // the checksum read as part of the exponent stream
    CHECK(with(15, 0x80) == gecko_errc::truncated);  // a count far beyond the buffer
    CHECK(gecko_decode_tensor(std::vector<std::uint8_t>{'N', 'O'}).status == gecko_errc::bad_magic);
    std::vector<float> wrong(19);
    CHECK(gecko_decode_tensor(good, wrong) == gecko_errc::output_size_mismatch);
  }
  SECTION("random corruption never crashes or overruns") {
    std::mt19937_64 rng(123);
    const auto tensor = gecko_encode_tensor(make_data(1, 100, 9), {gecko_variant::improved, 4, {rounding::toward_zero}, false});
    const auto faithful = gecko_encode_exponents(make_data(0, 100, 9));
    int ok = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      auto t = tensor;
      auto f = faithful;
      for (int flips = 0; flips < 1 + trial % 4; ++flips) {
        t[16 + rng() % (t.size() - 16)] ^= static_cast<std::uint8_t>(1U << (rng() % 8));
        f[rng() % f.size()] ^= static_cast<std::uint8_t>(1U << (rng() % 8));
      }
      ok += gecko_decode_tensor(t).status == gecko_errc::ok;
      ok += decode(f, 100, gecko_variant::faithful) == gecko_errc::ok;
      ok += decode(f, 100, gecko_variant::improved) == gecko_errc::ok;
    }
    CHECK(ok < 3 * 3000);  // most flips are caught or decode to other values; none may crash
  }
}

TEST_CASE("portable group kernels agree with the native ones", "[gecko]") {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 20000; ++trial) {
    const std::uint64_t x = rng();
    const int w = 1 + trial % 8;
    const auto keep = static_cast<unsigned>(rng() & 0xFF);
    CHECK(gk::spread_fields<false>(x, w) == gk::spread_fields<gk::have_bmi2>(x, w));
    CHECK(gk::gather_fields<false>(x, w) == gk::gather_fields<gk::have_bmi2>(x, w));
    CHECK(gk::expand_bytes<false>(x, keep) == gk::expand_bytes<gk::have_bmi2>(x, keep));
    CHECK(gk::compress_bytes<false>(x, keep) == gk::compress_bytes<gk::have_bmi2>(x, keep));
    CHECK(gk::gather_fields<false>(gk::spread_fields<false>(x, w), w) == (w == 8 ? x : x & ((std::uint64_t{1} << (8 * w)) - 1)));
    CHECK(gk::compress_bytes<false>(gk::expand_bytes<false>(x, keep), keep) ==
          (x & ((std::popcount(keep) == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * std::popcount(keep))) - 1))));
    std::uint64_t zeros = 0;
    for (int i = 0; i < 8; ++i)
      if (((x >> (8 * i)) & 0xFF) == 0) zeros |= 1U << i;
    CHECK(gk::zero_bitmap(x) == zeros);
    CHECK(gk::zero_bitmap(x & gk::byte_masks[keep]) == (zeros | (~keep & 0xFF)));
  }
}
