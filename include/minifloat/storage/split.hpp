// minifloat/storage/split.hpp — fp32 weights kept as a visible low-precision value h plus k
// extra bits, instead of an fp32 master copy (extra-mantissa-bits paper §3.1; our reading in
// docs/semantics.md §8). h is a code of any format float rounds to (bfloat16,
// binary16, e4m3, e5m2, the paper formats fp(e,m,b)), bit-packed at its width; the extra bits
// are bit-packed at k bits per weight (bitpack.hpp).
//
// Let n = k (truncating split) or k - 1 (stochastic split) and R = fp(E, M + n, bias), the
// visible format with n more mantissa bits (split_layout::restored()). Then
//  - truncating split: t = x rounded toward zero to R; h = t's leading bits (= x rounded toward
//    zero to h's format) and the extra field = the next n bits: code_R(t) = code_h << n | extra.
//  - stochastic split: h = x stochastically rounded (seeded, counter-based: element i draws
//    from (seed, index + i) as in the core); the extra field is flag << n | next n bits, where
//    flag says h was rounded away from zero, so the truncated value is recovered first.
//  - reconstruct returns t, x rounded toward zero to R: lossless exactly when x is a value of R
//    — finite, not beyond h's largest binade, and with no significand bit below the kept ones
//    (bf16 + 16 = binary32 itself: every fp32 but NaN payloads; fp16 + 13: every fp32 in fp16's
//    normal range; below it the significand runs out, as in fp16's subnormals).
// Special values: ±Inf stays ±Inf when h's format has it (extra 0), a finite x beyond the largest
// pair value saturates to it (h = ±max, extra all ones), NaN stays a quiet NaN of its sign (the
// payload is not kept), -0 stays -0. NaN and ±Inf into an all_finite format (e4m3's Inf: NaN, as
// the core encodes it) throw std::domain_error.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../bulk.hpp"
#include "../encode.hpp"
#include "../format.hpp"
#include "../random.hpp"
#include "../round.hpp"
#include "bitpack.hpp"
#include "detail/codes.hpp"
#include "packed_minifloat.hpp"

namespace minifloat::storage {

enum class split_mode : std::uint8_t {
  truncate,    ///< h rounded toward zero; k extra bits
  stochastic,  ///< h rounded stochastically; 1 un-round flag + k - 1 extra bits
};

/// How a weight is split.
struct split_layout {
  format visible = bfloat16;
  int extra_bits = 16;
  split_mode mode = split_mode::truncate;

  friend constexpr bool operator==(const split_layout&, const split_layout&) = default;

  /// Bits per visible code (1 + E + M).
  constexpr int visible_bits() const { return visible.bit_width(); }
  /// Significand bits below h's that the pair keeps.
  constexpr int kept_bits() const { return mode == split_mode::stochastic ? extra_bits - 1 : extra_bits; }
  /// The format of the reconstructed values: the visible format with kept_bits() more mantissa bits.
  constexpr format restored() const {
    format r = visible;
    r.mantissa_bits += kept_bits();
    return r;
  }
  /// The first problem with this layout, or an empty string.
  std::string problem() const {
    if (auto p = source_problem<float>(visible); !p.empty()) return "visible format: " + p;
    if (extra_bits < 1 || extra_bits > max_field_bits)
      return "extra_bits = " + std::to_string(extra_bits) + " is outside 1..32";
    if (visible.mantissa_bits + kept_bits() > 23)
      return "extra_bits = " + std::to_string(extra_bits) + " keeps " + std::to_string(kept_bits()) +
             " bits below a " + std::to_string(visible.mantissa_bits) + "-bit mantissa; float has " +
             std::to_string(23 - visible.mantissa_bits);
    return {};
  }
  void validate() const {
    if (auto p = problem(); !p.empty()) throw std::invalid_argument("minifloat::storage::split_layout: " + p);
  }
};

/// Where the stochastic draws of one split come from: element i uses (seed, index + i).
struct split_options {
  std::uint64_t seed = 0;
  std::uint64_t index = 0;
};

namespace detail {

inline split_layout validated(const split_layout& l) {
  l.validate();
  return l;
}

/// What a layout needs at run time, computed once per call.
struct split_plan {
  split_layout layout;
  int kept = 0;
  std::uint32_t kept_mask = 0;
  rounder<float> truncate;    ///< to restored(), toward zero; ±Inf stays ±Inf
  rounder<float> stochastic;  ///< to visible, stochastic, saturating
  bool clamp = false;         ///< nan_only: above the largest pair value R has codes that are not pairs
  float limit = 0;            ///< the largest pair value

  split_plan(const split_layout& l, const split_options& o)
      : layout(validated(l)),
        kept(l.kept_bits()),
        kept_mask(low_bits(l.kept_bits())),
        truncate(l.restored(), {rounding::toward_zero, overflow::infinity}),
        stochastic(l.visible, {rounding::stochastic, overflow::saturate, 0, o.seed, o.index}),
        clamp(l.visible.encoding == specials::nan_only) {
    const format& f = l.visible;
    const std::uint64_t max_code = (static_cast<std::uint64_t>(f.max_exponent_field()) << f.mantissa_bits) |
                                   f.max_mantissa_field();
    limit = std::bit_cast<float>(minifloat::detail::bits_of_code<float>(l.restored(), (max_code << kept) | kept_mask));
  }
};

/// Splits x (at most block_values values, element `first` of the whole array) into visible codes
/// and extra fields.
inline void split_block(const split_plan& p, std::span<const float> x, std::size_t first, std::uint32_t* visible,
                        std::uint32_t* extra) {
  float clamped[block_values];
  std::span<const float> source = x;
  if (p.clamp) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float v = x[i];
      clamped[i] = std::isfinite(v) && std::fabs(v) > p.limit ? std::copysign(p.limit, v) : v;
    }
    source = std::span<const float>(clamped, x.size());
  }
  std::uint32_t wide[block_values];
  encode_block(source, wide, p.truncate, first);
  if (p.layout.mode == split_mode::truncate) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      visible[i] = wide[i] >> p.kept;
      extra[i] = wide[i] & p.kept_mask;
    }
    return;
  }
  encode_block(x, visible, p.stochastic.advanced(first), first);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t truncated = wide[i] >> p.kept;
    if (!std::isfinite(x[i])) visible[i] = truncated;  // NaN and Inf are not rounded (saturation would)
    const std::uint32_t flag = visible[i] != truncated;
    extra[i] = (flag << p.kept) | (wide[i] & p.kept_mask);
  }
}

/// out = the restored values of the pairs (visible[i], extra[i]); visible is overwritten.
inline void reconstruct_block(const split_layout& l, std::uint32_t* visible, const std::uint32_t* extra,
                              std::span<float> out) {
  const int kept = l.kept_bits();
  const std::uint32_t kept_mask = low_bits(kept);
  if (l.mode == split_mode::truncate) {
    for (std::size_t i = 0; i < out.size(); ++i) visible[i] = (visible[i] << kept) | extra[i];
  } else {
    // A set flag means h is one step away from zero from the truncated value: its code's
    // predecessor (codes of one sign are consecutive across binades).
    for (std::size_t i = 0; i < out.size(); ++i)
      visible[i] = ((visible[i] - (extra[i] >> kept)) << kept) | (extra[i] & kept_mask);
  }
  decode(std::span<const std::uint32_t>(visible, out.size()), out, l.restored());
}

/// The layouts whose pairs are the leading bits of a float: bfloat16 + 8 or + 16, truncating.
/// Their restored format R = fp(8, 7 + k, 127) has float's binades and specials, so R's code of
/// a float x (toward zero) is x's bits shifted right by 16 - k and R's value of a code is the code
/// shifted back — except NaN, which the core encodes as R's quiet NaN of its sign and decodes as
/// float's (the payload is not kept) — and with 16- and 8-bit fields the packed words are plain
/// little-endian arrays. split_into and reconstruct take these layouts in one pass per block
/// without the core's encode and decode or the bit-packing kernels; tests/storage/test_split.cpp
/// checks them against the core (every special, subnormals, NaN payloads, arbitrary codes).
inline bool float_prefix_layout(const split_layout& l) {
  return std::endian::native == std::endian::little && l.visible == bfloat16 && l.mode == split_mode::truncate &&
         (l.extra_bits == 8 || l.extra_bits == 16);
}

/// The float bits whose prefix a pair of a float_prefix_layout keeps: NaN made the quiet NaN of
/// its sign (what the core's R encodes and decodes NaN to), every other float unchanged.
inline std::uint32_t canonical_nan_bits(std::uint32_t bits) {
  constexpr std::uint32_t quiet_nan = 0x7FC00000U;  // float's exponent field all ones and its quiet bit
  return (bits & 0x7FFFFFFFU) > 0x7F800000U ? (bits & 0x80000000U) | quiet_nan : bits;
}

/// R's code (visible bits, then K extra bits) of a float, and R's value of a code, for a
/// float_prefix_layout with K extra bits.
template <int K>
inline std::uint32_t prefix_code(float x) {
  return canonical_nan_bits(std::bit_cast<std::uint32_t>(x)) >> (16 - K);
}
template <int K>
inline float prefix_value(std::uint32_t code) {
  return std::bit_cast<float>(canonical_nan_bits(code << (16 - K)));
}

/// The weights of a float_prefix_layout seen one at a time in place: get(i) is reconstruct's
/// value of pair i, set(i, x) stores x as split_into does. An optimizer's one-pass loop reads and
/// writes the packed words through it (no restored copy, no chunk passes).
template <class Extra>
class float_prefix_weights {
 public:
  static constexpr int k = 8 * sizeof(Extra);
  float_prefix_weights(std::span<std::uint32_t> visible_words, std::span<std::uint32_t> extra_words, std::size_t n)
      : visible_(reinterpret_cast<unsigned char*>(visible_words.data())),
        extra_(reinterpret_cast<unsigned char*>(extra_words.data())),
        size_(n) {}
  std::size_t size() const { return size_; }
  float get(std::size_t i) const {
    std::uint16_t h;
    Extra e;
    std::memcpy(&h, visible_ + 2 * i, 2);
    std::memcpy(&e, extra_ + sizeof(Extra) * i, sizeof(Extra));
    return prefix_value<k>((std::uint32_t{h} << k) | e);
  }
  void set(std::size_t i, float x) const {
    const std::uint32_t code = prefix_code<k>(x);
    const auto h = static_cast<std::uint16_t>(code >> k);
    const auto e = static_cast<Extra>(code);
    std::memcpy(visible_ + 2 * i, &h, 2);
    std::memcpy(extra_ + sizeof(Extra) * i, &e, sizeof(Extra));
  }

 private:
  unsigned char* visible_;
  unsigned char* extra_;
  std::size_t size_;
};

/// split_into for a float_prefix_layout with extra fields of type Extra (uint8_t or uint16_t).
template <class Extra>
void split_float_prefix(std::span<const float> x, std::span<std::uint32_t> visible_words,
                        std::span<std::uint32_t> extra_words) {
  constexpr int k = 8 * sizeof(Extra);
  std::uint16_t visible[block_values];
  Extra extra[block_values];
  auto* const vbytes = reinterpret_cast<unsigned char*>(visible_words.data());
  auto* const ebytes = reinterpret_cast<unsigned char*>(extra_words.data());
  for (std::size_t start = 0; start < x.size(); start += block_values) {
    const std::size_t m = std::min(block_values, x.size() - start);
    for (std::size_t i = 0; i < m; ++i) {
      const std::uint32_t code = prefix_code<k>(x[start + i]);
      visible[i] = static_cast<std::uint16_t>(code >> k);
      extra[i] = static_cast<Extra>(code);
    }
    std::memcpy(vbytes + start * 2, visible, m * 2);
    std::memcpy(ebytes + start * sizeof(Extra), extra, m * sizeof(Extra));
  }
  // As pack: the bits after the last field of the last word are zero (no words for no values).
  if (x.empty()) return;
  const std::size_t vend = packed_words(x.size(), 16) * 4, eend = packed_words(x.size(), k) * 4;
  std::memset(vbytes + x.size() * 2, 0, vend - x.size() * 2);
  std::memset(ebytes + x.size() * sizeof(Extra), 0, eend - x.size() * sizeof(Extra));
}

/// reconstruct for a float_prefix_layout with extra fields of type Extra.
template <class Extra>
void reconstruct_float_prefix(std::span<const std::uint32_t> visible_words, std::span<const std::uint32_t> extra_words,
                              std::span<float> out) {
  constexpr int k = 8 * sizeof(Extra);
  std::uint16_t visible[block_values];
  Extra extra[block_values];
  const auto* const vbytes = reinterpret_cast<const unsigned char*>(visible_words.data());
  const auto* const ebytes = reinterpret_cast<const unsigned char*>(extra_words.data());
  for (std::size_t start = 0; start < out.size(); start += block_values) {
    const std::size_t m = std::min(block_values, out.size() - start);
    std::memcpy(visible, vbytes + start * 2, m * 2);
    std::memcpy(extra, ebytes + start * sizeof(Extra), m * sizeof(Extra));
    for (std::size_t i = 0; i < m; ++i) {
      out[start + i] = prefix_value<k>((std::uint32_t{visible[i]} << k) | extra[i]);
    }
  }
}

/// split() with a prepared plan; x is element `first` onwards of the array (first % 32 == 0) and
/// the word spans start at that element.
inline void split_into(const split_plan& p, std::span<const float> x, std::size_t first,
                       std::span<std::uint32_t> visible_words, std::span<std::uint32_t> extra_words) {
  const split_layout& l = p.layout;
  const auto vb = static_cast<std::size_t>(l.visible_bits());
  const auto eb = static_cast<std::size_t>(l.extra_bits);
  check_words(visible_words.size(), x.size(), l.visible_bits(), "minifloat::storage::split");
  check_words(extra_words.size(), x.size(), l.extra_bits, "minifloat::storage::split");
  if (float_prefix_layout(l)) {
    if (l.extra_bits == 8) split_float_prefix<std::uint8_t>(x, visible_words, extra_words);
    else split_float_prefix<std::uint16_t>(x, visible_words, extra_words);
    return;
  }
  std::uint32_t visible[block_values], extra[block_values];
  for (std::size_t start = 0; start < x.size(); start += block_values) {
    const std::size_t m = std::min(block_values, x.size() - start);
    split_block(p, x.subspan(start, m), first + start, visible, extra);
    pack(std::span<const std::uint32_t>(visible, m), l.visible_bits(), visible_words.subspan(start / 32 * vb));
    pack(std::span<const std::uint32_t>(extra, m), l.extra_bits, extra_words.subspan(start / 32 * eb));
  }
}

}  // namespace detail

/// Splits x: visible_words get packed_words(n, l.visible_bits()) words of codes, extra_words
/// packed_words(n, l.extra_bits) words of extra fields (n = x.size()).
inline void split(std::span<const float> x, const split_layout& l, std::span<std::uint32_t> visible_words,
                  std::span<std::uint32_t> extra_words, const split_options& o = {}) {
  detail::split_into(detail::split_plan(l, o), x, 0, visible_words, extra_words);
}

/// out[i] = the restored value of pair i: x rounded toward zero to l.restored() for out.size() pairs.
inline void reconstruct(std::span<const std::uint32_t> visible_words, std::span<const std::uint32_t> extra_words,
                        const split_layout& l, std::span<float> out) {
  l.validate();
  const auto vb = static_cast<std::size_t>(l.visible_bits());
  const auto eb = static_cast<std::size_t>(l.extra_bits);
  detail::check_words(visible_words.size(), out.size(), l.visible_bits(), "minifloat::storage::reconstruct");
  detail::check_words(extra_words.size(), out.size(), l.extra_bits, "minifloat::storage::reconstruct");
  if (detail::float_prefix_layout(l)) {
    if (l.extra_bits == 8) detail::reconstruct_float_prefix<std::uint8_t>(visible_words, extra_words, out);
    else detail::reconstruct_float_prefix<std::uint16_t>(visible_words, extra_words, out);
    return;
  }
  std::uint32_t visible[detail::block_values], extra[detail::block_values];
  for (std::size_t start = 0; start < out.size(); start += detail::block_values) {
    const std::size_t m = std::min(detail::block_values, out.size() - start);
    unpack(visible_words.subspan(start / 32 * vb), l.visible_bits(), m, std::span<std::uint32_t>(visible, m));
    unpack(extra_words.subspan(start / 32 * eb), l.extra_bits, m, std::span<std::uint32_t>(extra, m));
    detail::reconstruct_block(l, visible, extra, out.subspan(start, m));
  }
}

/// A tensor in split storage: size() weights as packed visible codes plus packed extra fields.
/// Each rewrite (assign, or an optimizer step) is a new generation: stochastic draws come from
/// (seed, generation, element index), so results do not depend on how the work is chunked.
class split_tensor {
 public:
  split_tensor(std::span<const float> x, const split_layout& l, std::uint64_t seed = 0)
      : layout_(detail::validated(l)),
        seed_(seed),
        plan_(l, draws(seed, 0)),
        visible_(x.size(), l.visible_bits()),
        extra_(x.size(), l.extra_bits) {
    store(0, x);
  }

  /// The tensor whose parts these are — what layout(), seed(), generation(), visible() and
  /// extra() return — so a checkpoint restores it exactly, later stochastic draws included.
  /// Throws std::invalid_argument when the arrays' field widths differ from the layout's or
  /// their sizes differ from each other.
  static split_tensor from_parts(const split_layout& l, std::uint64_t seed, std::uint64_t generation,
                                 packed_array visible, packed_array extra) {
    split_tensor t(std::span<const float>{}, l, seed);
    if (visible.bits() != l.visible_bits() || extra.bits() != l.extra_bits || visible.size() != extra.size())
      throw std::invalid_argument("minifloat::storage::split_tensor::from_parts: " + std::to_string(visible.size()) +
                                  " codes of " + std::to_string(visible.bits()) + " bits and " +
                                  std::to_string(extra.size()) + " extra fields of " + std::to_string(extra.bits()) +
                                  " bits for a layout of " + std::to_string(l.visible_bits()) + " + " +
                                  std::to_string(l.extra_bits) + " bits");
    t.visible_ = std::move(visible);
    t.extra_ = std::move(extra);
    t.generation_ = generation;
    t.plan_ = detail::split_plan(l, draws(seed, generation));
    return t;
  }

  std::size_t size() const { return visible_.size(); }
  const split_layout& layout() const { return layout_; }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t generation() const { return generation_; }
  /// The visible codes (for 8- and 16-bit formats, on a little-endian machine, the words are a
  /// plain uint8_t / uint16_t array of codes).
  const packed_array& visible() const { return visible_; }
  const packed_array& extra() const { return extra_; }

  /// Splits x (x.size() must equal size()) as a new generation.
  void assign(std::span<const float> x) {
    if (x.size() != size())
      throw std::invalid_argument("minifloat::storage::split_tensor::assign: " + std::to_string(x.size()) +
                                  " values for " + std::to_string(size()) + " weights");
    next_generation();
    store(0, x);
  }
  /// out = the restored weights.
  void reconstruct(std::span<float> out) const { load(0, out); }
  std::vector<float> reconstruct() const {
    std::vector<float> out(size());
    load(0, out);
    return out;
  }
  /// out = the visible values h (what the forward pass uses).
  void visible_values(std::span<float> out) const {
    if (out.size() != size())
      throw std::invalid_argument("minifloat::storage::split_tensor::visible_values: output of " +
                                  std::to_string(out.size()) + " for " + std::to_string(size()) + " weights");
    decode_packed(visible_.words(), out, layout_.visible);
  }

  // Chunked access for in-place updates: `start` must be a multiple of 32.
  /// out = restored weights [start, start + out.size()).
  void load(std::size_t start, std::span<float> out) const {
    check_range(start, out.size(), "load");
    storage::reconstruct(visible_.words_from(start), extra_.words_from(start), layout_, out);
  }
  /// Splits x into weights [start, start + x.size()) in the current generation.
  void store(std::size_t start, std::span<const float> x) {
    check_store_range(start, x.size());
    detail::split_into(plan_, x, start, visible_.words_from(start), extra_.words_from(start));
  }
  /// Whether store() accepts every float: false for an all_finite visible format, where NaN and
  /// ±Inf have no code (store() throws std::domain_error for them).
  bool stores_every_float() const { return layout_.visible.encoding != specials::all_finite; }
  /// The index of the first value of x that store() would reject, or x.size().
  std::size_t first_rejected(std::span<const float> x) const {
    if (stores_every_float()) return x.size();
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!std::isfinite(x[i])) return i;
    return x.size();
  }
  /// The visible format (what the messages of a rejected store name).
  const format& stored_format() const { return layout_.visible; }
  /// For a float-prefix layout (bfloat16 + 8 or + 16, truncating: detail::float_prefix_layout),
  /// starts a new generation and calls f(detail::float_prefix_weights<uint8_t or uint16_t>) to
  /// rewrite the weights in place, element by element; returns false, calling nothing, for other
  /// layouts. f must set every weight it reads what store() would store for it.
  template <class F>
  bool rewrite_float_prefix(F f) {
    if (!detail::float_prefix_layout(layout_)) return false;
    next_generation();
    if (layout_.extra_bits == 8)
      f(detail::float_prefix_weights<std::uint8_t>(visible_.words(), extra_.words(), size()));
    else
      f(detail::float_prefix_weights<std::uint16_t>(visible_.words(), extra_.words(), size()));
    return true;
  }
  /// Starts a new generation (fresh stochastic draws for the next stores).
  void next_generation() {
    ++generation_;
    plan_ = detail::split_plan(layout_, draws(seed_, generation_));
  }

 private:
  static split_options draws(std::uint64_t seed, std::uint64_t generation) {
    return {generation_seed(seed, generation), 0};
  }
  void check_range(std::size_t start, std::size_t n, const char* who) const {
    if (start % 32 != 0 || start > size() || n > size() - start)
      throw std::out_of_range(std::string("minifloat::storage::split_tensor::") + who + ": range [" +
                              std::to_string(start) + ", +" + std::to_string(n) + ") of " + std::to_string(size()) +
                              " weights (the start must be a multiple of 32)");
  }
  void check_store_range(std::size_t start, std::size_t n) const {
    check_range(start, n, "store");
    // Packing rewrites whole words, so a range ending inside a word would clear the start of the
    // next range: only the final range may.
    if (n % 32 != 0 && start + n != size())
      throw std::out_of_range("minifloat::storage::split_tensor::store: a range that does not end at the last "
                              "weight must hold a multiple of 32 weights");
  }

  split_layout layout_;
  std::uint64_t seed_;
  std::uint64_t generation_ = 0;
  detail::split_plan plan_;
  packed_array visible_;
  packed_array extra_;
};

}  // namespace minifloat::storage
