// nn/module.hpp — what every layer is: a forward and a backward over float32 NCHW tensors, and
// the parameters it owns.
//
// Layers know nothing about rounding: the model (sequential.hpp) rounds their inputs, outputs,
// parameters and gradients through the hooks, so each layer computes exactly one f_i, df_i,1
// and df_i,2 of eq. (1) in fp32.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nn/tensor.hpp"

namespace nn {

enum class module_kind : std::uint8_t { input, linear, conv2d, batch_norm, relu, max_pool, avg_pool };

[[nodiscard]] constexpr std::string_view name(module_kind k) {
  switch (k) {
    case module_kind::input: return "input";
    case module_kind::linear: return "linear";
    case module_kind::conv2d: return "conv2d";
    case module_kind::batch_norm: return "batch_norm";
    case module_kind::relu: return "relu";
    case module_kind::max_pool: return "max_pool";
    case module_kind::avg_pool: return "avg_pool";
  }
  return "?";
}

/// The GEMM operators of the paper: each starts a new tensor group.
[[nodiscard]] constexpr bool is_gemm(module_kind k) { return k == module_kind::linear || k == module_kind::conv2d; }

enum class mode : bool { eval, train };

struct parameter {
  std::string name;          // "weight", "bias"
  shape4 shape;              // PyTorch's layout, e.g. {out, in, kh, kw}
  float_buffer value;  // θ: the fp32 master copy the optimizer updates (empty when a weight store holds θ)
  float_buffer used;   // θ̂: what forward and backward read (the model copies value here and rounds it)
  float_buffer grad;   // dθ of the last backward (overwritten, not accumulated; may be freed between steps)

  parameter(std::string n, shape4 s) : name(std::move(n)), shape(s), value(s.numel()), used(s.numel()), grad(s.numel()) {}
  [[nodiscard]] std::size_t numel() const { return shape.numel(); }
};

class module {
 public:
  module() = default;
  module(const module&) = delete;
  module& operator=(const module&) = delete;
  virtual ~module() = default;

  [[nodiscard]] virtual module_kind kind() const = 0;
  /// The output shape for an input of shape `in`; throws std::invalid_argument when the layer
  /// cannot take that input.
  [[nodiscard]] virtual shape4 output_shape(const shape4& in) const = 0;
  /// y = f(x) with the parameters' `used` values. In train mode the layer keeps what its
  /// backward needs; x itself stays alive (the model owns it) until backward.
  virtual void forward(const tensor& x, tensor& y, mode m) = 0;
  /// From dy = dLoss/dy: writes every parameter's grad and, unless dx is null (the first layer,
  /// whose input gradient nobody needs), dx = dLoss/dx. `x` is the tensor forward saw.
  virtual void backward(const tensor& x, const tensor& dy, tensor* dx) = 0;

  [[nodiscard]] std::span<parameter> parameters() { return params_; }
  [[nodiscard]] std::span<const parameter> parameters() const { return params_; }

  /// Charges the parameters (value: weights, used: compute copy, grad: gradients) and the
  /// layer's own buffers to `ledger` from now on.
  void track_memory(minifloat::storage::memory_ledger& ledger) {
    using minifloat::storage::memory_category;
    for (parameter& p : params_) {
      minifloat::storage::track(p.value, {&ledger, memory_category::weights});
      minifloat::storage::track(p.used, {&ledger, memory_category::compute_copy});
      minifloat::storage::track(p.grad, {&ledger, memory_category::gradients});
    }
    track_buffers(ledger);
  }

 protected:
  /// Charges the layer's own buffers (what it keeps for backward, running statistics).
  virtual void track_buffers(minifloat::storage::memory_ledger&) {}

  std::vector<parameter> params_;
};

}  // namespace nn
