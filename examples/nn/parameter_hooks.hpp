// nn/parameter_hooks.hpp — for trainers that keep the weights somewhere other than
// parameter::value (split storage without an fp32 master copy, extra-mantissa-bits paper §3.1)
// or that update each layer inside the backward pass (§3.2): where the model takes θ̂ from in
// forward, and whom it tells that a layer's parameter gradients are final in backward.
// sequential.hpp says where in a step each call happens.
#pragma once

#include <cstddef>
#include <span>

#include "nn/module.hpp"

namespace nn {

/// Fills the compute copy θ̂ (parameter::used) of each parameter before its P rounding.
class parameter_source {
 public:
  virtual ~parameter_source() = default;
  /// `index` is the parameter's position in sequential::parameters().
  virtual void load(std::size_t index, parameter& p) = 0;
};

/// Receives each layer's parameters once their gradients are final (after their GP rounding),
/// layer by layer from the last to the first.
class gradient_sink {
 public:
  virtual ~gradient_sink() = default;
  /// `first_index` is the position of params[0] in sequential::parameters().
  virtual void gradients_ready(std::size_t first_index, std::span<parameter> params) = 0;
};

/// Frees a buffer's storage; it keeps its allocator (and so its memory category).
inline void release(float_buffer& b) { float_buffer(b.get_allocator()).swap(b); }
/// Frees a parameter's gradient (the model allocates it again before its layer's next backward).
inline void release_gradient(parameter& p) { release(p.grad); }

}  // namespace nn
