// minifloat/format_name.hpp — formats from their names, for command lines and configuration
// files; the inverse of to_string(format) (format.hpp). docs/formats.md §1 has the table.
//
// Accepted (case-sensitive, no spaces):
//  - fp32 | binary32, fp16 | binary16 | half, bf16 | bfloat16, e4m3, e5m2, e4m3fnuz, e5m2fnuz,
//    e8m0, e2m3, e3m2, e2m1, int8_mx (format.hpp);
//  - paper_fp(e,m,b): the papers' fp(e,m,b) (format.hpp's paper_format): bias 2^(e-1) - 1 + b,
//    subnormals, every code finite. `fp(e,m,b)` is read the same way, for the command lines and
//    scripts written before the paper notation got its own name;
//  - ieee(E,M,bias=B), nan_only(E,M,bias=B), all_finite(E,M,bias=B), fnuz(E,M,bias=B),
//    unsigned_exponent(E,M,bias=B): any format with its whole bias, optionally ",no_subnormals"
//    before the closing parenthesis.
// Anything else, or a name of an invalid format, throws std::invalid_argument naming the text and
// the field. Every field is range-checked before any arithmetic, so hostile numbers (INT_MAX,
// INT_MIN, 30-digit integers) are rejected instead of overflowing.
#pragma once

#include <array>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "format.hpp"

namespace minifloat {

namespace detail {

inline constexpr std::array<std::pair<std::string_view, format>, 16> named_formats{{
    {"fp32", binary32},
    {"binary32", binary32},
    {"fp16", binary16},
    {"binary16", binary16},
    {"half", binary16},
    {"bf16", bfloat16},
    {"bfloat16", bfloat16},
    {"e4m3", e4m3},
    {"e5m2", e5m2},
    {"e4m3fnuz", e4m3fnuz},
    {"e5m2fnuz", e5m2fnuz},
    {"e8m0", e8m0},
    {"e2m3", e2m3},
    {"e3m2", e3m2},
    {"e2m1", e2m1},
    {"int8_mx", int8_mx},
}};

/// Reads the integer at the front of `text` into `out` and drops it; false when there is none or
/// it does not fit an int (std::from_chars reports that instead of overflowing).
inline bool read_int(std::string_view& text, int& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc{}) return false;
  text.remove_prefix(static_cast<std::size_t>(ptr - text.data()));
  return true;
}
/// Drops `token` from the front of `text`; false when it is not there.
inline bool read_token(std::string_view& text, std::string_view token) {
  if (!text.starts_with(token)) return false;
  text.remove_prefix(token.size());
  return true;
}

}  // namespace detail

/// The format a name stands for (see the file comment); throws std::invalid_argument otherwise.
inline format parse_format(std::string_view text) {
  for (const auto& [name, f] : detail::named_formats)
    if (text == name) return f;
  const auto fail = [&](const std::string& why) {
    return std::invalid_argument("minifloat::parse_format: '" + std::string(text) + "' " + why);
  };
  std::string_view rest = text;
  // Reads "name=" (when given) and an int, naming the field in the error.
  const auto field = [&](const char* name, std::string_view label, int& out) {
    if (!label.empty() && !detail::read_token(rest, label)) throw fail(std::string("lacks '") + std::string(label) + "'");
    if (!detail::read_int(rest, out)) throw fail(std::string("has no integer ") + name + " that fits an int");
  };
  const auto expect = [&](char c, const char* where) {
    if (!detail::read_token(rest, std::string_view(&c, 1))) throw fail(std::string("expects '") + c + "' " + where);
  };
  // The two leading fields "E,M," (named e and m in the papers' notation).
  int e = 0, m = 0;
  const auto exponent_and_mantissa = [&](const char* e_name, const char* m_name) {
    field(e_name, "", e);
    expect(',', (std::string("after ") + e_name).c_str());
    field(m_name, "", m);
    expect(',', (std::string("after ") + m_name).c_str());
  };
  const auto closing = [&](const char* where) {
    expect(')', where);
    if (!rest.empty()) throw fail("has text after the closing parenthesis");
  };

  if (detail::read_token(rest, "paper_fp(") || detail::read_token(rest, "fp(")) {
    int b = 0;
    exponent_and_mantissa("e", "m");
    field("b", "", b);
    closing("after b");
    if (e < 1 || e > 11) throw fail("has e = " + std::to_string(e) + " outside 1..11");
    if (m < 0 || m > 52) throw fail("has m = " + std::to_string(m) + " outside 0..52");
    // 64-bit sum: b may be anything an int holds.
    const long long bias = static_cast<long long>(default_bias(e)) + b;
    if (bias < -1022 || bias > 1023)
      throw fail("has b = " + std::to_string(b) + ": the bias 2^(e-1) - 1 + b = " + std::to_string(bias) +
                 " puts the range outside what double can hold");
    const format f = paper_format(e, m, b);
    if (const std::string p = f.problem(); !p.empty()) throw fail("is not a valid format: " + p);
    return f;
  }
  specials encoding{};
  if (detail::read_token(rest, "ieee(")) encoding = specials::ieee;
  else if (detail::read_token(rest, "nan_only(")) encoding = specials::nan_only;
  else if (detail::read_token(rest, "all_finite(")) encoding = specials::all_finite;
  else if (detail::read_token(rest, "fnuz(")) encoding = specials::fnuz;
  else if (detail::read_token(rest, "unsigned_exponent(")) encoding = specials::unsigned_exponent;
  else
    throw fail(
        "is not a format name (fp32, fp16, bf16, e4m3, e5m2, e4m3fnuz, e5m2fnuz, e8m0, e2m3, e3m2, e2m1, "
        "int8_mx, paper_fp(e,m,b), ieee(E,M,bias=B), nan_only(E,M,bias=B), all_finite(E,M,bias=B), "
        "fnuz(E,M,bias=B) or unsigned_exponent(E,M,bias=B))");
  int bias = 0;
  exponent_and_mantissa("E", "M");
  field("B", "bias=", bias);
  const bool subnormals = !detail::read_token(rest, ",no_subnormals");
  closing("after the bias (or ,no_subnormals)");
  const format f{e, m, bias, subnormals, encoding};
  if (const std::string p = f.problem(); !p.empty()) throw fail("is not a valid format: " + p);
  return f;
}

}  // namespace minifloat
