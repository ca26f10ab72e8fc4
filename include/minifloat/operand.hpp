// minifloat/operand.hpp — block quantization of GEMM operands as the hardware blocks them: 1-D
// blocks along the GEMM's reduction axis for operands stored as they are or transposed, 2-D
// tiles whose scale a weight shares with its transpose, and NVFP4's "4 over 6" per-block choice.
//
// Implements the operand rules of NVIDIA's NVFP4 recipe ("Pretraining Large Language Models with
// NVFP4", NVIDIA, arXiv:2509.25149: 1x16 blocks along the reduction dimension, 16x16 tiles for
// weights so that W and W^T quantize to the same values), of OCP Microscaling Formats (MX) v1.0
// (blocks of 32 along the reduction dimension) and "Four Over Six: More Accurate NVFP4
// Quantization with Adaptive Block Scaling" (Cook et al., arXiv:2512.02010). docs/recipes.md
// states every rule. Scales and elements all come from block.hpp's kernels and the one rounding
// core; this header only decides where blocks lie and which element index a value draws with.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "block.hpp"
#include "round.hpp"

namespace minifloat {

/// Which operand of C = A · B: left = A (M × K), right = B (K × N). K is the reduction axis.
enum class gemm_side : std::uint8_t { left, right };

/// A GEMM operand as stored: a row-major rows × cols matrix that is the operand itself or, with
/// `transposed`, its transpose (nn.Linear's weight W (N × K) in Y = X W^T is the right operand
/// stored transposed).
struct operand_layout {
  std::size_t rows = 0, cols = 0;
  gemm_side side = gemm_side::left;
  bool transposed = false;
  friend constexpr bool operator==(const operand_layout&, const operand_layout&) = default;
};

/// The axis of the stored matrix along which the reduction runs: 1 (along its rows) for A and
/// for B^T, 0 (down its columns) for A^T and B.
constexpr int reduction_axis(const operand_layout& l) {
  return (l.side == gemm_side::left) != l.transposed ? 1 : 0;
}

/// The block_layout of an operand whose blocks run along its reduction axis.
constexpr block_layout reduction_blocks(const operand_layout& l) { return block_layout{l.rows, l.cols, reduction_axis(l)}; }

/// out = `in` block-quantized with 1-D blocks along the reduction axis (block.hpp's
/// quantize_blocks; stochastic draws keyed by the row-major position in the stored matrix plus
/// o.index). In place allowed. Throws std::invalid_argument as quantize_blocks does.
inline void quantize_operand(std::span<const float> in, std::span<float> out, const block_format& f,
                             const block_options& o, const operand_layout& l) {
  quantize_blocks(in, out, f, o, reduction_blocks(l));
}
inline void quantize_operand(std::span<const float> in, std::span<float> out, const block_format& f,
                             const block_options& o, const operand_layout& l, block_stats& st) {
  quantize_blocks(in, out, f, o, reduction_blocks(l), st);
}

/// A 2-D tile in the canonical (untransposed) matrix: tile_rows × tile_cols values share one scale.
struct tile_shape {
  std::size_t rows = 16, cols = 16;
  friend constexpr bool operator==(const tile_shape&, const tile_shape&) = default;
};

namespace detail {
/// Position of canonical element (i, j) in the tile-major order: tiles row by row over the tile
/// grid, each tile's tile_rows × tile_cols slots row by row (a partial tile at the matrix's edge
/// keeps its full slots; the missing ones are zeros that change neither amax nor any value).
struct tile_order {
  std::size_t rows, cols;  // canonical matrix
  tile_shape t;
  std::size_t tiles_across() const { return (cols + t.cols - 1) / t.cols; }
  std::size_t slots() const { return ((rows + t.rows - 1) / t.rows) * tiles_across() * t.rows * t.cols; }
  std::size_t position(std::size_t i, std::size_t j) const {
    return ((i / t.rows) * tiles_across() + j / t.cols) * (t.rows * t.cols) + (i % t.rows) * t.cols + j % t.cols;
  }
};
}  // namespace detail

/// out = `in` block-quantized in 2-D tiles: every tile of t.rows × t.cols values of the canonical
/// matrix W shares one scale (block.hpp's rule for a block of those values). The stored matrix
/// is rows × cols; it is W when !transposed and W^T when transposed (W is then cols × rows, and
/// a stored tile is t.cols × t.rows). The canonical element W(i, j) draws (stochastic rounding)
/// with index o.index + its tile-major position (detail::tile_order), so W and W^T give the
/// same values in every mode. Tiles at the right and bottom edges are smaller. Throws
/// std::invalid_argument, before writing, for a bad format, a tile size outside 1..1024 values,
/// a size mismatch or spans that overlap without being the same.
inline void quantize_tiles(std::span<const float> in, std::span<float> out, const block_format& f,
                           const block_options& o, std::size_t rows, std::size_t cols, bool transposed,
                           tile_shape t = {}, block_stats* st = nullptr) {
  constexpr const char* who = "minifloat::quantize_tiles";
  detail::check_in_out(in, out, who);
  f.validate();
  if (t.rows < 1 || t.cols < 1 || t.rows > 1024 || t.cols > 1024 / t.rows)
    throw std::invalid_argument(std::string(who) + ": tile " + std::to_string(t.rows) + " x " + std::to_string(t.cols) +
                                " is not 1..1024 values");
  if (cols == 0 && !in.empty()) throw std::invalid_argument(std::string(who) + ": cols = 0 for " + std::to_string(in.size()) + " values");
  if (cols != 0) (void)detail::resolved_layout(in.size(), block_layout{rows, cols, 1}, who);
  if (in.empty()) return;
  block_format tile_format = f;
  tile_format.block_size = static_cast<int>(t.rows * t.cols);
  const detail::tile_order order{transposed ? cols : rows, transposed ? rows : cols, t};
  std::vector<float> slots(order.slots(), 0.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      slots[transposed ? order.position(c, r) : order.position(r, c)] = in[r * cols + c];
  if (st != nullptr) {
    block_stats local;
    quantize_blocks(slots, slots, tile_format, o, {}, local);
    local.elements.values -= slots.size() - in.size();  // the padding zeros are not values
    *st += local;
  } else {
    quantize_blocks(slots, slots, tile_format, o, {});
  }
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      out[r * cols + c] = slots[transposed ? order.position(c, r) : order.position(r, c)];
}

/// What quantize_four_over_six chose.
struct four_over_six_stats {
  std::uint64_t blocks = 0;            ///< blocks seen
  std::uint64_t scaled_to_four = 0;    ///< blocks whose largest magnitude went to 4
  friend constexpr bool operator==(const four_over_six_stats&, const four_over_six_stats&) = default;
};

/// NVFP4 with the "4 over 6" choice (arXiv:2512.02010): every block is quantized twice, with the
/// block's E4M3 scale taken so that its largest magnitude maps to 6 (the standard rule,
/// D6 = e4m3(amax / 6 / S_t), block.hpp's kernel) and to 4 (D4 = e4m3(amax / 4 / S_t), nearest-even,
/// saturating, computed in that order in fp32; elements e2m1(V_i / (D4 · S_t)) by the core with
/// the same options and element indices); the block keeps the candidate whose sum of squared
/// errors against the input (in double) is smaller, the 6 candidate on a tie. A block with a NaN
/// or Inf keeps the standard (NaN) result. S_t is o.tensor_scale, or the tensor's
/// nvfp4_tensor_scale. Needs a block format with block_scaling::e4m3_times_tensor. Throws
/// std::invalid_argument, before writing, as quantize_blocks does, or for an MX format.
inline four_over_six_stats quantize_four_over_six(std::span<const float> in, std::span<float> out, const block_format& f,
                                                  const block_options& o, const block_layout& layout = {}) {
  constexpr const char* who = "minifloat::quantize_four_over_six";
  detail::check_in_out(in, out, who);
  detail::check_layout(in.size(), f, layout, who);
  if (f.scaling != block_scaling::e4m3_times_tensor)
    throw std::invalid_argument(std::string(who) + ": format " + to_string(f) +
                                " has E8M0 scales; 4 over 6 chooses between E4M3 scales (NVFP4)");
  block_options opts = o;
  opts.tensor_scale = o.tensor_scale != 0 ? o.tensor_scale : nvfp4_tensor_scale(in);
  const rounder<float> element(f.element, {o.mode, o.on_overflow, o.random_bits, o.seed, o.index});
  std::vector<float> six(in.size());
  quantize_blocks(in, six, f, opts, layout);  // validates the tensor scale too
  four_over_six_stats stats;
  if (in.empty()) return stats;
  const rounder<float> to_e4m3(e4m3, {rounding::nearest_even, overflow::saturate});
  const float t = opts.tensor_scale;
  const block_layout l = detail::resolved_layout(in.size(), layout, who);
  const std::size_t B = static_cast<std::size_t>(f.block_size);
  const bool along_rows = l.axis == 1;
  const std::size_t lines = along_rows ? l.rows : l.cols, length = along_rows ? l.cols : l.rows;
  const std::size_t stride = along_rows ? 1 : l.cols;
  std::vector<float> four(B);
  std::vector<float> chosen(in.size());
  for (std::size_t line = 0; line < lines; ++line)
    for (std::size_t begin = 0; begin < length; begin += B) {
      const std::size_t m = std::min(B, length - begin);
      const std::size_t first = along_rows ? line * l.cols + begin : begin * l.cols + line;
      ++stats.blocks;
      float amax = 0;
      bool finite = true;
      for (std::size_t j = 0; j < m; ++j) {
        const float v = in[first + j * stride];
        finite = finite && std::isfinite(v);
        amax = std::max(amax, std::fabs(v));
      }
      bool take_four = false;
      if (finite) {
        const float d = to_e4m3(amax / 4.0f / t) * t;
        double error6 = 0, error4 = 0;
        for (std::size_t j = 0; j < m; ++j) {
          const std::size_t at = first + j * stride;
          const float v = in[at];
          float y = d > 0 ? v / d : v * 0.0f;  // a scale that rounded to 0: zeros of the values' signs
          // a quotient below float's range: the smallest float of v's sign, as block.hpp's kernel
          if (d > 0 && y == 0 && v != 0) y = std::copysign(std::numeric_limits<float>::denorm_min(), v);
          four[j] = d > 0 ? element(y, o.index + at) * d : y;
          error4 += (static_cast<double>(four[j]) - v) * (static_cast<double>(four[j]) - v);
          error6 += (static_cast<double>(six[at]) - v) * (static_cast<double>(six[at]) - v);
        }
        take_four = error4 < error6;
      }
      stats.scaled_to_four += take_four;
      for (std::size_t j = 0; j < m; ++j) {
        const std::size_t at = first + j * stride;
        chosen[at] = take_four ? four[j] : six[at];
      }
    }
  std::copy(chosen.begin(), chosen.end(), out.begin());
  return stats;
}

}  // namespace minifloat
