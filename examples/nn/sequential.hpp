// nn/sequential.hpp — a chain of modules with the rounding hooks of eq. (1) wired in, and the
// description a trainer builds its rounding sites and tensor groups from.
//
// Module 0 is the input: its Y is the batch (v1 of eq. (1)), rounded like any activation; its
// gradient is never computed. Modules 1.. are the layers, each fed by the one before.
//
// One training step, with the hook calls it makes (each exactly once, in this order):
//   forward(x, hooks, mode::train)
//     Y(input) on a copy of x
//     for each module k: P(k, p) on each parameter's `used` copy (freshly copied from `value`),
//                        then the layer's forward, then Y(k) on its output
//   softmax_cross_entropy::forward / backward(scale)   (no hooks)
//   backward(dlogits, hooks)
//     GY(last) on a copy of dlogits
//     for each module k from last to first: the layer's backward (each parameter's grad is
//                        allocated first if it was released), then GP(k, p) on each
//                        parameter's grad, then the gradient sink's gradients_ready(k's
//                        parameters) when one is given, then GY(k-1) on its input gradient (k > 1)
// A forward in eval mode calls the P and Y hooks only. The optimizer then updates `value` from
// `grad` (sgd.hpp); `value` itself is never rounded by the model. With a parameter_source
// (parameter_hooks.hpp) forward asks it for `used` instead of copying `value`.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/hooks.hpp"
#include "nn/module.hpp"
#include "nn/parameter_hooks.hpp"

namespace nn {

struct parameter_info {
  std::string name;  // "weight", "bias"
  shape4 shape;
  std::size_t numel = 0;
  std::size_t p_site = 0, gp_site = 0;
};

struct module_info {
  std::string name;                  // "input", "fc1", "conv2", "bn2", ...
  module_kind kind = module_kind::input;
  bool gemm = false;                 // linear or conv2d: starts a tensor group
  std::optional<std::size_t> input;  // index of the module whose Y this one reads
  shape4 y_shape;                    // at the described batch size
  std::size_t y_numel = 0;
  std::size_t gy_numel = 0;          // 0 for the input module (never computed)
  std::size_t y_site = 0;
  std::optional<std::size_t> gy_site;
  std::vector<parameter_info> parameters;
};

struct site_info {
  tensor_site site;
  std::string name;       // "conv2.Y", "conv2.GY", "conv2.weight.P", "conv2.weight.GP"
  std::size_t numel = 0;  // at the described batch size
};

struct model_description {
  std::size_t batch = 0;
  std::vector<module_info> modules;  // execution order; modules[0] is the input
  std::vector<site_info> sites;      // sites[i].site.id == i

  /// Σ numel over every site: the size(TS) of the paper's low-precision ratio.
  [[nodiscard]] std::size_t total_numel() const;
  /// One line per module: index, name, kind, GEMM, input, Y/GY counts, parameters.
  [[nodiscard]] std::string table() const;
};

class sequential {
 public:
  /// `sample` is one input sample's shape; its n is ignored. E.g. {1, 1, 28, 28}.
  explicit sequential(shape4 sample);

  /// Appends a layer fed by the last one. Throws std::invalid_argument for an empty or repeated
  /// name, or a layer that cannot take the previous output's shape.
  module& add(std::string name, std::unique_ptr<module> layer);
  template <class Layer, class... Args>
  Layer& emplace(std::string name, Args&&... args) {
    return static_cast<Layer&>(add(std::move(name), std::make_unique<Layer>(std::forward<Args>(args)...)));
  }

  /// Modules including the input (so layers are 1 .. size()-1).
  [[nodiscard]] std::size_t size() const { return names_.size(); }
  [[nodiscard]] std::string_view module_name(std::size_t k) const { return names_.at(k); }
  [[nodiscard]] module& layer(std::size_t k) { return *layers_.at(k - 1); }
  [[nodiscard]] const module& layer(std::size_t k) const { return *layers_.at(k - 1); }
  /// Every parameter in execution order (the optimizer's order).
  [[nodiscard]] std::vector<parameter*> parameters();
  [[nodiscard]] std::size_t parameter_count() const;

  [[nodiscard]] model_description describe(std::size_t batch) const;
  [[nodiscard]] std::size_t site_count() const { return site_count_; }
  /// The site of a tensor; throws std::out_of_range when the model has no such tensor
  /// (e.g. the input's GY).
  [[nodiscard]] tensor_site site(std::size_t module, tensor_kind kind, std::size_t param = 0) const;

  /// Runs the batch through every layer; returns the last Y (the logits), rounded. θ̂ comes
  /// from `source` when given, else from each parameter's value.
  const tensor& forward(const tensor& x, rounding_hooks& hooks, mode m, parameter_source* source = nullptr);
  /// Backpropagates dLoss/d(last Y) after a train-mode forward; leaves every parameter's grad
  /// (unless `sink` releases them) and tells `sink`, when given, as each layer's are final.
  void backward(const tensor& grad_output, rounding_hooks& hooks, gradient_sink* sink = nullptr);

  /// Charges every parameter, layer buffer, activation (Y) and activation gradient (GY) of the
  /// model to `ledger` from now on (minifloat/storage/memory_ledger.hpp).
  void track_memory(minifloat::storage::memory_ledger& ledger);

  /// Y(k) and GY(k) of the last step, as rounded (for statistics and tests).
  [[nodiscard]] const tensor& activation(std::size_t k) const { return activations_.at(k); }
  [[nodiscard]] const tensor& activation_gradient(std::size_t k) const { return gradients_.at(k); }

 private:
  [[nodiscard]] shape4 output_shape(shape4 in) const;

  shape4 sample_;
  std::vector<std::string> names_;  // names_[0] == "input"
  std::vector<std::unique_ptr<module>> layers_;
  std::vector<std::size_t> first_site_;  // per module
  std::vector<std::size_t> first_param_;  // per module: index of its first parameter in parameters()
  std::size_t site_count_ = 1;
  std::vector<tensor> activations_, gradients_;  // per module, reused across steps
  bool ready_for_backward_ = false;
};

}  // namespace nn
