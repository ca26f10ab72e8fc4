// nn/loss.hpp — softmax cross-entropy, the loss network L of the paper (PyTorch's
// nn.CrossEntropyLoss, mean reduction). Its output is a scalar and gets no rounding site; its
// gradient is the last module's GY, which the model rounds.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nn/tensor.hpp"

namespace nn {

class softmax_cross_entropy {
 public:
  /// Mean over the batch of −log softmax(row)[label]; logits are {n, classes, 1, 1} (any
  /// {n, c, h, w} is read as n rows). Throws std::invalid_argument for a label outside
  /// [0, classes) or a count mismatch. A NaN or ±Inf logit gives a NaN or Inf loss.
  double forward(const tensor& logits, std::span<const std::int32_t> labels);
  /// Rows of the last forward whose largest logit is at the label.
  [[nodiscard]] std::size_t correct() const { return correct_; }
  /// dLoss/dlogits = scale · (softmax − onehot) / n. `scale` is the dynamic loss scale (applied
  /// before any rounding, as PyTorch's GradScaler scales the loss).
  const tensor& backward(float scale = 1.0f);
  /// Charges the probabilities (activations) and the logits' gradient to `ledger` from now on.
  void track_memory(minifloat::storage::memory_ledger& ledger) {
    probabilities_.track_memory(ledger, minifloat::storage::memory_category::activations);
    gradient_.track_memory(ledger, minifloat::storage::memory_category::activation_gradients);
  }

 private:
  tensor probabilities_;
  std::vector<std::int32_t> labels_;
  std::size_t correct_ = 0;
  tensor gradient_;
};

}  // namespace nn
