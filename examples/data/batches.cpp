#include "data/batches.hpp"

#include <algorithm>
#include <array>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace data {
namespace {

constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, bound) without modulo bias: reject the low 2^64 mod bound words.
std::uint64_t below(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const std::uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

std::vector<std::uint32_t> epoch_order(std::size_t count, std::uint64_t seed, std::size_t epoch) {
  if (count > std::size_t{0xffffffffU}) throw std::invalid_argument("data::epoch_order: more than 2^32 items");
  std::vector<std::uint32_t> order(count);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  std::mt19937_64 rng(splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(epoch))));
  for (std::size_t i = count; i > 1; --i) std::swap(order[i - 1], order[below(rng, i)]);
  return order;
}

batch_loader::batch_loader(const image_dataset& data, const loader_options& options) : data_(&data), opt_(options) {
  if (opt_.batch_size == 0) throw std::invalid_argument("data::batch_loader: batch size 0");
  if (!(opt_.norm.std > 0.0f)) throw std::invalid_argument("data::batch_loader: normalisation std must be positive");
  start_epoch(0);
}

std::size_t batch_loader::batches() const {
  const std::size_t n = data_->size(), b = opt_.batch_size;
  return opt_.drop_last ? n / b : (n + b - 1) / b;
}

void batch_loader::start_epoch(std::size_t epoch) {
  if (opt_.shuffle) {
    order_ = epoch_order(data_->size(), opt_.seed, epoch);
  } else {
    order_.resize(data_->size());
    std::iota(order_.begin(), order_.end(), std::uint32_t{0});
  }
}

std::span<const std::uint32_t> batch_loader::indices(std::size_t b) const {
  if (b >= batches()) throw std::out_of_range("data::batch_loader: batch " + std::to_string(b) + " of " + std::to_string(batches()));
  const std::size_t first = b * opt_.batch_size;
  return std::span<const std::uint32_t>(order_).subspan(first, std::min(opt_.batch_size, order_.size() - first));
}

void batch_loader::gather(std::size_t b, nn::tensor& images, std::vector<std::int32_t>& labels) const {
  const auto idx = indices(b);
  const std::size_t per = data_->image_numel();
  images.resize({idx.size(), 1, data_->rows, data_->cols});
  labels.resize(idx.size());
  // One table for the 256 byte values: the same float for a pixel in every batch.
  std::array<float, 256> table{};
  for (std::size_t v = 0; v < 256; ++v)
    table[v] = (static_cast<float>(v) / 255.0f - opt_.norm.mean) / opt_.norm.std;
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const std::uint8_t* src = data_->pixels.data() + std::size_t{idx[i]} * per;
    float* dst = images.data() + i * per;
    for (std::size_t p = 0; p < per; ++p) dst[p] = table[src[p]];
    labels[i] = data_->labels[idx[i]];
  }
}

}  // namespace data
