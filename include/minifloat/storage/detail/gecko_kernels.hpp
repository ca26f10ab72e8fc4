// minifloat/storage/detail/gecko_kernels.hpp — the bit-level group kernels behind the Gecko codecs
// (Schrödinger's FP §3.3; docs/semantics.md §7; layouts in docs/gecko.md).
//
// A Gecko group is 8 values, so 8 fields of w bits fill exactly w bytes: every kernel here moves
// 8 fields between a packed little-endian word and the 8 bytes of a std::uint64_t (byte i =
// value i), and re-biases exponents with byte-lane (SWAR) arithmetic. BMI2's pdep/pext do the
// moves where the target has them; the portable forms give identical results (tests check both).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__BMI2__)
#include <immintrin.h>
#endif

namespace minifloat::storage::detail::gecko {

static_assert(std::endian::native == std::endian::little,
              "the Gecko streams are little-endian and the kernels load them with memcpy");

#if defined(__BMI2__)
inline constexpr bool have_bmi2 = true;
#else
inline constexpr bool have_bmi2 = false;
#endif

inline constexpr std::uint64_t byte_ones = 0x0101010101010101ULL;
inline constexpr std::uint64_t byte_highs = 0x8080808080808080ULL;

/// The low w bits of every byte (all bits for w >= 8).
constexpr std::uint64_t field_mask(int w) { return w >= 8 ? ~std::uint64_t{0} : byte_ones * ((1U << w) - 1); }

inline constexpr auto field_masks = [] {
  std::array<std::uint64_t, 8> t{};
  for (int h = 0; h < 8; ++h) t[static_cast<std::size_t>(h)] = field_mask(h + 1);
  return t;
}();

/// Bit i of `keep` -> byte i all ones.
constexpr std::uint64_t byte_mask(unsigned keep) {
  std::uint64_t m = 0;
  for (int i = 0; i < 8; ++i)
    if ((keep >> i) & 1U) m |= std::uint64_t{0xFF} << (8 * i);
  return m;
}
inline constexpr auto byte_masks = [] {
  std::array<std::uint64_t, 256> t{};
  for (unsigned k = 0; k < 256; ++k) t[k] = byte_mask(k);
  return t;
}();

inline std::uint64_t load64(const std::uint8_t* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store64(std::uint8_t* p, std::uint64_t v) noexcept { std::memcpy(p, &v, sizeof v); }
/// The first n <= 8 bytes at p, zero-extended.
inline std::uint64_t load_partial(const std::uint8_t* p, std::size_t n) noexcept {
  std::uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}

/// Byte-lane addition modulo 256: no carry crosses into the next byte.
constexpr std::uint64_t add_bytes(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t low = (a & ~byte_highs) + (b & ~byte_highs);
  return low ^ ((a ^ b) & byte_highs);
}

// Generic pdep/pext: the BMI2 instructions, or a loop over the mask's set bits.
inline std::uint64_t pdep(std::uint64_t x, std::uint64_t mask) noexcept {
#if defined(__BMI2__)
  return _pdep_u64(x, mask);
#else
  std::uint64_t r = 0;
  for (std::uint64_t bit = 1; mask != 0; bit <<= 1, mask &= mask - 1)
    if (x & bit) r |= mask & (~mask + 1);
  return r;
#endif
}
inline std::uint64_t pext(std::uint64_t x, std::uint64_t mask) noexcept {
#if defined(__BMI2__)
  return _pext_u64(x, mask);
#else
  std::uint64_t r = 0;
  for (std::uint64_t bit = 1; mask != 0; bit <<= 1, mask &= mask - 1)
    if (x & mask & (~mask + 1)) r |= bit;
  return r;
#endif
}

/// 8 fields of w bits (field i at bits [i*w, i*w + w)) -> byte i; `mask` = field_mask(w) (table
/// users pass it precomputed). Bits of x above 8w are ignored.
template <bool Native = have_bmi2>
inline std::uint64_t spread_fields(std::uint64_t x, int w, std::uint64_t mask) noexcept {
  if constexpr (Native) {
    return pdep(x, mask);
  } else {
    if (w >= 8) return x;
    const std::uint64_t m = (std::uint64_t{1} << w) - 1;
    std::uint64_t r = 0;
    for (int i = 0; i < 8; ++i) r |= ((x >> (i * w)) & m) << (8 * i);
    return r;
  }
}
template <bool Native = have_bmi2>
inline std::uint64_t spread_fields(std::uint64_t x, int w) noexcept {
  return spread_fields<Native>(x, w, field_mask(w));
}
/// Inverse of spread_fields: the low w bits of byte i -> field i.
template <bool Native = have_bmi2>
inline std::uint64_t gather_fields(std::uint64_t v, int w, std::uint64_t mask) noexcept {
  if constexpr (Native) {
    return pext(v, mask);
  } else {
    if (w >= 8) return v;
    const std::uint64_t m = (std::uint64_t{1} << w) - 1;
    std::uint64_t r = 0;
    for (int i = 0; i < 8; ++i) r |= ((v >> (8 * i)) & m) << (i * w);
    return r;
  }
}
template <bool Native = have_bmi2>
inline std::uint64_t gather_fields(std::uint64_t v, int w) noexcept {
  return gather_fields<Native>(v, w, field_mask(w));
}
/// The low popcount(keep) bytes of v, in order, into the byte positions whose keep bit is set;
/// the other bytes become 0.
template <bool Native = have_bmi2>
inline std::uint64_t expand_bytes(std::uint64_t v, unsigned keep) noexcept {
  if constexpr (Native) {
    return pdep(v, byte_masks[keep & 0xFFU]);
  } else {
    std::uint64_t r = 0;
    int k = 0;
    for (int i = 0; i < 8; ++i)
      if ((keep >> i) & 1U) r |= ((v >> (8 * k++)) & 0xFF) << (8 * i);
    return r;
  }
}
/// Inverse of expand_bytes: the bytes whose keep bit is set, moved down to the low bytes in
/// order; the high bytes become 0.
template <bool Native = have_bmi2>
inline std::uint64_t compress_bytes(std::uint64_t v, unsigned keep) noexcept {
  if constexpr (Native) {
    return pext(v, byte_masks[keep & 0xFFU]);
  } else {
    std::uint64_t r = 0;
    int k = 0;
    for (int i = 0; i < 8; ++i)
      if ((keep >> i) & 1U) r |= ((v >> (8 * i)) & 0xFF) << (8 * k++);
    return r;
  }
}

// Eight fp32 lanes: the exponent fields of a group in one vector register. GCC/Clang vector
// extensions (as the core's lanes.hpp uses) keep this free of target intrinsics. Vectors wider
// than 16 bytes never cross a function boundary by value: without AVX that would change the
// ABI (GCC's -Wpsabi), so the helpers take pointers and return scalars.
using u32x8 [[gnu::vector_size(32)]] = std::uint32_t;
using i32x8 [[gnu::vector_size(32)]] = std::int32_t;
using u8x8 [[gnu::vector_size(8)]] = std::uint8_t;

/// Exponent bytes (byte i = E of value i) of the 8 values at p; `magnitude_or` receives the OR
/// over the group of d ^ (d >> 31), d = E - base (at most 255, so it fits a byte): the group
/// needs bit_width(magnitude_or) + 1 bits.
inline std::uint64_t group_exponents(const float* p, int base, unsigned& magnitude_or) noexcept {
  u32x8 u;
  std::memcpy(&u, p, sizeof u);
  const u32x8 e = (u >> 23) & 0xFFU;
  const i32x8 d = __builtin_convertvector(e, i32x8) - base;
  const i32x8 m = d ^ (d >> 31);
  std::uint64_t mags = std::bit_cast<std::uint64_t>(__builtin_convertvector(m, u8x8));
  mags |= mags >> 32;
  mags |= mags >> 16;
  mags |= mags >> 8;
  magnitude_or = static_cast<unsigned>(mags & 0xFF);
  return std::bit_cast<std::uint64_t>(__builtin_convertvector(e, u8x8));
}

// Two groups at once: 16 lanes, folded per 64-bit half. Halves the vector instructions of the
// encoder's hot loop, which is bound by instruction count.
using u32x16 [[gnu::vector_size(64)]] = std::uint32_t;
using i32x16 [[gnu::vector_size(64)]] = std::int32_t;
using u8x16 [[gnu::vector_size(16)]] = std::uint8_t;
using u64x2 [[gnu::vector_size(16)]] = std::uint64_t;

/// Exponent bytes of 16 values (group 2k in exps[0], 2k + 1 in exps[1]) and, per group, the OR
/// of the magnitudes d ^ (d >> 31) of d = E - base in the low byte of ors[k].
inline void exponent_pair(const float* p, int base, u64x2& exps, u64x2& ors) noexcept {
  u32x16 u;
  std::memcpy(&u, p, sizeof u);
  const u32x16 e = (u >> 23) & 0xFFU;
  const i32x16 d = __builtin_convertvector(e, i32x16) - base;
  exps = std::bit_cast<u64x2>(__builtin_convertvector(e, u8x16));
  u64x2 m = std::bit_cast<u64x2>(__builtin_convertvector(d ^ (d >> 31), u8x16));
  m |= m >> 32;
  m |= m >> 16;
  m |= m >> 8;
  ors = m & 0xFFU;
}

/// Width code h = w - 1 of the smallest two's-complement width w in [1, 7] holding every d
/// whose magnitudes d ^ (d >> 31) OR to the index, or 7 (escape: 8 raw bits) when none does.
inline constexpr auto width_codes = [] {
  std::array<std::uint8_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m) t[m] = static_cast<std::uint8_t>(std::min<unsigned>(std::bit_width(m), 7U));
  return t;
}();

// Faithful Gecko (bias 127), per width code h:
//   encode: field = (E + 1) mod 2^w          (= (E - 127) mod 2^w, as 128 mod 2^w = 0 for w <= 7)
//   decode: E = (field ^ 2^(w-1)) + 127 - 2^(w-1)   (the sign flip gives d + 2^(w-1) in [0, 2^w))
// Neither carries across bytes: E <= 190 in every non-escape group. Escape (h = 7): raw bytes.
// Each table entry is 32 bytes, one half cache line.
struct faithful_decode_code {
  std::uint64_t mask;  ///< field bits of each byte
  std::uint64_t flip;  ///< 2^(w-1) per byte: flips each field's sign bit
  std::uint64_t add;   ///< 127 - 2^(w-1) per byte
  std::uint64_t bytes; ///< payload bytes of the group: w (8 for the escape)
};
struct faithful_encode_code {
  std::uint64_t mask;
  std::uint64_t add;    ///< 1 per byte (0 for the escape)
  std::uint64_t bytes;
  std::uint64_t width;  ///< w, for the portable kernels
};
inline constexpr auto faithful_decode_codes = [] {
  std::array<faithful_decode_code, 8> t{};
  for (int h = 0; h < 7; ++h) {
    const std::uint64_t m = std::uint64_t{1} << h;
    t[h] = {field_mask(h + 1), byte_ones * m, byte_ones * (127 - m), static_cast<std::uint64_t>(h + 1)};
  }
  t[7] = {~std::uint64_t{0}, 0, 0, 8};
  return t;
}();
inline constexpr auto faithful_encode_codes = [] {
  std::array<faithful_encode_code, 8> t{};
  for (int h = 0; h < 7; ++h) t[h] = {field_mask(h + 1), byte_ones, static_cast<std::uint64_t>(h + 1), static_cast<std::uint64_t>(h + 1)};
  t[7] = {~std::uint64_t{0}, 0, 8, 8};
  return t;
}();

}  // namespace minifloat::storage::detail::gecko
