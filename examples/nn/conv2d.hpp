// nn/conv2d.hpp — 2-D convolution (PyTorch's nn.Conv2d: square kernel, stride, zero padding,
// optional bias), a GEMM operator: each image is unfolded (im2col) and multiplied by the
// weight matrix, one product per image, which measured faster than one product per batch
// (docs/examples.md).
#pragma once

#include <random>
#include <vector>

#include "nn/module.hpp"

namespace nn {

struct conv2d_config {
  std::size_t in_channels = 1, out_channels = 1;
  std::size_t kernel = 3, stride = 1, padding = 0;
  bool bias = true;
};

class conv2d final : public module {
 public:
  /// weight {out, in, k, k}, optional bias {out}; PyTorch's default initialisation from `rng`.
  conv2d(const conv2d_config& config, std::mt19937_64& rng);

  [[nodiscard]] module_kind kind() const override { return module_kind::conv2d; }
  [[nodiscard]] shape4 output_shape(const shape4& in) const override;
  void forward(const tensor& x, tensor& y, mode m) override;
  void backward(const tensor& x, const tensor& dy, tensor* dx) override;

  [[nodiscard]] const conv2d_config& config() const { return cfg_; }

 private:
  void track_buffers(minifloat::storage::memory_ledger& ledger) override {
    minifloat::storage::track(col_, {&ledger, minifloat::storage::memory_category::activations});
  }
  void im2col(const float* image, std::size_t h, std::size_t w, std::size_t oh, std::size_t ow);
  void col2im(float* image, std::size_t h, std::size_t w, std::size_t oh, std::size_t ow) const;

  conv2d_config cfg_;
  float_buffer col_;  // one unfolded image: rows (c, ky, kx), columns (oy, ox)
};

}  // namespace nn
