// minifloat/hadamard.hpp — the blockwise random Hadamard transform applied to GEMM operands along
// their reduction axis before block quantization, as in NVIDIA's NVFP4 training recipe
// ("Pretraining Large Language Models with NVFP4", NVIDIA, arXiv:2509.25149: a 16-wide random
// Hadamard transform on the weight-gradient GEMM's inputs) and MXFP4 training ("Training LLMs with
// MXFP4", Tseng et al., AISTATS 2025, arXiv:2502.20586; Quartet, arXiv:2505.14669).
//
// Each block of b consecutive values v along the axis (b a power of two) becomes
//     M v,   M = H_b D / sqrt(b),
// H_b the Sylvester Hadamard matrix (H_b[i][j] = (-1)^popcount(i & j)) and D = diag(s) the
// random sign vector s in {+1, -1}^b. M is orthogonal (M^T M = H D D H / b = I), so applying
// the same transform to both operands along the reduction axis leaves the product unchanged in
// exact arithmetic: <M a, M c> = a^T M^T M c = <a, c>; the inverse is M^T v = D H_b v / sqrt(b).
// The sign vector is data (drawn once from a seed by hadamard_signs and then kept with the
// model), not hidden state. docs/recipes.md states the fp32 rounding of the float transform.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "block.hpp"
#include "config.hpp"
#include "random.hpp"

namespace minifloat {

/// Which way the transform goes: forward M = H D / sqrt(b), or its inverse M^T = D H / sqrt(b).
enum class hadamard_direction : std::uint8_t { forward, inverse };

/// The unnormalized fast Walsh-Hadamard transform of n values in place (n a power of two): v
/// becomes H_n v in Sylvester order, by log2(n) stages of butterflies (a, b) -> (a + b, a - b),
/// stage h pairing positions i and i + h inside runs of 2h (h = 1, 2, 4, ...). Generic in T so the
/// tests can run the very same butterflies in exact integer arithmetic.
template <class T>
MINIFLOAT_HD constexpr void walsh_hadamard(T* v, std::size_t n) {
  for (std::size_t h = 1; h < n; h *= 2)
    for (std::size_t i = 0; i < n; i += 2 * h)
      for (std::size_t j = i; j < i + h; ++j) {
        const T a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

/// The normalization 1 / sqrt(b) as a float: exact when b is a power of four (16: 0.25),
/// otherwise 1 / sqrt(b) rounded to nearest float once (computed in double).
MINIFLOAT_HD inline float hadamard_scale(std::size_t block_size) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(block_size)));
}

/// One block of b values in place: forward = signs, butterflies, scale; inverse = butterflies,
/// scale, signs. Every float operation in order, so results do not depend on the caller.
MINIFLOAT_HD inline void hadamard_block(float* v, const float* signs, std::size_t b, hadamard_direction dir) {
  const float scale = hadamard_scale(b);
  if (dir == hadamard_direction::forward)
    for (std::size_t i = 0; i < b; ++i) v[i] *= signs[i];
  walsh_hadamard(v, b);
  for (std::size_t i = 0; i < b; ++i) v[i] *= scale;
  if (dir == hadamard_direction::inverse)
    for (std::size_t i = 0; i < b; ++i) v[i] *= signs[i];
}

/// The random sign vector of a b-wide transform drawn from `seed`: s_i = -1 when the top bit of
/// counter_rng{seed}.bits32(i) is set, else +1. Fold the layer and role into the seed
/// (fold_seed) for independent vectors; keep the result with the model and restore it from there.
inline std::vector<float> hadamard_signs(std::uint64_t seed, std::size_t block_size) {
  if (block_size < 1 || block_size > 4096 || !std::has_single_bit(block_size))
    throw std::invalid_argument("minifloat::hadamard_signs: block_size = " + std::to_string(block_size) +
                                " is not a power of two in 1..4096");
  const counter_rng rng{seed};
  std::vector<float> s(block_size);
  for (std::size_t i = 0; i < block_size; ++i) s[i] = (rng.bits32(i) >> 31) != 0 ? -1.0f : 1.0f;
  return s;
}

namespace detail {
inline void check_hadamard(std::size_t n, std::span<const float> signs, const block_layout& layout,
                           std::size_t out_size, const char* who) {
  const std::size_t b = signs.size();
  if (b < 1 || b > 4096 || !std::has_single_bit(b))
    throw std::invalid_argument(std::string(who) + ": signs has " + std::to_string(b) +
                                " entries; the block size must be a power of two in 1..4096");
  for (std::size_t i = 0; i < b; ++i)
    if (signs[i] != 1.0f && signs[i] != -1.0f)
      throw std::invalid_argument(std::string(who) + ": signs[" + std::to_string(i) + "] = " +
                                  std::to_string(signs[i]) + " is not +1 or -1");
  if (out_size != n)
    throw std::invalid_argument(std::string(who) + ": in has " + std::to_string(n) + " values, out " +
                                std::to_string(out_size));
  const block_layout l = resolved_layout(n, layout, who);
  const std::size_t along = l.axis == 1 ? l.cols : l.rows;
  if (n != 0 && along % b != 0)
    throw std::invalid_argument(std::string(who) + ": the axis has " + std::to_string(along) +
                                " values, not a multiple of the block size " + std::to_string(b) +
                                " (a shorter last block would not be orthogonal to the same H)");
}
}  // namespace detail

/// out = the blockwise transform of `in` along layout.axis (block.hpp's block_layout: axis 1 =
/// blocks of consecutive values along each row, axis 0 = down each column), block size =
/// signs.size(). In place allowed (in and out the same span). Throws std::invalid_argument,
/// before writing, for a block size that is not a power of two, a sign that is not ±1, sizes
/// that differ, a layout that does not hold the values, or an axis length that is not a
/// multiple of the block size.
inline void hadamard_transform(std::span<const float> in, std::span<float> out, std::span<const float> signs,
                               const block_layout& layout = {},
                               hadamard_direction dir = hadamard_direction::forward) {
  constexpr const char* who = "minifloat::hadamard_transform";
  detail::check_hadamard(in.size(), signs, layout, out.size(), who);
  detail::check_in_out(in, out, who);
  if (in.empty()) return;
  const block_layout l = detail::resolved_layout(in.size(), layout, who);
  const std::size_t b = signs.size();
  const float scale = hadamard_scale(b);
  const bool forward = dir == hadamard_direction::forward;
  // Blocks are transformed side by side, `width` at a time, in a band whose row i holds value i
  // of each block (so the butterflies run along contiguous rows and vectorise); every value
  // sees the operations of hadamard_block in the same order: sign, butterflies, scale, sign.
  const auto transform_band = [&](float* band, std::size_t width) {
    for (std::size_t h = 1; h < b; h *= 2)
      for (std::size_t i = 0; i < b; i += 2 * h)
        for (std::size_t j = i; j < i + h; ++j) {
          float* x = band + j * width;
          float* y = band + (j + h) * width;
          for (std::size_t c = 0; c < width; ++c) {
            const float p = x[c], q = y[c];
            x[c] = p + q;
            y[c] = p - q;
          }
        }
  };
  if (l.axis == 1) {  // blocks of b consecutive values: band columns are blocks q0 .. q0 + width - 1
    constexpr std::size_t blocks_per_band = 64;
    std::vector<float> band(b * blocks_per_band);
    const std::size_t blocks = in.size() / b;
    for (std::size_t q0 = 0; q0 < blocks; q0 += blocks_per_band) {
      const std::size_t width = std::min(blocks_per_band, blocks - q0);
      const float* src = in.data() + q0 * b;
      for (std::size_t q = 0; q < width; ++q)
        for (std::size_t i = 0; i < b; ++i) band[i * width + q] = forward ? src[q * b + i] * signs[i] : src[q * b + i];
      transform_band(band.data(), width);
      float* dst = out.data() + q0 * b;
      for (std::size_t q = 0; q < width; ++q)
        for (std::size_t i = 0; i < b; ++i) dst[q * b + i] = band[i * width + q] * scale * (forward ? 1.0f : signs[i]);
    }
    return;
  }
  // axis 0: b rows at a time, every column of them a block
  const std::size_t cols = l.cols, rows = l.rows;
  std::vector<float> band(b * cols);
  for (std::size_t r0 = 0; r0 < rows; r0 += b) {
    const float* src = in.data() + r0 * cols;
    for (std::size_t i = 0; i < b; ++i)
      for (std::size_t c = 0; c < cols; ++c) band[i * cols + c] = forward ? src[i * cols + c] * signs[i] : src[i * cols + c];
    transform_band(band.data(), cols);
    float* dst = out.data() + r0 * cols;
    for (std::size_t i = 0; i < b; ++i) {
      const float sign = forward ? 1.0f : signs[i];
      for (std::size_t c = 0; c < cols; ++c) dst[i * cols + c] = band[i * cols + c] * scale * sign;
    }
  }
}

/// In place.
inline void hadamard_transform(std::span<float> values, std::span<const float> signs, const block_layout& layout = {},
                               hadamard_direction dir = hadamard_direction::forward) {
  hadamard_transform(values, values, signs, layout, dir);
}

}  // namespace minifloat
