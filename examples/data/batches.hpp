// data/batches.hpp — mini-batches of an image_dataset: a seeded shuffle per epoch and gathering
// of normalised float32 NCHW batches.
//
// The order of epoch e depends only on (seed, e), through mt19937_64 and a hand-written
// Fisher-Yates (std::shuffle's algorithm is implementation-defined), so a run resumed at epoch
// e, or run with another standard library, sees the same batches.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/fashion_mnist.hpp"
#include "nn/tensor.hpp"

namespace data {

/// pixel' = (pixel / 255 − mean) / std
struct normalization {
  float mean = fashion_mnist_mean;
  float std = fashion_mnist_std;
};

/// A permutation of [0, count) for the given seed and epoch.
[[nodiscard]] std::vector<std::uint32_t> epoch_order(std::size_t count, std::uint64_t seed, std::size_t epoch);

struct loader_options {
  std::size_t batch_size = 128;
  bool shuffle = true;     // false: the data set's order (evaluation)
  bool drop_last = false;  // true: skip the last, short batch
  std::uint64_t seed = 1;
  normalization norm{};
};

class batch_loader {
 public:
  /// Keeps a reference to `data`, which must outlive the loader. Starts at epoch 0.
  batch_loader(const image_dataset& data, const loader_options& options);

  [[nodiscard]] std::size_t batches() const;
  /// Re-orders the items for `epoch` (no-op order when shuffle is off).
  void start_epoch(std::size_t epoch);
  /// Indices of batch b of the current epoch.
  [[nodiscard]] std::span<const std::uint32_t> indices(std::size_t b) const;
  /// Batch b: images {n, 1, rows, cols}, normalised; labels as int32 for the loss.
  void gather(std::size_t b, nn::tensor& images, std::vector<std::int32_t>& labels) const;

 private:
  const image_dataset* data_;
  loader_options opt_;
  std::vector<std::uint32_t> order_;
};

}  // namespace data
