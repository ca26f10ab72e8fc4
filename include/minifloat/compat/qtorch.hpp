// minifloat/compat/qtorch.hpp — QPyTorch's float_quantize (qtorch.quant.float_quantize, its CPU
// kernel quant_cpu.cpp / bit_helper.cpp), reproduced on the one rounding core so that scripts
// written against QPyTorch get the same numbers. docs/python.md states the rules with examples.
//
// QPyTorch's "fp(exp, man)" is not one of our formats: its rounding happens in float's own
// binade and its range rules come afterwards. For a float x, with min_exp = 2 - 2^(exp-1):
//  - if x's exponent field - 127 >= min_exp ("normal path"): x's significand is rounded to `man`
//    bits in x's own binade — nearest with ties away from zero ("nearest"), or stochastically with
//    a uniform draw of 23 - man bits — a carry may move it up a binade (to Inf past FLT_MAX);
//    then any result whose exponent field exceeds 2^(exp-1) + 127 (Inf and NaN included, for
//    exp < 8) becomes ±(largest value with that field and `man` mantissa bits), the sign taken
//    from x. So the top binade is finite: max = 2^(2^(exp-1)) * (2 - 2^-man).
//  - otherwise ("subnormal path", zero and float subnormals included): s = ±2^min_exp with x's
//    sign; v = x + s in float (round to nearest even); v is rounded as above; the result is
//    v' - s. This gives subnormals of spacing 2^(min_exp - man), after a first rounding of x
//    to float's spacing at 2^min_exp; every zero result is +0 (x - x is +0 in IEEE arithmetic).
// Deviations, both where QPyTorch's C++ has undefined or payload-dependent behaviour: man = 23 is
// the identity on the mantissa (QPyTorch's `1 << -1` for "nearest"), and every NaN is treated
// alike — ±max for exp < 8, a quiet NaN for exp = 8 — where QPyTorch adds half a step to the
// payload bits (torch's default NaN 0x7fc00000 agrees; a payload whose top man + 1 bits are ones
// carries through the exponent into the sign there and comes out as a zero of the other sign). Stochastic draws are ours
// (counter-based, (seed, index)), with QPyTorch's distribution: P(up) = dropped bits / 2^(23-man).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "../format.hpp"
#include "../round.hpp"

namespace minifloat::compat {

/// Why (exp, man) is not a QPyTorch float format, or an empty string: exp in 1..8, man in 0..23.
inline std::string qtorch_problem(int exp_bits, int man_bits) {
  if (exp_bits < 1 || exp_bits > 8) return "exp = " + std::to_string(exp_bits) + " is outside 1..8";
  if (man_bits < 0 || man_bits > 23) return "man = " + std::to_string(man_bits) + " is outside 0..23";
  return {};
}

/// QPyTorch's float_quantize for one (exp, man, rounding); reuse it for many values.
class qtorch_quantizer {
 public:
  /// stochastic = false: QPyTorch's "nearest". Element i of a span draws from (seed, index + i).
  qtorch_quantizer(int exp_bits, int man_bits, bool stochastic, std::uint64_t seed = 0, std::uint64_t index = 0)
      : significand_(checked(exp_bits, man_bits), man_bits, stochastic, seed, index),
        min_exp_(2 - (1 << (exp_bits - 1))),
        max_field_(static_cast<std::uint32_t>((1 << (exp_bits - 1)) + 127)),
        max_magnitude_((max_field_ << 23) | (0x7fffffu & ~((std::uint32_t{1} << (23 - man_bits)) - 1))),
        shift_(std::ldexp(1.0f, min_exp_)) {}

  /// x quantized as element `index` (the random draw of stochastic rounding).
  float operator()(float x, std::uint64_t index) const {
    const auto bits = std::bit_cast<std::uint32_t>(x);
    const int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127;
    if (exponent < min_exp_) {
      const float s = std::copysign(shift_, x);
      return significand_(x + s, index) - s;
    }
    const float q = significand_(x, index);
    const auto qbits = std::bit_cast<std::uint32_t>(q);
    if (((qbits >> 23) & 0xffu) > max_field_) return std::bit_cast<float>((bits & 0x80000000u) | max_magnitude_);
    return q;
  }

  /// out[i] = quantized in[i] (element index first_index + i); in and out may be the same span.
  void apply(std::span<const float> in, std::span<float> out) const {
    if (in.size() != out.size()) throw std::invalid_argument("minifloat::compat::qtorch: input and output differ in size");
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = (*this)(in[i], significand_.first_index + i);
  }
  /// The same quantizer with its first element index moved on by `offset` (for chunked calls).
  qtorch_quantizer advanced(std::uint64_t offset) const {
    qtorch_quantizer q = *this;
    q.significand_.first_index += offset;
    return q;
  }

 private:
  static int checked(int exp_bits, int man_bits) {
    if (auto p = qtorch_problem(exp_bits, man_bits); !p.empty())
      throw std::invalid_argument("minifloat::compat::qtorch: " + p);
    return exp_bits;
  }

  /// Rounding of a float's significand to `man` bits in its own binade, by the core: the value
  /// as a double, rounded to fp(8, man) with bias 127 and an all-finite top binade (so the
  /// binade above FLT_MAX exists and converting back to float gives Inf, as QPyTorch's carry does).
  struct significand_rounding {
    rounder<double> round;
    std::uint64_t first_index;
    significand_rounding(int, int man_bits, bool stochastic, std::uint64_t seed, std::uint64_t index)
        : round(format{8, man_bits, 127, true, specials::all_finite},
                {stochastic ? rounding::stochastic : rounding::nearest_away, overflow::infinity,
                 man_bits == 23 ? 0 : 23 - man_bits, seed, 0}),
          first_index(index) {}
    float operator()(float x, std::uint64_t index) const { return static_cast<float>(round(static_cast<double>(x), index)); }
  };

  significand_rounding significand_;
  int min_exp_;
  std::uint32_t max_field_;
  std::uint32_t max_magnitude_;
  float shift_;
};

}  // namespace minifloat::compat
