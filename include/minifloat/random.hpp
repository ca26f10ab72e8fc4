// minifloat/random.hpp — seeded counter-based random numbers for stochastic rounding.
//
// A draw is a keyed hash of (seed, element index): no state advances, so a result depends only
// on (seed, index, value) and never on chunking, thread count or call order
// (the mixed-precision paper's Appendix A (Micikevicius et al., ICLR 2018, arXiv:1710.03740) uses stochastic rounding; reproducibility is ours).
// The 32-bit draw is a SplitMix-style Weyl sequence over the low index word, finalised by the
// MurmurHash3 32-bit mixer, keyed per seed and high index word by the SplitMix64 mixer. It is
// not cryptographic; it is uniform over each 2^32 block of indices (a bijection of the index).
#pragma once

#include <cstdint>

#include "config.hpp"

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
/// 32-bit finaliser; L is std::uint32_t or a vector of them.
template <class L>
constexpr L mix32(L x) {
  x ^= x >> 16;
  x *= 0x85ebca6bU;
  x ^= x >> 13;
  x *= 0xc2b2ae35U;
  x ^= x >> 16;
  return x;
}
inline constexpr std::uint64_t golden64 = 0x9e3779b97f4a7c15ULL;
inline constexpr std::uint32_t golden32 = 0x9e3779b9U;
}  // namespace detail

/// Stateless generator: `bits32(i)` is the i-th draw of the stream named by `seed`.
struct counter_rng {
  std::uint64_t seed = 0;

  /// Key for the block of 2^32 indices that share `high_word`.
  MINIFLOAT_HD constexpr std::uint64_t key(std::uint32_t high_word) const {
    return detail::mix64(seed + detail::golden64 * (std::uint64_t{high_word} + 1));
  }
  /// The draw for low index words `low` (a scalar or a vector of them) under a block key.
  template <class L>
  static constexpr L bits32_keyed(L low, std::uint64_t block_key) {
    return bits32_from_weyl(low * detail::golden32, block_key);
  }
  /// The same draw from the Weyl term low * golden32 (mod 2^32), which a caller drawing
  /// consecutive indices can advance by addition instead of a multiply.
  template <class L>
  static constexpr L bits32_from_weyl(L weyl, std::uint64_t block_key) {
    L x = weyl + static_cast<std::uint32_t>(block_key);
    x = detail::mix32(x ^ static_cast<std::uint32_t>(block_key >> 32));
    return detail::mix32(x + static_cast<std::uint32_t>(block_key >> 17));
  }
  MINIFLOAT_HD constexpr std::uint32_t bits32(std::uint64_t index) const {
    return bits32_keyed(static_cast<std::uint32_t>(index), key(static_cast<std::uint32_t>(index >> 32)));
  }
  /// 64-bit draw, for stochastic rounding from double: two independent 32-bit draws.
  MINIFLOAT_HD constexpr std::uint64_t bits64(std::uint64_t index) const {
    const counter_rng second{detail::mix64(seed ^ 0x5851f42d4c957f2dULL)};
    return (std::uint64_t{bits32(index)} << 32) | second.bits32(index);
  }
};

}  // namespace minifloat
