// nn/models.hpp — the example trainer's two models for 28x28 grey images, 10 classes, with a
// width multiplier: narrower models have less redundancy and train worse in low precision.
//
//   MLP:  fc1 (784 -> H) relu1, fc2 (H -> H) relu2, fc3 (H -> 10);            H = 512 · width
//   CNN:  conv1 (1 -> C, 3x3, pad 1) bn1 relu1 pool1 (2x2),
//         conv2 (C -> 2C, 3x3, pad 1) bn2 relu2 pool2 (2x2),
//         fc (2C · 7 · 7 -> 10);                                              C = 32 · width
// Convolutions carry no bias (the batch norm after them has one). Widths round to the nearest
// integer, at least 1. docs/examples.md has the epoch times.
#pragma once

#include <cstdint>

#include "nn/sequential.hpp"

namespace nn {

struct mlp_config {
  shape4 sample{1, 1, 28, 28};  // read as sample.sample_numel() features
  std::size_t hidden = 512;  // at width 1
  std::size_t hidden_layers = 2;
  std::size_t classes = 10;
  double width = 1.0;
  std::uint64_t seed = 1;  // initialisation
};

struct cnn_config {
  shape4 sample{1, 1, 28, 28};
  std::size_t channels = 32;  // of the first block at width 1; each block doubles it
  std::size_t blocks = 2;
  std::size_t classes = 10;
  double width = 1.0;
  std::uint64_t seed = 1;
};

/// max(1, round(base · width)); throws std::invalid_argument for width <= 0.
[[nodiscard]] std::size_t scaled_width(std::size_t base, double width);

[[nodiscard]] sequential make_mlp(const mlp_config& config = {});
[[nodiscard]] sequential make_cnn(const cnn_config& config = {});

}  // namespace nn
