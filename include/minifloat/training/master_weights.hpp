// minifloat/training/master_weights.hpp — an FP32 master copy of one weight tensor with its
// low-precision working copy (the mixed-precision paper (Micikevicius et al., ICLR 2018, arXiv:1710.03740) §3.1; precision-assignment paper §3.1:
// θ_j ← rnd_fp32(θ_j − η·dθ̂_j) on the master, θ̂_j = rnd_π(θ_j)(θ_j) for the gradient computation).
//
// The optimizer updates master(); refresh() rounds the master into the working copy — the
// tensor the layer computes with — through the weight's site, so the rounding is counted in that
// site's step statistics (the overflow ratio promotion reads) and a promoted weight is rounded
// in its new format from its next refresh on.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "site.hpp"

namespace minifloat::training {

class master_weights {
 public:
  /// Takes the working tensor's current (fp32) values as the master. `working` is typically the
  /// layer's own weight storage and must outlive this object.
  explicit master_weights(std::span<float> working) : master_(working.begin(), working.end()), working_(working) {}

  /// The fp32 values the optimizer updates.
  std::span<float> master() { return master_; }
  std::span<const float> master() const { return master_; }
  std::span<const float> working() const { return working_; }

  /// working = master rounded by `s`. Call it after each update; the natural place is the start
  /// of the next step, after graph::begin_step and promotion, so the rounding counts in the step
  /// that uses the weights and uses the format promotion left in force.
  void refresh(site& s) {
    std::copy(master_.begin(), master_.end(), working_.begin());
    s.apply(working_);
  }

 private:
  std::vector<float> master_;
  std::span<float> working_;
};

}  // namespace minifloat::training
