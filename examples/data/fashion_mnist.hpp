// data/fashion_mnist.hpp — an image-classification data set of 8-bit grey images held in
// memory, and the loader of Fashion-MNIST from Debian's dataset-fashion-mnist package.
//
// Pixels stay as bytes (47 MB for the training split instead of 188 MB of floats); they are
// normalised when a batch is gathered (batches.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace data {

struct image_dataset {
  std::size_t rows = 0, cols = 0, classes = 0;
  std::vector<std::uint8_t> pixels;  // size() images of rows x cols, row-major
  std::vector<std::uint8_t> labels;  // in [0, classes)

  [[nodiscard]] std::size_t size() const { return labels.size(); }
  [[nodiscard]] std::size_t image_numel() const { return rows * cols; }
};

/// Reads an images file (IDX rank 3) and a labels file (IDX rank 1) and checks that they agree
/// (same count) and that every label is below `classes`. Throws data::idx_error naming the file.
[[nodiscard]] image_dataset load_idx_dataset(const std::filesystem::path& images, const std::filesystem::path& labels,
                                             std::size_t classes);

enum class split { train, test };

inline constexpr std::string_view fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

/// {dir}/train-images-idx3-ubyte.gz + train-labels-idx1-ubyte.gz (60000 images) or the t10k-
/// pair (10000), 28x28, 10 classes, each count checked. Any failure throws data::idx_error whose
/// message names the file and says which Debian package provides it.
[[nodiscard]] image_dataset load_fashion_mnist(split which,
                                               const std::filesystem::path& dir = std::filesystem::path(fashion_mnist_dir));

/// Mean and standard deviation of the training split's pixels scaled to [0, 1] (over all 47 040 000
/// pixels of Debian's train-images-idx3-ubyte.gz: 0.28604, 0.35302), for normalisation.
inline constexpr float fashion_mnist_mean = 0.2860f;
inline constexpr float fashion_mnist_std = 0.3530f;

}  // namespace data
