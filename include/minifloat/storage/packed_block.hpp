// minifloat/storage/packed_block.hpp — block-scaled tensors at their true size: element codes
// bit-packed at the element format's width (4 bits for MXFP4/NVFP4, 6 for MXFP6, 8 for MXFP8
// and MXINT8) through bitpack.hpp, one 8-bit scale code per block beside them (E8M0 for OCP MX,
// E4M3 for NVFP4, plus NVFP4's fp32 per-tensor scale). MXFP4 takes 4 + 8/32 = 4.25 bits per value.
//
// Encoding goes through block.hpp (and so the one rounding core); 4- and 8-bit codes go from the
// kernel's registers straight into the words (packed_codes), 6-bit ones through a buffer of codes
// and bitpack.hpp's pack. Decoding gives exactly the values quantize_blocks gives for the same
// input and options, bit for bit.
// Errors: std::invalid_argument for bad formats, layouts, sizes or raw parts that do not fit;
// nothing is read outside the buffers held.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../block.hpp"
#include "bitpack.hpp"

namespace minifloat::storage {

namespace detail {
/// Element codes written straight into the packed words from the block kernel's registers
/// (block.hpp's code_sink calls store and fill): K = 4 or 8 bits, on a little-endian machine.
/// Codes are the element format's, so each lane is clean above K bits (pack_register_bytes
/// needs that). A register whose first field starts on a byte goes out as whole bytes;
/// a last odd 4-bit field, a field off a byte, and strided positions are set one by one.
template <int K>
struct packed_codes {
  std::uint32_t* words;
  template <class V>
  void store(std::size_t at, std::size_t stride, std::size_t count, const V& codes) {
    constexpr std::size_t lanes = sizeof(V) / sizeof(std::uint32_t);
    std::size_t l = 0;
    if (stride == 1 && at * K % 8 == 0) {
      alignas(64) unsigned char bytes[lanes * K / 8];
      pack_register_bytes<K>(codes, bytes);
      l = count * K / 8 * 8 / K;  // the fields in whole bytes
      std::memcpy(reinterpret_cast<unsigned char*>(words) + at * K / 8, bytes, count == lanes ? sizeof bytes : l * K / 8);
    }
    for (; l < count; ++l) set_field(words, K, at + l * stride, codes[l]);
  }
  void fill(std::size_t first, std::size_t stride, std::size_t m, std::uint32_t code) {
    for (std::size_t j = 0; j < m; ++j) set_field(words, K, first + j * stride, code);
  }
};
}  // namespace detail

class packed_block_tensor {
 public:
  packed_block_tensor() = default;

  /// The block-scaled codes of `values` (stats, if given, as block.hpp counts them).
  packed_block_tensor(std::span<const float> values, const block_format& f, const block_options& o = {},
                      const block_layout& layout = {}, block_stats* st = nullptr)
      : fmt_(f), layout_(resolved(layout, values.size())), size_(values.size()),
        elements_(values.size(), checked_bits(f)), scales_(block_count(values.size(), f, layout_)) {
    const int bits = elements_.bits();
    const bool one_row = layout_.rows == 1 && layout_.axis == 1;
    block_options oc = o;
    if (f.scaling == block_scaling::e4m3_times_tensor) {
      if (oc.tensor_scale == 0) oc.tensor_scale = nvfp4_tensor_scale(values);
      tensor_scale_ = checked_tensor_scale(f, oc.tensor_scale, "minifloat::storage::packed_block_tensor");
    }  // MX: no tensor scale (options.tensor_scale is NVFP4's only), tensor_scale() is 1
    // 4- and 8-bit elements (MXFP4, NVFP4, MXFP8, MXINT8) go from the kernel's registers into
    // the words in the same pass; other widths through a buffer of codes and bitpack.hpp's pack.
    if (std::endian::native == std::endian::little && (bits == 4 || bits == 8)) {
      constexpr const char* who = "minifloat::storage::packed_block_tensor";
      if (bits == 4)
        minifloat::detail::encode_blocks_into(values, detail::packed_codes<4>{elements_.words().data()}, scales_, f, oc,
                                              layout_, st, who);
      else
        minifloat::detail::encode_blocks_into(values, detail::packed_codes<8>{elements_.words().data()}, scales_, f, oc,
                                              layout_, st, who);
      return;
    }
    const std::size_t chunk = chunk_size();
    std::vector<std::uint32_t> codes(std::min(chunk, size_));
    for (std::size_t start = 0; start < size_; start += chunk) {
      const std::size_t m = std::min(chunk, size_ - start);
      const block_layout part = one_row ? block_layout{1, m, 1} : layout_;
      oc.index = o.index + start;
      const std::size_t first_scale = one_row ? start / static_cast<std::size_t>(f.block_size) : 0;
      encode_blocks(values.subspan(start, m), std::span<std::uint32_t>(codes.data(), m),
                    std::span<std::uint8_t>(scales_).subspan(first_scale, block_count(m, f, part)), f, oc, part, st);
      pack(std::span<const std::uint32_t>(codes.data(), m), bits,
           elements_.words().subspan(start / 32 * static_cast<std::size_t>(bits)));
    }
  }

  /// Adopts raw parts (e.g. read from a file): throws std::invalid_argument when the word or
  /// scale counts are not exactly those of the format, layout and size, or the tensor scale is
  /// not a positive finite float (NVFP4) or not 1 (MX formats, which have none).
  static packed_block_tensor from_parts(const block_format& f, const block_layout& layout, std::size_t size,
                                        std::span<const std::uint32_t> words, std::span<const std::uint8_t> scales,
                                        float tensor_scale = 1) {
    constexpr const char* who = "minifloat::storage::packed_block_tensor::from_parts";
    const int bits = checked_bits(f);
    packed_block_tensor t;
    t.fmt_ = f;
    t.layout_ = resolved(layout, size);
    t.size_ = size;
    if (const std::size_t want = packed_words(size, bits); words.size() != want)
      throw std::invalid_argument(std::string(who) + ": words has " + std::to_string(words.size()) + " words for the " +
                                  std::to_string(want) + " that " + std::to_string(size) + " codes of " +
                                  std::to_string(bits) + " bits take");
    const std::size_t blocks = block_count(size, f, t.layout_);
    if (scales.size() != blocks)
      throw std::invalid_argument(std::string(who) + ": scales has " + std::to_string(scales.size()) + " codes for " +
                                  std::to_string(blocks) + " blocks");
    if (f.scaling == block_scaling::e4m3_times_tensor) {
      t.tensor_scale_ = checked_tensor_scale(f, tensor_scale, who);
    } else if (tensor_scale != 1) {
      throw std::invalid_argument(std::string(who) + ": tensor_scale = " + std::to_string(tensor_scale) + ", but " +
                                  to_string(f) + " has no per-tensor scale (pass 1)");
    }
    t.elements_ = packed_array::from_words(words, size, bits);
    t.scales_.assign(scales.begin(), scales.end());
    return t;
  }

  const block_format& fmt() const { return fmt_; }
  const block_layout& layout() const { return layout_; }
  std::size_t size() const { return size_; }
  const packed_array& elements() const { return elements_; }
  std::span<const std::uint8_t> scales() const { return scales_; }
  /// NVFP4's per-tensor decode scale (1 for MX).
  float tensor_scale() const { return tensor_scale_; }

  /// Bytes held: element words, one byte per scale, and the fp32 per-tensor scale of NVFP4.
  std::size_t bytes() const { return bytes_for(size_, fmt_, layout_); }
  static std::size_t bytes_for(std::size_t n, const block_format& f, const block_layout& layout = {}) {
    const block_layout l = resolved(layout, n);
    return packed_words(n, checked_bits(f)) * 4 + block_count(n, f, l) +
           (f.scaling == block_scaling::e4m3_times_tensor ? sizeof(float) : 0);
  }

  /// The values, equal bit for bit to quantize_blocks' output for the same input and options.
  void decode(std::span<float> out) const {
    if (out.size() != size_)
      throw std::invalid_argument("minifloat::storage::packed_block_tensor::decode: output of " +
                                  std::to_string(out.size()) + " for " + std::to_string(size_) + " values");
    const int bits = elements_.bits();
    const bool one_row = layout_.rows == 1 && layout_.axis == 1;
    const std::size_t chunk = chunk_size();
    std::vector<std::uint32_t> codes(std::min(chunk, size_));
    for (std::size_t start = 0; start < size_; start += chunk) {
      const std::size_t m = std::min(chunk, size_ - start);
      const block_layout part = one_row ? block_layout{1, m, 1} : layout_;
      unpack(elements_.words().subspan(start / 32 * static_cast<std::size_t>(bits)), bits, m,
             std::span<std::uint32_t>(codes.data(), m));
      const std::size_t first_scale = one_row ? start / static_cast<std::size_t>(fmt_.block_size) : 0;
      decode_blocks(std::span<const std::uint32_t>(codes.data(), m),
                    std::span<const std::uint8_t>(scales_).subspan(first_scale, block_count(m, fmt_, part)),
                    out.subspan(start, m), fmt_, part, tensor_scale_);
    }
  }
  std::vector<float> decode() const {
    std::vector<float> out(size_);
    decode(out);
    return out;
  }

  friend bool operator==(const packed_block_tensor&, const packed_block_tensor&) = default;

 private:
  /// Values per encode/decode step: whole blocks that also start on a word (a multiple of 32
  /// fields) keep the code buffer small; a 2-D layout goes whole (its blocks are not runs).
  std::size_t chunk_size() const {
    if (!(layout_.rows == 1 && layout_.axis == 1)) return std::max<std::size_t>(size_, 1);
    const std::size_t unit = std::lcm(static_cast<std::size_t>(fmt_.block_size), std::size_t{32});
    return unit * std::max<std::size_t>(1, 8192 / unit);
  }
  static int checked_bits(const block_format& f) {
    f.validate();
    return f.element.bit_width();
  }
  static block_layout resolved(const block_layout& l, std::size_t n) {
    return minifloat::detail::resolved_layout(n, l, "minifloat::storage::packed_block_tensor");
  }
  /// NVFP4's S_t as the encoder takes it: a positive finite float.
  static float checked_tensor_scale(const block_format& f, float s, const char* who) {
    if (!(s > 0) || !std::isfinite(s))
      throw std::invalid_argument(std::string(who) + ": tensor_scale = " + std::to_string(s) + " of " + to_string(f) +
                                  " is not a positive finite float");
    return s;
  }

  block_format fmt_{};
  block_layout layout_{};
  std::size_t size_ = 0;
  packed_array elements_{};
  std::vector<std::uint8_t> scales_;
  float tensor_scale_ = 1;
};

}  // namespace minifloat::storage
