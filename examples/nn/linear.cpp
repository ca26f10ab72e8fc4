#include "nn/linear.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "nn/gemm.hpp"
#include "nn/init.hpp"

namespace nn {

linear::linear(std::size_t in_features, std::size_t out_features, bool bias, std::mt19937_64& rng)
    : in_(in_features), out_(out_features), has_bias_(bias) {
  if (in_ == 0 || out_ == 0) throw std::invalid_argument("nn::linear: zero features");
  params_.emplace_back("weight", shape4{out_, in_, 1, 1});
  if (has_bias_) params_.emplace_back("bias", shape4{out_, 1, 1, 1});
  const double bound = default_init_bound(in_);
  for (parameter& p : params_) fill_uniform(p.value, bound, rng);
}

shape4 linear::output_shape(const shape4& in) const {
  if (in.sample_numel() != in_)
    throw std::invalid_argument("nn::linear: input has " + std::to_string(in.sample_numel()) +
                                " features per sample, the layer takes " + std::to_string(in_));
  return {in.n, out_, 1, 1};
}

void linear::forward(const tensor& x, tensor& y, mode) {
  y.resize(output_shape(x.shape));
  const std::size_t n = x.shape.n;
  if (has_bias_) {
    // Seed C with the bias and let the product accumulate onto it (beta = 1).
    const float* b = params_[1].used.data();
    for (std::size_t i = 0; i < n; ++i) std::copy(b, b + out_, y.data() + i * out_);
  }
  gemm({.trans_a = transpose::no, .trans_b = transpose::yes, .m = n, .n = out_, .k = in_, .a = x.data(),
        .lda = in_, .b = params_[0].used.data(), .ldb = in_, .beta = has_bias_ ? 1.0f : 0.0f, .c = y.data(),
        .ldc = out_});
}

void linear::backward(const tensor& x, const tensor& dy, tensor* dx) {
  const std::size_t n = x.shape.n;
  if (dy.shape != output_shape(x.shape)) throw std::invalid_argument("nn::linear: gradient shape differs from output");
  // dW = dY^T X
  gemm({.trans_a = transpose::yes, .trans_b = transpose::no, .m = out_, .n = in_, .k = n, .a = dy.data(),
        .lda = out_, .b = x.data(), .ldb = in_, .beta = 0.0f, .c = params_[0].grad.data(), .ldc = in_});
  if (has_bias_) {
    float_buffer& db = params_[1].grad;
    std::fill(db.begin(), db.end(), 0.0f);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t o = 0; o < out_; ++o) db[o] += dy.values[i * out_ + o];
  }
  if (dx != nullptr) {
    // dX = dY W, in the input's own shape.
    dx->resize(x.shape);
    gemm({.trans_a = transpose::no, .trans_b = transpose::no, .m = n, .n = in_, .k = out_, .a = dy.data(),
          .lda = out_, .b = params_[0].used.data(), .ldb = in_, .beta = 0.0f, .c = dx->data(), .ldc = in_});
  }
}

}  // namespace nn
