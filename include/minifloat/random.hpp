// minifloat/random.hpp — seeded counter-based random numbers for stochastic rounding.
//
// The generator is ARS-5 (AES Random Stream, 5 rounds) of Salmon, Moraes, Dror and Shaw,
// "Parallel random numbers: as easy as 1, 2, 3" (SC 2011): a 128-bit counter block goes through
// the AES round function under a 128-bit key whose round keys are the key plus multiples of a
// Weyl constant. A draw is a function of (seed, element index): no state advances, so a result
// depends only on (seed, index, value) and never on chunking, thread count or call order (the
// mixed-precision paper's Appendix A (Micikevicius et al., ICLR 2018, arXiv:1710.03740) uses
// stochastic rounding; reproducibility is ours).
//
// The stream (docs/formats.md, "The random stream"):
//  - key: the first two SplitMix64 outputs of the seed, mix64(seed + γ) in the low 64 bits and
//    mix64(seed + 2γ) in the high 64 bits (γ = 0x9e3779b97f4a7c15);
//  - bits32(i): 32-bit word i mod 4 of ARS-5(counter = (i / 4, domain 0));
//  - bits64(i): 64-bit half i mod 2 of ARS-5(counter = (i / 2, domain 1)), low word first;
//    a counter is (low 64 bits, high 64 bits), a block's words are little-endian.
// So 16 consecutive 32-bit draws from a multiple of 16 are four consecutive blocks: one 512-bit
// VAES computation in the bulk kernels (bulk.hpp's lane_random). The scalar and device path is a
// software AES round (SubBytes, ShiftRows, MixColumns, AddRoundKey, FIPS 197) with the same bits;
// on x86 hosts with AES-NI the scalar path uses the aesenc instruction instead.
#pragma once

#include <array>
#include <bit>
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "config.hpp"
#include "detail/simd.hpp"

namespace minifloat {

namespace detail {
MINIFLOAT_HD constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}
inline constexpr std::uint64_t golden64 = 0x9e3779b97f4a7c15ULL;

/// A 128-bit AES block as four little-endian 32-bit words (byte 4c + r of the state is row r of
/// column c, as FIPS 197 numbers them and as the aesenc instruction reads a register).
struct block128 {
  std::uint32_t w[4];
  MINIFLOAT_HD constexpr std::uint64_t low() const { return w[0] | std::uint64_t{w[1]} << 32; }
  MINIFLOAT_HD constexpr std::uint64_t high() const { return w[2] | std::uint64_t{w[3]} << 32; }
  MINIFLOAT_HD static constexpr block128 from(std::uint64_t low, std::uint64_t high) {
    return {{static_cast<std::uint32_t>(low), static_cast<std::uint32_t>(low >> 32), static_cast<std::uint32_t>(high),
             static_cast<std::uint32_t>(high >> 32)}};
  }
  friend MINIFLOAT_HD constexpr bool operator==(const block128&, const block128&) = default;
};

/// The Weyl increments of ARS's key schedule, added to the key's low and high 64-bit halves
/// (the fractional parts of the golden ratio and of sqrt(3), as in the paper).
inline constexpr std::uint64_t ars_weyl_low = 0x9e3779b97f4a7c15ULL;
inline constexpr std::uint64_t ars_weyl_high = 0xbb67ae8584caa73bULL;

/// Product by x in GF(2^8) modulo the AES polynomial x^8 + x^4 + x^3 + x + 1.
MINIFLOAT_HD constexpr std::uint8_t gf_times_x(std::uint8_t a) {
  return static_cast<std::uint8_t>((a << 1) ^ ((a & 0x80) ? 0x1b : 0));
}
MINIFLOAT_HD constexpr std::uint8_t gf_multiply(std::uint8_t a, std::uint8_t b) {
  std::uint8_t p = 0;
  for (int i = 0; i < 8; ++i) {
    if (b & 1) p ^= a;
    a = gf_times_x(a);
    b >>= 1;
  }
  return p;
}
/// The AES S-box computed from its definition: the multiplicative inverse (a^254, 0 for 0)
/// followed by the affine map b ^ rotl(b,1) ^ rotl(b,2) ^ rotl(b,3) ^ rotl(b,4) ^ 0x63.
MINIFLOAT_HD constexpr std::uint8_t aes_sbox_computed(std::uint8_t a) {
  std::uint8_t inverse = 1, square = a;
  for (int bit = 1; bit < 8; ++bit) {  // 254 = 0b11111110
    square = gf_multiply(square, square);
    inverse = gf_multiply(inverse, square);
  }
  const auto rotl = [](std::uint8_t b, int s) { return static_cast<std::uint8_t>((b << s) | (b >> (8 - s))); };
  return static_cast<std::uint8_t>(inverse ^ rotl(inverse, 1) ^ rotl(inverse, 2) ^ rotl(inverse, 3) ^
                                   rotl(inverse, 4) ^ 0x63);
}
#if !defined(__CUDA_ARCH__)
inline constexpr std::array<std::uint8_t, 256> aes_sbox_table = [] {
  std::array<std::uint8_t, 256> t{};
  for (int a = 0; a < 256; ++a) t[a] = aes_sbox_computed(static_cast<std::uint8_t>(a));
  return t;
}();
#endif
/// The S-box: a table on the host, computed on the device (a host table is not visible there).
MINIFLOAT_HD constexpr std::uint8_t aes_sbox(std::uint8_t a) {
#if defined(__CUDA_ARCH__)
  return aes_sbox_computed(a);
#else
  return aes_sbox_table[a];
#endif
}

/// One AES encryption round in software, as the aesenc instruction computes it (Last: as
/// aesenclast, without MixColumns): SubBytes, ShiftRows, MixColumns, then state ^ round key.
template <bool Last>
MINIFLOAT_HD constexpr block128 aes_round(const block128& state, const block128& round_key) {
  std::uint8_t in[16] = {}, t[16] = {};
  for (int i = 0; i < 16; ++i) in[i] = static_cast<std::uint8_t>(state.w[i / 4] >> (8 * (i % 4)));
  // ShiftRows moves row r left by r columns: column c of the result takes row r from column c + r.
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 4; ++r) t[4 * c + r] = aes_sbox(in[4 * ((c + r) % 4) + r]);
  block128 out{};
  for (int c = 0; c < 4; ++c) {
    std::uint8_t a0 = t[4 * c], a1 = t[4 * c + 1], a2 = t[4 * c + 2], a3 = t[4 * c + 3];
    if constexpr (!Last) {  // MixColumns: the column times 3x^3 + x^2 + x + 2 modulo x^4 + 1
      const std::uint8_t all = static_cast<std::uint8_t>(a0 ^ a1 ^ a2 ^ a3);
      const std::uint8_t b0 = static_cast<std::uint8_t>(a0 ^ all ^ gf_times_x(static_cast<std::uint8_t>(a0 ^ a1)));
      const std::uint8_t b1 = static_cast<std::uint8_t>(a1 ^ all ^ gf_times_x(static_cast<std::uint8_t>(a1 ^ a2)));
      const std::uint8_t b2 = static_cast<std::uint8_t>(a2 ^ all ^ gf_times_x(static_cast<std::uint8_t>(a2 ^ a3)));
      const std::uint8_t b3 = static_cast<std::uint8_t>(a3 ^ all ^ gf_times_x(static_cast<std::uint8_t>(a3 ^ a0)));
      a0 = b0, a1 = b1, a2 = b2, a3 = b3;
    }
    out.w[c] = (a0 | std::uint32_t{a1} << 8 | std::uint32_t{a2} << 16 | std::uint32_t{a3} << 24) ^ round_key.w[c];
  }
  return out;
}

/// The AES round as one table of 256 words (the table form of the round in Daemen and Rijmen's
/// AES proposal): entry x is the column that MixColumns makes of S(x) in row 0, bytes
/// (2·S(x), S(x), S(x), 3·S(x)); S(x) in rows 1, 2, 3 gives the same column rotated left by 8,
/// 16, 24 bits, and byte 1 is S(x) itself, which the last round (no MixColumns) keeps.
MINIFLOAT_HD constexpr std::uint32_t aes_round_table_entry(std::uint8_t x) {
  const std::uint8_t s = aes_sbox(x), twice = gf_times_x(s);
  return twice | std::uint32_t{s} << 8 | std::uint32_t{s} << 16 | std::uint32_t(twice ^ s) << 24;
}
#if !defined(__CUDA_ARCH__)
inline constexpr std::array<std::uint32_t, 256> aes_round_table = [] {
  std::array<std::uint32_t, 256> t{};
  for (int x = 0; x < 256; ++x) t[x] = aes_round_table_entry(static_cast<std::uint8_t>(x));
  return t;
}();
#endif

/// aes_round through the round table (aes_round_table_entry's 256 words at `table`): the same
/// bits with 16 table reads per round instead of 16 S-box evaluations and the MixColumns
/// arithmetic. The CUDA kernels keep the table in shared memory; tests/test_random.cpp checks
/// this form against aes_round and the aesenc instruction.
template <bool Last>
MINIFLOAT_HD constexpr block128 aes_round_tabled(const block128& state, const block128& round_key,
                                                 const std::uint32_t* table) {
  block128 out{};
  for (int c = 0; c < 4; ++c) {  // row r of column c comes from column c + r (ShiftRows)
    const std::uint32_t t0 = table[state.w[c] & 0xffu];
    const std::uint32_t t1 = table[(state.w[(c + 1) & 3] >> 8) & 0xffu];
    const std::uint32_t t2 = table[(state.w[(c + 2) & 3] >> 16) & 0xffu];
    const std::uint32_t t3 = table[state.w[(c + 3) & 3] >> 24];
    if constexpr (Last)
      out.w[c] = (((t0 >> 8) & 0xffu) | (t1 & 0xff00u) | ((t2 << 8) & 0xff0000u) | ((t3 << 16) & 0xff000000u)) ^
                 round_key.w[c];
    else
      out.w[c] = t0 ^ std::rotl(t1, 8) ^ std::rotl(t2, 16) ^ std::rotl(t3, 24) ^ round_key.w[c];
  }
  return out;
}

/// The next ARS round key: the Weyl increments added to each 64-bit half.
MINIFLOAT_HD constexpr block128 ars_next_key(const block128& k) {
  return block128::from(k.low() + ars_weyl_low, k.high() + ars_weyl_high);
}

/// The two software forms of the AES round, for ars_with: computed (aes_round) and through the
/// round table (aes_round_tabled).
struct computed_aes_round {
  template <bool Last>
  MINIFLOAT_HD constexpr block128 apply(const block128& state, const block128& round_key) const {
    return aes_round<Last>(state, round_key);
  }
};
struct tabled_aes_round {
  const std::uint32_t* table;
  template <bool Last>
  MINIFLOAT_HD constexpr block128 apply(const block128& state, const block128& round_key) const {
    return aes_round_tabled<Last>(state, round_key, table);
  }
};

/// ARS with `Rounds` rounds, each by `round.apply<Last>(state, round_key)`: v = counter ^ key,
/// then Rounds - 1 aesenc rounds and one aesenclast, the round keys being key + r * (Weyl
/// increments).
template <int Rounds, class Round>
MINIFLOAT_HD constexpr block128 ars_with(const block128& counter, const block128& key, const Round& round) {
  static_assert(Rounds >= 1, "ARS needs at least one round");
  block128 k = key;
  block128 v = block128::from(counter.low() ^ key.low(), counter.high() ^ key.high());
  for (int r = 1; r < Rounds; ++r) {
    k = ars_next_key(k);
    v = round.template apply<false>(v, k);
  }
  k = ars_next_key(k);
  return round.template apply<true>(v, k);
}

/// ARS with `Rounds` rounds in software (the S-box and MixColumns evaluated).
template <int Rounds>
MINIFLOAT_HD constexpr block128 ars_software(const block128& counter, const block128& key) {
  return ars_with<Rounds>(counter, key, computed_aes_round{});
}

/// ARS with `Rounds` rounds through the round table at `table` (aes_round_tabled).
template <int Rounds>
MINIFLOAT_HD constexpr block128 ars_tabled(const block128& counter, const block128& key, const std::uint32_t* table) {
  return ars_with<Rounds>(counter, key, tabled_aes_round{table});
}

#if defined(__AES__) && !defined(__CUDA_ARCH__)
inline __m128i to_m128(const block128& b) { return _mm_set_epi64x(static_cast<long long>(b.high()), static_cast<long long>(b.low())); }
inline block128 from_m128(__m128i v) {
  block128 b;
  std::memcpy(b.w, &v, 16);
  return b;
}
/// ARS through the AES-NI instructions (the same bits as ars_software).
template <int Rounds>
inline block128 ars_aesni(const block128& counter, const block128& key) {
  const __m128i weyl = _mm_set_epi64x(static_cast<long long>(ars_weyl_high), static_cast<long long>(ars_weyl_low));
  __m128i k = to_m128(key);
  __m128i v = _mm_xor_si128(to_m128(counter), k);
  for (int r = 1; r < Rounds; ++r) {
    k = _mm_add_epi64(k, weyl);
    v = _mm_aesenc_si128(v, k);
  }
  k = _mm_add_epi64(k, weyl);
  return from_m128(_mm_aesenclast_si128(v, k));
}
#endif

/// ARS with `Rounds` rounds: AES-NI on x86 hosts that have it (outside constant evaluation),
/// else the software round.
template <int Rounds>
MINIFLOAT_HD constexpr block128 ars(const block128& counter, const block128& key) {
#if defined(__AES__) && !defined(__CUDA_ARCH__)
  if (!std::is_constant_evaluated()) return ars_aesni<Rounds>(counter, key);
#endif
  return ars_software<Rounds>(counter, key);
}

/// The rounds of the library's generator.
inline constexpr int ars_rounds = 5;
/// The counter's high 64 bits: which stream of the seed a block belongs to.
inline constexpr std::uint64_t domain_bits32 = 0, domain_bits64 = 1;
}  // namespace detail

/// Stateless generator: `bits32(i)` is the i-th 32-bit draw of the stream named by `seed`,
/// `bits64(i)` the i-th 64-bit draw of a second stream of the same seed.
struct counter_rng {
  std::uint64_t seed = 0;

  /// The 128-bit ARS key of this seed (its first two SplitMix64 outputs).
  MINIFLOAT_HD constexpr detail::block128 key() const {
    return detail::block128::from(detail::mix64(seed + detail::golden64), detail::mix64(seed + 2 * detail::golden64));
  }
  /// The generator's output block for counter (block_index, domain).
  MINIFLOAT_HD constexpr detail::block128 block(std::uint64_t block_index, std::uint64_t domain) const {
    return detail::ars<detail::ars_rounds>(detail::block128::from(block_index, domain), key());
  }
  MINIFLOAT_HD constexpr std::uint32_t bits32(std::uint64_t index) const {
    return block(index >> 2, detail::domain_bits32).w[index & 3];
  }
  /// 64-bit draw, for stochastic rounding from double.
  MINIFLOAT_HD constexpr std::uint64_t bits64(std::uint64_t index) const {
    const detail::block128 b = block(index >> 1, detail::domain_bits64);
    return (index & 1) ? b.high() : b.low();
  }
};

/// The seed of the stochastic draws of a stored tensor's `generation`-th rewrite (storage/:
/// low_tensor, split_tensor, low_block_tensor): a fresh stream per rewrite, the same one for the
/// same (seed, generation).
MINIFLOAT_HD constexpr std::uint64_t generation_seed(std::uint64_t seed, std::uint64_t generation) {
  return detail::mix64(seed + detail::golden64 * (generation + 1));
}

/// A seed with context folded in, one key at a time: fold_seed(s, k) = counter_rng{s}.bits64(k),
/// the keyed hash training/site.hpp uses for the step, and fold_seed(s, a, b, ...) =
/// fold_seed(fold_seed(s, a), b, ...). Every place that derives the draws of one step, rank,
/// role, bucket or parameter from a user's seed folds the same way, so one seed names one set of
/// draws in C++ and Python, and two contexts differing in any key draw independent streams.
template <std::unsigned_integral... Key>
MINIFLOAT_HD constexpr std::uint64_t fold_seed(std::uint64_t seed, Key... keys) {
  ((seed = counter_rng{seed}.bits64(static_cast<std::uint64_t>(keys))), ...);
  return seed;
}

}  // namespace minifloat
