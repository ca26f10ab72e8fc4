// nn/batch_norm.hpp — batch normalisation over the channels of an NCHW tensor (PyTorch's
// nn.BatchNorm2d; on {n, c, 1, 1} it is nn.BatchNorm1d). Train mode normalises with the batch's
// mean and biased variance and updates the running statistics (unbiased variance, momentum);
// eval mode uses the running statistics.
#pragma once

#include <span>
#include <vector>

#include "nn/module.hpp"

namespace nn {

struct batch_norm_config {
  std::size_t channels = 1;
  float momentum = 0.1f;  // weight of the new batch in the running statistics
  float eps = 1e-5f;
};

class batch_norm final : public module {
 public:
  /// weight (γ) = 1, bias (β) = 0, running mean 0, running variance 1, as PyTorch.
  explicit batch_norm(const batch_norm_config& config);

  [[nodiscard]] module_kind kind() const override { return module_kind::batch_norm; }
  [[nodiscard]] shape4 output_shape(const shape4& in) const override;
  void forward(const tensor& x, tensor& y, mode m) override;
  /// Only after a train-mode forward (eval mode has no gradient path through the statistics).
  void backward(const tensor& x, const tensor& dy, tensor* dx) override;

  /// Buffers, not parameters: neither rounded nor optimised.
  [[nodiscard]] std::span<float> running_mean() { return running_mean_; }
  [[nodiscard]] std::span<float> running_var() { return running_var_; }
  [[nodiscard]] std::span<const float> running_mean() const { return running_mean_; }
  [[nodiscard]] std::span<const float> running_var() const { return running_var_; }

 private:
  // Running statistics are fp32 model state in every configuration: charged as weights.
  void track_buffers(minifloat::storage::memory_ledger& ledger) override {
    using minifloat::storage::memory_category;
    minifloat::storage::track(running_mean_, {&ledger, memory_category::weights});
    minifloat::storage::track(running_var_, {&ledger, memory_category::weights});
    minifloat::storage::track(mean_, {&ledger, memory_category::activations});
    minifloat::storage::track(inv_std_, {&ledger, memory_category::activations});
  }

  batch_norm_config cfg_;
  float_buffer running_mean_, running_var_;
  float_buffer mean_, inv_std_;  // of the last train-mode batch, for backward
  bool have_batch_stats_ = false;
};

}  // namespace nn
