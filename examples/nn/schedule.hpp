// nn/schedule.hpp — the cosine learning-rate schedule (PyTorch's CosineAnnealingLR in closed
// form), optionally after a linear warm-up; evaluated per step or per epoch, as the caller counts.
#pragma once

#include <cmath>
#include <cstddef>
#include <numbers>

namespace nn {

struct cosine_schedule {
  double base_lr = 0.1;
  double min_lr = 0.0;
  std::size_t total = 1;   // steps (or epochs) of the whole run, warm-up included
  std::size_t warmup = 0;  // first steps ramp linearly from base_lr/warmup up to base_lr

  /// The rate for step t (0-based): min + (base − min)(1 + cos(π t'/T'))/2 with t' and T' counted
  /// after the warm-up; min_lr from the end on (PyTorch's formula would climb again).
  [[nodiscard]] double operator()(std::size_t t) const {
    if (t < warmup) return base_lr * static_cast<double>(t + 1) / static_cast<double>(warmup);
    if (t >= total || total <= warmup) return min_lr;
    const double progress = static_cast<double>(t - warmup) / static_cast<double>(total - warmup);
    return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  }
};

}  // namespace nn
