#include "nn/sgd.hpp"

#include <stdexcept>

namespace nn {

sgd::sgd(const sgd_options& options) : opt_(options) {
  if (opt_.momentum < 0.0f || opt_.weight_decay < 0.0f) throw std::invalid_argument("nn::sgd: negative momentum or weight decay");
  if (opt_.nesterov && (opt_.momentum <= 0.0f || opt_.dampening != 0.0f))
    throw std::invalid_argument("nn::sgd: nesterov needs momentum > 0 and dampening 0");
}

void sgd::step(std::span<parameter* const> params, float lr, float grad_scale) {
  const bool first = buffers_.empty();
  if (first && opt_.momentum != 0.0f) {
    buffers_.resize(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) buffers_[i].resize(params[i]->numel());
  }
  if (opt_.momentum != 0.0f) {
    if (buffers_.size() != params.size()) throw std::invalid_argument("nn::sgd: the parameter set changed");
    for (std::size_t i = 0; i < params.size(); ++i)
      if (buffers_[i].size() != params[i]->numel()) throw std::invalid_argument("nn::sgd: the parameter set changed");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    parameter& p = *params[i];
    float* value = p.value.data();
    const float* grad = p.grad.data();
    for (std::size_t j = 0, n = p.numel(); j < n; ++j) {
      float g = grad[j] * grad_scale + opt_.weight_decay * value[j];
      if (opt_.momentum != 0.0f) {
        float& b = buffers_[i][j];
        b = first ? g : opt_.momentum * b + (1.0f - opt_.dampening) * g;
        g = opt_.nesterov ? g + opt_.momentum * b : b;
      }
      value[j] -= lr * g;
    }
  }
}

}  // namespace nn
