// minifloat/training/bitwave.hpp — BitWave (Schrödinger's FP §3.2; our reading in
// docs/semantics.md §6): one network-wide mantissa bitlength and one symmetric
// exponent range, steered by the trend of the training loss.
//
// Rules (docs/dynamic-containers.md):
//  - Keep the last H per-batch losses (default 100). Once H are held, every `cadence` batches
//    (default 1: "at each batch"), fit a least-squares line through (0, l_0) … (H−1, l_{H−1}) and
//    divide its slope by the mean loss. Slope < −T (default T = 1e-3): drop one mantissa bit and
//    narrow the exponent range by one on each side; slope > +T: add them back; else hold.
//  - Mantissa bits stay in [0, 23]; the narrowing s in [0, 126], the range being [−126 + s, 127 − s]
//    (s = 0 is fp32's own container, container_quantize.hpp). Each component can be left alone.
//  - fix_at_average(): from then on the mantissa bits are ceil(mean of the per-batch bits so far)
//    and the narrowing floor(mean of the per-batch narrowings so far) — both rounded towards the
//    wider container, like QM/QE's round-up.
// Values are quantized by quantize_container(), exactly as QM/QE quantize them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <stdexcept>
#include <string>

#include "container_quantize.hpp"

namespace minifloat::training {

/// Least-squares slope of `losses` against their index, divided by their mean; 0 for fewer than
/// two losses or a zero mean.
template <class Range>
double normalised_loss_slope(const Range& losses) {
  double n = 0, sum = 0;
  for (double l : losses) {
    sum += l;
    n += 1;
  }
  if (n < 2 || sum == 0) return 0.0;
  const double mean_x = (n - 1) / 2, mean_y = sum / n;
  double sxy = 0, sxx = 0, x = 0;
  for (double l : losses) {
    sxy += (x - mean_x) * (l - mean_y);
    sxx += (x - mean_x) * (x - mean_x);
    x += 1;
  }
  return sxy / sxx / mean_y;
}

struct bitwave_options {
  std::size_t history = 100;  ///< H
  double threshold = 1e-3;    ///< T, on the slope normalised by the mean loss
  std::size_t cadence = 1;    ///< batches between decisions once the history is full
  bool adjust_mantissa = true;
  bool adjust_exponent = true;
  int initial_mantissa_bits = fp32_mantissa_bits;
  int initial_narrowing = 0;

  void validate() const {
    if (history < 2) throw std::invalid_argument("bitwave_options: history must be at least 2");
    if (!(threshold >= 0) || !std::isfinite(threshold))
      throw std::invalid_argument("bitwave_options: threshold must be finite and >= 0");
    if (cadence < 1) throw std::invalid_argument("bitwave_options: cadence must be at least 1");
    if (initial_mantissa_bits < 0 || initial_mantissa_bits > fp32_mantissa_bits)
      throw std::invalid_argument("bitwave_options: initial_mantissa_bits must be in 0..23");
    if (initial_narrowing < 0 || initial_narrowing > max_narrowing)
      throw std::invalid_argument("bitwave_options: initial_narrowing must be in 0..126");
  }
};

class bitwave {
 public:
  enum class decision : signed char { narrower = -1, hold = 0, wider = 1 };

  explicit bitwave(bitwave_options options = {})
      : options_((options.validate(), options)),
        mantissa_(options.initial_mantissa_bits),
        narrowing_(options.initial_narrowing) {}

  const bitwave_options& options() const { return options_; }
  int mantissa_bits() const { return mantissa_; }
  int narrowing() const { return narrowing_; }
  bool fixed() const { return fixed_; }
  /// What every tensor is stored in for the next batch.
  container current() const { return {mantissa_, exponent_range::narrowed(narrowing_)}; }

  /// Records the batch's loss (the container in force during that batch counts towards the
  /// averages) and, when due, moves the container. Returns what it decided. Non-finite losses
  /// are a sign of trouble: they count as a worsening (wider), without entering the history.
  decision observe(double loss) {
    ++batches_;
    mantissa_sum_ += mantissa_;
    narrowing_sum_ += narrowing_;
    if (fixed_) return decision::hold;
    if (!std::isfinite(loss)) return move(decision::wider);
    losses_.push_back(loss);
    if (losses_.size() > options_.history) losses_.pop_front();
    if (losses_.size() < options_.history) return decision::hold;
    if (++since_decision_ < options_.cadence) return decision::hold;
    since_decision_ = 0;
    last_slope_ = normalised_loss_slope(losses_);
    if (last_slope_ < -options_.threshold) return move(decision::narrower);
    if (last_slope_ > options_.threshold) return move(decision::wider);
    return decision::hold;
  }
  double last_slope() const { return last_slope_; }

  /// Fixes the container at the average seen so far (see the header comment for the rounding).
  void fix_at_average() {
    if (batches_ > 0) {
      const double n = static_cast<double>(batches_);
      mantissa_ = static_cast<int>(std::ceil(static_cast<double>(mantissa_sum_) / n - 1e-9));
      narrowing_ = static_cast<int>(std::floor(static_cast<double>(narrowing_sum_) / n + 1e-9));
    }
    fixed_ = true;
  }
  double mean_mantissa_bits() const {
    return batches_ ? static_cast<double>(mantissa_sum_) / static_cast<double>(batches_) : mantissa_;
  }
  double mean_narrowing() const {
    return batches_ ? static_cast<double>(narrowing_sum_) / static_cast<double>(batches_) : narrowing_;
  }

 private:
  decision move(decision d) {
    const int step = d == decision::narrower ? 1 : -1;
    if (options_.adjust_mantissa) mantissa_ = std::clamp(mantissa_ - step, 0, fp32_mantissa_bits);
    if (options_.adjust_exponent) narrowing_ = std::clamp(narrowing_ + step, 0, max_narrowing);
    return d;
  }

  bitwave_options options_;
  int mantissa_;
  int narrowing_;
  bool fixed_ = false;
  std::deque<double> losses_;
  std::size_t since_decision_ = 0;
  double last_slope_ = 0;
  std::size_t batches_ = 0;
  long long mantissa_sum_ = 0, narrowing_sum_ = 0;
};

}  // namespace minifloat::training
