// minifloat/training/footprint.hpp — the memory measures of the precision-assignment paper
// (§3.2, §5.2; docs/semantics.md §3): the model aggregate (total bits of all tensors
// P, Y, GY, GP of one gradient computation at the training batch size) and the low-precision
// ratio counted in bits, per step and averaged over an epoch.
//
// Low-precision ratio = Σ_{t low} n_t·(hi_t − lo_t) / Σ_t n_t·(hi_t − lo_t): the bits saved
// against the all-high assignment over the bits the all-low assignment would save. hi_t, lo_t
// are the bit widths of the site's candidates; a disabled (fp32) site counts as high here (it
// is not in low precision) and as 32 bits in the aggregate. With
// the paper's C (16-bit high, 8-bit low) this is the reference code's
// (all_bit_num − upd_bit_num) / all_bit_num · 2 and equals the low elements' share of TS — and
// since GP never goes low it ends below the r demotion aimed at.
#pragma once

#include <cstdint>
#include <span>

#include "site.hpp"

namespace minifloat::training {

struct footprint {
  std::uint64_t total_bits = 0;     ///< model aggregate under the current assignment
  std::uint64_t all_high_bits = 0;  ///< model aggregate if every tensor were high
  std::uint64_t saved_bits = 0;     ///< Σ n·(hi − lo) over the sites in low precision
  std::uint64_t saveable_bits = 0;  ///< Σ n·(hi − lo) over all sites: the all-low saving, GP included
  double low_ratio() const {
    return saveable_bits == 0 ? 0.0 : static_cast<double>(saved_bits) / static_cast<double>(saveable_bits);
  }
};

inline footprint measure_footprint(std::span<const site> sites) {
  footprint f;
  for (const site& s : sites) {
    const std::uint64_t n = s.numel();
    const auto hi = static_cast<std::uint64_t>(s.formats().high.bit_width());
    const auto lo = static_cast<std::uint64_t>(s.formats().low.bit_width());
    f.total_bits += s.storage_bits();  // scales included for block formats
    f.all_high_bits += n * hi;
    if (hi <= lo) continue;  // a site without a narrower candidate cannot save anything
    f.saveable_bits += n * (hi - lo);
    if (s.is_low()) f.saved_bits += n * (hi - lo);
  }
  return f;
}

/// Per-epoch means of the per-step measures: call add() once per training step.
class footprint_accumulator {
 public:
  void add(const footprint& f) {
    ++steps_;
    ratio_sum_ += f.low_ratio();
    bits_sum_ += static_cast<double>(f.total_bits);
  }
  std::uint64_t steps() const { return steps_; }
  double mean_low_ratio() const { return steps_ == 0 ? 0.0 : ratio_sum_ / static_cast<double>(steps_); }
  double mean_total_bits() const { return steps_ == 0 ? 0.0 : bits_sum_ / static_cast<double>(steps_); }
  void reset() { *this = {}; }

 private:
  std::uint64_t steps_ = 0;
  double ratio_sum_ = 0;
  double bits_sum_ = 0;
};

}  // namespace minifloat::training
