// nn/pooling.hpp — max and average pooling over square windows without padding (PyTorch's
// MaxPool2d / AvgPool2d with padding 0 and floor mode: trailing rows/columns that do not fill a
// window are dropped).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/module.hpp"

namespace nn {

struct pool_config {
  std::size_t kernel = 2;
  std::size_t stride = 2;
};

namespace detail {
shape4 pooled_shape(const pool_config& cfg, const shape4& in, const char* who);
}

/// The gradient goes to the first maximum of each window (PyTorch's choice); a NaN in a window
/// is its maximum, so NaN propagates.
class max_pool final : public module {
 public:
  explicit max_pool(const pool_config& config = {});
  [[nodiscard]] module_kind kind() const override { return module_kind::max_pool; }
  [[nodiscard]] shape4 output_shape(const shape4& in) const override {
    return detail::pooled_shape(cfg_, in, "nn::max_pool");
  }
  void forward(const tensor& x, tensor& y, mode m) override;
  void backward(const tensor& x, const tensor& dy, tensor* dx) override;

 private:
  void track_buffers(minifloat::storage::memory_ledger& ledger) override {
    minifloat::storage::track(argmax_, {&ledger, minifloat::storage::memory_category::activations});
  }

  pool_config cfg_;
  buffer<std::uint32_t> argmax_;  // per output: offset of the chosen input within its plane
};

class avg_pool final : public module {
 public:
  explicit avg_pool(const pool_config& config = {});
  [[nodiscard]] module_kind kind() const override { return module_kind::avg_pool; }
  [[nodiscard]] shape4 output_shape(const shape4& in) const override {
    return detail::pooled_shape(cfg_, in, "nn::avg_pool");
  }
  void forward(const tensor& x, tensor& y, mode m) override;
  void backward(const tensor& x, const tensor& dy, tensor* dx) override;

 private:
  pool_config cfg_;
};

}  // namespace nn
