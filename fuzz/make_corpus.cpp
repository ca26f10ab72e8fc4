// fuzz/make_corpus.cpp — writes the seed corpora of the fuzz targets: a handful of small valid
// encodings per decoder, in the input format each target reads. The checked-in files under
// fuzz/corpus/ were made by it:  fuzz_make_corpus <source dir>/fuzz/corpus
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <minifloat/block.hpp>
#include <minifloat/storage/bitpack.hpp>
#include <minifloat/storage/gecko.hpp>
#include <minifloat/storage/gecko_tensor.hpp>
#include <minifloat/storage/packed_block.hpp>

namespace {

namespace st = minifloat::storage;
namespace fs = std::filesystem;

/// Appends v as `n` little-endian bytes.
void put(std::vector<std::uint8_t>& bytes, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) bytes.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

void write(const fs::path& dir, const std::string& name, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                    static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::uint8_t> with_count(std::size_t count, std::vector<std::uint8_t> body) {
  body.insert(body.begin(), {static_cast<std::uint8_t>(count), static_cast<std::uint8_t>(count >> 8)});
  return body;
}

std::vector<float> sample(int kind, std::size_t n) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(kind) * 1000 + n);
  std::normal_distribution<float> normal(0.0F, 1.0F);
  std::vector<float> v(n);
  for (auto& x : v) {
    switch (kind) {
      case 0: x = 0.05F * normal(rng); break;                                     // weights
      case 1: x = (rng() & 1) != 0 ? std::fabs(normal(rng)) : 0.0F; break;        // ReLU outputs
      case 2: x = 1e-4F * normal(rng); break;                                     // gradients
      default: x = std::bit_cast<float>(static_cast<std::uint32_t>(rng())); break;  // any bits
    }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  const char* kinds[] = {"weight", "relu", "grad", "bits"};
  for (int kind = 0; kind < 4; ++kind) {
    for (std::size_t n : {1U, 8U, 9U, 40U}) {
      const auto v = sample(kind, n);
      const std::string name = std::string(kinds[kind]) + "_" + std::to_string(n);
      write(root / "gecko_faithful", name, with_count(n, st::gecko_encode_exponents(v)));
      write(root / "gecko_improved", name,
            with_count(n, st::gecko_encode_exponents(v, st::gecko_variant::improved)));
      for (int bits : {3, 23}) {
        const auto variant = n % 2 == 0 ? st::gecko_variant::improved : st::gecko_variant::faithful;
        const int mantissa = kind == 3 && bits == 3 ? 23 : bits;  // random bits hold NaNs: keep n >= 1
        // With the CRC-32 trailer (the default) and without it (flags 0: buffers written before it existed).
        write(root / "gecko_tensor", name + "_n" + std::to_string(mantissa),
              st::gecko_encode_tensor(v, {variant, mantissa}));
        write(root / "gecko_tensor", name + "_n" + std::to_string(mantissa) + "_nocrc",
              st::gecko_encode_tensor(v, {variant, mantissa, {minifloat::rounding::toward_zero}, false}));
      }
    }
  }
  write(root / "gecko_faithful", "empty", with_count(0, {}));
  write(root / "gecko_improved", "empty", with_count(0, st::gecko_encode_exponents({}, st::gecko_variant::improved)));
  write(root / "gecko_tensor", "empty", st::gecko_encode_tensor(std::span<const float>{}, st::gecko_tensor_options{}));

  std::mt19937 rng(7);
  for (int bits : {1, 5, 13, 32}) {
    for (std::size_t count : {0U, 3U, 33U}) {
      std::vector<std::uint32_t> values(count);
      for (auto& x : values) x = static_cast<std::uint32_t>(rng());
      const auto a = st::packed_array::from_values(values, bits);
      std::vector<std::uint8_t> bytes{static_cast<std::uint8_t>(bits), static_cast<std::uint8_t>(count),
                                      static_cast<std::uint8_t>(count >> 8)};
      for (std::uint32_t w : a.words())
        for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::uint8_t>(w >> (8 * i)));
      write(root / "bitpack", "k" + std::to_string(bits) + "_n" + std::to_string(count), bytes);
    }
  }

  // packed_block: every named block format, one row and two 2-D layouts (fuzz_packed_block.cpp's
  // input: format, block size, axis, rows, cols, size, tensor scale, word count, words, scales)
  for (std::size_t which = 0; which < std::size(minifloat::named_block_formats); ++which) {
    const auto& [name, f] = minifloat::named_block_formats[which];
    for (const auto& [rows, cols, axis] : {std::tuple<std::size_t, std::size_t, int>{1, 0, 1}, {4, 10, 1}, {10, 4, 0}}) {
      const std::size_t n = rows * (cols == 0 ? 37 : cols);
      const auto v = sample(static_cast<int>(which % 3), n);
      const minifloat::block_layout layout{rows, cols, axis};
      const st::packed_block_tensor t(v, f, {}, layout);
      std::vector<std::uint8_t> bytes;
      put(bytes, which, 1);
      put(bytes, 0, 1);
      put(bytes, static_cast<std::uint64_t>(axis), 1);
      put(bytes, rows, 8);
      put(bytes, cols, 8);
      put(bytes, n, 2);
      put(bytes, std::bit_cast<std::uint32_t>(t.tensor_scale()), 4);
      put(bytes, t.elements().words().size(), 2);
      for (const std::uint32_t w : t.elements().words()) put(bytes, w, 4);
      for (const std::uint8_t c : t.scales()) put(bytes, c, 1);
      write(root / "packed_block", std::string(name) + "_" + std::to_string(rows) + "x" + std::to_string(cols) + "_axis" +
                                        std::to_string(axis),
            bytes);
    }
  }
  return 0;
}
