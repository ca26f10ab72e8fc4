// minifloat/storage/packed_minifloat.hpp — arrays of minifloat codes bit-packed at their own
// width: 1 + E + M bits, or E + M bits when every value is known to be non-negative (the sign
// bit is then not stored). Floats are encoded straight into packed words and decoded straight
// out of them, a block at a time, through the core's rounding and code conversion
// (encode.hpp, bulk.hpp) and bitpack.hpp. Storage for the formats of the precision-assignment
// paper (§3, fp(e,m,b)) and the OCP FP8 formats at their true size.
//
// Errors: std::invalid_argument for a format that float cannot round to or spans of the wrong
// size; std::domain_error for a value without a code (NaN or an infinity in an all_finite
// format) and, with the sign omitted, for a negative value other than -0 (stored as +0; a NaN
// loses its sign). The words before the failing block are written.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../bulk.hpp"
#include "../format.hpp"
#include "../round.hpp"
#include "bitpack.hpp"
#include "detail/codes.hpp"

namespace minifloat::storage {

enum class sign_storage : std::uint8_t {
  stored,   ///< 1 + E + M bits per code
  omitted,  ///< E + M bits: values must be >= 0 (or -0, or NaN)
};

/// Bits per packed code.
constexpr int code_bits(const format& f, sign_storage s) {
  return s == sign_storage::stored ? f.bit_width() : f.bit_width() - 1;
}

namespace detail {
inline void check_codes_fit(const format& f, sign_storage s, const char* who) {
  if (auto p = source_problem<float>(f); !p.empty()) throw std::invalid_argument(std::string(who) + ": " + p);
  if (code_bits(f, s) < 1 || code_bits(f, s) > max_field_bits)
    throw std::invalid_argument(std::string(who) + ": codes of " + to_string(f) + " do not fit 1..32 bits");
}
}  // namespace detail

/// words[0, packed_words(in.size(), code_bits(f, s))) = the codes of in rounded to f with o
/// (stochastic draws use element index o.index + i).
inline void encode_packed(std::span<const float> in, std::span<std::uint32_t> words, const format& f,
                          const rounding_options& o = {}, sign_storage s = sign_storage::stored) {
  constexpr const char* who = "minifloat::storage::encode_packed";
  detail::check_codes_fit(f, s, who);
  const int bits = code_bits(f, s);
  detail::check_words(words.size(), in.size(), bits, who);
  const rounder<float> r(f, o);
  const std::uint32_t sign = std::uint32_t{1} << (f.exponent_bits + f.mantissa_bits);
  std::uint32_t codes[detail::block_values];
  for (std::size_t start = 0; start < in.size(); start += detail::block_values) {
    const std::size_t m = std::min(detail::block_values, in.size() - start);
    detail::encode_block(in.subspan(start, m), codes, r.advanced(start), start);
    if (s == sign_storage::omitted) {
      for (std::size_t i = 0; i < m; ++i) {
        if ((codes[i] & sign) && (codes[i] != sign) && !std::isnan(in[start + i]))
          throw std::domain_error(std::string(who) + ": element " + std::to_string(start + i) + " (" +
                                  std::to_string(in[start + i]) + ") is negative and the sign bit is not stored");
        codes[i] &= sign - 1;
      }
    }
    pack(std::span<const std::uint32_t>(codes, m), bits, words.subspan(start / 32 * static_cast<std::size_t>(bits)));
  }
}

/// out[i] = the value of code i of words (out.size() codes of code_bits(f, s) bits).
inline void decode_packed(std::span<const std::uint32_t> words, std::span<float> out, const format& f,
                          sign_storage s = sign_storage::stored) {
  constexpr const char* who = "minifloat::storage::decode_packed";
  detail::check_codes_fit(f, s, who);
  const int bits = code_bits(f, s);
  detail::check_words(words.size(), out.size(), bits, who);
  std::uint32_t codes[detail::block_values];
  for (std::size_t start = 0; start < out.size(); start += detail::block_values) {
    const std::size_t m = std::min(detail::block_values, out.size() - start);
    unpack(words.subspan(start / 32 * static_cast<std::size_t>(bits)), bits, m, std::span<std::uint32_t>(codes, m));
    decode(std::span<const std::uint32_t>(codes, m), out.subspan(start, m), f);  // a positive code is its own code
  }
}

/// An owning array of `size()` codes of format `fmt()`, bit-packed (see the header comment).
class packed_minifloat {
 public:
  /// `size` codes of +0.
  packed_minifloat(const format& f, std::size_t size, sign_storage s = sign_storage::stored)
      : fmt_(f), sign_(s), codes_(size, checked_bits(f, s)) {}
  /// The values rounded to f with o.
  packed_minifloat(std::span<const float> values, const format& f, const rounding_options& o = {},
                   sign_storage s = sign_storage::stored)
      : packed_minifloat(f, values.size(), s) {
    assign(values, o);
  }

  const format& fmt() const { return fmt_; }
  sign_storage sign() const { return sign_; }
  std::size_t size() const { return codes_.size(); }
  int bits() const { return codes_.bits(); }
  const packed_array& codes() const { return codes_; }

  /// Replaces every value (values.size() must equal size()).
  void assign(std::span<const float> values, const rounding_options& o = {}) {
    if (values.size() != size())
      throw std::invalid_argument("minifloat::storage::packed_minifloat::assign: " + std::to_string(values.size()) +
                                  " values for " + std::to_string(size()) + " codes");
    encode_packed(values, codes_.words(), fmt_, o, sign_);
  }
  void decode(std::span<float> out) const {
    if (out.size() != size())
      throw std::invalid_argument("minifloat::storage::packed_minifloat::decode: output of " +
                                  std::to_string(out.size()) + " for " + std::to_string(size()) + " codes");
    decode_packed(codes_.words(), out, fmt_, sign_);
  }
  std::vector<float> decode() const {
    std::vector<float> out(size());
    decode(out);
    return out;
  }
  float get(std::size_t i) const {
    float x = 0;
    const std::uint32_t code = codes_.get(i);
    minifloat::decode(std::span<const std::uint32_t>(&code, 1), std::span<float>(&x, 1), fmt_);
    return x;
  }
  /// Rounds x to the format with o (element index o.index) and stores its code at i.
  void set(std::size_t i, float x, const rounding_options& o = {}) {
    if (i >= size())
      throw std::out_of_range("minifloat::storage::packed_minifloat::set: index " + std::to_string(i) +
                              " is past the size " + std::to_string(size()));
    std::uint32_t word[1] = {};
    encode_packed(std::span<const float>(&x, 1), word, fmt_, o, sign_);
    codes_.set(i, word[0]);
  }

 private:
  static int checked_bits(const format& f, sign_storage s) {
    detail::check_codes_fit(f, s, "minifloat::storage::packed_minifloat");
    return code_bits(f, s);
  }

  format fmt_;
  sign_storage sign_;
  packed_array codes_;
};

}  // namespace minifloat::storage
