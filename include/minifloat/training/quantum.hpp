// minifloat/training/quantum.hpp — Quantum Mantissa, Quantum Exponent and Quantum Integer
// (Schrödinger's FP §3.1 eqs. 5–16, §4.3; our reading in docs/semantics.md §5):
// per-tensor learnable real bitlengths, their stochastic integerization, the straight-through
// value gradient (eq. 8), the bitlength gradients as exact finite differences between the two
// neighbouring integer bitlengths, the footprint-weighted regularizer (eq. 16), and the
// learn-then-freeze schedule.
//
// Rules (docs/dynamic-containers.md states them with a worked example):
//  - n_m ∈ [0, 23] and n_e ∈ [0, 8] per tensor, initialised at 23 and 8 (fp32); Quantum Integer
//    learns one n ∈ [0, 24] (magnitude bits of a fixed-point container, container_quantize.hpp).
//  - Once per tensor per step, k = floor(n) + Bernoulli(frac(n)); the draw is counter-based on
//    (seed, tensor id, component, step), so a run depends only on its seeds.
//  - dL/dn = Σ_i dL/dx̂_i · (Q_{k0+1}(x_i) − Q_{k0}(x_i)) with k0 = min(floor(n), max − 1) (at the
//    maximum the last step down is the difference); the other component stays at its drawn k.
//    Non-finite inputs contribute nothing; a non-finite sum is dropped for that step. Optionally
//    the exponent's gradient is eqs. 9–10 linearised instead (exponent_gradient::linearised).
//  - Regularizer (eq. 16): γ·λ_t is added to each of tensor t's bitlength gradients, λ_t = the
//    tensor's share of the footprint Σ numel·(1 + n_m + n_e) of all learned tensors at the
//    current real bitlengths (or, optionally, its share of the elements).
//  - Update: n ← clip(n − lr·(dL/dn + γ·λ_t), 0, max), plain SGD once per step.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../detail/simd.hpp"
#include "../random.hpp"
#include "container_quantize.hpp"

namespace minifloat::training {

/// Which kind of tensor a container holds: the paper learns weights and activations separately.
enum class tensor_class : std::uint8_t { weight, activation };

enum class container_kind : std::uint8_t {
  floating_point,  ///< QM + QE: mantissa and exponent bitlengths
  fixed_point,     ///< Quantum Integer: one bitlength, a power-of-two scale per tensor
};

enum class lambda_rule : std::uint8_t {
  footprint_share,  ///< λ_t = numel_t·(1 + n_m + n_e) / Σ (default: "weighted by memory footprint")
  element_share,    ///< λ_t = numel_t / Σ numel
};

/// How the exponent bitlength's gradient is formed.
enum class exponent_gradient : std::uint8_t {
  finite_difference,  ///< Σ g·(Q_{k0+1}(x) − Q_{k0}(x)): exact, the default
  linearised,         ///< eqs. 9–10 through dV_max/dn and dV_min/dn at k0 (the paper's printed derivatives)
};

inline constexpr int fixed_point_max_bits = 24;

/// k = floor(n) + Bernoulli(frac(n)), drawn from the counter RNG at `index` of stream `rng`.
inline int integerize(double n, counter_rng rng, std::uint64_t index) {
  const double whole = std::floor(n);
  const double frac = n - whole;
  const double u = static_cast<double>(rng.bits32(index)) * 0x1p-32;  // uniform in [0, 1)
  return static_cast<int>(whole) + (u < frac ? 1 : 0);
}

/// The stream of tensor `tensor`'s component (0 mantissa, 1 exponent) under a run seed; index it
/// by the step.
constexpr counter_rng bitlength_stream(std::uint64_t seed, std::uint64_t tensor, std::uint64_t component) {
  return counter_rng{minifloat::detail::mix64(seed ^ minifloat::detail::mix64((tensor << 1 | component) + minifloat::detail::golden64))};
}

struct quantum_options {
  container_kind kind = container_kind::floating_point;
  bool learn_mantissa = true;   ///< off: n_m stays at its initial value (QE alone)
  bool learn_exponent = true;   ///< off: n_e stays at 8 (QM alone); unused for fixed_point
  double gamma_mantissa = 0.1;  ///< γ_m of eq. 16 (for fixed_point: the integer bitlength's γ)
  double gamma_exponent = 0.1;  ///< γ_e of eq. 16
  /// SGD step on the bitlengths. At 0.5 the example MLP's weights (λ ≈ 0.2–0.35) lose about 4
  /// mantissa bits in the first epoch (469 steps) and reach ~1 bit by the fourth; at 2 the large
  /// tensors fell to 0–2 bits in all and the network to chance accuracy in the third epoch
  /// (docs/dynamic-containers.md).
  double learning_rate = 0.5;
  lambda_rule weighting = lambda_rule::footprint_share;
  exponent_gradient exponent_rule = exponent_gradient::finite_difference;
  std::uint64_t seed = 0;

  void validate() const {
    auto bad = [](const char* field, double v) {
      throw std::invalid_argument(std::string("quantum_options: ") + field + " = " + std::to_string(v) +
                                  " must be finite and >= 0");
    };
    if (!(gamma_mantissa >= 0) || !std::isfinite(gamma_mantissa)) bad("gamma_mantissa", gamma_mantissa);
    if (!(gamma_exponent >= 0) || !std::isfinite(gamma_exponent)) bad("gamma_exponent", gamma_exponent);
    if (!(learning_rate >= 0) || !std::isfinite(learning_rate)) bad("learning_rate", learning_rate);
  }
};

/// Σ dL/dx̂·ΔQ for each learned component of one tensor in one step.
struct bitlength_gradients {
  double mantissa = 0;
  double exponent = 0;
};

/// One tensor's container: its real bitlengths, this step's integer draw, and the forward and
/// backward of the quantizer. The forward keeps a copy of the unquantized input for the backward
/// (the emulation's cost; hardware would keep only the quantized values and the clip mask).
class quantum_tensor {
 public:
  quantum_tensor(std::string name, tensor_class cls, std::size_t numel, container_kind kind)
      : name_(std::move(name)), cls_(cls), numel_(numel), kind_(kind),
        mantissa_(max_mantissa()), exponent_(kind == container_kind::fixed_point ? 0.0 : fp32_exponent_bits) {
    draw_ceiling();
  }

  const std::string& name() const { return name_; }
  tensor_class cls() const { return cls_; }
  std::size_t numel() const { return numel_; }
  container_kind kind() const { return kind_; }

  int max_mantissa() const { return kind_ == container_kind::fixed_point ? fixed_point_max_bits : fp32_mantissa_bits; }
  int max_exponent() const { return kind_ == container_kind::fixed_point ? 0 : fp32_exponent_bits; }

  /// The learned real bitlengths.
  double mantissa_length() const { return mantissa_; }
  double exponent_length() const { return exponent_; }
  void set_lengths(double mantissa, double exponent) {
    if (!std::isfinite(mantissa) || !std::isfinite(exponent))
      throw std::invalid_argument("quantum_tensor::set_lengths: " + name_ + ": bitlengths must be finite");
    mantissa_ = std::clamp(mantissa, 0.0, static_cast<double>(max_mantissa()));
    exponent_ = std::clamp(exponent, 0.0, static_cast<double>(max_exponent()));
  }
  /// Rounds both bitlengths up to integers (the schedule's freeze).
  void round_up() { set_lengths(std::ceil(mantissa_), std::ceil(exponent_)); }

  /// This step's integer bitlengths.
  int mantissa_bits() const { return k_mantissa_; }
  int exponent_bits() const { return kind_ == container_kind::fixed_point ? 0 : current_.exponent_bits(); }
  /// The container in force (floating point; for fixed point its mantissa_bits is k).
  const container& current() const { return current_; }
  /// Fixed point: this step's scale exponent (set by forward).
  int scale_exponent() const { return scale_exponent_; }

  /// Draws k_m, k_e for `step` (eqs. 6 and 15); `id` names the tensor's random streams.
  void draw(std::uint64_t seed, std::uint64_t id, std::uint64_t step) {
    set_draw(integerize(mantissa_, bitlength_stream(seed, id, 0), step),
             integerize(exponent_, bitlength_stream(seed, id, 1), step));
  }
  /// Evaluation: k = ceil(n), what the freeze would keep.
  void draw_ceiling() { set_draw(static_cast<int>(std::ceil(mantissa_)), static_cast<int>(std::ceil(exponent_))); }
  /// Imposes a container from outside (BitWave): no learning then.
  void impose(const container& c) {
    if (kind_ != container_kind::floating_point) throw std::invalid_argument("quantum_tensor::impose: " + name_ + " is fixed point");
    current_ = c;
    k_mantissa_ = c.mantissa_bits;
    k_exponent_ = c.exponent_bits();
    bounds_ = container_bounds::of(c);
  }

  /// Quantizes `values` in place with this step's draw; with `keep_input` the unquantized values
  /// are kept for backward().
  void forward(std::span<float> values, bool keep_input) {
    if (kind_ == container_kind::floating_point && keep_input) {
      input_.resize(values.size());
      quantize_keeping_input(values, input_, bounds_);
      return;
    }
    if (keep_input) input_.assign(values.begin(), values.end());
    if (kind_ == container_kind::fixed_point) {
      scale_exponent_ = fixed_point_scale_exponent(values);
      for (float& v : values) v = quantize_fixed_point(v, k_mantissa_, scale_exponent_);
      return;
    }
    quantize_container(values, values, bounds_);
  }

  /// Backward for the gradient dL/dx̂ of the last forward (same size): applies eq. 8 in place
  /// (zero where clipped) and, with `lengths`, returns the bitlength gradients.
  bitlength_gradients backward(std::span<float> grad, bool lengths,
                               exponent_gradient rule = exponent_gradient::finite_difference) const;

 private:
  void set_draw(int km, int ke) {
    k_mantissa_ = std::clamp(km, 0, max_mantissa());
    k_exponent_ = std::clamp(ke, 0, max_exponent());
    if (kind_ == container_kind::floating_point) {
      current_ = container{k_mantissa_, exponent_range::from_bits(k_exponent_)};
      bounds_ = container_bounds::of(current_);
    } else {
      current_ = container{std::min(k_mantissa_, fp32_mantissa_bits), {}};
    }
  }

  std::string name_;
  tensor_class cls_;
  std::size_t numel_;
  container_kind kind_;
  double mantissa_, exponent_;
  int k_mantissa_ = 0, k_exponent_ = 0;
  container current_{};
  container_bounds bounds_{};
  int scale_exponent_ = 0;
  std::vector<float> input_;
};

namespace detail::containers {
/// The lower neighbour k0 of the finite difference: floor(n), one below the maximum at the top.
inline int lower_neighbour(double n, int max) { return std::clamp(static_cast<int>(std::floor(n)), 0, max - 1); }

/// One fused pass over a floating-point tensor's backward: Σ g·(Q_m_hi(x) − Q_m_lo(x)) and
/// Σ g·(Q_e_hi(x) − Q_e_lo(x)) over finite x, and eq. 8 on g. Written on SIMD registers
/// (detail/simd.hpp) because the compilers do not vectorise the scalar form. Each lane sums at
/// most 64 terms in float before they join its double partial sum: the mantissa terms are exact
/// in float (two neighbours differ in one bit, times g is a power of two times g), an exponent
/// term is rounded once, and the float sums add at most 64·2^−24 of Σ|g·ΔQ| — about twice as fast
/// as summing in double, and far below the noise of a per-batch gradient. A non-finite x is
/// replaced by 0 for the differences, so it contributes nothing.
inline bitlength_gradients fused_backward(std::span<const float> x, std::span<float> grad, const container_bounds& clip,
                                          const container_bounds& m_hi, const container_bounds& m_lo,
                                          const container_bounds& e_hi, const container_bounds& e_lo) {
  namespace md = minifloat::detail;
  using bits_v = md::simd_t<std::uint32_t>;
  using float_v = md::simd_with_lanes_of<float, std::uint32_t>;
  using double_v = md::simd_with_lanes_of<double, std::uint32_t>;
  constexpr std::size_t lanes = md::simd_lanes<std::uint32_t>;
  constexpr std::size_t block = 64;
  double_v mantissa{}, exponent{};
  const std::size_t n = x.size();
  std::size_t i = 0;
  while (i + lanes <= n) {
    float_v mantissa_f{}, exponent_f{};
    for (std::size_t r = 0; r < block && i + lanes <= n; ++r, i += lanes) {
      bits_v u;
      float_v g;
      std::memcpy(&u, x.data() + i, sizeof u);
      std::memcpy(&g, grad.data() + i, sizeof g);
      const bits_v finite_u = md::select((u & abs_mask) < inf_bits, u, bits_v{});
      const float_v m_hi_q = std::bit_cast<float_v>(quantize_container_bits(finite_u, m_hi));
      const float_v m_lo_q = std::bit_cast<float_v>(quantize_container_bits(finite_u, m_lo));
      mantissa_f += g * (m_hi_q - m_lo_q);
      const float_v e_hi_q = std::bit_cast<float_v>(quantize_container_bits(finite_u, e_hi));
      const float_v e_lo_q = std::bit_cast<float_v>(quantize_container_bits(finite_u, e_lo));
      exponent_f += g * (e_hi_q - e_lo_q);
      g = md::select(clipped(u, clip), float_v{}, g);
      std::memcpy(grad.data() + i, &g, sizeof g);
    }
    mantissa += __builtin_convertvector(mantissa_f, double_v);
    exponent += __builtin_convertvector(exponent_f, double_v);
  }
  bitlength_gradients out;
  for (std::size_t j = 0; j < lanes; ++j) {
    out.mantissa += mantissa[j];
    out.exponent += exponent[j];
  }
  for (; i < n; ++i) {
    const auto u = std::bit_cast<std::uint32_t>(x[i]);
    const std::uint32_t finite_u = (u & abs_mask) < inf_bits ? u : 0u;
    const auto diff = [&](const container_bounds& hi, const container_bounds& lo) {
      return static_cast<double>(std::bit_cast<float>(quantize_container_bits(finite_u, hi))) -
             static_cast<double>(std::bit_cast<float>(quantize_container_bits(finite_u, lo)));
    };
    out.mantissa += static_cast<double>(grad[i]) * diff(m_hi, m_lo);
    out.exponent += static_cast<double>(grad[i]) * diff(e_hi, e_lo);
    grad[i] = clipped(u, clip) ? 0.0f : grad[i];
  }
  return out;
}
}  // namespace detail::containers

/// Eqs. 9–10 linearised at the range of k_e = k0 (with the drawn k_m's V_max):
/// Σ g·(∂R/∂V_max·dV_max/dn + ∂R/∂V_min·dV_min/dn), where by eqs. 11–14
/// dV_max/dn = V_max·ln²2·2^(k0−1) and dV_min/dn = −V_min·ln²2·2^(k0−1). ∂R/∂V_max = sign(x) where
/// |x| ≥ V_max; ∂R/∂V_min = sign(x) on [V_min/2, V_min) and −sign(x) on (0, V_min/2), as eq. 10 is
/// printed (it gives flushed values a gradient, which the exact difference does not).
inline double linearised_exponent_gradient(std::span<const float> x, std::span<const float> g, int mantissa_bits, int k0) {
  const container_bounds b = container_bounds::of({mantissa_bits, exponent_range::from_bits(k0)});
  const double vmax = b.vmax_value(), vmin = b.vmin_value();
  const double ln2_sq = std::log(2.0) * std::log(2.0), scale = std::ldexp(1.0, k0 - 1);
  const double dvmax = vmax * ln2_sq * scale, dvmin = -vmin * ln2_sq * scale;
  double sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (!std::isfinite(a) || a == 0) continue;
    const double sign = std::signbit(x[i]) ? -1.0 : 1.0;
    double d = 0;
    if (a >= vmax) d = sign * dvmax;
    else if (a < vmin) d = (a >= vmin / 2 ? sign : -sign) * dvmin;
    sum += static_cast<double>(g[i]) * d;
  }
  return sum;
}

inline bitlength_gradients quantum_tensor::backward(std::span<float> grad, bool lengths, exponent_gradient rule) const {
  if (grad.size() != input_.size())
    throw std::invalid_argument("quantum_tensor::backward: " + name_ + ": gradient size " + std::to_string(grad.size()) +
                                " differs from the forward's " + std::to_string(input_.size()));
  const std::span<const float> x(input_);
  bitlength_gradients out;
  if (kind_ == container_kind::fixed_point) {
    // No range to clip: the scale covers every finite value, so eq. 8 is the identity here except
    // for ±Inf, which saturate.
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::isinf(x[i])) grad[i] = 0.0f;
    if (lengths) {
      const int k0 = detail::containers::lower_neighbour(mantissa_, max_mantissa());
      for (std::size_t i = 0; i < x.size(); ++i)
        if (std::isfinite(x[i]))
          out.mantissa += static_cast<double>(grad[i]) *
                          (static_cast<double>(quantize_fixed_point(x[i], k0 + 1, scale_exponent_)) -
                           static_cast<double>(quantize_fixed_point(x[i], k0, scale_exponent_)));
    }
    return out;
  }
  if (lengths) {
    // Mantissa: both neighbours share this step's exponent range; exponent: both neighbours share
    // this step's mantissa bits (the drawn value of the other component).
    const int m0 = detail::containers::lower_neighbour(mantissa_, fp32_mantissa_bits);
    const int e0 = detail::containers::lower_neighbour(exponent_, fp32_exponent_bits);
    const auto at = [](int km, int ke) { return container_bounds::of({km, exponent_range::from_bits(ke)}); };
    const double linearised = rule == exponent_gradient::linearised
                                  ? linearised_exponent_gradient(x, grad, k_mantissa_, e0)  // before eq. 8 zeroes g
                                  : 0.0;
    out = detail::containers::fused_backward(x, grad, bounds_, at(m0 + 1, k_exponent_), at(m0, k_exponent_),
                                             at(k_mantissa_, e0 + 1), at(k_mantissa_, e0));
    if (rule == exponent_gradient::linearised) out.exponent = linearised;
    return out;
  }
  float* g = grad.data();
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i) g[i] = clipped(std::bit_cast<std::uint32_t>(x[i]), bounds_) ? 0.0f : g[i];
  return out;
}

/// The regularizer's weights λ_t (eq. 16) for the given tensors at their current real bitlengths;
/// they sum to 1 (all zero for no elements).
inline std::vector<double> regularizer_weights(std::span<const quantum_tensor> tensors, lambda_rule rule) {
  std::vector<double> w(tensors.size());
  double total = 0;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const auto n = static_cast<double>(tensors[t].numel());
    // The footprint per element counts the sign bit too (1 + n_m + n_e; fixed point has n_e = 0).
    w[t] = rule == lambda_rule::element_share ? n
                                              : n * (1.0 + tensors[t].mantissa_length() + tensors[t].exponent_length());
    total += w[t];
  }
  if (total > 0)
    for (double& v : w) v /= total;
  return w;
}

/// When bitlengths learn (§3.1 "Bitlength Selection Schedule"): the first `learn_epochs`, and
/// `relearn_epochs` after each learning-rate change; in between they are rounded up and frozen.
class bitlength_schedule {
 public:
  bitlength_schedule(std::size_t learn_epochs = 5, std::size_t relearn_epochs = 5)
      : learn_(learn_epochs), relearn_(relearn_epochs) {}
  /// The trainer's notice that the learning rate changed before epoch `epoch` (0-based).
  void learning_rate_changed(std::size_t epoch) { last_change_ = epoch; changed_ = true; }
  bool learning_in(std::size_t epoch) const {
    return epoch < learn_ || (changed_ && epoch >= last_change_ && epoch < last_change_ + relearn_);
  }
  std::size_t learn_epochs() const { return learn_; }
  std::size_t relearn_epochs() const { return relearn_; }

 private:
  std::size_t learn_, relearn_;
  std::size_t last_change_ = 0;
  bool changed_ = false;
};

/// Every learned container of a network and the learning step over them.
class quantum_containers {
 public:
  explicit quantum_containers(quantum_options options) : options_(options) { options_.validate(); }

  std::size_t add(std::string name, tensor_class cls, std::size_t numel) {
    tensors_.emplace_back(std::move(name), cls, numel, options_.kind);
    gradients_.emplace_back();
    return tensors_.size() - 1;
  }
  std::span<quantum_tensor> tensors() { return tensors_; }
  std::span<const quantum_tensor> tensors() const { return tensors_; }
  const quantum_options& options() const { return options_; }

  bool learning() const { return learning_; }
  /// Turning learning off rounds every bitlength up and freezes it (§3.1).
  void set_learning(bool on) {
    if (learning_ && !on)
      for (quantum_tensor& t : tensors_) t.round_up();
    learning_ = on;
  }

  /// Draws every tensor's integer bitlengths for a training step and clears the gradients.
  void begin_step(std::uint64_t step) {
    for (std::size_t t = 0; t < tensors_.size(); ++t) {
      tensors_[t].draw(options_.seed, t, step);
      gradients_[t] = {};
    }
  }
  /// Evaluation: every tensor at ceil(n).
  void begin_evaluation() {
    for (quantum_tensor& t : tensors_) t.draw_ceiling();
  }

  void forward(std::size_t t, std::span<float> values, bool training) { tensors_.at(t).forward(values, training); }
  void backward(std::size_t t, std::span<float> grad) {
    const bitlength_gradients g = tensors_.at(t).backward(grad, learning_, options_.exponent_rule);
    gradients_[t].mantissa += g.mantissa;
    gradients_[t].exponent += g.exponent;
  }
  const bitlength_gradients& task_gradient(std::size_t t) const { return gradients_.at(t); }

  /// The step's update of every bitlength (nothing while frozen).
  void end_step() {
    if (!learning_) return;
    const std::vector<double> lambda = regularizer_weights(tensors_, options_.weighting);
    for (std::size_t t = 0; t < tensors_.size(); ++t) {
      quantum_tensor& q = tensors_[t];
      const auto finite_or_zero = [](double v) { return std::isfinite(v) ? v : 0.0; };
      double m = q.mantissa_length(), e = q.exponent_length();
      if (options_.learn_mantissa)
        m -= options_.learning_rate * (finite_or_zero(gradients_[t].mantissa) + options_.gamma_mantissa * lambda[t]);
      if (options_.learn_exponent && q.kind() == container_kind::floating_point)
        e -= options_.learning_rate * (finite_or_zero(gradients_[t].exponent) + options_.gamma_exponent * lambda[t]);
      q.set_lengths(m, e);
    }
  }

 private:
  quantum_options options_;
  std::vector<quantum_tensor> tensors_;
  std::vector<bitlength_gradients> gradients_;
  bool learning_ = true;
};

}  // namespace minifloat::training
