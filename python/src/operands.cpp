// python/src/operands.cpp — GEMM operand transforms and emulated accumulation for minifloat._core:
// a thin layer over minifloat/hadamard.hpp (the blockwise random Hadamard transform),
// minifloat/operand.hpp (reduction-axis blocks, 2-D tiles, 4 over 6) and
// minifloat/emulated_gemm.hpp; see binding.hpp for the conventions. Every rule is the headers'.
// These calls run on the calling thread (no thread split): their results are defined per call.
#include <pybind11/stl.h>

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

accumulation_tuple to_accumulation_tuple(const accumulation& a) {
  return {to_tuple(a.product), static_cast<int>(a.product_rounding), to_tuple(a.accumulator),
          static_cast<int>(a.accumulator_rounding), static_cast<int>(a.on_overflow), a.promote_every, a.random_bits,
          a.seed};
}

}  // namespace

void bind_operands(py::module_& m) {
  m.def("hadamard_signs", [](std::uint64_t seed, std::size_t block_size) { return hadamard_signs(seed, block_size); });

  // (before, length, after) with the transform along `length`: after = 1 is hadamard.hpp's row
  // layout over `before` rows; after > 1 its column layout once per leading index.
  m.def("hadamard_transform", [](std::uintptr_t in, std::uintptr_t out, std::size_t before, std::size_t length,
                                 std::size_t after, std::uintptr_t signs, std::size_t block_size, bool inverse) {
    const std::size_t n = before * length * after;
    const auto sign_span = span_at<const float>(signs, block_size);
    const auto dir = inverse ? hadamard_direction::inverse : hadamard_direction::forward;
    if (after == 1) {
      hadamard_transform(span_at<const float>(in, n), span_at<float>(out, n), sign_span, block_layout{before, length, 1},
                         dir);
      return;
    }
    // every piece has the same geometry, so the first call checks for all before anything is written
    const std::size_t piece = length * after;
    py::gil_scoped_release unlocked;
    for (std::size_t p = 0; p < before; ++p)
      hadamard_transform(span_at<const float>(in + p * piece * sizeof(float), piece),
                         span_at<float>(out + p * piece * sizeof(float), piece), sign_span,
                         block_layout{length, after, 0}, dir);
  });

  m.def("reduction_axis", [](bool right, bool transposed) {
    return reduction_axis(operand_layout{0, 0, right ? gemm_side::right : gemm_side::left, transposed});
  });

  m.def("quantize_tiles", [](std::uintptr_t in, std::uintptr_t out, std::size_t rows, std::size_t cols, bool transposed,
                             std::size_t tile_rows, std::size_t tile_cols, const block_format_tuple& f,
                             const block_options_tuple& o, bool want_stats) {
    const std::size_t n = rows * cols;
    const block_format bf = to_block_format(f);
    const block_options bo = to_block_options(o);
    block_stats st;
    {
      py::gil_scoped_release unlocked;
      quantize_tiles(span_at<const float>(in, n), span_at<float>(out, n), bf, bo, rows, cols, transposed,
                     tile_shape{tile_rows, tile_cols}, want_stats ? &st : nullptr);
    }
    return want_stats ? py::object(stats_tuple(st)) : py::none();
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
