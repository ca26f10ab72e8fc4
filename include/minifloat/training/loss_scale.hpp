// minifloat/training/loss_scale.hpp — dynamic loss scaling with the rules of PyTorch's
// torch.cuda.amp.GradScaler (the mixed-precision paper (Micikevicius et al., ICLR 2018, arXiv:1710.03740) §3.2; precision-assignment paper §4.2
// and App. B; docs/semantics.md §4).
//
// The loss is multiplied by the scale before backward so small gradients survive low-precision
// rounding; the gradients are unscaled (× 1/scale) before clipping, weight decay or the update.
// If any scaled gradient is non-finite the step is skipped, the scale is multiplied by the
// backoff factor and the growth counter resets; otherwise the counter grows and, when it reaches
// the growth interval, the scale is multiplied by the growth factor — kept only if the result is
// finite — and the counter resets. The scale is a float, as GradScaler's scale tensor is, and
// the arithmetic is GradScaler's (_amp_update_scale_, _amp_foreach_non_finite_check_and_unscale_).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

namespace minifloat::training {

struct loss_scaler_options {
  float init_scale = 65536.0f;  ///< 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  std::int64_t growth_interval = 2000;  ///< successful steps between growths (the paper: one epoch)
  bool enabled = true;                  ///< off: scale 1, nothing checked, every step taken
};

/// True when every value is finite.
inline bool all_finite(std::span<const float> values) {
  for (float v : values)
    if (!std::isfinite(v)) return false;
  return true;
}

class loss_scaler {
 public:
  explicit loss_scaler(const loss_scaler_options& o = {}) : opt_(o), scale_(o.init_scale) {
    if (!(o.init_scale > 0.0f) || !std::isfinite(o.init_scale))
      throw std::invalid_argument("minifloat::training::loss_scaler: init_scale must be positive and finite");
    if (!(o.growth_factor > 1.0f))
      throw std::invalid_argument("minifloat::training::loss_scaler: growth_factor must be > 1");
    if (!(o.backoff_factor > 0.0f && o.backoff_factor < 1.0f))
      throw std::invalid_argument("minifloat::training::loss_scaler: backoff_factor must be in (0, 1)");
    if (o.growth_interval < 1)
      throw std::invalid_argument("minifloat::training::loss_scaler: growth_interval must be >= 1");
  }

  const loss_scaler_options& options() const { return opt_; }
  bool enabled() const { return opt_.enabled; }
  /// The factor for the loss (1 when disabled).
  float scale() const { return opt_.enabled ? scale_ : 1.0f; }
  /// Successful steps since the last growth or backoff (GradScaler's _growth_tracker).
  std::int64_t growth_tracker() const { return tracker_; }
  /// Whether a non-finite gradient was seen since the last update().
  bool found_inf() const { return found_inf_; }

  /// GradScaler computes 1/scale in double and rounds it to float once.
  float inverse_scale() const { return static_cast<float>(1.0 / static_cast<double>(scale())); }

  /// Notes non-finite values of the scaled gradients without changing them.
  bool check(std::span<const float> scaled_grads) {
    if (opt_.enabled && !all_finite(scaled_grads)) found_inf_ = true;
    return found_inf_;
  }

  /// Checks the scaled gradients (before unscaling, as GradScaler does) and multiplies them by
  /// inverse_scale(). Call once per gradient tensor per step, before clipping or the update.
  /// Returns found_inf().
  bool unscale(std::span<float> grads) {
    if (!opt_.enabled) return false;
    check(grads);
    const float inv = inverse_scale();
    if (inv != 1.0f)
      for (float& v : grads) v *= inv;
    return found_inf_;
  }

  /// Whether the optimizer step should be taken this step (GradScaler.step skips it otherwise).
  bool should_step() const { return !found_inf_; }

  /// End of step: applies the rule to the found_inf() gathered since the last update and
  /// clears it. Call after the (possibly skipped) optimizer step.
  void update() {
    update(found_inf_);
    found_inf_ = false;
  }

  /// The rule with an explicit found_inf (for callers that check gradients themselves).
  void update(bool found_inf) {
    if (!opt_.enabled) return;
    if (found_inf) {
      scale_ *= opt_.backoff_factor;
      tracker_ = 0;
      return;
    }
    const std::int64_t successful = tracker_ + 1;
    if (successful == opt_.growth_interval) {
      const float grown = scale_ * opt_.growth_factor;
      if (std::isfinite(grown)) scale_ = grown;
      tracker_ = 0;
    } else {
      tracker_ = successful;
    }
  }

 private:
  loss_scaler_options opt_;
  float scale_;
  std::int64_t tracker_ = 0;
  bool found_inf_ = false;
};

}  // namespace minifloat::training
