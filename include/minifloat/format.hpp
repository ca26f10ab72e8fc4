// minifloat/format.hpp — what a low-precision floating-point format is.
//
// A format is a sign bit, E exponent bits, M mantissa bits, an integer exponent bias,
// subnormals on or off, and one of three encodings of the special values.
// The papers' fp(e, m, b) with an "additional bias" b follow
// docs/semantics.md §1 (precision-assignment paper, §3 and its reference code):
// bias = 2^(e-1) - 1 + b and no code is reserved for Inf or NaN. That notation has its own
// spelling everywhere — paper_format(e, m, b), paper_fp<e, m, b>, "paper_fp(e,m,b)" — so that
// it cannot be mistaken for fp<E, M, Bias> (whole bias, IEEE specials).
// docs/formats.md states every rule with worked examples.
#pragma once

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>

#include "config.hpp"

namespace minifloat {

/// How the top of the exponent range is used.
enum class specials : std::uint8_t {
  ieee,        ///< top exponent code = Inf (mantissa 0) and NaN (mantissa != 0): binary16, e5m2
  nan_only,    ///< OCP E4M3 style: no Inf; only S.1...1.1...1 is NaN, the rest of the top binade is finite
  all_finite,  ///< every code is a number (the papers' fp(e,m,b)): no Inf, no NaN
  fnuz,        ///< "finite, NaN, unsigned zero" (e4m3fnuz, e5m2fnuz): no Inf, no -0; the -0 code is the one NaN
  unsigned_exponent,  ///< OCP E8M0: no sign bit, no zero; every exponent field is 2^(field - bias), all ones is NaN
};

/// A format descriptor; an aggregate usable as a template argument (see fp.hpp).
struct format {
  int exponent_bits = 8;
  int mantissa_bits = 23;
  int exponent_bias = 127;
  bool subnormals = true;  ///< off: results below the smallest normal are flushed to signed zero
  specials encoding = specials::ieee;

  friend constexpr bool operator==(const format&, const format&) = default;

  MINIFLOAT_HD constexpr int bit_width() const { return (has_sign() ? 1 : 0) + exponent_bits + mantissa_bits; }
  /// False for unsigned_exponent (E8M0), whose codes have no sign bit.
  MINIFLOAT_HD constexpr bool has_sign() const { return encoding != specials::unsigned_exponent; }
  /// Largest exponent field that encodes finite numbers.
  MINIFLOAT_HD constexpr int max_exponent_field() const {
    const int top = (1 << exponent_bits) - 1;
    return encoding == specials::ieee || encoding == specials::unsigned_exponent ? top - 1 : top;
  }
  /// Unbiased exponent of the largest binade (emax) and of the smallest normal binade (emin).
  MINIFLOAT_HD constexpr int emax() const { return max_exponent_field() - exponent_bias; }
  /// unsigned_exponent has no zero or subnormals: its exponent field 0 is the binade 2^-bias.
  MINIFLOAT_HD constexpr int emin() const {
    return encoding == specials::unsigned_exponent ? -exponent_bias : 1 - exponent_bias;
  }
  /// Mantissa field of the largest finite value (one below all-ones for nan_only).
  MINIFLOAT_HD constexpr std::uint64_t max_mantissa_field() const {
    const std::uint64_t ones = (std::uint64_t{1} << mantissa_bits) - 1;
    return encoding == specials::nan_only ? ones - 1 : ones;
  }
  MINIFLOAT_HD constexpr bool has_infinity() const { return encoding == specials::ieee; }
  MINIFLOAT_HD constexpr bool has_nan() const { return encoding != specials::all_finite; }

  /// Derived constants, exact in double for every valid format.
  MINIFLOAT_HD constexpr double max_finite() const {
    return exp2i(emax()) * (1.0 + static_cast<double>(max_mantissa_field()) * exp2i(-mantissa_bits));
  }
  MINIFLOAT_HD constexpr double min_normal() const { return exp2i(emin()); }
  /// Smallest positive value: the smallest subnormal, or the smallest normal without subnormals.
  MINIFLOAT_HD constexpr double min_positive() const {
    return subnormals ? exp2i(emin() - mantissa_bits) : min_normal();
  }
  MINIFLOAT_HD constexpr double min_subnormal() const { return exp2i(emin() - mantissa_bits); }
  MINIFLOAT_HD constexpr double epsilon() const { return exp2i(-mantissa_bits); }
  /// Inputs with |x| >= this overflow (docs/semantics.md §2): the midpoint between the largest
  /// finite value and the next value the format would have with one more binade.
  MINIFLOAT_HD constexpr double overflow_threshold() const {
    return max_finite() + exp2i(emax() - mantissa_bits - 1);
  }

  /// The first problem with this descriptor, or an empty string when it is valid.
  std::string problem() const {
    if (exponent_bits < 1 || exponent_bits > 11)
      return "exponent_bits = " + std::to_string(exponent_bits) + " is outside 1..11";
    if (mantissa_bits < 0 || mantissa_bits > 52)
      return "mantissa_bits = " + std::to_string(mantissa_bits) + " is outside 0..52";
    if (encoding == specials::ieee && exponent_bits < 2)
      return "exponent_bits = 1 leaves an ieee encoding no normal binade";
    if (encoding == specials::ieee && mantissa_bits < 1)
      return "mantissa_bits = 0 leaves an ieee encoding no NaN code";
    if (encoding == specials::nan_only && mantissa_bits < 1)
      return "mantissa_bits = 0 leaves a nan_only encoding no finite value in its top binade";
    if (encoding == specials::unsigned_exponent && (mantissa_bits != 0 || subnormals))
      return "mantissa_bits = " + std::to_string(mantissa_bits) +
             " and subnormals must be 0 and false for an unsigned_exponent encoding";
    // In 64 bits: a hostile bias (INT_MIN, INT_MAX) must not overflow emin/emax.
    const long long bias = exponent_bias;
    const long long emin_field = encoding == specials::unsigned_exponent ? 0 : 1;
    if (static_cast<long long>(max_exponent_field()) - bias > 1023 || emin_field - bias < -1022)
      return "exponent_bias = " + std::to_string(exponent_bias) +
             " puts the range outside what double can hold";
    return {};
  }
  /// Throws std::invalid_argument naming the bad field.
  void validate() const {
    if (auto p = problem(); !p.empty()) throw std::invalid_argument("minifloat::format: " + p);
  }

  /// The exact power of two 2^e as a double, usable in constant expressions and device code.
  MINIFLOAT_HD static constexpr double exp2i(int e) {
    double r = 1.0;
    const double step = e >= 0 ? 2.0 : 0.5;
    for (int i = 0; i < (e >= 0 ? e : -e); ++i) r *= step;
    return r;
  }
};

/// IEEE-style default bias 2^(E-1) - 1.
MINIFLOAT_HD constexpr int default_bias(int exponent_bits) { return (1 << (exponent_bits - 1)) - 1; }

/// An IEEE-style format with the default bias unless one is given.
MINIFLOAT_HD constexpr format ieee_format(int exponent_bits, int mantissa_bits) {
  return format{exponent_bits, mantissa_bits, default_bias(exponent_bits), true, specials::ieee};
}

/// The papers' fp(e, m, b): bias 2^(e-1) - 1 + b, subnormals on, every code finite.
MINIFLOAT_HD constexpr format paper_format(int exponent_bits, int mantissa_bits, int additional_bias) {
  return format{exponent_bits, mantissa_bits, default_bias(exponent_bits) + additional_bias, true,
                specials::all_finite};
}

inline constexpr format binary32 = ieee_format(8, 23);
inline constexpr format binary16 = ieee_format(5, 10);
inline constexpr format bfloat16 = ieee_format(8, 7);
inline constexpr format e5m2 = ieee_format(5, 2);                        ///< OCP FP8 E5M2, max 57344
inline constexpr format e4m3 = format{4, 3, 7, true, specials::nan_only};  ///< OCP FP8 E4M3, max 448
/// fnuz variants (no Inf, no -0, NaN = 0x80): the bias is one above OCP's. Max 240 and 57344.
inline constexpr format e4m3fnuz = format{4, 3, 8, true, specials::fnuz};
inline constexpr format e5m2fnuz = format{5, 2, 16, true, specials::fnuz};
/// OCP MX v1.0 scale and element formats: E8M0 (2^-127..2^127, 0xFF NaN), FP6 E2M3 (max 7.5),
/// FP6 E3M2 (max 28), FP4 E2M1 (max 6); the FP6/FP4 element formats have no Inf or NaN.
inline constexpr format e8m0 = format{8, 0, 127, false, specials::unsigned_exponent};
inline constexpr format e2m3 = format{2, 3, 1, true, specials::all_finite};
inline constexpr format e3m2 = format{3, 2, 3, true, specials::all_finite};
inline constexpr format e2m1 = format{2, 1, 1, true, specials::all_finite};
/// MXINT8's element as a minifloat: sign-magnitude k * 2^-6, |k| <= 127 (a 1-bit exponent with
/// bias 1 makes both binades spaced 2^-6). Its storage code is the two's-complement k (block.hpp).
inline constexpr format int8_mx = format{1, 6, 1, true, specials::all_finite};
inline constexpr format fp_6_9_0 = paper_format(6, 9, 0);  ///< 16-bit "high" of the precision-assignment paper
inline constexpr format fp_4_3_4 = paper_format(4, 3, 4);  ///< 8-bit forward "low" (HFP8 1-4-3, bias 11)
inline constexpr format fp_5_2_0 = paper_format(5, 2, 0);  ///< 8-bit backward "low"

/// The name of an encoding as format names spell it.
inline const char* to_string(specials e) {
  switch (e) {
    case specials::ieee: return "ieee";
    case specials::nan_only: return "nan_only";
    case specials::all_finite: return "all_finite";
    case specials::fnuz: return "fnuz";
    case specials::unsigned_exponent: return "unsigned_exponent";
  }
  return "?";
}

/// A name parse_format (format_name.hpp) reads back to the same format: the named formats by
/// name (binary32, binary16, bfloat16, e4m3, e5m2, the fnuz, E8M0 and MX element formats), every all_finite format with subnormals in
/// the papers' notation "paper_fp(e,m,b)", anything else as "ENCODING(E,M,bias=B)" with
/// ",no_subnormals" inside the parentheses when subnormals are off.
inline std::string to_string(const format& f) {
  const std::pair<const char*, format> named[] = {
      {"binary32", binary32}, {"binary16", binary16}, {"bfloat16", bfloat16}, {"e4m3", e4m3},
      {"e5m2", e5m2},         {"e4m3fnuz", e4m3fnuz}, {"e5m2fnuz", e5m2fnuz}, {"e8m0", e8m0},
      {"e2m3", e2m3},         {"e3m2", e3m2},         {"e2m1", e2m1},         {"int8_mx", int8_mx}};
  for (const auto& [name, g] : named)
    if (f == g) return name;
  const std::string e = std::to_string(f.exponent_bits), m = std::to_string(f.mantissa_bits);
  if (f.encoding == specials::all_finite && f.subnormals && f.exponent_bits >= 1 && f.exponent_bits <= 30)
    return "paper_fp(" + e + "," + m + "," +
           std::to_string(static_cast<long long>(f.exponent_bias) - default_bias(f.exponent_bits)) + ")";
  return std::string(to_string(f.encoding)) + "(" + e + "," + m + ",bias=" + std::to_string(f.exponent_bias) +
         (f.subnormals ? "" : ",no_subnormals") + ")";
}

inline std::ostream& operator<<(std::ostream& os, const format& f) { return os << to_string(f); }

}  // namespace minifloat
