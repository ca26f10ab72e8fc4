#include "nn/batch_norm.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "nn/detail/lane_sum.hpp"

namespace nn {

batch_norm::batch_norm(const batch_norm_config& config)
    : cfg_(config),
      running_mean_(config.channels, 0.0f),
      running_var_(config.channels, 1.0f),
      mean_(config.channels),
      inv_std_(config.channels) {
  if (cfg_.channels == 0) throw std::invalid_argument("nn::batch_norm: zero channels");
  params_.emplace_back("weight", shape4{cfg_.channels, 1, 1, 1});
  params_.emplace_back("bias", shape4{cfg_.channels, 1, 1, 1});
  std::fill(params_[0].value.begin(), params_[0].value.end(), 1.0f);
}

shape4 batch_norm::output_shape(const shape4& in) const {
  if (in.c != cfg_.channels)
    throw std::invalid_argument("nn::batch_norm: input has " + std::to_string(in.c) + " channels, the layer takes " +
                                std::to_string(cfg_.channels));
  return in;
}

void batch_norm::forward(const tensor& x, tensor& y, mode m) {
  y.resize(output_shape(x.shape));
  const std::size_t n = x.shape.n, channels = cfg_.channels, plane = x.shape.plane();
  const std::size_t count = n * plane;
  const float_buffer& gamma = params_[0].used;
  const float_buffer& beta = params_[1].used;
  have_batch_stats_ = m == mode::train;
  for (std::size_t c = 0; c < channels; ++c) {
    float mean = running_mean_[c], inv_std = 1.0f / std::sqrt(running_var_[c] + cfg_.eps);
    if (m == mode::train) {
      if (count < 2) throw std::invalid_argument("nn::batch_norm: training needs more than one value per channel");
      // Two passes: the variance of a low-precision-rounded activation can be tiny next to its
      // mean, where the one-pass formula cancels.
      double sum = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const float* in = x.data() + (i * channels + c) * plane;
        sum += detail::lane_sum(plane, [in](std::size_t p) { return in[p]; });
      }
      const auto mu = static_cast<float>(sum / static_cast<double>(count));
      double squares = 0.0;
      for (std::size_t i = 0; i < n; ++i) {
        const float* in = x.data() + (i * channels + c) * plane;
        squares += detail::lane_sum(plane, [in, mu](std::size_t p) { return (in[p] - mu) * (in[p] - mu); });
      }
      const double var = squares / static_cast<double>(count);
      mean = mu;
      inv_std = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(cfg_.eps)));
      mean_[c] = mean;
      inv_std_[c] = inv_std;
      const float unbiased = static_cast<float>(var * static_cast<double>(count) / static_cast<double>(count - 1));
      running_mean_[c] = (1.0f - cfg_.momentum) * running_mean_[c] + cfg_.momentum * mean;
      running_var_[c] = (1.0f - cfg_.momentum) * running_var_[c] + cfg_.momentum * unbiased;
    }
    const float scale = gamma[c] * inv_std, shift = beta[c] - mean * scale;
    for (std::size_t i = 0; i < n; ++i) {
      const float* in = x.data() + (i * channels + c) * plane;
      float* out = y.data() + (i * channels + c) * plane;
      for (std::size_t p = 0; p < plane; ++p) out[p] = in[p] * scale + shift;
    }
  }
}

void batch_norm::backward(const tensor& x, const tensor& dy, tensor* dx) {
  if (!have_batch_stats_) throw std::logic_error("nn::batch_norm: backward needs a train-mode forward");
  if (dy.shape != output_shape(x.shape)) throw std::invalid_argument("nn::batch_norm: gradient shape differs from output");
  const std::size_t n = x.shape.n, channels = cfg_.channels, plane = x.shape.plane();
  const auto count = static_cast<double>(n * plane);
  if (dx != nullptr) dx->resize(x.shape);
  for (std::size_t c = 0; c < channels; ++c) {
    const float mean = mean_[c], inv_std = inv_std_[c];
    double sum_dy = 0.0, sum_dy_dev = 0.0;  // Σ dy and Σ dy·(x − μ); x̂ = (x − μ)/σ
    for (std::size_t i = 0; i < n; ++i) {
      const float* in = x.data() + (i * channels + c) * plane;
      const float* g = dy.data() + (i * channels + c) * plane;
      sum_dy += detail::lane_sum(plane, [g](std::size_t p) { return g[p]; });
      sum_dy_dev += detail::lane_sum(plane, [g, in, mean](std::size_t p) { return g[p] * (in[p] - mean); });
    }
    const double sum_dy_xhat = sum_dy_dev * inv_std;
    params_[1].grad[c] = static_cast<float>(sum_dy);
    params_[0].grad[c] = static_cast<float>(sum_dy_xhat);
    if (dx == nullptr) continue;
    // dx = γ/σ · (dy − mean(dy) − x̂ · mean(dy · x̂))
    const float k = params_[0].used[c] * inv_std;
    const auto mean_dy = static_cast<float>(sum_dy / count), mean_dy_xhat = static_cast<float>(sum_dy_xhat / count);
    for (std::size_t i = 0; i < n; ++i) {
      const float* in = x.data() + (i * channels + c) * plane;
      const float* g = dy.data() + (i * channels + c) * plane;
      float* out = dx->data() + (i * channels + c) * plane;
      for (std::size_t p = 0; p < plane; ++p) out[p] = k * (g[p] - mean_dy - (in[p] - mean) * inv_std * mean_dy_xhat);
    }
  }
}

}  // namespace nn
