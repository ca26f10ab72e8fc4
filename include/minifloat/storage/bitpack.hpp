// minifloat/storage/bitpack.hpp — arrays of k-bit fields (k = 1..32) packed densely into
// 32-bit words: the storage of the extra mantissa bits (extra-mantissa-bits paper §3.1, Fig. 1;
// docs/semantics.md §8) and of minifloat codes (packed_minifloat.hpp).
//
// Layout: field i starts at bit i*k of a little-endian stream of 32-bit words — word
// floor(i*k/32), bit offset (i*k) mod 32 — and continues into the next word when it does not fit,
// so 32 fields fill exactly k words. docs/storage.md draws it.
//
// Values wider than k bits: pack, set_field and packed_array::set keep their low k bits;
// pack_checked and packed_array::set_checked throw std::invalid_argument instead. Spans that are
// too short throw std::invalid_argument; an index past the end throws std::out_of_range. Nothing
// reads or writes outside the spans it is given; pack writes exactly packed_words(n, k) words,
// with the bits after the last field zero. Input and output spans must not overlap.
// With k known at compile time call pack<k> / unpack<k>; the run-time overloads dispatch to them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../parallel.hpp"
#include "detail/bitpack_kernels.hpp"

namespace minifloat::storage {

inline constexpr int max_field_bits = 32;

namespace detail {
[[noreturn]] inline void bad_bits(int bits, const char* who) {
  throw std::invalid_argument(std::string(who) + ": bits = " + std::to_string(bits) + " is outside 1..32");
}
constexpr void check_bits(int bits, const char* who) {
  if (bits < 1 || bits > max_field_bits) bad_bits(bits, who);
}
[[noreturn]] inline void too_few_words(std::size_t have, std::size_t count, int bits, const char* who) {
  throw std::invalid_argument(std::string(who) + ": " + std::to_string(count) + " fields of " + std::to_string(bits) +
                              " bits need " + std::to_string(words_for(count, bits)) + " words, the buffer has " +
                              std::to_string(have));
}
inline void check_words(std::size_t have, std::size_t count, int bits, const char* who) {
  if (have < words_for(count, bits)) too_few_words(have, count, bits, who);
}
template <class A, class B>
void check_disjoint(std::span<A> a, std::span<B> b, const char* who) {
  const std::less<const void*> before;
  const void* a0 = a.data();
  const void* a1 = a.data() + a.size();
  const void* b0 = b.data();
  const void* b1 = b.data() + b.size();
  if (!a.empty() && !b.empty() && before(a0, b1) && before(b0, a1))
    throw std::invalid_argument(std::string(who) + ": input and output overlap");
}

inline void check_pack(std::span<const std::uint32_t> values, int bits, std::span<std::uint32_t> words) {
  constexpr const char* who = "minifloat::storage::pack";
  check_bits(bits, who);
  check_words(words.size(), values.size(), bits, who);
  check_disjoint(values, words, who);
}
inline void check_unpack(std::span<const std::uint32_t> words, int bits, std::size_t count,
                         std::span<std::uint32_t> out) {
  constexpr const char* who = "minifloat::storage::unpack";
  check_bits(bits, who);
  check_words(words.size(), count, bits, who);
  if (out.size() < count)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(count) + " fields do not fit an output of " +
                                std::to_string(out.size()));
  check_disjoint(words, out.first(count), who);
}
/// Fields of `bits` bits that `nwords` words hold completely.
constexpr std::size_t field_capacity(std::size_t nwords, int bits) {
  const auto k = static_cast<std::size_t>(bits);
  return nwords / k * 32 + nwords % k * 32 / k;
}
[[noreturn]] inline void field_past_end(std::size_t nwords, int bits, std::size_t index, const char* who) {
  throw std::out_of_range(std::string(who) + ": field " + std::to_string(index) + " of " + std::to_string(bits) +
                          " bits lies past " + std::to_string(nwords) + " words");
}
inline void check_field(std::size_t nwords, int bits, std::size_t index, const char* who) {
  check_bits(bits, who);
  if (index >= field_capacity(nwords, bits)) field_past_end(nwords, bits, index, who);
}

/// Index of the first value wider than `bits` bits, or values.size().
inline std::size_t first_too_wide(std::span<const std::uint32_t> values, int bits) {
  const std::uint32_t high = ~low_bits(bits);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] & high) return i;
  return values.size();
}

using pack_fn = void (*)(const std::uint32_t*, std::size_t, std::uint32_t*);
using unpack_fn = void (*)(const std::uint32_t*, std::size_t, std::size_t, std::uint32_t*);
template <std::size_t... I>
constexpr std::array<pack_fn, sizeof...(I)> pack_table(std::index_sequence<I...>) {
  return {&pack_fixed<static_cast<int>(I) + 1>...};
}
template <std::size_t... I>
constexpr std::array<unpack_fn, sizeof...(I)> unpack_table(std::index_sequence<I...>) {
  return {&unpack_fixed<static_cast<int>(I) + 1>...};
}
/// The kernels for bits = 1..32, indexed by bits - 1.
inline constexpr auto pack_kernels = pack_table(std::make_index_sequence<max_field_bits>{});
inline constexpr auto unpack_kernels = unpack_table(std::make_index_sequence<max_field_bits>{});
}  // namespace detail

/// The low `bits` bits set.
constexpr std::uint32_t field_mask(int bits) {
  detail::check_bits(bits, "minifloat::storage::field_mask");
  return detail::low_bits(bits);
}

/// Words that hold `count` fields of `bits` bits: ceil(count * bits / 32).
constexpr std::size_t packed_words(std::size_t count, int bits) {
  detail::check_bits(bits, "minifloat::storage::packed_words");
  return detail::words_for(count, bits);
}

/// Packs values (each masked to Bits bits) into words[0, packed_words(values.size(), Bits)).
template <int Bits>
void pack(std::span<const std::uint32_t> values, std::span<std::uint32_t> words) {
  static_assert(Bits >= 1 && Bits <= max_field_bits, "minifloat::storage::pack: Bits must be in 1..32");
  detail::check_pack(values, Bits, words);
  detail::pack_fixed<Bits>(values.data(), values.size(), words.data());
}
inline void pack(std::span<const std::uint32_t> values, int bits, std::span<std::uint32_t> words) {
  detail::check_pack(values, bits, words);
  detail::pack_kernels[static_cast<std::size_t>(bits - 1)](values.data(), values.size(), words.data());
}

/// pack, but throws std::invalid_argument (writing nothing) when a value needs more than `bits` bits.
inline void pack_checked(std::span<const std::uint32_t> values, int bits, std::span<std::uint32_t> words) {
  detail::check_bits(bits, "minifloat::storage::pack_checked");
  if (const std::size_t i = detail::first_too_wide(values, bits); i != values.size())
    throw std::invalid_argument("minifloat::storage::pack_checked: value " + std::to_string(values[i]) +
                                " at index " + std::to_string(i) + " does not fit in " + std::to_string(bits) +
                                " bits");
  pack(values, bits, words);
}

/// out[0, count) = the first `count` fields of words (which must hold packed_words(count, Bits)
/// words); writes only out[0, count).
template <int Bits>
void unpack(std::span<const std::uint32_t> words, std::size_t count, std::span<std::uint32_t> out) {
  static_assert(Bits >= 1 && Bits <= max_field_bits, "minifloat::storage::unpack: Bits must be in 1..32");
  detail::check_unpack(words, Bits, count, out);
  detail::unpack_fixed<Bits>(words.data(), words.size(), count, out.data());
}
inline void unpack(std::span<const std::uint32_t> words, int bits, std::size_t count, std::span<std::uint32_t> out) {
  detail::check_unpack(words, bits, count, out);
  detail::unpack_kernels[static_cast<std::size_t>(bits - 1)](words.data(), words.size(), count, out.data());
}

/// pack and unpack on up to t threads (parallel.hpp): chunks of whole 32-field groups start at
/// whole words, so each thread writes its own words and the result is the one-thread call's.
inline void pack(std::span<const std::uint32_t> values, int bits, std::span<std::uint32_t> words,
                 minifloat::threads t) {
  detail::check_pack(values, bits, words);
  minifloat::detail::for_each_chunk(values.size(), t, [&](std::size_t, std::size_t start, std::size_t n) {
    const std::size_t at = start / 32 * static_cast<std::size_t>(bits);
    pack(values.subspan(start, n), bits, words.subspan(at, packed_words(n, bits)));
  });
}
inline void unpack(std::span<const std::uint32_t> words, int bits, std::size_t count, std::span<std::uint32_t> out,
                   minifloat::threads t) {
  detail::check_unpack(words, bits, count, out);
  minifloat::detail::for_each_chunk(count, t, [&](std::size_t, std::size_t start, std::size_t n) {
    const std::size_t at = start / 32 * static_cast<std::size_t>(bits);
    unpack(words.subspan(at, packed_words(n, bits)), bits, n, out.subspan(start, n));
  });
}

/// Field `index` of words; std::out_of_range when it does not lie inside the span.
inline std::uint32_t get_field(std::span<const std::uint32_t> words, int bits, std::size_t index) {
  detail::check_field(words.size(), bits, index, "minifloat::storage::get_field");
  return detail::get_field(words.data(), bits, index);
}
/// Sets field `index` to the low `bits` bits of value; other bits stay.
inline void set_field(std::span<std::uint32_t> words, int bits, std::size_t index, std::uint32_t value) {
  detail::check_field(words.size(), bits, index, "minifloat::storage::set_field");
  detail::set_field(words.data(), bits, index, value);
}

/// An owning array of `size()` fields of `bits()` bits in the layout above. Its words are
/// canonical: the bits after the last field are zero.
class packed_array {
 public:
  packed_array() = default;
  /// `size` zero fields.
  packed_array(std::size_t size, int bits) : size_(size), bits_(bits) {
    detail::check_bits(bits, "minifloat::storage::packed_array");
    words_.assign(detail::words_for(size, bits), 0);
  }
  /// The values, each masked to `bits` bits.
  static packed_array from_values(std::span<const std::uint32_t> values, int bits) {
    packed_array a(values.size(), bits);
    a.assign(values);
    return a;
  }
  /// Adopts `size` fields from an untrusted word buffer: throws std::invalid_argument when bits
  /// is outside 1..32 or the buffer holds fewer than packed_words(size, bits) words. Words past
  /// those are ignored, and so are the bits after the last field (cleared in the copy).
  static packed_array from_words(std::span<const std::uint32_t> words, std::size_t size, int bits) {
    detail::check_bits(bits, "minifloat::storage::packed_array::from_words");
    detail::check_words(words.size(), size, bits, "minifloat::storage::packed_array::from_words");
    packed_array a;
    a.size_ = size;
    a.bits_ = bits;
    a.words_.assign(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(detail::words_for(size, bits)));
    a.clear_padding();
    return a;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int bits() const { return bits_; }
  std::span<const std::uint32_t> words() const { return words_; }
  /// Writable words for the span kernels; keep the padding bits zero.
  std::span<std::uint32_t> words() { return words_; }
  /// The words from field `first` on; `first` is a multiple of 32, where a word boundary falls
  /// at any width (the chunked accessors of the stored tensors).
  std::span<const std::uint32_t> words_from(std::size_t first) const { return words().subspan(word_of(first)); }
  std::span<std::uint32_t> words_from(std::size_t first) { return words().subspan(word_of(first)); }
  /// Just the words of fields [first, first + count) (`first` a multiple of 32): what a chunk's
  /// reader may touch while other threads write the chunks beside it (the unpack kernels read
  /// ahead as far as the span they are given reaches).
  std::span<const std::uint32_t> words_of(std::size_t first, std::size_t count) const {
    return words().subspan(word_of(first), detail::words_for(count, bits_));
  }

  std::uint32_t get(std::size_t i) const {
    check_index(i, "get");
    return detail::get_field(words_.data(), bits_, i);
  }
  /// Stores the low bits() bits of v.
  void set(std::size_t i, std::uint32_t v) {
    check_index(i, "set");
    detail::set_field(words_.data(), bits_, i, v);
  }
  /// Stores v; std::invalid_argument when it needs more than bits() bits.
  void set_checked(std::size_t i, std::uint32_t v) {
    check_index(i, "set_checked");
    if (v & ~detail::low_bits(bits_))
      throw std::invalid_argument("minifloat::storage::packed_array::set_checked: " + std::to_string(v) +
                                  " does not fit in " + std::to_string(bits_) + " bits");
    detail::set_field(words_.data(), bits_, i, v);
  }
  /// Replaces every field (values.size() must equal size()), each masked to bits() bits.
  void assign(std::span<const std::uint32_t> values) {
    if (values.size() != size_)
      throw std::invalid_argument("minifloat::storage::packed_array::assign: " + std::to_string(values.size()) +
                                  " values for " + std::to_string(size_) + " fields");
    pack(values, bits_, words_);
  }
  /// out[0, size()) = the fields; out must hold at least size() values.
  void unpack(std::span<std::uint32_t> out) const { storage::unpack(words_, bits_, size_, out); }
  std::vector<std::uint32_t> unpack() const {
    std::vector<std::uint32_t> out(size_);
    unpack(out);
    return out;
  }

  friend bool operator==(const packed_array&, const packed_array&) = default;

 private:
  std::size_t word_of(std::size_t first) const { return first / 32 * static_cast<std::size_t>(bits_); }
  void check_index(std::size_t i, const char* who) const {
    if (i >= size_)
      throw std::out_of_range(std::string("minifloat::storage::packed_array::") + who + ": index " + std::to_string(i) +
                              " is past the size " + std::to_string(size_));
  }
  void clear_padding() {
    const std::size_t used = size_ % 32 * static_cast<std::size_t>(bits_) % 32;
    if (used != 0) words_.back() &= detail::low_bits(static_cast<int>(used));
  }

  std::vector<std::uint32_t> words_;
  std::size_t size_ = 0;
  int bits_ = 1;
};

}  // namespace minifloat::storage
