// flag_parsing.hpp — the checks and the named-choice option that the train CLI's three flag blocks
// (train.cpp, weight_options.cpp, dynamic_containers.cpp) give CLI11, so that each flag is declared
// once with its name, help, default and check. A refused value is reported by CLI11 as
// "--flag: <what is wrong>, got <text>" and by train as a usage error.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <CLI/CLI.hpp>

namespace examples::flags {

/// A table of a choice flag: each value's name on the command line.
template <class E>
using choices = std::pair<std::string_view, E>;

namespace detail {
inline bool parse_number(const std::string& text, double& v) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc{} && end == text.data() + text.size();
}
inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace detail

/// A finite number in [lo, hi] (NaN and infinities refused).
inline CLI::Validator in_range(double lo, double hi) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        if (!detail::parse_number(text, v)) return "expects a number, got '" + text + "'";
        if (!std::isfinite(v) || v < lo || v > hi)
          return "must be in [" + detail::number_text(lo) + ", " + detail::number_text(hi) + "], got " + text;
        return {};
      },
      "");
}

/// A finite number > 0, at most `hi`.
inline CLI::Validator positive(double hi = std::numeric_limits<double>::max()) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        if (!detail::parse_number(text, v)) return "expects a number, got '" + text + "'";
        if (!(v > 0) || !std::isfinite(v)) return "must be positive, got " + text;
        if (v > hi) return "must be at most " + detail::number_text(hi) + ", got " + text;
        return {};
      },
      "");
}

/// A finite number >= 0.
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (!detail::parse_number(text, v)) return "expects a number, got '" + text + "'";
        if (!(v >= 0) || !std::isfinite(v)) return "must be finite and >= 0, got " + text;
        return {};
      },
      "");
}

/// A whole number in [lo, hi].
inline CLI::Validator whole(unsigned long long lo, unsigned long long hi) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        unsigned long long v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc::result_out_of_range) return "must be at most " + std::to_string(hi) + ", got " + text;
        if (ec != std::errc{} || end != text.data() + text.size()) return "expects a whole number, got '" + text + "'";
        if (v < lo) return "must be at least " + std::to_string(lo) + ", got " + text;
        if (v > hi) return "must be at most " + std::to_string(hi) + ", got " + text;
        return {};
      },
      "");
}

/// The names of a table as the help shows them: a|b|c.
template <class E, std::size_t N>
std::string names_of(const choices<E> (&table)[N]) {
  std::string names;
  for (const auto& [name, value] : table) (names += names.empty() ? "" : "|") += name;
  return names;
}

/// The name of `value` in `table` ("" when none).
template <class E, std::size_t N>
std::string_view name_of(const choices<E> (&table)[N], E value) {
  for (const auto& [name, v] : table)
    if (v == value) return name;
  return {};
}

/// A flag taking one of the names of `table`; sets `target` to its value. The default shown is
/// the name of target's value at declaration.
template <class E, std::size_t N>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, E& target, const choices<E> (&table)[N],
                        const std::string& help) {
  const std::string names = names_of(table);
  return app
      .add_option_function<std::string>(
          flag,
          [&target, &table](const std::string& text) {
            for (const auto& [name, value] : table)
              if (name == text) target = value;
          },
          help)
      ->check(CLI::Validator(
          [&table, names](std::string& text) -> std::string {
            for (const auto& [name, value] : table)
              if (name == text) return {};
            std::string listed;
            for (const auto& [name, value] : table) (listed += listed.empty() ? "" : ", ") += name;
            return "expects one of " + listed + ", got '" + text + "'";
          },
          ""))
      ->type_name(names)
      ->default_str(std::string(name_of(table, target)));
}

}  // namespace examples::flags
