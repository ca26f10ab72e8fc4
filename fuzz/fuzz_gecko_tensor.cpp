// libFuzzer target: Gecko tensor decoder (minifloat/storage/gecko_tensor.hpp). The whole input
// is the buffer. Accepted buffers must agree with their header and survive a re-encode. A buffer
// whose header asks for a checksum is also decoded with its checksum recomputed, so that the
// fuzzer reaches the sections behind the CRC-32 check instead of stopping at it.
#include <bit>
#include <cstdint>
#include <vector>

#include <minifloat/storage/gecko_tensor.hpp>

#include "fuzz_input.hpp"

namespace {

void check_buffer(std::span<const std::uint8_t> buffer) {
  namespace st = minifloat::storage;
  using minifloat_fuzz::require;
  const std::size_t size = buffer.size();
  st::gecko_tensor_header header;
  const st::gecko_errc header_status = st::gecko_read_tensor_header(buffer, header);
  const st::gecko_tensor_decoded decoded = st::gecko_decode_tensor(buffer);
  if (header_status != st::gecko_errc::ok) {
    require(decoded.status == header_status, "decode reports the header's error");
    return;
  }
  // The header bounds the count by the buffer size, so this allocation stays small.
  require(header.count <= std::uint64_t{size} * 8, "count bounded by the buffer");
  if (decoded.status != st::gecko_errc::ok) {
    require(decoded.values.empty(), "no values on error");
    return;
  }
  require(decoded.values.size() == header.count, "decoded count matches the header");
  // A span of the wrong size is refused before anything is written.
  std::vector<float> wrong(decoded.values.size() + 1, 7.0F);
  require(st::gecko_decode_tensor(buffer, wrong) == st::gecko_errc::output_size_mismatch, "size mismatch refused");
  require(wrong.back() == 7.0F, "nothing written on a size mismatch");

  const st::gecko_tensor_options options{header.variant, header.mantissa_bits};
  const std::vector<std::uint8_t> again = st::gecko_encode_tensor(decoded.values, options);
  const st::gecko_tensor_decoded back = st::gecko_decode_tensor(again);
  require(back.status == st::gecko_errc::ok, "re-encoding decodes");
  require(back.values.size() == decoded.values.size(), "re-encoding keeps the count");
  for (std::size_t i = 0; i < back.values.size(); ++i)
    require(std::bit_cast<std::uint32_t>(back.values[i]) == std::bit_cast<std::uint32_t>(decoded.values[i]),
            "re-encoding is bit-exact");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace st = minifloat::storage;
  const std::span<const std::uint8_t> buffer(data, size);
  check_buffer(buffer);
  st::gecko_tensor_header header;
  if (st::gecko_read_tensor_header(buffer, header) == st::gecko_errc::ok && header.checksum) {
    std::vector<std::uint8_t> fixed(buffer.begin(), buffer.end());
    const std::size_t end = size - 4;
    const std::uint32_t crc = st::detail::gecko::crc32_of(std::span<const std::uint8_t>(fixed).first(end));
    for (std::size_t b = 0; b < 4; ++b) fixed[end + b] = static_cast<std::uint8_t>(crc >> (8 * b));
    check_buffer(fixed);
  }
  return 0;
}
