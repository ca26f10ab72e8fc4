// nn/tensor.hpp — the float32 NCHW tensor every layer reads and writes.
//
// A shape and a contiguous vector, nothing more: layers own their outputs and reuse the storage
// from step to step, so resize() only allocates when a batch grows. A matrix of n rows
// ("features") is the shape {n, features, 1, 1}; a linear layer reads any shape as
// {n, c*h*w}, which is how flattening happens.
//
// Every buffer of the layers is a `buffer<T>`: a std::vector whose allocator can charge a
// memory_ledger (minifloat/storage/memory_ledger.hpp), so a trainer measures what the model
// really allocates; untracked (the default) it is a plain vector.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <minifloat/storage/memory_ledger.hpp>

namespace nn {

template <class T>
using buffer = std::vector<T, minifloat::storage::tracking_allocator<T>>;
using float_buffer = buffer<float>;

struct shape4 {
  std::size_t n = 0, c = 0, h = 1, w = 1;

  [[nodiscard]] constexpr std::size_t numel() const { return n * c * h * w; }
  /// Elements of one sample (one image, one row).
  [[nodiscard]] constexpr std::size_t sample_numel() const { return c * h * w; }
  [[nodiscard]] constexpr std::size_t plane() const { return h * w; }
  friend constexpr bool operator==(const shape4&, const shape4&) = default;
};

struct tensor {
  shape4 shape;
  float_buffer values;

  tensor() = default;
  explicit tensor(shape4 s, float fill = 0.0f) : shape(s), values(s.numel(), fill) {}

  void resize(shape4 s) {
    shape = s;
    values.resize(s.numel());
  }
  [[nodiscard]] std::span<float> span() { return values; }
  [[nodiscard]] std::span<const float> span() const { return values; }
  [[nodiscard]] float* data() { return values.data(); }
  [[nodiscard]] const float* data() const { return values.data(); }
  [[nodiscard]] std::size_t numel() const { return values.size(); }
  /// Charges the values to (ledger, category) from now on.
  void track_memory(minifloat::storage::memory_ledger& ledger, minifloat::storage::memory_category c) {
    minifloat::storage::track(values, {&ledger, c});
  }
};

}  // namespace nn
