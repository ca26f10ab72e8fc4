// nn/sgd.hpp — stochastic gradient descent with momentum and weight decay, PyTorch's
// torch.optim.SGD step for step:
//   g = grad · grad_scale + weight_decay · θ
//   b = g on the first step, else momentum · b + (1 − dampening) · g
//   g = g + momentum · b (nesterov) or b
//   θ = θ − lr · g
// `grad_scale` undoes a dynamic loss scale (1/scale), as GradScaler.unscale_ does before the
// step. Updates the fp32 master `value` of each parameter; `used` is refreshed by the next forward.
#pragma once

#include <span>
#include <vector>

#include "nn/module.hpp"

namespace nn {

struct sgd_options {
  float momentum = 0.9f;
  float weight_decay = 5e-4f;
  float dampening = 0.0f;
  bool nesterov = false;
};

class sgd {
 public:
  explicit sgd(const sgd_options& options = {});

  /// One step over `params` (the same parameters, in the same order, every call; the first
  /// call sizes the momentum buffers). Throws std::invalid_argument when the set changes.
  void step(std::span<parameter* const> params, float lr, float grad_scale = 1.0f);
  /// Forgets the momentum (the next step starts the buffers afresh).
  void reset() { buffers_.clear(); }
  [[nodiscard]] const sgd_options& options() const { return opt_; }

 private:
  sgd_options opt_;
  std::vector<std::vector<float>> buffers_;
};

}  // namespace nn
