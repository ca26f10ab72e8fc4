// minifloat/encode.hpp — bit codes of a format: value -> code (round, then re-encode) and
// code -> value.
//
// Encoding first rounds with the one core (round.hpp); what remains is an exact change of
// layout from the source type's bits to the format's fields, and back. Codes are laid out
// sign | exponent field | mantissa field in the low 1 + E + M bits of a std::uint64_t.
// Values without a code: NaN in an all_finite format, ±Inf in an all_finite format. ±Inf in a
// nan_only format (OCP E4M3) encodes as NaN, as the OCP FP8 specification does.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <stdexcept>

#include "config.hpp"
#include "format.hpp"
#include "round.hpp"

namespace minifloat {

/// A code, or the news that the value has none in the format.
struct code_result {
  std::uint64_t code = 0;
  bool representable = true;
};

namespace detail {

MINIFLOAT_HD constexpr std::uint64_t nan_code(const format& f) {
  const std::uint64_t top = (std::uint64_t{1} << f.exponent_bits) - 1;
  return f.encoding == specials::ieee ? (top << f.mantissa_bits) | (std::uint64_t{1} << (f.mantissa_bits - 1))
                                      : (top << f.mantissa_bits) | ((std::uint64_t{1} << f.mantissa_bits) - 1);
}

/// Code of an already-rounded value `rb` (source bits of a value of the format, or Inf/NaN).
template <std::floating_point S>
MINIFLOAT_HD constexpr code_result code_of_rounded(const format& f, typename source_layout<S>::bits rb) {
  using src = source_layout<S>;
  using bits = typename src::bits;
  const std::uint64_t sign = static_cast<std::uint64_t>(rb >> (src::width - 1)) << (f.exponent_bits + f.mantissa_bits);
  const bits a = rb & src::abs_mask;
  if (a > src::inf_bits) return {sign | nan_code(f), f.has_nan()};
  if (a == src::inf_bits) {
    if (f.has_infinity()) return {sign | ((((std::uint64_t{1} << f.exponent_bits) - 1)) << f.mantissa_bits), true};
    return {sign | nan_code(f), f.has_nan()};
  }
  if (a == 0) return {sign, true};
  const int shift = src::mantissa_bits - f.mantissa_bits;
  const bits field = a >> src::mantissa_bits;
  const bits emin_field = static_cast<bits>(f.emin() + src::bias);
  if (field >= emin_field) {
    const std::uint64_t exponent = static_cast<std::uint64_t>(static_cast<int>(field) - src::bias + f.exponent_bias);
    return {sign | (exponent << f.mantissa_bits) | static_cast<std::uint64_t>((a & src::mantissa_mask) >> shift), true};
  }
  // Below the format's normal range: the code is the value in units of the smallest subnormal.
  const bits e = field == 0 ? 1 : field;
  const bits significand = a - ((e - 1) << src::mantissa_bits);
  return {sign | static_cast<std::uint64_t>(significand >> (shift + static_cast<int>(emin_field - e))), true};
}

/// Source bits of the value a code stands for (exact for every format that fits S).
template <std::floating_point S>
MINIFLOAT_HD constexpr typename source_layout<S>::bits bits_of_code(const format& f, std::uint64_t code) {
  using src = source_layout<S>;
  using bits = typename src::bits;
  const int M = f.mantissa_bits;
  const bits sign = static_cast<bits>((code >> (f.exponent_bits + M)) & 1) << (src::width - 1);
  const std::uint64_t exponent = (code >> M) & ((std::uint64_t{1} << f.exponent_bits) - 1);
  const std::uint64_t mantissa = code & ((std::uint64_t{1} << M) - 1);
  const std::uint64_t top = (std::uint64_t{1} << f.exponent_bits) - 1;
  if (f.encoding == specials::ieee && exponent == top)
    return sign | (mantissa == 0 ? src::inf_bits : src::inf_bits | src::quiet_bit);
  if (f.encoding == specials::nan_only && exponent == top && mantissa == (std::uint64_t{1} << M) - 1)
    return sign | src::inf_bits | src::quiet_bit;
  const int shift = src::mantissa_bits - M;
  if (exponent != 0) {
    const bits field = static_cast<bits>(static_cast<int>(exponent) - f.exponent_bias + src::bias);
    return sign | (field << src::mantissa_bits) | (static_cast<bits>(mantissa) << shift);
  }
  if (mantissa == 0) return sign;
  // Subnormal code: mantissa * 2^(emin - M); normalise into the source's layout.
  const int top_bit = static_cast<int>(std::bit_width(mantissa)) - 1;
  const int field = f.emin() - M + top_bit + src::bias;
  if (field >= 1) {
    const bits fraction = static_cast<bits>(mantissa - (std::uint64_t{1} << top_bit)) << (src::mantissa_bits - top_bit);
    return sign | (static_cast<bits>(field) << src::mantissa_bits) | fraction;
  }
  return sign | (static_cast<bits>(mantissa) << (f.emin() - M - (src::emin - src::mantissa_bits)));
}

}  // namespace detail

/// The code of x rounded to f, or representable = false (NaN or Inf into an all_finite format).
template <std::floating_point S>
constexpr code_result try_encode(S x, const format& f, const rounding_options& o = {}) {
  const rounder<S> r(f, o);
  return detail::code_of_rounded<S>(f, std::bit_cast<typename source_layout<S>::bits>(r(x)));
}

/// The code of x rounded to f; throws std::domain_error when the result has no code.
template <std::floating_point S>
std::uint64_t encode(S x, const format& f, const rounding_options& o = {}) {
  const code_result c = try_encode(x, f, o);
  if (!c.representable)
    throw std::domain_error("minifloat::encode: " + to_string(f) + " has no code for " +
                            (x != x ? std::string("NaN") : std::string("an infinite result")));
  return c.code;
}

/// The value of a code, in S (float by default). Bits above the format's width are ignored.
template <std::floating_point S = float>
S decode(std::uint64_t code, const format& f) {
  if (auto p = source_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat::format: " + p);
  return std::bit_cast<S>(detail::bits_of_code<S>(f, code));
}

}  // namespace minifloat
