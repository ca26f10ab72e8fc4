// minifloat/format_name.hpp — formats from their names, for command lines and configuration
// files: the named formats of format.hpp and the papers' fp(e,m,b) (format.hpp's
// paper_format; shared/reference-semantics.md §1).
//
// Accepted (case-sensitive, no spaces): fp32 | binary32, fp16 | binary16 | half, bf16 |
// bfloat16, e4m3, e5m2, e4m3fnuz, e5m2fnuz, e8m0, e2m3, e3m2, e2m1, int8_mx (format.hpp), and
// fp(E,M,B) with integers E, M and an additional bias B (may be
// negative): bias 2^(E-1) - 1 + B, subnormals, every code finite. Anything else, or an fp(E,M,B)
// that is not a valid format, throws std::invalid_argument naming the text.
#pragma once

#include <array>
#include <charconv>
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

/// Reads an integer at the front of `text` followed by `end`; advances past both.
inline bool read_int(std::string_view& text, char end, int& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc{} || ptr == text.data() + text.size() || *ptr != end) return false;
  text.remove_prefix(static_cast<std::size_t>(ptr - text.data()) + 1);
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
  if (!rest.starts_with("fp(")) throw fail("is not a format name (fp32, fp16, bf16, e4m3, e5m2, e4m3fnuz, e5m2fnuz, e8m0, e2m3, e3m2, e2m1, int8_mx or fp(e,m,b))");
  rest.remove_prefix(3);
  int e = 0, m = 0, b = 0;
  if (!detail::read_int(rest, ',', e) || !detail::read_int(rest, ',', m) || !detail::read_int(rest, ')', b) ||
      !rest.empty())
    throw fail("is not of the form fp(e,m,b) with integers e, m, b");
  if (e < 1 || e > 11) throw fail("has e outside 1..11");
  const format f = paper_format(e, m, b);
  if (const std::string p = f.problem(); !p.empty()) throw fail("is not a valid format: " + p);
  return f;
}

}  // namespace minifloat
