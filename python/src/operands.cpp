// python/src/operands.cpp — GEMM operand transforms and emulated accumulation for minifloat._core:
// a thin layer over minifloat/hadamard.hpp (the blockwise random Hadamard transform),
// minifloat/operand.hpp (reduction-axis blocks, 2-D tiles, 4 over 6) and
// minifloat/emulated_gemm.hpp; see binding.hpp for the conventions. Every rule is the headers'.
// hadamard_transform and quantize_tiles split their work over binding.hpp's threads in units the
// header treats independently (whole Hadamard blocks; bands of whole tile rows, each drawing from
// the index of its first tile), so their bits do not depend on the thread count; the other calls
// run on the calling thread.
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <minifloat/emulated_gemm.hpp>
#include <minifloat/hadamard.hpp>
#include <minifloat/operand.hpp>

#include "binding.hpp"
#include "block_tuples.hpp"

namespace minifloat::python {

namespace {

/// (product format, product mode, accumulator format, accumulator mode, overflow, promote_every,
/// random_bits, seed) as python/minifloat/operands.py passes them.
using accumulation_tuple = std::tuple<format_tuple, int, format_tuple, int, int, std::size_t, int, std::uint64_t>;

accumulation to_accumulation(const accumulation_tuple& t) {
  const auto& [product, product_mode, acc, acc_mode, on_overflow, promote, random_bits, seed] = t;
  return accumulation{to_format(product), enumerator<rounding>(product_mode, rounding_names, "product_rounding"),
                      to_format(acc), enumerator<rounding>(acc_mode, rounding_names, "accumulator_rounding"),
                      enumerator<overflow>(on_overflow, overflow_names, "overflow"), promote, random_bits, seed};
}

/// `units` units of `unit_values` values each, cut into pieces of whole units of about
/// elements_per_piece values: for_ranges hands out one elements_per_piece range per piece.
struct unit_pieces {
  std::size_t units, per_piece, pieces;
  unit_pieces(std::size_t unit_count, std::size_t unit_values)
      : units(unit_count), per_piece(std::max<std::size_t>(1, elements_per_piece / std::max<std::size_t>(1, unit_values))),
        pieces((units + per_piece - 1) / per_piece) {}

  /// The most workers run() uses.
  std::size_t workers(int threads) const { return worker_count(pieces * elements_per_piece, threads); }

  /// Calls work(worker, first_unit, unit_count), worker < workers(threads), for pieces covering all units.
  template <class Work>
  void run(int threads, Work work) const {
    if (units == 0) return;
    for_ranges(pieces * elements_per_piece, threads, [&](std::size_t worker, std::size_t start, std::size_t count) {
      const std::size_t first = start / elements_per_piece * per_piece;
      const std::size_t end = std::min(units, (start + count) / elements_per_piece * per_piece);
      work(worker, first, end - first);
    });
  }
};

accumulation_tuple to_accumulation_tuple(const accumulation& a) {
  return {to_tuple(a.product), static_cast<int>(a.product_rounding), to_tuple(a.accumulator),
          static_cast<int>(a.accumulator_rounding), static_cast<int>(a.on_overflow), a.promote_every, a.random_bits,
          a.seed};
}

}  // namespace

void bind_operands(py::module_& m) {
  m.def("hadamard_signs", [](std::uint64_t seed, std::size_t block_size) { return hadamard_signs(seed, block_size); });

  // (before, length, after) with the transform along `length`: after = 1 is hadamard.hpp's row
  // layout over `before` rows; after > 1 its column layout once per leading index. Either way the
  // values are a sequence of units of block_size * after values (a block; or block_size rows of
  // one leading index, every column of them a block) that the header transforms independently.
  m.def("hadamard_transform", [](std::uintptr_t in, std::uintptr_t out, std::size_t before, std::size_t length,
                                 std::size_t after, std::uintptr_t signs, std::size_t block_size, bool inverse,
                                 int threads) {
    constexpr const char* who = "minifloat::hadamard_transform";
    const std::size_t n = before * length * after;
    const auto sign_span = span_at<const float>(signs, block_size);
    const auto source = span_at<const float>(in, n);
    const auto target = span_at<float>(out, n);
    const auto dir = inverse ? hadamard_direction::inverse : hadamard_direction::forward;
    // the whole geometry is checked before any piece writes (a piece alone cannot see a row
    // length that is not a multiple of the block size)
    const block_layout whole = after == 1 ? block_layout{before, length, 1} : block_layout{before * length, after, 0};
    detail::check_hadamard(n, sign_span, whole, n, who);
    detail::check_in_out(source, target, who);
    if (n == 0) return;
    const std::size_t unit = block_size * after;
    py::gil_scoped_release unlocked;
    unit_pieces(n / unit, unit).run(threads, [&](std::size_t, std::size_t first, std::size_t count) {
      const std::size_t start = first * unit, values = count * unit;
      const block_layout layout = after == 1 ? block_layout{1, values, 1} : block_layout{count * block_size, after, 0};
      hadamard_transform(source.subspan(start, values), target.subspan(start, values), sign_span, layout, dir);
    });
  });

  m.def("reduction_axis", [](bool right, bool transposed) {
    return reduction_axis(operand_layout{0, 0, right ? gemm_side::right : gemm_side::left, transposed});
  });

  // Split into bands of whole tile rows of the canonical matrix W: a band's tiles are consecutive
  // in the tile-major order, so the band quantized alone, with index o.index + the tile-major
  // position of its first value, draws exactly what it draws in the whole matrix. When the
  // stored matrix is W^T a band is a band of its columns, copied out and back.
  m.def("quantize_tiles", [](std::uintptr_t in, std::uintptr_t out, std::size_t rows, std::size_t cols, bool transposed,
                             std::size_t tile_rows, std::size_t tile_cols, const block_format_tuple& f,
                             const block_options_tuple& o, bool want_stats, int threads) {
    const std::size_t n = rows * cols;
    const block_format bf = to_block_format(f);
    block_options bo = to_block_options(o);
    const auto source = span_at<const float>(in, n);
    const auto target = span_at<float>(out, n);
    const tile_shape tile{tile_rows, tile_cols};
    // the header's checks (format, tile, sizes), which every band repeats, before any band writes
    quantize_tiles(source.first(0), target.first(0), bf, bo, 0, cols, transposed, tile);
    (void)rounder<float>(bf.element, {bo.mode, bo.on_overflow, bo.random_bits, bo.seed, bo.index});
    if (n == 0) return want_stats ? py::object(stats_tuple(block_stats{})) : py::object(py::none());
    // NVFP4's per-tensor scale is the whole matrix's, not a band's
    if (bf.scaling == block_scaling::e4m3_times_tensor && bo.tensor_scale == 0) bo.tensor_scale = nvfp4_tensor_scale(source);
    const std::size_t canonical_rows = transposed ? cols : rows, canonical_cols = transposed ? rows : cols;
    const std::size_t bands = (canonical_rows + tile_rows - 1) / tile_rows;
    const std::size_t band_slots = detail::tile_order{tile_rows, canonical_cols, tile}.slots();
    const unit_pieces split(bands, tile_rows * canonical_cols);
    std::vector<block_stats> stats(split.workers(threads));
    {
      py::gil_scoped_release unlocked;
      split.run(threads, [&](std::size_t worker, std::size_t first, std::size_t count) {
        const std::size_t row0 = first * tile_rows;                                    // first canonical row
        const std::size_t band_rows = std::min(count * tile_rows, canonical_rows - row0);
        block_options piece = bo;
        piece.index = bo.index + first * band_slots;
        block_stats* st = want_stats ? &stats[worker] : nullptr;
        if (!transposed) {
          const std::size_t start = row0 * cols, values = band_rows * cols;
          quantize_tiles(source.subspan(start, values), target.subspan(start, values), bf, piece, band_rows, cols, false,
                         tile, st);
          return;
        }
        std::vector<float> band(rows * band_rows);  // stored columns row0 .. row0 + band_rows
        for (std::size_t r = 0; r < rows; ++r)
          std::copy_n(source.data() + r * cols + row0, band_rows, band.data() + r * band_rows);
        quantize_tiles(band, band, bf, piece, rows, band_rows, true, tile, st);
        for (std::size_t r = 0; r < rows; ++r)
          std::copy_n(band.data() + r * band_rows, band_rows, target.data() + r * cols + row0);
      });
    }
    if (!want_stats) return py::object(py::none());
    block_stats total;
    for (const auto& s : stats) total += s;
    return py::object(stats_tuple(total));
  });

  m.def("quantize_four_over_six", [](std::uintptr_t in, std::uintptr_t out, std::size_t rows, std::size_t cols, int axis,
                                     const block_format_tuple& f, const block_options_tuple& o) {
    const std::size_t n = rows * cols;
    const block_format bf = to_block_format(f);
    const block_options bo = to_block_options(o);
    four_over_six_stats st;
    {
      py::gil_scoped_release unlocked;
      st = quantize_four_over_six(span_at<const float>(in, n), span_at<float>(out, n), bf, bo,
                                  block_layout{rows, cols, axis});
    }
    return py::make_tuple(st.blocks, st.scaled_to_four);
  });

  m.attr("hopper_fp8_model") = to_accumulation_tuple(hopper_fp8_model);
  m.def("emulated_gemm", [](std::uintptr_t a, std::uintptr_t b, std::uintptr_t c, std::size_t rows, std::size_t cols,
                            std::size_t depth, bool a_transposed, bool b_transposed, const accumulation_tuple& t) {
    const accumulation acc = to_accumulation(t);
    py::gil_scoped_release unlocked;
    emulated_gemm(span_at<const float>(a, rows * depth), span_at<const float>(b, depth * cols),
                  span_at<float>(c, rows * cols), gemm_shape{rows, cols, depth, a_transposed, b_transposed}, acc);
  });
}

}  // namespace minifloat::python
