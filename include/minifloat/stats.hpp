// minifloat/stats.hpp — what a rounding pass saw: the counts behind overflow-driven precision
// promotion (precision-assignment paper §3.3; docs/semantics.md §2).
//
// Counting is opt-in: kernels take a rounding_stats& only in the counting overloads, so the
// plain path carries no counters. A stats object belongs to its caller (no global state); give
// each thread its own and add them with +=.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace minifloat {

struct rounding_stats {
  std::uint64_t values = 0;      ///< elements rounded
  std::uint64_t overflows = 0;   ///< |x| >= format.overflow_threshold() on the unrounded input, Inf and NaN included
  std::uint64_t underflows = 0;  ///< finite nonzero inputs whose result is zero
  std::uint64_t nans = 0;        ///< NaN inputs
  std::uint64_t infinities = 0;  ///< ±Inf inputs

  /// overflows / values (0 for an empty pass), the quantity compared with Θ for promotion.
  MINIFLOAT_HD constexpr double overflow_ratio() const {
    return values == 0 ? 0.0 : static_cast<double>(overflows) / static_cast<double>(values);
  }
  MINIFLOAT_HD constexpr double underflow_ratio() const {
    return values == 0 ? 0.0 : static_cast<double>(underflows) / static_cast<double>(values);
  }
  MINIFLOAT_HD constexpr rounding_stats& operator+=(const rounding_stats& o) {
    values += o.values;
    overflows += o.overflows;
    underflows += o.underflows;
    nans += o.nans;
    infinities += o.infinities;
    return *this;
  }
  friend constexpr bool operator==(const rounding_stats&, const rounding_stats&) = default;
};

}  // namespace minifloat
