#include "nn/relu.hpp"

#include <stdexcept>

namespace nn {

void relu::forward(const tensor& x, tensor& y, mode) {
  y.resize(x.shape);
  const float* in = x.data();
  float* out = y.data();
  for (std::size_t i = 0, n = x.numel(); i < n; ++i) out[i] = in[i] < 0.0f ? 0.0f : in[i];
}

void relu::backward(const tensor& x, const tensor& dy, tensor* dx) {
  if (dy.shape != x.shape) throw std::invalid_argument("nn::relu: gradient shape differs from output");
  if (dx == nullptr) return;
  dx->resize(x.shape);
  const float* in = x.data();
  const float* g = dy.data();
  float* out = dx->data();
  for (std::size_t i = 0, n = x.numel(); i < n; ++i) out[i] = in[i] > 0.0f ? g[i] : 0.0f;
}

}  // namespace nn
