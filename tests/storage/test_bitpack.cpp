// Bit-packed arrays: the layout (field i at bit i*k of little-endian 32-bit words), round trips
// for every width 1..32 and awkward lengths and offsets, single-field access, the checked
// variants and the container's validation of untrusted buffers.
#include <catch2/catch.hpp>

#include <minifloat/storage/bitpack.hpp>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace ms = minifloat::storage;

namespace {

const std::size_t lengths[] = {0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 511, 512, 513, 1000, 4099};

/// The layout, one bit at a time.
std::vector<std::uint32_t> reference_pack(const std::vector<std::uint32_t>& values, int k) {
  std::vector<std::uint32_t> words((values.size() * static_cast<std::size_t>(k) + 31) / 32, 0);
  for (std::size_t i = 0; i < values.size(); ++i)
    for (int b = 0; b < k; ++b)
      if ((values[i] >> b) & 1) {
        const std::size_t bit = i * static_cast<std::size_t>(k) + static_cast<std::size_t>(b);
        words[bit / 32] |= std::uint32_t{1} << (bit % 32);
      }
  return words;
}

std::vector<std::uint32_t> random_values(std::size_t n, std::mt19937& gen) {
  std::vector<std::uint32_t> v(n);
  for (auto& x : v) x = static_cast<std::uint32_t>(gen());
  return v;
}

std::vector<std::uint32_t> masked(std::vector<std::uint32_t> v, int k) {
  for (auto& x : v) x &= ms::field_mask(k);
  return v;
}

}  // namespace

TEST_CASE("packed_words is ceil(count * bits / 32) and 32 fields fill exactly k words", "[bitpack]") {
  for (int k = 1; k <= 32; ++k) {
    CHECK(ms::packed_words(32, k) == static_cast<std::size_t>(k));
    for (std::size_t n : lengths)
      CHECK(ms::packed_words(n, k) == (n * static_cast<std::size_t>(k) + 31) / 32);
  }
  CHECK_THROWS_AS(ms::packed_words(1, 0), std::invalid_argument);
  CHECK_THROWS_AS(ms::packed_words(1, 33), std::invalid_argument);
  static_assert(ms::packed_words(33, 5) == 6);
}

TEST_CASE("pack writes the sequential layout: field i at bit i*k, straddling words", "[bitpack]") {
  // 3-bit fields 0..7: field 10 occupies bits 30..32, straddling words 0 and 1.
  std::vector<std::uint32_t> values(12);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint32_t>(i % 8);
  std::vector<std::uint32_t> words(2);
  ms::pack(values, 3, words);
  CHECK(words == reference_pack(values, 3));
  CHECK(ms::get_field(words, 3, 10) == 2);
  CHECK(words[0] >> 30 == 2);  // low two bits of field 10 (= 0b010)
  CHECK((words[1] & 1) == 0);  // its high bit
}

TEST_CASE("pack and unpack match the bit-by-bit layout and round-trip for every width and length", "[bitpack]") {
  std::mt19937 gen(20261121);
  for (int k = 1; k <= 32; ++k) {
    for (std::size_t n : lengths) {
      INFO("k = " << k << ", n = " << n);
      const auto values = random_values(n, gen);
      const auto expected = reference_pack(masked(values, k), k);
      // Sentinels around the output show that nothing outside packed_words(n, k) is written.
      std::vector<std::uint32_t> buffer(expected.size() + 2, 0xdeadbeefU);
      ms::pack(values, k, std::span<std::uint32_t>(buffer).subspan(1, expected.size()));
      CHECK(buffer.front() == 0xdeadbeefU);
      CHECK(buffer.back() == 0xdeadbeefU);
      const std::vector<std::uint32_t> words(buffer.begin() + 1, buffer.end() - 1);
      REQUIRE(words == expected);  // also: the padding after the last field is zero
      // Unpack from a buffer exactly as long as needed, into an output with sentinels.
      std::vector<std::uint32_t> out(n + 2, 0xcafef00dU);
      ms::unpack(words, k, n, std::span<std::uint32_t>(out).subspan(1, n));
      CHECK(out.front() == 0xcafef00dU);
      CHECK(out.back() == 0xcafef00dU);
      CHECK(std::vector<std::uint32_t>(out.begin() + 1, out.end() - 1) == masked(values, k));
    }
  }
}

TEST_CASE("spans starting at odd offsets pack and unpack like aligned ones", "[bitpack]") {
  std::mt19937 gen(7);
  for (int k : {1, 3, 5, 8, 12, 13, 16, 17, 31, 32}) {
    for (std::size_t offset : {1, 3, 5, 15}) {
      for (std::size_t n : {33u, 1000u, 4099u}) {
        INFO("k = " << k << ", offset = " << offset << ", n = " << n);
        const auto storage_values = random_values(n + offset, gen);
        const auto values = std::span<const std::uint32_t>(storage_values).subspan(offset, n);
        std::vector<std::uint32_t> word_storage(ms::packed_words(n, k) + offset);
        const auto words = std::span<std::uint32_t>(word_storage).subspan(offset);
        ms::pack(values, k, words);
        CHECK(std::vector<std::uint32_t>(words.begin(), words.end()) ==
              reference_pack(masked({values.begin(), values.end()}, k), k));
        std::vector<std::uint32_t> out_storage(n + offset);
        ms::unpack(words, k, n, std::span<std::uint32_t>(out_storage).subspan(offset));
        CHECK(std::vector<std::uint32_t>(out_storage.begin() + static_cast<std::ptrdiff_t>(offset), out_storage.end()) ==
              masked({values.begin(), values.end()}, k));
      }
    }
  }
}

TEST_CASE("compile-time widths give the same words as the run-time dispatch", "[bitpack]") {
  std::mt19937 gen(99);
  const auto values = random_values(777, gen);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          constexpr int k = static_cast<int>(I) + 1;
          std::vector<std::uint32_t> a(ms::packed_words(values.size(), k)), b(a.size());
          ms::pack<k>(values, a);
          ms::pack(values, k, b);
          CHECK(a == b);
          std::vector<std::uint32_t> out(values.size());
          ms::unpack<k>(a, values.size(), out);
          CHECK(out == masked(values, k));
        }(),
        ...);
  }(std::make_index_sequence<32>{});
}

TEST_CASE("unpack reads a prefix: count may be smaller than the packed array", "[bitpack]") {
  std::mt19937 gen(3);
  const auto values = random_values(300, gen);
  for (int k : {1, 7, 13, 24}) {
    std::vector<std::uint32_t> words(ms::packed_words(values.size(), k));
    ms::pack(values, k, words);
    std::vector<std::uint32_t> out(100);
    ms::unpack(words, k, 100, out);
    CHECK(out == masked({values.begin(), values.begin() + 100}, k));
  }
}

TEST_CASE("get_field and set_field touch one field and leave its neighbours", "[bitpack]") {
  std::mt19937 gen(11);
  for (int k = 1; k <= 32; ++k) {
    auto values = masked(random_values(100, gen), k);
    std::vector<std::uint32_t> words(ms::packed_words(values.size(), k));
    ms::pack(values, k, words);
    for (std::size_t i = 0; i < values.size(); ++i) REQUIRE(ms::get_field(words, k, i) == values[i]);
    for (std::size_t i : {0u, 1u, 9u, 10u, 31u, 32u, 63u, 99u}) {
      const std::uint32_t v = static_cast<std::uint32_t>(gen());
      ms::set_field(words, k, i, v);  // masked to k bits
      values[i] = v & ms::field_mask(k);
    }
    CHECK(words == reference_pack(values, k));
  }
}

TEST_CASE("single-field access past the span throws std::out_of_range", "[bitpack]") {
  std::vector<std::uint32_t> words(3);  // 96 bits: 19 fields of 5 bits
  CHECK_NOTHROW(ms::get_field(words, 5, 18));
  CHECK_THROWS_AS(ms::get_field(words, 5, 19), std::out_of_range);
  CHECK_THROWS_AS(ms::set_field(words, 5, 19, 1), std::out_of_range);
  CHECK_THROWS_AS(ms::get_field(words, 0, 0), std::invalid_argument);
}

TEST_CASE("pack masks wide values; pack_checked rejects them and writes nothing", "[bitpack]") {
  const std::vector<std::uint32_t> values{1, 2, 3, 9, 4};  // 9 needs 4 bits
  std::vector<std::uint32_t> words(1, 0x12345678U);
  CHECK_THROWS_WITH(ms::pack_checked(values, 3, words), Catch::Contains("index 3"));
  CHECK(words[0] == 0x12345678U);
  ms::pack(values, 3, words);
  CHECK(ms::get_field(words, 3, 3) == 1);  // 9 & 7
  CHECK_NOTHROW(ms::pack_checked(values, 4, words));
}

TEST_CASE("too-short and overlapping spans are rejected with std::invalid_argument", "[bitpack]") {
  std::vector<std::uint32_t> values(33, 1), words(ms::packed_words(33, 5) - 1), out(32);
  CHECK_THROWS_WITH(ms::pack(values, 5, words), Catch::Contains("need 6 words"));
  CHECK_THROWS_AS(ms::pack<5>(values, words), std::invalid_argument);
  words.resize(6);
  ms::pack(values, 5, words);
  CHECK_THROWS_AS(ms::unpack(words, 5, 33, out), std::invalid_argument);   // output too short
  CHECK_THROWS_AS(ms::unpack(words, 5, 40, values), std::invalid_argument);  // words too short
  CHECK_THROWS_AS(ms::pack(values, 33, words), std::invalid_argument);
  std::vector<std::uint32_t> shared(64, 1);
  CHECK_THROWS_WITH(ms::pack(std::span<const std::uint32_t>(shared).first(40), 4, std::span<std::uint32_t>(shared).subspan(30)),
                    Catch::Contains("overlap"));
}

TEST_CASE("packed_array stores, masks and reads fields and owns canonical words", "[bitpack][packed_array]") {
  ms::packed_array a(70, 7);
  CHECK(a.size() == 70);
  CHECK(a.bits() == 7);
  CHECK(a.words().size() == ms::packed_words(70, 7));
  a.set(69, 0x1ff);  // masked to 0x7f
  CHECK(a.get(69) == 0x7f);
  CHECK_THROWS_AS(a.set_checked(0, 0x80), std::invalid_argument);
  CHECK_THROWS_AS(a.get(70), std::out_of_range);
  CHECK_THROWS_AS(a.set(70, 1), std::out_of_range);
  std::mt19937 gen(5);
  const auto values = random_values(70, gen);
  const auto b = ms::packed_array::from_values(values, 7);
  CHECK(b.unpack() == masked(values, 7));
  CHECK_THROWS_AS(a.assign(std::vector<std::uint32_t>(69)), std::invalid_argument);
  a.assign(values);
  CHECK(a == b);
  CHECK_THROWS_AS(ms::packed_array(1, 0), std::invalid_argument);
}

TEST_CASE("packed_array::from_words validates an untrusted buffer and clears the padding", "[bitpack][packed_array]") {
  const std::vector<std::uint32_t> words{0xffffffffU, 0xffffffffU, 0xffffffffU};
  // 10 fields of 7 bits need 3 words; 14 fields would need 4.
  const auto a = ms::packed_array::from_words(words, 10, 7);
  CHECK(a.words()[2] == 0x3fU);  // bits 70..95 cleared
  CHECK(a.get(9) == 0x7f);
  CHECK_THROWS_WITH(ms::packed_array::from_words(words, 14, 7), Catch::Contains("need 4 words"));
  CHECK_THROWS_AS(ms::packed_array::from_words(words, 1, 0), std::invalid_argument);
  CHECK_THROWS_AS(ms::packed_array::from_words(words, 1, 33), std::invalid_argument);
  // A claimed size that no buffer could hold is rejected, not multiplied into an overflow.
  CHECK_THROWS_AS(ms::packed_array::from_words(words, ~std::size_t{0}, 32), std::invalid_argument);
  CHECK_THROWS_AS(ms::packed_array::from_words({}, 1, 1), std::invalid_argument);
  const auto empty = ms::packed_array::from_words({}, 0, 13);
  CHECK(empty.empty());
  CHECK(empty.unpack().empty());
}
