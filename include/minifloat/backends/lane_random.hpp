// minifloat/backends/lane_random.hpp — the random words of stochastic rounding for a register of
// lanes, shared by every path that rounds stochastically (the reference core's lane kernels and
// the stochastic float form alike).
//
// Lane l of the register for first index i holds counter_rng::bits32 / bits64 of index i + l
// (random.hpp: ARS-5, the AES-round counter generator of Salmon et al., "Parallel random numbers:
// as easy as 1, 2, 3", SC 2011), so a register's words are the scalar path's words: this header
// changes how fast they are made (VAES instructions on whole registers), never which they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../detail/simd.hpp"
#include "../random.hpp"

namespace minifloat::detail {

/// Random words of stochastic rounding for lanes first..first+lanes-1, identical to
/// counter_rng::bits32 / bits64 of each index (random.hpp). A register of draws that starts at a
/// multiple of its lane count is whole ARS blocks: on VAES one 512-bit (or 256-bit) computation
/// with the round keys held in registers; elsewhere one ARS call per 128-bit block. A register
/// that starts elsewhere joins two such aligned registers. Each call also computes the aligned
/// register after its own and keeps it for the next call.
template <class V>
struct lane_random {
  using B = std::remove_cvref_t<decltype(V{}[0])>;
  static constexpr std::size_t lanes = sizeof(V) / sizeof(B);
  static constexpr std::size_t blocks = sizeof(V) / 16;
  static constexpr std::uint64_t draws_per_block = 16 / sizeof(B);
  static constexpr std::uint64_t domain = sizeof(B) == 4 ? domain_bits32 : domain_bits64;
  static_assert(sizeof(V) % 16 == 0, "registers of whole 128-bit blocks");

  block128 key;
  block128 round_keys[ars_rounds + 1];
  bool have_next = false;
  std::uint64_t next_first = 0;
  V next{};

  explicit lane_random(const counter_rng& r) : key(r.key()) {
    round_keys[0] = key;
    for (int k = 1; k <= ars_rounds; ++k) round_keys[k] = ars_next_key(round_keys[k - 1]);
  }

#if defined(__VAES__) && defined(__AES__) && defined(__AVX2__) && !defined(__CUDA_ARCH__)
  /// b in every 128-bit lane (set from two words: the broadcast intrinsics trip GCC 12's
  /// maybe-uninitialized warning).
  static __m256i every_block256(const block128& b) {
    const auto lo = static_cast<long long>(b.low()), hi = static_cast<long long>(b.high());
    return _mm256_set_epi64x(hi, lo, hi, lo);
  }
#if defined(__AVX512F__)
  static __m512i every_block512(const block128& b) {
    const auto lo = static_cast<long long>(b.low()), hi = static_cast<long long>(b.high());
    return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
  }
#endif
#endif

#if defined(__VAES__) && defined(__AES__) && defined(__AVX512F__) && !defined(__CUDA_ARCH__)
  /// The four ARS counter blocks (block_index + j, domain), j < 4, of one 512-bit register.
  [[gnu::always_inline]] static __m512i counters512(std::uint64_t block_index) {
    const __m512i offsets = _mm512_set_epi64(static_cast<long long>(domain), 3, static_cast<long long>(domain), 2,
                                             static_cast<long long>(domain), 1, static_cast<long long>(domain), 0);
    return _mm512_mask_add_epi64(offsets, 0x55, offsets, _mm512_set1_epi64(static_cast<long long>(block_index)));
  }
  /// ARS-5 of four counter blocks: the register of draws they give.
  [[gnu::always_inline]] V encrypted(__m512i x) const {
    x = _mm512_xor_si512(x, every_block512(round_keys[0]));
    for (int k = 1; k < ars_rounds; ++k) x = _mm512_aesenc_epi128(x, every_block512(round_keys[k]));
    x = _mm512_aesenclast_epi128(x, every_block512(round_keys[ars_rounds]));
    V v;
    std::memcpy(&v, &x, sizeof v);
    return v;
  }
#endif

  /// Calls f(k, aligned(first + k * lanes)) for k = 0, 1, ..., count - 1 in order (first a
  /// multiple of lanes). With AVX-512 and VAES the counters advance by one vector add per
  /// register instead of being rebuilt from the index (lea, shift, broadcast and masked add),
  /// unless the index wraps past 2^64 - 1 inside the run.
  template <class F>
  [[gnu::always_inline]] void aligned_run(std::uint64_t first, std::size_t count, F f) const {
#if defined(__VAES__) && defined(__AES__) && defined(__AVX512F__) && !defined(__CUDA_ARCH__)
    if constexpr (blocks == 4) {
      if (first <= ~std::uint64_t{0} - count * lanes) {
        __m512i counters = counters512(first / draws_per_block);
        const __m512i advance = _mm512_maskz_set1_epi64(0x55, static_cast<long long>(blocks));
        for (std::size_t k = 0; k < count; ++k) {
          f(k, encrypted(counters));
          counters = _mm512_add_epi64(counters, advance);
        }
        return;
      }
    }
#endif
    for (std::size_t k = 0; k < count; ++k) f(k, aligned(first + k * lanes));
  }

  /// The draws of indices first..first+lanes-1, first a multiple of lanes.
  [[gnu::always_inline]] V aligned(std::uint64_t first) const {
    const std::uint64_t block_index = first / draws_per_block;
    V v;
#if defined(__VAES__) && defined(__AES__) && defined(__AVX512F__) && !defined(__CUDA_ARCH__)
    if constexpr (blocks == 4) return encrypted(counters512(block_index));
#endif
#if defined(__VAES__) && defined(__AES__) && defined(__AVX2__) && !defined(__CUDA_ARCH__)
    if constexpr (blocks == 2) {
      const __m256i offsets =
          _mm256_set_epi64x(static_cast<long long>(domain), 1, static_cast<long long>(domain), 0);
      __m256i x = _mm256_add_epi64(offsets, _mm256_set_epi64x(0, static_cast<long long>(block_index), 0,
                                                              static_cast<long long>(block_index)));
      x = _mm256_xor_si256(x, every_block256(round_keys[0]));
      for (int k = 1; k < ars_rounds; ++k)
        x = _mm256_aesenc_epi128(x, every_block256(round_keys[k]));
      x = _mm256_aesenclast_epi128(x, every_block256(round_keys[ars_rounds]));
      std::memcpy(&v, &x, sizeof v);
      return v;
    }
#endif
    block128 out[blocks];
    for (std::size_t j = 0; j < blocks; ++j) out[j] = ars<ars_rounds>(block128::from(block_index + j, domain), key);
    std::memcpy(&v, out, sizeof v);
    return v;
  }

  V operator()(std::uint64_t first) {
    const std::uint64_t shift = first % lanes;
    const std::uint64_t base = first - shift;
    const V low = have_next && next_first == base ? next : aligned(base);
    // The next aligned register is computed now, a call before it is needed: its AES chain then
    // overlaps this register's rounding instead of stalling the next one.
    next_first = base + lanes;  // wraps to 0 past 2^64 - 1, as the index does
    next = aligned(next_first);
    have_next = true;
    if (shift == 0) return low;
    B joined[2 * lanes];
    std::memcpy(joined, &low, sizeof(V));
    std::memcpy(joined + lanes, &next, sizeof(V));
    V v;
    std::memcpy(&v, joined + shift, sizeof(V));
    return v;
  }
};

}  // namespace minifloat::detail
