#include "nn/conv2d.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "nn/gemm.hpp"
#include "nn/init.hpp"

namespace nn {

conv2d::conv2d(const conv2d_config& config, std::mt19937_64& rng) : cfg_(config) {
  if (cfg_.in_channels == 0 || cfg_.out_channels == 0 || cfg_.kernel == 0 || cfg_.stride == 0)
    throw std::invalid_argument("nn::conv2d: channels, kernel and stride must be positive");
  params_.emplace_back("weight", shape4{cfg_.out_channels, cfg_.in_channels, cfg_.kernel, cfg_.kernel});
  if (cfg_.bias) params_.emplace_back("bias", shape4{cfg_.out_channels, 1, 1, 1});
  const double bound = default_init_bound(cfg_.in_channels * cfg_.kernel * cfg_.kernel);
  for (parameter& p : params_) fill_uniform(p.value, bound, rng);
}

shape4 conv2d::output_shape(const shape4& in) const {
  if (in.c != cfg_.in_channels)
    throw std::invalid_argument("nn::conv2d: input has " + std::to_string(in.c) + " channels, the layer takes " +
                                std::to_string(cfg_.in_channels));
  const std::size_t h = in.h + 2 * cfg_.padding, w = in.w + 2 * cfg_.padding;
  if (h < cfg_.kernel || w < cfg_.kernel) throw std::invalid_argument("nn::conv2d: input smaller than the kernel");
  return {in.n, cfg_.out_channels, (h - cfg_.kernel) / cfg_.stride + 1, (w - cfg_.kernel) / cfg_.stride + 1};
}

namespace {
// The output columns [lo, hi) whose tap kx lands inside a row of width w (the rest read padding).
struct column_range {
  std::size_t lo, hi;
};
column_range valid_columns(std::size_t kx, std::size_t s, std::size_t pad, std::size_t w, std::size_t ow) {
  // ox * s + kx - pad in [0, w)  <=>  ox >= ceil((pad - kx) / s) and ox * s < w + pad - kx
  const std::size_t lo = kx >= pad ? 0 : (pad - kx + s - 1) / s;
  const std::size_t hi = w + pad <= kx ? 0 : std::min(ow, (w + pad - kx + s - 1) / s);
  return {std::min(lo, hi), hi};
}
}  // namespace

void conv2d::im2col(const float* image, std::size_t h, std::size_t w, std::size_t oh, std::size_t ow) {
  const std::size_t k = cfg_.kernel, s = cfg_.stride, pad = cfg_.padding;
  col_.resize(cfg_.in_channels * k * k * oh * ow);
  float* out = col_.data();
  for (std::size_t c = 0; c < cfg_.in_channels; ++c)
    for (std::size_t ky = 0; ky < k; ++ky)
      for (std::size_t kx = 0; kx < k; ++kx) {
        const column_range cols = valid_columns(kx, s, pad, w, ow);
        for (std::size_t oy = 0; oy < oh; ++oy, out += ow) {
          const std::size_t iy = oy * s + ky;  // padded coordinate
          if (iy < pad || iy >= h + pad) {
            std::fill(out, out + ow, 0.0f);
            continue;
          }
          const float* row = image + (c * h + iy - pad) * w;
          std::fill(out, out + cols.lo, 0.0f);
          if (s == 1) std::copy(row + cols.lo + kx - pad, row + cols.hi + kx - pad, out + cols.lo);
          else
            for (std::size_t ox = cols.lo; ox < cols.hi; ++ox) out[ox] = row[ox * s + kx - pad];
          std::fill(out + cols.hi, out + ow, 0.0f);
        }
      }
}

void conv2d::col2im(float* image, std::size_t h, std::size_t w, std::size_t oh, std::size_t ow) const {
  const std::size_t k = cfg_.kernel, s = cfg_.stride, pad = cfg_.padding;
  std::fill(image, image + cfg_.in_channels * h * w, 0.0f);
  const float* in = col_.data();
  for (std::size_t c = 0; c < cfg_.in_channels; ++c)
    for (std::size_t ky = 0; ky < k; ++ky)
      for (std::size_t kx = 0; kx < k; ++kx) {
        const column_range cols = valid_columns(kx, s, pad, w, ow);
        for (std::size_t oy = 0; oy < oh; ++oy, in += ow) {
          const std::size_t iy = oy * s + ky;
          if (iy < pad || iy >= h + pad) continue;
          float* row = image + (c * h + iy - pad) * w;
          if (s == 1)
            for (std::size_t ox = cols.lo; ox < cols.hi; ++ox) row[ox + kx - pad] += in[ox];
          else
            for (std::size_t ox = cols.lo; ox < cols.hi; ++ox) row[ox * s + kx - pad] += in[ox];
        }
      }
}

void conv2d::forward(const tensor& x, tensor& y, mode) {
  const shape4 os = output_shape(x.shape);
  y.resize(os);
  const std::size_t taps = cfg_.in_channels * cfg_.kernel * cfg_.kernel, pixels = os.plane();
  for (std::size_t i = 0; i < x.shape.n; ++i) {
    im2col(x.data() + i * x.shape.sample_numel(), x.shape.h, x.shape.w, os.h, os.w);
    float* out = y.data() + i * os.sample_numel();
    if (cfg_.bias)
      for (std::size_t o = 0; o < cfg_.out_channels; ++o)
        std::fill(out + o * pixels, out + (o + 1) * pixels, params_[1].used[o]);
    gemm({.trans_a = transpose::no, .trans_b = transpose::no, .m = cfg_.out_channels, .n = pixels, .k = taps,
          .a = params_[0].used.data(), .lda = taps, .b = col_.data(), .ldb = pixels, .beta = cfg_.bias ? 1.0f : 0.0f,
          .c = out, .ldc = pixels});
  }
}

void conv2d::backward(const tensor& x, const tensor& dy, tensor* dx) {
  const shape4 os = output_shape(x.shape);
  if (dy.shape != os) throw std::invalid_argument("nn::conv2d: gradient shape differs from output");
  const std::size_t taps = cfg_.in_channels * cfg_.kernel * cfg_.kernel, pixels = os.plane();
  float_buffer& dw = params_[0].grad;
  std::fill(dw.begin(), dw.end(), 0.0f);
  if (cfg_.bias) std::fill(params_[1].grad.begin(), params_[1].grad.end(), 0.0f);
  if (dx != nullptr) dx->resize(x.shape);
  for (std::size_t i = 0; i < x.shape.n; ++i) {
    const float* g = dy.data() + i * os.sample_numel();
    im2col(x.data() + i * x.shape.sample_numel(), x.shape.h, x.shape.w, os.h, os.w);
    // dW += dY_i col_i^T
    gemm({.trans_a = transpose::no, .trans_b = transpose::yes, .m = cfg_.out_channels, .n = taps, .k = pixels,
          .a = g, .lda = pixels, .b = col_.data(), .ldb = pixels, .beta = 1.0f, .c = dw.data(), .ldc = taps});
    if (cfg_.bias)
      for (std::size_t o = 0; o < cfg_.out_channels; ++o) {
        float sum = 0.0f;
        for (std::size_t p = 0; p < pixels; ++p) sum += g[o * pixels + p];
        params_[1].grad[o] += sum;
      }
    if (dx != nullptr) {
      // dcol = W^T dY_i, folded back onto the image.
      gemm({.trans_a = transpose::yes, .trans_b = transpose::no, .m = taps, .n = pixels, .k = cfg_.out_channels,
            .a = params_[0].used.data(), .lda = taps, .b = g, .ldb = pixels, .beta = 0.0f, .c = col_.data(),
            .ldc = pixels});
      col2im(dx->data() + i * x.shape.sample_numel(), x.shape.h, x.shape.w, os.h, os.w);
    }
  }
}

}  // namespace nn
