// synthetic_batch.hpp — the training-step benchmarks' input: a batch of 28x28 images whose bytes
// are drawn from a fixed seed and normalised like Fashion-MNIST, with random labels, so the
// benchmarks run without the data set (the work of a step does not depend on the pixels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "nn/tensor.hpp"

namespace bench_support {

struct synthetic_batch {
  nn::tensor images;
  std::vector<std::int32_t> labels;

  explicit synthetic_batch(std::size_t batch) : images(nn::shape4{batch, 1, 28, 28}), labels(batch) {
    std::mt19937 gen(7);
    std::uniform_int_distribution<int> pixel(0, 255), label(0, 9);
    for (float& v : images.values) v = (static_cast<float>(pixel(gen)) / 255.0f - 0.2860f) / 0.3530f;
    for (auto& l : labels) l = label(gen);
  }
};

}  // namespace bench_support
