// libFuzzer target: Gecko tensor decoder (minifloat/storage/gecko_tensor.hpp). The whole input
// is the buffer. Accepted buffers must agree with their header and survive a re-encode.
#include <bit>
#include <cstdint>
#include <vector>

#include <minifloat/storage/gecko_tensor.hpp>

#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace st = minifloat::storage;
  using minifloat_fuzz::require;
  const std::span<const std::uint8_t> buffer(data, size);
  st::gecko_tensor_header header;
  const st::gecko_errc header_status = st::gecko_read_tensor_header(buffer, header);
  const st::gecko_tensor_decoded decoded = st::gecko_decode_tensor(buffer);
  if (header_status != st::gecko_errc::ok) {
    require(decoded.status == header_status, "decode reports the header's error");
    return 0;
  }
  // The header bounds the count by the buffer size, so this allocation stays small.
  require(header.count <= std::uint64_t{size} * 8, "count bounded by the buffer");
  if (decoded.status != st::gecko_errc::ok) {
    require(decoded.values.empty(), "no values on error");
    return 0;
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
  return 0;
}
