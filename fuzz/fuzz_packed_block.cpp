// libFuzzer target: block-scaled tensors built from untrusted parts (minifloat/storage/
// packed_block.hpp): packed_block_tensor::from_parts, then decode.
// Input: [format: 1 byte, mod 8: the 7 named block formats, 7 = block_size 0 (invalid)]
// [block size: 1 byte, 0 = the format's own][axis: 1 byte, mod 3 (2 is invalid)]
// [rows: 8 bytes][cols: 8 bytes][size: 2 bytes][tensor scale: 4 bytes, float bits]
// [word count: 2 bytes][that many words, 4 bytes each (fewer when the input ends)][scales: the rest]
// all little-endian. from_parts must accept exactly the parts whose counts the layout implies
// (worked out here with checked multiplications, not the library's check) and a tensor scale
// that fits the format, and its decode must equal decode_blocks of the unpacked codes.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <vector>

#include <minifloat/block.hpp>
#include <minifloat/storage/bitpack.hpp>
#include <minifloat/storage/packed_block.hpp>

#include "fuzz_input.hpp"

namespace {

/// The blocks of `size` values in rows × cols (cols 0: one row of all), or false when the
/// layout does not hold them; independent of block.hpp's check.
bool expected_blocks(std::size_t rows, std::size_t cols, int axis, std::size_t size, std::size_t b,
                     std::size_t& blocks) {
  if (axis != 0 && axis != 1) return false;
  if (cols == 0) cols = size;
  std::size_t product = 0;
  if (__builtin_mul_overflow(rows, cols, &product) || product != size) return false;
  if (size == 0) {  // empty: rows × 0 or 0 × cols, no blocks
    blocks = 0;
    return true;
  }
  blocks = axis == 1 ? rows * ((cols + b - 1) / b) : ((rows + b - 1) / b) * cols;
  return true;
}

bool same_bits(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace mf = minifloat;
  namespace st = minifloat::storage;
  using minifloat_fuzz::require;
  minifloat_fuzz::input in(data, size);
  const auto which = static_cast<std::size_t>(in.take(1) % 8);
  const auto block_size = static_cast<int>(in.take(1));
  const int axis = static_cast<int>(in.take(1) % 3);
  const auto rows = static_cast<std::size_t>(in.take(8, 1));
  const auto cols = static_cast<std::size_t>(in.take(8));
  const auto count = static_cast<std::size_t>(in.take(2));
  const float tensor_scale = std::bit_cast<float>(static_cast<std::uint32_t>(in.take(4, 0x3f800000u)));
  const auto nwords = static_cast<std::size_t>(in.take(2));
  mf::block_format f = which < std::size(mf::named_block_formats) ? mf::named_block_formats[which].second
                                                                  : mf::block_format{mf::e2m1, 0};
  if (block_size != 0 && which < std::size(mf::named_block_formats)) f.block_size = block_size;
  // exact-size heap copies, so ASan sees any read past the last word or scale
  const auto raw = in.rest();
  std::vector<std::uint32_t> words(std::min(nwords, raw.size() / 4));
  if (!words.empty()) std::memcpy(words.data(), raw.data(), words.size() * 4);
  const std::vector<std::uint8_t> scales(raw.begin() + static_cast<std::ptrdiff_t>(words.size() * 4), raw.end());

  const bool valid_format = f.problem().empty();
  const int bits = valid_format ? f.element.bit_width() : 0;
  std::size_t blocks = 0;
  const bool valid_layout =
      valid_format && expected_blocks(rows, cols, axis, count, static_cast<std::size_t>(f.block_size), blocks);
  const bool valid_scale = f.scaling == mf::block_scaling::e4m3_times_tensor
                               ? std::isfinite(tensor_scale) && tensor_scale > 0
                               : tensor_scale == 1.0f;
  const bool valid = valid_layout && valid_scale && words.size() == st::packed_words(count, bits) &&
                     scales.size() == blocks;
  const mf::block_layout layout{rows, cols, axis};
  st::packed_block_tensor t;
  try {
    t = st::packed_block_tensor::from_parts(f, layout, count, words, scales, tensor_scale);
  } catch (const std::invalid_argument&) {
    require(!valid, "from_parts rejected valid parts");
    return 0;
  }
  require(valid, "from_parts accepted parts that do not fit");
  require(t.size() == count && t.scales().size() == blocks, "from_parts keeps the size and every scale");
  require(t.bytes() == st::packed_words(count, bits) * 4 + blocks +
                           (f.scaling == mf::block_scaling::e4m3_times_tensor ? sizeof(float) : 0),
          "bytes counts words, scales and the tensor scale");

  constexpr std::size_t canary = 8;
  std::vector<float> out(count + canary, 123.0f);
  t.decode(std::span<float>(out).first(count));
  for (std::size_t i = count; i < out.size(); ++i) require(out[i] == 123.0f, "decode wrote past its span");
  // the chunked decode equals one decode_blocks call over the unpacked codes
  std::vector<std::uint32_t> codes(count);
  st::unpack(words, bits, count, codes);
  std::vector<float> whole(count);
  mf::decode_blocks<std::uint32_t>(codes, scales, whole, f, layout, t.tensor_scale());
  for (std::size_t i = 0; i < count; ++i) require(same_bits(out[i], whole[i]), "decode equals decode_blocks");
  // the parts it holds make the same tensor again
  require(st::packed_block_tensor::from_parts(t.fmt(), t.layout(), t.size(), t.elements().words(), t.scales(),
                                              t.tensor_scale()) == t,
          "from_parts of its own parts is the same tensor");
  return 0;
}
