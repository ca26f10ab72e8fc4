// fuzz/fuzz_gecko_exponents.hpp — the body of the two Gecko exponent-decoder targets.
// Input: [count: 2 bytes little-endian][the encoded stream, to the end]. The decoder must
// return an error or fill exactly `count` bytes, never touching the canary bytes after them;
// what it accepts must survive a re-encode / decode round trip.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include <minifloat/storage/gecko.hpp>

#include "fuzz_input.hpp"

namespace minifloat_fuzz {

inline int fuzz_gecko_exponents(const std::uint8_t* data, std::size_t size, minifloat::storage::gecko_variant variant) {
  namespace st = minifloat::storage;
  input in(data, size);
  const auto count = static_cast<std::size_t>(in.take(2));
  // The stream is the tail of libFuzzer's exact-size buffer, so ASan sees any over-read.
  const auto stream = in.rest();
  constexpr std::size_t canary = 16;
  std::vector<std::uint8_t> out(count + canary, 0xA5);
  const st::gecko_errc status = st::gecko_decode_exponents(stream, count, std::span(out).first(count), variant);
  require(std::all_of(out.end() - canary, out.end(), [](std::uint8_t b) { return b == 0xA5; }),
          "decoder wrote past the output span");
  require(!st::gecko_message(status).empty(), "every status has a message");
  if (status != st::gecko_errc::ok) return 0;

  // Accepted: floats with these exponents encode to a stream that decodes to them again, and
  // the encoder's minimal widths never need more bytes than what was accepted.
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = std::bit_cast<float>(std::uint32_t{out[i]} << 23);
  const auto again = st::gecko_encode_exponents(values, variant);
  require(again.size() == st::gecko_encoded_size(values, variant).bytes, "encoded size is exact");
  if (variant == st::gecko_variant::faithful) require(again.size() <= stream.size(), "faithful re-encoding is minimal");
  std::vector<std::uint8_t> back(count);
  require(st::gecko_decode_exponents(again, count, back, variant) == st::gecko_errc::ok, "re-encoding decodes");
  require(std::equal(back.begin(), back.end(), out.begin()), "re-encoding round-trips");
  return 0;
}

}  // namespace minifloat_fuzz
