// minifloat/storage/optimizers.hpp — SGD and Adam/AdamW on fp32 weights and on split storage
// (extra-mantissa-bits paper §3.1: "reconstruct -> fp32 optimizer step -> split again";
// shared/reference-semantics.md §8), with PyTorch's update rules (torch.optim.SGD, Adam, AdamW,
// single-tensor path): momentum buffer cloned from the first gradient, dampening, Nesterov,
// L2 or decoupled weight decay, bias-corrected Adam moments in fp32, maximize.
//
// Both kinds of weights go through the same per-element update, so a split step is bit for bit
// the fp32 step whenever the split is lossless (bf16 + 16 truncating: always, NaN aside). Each
// `*_step(split_tensor&, ...)` works in chunks: restore a chunk to fp32, update it, split it
// again as the tensor's next generation. Any other chunked weight store with the same interface
// (the concept chunked_weights: low_tensor.hpp's low-precision-only weights) steps the same way. The multi-tensor ("fused") overloads take many
// (params, grads, state) groups in one call and check every group before touching any.
// Scalars follow PyTorch: hyperparameters are doubles (Python floats), per-step factors (bias
// corrections, 1 - lr * weight_decay, ...) are computed in double and rounded to float once;
// every multiply-add that PyTorch writes as add/addcmul/addcdiv with a scalar is one fma.
//
// Errors: std::invalid_argument for invalid hyperparameters (PyTorch's checks) and for gradient
// or state sizes that do not match the parameters; nothing is modified then.
#pragma once

#include <algorithm>
#include <concepts>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../detail/simd.hpp"

#include "low_tensor.hpp"
#include "split.hpp"

namespace minifloat::storage {

struct sgd_options {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;

  void validate() const {
    const char* who = "minifloat::storage::sgd_options: ";
    if (!(lr >= 0)) throw std::invalid_argument(std::string(who) + "invalid learning rate " + std::to_string(lr));
    if (!(momentum >= 0)) throw std::invalid_argument(std::string(who) + "invalid momentum " + std::to_string(momentum));
    if (!(weight_decay >= 0))
      throw std::invalid_argument(std::string(who) + "invalid weight_decay " + std::to_string(weight_decay));
    if (nesterov && (momentum <= 0 || dampening != 0))
      throw std::invalid_argument(std::string(who) + "Nesterov momentum requires a momentum and zero dampening");
  }
};
/// The momentum buffer is created (a copy of the first update direction) on the first step.
struct sgd_state {
  std::vector<float> momentum_buffer;
  std::int64_t steps = 0;
};

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  ///< true: AdamW (weights scaled by 1 - lr * weight_decay)
  bool maximize = false;

  void validate() const {
    const char* who = "minifloat::storage::adam_options: ";
    if (!(lr >= 0)) throw std::invalid_argument(std::string(who) + "invalid learning rate " + std::to_string(lr));
    if (!(eps >= 0)) throw std::invalid_argument(std::string(who) + "invalid epsilon " + std::to_string(eps));
    if (!(beta1 >= 0 && beta1 < 1)) throw std::invalid_argument(std::string(who) + "invalid beta1 " + std::to_string(beta1));
    if (!(beta2 >= 0 && beta2 < 1)) throw std::invalid_argument(std::string(who) + "invalid beta2 " + std::to_string(beta2));
    if (!(weight_decay >= 0))
      throw std::invalid_argument(std::string(who) + "invalid weight_decay " + std::to_string(weight_decay));
  }
};
/// fp32 first and second moments, zero until the first step.
struct adam_state {
  std::vector<float> exp_avg;
  std::vector<float> exp_avg_sq;
  std::int64_t steps = 0;
};

/// Weights an optimizer steps a chunk at a time: load(start, out) restores weights [start,
/// start + out.size()) to fp32, store(start, x) writes them back, next_generation() starts a
/// rewrite (fresh stochastic draws); starts are multiples of 32.
template <class W>
concept chunked_weights = requires(W& w, const W& cw, std::size_t start, std::span<float> out) {
  { cw.size() } -> std::convertible_to<std::size_t>;
  cw.load(start, out);
  w.store(start, std::span<const float>(out));
  w.next_generation();
};

/// One tensor of a multi-tensor step.
template <class State>
struct split_group {
  split_tensor* params;
  std::span<const float> grads;
  State* state;
};

namespace detail {

/// Weights per chunk of a split step: restored, updated and split again while in L1.
inline constexpr std::size_t optimizer_chunk = 2048;

inline void check_sizes(std::size_t params, std::size_t grads, const char* who) {
  if (grads != params)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(grads) + " gradients for " +
                                std::to_string(params) + " parameters");
}
inline void check_state(std::size_t params, std::size_t state, const char* what, const char* who) {
  if (state != 0 && state != params)
    throw std::invalid_argument(std::string(who) + ": the " + what + " holds " + std::to_string(state) + " values for " +
                                std::to_string(params) + " parameters");
}

/// An SGD step's float factors.
struct sgd_factors {
  float lr, momentum, dampening_complement, weight_decay;
  bool use_momentum, nesterov, maximize, first;
};

inline void check(const sgd_state& s, std::size_t n, std::size_t grads, const char* who) {
  check_sizes(n, grads, who);
  check_state(n, s.momentum_buffer.size(), "momentum buffer", who);
}
/// Creates the state on the first step; returns this step's factors.
inline sgd_factors begin_step(sgd_state& s, std::size_t n, const sgd_options& o) {
  const bool first = o.momentum != 0 && s.momentum_buffer.empty();
  if (first) s.momentum_buffer.resize(n);
  ++s.steps;
  return {static_cast<float>(o.lr), static_cast<float>(o.momentum), static_cast<float>(1 - o.dampening),
          static_cast<float>(o.weight_decay), o.momentum != 0, o.nesterov, o.maximize, first};
}

/// torch.optim.SGD's update of weights p with gradients g and momentum buffer b (unused without momentum).
inline void update(std::span<float> p, const float* g, float* b, const sgd_factors& factors) {
  const sgd_factors c = factors;  // a local copy: stores to p and b cannot alias it, so the loop vectorizes
  for (std::size_t i = 0; i < p.size(); ++i) {
    float d = c.maximize ? -g[i] : g[i];
    if (c.weight_decay != 0) d = std::fma(c.weight_decay, p[i], d);  // d_p.add(param, alpha=weight_decay)
    if (c.use_momentum) {
      // buf = clone(d_p) on the first step, else buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
      const float buf = c.first ? d : std::fma(c.dampening_complement, d, b[i] * c.momentum);
      b[i] = buf;
      d = c.nesterov ? std::fma(c.momentum, buf, d) : buf;  // d_p.add(buf, alpha=momentum)
    }
    p[i] = std::fma(-c.lr, d, p[i]);  // param.add_(d_p, alpha=-lr)
  }
}

/// An Adam step's float factors.
struct adam_factors {
  float lerp_weight, beta2, beta2_complement, bias_correction2_sqrt, eps, neg_step_size, weight_decay, decay;
  bool decoupled, maximize;
};

inline void check(const adam_state& s, std::size_t n, std::size_t grads, const char* who) {
  check_sizes(n, grads, who);
  check_state(n, s.exp_avg.size(), "first moment", who);
  check_state(n, s.exp_avg_sq.size(), "second moment", who);
}
inline adam_factors begin_step(adam_state& s, std::size_t n, const adam_options& o) {
  if (s.exp_avg.empty()) s.exp_avg.assign(n, 0.0f);
  if (s.exp_avg_sq.empty()) s.exp_avg_sq.assign(n, 0.0f);
  const double step = static_cast<double>(++s.steps);
  const double bias_correction1 = 1 - std::pow(o.beta1, step);
  const double bias_correction2 = 1 - std::pow(o.beta2, step);
  return {static_cast<float>(1 - o.beta1),
          static_cast<float>(o.beta2),
          static_cast<float>(1 - o.beta2),
          static_cast<float>(std::sqrt(bias_correction2)),
          static_cast<float>(o.eps),
          static_cast<float>(-(o.lr / bias_correction1)),
          static_cast<float>(o.weight_decay),
          static_cast<float>(1 - o.lr * o.weight_decay),
          o.decoupled_weight_decay,
          o.maximize};
}

/// Calls f with std::true_type or std::false_type: a run-time flag turned into a template argument.
template <class F>
void with_flag(bool flag, F f) {
  if (flag) f(std::true_type{});
  else f(std::false_type{});
}

/// torch.optim.Adam / AdamW's update of weights p with gradients g and moments m, v, with the
/// step's flags as template arguments so the loops have no branches and vectorize. Each tile
/// takes three passes (moments, square roots, weights) so that the square roots go through the
/// vector instruction: under a user's default -fmath-errno, std::sqrt in the loop would keep it
/// scalar. Every element sees the same operations in the same order as in one fused loop.
template <bool Maximize, bool Decay, bool Decoupled, bool SmallWeight>
void adam_loop(std::span<float> p, const float* g, float* m, float* v, const adam_factors c) {
  constexpr std::size_t tile = 1024;
  float root[tile];
  for (std::size_t start = 0; start < p.size(); start += tile) {
    const std::size_t n = std::min(tile, p.size() - start);
    float* const pt = p.data() + start;
    const float* const gt = g + start;
    float* const mt = m + start;
    float* const vt = v + start;
    for (std::size_t i = 0; i < n; ++i) {
      float grad = Maximize ? -gt[i] : gt[i];
      if constexpr (Decay && !Decoupled) grad = std::fma(c.weight_decay, pt[i], grad);  // grad.add(param, alpha=wd)
      // exp_avg.lerp_(grad, 1 - beta1), with ATen's lerp: exact at both ends, whichever side the weight is on
      const float diff = grad - mt[i];
      mt[i] = SmallWeight ? std::fma(c.lerp_weight, diff, mt[i]) : std::fma(-diff, 1.0f - c.lerp_weight, grad);
      vt[i] = std::fma(c.beta2_complement * grad, grad, vt[i] * c.beta2);  // mul_(beta2).addcmul_(grad, grad, 1 - beta2)
    }
    minifloat::detail::sqrt_floats(vt, root, n);
    for (std::size_t i = 0; i < n; ++i) {
      float w = pt[i];
      if constexpr (Decay && Decoupled) w = w * c.decay;            // param.mul_(1 - lr * weight_decay)
      const float denom = root[i] / c.bias_correction2_sqrt + c.eps;  // (sqrt / bc2_sqrt).add_(eps)
      pt[i] = std::fma(c.neg_step_size, mt[i] / denom, w);           // addcdiv_(exp_avg, denom, -step_size)
    }
  }
}
inline void update(std::span<float> p, const float* g, float* m, float* v, const adam_factors& c) {
  with_flag(c.maximize, [&](auto maximize) {
    with_flag(c.weight_decay != 0, [&](auto decay) {
      with_flag(c.decoupled, [&](auto decoupled) {
        with_flag(std::fabs(c.lerp_weight) < 0.5f, [&](auto small) {
          adam_loop<decltype(maximize)::value, decltype(decay)::value, decltype(decoupled)::value,
                    decltype(small)::value>(p, g, m, v, c);
        });
      });
    });
  });
}

/// Restores each chunk of t, applies `step(chunk, offset)`, stores it again as a new generation.
template <chunked_weights W, class Step>
void update_split(W& t, Step step) {
  t.next_generation();
  float w[optimizer_chunk];
  for (std::size_t start = 0; start < t.size(); start += optimizer_chunk) {
    const std::span<float> chunk(w, std::min(optimizer_chunk, t.size() - start));
    t.load(start, chunk);
    step(chunk, start);
    t.store(start, chunk);
  }
}

}  // namespace detail

/// One SGD step on fp32 weights (the reference the split steps are compared with).
inline void sgd_step(std::span<float> params, std::span<const float> grads, sgd_state& s, const sgd_options& o) {
  o.validate();
  detail::check(s, params.size(), grads.size(), "minifloat::storage::sgd_step");
  const detail::sgd_factors c = detail::begin_step(s, params.size(), o);
  detail::update(params, grads.data(), s.momentum_buffer.data(), c);
}

/// One SGD step on split weights (or other chunked weights): restore, update in fp32, split again.
template <chunked_weights W>
void sgd_step(W& params, std::span<const float> grads, sgd_state& s, const sgd_options& o) {
  o.validate();
  detail::check(s, params.size(), grads.size(), "minifloat::storage::sgd_step");
  const detail::sgd_factors c = detail::begin_step(s, params.size(), o);
  float* buffer = s.momentum_buffer.data();
  detail::update_split(params, [&](std::span<float> w, std::size_t at) {
    detail::update(w, grads.data() + at, buffer == nullptr ? nullptr : buffer + at, c);
  });
}

/// One Adam (or AdamW) step on fp32 weights.
inline void adam_step(std::span<float> params, std::span<const float> grads, adam_state& s, const adam_options& o) {
  o.validate();
  detail::check(s, params.size(), grads.size(), "minifloat::storage::adam_step");
  const detail::adam_factors c = detail::begin_step(s, params.size(), o);
  detail::update(params, grads.data(), s.exp_avg.data(), s.exp_avg_sq.data(), c);
}

/// One Adam (or AdamW) step on split weights (or other chunked weights).
template <chunked_weights W>
void adam_step(W& params, std::span<const float> grads, adam_state& s, const adam_options& o) {
  o.validate();
  detail::check(s, params.size(), grads.size(), "minifloat::storage::adam_step");
  const detail::adam_factors c = detail::begin_step(s, params.size(), o);
  detail::update_split(params, [&](std::span<float> w, std::size_t at) {
    detail::update(w, grads.data() + at, s.exp_avg.data() + at, s.exp_avg_sq.data() + at, c);
  });
}

/// Multi-tensor SGD: every group checked first, then stepped.
inline void sgd_step(std::span<const split_group<sgd_state>> groups, const sgd_options& o) {
  o.validate();
  for (const auto& g : groups) detail::check(*g.state, g.params->size(), g.grads.size(), "minifloat::storage::sgd_step");
  for (const auto& g : groups) sgd_step(*g.params, g.grads, *g.state, o);
}
/// Multi-tensor Adam / AdamW: every group checked first, then stepped.
inline void adam_step(std::span<const split_group<adam_state>> groups, const adam_options& o) {
  o.validate();
  for (const auto& g : groups) detail::check(*g.state, g.params->size(), g.grads.size(), "minifloat::storage::adam_step");
  for (const auto& g : groups) adam_step(*g.params, g.grads, *g.state, o);
}

}  // namespace minifloat::storage
