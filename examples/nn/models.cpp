#include "nn/models.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "nn/batch_norm.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/pooling.hpp"
#include "nn/relu.hpp"

namespace nn {

std::size_t scaled_width(std::size_t base, double width) {
  if (!(width > 0.0) || !std::isfinite(width)) throw std::invalid_argument("nn: width multiplier must be positive");
  const double w = std::round(static_cast<double>(base) * width);
  return w < 1.0 ? 1 : static_cast<std::size_t>(w);
}

sequential make_mlp(const mlp_config& config) {
  std::mt19937_64 rng(config.seed);
  const std::size_t hidden = scaled_width(config.hidden, config.width);
  sequential net(config.sample);
  std::size_t features = config.sample.sample_numel();
  for (std::size_t i = 1; i <= config.hidden_layers; ++i) {
    net.emplace<linear>("fc" + std::to_string(i), features, hidden, true, rng);
    net.emplace<relu>("relu" + std::to_string(i));
    features = hidden;
  }
  net.emplace<linear>("fc" + std::to_string(config.hidden_layers + 1), features, config.classes, true, rng);
  return net;
}

sequential make_cnn(const cnn_config& config) {
  std::mt19937_64 rng(config.seed);
  sequential net(config.sample);
  std::size_t in = config.sample.c;
  std::size_t channels = scaled_width(config.channels, config.width);
  for (std::size_t b = 1; b <= config.blocks; ++b, channels *= 2) {
    const std::string i = std::to_string(b);
    net.emplace<conv2d>("conv" + i,
                        conv2d_config{.in_channels = in, .out_channels = channels, .kernel = 3, .stride = 1, .padding = 1, .bias = false},
                        rng);
    net.emplace<batch_norm>("bn" + i, batch_norm_config{.channels = channels});
    net.emplace<relu>("relu" + i);
    net.emplace<max_pool>("pool" + i, pool_config{.kernel = 2, .stride = 2});
    in = channels;
  }
  const shape4 out = net.describe(1).modules.back().y_shape;
  net.emplace<linear>("fc", out.sample_numel(), config.classes, true, rng);
  return net;
}

}  // namespace nn
