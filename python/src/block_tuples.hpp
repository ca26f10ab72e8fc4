// python/src/block_tuples.hpp — block formats, block options and block statistics as the Python
// layer passes and receives them (python/minifloat/blocks.py), converted to and from block.hpp's
// types; shared by blocks.cpp and operands.cpp. Scalings and scale rules go by their position in
// block.hpp's enumerator and named_scale_rules, so a rule added there needs nothing here.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <minifloat/block.hpp>

#include "binding.hpp"

namespace minifloat::python {

/// block_scaling's names in enumerator order.
inline const std::vector<std::string> block_scaling_names{"e8m0", "e4m3_times_tensor"};

/// The names of block.hpp's scale rules, in its table's order.
inline std::vector<std::string> scale_rule_names() {
  std::vector<std::string> names;
  for (const auto& [name, rule] : named_scale_rules) names.emplace_back(name);
  return names;
}

inline scale_rule to_scale_rule(int index) {
  if (index < 0 || static_cast<std::size_t>(index) >= std::size(named_scale_rules))
    throw std::invalid_argument("minifloat: scale rule index " + std::to_string(index) + " is unknown");
  return named_scale_rules[index].second;
}

/// (element format tuple, block_size, scaling index, integer_elements) as the Python BlockFormat holds it.
using block_format_tuple = std::tuple<format_tuple, int, int, bool>;

inline block_format to_block_format(const block_format_tuple& t) {
  const auto& [element, size, scaling, integer] = t;
  return block_format{to_format(element), size, enumerator<block_scaling>(scaling, block_scaling_names, "block scaling"),
                      integer};
}

inline block_format_tuple to_tuple(const block_format& f) {
  return {to_tuple(f.element), f.block_size, static_cast<int>(f.scaling), f.integer_elements};
}

/// (mode, overflow, random_bits, seed, index, scale rule index, tensor_scale) as the Python layer passes them.
using block_options_tuple = std::tuple<int, int, int, std::uint64_t, std::uint64_t, int, float>;

inline block_options to_block_options(const block_options_tuple& t) {
  const auto [mode, on_overflow, random_bits, seed, index, rule, tensor_scale] = t;
  block_options o;
  o.mode = enumerator<rounding>(mode, rounding_names, "rounding");
  o.on_overflow = enumerator<overflow>(on_overflow, overflow_names, "overflow");
  o.random_bits = random_bits;
  o.seed = seed;
  o.index = index;
  o.rule = to_scale_rule(rule);
  o.tensor_scale = tensor_scale;
  return o;
}

/// ((values, overflows, underflows, nans, infinities), blocks, scale_clamped, nan_blocks), as
/// blocks.py's BlockStats takes it.
inline py::tuple stats_tuple(const block_stats& t) {
  const rounding_stats& e = t.elements;
  return py::make_tuple(py::make_tuple(e.values, e.overflows, e.underflows, e.nans, e.infinities), t.blocks,
                        t.scale_clamped, t.nan_blocks);
}

}  // namespace minifloat::python
