#include "nn/loss.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace nn {

double softmax_cross_entropy::forward(const tensor& logits, std::span<const std::int32_t> labels) {
  const std::size_t n = logits.shape.n, classes = logits.shape.sample_numel();
  if (labels.size() != n)
    throw std::invalid_argument("nn::softmax_cross_entropy: " + std::to_string(labels.size()) + " labels for " +
                                std::to_string(n) + " rows");
  if (n == 0 || classes == 0) throw std::invalid_argument("nn::softmax_cross_entropy: empty logits");
  for (std::int32_t label : labels)
    if (label < 0 || static_cast<std::size_t>(label) >= classes)
      throw std::invalid_argument("nn::softmax_cross_entropy: label " + std::to_string(label) + " outside [0, " +
                                  std::to_string(classes) + ")");
  probabilities_.resize(logits.shape);  // the gradient takes the logits' shape
  labels_.assign(labels.begin(), labels.end());
  correct_ = 0;
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const float* z = logits.data() + i * classes;
    float* p = probabilities_.data() + i * classes;
    const std::size_t arg = static_cast<std::size_t>(std::max_element(z, z + classes) - z);
    if (arg == static_cast<std::size_t>(labels[i])) ++correct_;
    // Shift by the row's maximum so exp cannot overflow; log-sum-exp in double.
    const double top = z[arg];
    double sum = 0.0;
    for (std::size_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(z[j]) - top);
    const double log_sum = top + std::log(sum);
    for (std::size_t j = 0; j < classes; ++j) p[j] = static_cast<float>(std::exp(static_cast<double>(z[j]) - log_sum));
    total += log_sum - static_cast<double>(z[static_cast<std::size_t>(labels[i])]);
  }
  return total / static_cast<double>(n);
}

const tensor& softmax_cross_entropy::backward(float scale) {
  const std::size_t n = probabilities_.shape.n, classes = probabilities_.shape.sample_numel();
  if (n == 0) throw std::logic_error("nn::softmax_cross_entropy: backward before forward");
  gradient_.resize(probabilities_.shape);
  const float k = scale / static_cast<float>(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < classes; ++j) {
      const float onehot = static_cast<std::size_t>(labels_[i]) == j ? 1.0f : 0.0f;
      gradient_.values[i * classes + j] = k * (probabilities_.values[i * classes + j] - onehot);
    }
  return gradient_;
}

}  // namespace nn
