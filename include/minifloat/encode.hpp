// minifloat/encode.hpp — bit codes of a format: value -> code (round, then re-encode) and
// code -> value.
//
// Encoding first rounds with the one core (round.hpp); what remains is an exact change of
// layout from the source type's bits to the format's fields, and back. Codes are laid out
// sign | exponent field | mantissa field in the low 1 + E + M bits of a std::uint64_t.
// Values without a code: NaN in an all_finite format, ±Inf in an all_finite format. ±Inf in a
// nan_only format (OCP E4M3) encodes as NaN, as the OCP FP8 specification does.
// fnuz: every NaN encodes as the -0 code (sign bit only). E8M0 codes have no sign bit: the code
// is the exponent field alone (0 = 2^-127), 0xFF NaN.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <stdexcept>

#include "config.hpp"
#include "detail/lanes.hpp"
#include "format.hpp"
#include "round.hpp"

namespace minifloat {

/// A code, or the news that the value has none in the format.
struct code_result {
  std::uint64_t code = 0;
  bool representable = true;
};

namespace detail {

template <std::floating_point S>
using bits_t = typename source_layout<S>::bits;

MINIFLOAT_HD constexpr std::uint64_t nan_code(const format& f) {
  const std::uint64_t top = (std::uint64_t{1} << f.exponent_bits) - 1;
  if (f.encoding == specials::fnuz) return std::uint64_t{1} << (f.exponent_bits + f.mantissa_bits);  // the -0 code
  return f.encoding == specials::ieee ? (top << f.mantissa_bits) | (std::uint64_t{1} << (f.mantissa_bits - 1))
                                      : (top << f.mantissa_bits) | ((std::uint64_t{1} << f.mantissa_bits) - 1);
}

/// Constants of the layout change between a format's codes and source type S, derived once.
template <std::floating_point S>
struct codec_plan {
  using bits = typename source_layout<S>::bits;
  bits shift = 0;           ///< source mantissa bits beyond the format's
  bits mantissa_bits = 0;
  bits emin_field = 1;      ///< source exponent field of the format's smallest normal binade
  bits sign_shift = 0;      ///< from the source's sign bit to the code's
  bits code_mask = 0;       ///< the code's magnitude bits
  bits exponent_offset = 0; ///< (source bias - format bias) << source mantissa bits, wrapping
  bits nan_code = 0, inf_code = 0, top_exponent = 0;
  bits subnormal_to_normal = 0;  ///< added to a subnormal mantissa's own float bits (see value_lanes)
  bits subnormal_shift = 0;      ///< subnormal mantissa -> source subnormal bits
  bits tiny_mantissa = 0;        ///< subnormal mantissas below this are source subnormals
  bits sign_keep = 0;            ///< the code's sign bit, 0 for formats without one (E8M0)
  bool ieee = true, nan_only = false;  ///< nan_only: the all-ones magnitude is NaN (OCP E4M3, E8M0)
  bool fnuz = false;             ///< the -0 code is NaN
  bool zero_exponent_normal = false;  ///< exponent field 0 is a normal binade (E8M0: no zero, no subnormals)
};

template <std::floating_point S>
MINIFLOAT_HD constexpr codec_plan<S> make_codec_plan(const format& f) {
  using src = source_layout<S>;
  using bits = typename src::bits;
  codec_plan<S> c;
  const int M = f.mantissa_bits;
  c.shift = static_cast<bits>(src::mantissa_bits - M);
  c.mantissa_bits = static_cast<bits>(M);
  c.emin_field = static_cast<bits>(f.emin() + src::bias);
  c.sign_shift = static_cast<bits>(src::width - 1 - f.exponent_bits - M);
  c.code_mask = static_cast<bits>((std::uint64_t{1} << (f.exponent_bits + M)) - 1);
  c.exponent_offset = static_cast<bits>(static_cast<bits>(src::bias - f.exponent_bias) << src::mantissa_bits);
  c.top_exponent = static_cast<bits>((std::uint64_t{1} << f.exponent_bits) - 1);
  c.nan_code = static_cast<bits>(nan_code(f));
  c.inf_code = f.has_infinity() ? static_cast<bits>(c.top_exponent << M) : c.nan_code;
  // A subnormal code's mantissa m stands for m * 2^(emin - M). Converting m to S gives bits whose
  // exponent field is off by a constant from the value's, as long as the value is normal in S;
  // below that the value is an S subnormal, m shifted into place.
  c.subnormal_to_normal =
      static_cast<bits>(static_cast<bits>(static_cast<int>(c.emin_field) - M - src::bias) << src::mantissa_bits);
  const int tiny_log = M + 1 - static_cast<int>(c.emin_field);
  c.tiny_mantissa = tiny_log <= 0 ? 0 : static_cast<bits>(std::uint64_t{1} << (tiny_log > M ? M : tiny_log));
  // Only used when some subnormal codes are S subnormals; then the shift is below P.
  c.subnormal_shift = tiny_log <= 0 ? 0 : static_cast<bits>(static_cast<int>(c.shift) + static_cast<int>(c.emin_field) - 1);
  c.ieee = f.encoding == specials::ieee;
  c.nan_only = f.encoding == specials::nan_only || f.encoding == specials::unsigned_exponent;
  c.fnuz = f.encoding == specials::fnuz;
  c.zero_exponent_normal = f.encoding == specials::unsigned_exponent;
  c.sign_keep = f.has_sign() ? c.code_mask + 1 : 0;
  // E8M0: code 0 is 2^emin itself, so the layout change treats 2^emin like a subnormal whose
  // significand (the implicit bit) is shifted out, and every binade above gets a code one lower.
  if (c.zero_exponent_normal) c.emin_field += 1;
  return c;
}

/// Codes of already-rounded values `rb` (source bits of values of the format, or Inf/NaN), for a
/// scalar or a SIMD register. NaN and Inf get the NaN/Inf code (callers check representability).
template <std::floating_point S, class L>
constexpr L code_lanes(const codec_plan<S>& c, L rb) {
  using src = source_layout<S>;
  using bits = typename src::bits;
  constexpr int P = src::mantissa_bits;
  const L zero{};
  const L a = rb & src::abs_mask;
  const L sign = (rb & src::sign_mask) >> static_cast<int>(c.sign_shift);
  // The same binade arithmetic as the rounding core: significand with its implicit bit, shifted
  // down by the bits the format does not keep in that binade (more below its normal range).
  const L e = lane_max(a >> P, zero + 1);
  const L significand = a - ((e - 1) << P);
  const L below = lane_max(e, zero + c.emin_field) - e;
  const L drop = lane_min(below + c.shift, zero + bits{src::width - 1});
  const L code = ((lane_max(e, zero + c.emin_field) - c.emin_field) << static_cast<int>(c.mantissa_bits)) +
                 (significand >> drop);
  const L special = select(a > src::inf_bits, zero + c.nan_code, zero + c.inf_code);
  return select(a >= src::inf_bits, special, code) | (sign & c.sign_keep);
}

/// Source bits of the values codes stand for, for a scalar or a SIMD register; `float_bits`
/// converts an integer lane to the bits of S (exact: the mantissas converted fit S).
template <std::floating_point S, class L, class ToFloatBits>
constexpr L value_lanes(const codec_plan<S>& c, L code, ToFloatBits float_bits) {
  using src = source_layout<S>;
  const L zero{};
  const L magnitude = code & c.code_mask;
  const L sign = (code & c.sign_keep) << static_cast<int>(c.sign_shift);
  const L exponent = magnitude >> static_cast<int>(c.mantissa_bits);
  const L normal = (magnitude << static_cast<int>(c.shift)) + c.exponent_offset;
  const L subnormal = select(magnitude < c.tiny_mantissa, magnitude << static_cast<int>(c.subnormal_shift),
                             float_bits(magnitude) + c.subnormal_to_normal);
  L result = select(exponent == zero, select(magnitude == zero, zero, subnormal), normal);
  if (c.zero_exponent_normal) result = normal;
  const L quiet_nan = zero + (src::inf_bits | src::quiet_bit);
  if (c.ieee) {
    const L mantissa = magnitude & ((bits_t<S>{1} << static_cast<int>(c.mantissa_bits)) - 1);
    const L special = select(mantissa == zero, zero + src::inf_bits, quiet_nan);
    result = select(exponent == c.top_exponent, special, result);
  } else if (c.nan_only) {
    result = select(magnitude == c.code_mask, quiet_nan, result);
  } else if (c.fnuz) {
    result = select((code & (c.code_mask | c.sign_keep)) == c.sign_keep, quiet_nan, result);
  }
  return result | sign;
}

/// Code of an already-rounded value `rb` (source bits of a value of the format, or Inf/NaN).
template <std::floating_point S>
MINIFLOAT_HD constexpr code_result code_of_rounded(const format& f, typename source_layout<S>::bits rb) {
  using src = source_layout<S>;
  const auto a = rb & src::abs_mask;
  const bool representable = a < src::inf_bits || (a == src::inf_bits ? f.encoding != specials::all_finite : f.has_nan());
  return {static_cast<std::uint64_t>(code_lanes(make_codec_plan<S>(f), rb)), representable};
}

/// Source bits of the value a code stands for (exact for every format that fits S).
template <std::floating_point S>
MINIFLOAT_HD constexpr typename source_layout<S>::bits bits_of_code(const format& f, std::uint64_t code) {
  using bits = typename source_layout<S>::bits;
  const auto to_float_bits = [](bits m) { return std::bit_cast<bits>(static_cast<S>(m)); };
  return value_lanes(make_codec_plan<S>(f), static_cast<bits>(code), to_float_bits);
}

}  // namespace detail

/// The code of x rounded to f, or representable = false (NaN or Inf into an all_finite format).
template <std::floating_point S>
constexpr code_result try_encode(S x, const format& f, const rounding_options& o = {}) {
  // E8M0 from float (rounds_through_double): rounded and encoded as the double it widens to.
  if constexpr (sizeof(S) == 4)
    if (rounds_through_double<S>(f)) return try_encode(static_cast<double>(x), f, o);
  const rounder<S> r(f, o);
  return detail::code_of_rounded<S>(f, std::bit_cast<typename source_layout<S>::bits>(r(x)));
}

/// The code of x rounded to f; throws std::domain_error when the result has no code (device
/// code: traps).
template <std::floating_point S>
MINIFLOAT_HD std::uint64_t encode(S x, const format& f, const rounding_options& o = {}) {
  const code_result c = try_encode(x, f, o);
  if (!c.representable) {
#if defined(__CUDA_ARCH__)
    __trap();
#else
    throw std::domain_error("minifloat::encode: " + to_string(f) + " has no code for " +
                            (x != x ? std::string("NaN") : std::string("an infinite result")));
#endif
  }
  return c.code;
}

/// The value of a code, in S (float by default). Bits above the format's width are ignored.
template <std::floating_point S = float>
MINIFLOAT_HD S decode(std::uint64_t code, const format& f) {
#if defined(__CUDA_ARCH__)
  if (!fits_source<S>(f)) __trap();
#else
  // Every E8M0 value is a float (2^-127 a subnormal), which float's own codec cannot place: via double.
  if (rounds_through_double<S>(f))
    return static_cast<S>(std::bit_cast<double>(detail::bits_of_code<double>(f, code)));
  if (auto p = source_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat::format: " + p);
#endif
  return std::bit_cast<S>(detail::bits_of_code<S>(f, code));
}

}  // namespace minifloat
