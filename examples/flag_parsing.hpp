// flag_parsing.hpp — the number parsers of the train CLI's flags, one copy for the trainer's own
// flags (train.cpp), the weight-storage flags (weight_options.cpp) and the dynamic-container
// flags (dynamic_containers.cpp). Each throws std::invalid_argument naming the flag and the text
// it got; train.cpp reports that as a usage error.
#pragma once

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <string_view>

namespace examples::flags {

/// The whole of `text` as a T.
template <class T>
T number(std::string_view flag, std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size())
    throw std::invalid_argument(std::string(flag) + " expects a number, got '" + std::string(text) + "'");
  return value;
}

inline double in_range(std::string_view flag, std::string_view text, double lo, double hi) {
  const double v = number<double>(flag, text);
  if (!(v >= lo && v <= hi))
    throw std::invalid_argument(std::string(flag) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                "], got " + std::string(text));
  return v;
}

inline double positive(std::string_view flag, std::string_view text) {
  const double v = number<double>(flag, text);
  if (!(v > 0.0) || !std::isfinite(v))
    throw std::invalid_argument(std::string(flag) + " must be positive, got " + std::string(text));
  return v;
}

inline double non_negative(std::string_view flag, std::string_view text) {
  const double v = number<double>(flag, text);
  if (!(v >= 0.0) || !std::isfinite(v))
    throw std::invalid_argument(std::string(flag) + " must be finite and >= 0, got " + std::string(text));
  return v;
}

/// A whole number >= min.
template <class T>
T at_least(std::string_view flag, std::string_view text, T min) {
  const T v = number<T>(flag, text);
  if (v < min)
    throw std::invalid_argument(std::string(flag) + " must be at least " + std::to_string(min) + ", got " +
                                std::string(text));
  return v;
}

/// A whole number in [min, max].
template <class T>
T between(std::string_view flag, std::string_view text, T min, T max) {
  const T v = at_least<T>(flag, text, min);
  if (v > max)
    throw std::invalid_argument(std::string(flag) + " must be at most " + std::to_string(max) + ", got " +
                                std::string(text));
  return v;
}

}  // namespace examples::flags
