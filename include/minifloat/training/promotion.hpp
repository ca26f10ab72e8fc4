// minifloat/training/promotion.hpp — overflow-driven precision promotion (precision-assignment
// paper §4.2, Algorithm 2; docs/semantics.md §2).
//
// After each optimizer step (and after the loss scaler's update, whether or not the step was
// skipped), every forward tensor — weight or activation — that is in low precision and whose
// overflow ratio in that step is >= Θ goes to its high format for the rest of training. Only
// that tensor changes; the step is not recomputed. Gradients are never promoted: dynamic loss
// scaling handles their overflows. The ratio is the site's step statistics: overflows counted on
// the unrounded values (|x| >= the format's overflow threshold, Inf and NaN included) over the
// elements rounded in the step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "site.hpp"

namespace minifloat::training {

struct promotion_event {
  std::uint64_t step = 0;
  std::string site;
  double overflow_ratio = 0;
};

class overflow_promotion {
 public:
  /// Θ = 0.01 is the paper's choice (§4.2); it reports 0.1 and 0.001 work as well.
  explicit overflow_promotion(double theta = 0.01) : theta_(theta) {
    if (!(theta >= 0.0 && theta <= 1.0))
      throw std::invalid_argument("minifloat::training::overflow_promotion: theta = " + std::to_string(theta) +
                                  " is outside [0, 1]");
  }

  double theta() const { return theta_; }

  /// Whether `s` would be promoted now.
  bool qualifies(const site& s) const {
    // A site that rounded nothing this step has no evidence; with Θ = 0 it would otherwise be
    // promoted on a 0/0 ratio.
    return s.is_low() && is_forward(s.kind()) && s.step_stats().values > 0 && s.overflow_ratio() >= theta_;
  }

  /// Promotes every qualifying site of `sites` and logs it under `step`; returns how many.
  std::size_t promote(std::span<site> sites, std::uint64_t step) {
    std::size_t n = 0;
    for (site& s : sites) {
      if (!qualifies(s)) continue;
      log_.push_back({step, s.name(), s.overflow_ratio()});
      s.set_level(precision::high);
      ++n;
    }
    return n;
  }

  /// Every promotion so far, in order.
  const std::vector<promotion_event>& log() const { return log_; }

 private:
  double theta_;
  std::vector<promotion_event> log_;
};

}  // namespace minifloat::training
