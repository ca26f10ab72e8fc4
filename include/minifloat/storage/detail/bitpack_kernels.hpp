// minifloat/storage/detail/bitpack_kernels.hpp — the kernels behind bitpack.hpp: one
// instantiation per field width K, with every shift amount and shuffle pattern a constant.
//
// Layout (extra-mantissa-bits paper §3.1, Fig. 1): field i starts at bit i*K of a little-endian
// stream of 32-bit words, so 32 fields fill exactly K words ("a block"). The kernels work on
// whole blocks in 64-byte registers (GCC/Clang vector extensions, as the core's bulk kernels):
//  - unpack: each half block (16 fields) is one 16-word load, one shuffle that brings every
//    field's bits into its own 32-bit lane (16-bit granules for K <= 16, where a field never
//    spans more than two of them; a funnel of two 32-bit shuffles above), one shift, one mask;
//  - pack: neighbouring fields are merged pairwise in 64-bit lanes (F bits -> 2F bits) for a
//    few levels, then each output word gathers its pieces from the merged fields with one
//    shuffle and one shift per piece. How many levels is chosen per K by counting shuffles and
//    shifts (pack_cost), the instructions that bound the throughput.
// Shuffles with computed patterns go through `shuffle_into`: GCC's __builtin_shuffle with a constant
// mask vector (nvcc's front end parses it, so the header compiles in CUDA translation units), and
// clang's __builtin_shufflevector (clang has no __builtin_shuffle); the same instructions.
// Tails (the last blocks, where a full register would reach past the caller's buffer) go
// through the same kernels on a zero-padded copy on the stack, so nothing outside the given
// ranges is ever read or written.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../../detail/simd.hpp"

namespace minifloat::storage::detail {

// 64-byte registers whatever the ISA: a block of 32 fields is two of them. Without AVX-512 the
// compiler splits each operation in two or four. Registers are only passed by reference, so no
// function's calling convention depends on the ISA (-Wpsabi stays quiet).
typedef std::uint32_t u32x16 __attribute__((vector_size(64)));
typedef std::uint64_t u64x8 __attribute__((vector_size(64)));
typedef std::uint16_t u16x32 __attribute__((vector_size(64)));

/// out = lanes of a and b picked by compile-time indices (0 .. 2 * lanes - 1), in the spelling
/// each compiler takes with computed indices (see the note at the top). Written through a
/// reference, not returned: a returned 64-byte vector draws -Wpsabi without AVX-512.
template <class V, int... Index>
[[gnu::always_inline]] inline void shuffle_into(const V& a, const V& b, V& out) {
#if defined(__clang__)
  out = __builtin_shufflevector(a, b, Index...);
#else
  using lane = std::remove_cvref_t<decltype(a[0])>;
  out = __builtin_shuffle(a, b, V{static_cast<lane>(Index)...});
#endif
}

/// The same 64 bytes seen as another lane type.
template <class To, class From>
[[gnu::always_inline]] inline void reinterpret(const From& from, To& to) {
  static_assert(sizeof(To) == sizeof(From));
  std::memcpy(&to, &from, sizeof to);
}

/// The low k bits set (k in 1..32).
constexpr std::uint32_t low_bits(int k) { return k >= 32 ? ~std::uint32_t{0} : (std::uint32_t{1} << k) - 1; }

/// Words holding `count` fields of k bits, without overflowing for any count that fits memory.
constexpr std::size_t words_for(std::size_t count, int k) {
  const auto uk = static_cast<std::size_t>(k);
  return count / 32 * uk + ((count % 32) * uk + 31) / 32;
}

/// Field i, read one word pair at a time (the reference the block kernels are tested against).
inline std::uint32_t get_field(const std::uint32_t* words, int k, std::size_t i) {
  const std::size_t bit = i * static_cast<std::size_t>(k);
  const std::size_t w = bit / 32;
  const unsigned offset = bit % 32;
  std::uint64_t x = words[w];
  if (offset + static_cast<unsigned>(k) > 32) x |= std::uint64_t{words[w + 1]} << 32;
  return static_cast<std::uint32_t>(x >> offset) & low_bits(k);
}

/// Replaces field i by the low k bits of v, leaving every other bit alone.
inline void set_field(std::uint32_t* words, int k, std::size_t i, std::uint32_t v) {
  const std::size_t bit = i * static_cast<std::size_t>(k);
  const std::size_t w = bit / 32;
  const unsigned offset = bit % 32;
  const std::uint64_t mask = std::uint64_t{low_bits(k)} << offset;
  const std::uint64_t value = std::uint64_t{v & low_bits(k)} << offset;
  words[w] = (words[w] & ~static_cast<std::uint32_t>(mask)) | static_cast<std::uint32_t>(value);
  if (offset + static_cast<unsigned>(k) > 32)
    words[w + 1] = (words[w + 1] & ~static_cast<std::uint32_t>(mask >> 32)) | static_cast<std::uint32_t>(value >> 32);
}

// ---------------------------------------------------------------------------------------------
// Unpacking. Half h (0 or 1) of a block loads 16 words at word unpack_base(k, h); field j of
// the half starts at bit unpack_bit(k, h, j) of those 16 words (always below bit 512 - k).

constexpr int unpack_base(int k, int half) { return half * 16 * k / 32; }
constexpr int unpack_bit(int k, int half, int j) { return half * 16 * k - 32 * unpack_base(k, half) + j * k; }
/// Words past a block's start that its loads touch.
constexpr int unpack_reach(int k) { return unpack_base(k, 1) + 16; }

// K <= 16: lane j takes the 16-bit granules g and g + 1 holding its field, g = bit / 16.
constexpr int granule_index(int k, int half, int lane16) {
  return unpack_bit(k, half, lane16 / 2) / 16 + lane16 % 2;
}
constexpr std::uint32_t granule_shift(int k, int half, int j) {
  return static_cast<std::uint32_t>(unpack_bit(k, half, j) % 16);
}
// K > 16: lane j takes word a = bit / 32 and the next one, a funnel shift joins them. Fields
// that fit in word a shift the next word left by 31, so only its bit 0 lands on bit 31, which
// the mask clears (K < 32); every shift count stays below 32.
constexpr bool crosses_word(int k, int half, int j) { return unpack_bit(k, half, j) % 32 + k > 32; }
constexpr int low_word(int k, int half, int j) { return unpack_bit(k, half, j) / 32; }
constexpr int high_word(int k, int half, int j) { return low_word(k, half, j) + (crosses_word(k, half, j) ? 1 : 0); }
constexpr std::uint32_t low_shift(int k, int half, int j) {
  return static_cast<std::uint32_t>(unpack_bit(k, half, j) % 32);
}
constexpr std::uint32_t high_shift(int k, int half, int j) {
  return crosses_word(k, half, j) ? 32 - low_shift(k, half, j) : 31;
}

/// Fields 16 * Half .. 16 * Half + 15 of the block into out[0, 16).
template <int K, int Half, std::size_t... J, std::size_t... L>
[[gnu::always_inline]] inline void unpack_half(const std::uint32_t* block, std::uint32_t* out,
                                               std::index_sequence<J...>, std::index_sequence<L...>) {
  u32x16 w, fields;
  std::memcpy(&w, block + unpack_base(K, Half), sizeof w);
  if constexpr (K <= 16) {
    u16x32 g;
    reinterpret(w, g);
    u16x32 pairs;
    shuffle_into<u16x32, granule_index(K, Half, static_cast<int>(L))...>(g, g, pairs);
    const u32x16 shift{granule_shift(K, Half, static_cast<int>(J))...};
    reinterpret(pairs, fields);
    fields = (fields >> shift) & low_bits(K);
  } else {
    u32x16 lo, hi;
    shuffle_into<u32x16, low_word(K, Half, static_cast<int>(J))...>(w, w, lo);
    shuffle_into<u32x16, high_word(K, Half, static_cast<int>(J))...>(w, w, hi);
    const u32x16 right{low_shift(K, Half, static_cast<int>(J))...};
    const u32x16 left{high_shift(K, Half, static_cast<int>(J))...};
    fields = ((lo >> right) | (hi << left)) & low_bits(K);
  }
  std::memcpy(out, &fields, sizeof fields);
}

/// 32 fields from the K words at `block` (which may read up to unpack_reach(K) words).
template <int K>
[[gnu::always_inline]] inline void unpack_block(const std::uint32_t* block, std::uint32_t* out) {
  static_assert(K >= 1 && K < 32);
  unpack_half<K, 0>(block, out, std::make_index_sequence<16>{}, std::make_index_sequence<32>{});
  unpack_half<K, 1>(block, out + 16, std::make_index_sequence<16>{}, std::make_index_sequence<32>{});
}

/// out[0, n) = the n fields of `words`; reads only words[0, nwords), nwords >= words_for(n, K).
template <int K>
void unpack_fixed(const std::uint32_t* words, std::size_t nwords, std::size_t n, std::uint32_t* out) {
  if constexpr (K == 32) {
    if (n != 0) std::memcpy(out, words, n * sizeof(std::uint32_t));
  } else {
    constexpr std::size_t reach = unpack_reach(K);
    const std::size_t blocks = n / 32;
    std::size_t b = 0;
    for (; b < blocks && b * K + reach <= nwords; ++b) unpack_block<K>(words + b * K, out + b * 32);
    if (b * 32 == n) return;
    // The loop stops fewer than reach / K + 2 blocks before the end: stage them.
    constexpr std::size_t stage_blocks = (reach + K - 1) / K + 1;
    std::uint32_t in[stage_blocks * K + reach] = {};
    std::uint32_t values[stage_blocks * 32];
    const std::size_t left = n - b * 32;
    const std::size_t left_blocks = (left + 31) / 32;
    std::memcpy(in, words + b * K, words_for(left, K) * sizeof(std::uint32_t));
    for (std::size_t i = 0; i < left_blocks; ++i) unpack_block<K>(in + i * K, values + i * 32);
    std::memcpy(out + b * 32, values, left * sizeof(std::uint32_t));
  }
}

// ---------------------------------------------------------------------------------------------
// Packing. Fields of F bits sit in the low bits of 32-bit lanes (clean above F).

/// In 64-bit lanes holding two F-bit fields (2F <= 32), x | x >> (32 - F) puts the odd field
/// above the even one in the low word.
template <int F, class W>
[[gnu::always_inline]] inline void merge_in_lanes(W& x) {
  static_assert(2 * F <= 32);
  x |= x >> (32 - F);
}

/// One merge level: keeping the low words of a and b, merged in their lanes, gives 16 fields of 2F bits.
template <int F>
[[gnu::always_inline]] inline void merge_pairs(const u32x16& a, const u32x16& b, u32x16& merged) {
  u64x8 x, y;
  reinterpret(a, x);
  reinterpret(b, y);
  merge_in_lanes<F>(x);
  merge_in_lanes<F>(y);
  u32x16 lo, hi;
  reinterpret(x, lo);
  reinterpret(y, hi);
  merged = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}

// Emitting 32 fields of F bits (registers a, b) as F words.
// F <= 16, in 16-bit granules: field j shifted left by its offset in its first granule
// (j*F mod 16) fits its 32-bit lane; output granule q is the OR of the low halves of the fields
// that start in it and the high halves of those that started in granule q - 1.
constexpr int granule_pieces(int f, int q, int* lanes16) {
  int count = 0;
  for (int j = 0; j < 32; ++j) {
    const int first = j * f / 16;
    if (first == q) lanes16[count++] = 2 * j;
    if (first + 1 == q && j * f % 16 + f > 16) lanes16[count++] = 2 * j + 1;
  }
  return count;
}
constexpr int granule_rounds(int f) {
  int most = 0;
  for (int q = 0; q < 2 * f; ++q) {
    int lanes[64] = {};
    most = std::max(most, granule_pieces(f, q, lanes));
  }
  return most;
}
/// The lane OR-ed into output granule q in round r; a granule with fewer pieces repeats its
/// last one (OR is idempotent), and granules past the output take anything.
constexpr int granule_piece(int f, int q, int r) {
  if (q >= 2 * f) return 0;
  int lanes[64] = {};
  const int count = granule_pieces(f, q, lanes);
  return lanes[std::min(r, count - 1)];
}
constexpr std::uint32_t granule_offset(int f, int j) { return static_cast<std::uint32_t>(j * f % 16); }

// 16 < F < 32, in 32-bit words: round 0 brings the field holding the word's first bit (shifted
// right), later rounds the fields starting inside the word (shifted left).
constexpr int first_field(int f, int w) { return 32 * w / f; }
constexpr int word_pieces(int f, int w) {
  int count = 0;
  for (int i = first_field(f, w); i < 32 && i * f < 32 * w + 32; ++i) ++count;
  return count;
}
constexpr int word_rounds(int f) {
  int most = 0;
  for (int w = 0; w < f; ++w) most = std::max(most, word_pieces(f, w));
  return most;
}
constexpr int word_piece(int f, int w, int r) {
  return w >= f ? 0 : first_field(f, w) + std::min(r, word_pieces(f, w) - 1);
}
constexpr std::uint32_t word_piece_shift(int f, int w, int r) {
  if (w >= f) return 0;
  const int p = word_piece(f, w, r) * f - 32 * w;
  return static_cast<std::uint32_t>(p < 0 ? -p : p);
}

template <int F, int R, std::size_t... L>
[[gnu::always_inline]] inline void or_granule_round(const u16x32& a, const u16x32& b, u16x32& words,
                                                    std::index_sequence<L...>) {
  u16x32 piece;
  shuffle_into<u16x32, granule_piece(F, static_cast<int>(L), R)...>(a, b, piece);
  words |= piece;
}
template <int F, std::size_t... R>
[[gnu::always_inline]] inline void granule_words(const u16x32& a, const u16x32& b, u16x32& words,
                                                 std::index_sequence<R...>) {
  words = u16x32{};
  (or_granule_round<F, static_cast<int>(R)>(a, b, words, std::make_index_sequence<32>{}), ...);
}
template <int F, std::size_t... J>
[[gnu::always_inline]] inline void granule_align(const u32x16& v, u16x32& aligned, std::index_sequence<J...>) {
  const u32x16 shift{granule_offset(F, static_cast<int>(J))...};  // fields 16..31 repeat 0..15
  reinterpret(u32x16(v << shift), aligned);
}
template <int F, int Out, int R, std::size_t... J>
[[gnu::always_inline]] inline void or_word_round(const u32x16& a, const u32x16& b, u32x16& words,
                                                 std::index_sequence<J...>) {
  u32x16 piece;
  shuffle_into<u32x16, word_piece(F, Out * 16 + static_cast<int>(J), R)...>(a, b, piece);
  const u32x16 shift{word_piece_shift(F, Out * 16 + static_cast<int>(J), R)...};
  if constexpr (R == 0) words |= piece >> shift;
  else words |= piece << shift;
}
template <int F, int Out, std::size_t... R>
[[gnu::always_inline]] inline void word_words(const u32x16& a, const u32x16& b, u32x16& words,
                                              std::index_sequence<R...>) {
  words = u32x16{};
  (or_word_round<F, Out, static_cast<int>(R)>(a, b, words, std::make_index_sequence<16>{}), ...);
}

/// Words an emit of F-bit fields stores (the output is F words; the rest is overwritten later).
constexpr int emit_reach(int f) { return f <= 16 ? 16 : 32; }

template <int F>
[[gnu::always_inline]] inline void emit(const u32x16& a, const u32x16& b, std::uint32_t* out) {
  if constexpr (F == 32) {
    std::memcpy(out, &a, sizeof a);
    std::memcpy(out + 16, &b, sizeof b);
  } else if constexpr (F <= 16) {
    u16x32 sa, sb, words;
    granule_align<F>(a, sa, std::make_index_sequence<16>{});
    granule_align<F>(b, sb, std::make_index_sequence<16>{});
    granule_words<F>(sa, sb, words, std::make_index_sequence<granule_rounds(F)>{});
    std::memcpy(out, &words, sizeof words);
  } else {
    u32x16 lo, hi;
    word_words<F, 0>(a, b, lo, std::make_index_sequence<word_rounds(F)>{});
    word_words<F, 1>(a, b, hi, std::make_index_sequence<word_rounds(F)>{});
    std::memcpy(out, &lo, sizeof lo);
    std::memcpy(out + 16, &hi, sizeof hi);
  }
}

/// Shuffles plus shifts per 32 values when merging `levels` times before emitting.
constexpr int emit_cost(int f) {
  if (f == 32) return 0;
  if (f <= 16) return (f % 16 == 0 ? 0 : 2) + granule_rounds(f);
  return 4 * word_rounds(f);
}
constexpr double pack_cost(int k, int levels) {
  const int merges = (2 << levels) - 2;  // merge_pairs calls per group: a shuffle and two shifts each
  return (3.0 * merges + emit_cost(k << levels)) / (1 << levels);
}
constexpr int pack_levels(int k) {
  int best = 0;
  for (int levels = 1; (k << levels) <= 32; ++levels)
    if (pack_cost(k, levels) < pack_cost(k, best)) best = levels;
  return best;
}

/// 16 fields of K << D bits, merged from the 16 << D values at `in` (masked to K bits first).
/// The loads go in address order: a descending sweep inside each group defeats the hardware
/// prefetcher on large arrays.
template <int K, int D>
[[gnu::always_inline]] inline void merged(const std::uint32_t* in, u32x16& fields) {
  if constexpr (D == 0) {
    std::memcpy(&fields, in, sizeof fields);
    fields &= low_bits(K);
  } else {
    u32x16 low, high;
    merged<K, D - 1>(in, low);
    merged<K, D - 1>(in + (16 << (D - 1)), high);
    merge_pairs<(K << (D - 1))>(low, high, fields);
  }
}

/// Packs the 32 << pack_levels(K) values at `in` into the words at `out` (writing emit_reach words).
template <int K>
[[gnu::always_inline]] inline void emit_group(const std::uint32_t* in, std::uint32_t* out) {
  constexpr int levels = pack_levels(K);
  u32x16 low, high;
  merged<K, levels>(in, low);
  merged<K, levels>(in + (16 << levels), high);
  emit<(K << levels)>(low, high, out);
}

/// The fields of one register of 32-bit lanes (any width; each lane clean above K bits) as
/// consecutive K-bit fields in lanes * K / 8 bytes at `out`, for the widths that fill whole bytes
/// from a register: K = 4 (one merge level, then each 64-bit lane narrowed to its low byte) and
/// K = 8 (each lane narrowed to a byte). Bytes in the layout's order on a little-endian machine,
/// where the stream of 32-bit words is a stream of bytes. Used by encoders that write fields
/// straight from their registers (storage/packed_block.hpp), without a buffer of 32-bit values.
template <int K, class V>
[[gnu::always_inline]] inline void pack_register_bytes(const V& fields, unsigned char* out) {
  static_assert(K == 4 || K == 8, "pack_register_bytes: K = 4 or 8");
  constexpr std::size_t lanes = sizeof(V) / sizeof(std::uint32_t);
  if constexpr (K == 4) {
    using narrow = typename minifloat::detail::vector_of<std::uint8_t, lanes / 2>::type;
    typename minifloat::detail::vector_of<std::uint64_t, sizeof(V)>::type x;
    reinterpret(fields, x);
    merge_in_lanes<4>(x);
    const narrow bytes = __builtin_convertvector(x, narrow);
    std::memcpy(out, &bytes, sizeof bytes);
  } else {
    using narrow = typename minifloat::detail::vector_of<std::uint8_t, lanes>::type;
    const narrow bytes = __builtin_convertvector(fields, narrow);
    std::memcpy(out, &bytes, sizeof bytes);
  }
}

/// words[0, words_for(n, K)) = the n values, each masked to K bits; the bits after the last
/// field are zero. Writes nothing else.
template <int K>
void pack_fixed(const std::uint32_t* values, std::size_t n, std::uint32_t* words) {
  constexpr int levels = pack_levels(K);
  constexpr int f = K << levels;
  constexpr std::size_t group = std::size_t{32} << levels;  // values per emit; their words: f
  constexpr std::size_t reach = emit_reach(f);
  const std::size_t nwords = words_for(n, K);
  std::size_t s = 0;
  for (; s + group <= n && s / 32 * K + reach <= nwords; s += group) emit_group<K>(values + s, words + s / 32 * K);
  if (s == n) return;
  // Fewer than max(group, 32 * (reach + 1) / K) values are left: stage them, zero-padded.
  constexpr std::size_t most_left = std::max(group, 32 * (reach + 1) / K);
  constexpr std::size_t stage = (most_left + group - 1) / group * group;
  std::uint32_t in[stage] = {};
  std::uint32_t out[stage / 32 * K + reach];
  const std::size_t left = n - s;
  std::memcpy(in, values + s, left * sizeof(std::uint32_t));
  for (std::size_t t = 0; t < left; t += group) emit_group<K>(in + t, out + t / 32 * K);
  std::memcpy(words + s / 32 * K, out, words_for(left, K) * sizeof(std::uint32_t));
}

}  // namespace minifloat::storage::detail
