// minifloat/storage/split_layout.hpp — how a weight is split into a visible low-precision code h
// and k extra bits (extra-mantissa-bits paper §3.1; docs/semantics.md §8): the layout, the
// restored format R it reconstructs to, and the pair values at R's edges that every pair form
// (pair_forms/) and the core's split (split.hpp) agree on.
#pragma once

#include <bit>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../encode.hpp"
#include "../format.hpp"
#include "../round.hpp"
#include "bitpack.hpp"

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

namespace detail {

/// The largest pair value: h the visible format's largest finite value, all extra bits set.
inline float largest_pair_value(const split_layout& l) {
  const format& f = l.visible;
  const std::uint64_t max_code =
      (static_cast<std::uint64_t>(f.max_exponent_field()) << f.mantissa_bits) | f.max_mantissa_field();
  return std::bit_cast<float>(
      minifloat::detail::bits_of_code<float>(l.restored(), (max_code << l.kept_bits()) | low_bits(l.kept_bits())));
}

/// The smallest magnitude code of R (= l.restored()) that is not a finite pair value: Inf's
/// (ieee); the NaN visible code's first pair (nan_only: R's codes from there are NaN or beyond
/// every pair); none for all_finite (2^(E + M'), above every code).
constexpr std::uint32_t first_special_code(const split_layout& l) {
  const format& v = l.visible;
  const int kept = l.kept_bits();
  const std::uint32_t top_field = low_bits(v.exponent_bits);
  if (v.encoding == specials::ieee) return (top_field << v.mantissa_bits) << kept;
  if (v.encoding == specials::nan_only) return low_bits(v.exponent_bits + v.mantissa_bits) << kept;
  return std::uint32_t{1} << (v.exponent_bits + v.mantissa_bits + kept);
}

}  // namespace detail
}  // namespace minifloat::storage
