// nn/hooks.hpp — the rounding hook: where every tensor of eq. (1) of the precision-assignment
// paper (activations Y, activation gradients GY, parameters P, parameter gradients GP) passes
// on its way through a training step.
//
// The model calls `round(site, values)` once per tensor per step, in place, right after the
// tensor is computed and before anything reads it; what the hook leaves there is the tensor's
// rounded value (the hats of eq. (1)). The hook decides everything else — format, rounding mode,
// statistics, doing nothing at all. `no_rounding` gives plain fp32 training.
#pragma once

#include <cstddef>
#include <cstdint>
#include <concepts>
#include <span>
#include <string_view>
#include <utility>

namespace nn {

enum class tensor_kind : std::uint8_t {
  activation,           // Y: a module's output (the input batch is module 0's Y)
  activation_gradient,  // GY: dLoss/dY of a module's output
  parameter,            // P: the copy of a parameter that forward and backward use (θ̂)
  parameter_gradient,   // GP: dLoss/dP
};

[[nodiscard]] constexpr std::string_view short_name(tensor_kind k) {
  switch (k) {
    case tensor_kind::activation: return "Y";
    case tensor_kind::activation_gradient: return "GY";
    case tensor_kind::parameter: return "P";
    case tensor_kind::parameter_gradient: return "GP";
  }
  return "?";
}

[[nodiscard]] constexpr bool is_forward(tensor_kind k) {
  return k == tensor_kind::activation || k == tensor_kind::parameter;
}

/// One rounding site. `id` is dense (0 .. sites-1) and fixed for a model; `module` indexes
/// model_description::modules; `parameter` indexes that module's parameters (0 for Y and GY).
struct tensor_site {
  std::size_t id = 0;
  std::size_t module = 0;
  tensor_kind kind = tensor_kind::activation;
  std::size_t parameter = 0;
  friend constexpr bool operator==(const tensor_site&, const tensor_site&) = default;
};

class rounding_hooks {
 public:
  virtual ~rounding_hooks() = default;
  /// Rounds `values` in place. values.size() is the tensor's element count in this step (a last,
  /// short batch gives smaller Y and GY).
  virtual void round(const tensor_site& site, std::span<float> values) = 0;
};

/// Plain fp32: every tensor keeps its value.
class no_rounding final : public rounding_hooks {
 public:
  void round(const tensor_site&, std::span<float>) override {}
};

/// Adapts any callable `void(const tensor_site&, std::span<float>)`.
template <std::invocable<const tensor_site&, std::span<float>> F>
class function_hooks final : public rounding_hooks {
 public:
  explicit function_hooks(F f) : f_(std::move(f)) {}
  void round(const tensor_site& site, std::span<float> values) override { f_(site, values); }

 private:
  F f_;
};

}  // namespace nn
