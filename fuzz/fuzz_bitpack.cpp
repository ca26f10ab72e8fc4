// libFuzzer target: bit-packed arrays built from untrusted words (minifloat/storage/bitpack.hpp):
// packed_array::from_words, its get/unpack, and the free unpack / get_field.
// Input: [bits: 1 byte, taken mod 34 so 0 and 33 (invalid) occur][count: 2 bytes little-endian]
// [words: the rest, 4 bytes each; a ragged tail byte count is dropped].
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <minifloat/storage/bitpack.hpp>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace st = minifloat::storage;
  using minifloat_fuzz::require;
  minifloat_fuzz::input in(data, size);
  const int bits = static_cast<int>(in.take(1) % 34);
  const auto count = static_cast<std::size_t>(in.take(2));
  const auto raw = in.rest();
  // An exact-size heap copy, so ASan sees any read past the last word.
  std::vector<std::uint32_t> words(raw.size() / 4);
  if (!words.empty()) std::memcpy(words.data(), raw.data(), words.size() * 4);

  const bool valid_bits = bits >= 1 && bits <= 32;
  const bool enough_words = valid_bits && words.size() >= st::packed_words(count, bits);
  st::packed_array a;
  try {
    a = st::packed_array::from_words(words, count, bits);
  } catch (const std::invalid_argument&) {
    require(!enough_words, "from_words rejected a valid buffer");
    return 0;
  }
  require(enough_words, "from_words accepted an invalid buffer");
  require(a.size() == count && a.bits() == bits, "from_words keeps size and bits");
  require(a.words().size() == st::packed_words(count, bits), "canonical word count");

  constexpr std::size_t canary = 8;
  std::vector<std::uint32_t> out(count + canary, 0xDEADBEEFU);
  a.unpack(std::span(out).first(count));
  for (std::size_t i = count; i < out.size(); ++i) require(out[i] == 0xDEADBEEFU, "unpack wrote past its span");
  const std::uint32_t high = bits == 32 ? 0 : ~((std::uint32_t{1} << bits) - 1);
  for (std::size_t i = 0; i < count; ++i) {
    require((out[i] & high) == 0, "field wider than bits");
    require(a.get(i) == out[i], "get agrees with unpack");
    require(st::get_field(words, bits, i) == out[i], "get_field on the raw words agrees");
  }
  // The free unpack reads the raw (uncanonical) words the same way.
  std::vector<std::uint32_t> free_out(count);
  st::unpack(words, bits, count, free_out);
  require(std::equal(free_out.begin(), free_out.end(), out.begin()), "free unpack agrees");
  // Packing the fields again gives the canonical words.
  require(st::packed_array::from_values(std::span(out).first(count), bits) == a, "pack(unpack(words)) is canonical");
  try {
    (void)a.get(count);
    require(false, "get past the end did not throw");
  } catch (const std::out_of_range&) {
  }
  return 0;
}
