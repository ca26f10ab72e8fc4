// nn/linear.hpp — fully connected layer, y = x W^T + b (PyTorch's nn.Linear), a GEMM operator.
// Any input shape {n, c, h, w} is read as n rows of c*h*w features: the flatten between a
// convolutional trunk and its head costs nothing and has no rounding site of its own, like
// PyTorch's functional x.flatten(1).
#pragma once

#include <random>

#include "nn/module.hpp"

namespace nn {

class linear final : public module {
 public:
  /// weight {out, in}, optional bias {out}; PyTorch's default initialisation from `rng`.
  linear(std::size_t in_features, std::size_t out_features, bool bias, std::mt19937_64& rng);

  [[nodiscard]] module_kind kind() const override { return module_kind::linear; }
  [[nodiscard]] shape4 output_shape(const shape4& in) const override;
  void forward(const tensor& x, tensor& y, mode m) override;
  void backward(const tensor& x, const tensor& dy, tensor* dx) override;

  [[nodiscard]] std::size_t in_features() const { return in_; }
  [[nodiscard]] std::size_t out_features() const { return out_; }

 private:
  std::size_t in_, out_;
  bool has_bias_;
};

}  // namespace nn
