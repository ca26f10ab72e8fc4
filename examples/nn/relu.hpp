// nn/relu.hpp — y = max(x, 0). A NaN input stays NaN (as in PyTorch), so a low-precision
// overflow upstream is not hidden from the loss and the overflow counters.
#pragma once

#include "nn/module.hpp"

namespace nn {

class relu final : public module {
 public:
  [[nodiscard]] module_kind kind() const override { return module_kind::relu; }
  [[nodiscard]] shape4 output_shape(const shape4& in) const override { return in; }
  void forward(const tensor& x, tensor& y, mode m) override;
  /// dx = dy where x > 0, else 0 — from the input forward saw, as eq. (1)'s df(dv, v̂) reads.
  void backward(const tensor& x, const tensor& dy, tensor* dx) override;
};

}  // namespace nn
