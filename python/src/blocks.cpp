// python/src/blocks.cpp — block-scaled formats (OCP MX, NVFP4) for minifloat._core: a thin layer
// over minifloat/block.hpp (fake quantization, element and scale codes) and
// storage/packed_block.hpp's writer of 4-bit codes; see binding.hpp for the conventions.
//
// A tensor of any rank comes as (before, length, after): the blocks run along the middle
// dimension. after = 1 is block.hpp's row layout (blocks of consecutive values along each of
// `before` rows); after > 1 is its column layout (axis 0) once per leading index. Work is cut into
// units of whole blocks that are contiguous in memory (a row, or a row of blocks of one leading
// index), each run as its own block.hpp call with its first element's flat index as
// options.index: every kernel is keyed by flat index and block, so the bits do not depend on how
// units are grouped into pieces or which thread takes a piece.
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <minifloat/block.hpp>
#include <minifloat/storage/packed_block.hpp>

#include "binding.hpp"
#include "block_tuples.hpp"

namespace minifloat::python {

namespace {

/// A tensor seen as (before, length, after) with blocks along `length`, cut into units: whole
/// blocks contiguous in memory, each one block.hpp call. after = 1: a run of up to
/// `blocks_per_run` blocks of one row (a long row is several units, so a 1-D tensor still
/// spreads over threads); after > 1: one row of blocks of one leading index.
struct block_geometry {
  std::size_t before, length, after, block;

  std::size_t size() const { return before * length * after; }
  std::size_t blocks_along() const { return (length + block - 1) / block; }
  std::size_t block_count() const { return before * blocks_along() * after; }
  std::size_t blocks_per_run() const { return std::max<std::size_t>(1, elements_per_piece / block); }
  std::size_t runs_per_row() const { return std::max<std::size_t>(1, (blocks_along() + blocks_per_run() - 1) / blocks_per_run()); }
  std::size_t units() const {
    if (size() == 0) return 0;
    return after == 1 ? before * runs_per_row() : before * blocks_along();
  }

  struct unit_view {
    std::size_t first;        // flat index of its first value
    std::size_t count;        // values
    std::size_t first_scale;  // index of its first scale code
    block_layout layout;
  };
  unit_view unit(std::size_t u) const {
    if (after == 1) {
      const std::size_t row = u / runs_per_row(), run = u % runs_per_row();
      const std::size_t begin = run * blocks_per_run() * block;
      const std::size_t count = std::min(blocks_per_run() * block, length - begin);
      return {row * length + begin, count, row * blocks_along() + run * blocks_per_run(), block_layout{1, count, 1}};
    }
    const std::size_t p = u / blocks_along(), k = u % blocks_along();
    const std::size_t rows = std::min(block, length - k * block);
    return {(p * length + k * block) * after, rows * after, u * after, block_layout{rows, after, 0}};
  }
};

/// Pieces of whole units, about elements_per_piece values each: (units per piece, pieces).
std::pair<std::size_t, std::size_t> piece_split(const block_geometry& g) {
  const std::size_t units = g.units();
  if (units == 0) return {1, 0};
  const std::size_t unit_values = std::max<std::size_t>(1, g.size() / units);
  const std::size_t per_piece = std::max<std::size_t>(1, elements_per_piece / unit_values);
  return {per_piece, (units + per_piece - 1) / per_piece};
}

/// Calls work(worker, first_unit, unit_count) for pieces of whole units covering all units, on
/// binding.hpp's thread split (for_ranges hands out elements_per_piece-sized ranges: one per
/// piece), with worker < workers_for(g, threads); one piece at a time when !parallel.
template <class Work>
void for_units(const block_geometry& g, int threads, bool parallel, Work work) {
  const auto [per_piece, pieces] = piece_split(g);
  const std::size_t units = g.units();
  // (one worker gets the whole range at once: every piece in it)
  for_ranges(pieces * elements_per_piece, parallel ? threads : 1,
             [&](std::size_t worker, std::size_t start, std::size_t count) {
               const std::size_t first = start / elements_per_piece * per_piece;
               const std::size_t end = std::min(units, (start + count) / elements_per_piece * per_piece);
               work(worker, first, end - first);
             });
}

std::size_t workers_for(const block_geometry& g, int threads) {
  return worker_count(piece_split(g).second * elements_per_piece, threads);
}

/// The workers' statistics summed.
py::tuple summed_stats_tuple(const std::vector<block_stats>& per_worker) {
  block_stats t;
  for (const auto& s : per_worker) t += s;
  return stats_tuple(t);
}

/// Checks the format and options before anything is written, and resolves NVFP4's per-tensor
/// scale over the whole tensor (so pieces agree on it). Returns the options the pieces use.
block_options checked_options(std::span<const float> in, const block_format& f, block_options o, const char* who) {
  f.validate();
  (void)rounder<float>(f.element, {o.mode, o.on_overflow, o.random_bits, o.seed, o.index});
  if (f.scaling == block_scaling::e4m3_times_tensor) {
    if (o.tensor_scale == 0) o.tensor_scale = nvfp4_tensor_scale(in);
    if (!(o.tensor_scale > 0) || !std::isfinite(o.tensor_scale))
      throw std::invalid_argument(std::string(who) + ": tensor_scale = " + std::to_string(o.tensor_scale) +
                                  " is not a positive finite float");
  }
  return o;
}

py::object quantize_blocks_call(std::uintptr_t in, std::uintptr_t out, const block_geometry& g,
                                const block_format& f, const block_options& requested, int threads, bool want_stats) {
  const std::size_t n = g.size();
  const auto source = span_at<const float>(in, n);
  const block_options o = checked_options(source, f, requested, "minifloat.quantize_blocks");
  std::vector<block_stats> stats(workers_for(g, threads));
  {
    py::gil_scoped_release unlocked;
    for_units(g, threads, true, [&](std::size_t worker, std::size_t first, std::size_t count) {
      for (std::size_t u = first; u < first + count; ++u) {
        const auto v = g.unit(u);
        block_options piece = o;
        piece.index = o.index + v.first;
        const auto src = source.subspan(v.first, v.count);
        const auto dst = span_at<float>(out, n).subspan(v.first, v.count);
        if (want_stats) quantize_blocks(src, dst, f, piece, v.layout, stats[worker]);
        else quantize_blocks(src, dst, f, piece, v.layout);
      }
    });
  }
  if (!want_stats) return py::none();
  return summed_stats_tuple(stats);
}

/// Element codes one byte per value, or (packed, 4-bit elements) two per byte: value 2i in the
/// low nibble of byte i, value 2i + 1 in the high one, in `words` of at least
/// packed_words(n, 4) 32-bit words. Scale codes one byte per block. Returns (tensor scale, stats).
py::tuple encode_blocks_call(std::uintptr_t in, std::uintptr_t elements, std::uintptr_t scales, bool packed,
                             const block_geometry& g, const block_format& f, const block_options& requested,
                             int threads, bool want_stats) {
  constexpr const char* who = "minifloat.encode_blocks";
  const std::size_t n = g.size();
  const auto source = span_at<const float>(in, n);
  const block_options o = checked_options(source, f, requested, who);
  if (packed && f.element.bit_width() != 4)
    throw std::invalid_argument(std::string(who) + ": packed codes are for 4-bit elements, not " + to_string(f.element));
  if (o.on_overflow != overflow::saturate && !f.element.has_infinity() && !f.element.has_nan())
    throw std::invalid_argument(std::string(who) + ": overflow = infinity gives values without a code in " +
                                to_string(f.element));
  // Packed: two pieces must not share a 32-bit word (8 codes), so pieces start on a word or the
  // whole tensor is one piece.
  bool word_aligned = true;
  if (packed)
    for (std::size_t u = 0; u < g.units() && word_aligned; ++u) word_aligned = g.unit(u).first % 8 == 0;
  std::vector<block_stats> stats(word_aligned ? workers_for(g, threads) : 1);
  {
    py::gil_scoped_release unlocked;
    for_units(g, threads, word_aligned, [&](std::size_t worker, std::size_t first, std::size_t count) {
      for (std::size_t u = first; u < first + count; ++u) {
        const auto v = g.unit(u);
        block_options piece = o;
        piece.index = o.index + v.first;
        const auto src = source.subspan(v.first, v.count);
        const auto sc = span_at<std::uint8_t>(scales, g.block_count()).subspan(v.first_scale, ::minifloat::block_count(v.count, f, v.layout));
        block_stats* st = want_stats ? &stats[worker] : nullptr;
        if (packed) {
          // value v.first of the tensor is field v.first: its word, and the field within it
          std::uint32_t* words = at<std::uint32_t>(elements) + v.first / 8;
          if (v.first % 8 == 0) {
            detail::encode_blocks_into(src, storage::detail::packed_codes<4>{words}, sc, f, piece, v.layout, st, who);
          } else {  // a unit off a word (single-threaded, see above): codes through a buffer
            std::vector<std::uint8_t> codes(v.count);
            encode_blocks(src, std::span<std::uint8_t>(codes), sc, f, piece, v.layout, st);
            auto* bytes = at<std::uint8_t>(elements);
            for (std::size_t i = 0; i < v.count; ++i) {
              const std::size_t k = v.first + i;
              const unsigned shift = (k & 1u) * 4u;
              bytes[k / 2] = static_cast<std::uint8_t>((bytes[k / 2] & ~(0xFu << shift)) | ((codes[i] & 0xFu) << shift));
            }
          }
        } else {
          encode_blocks(src, span_at<std::uint8_t>(elements, n).subspan(v.first, v.count), sc, f, piece, v.layout, st);
        }
      }
    });
  }
  const float tensor_scale = f.scaling == block_scaling::e4m3_times_tensor ? o.tensor_scale : 1.0f;
  return py::make_tuple(tensor_scale, want_stats ? py::object(summed_stats_tuple(stats)) : py::none());
}

/// Values of element codes (one byte per value, or packed two per byte as encode_blocks_call
/// writes them, `element_bytes` long) and scale codes. std::invalid_argument, before anything is
/// written, when an element code has bits above the element format's width.
void decode_blocks_call(std::uintptr_t elements, std::size_t element_bytes, bool packed, std::uintptr_t scales,
                        std::uintptr_t out, const block_geometry& g, const block_format& f, float tensor_scale,
                        int threads) {
  constexpr const char* who = "minifloat.decode_blocks";
  f.validate();
  const std::size_t n = g.size();
  const int bits = f.element.bit_width();
  if (packed && bits != 4)
    throw std::invalid_argument(std::string(who) + ": packed codes are for 4-bit elements, not " + to_string(f.element));
  const std::size_t needed = packed ? (n + 1) / 2 : n;
  if (element_bytes != needed)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(element_bytes) + " bytes of element codes for " +
                                std::to_string(n) + " values (" + std::to_string(needed) + " expected)");
  const auto* bytes = at<const std::uint8_t>(elements);
  if (!packed && bits < 8) {
    const std::uint8_t* bad = std::find_if(bytes, bytes + n, [&](std::uint8_t c) { return (c >> bits) != 0; });
    if (bad != bytes + n)
      throw std::invalid_argument(std::string(who) + ": element code " + std::to_string(*bad) + " at flat index " +
                                  std::to_string(bad - bytes) + " has bits above the " + std::to_string(bits) +
                                  " of " + to_string(f.element));
  }
  if (f.scaling == block_scaling::e4m3_times_tensor && (!(tensor_scale > 0) || !std::isfinite(tensor_scale)))
    throw std::invalid_argument(std::string(who) + ": tensor_scale = " + std::to_string(tensor_scale) +
                                " is not a positive finite float");
  py::gil_scoped_release unlocked;
  for_units(g, threads, true, [&](std::size_t, std::size_t first, std::size_t count) {
    std::vector<std::uint8_t> codes;
    for (std::size_t u = first; u < first + count; ++u) {
      const auto v = g.unit(u);
      std::span<const std::uint8_t> unit_codes;
      if (packed) {
        codes.resize(v.count);
        for (std::size_t i = 0; i < v.count; ++i) {
          const std::size_t k = v.first + i;
          codes[i] = static_cast<std::uint8_t>((bytes[k / 2] >> ((k & 1u) * 4u)) & 0xFu);
        }
        unit_codes = codes;
      } else {
        unit_codes = std::span<const std::uint8_t>(bytes + v.first, v.count);
      }
      const auto sc = span_at<const std::uint8_t>(scales, g.block_count())
                          .subspan(v.first_scale, ::minifloat::block_count(v.count, f, v.layout));
      decode_blocks(unit_codes, sc, span_at<float>(out, n).subspan(v.first, v.count), f, v.layout, tensor_scale);
    }
  });
}

block_geometry geometry(std::size_t before, std::size_t length, std::size_t after, const block_format& f) {
  f.validate();
  return {before, length, after, static_cast<std::size_t>(f.block_size)};
}

}  // namespace

void bind_blocks(py::module_& m) {
  m.attr("block_scaling_names") = block_scaling_names;
  m.attr("scale_rule_names") = scale_rule_names();
  py::list named;
  for (const auto& [name, f] : named_block_formats) named.append(py::make_tuple(std::string(name), to_tuple(f)));
  m.attr("named_block_formats") = named;

  m.def("block_format_problem", [](const block_format_tuple& t) { return to_block_format(t).problem(); });
  m.def("block_format_string", [](const block_format_tuple& t) { return to_string(to_block_format(t)); });
  m.def("block_count", [](std::size_t before, std::size_t length, std::size_t after, const block_format_tuple& t) {
    return geometry(before, length, after, to_block_format(t)).block_count();
  });
  m.def("check_block_options", [](const block_format_tuple& t, const block_options_tuple& o) {
    const block_format f = to_block_format(t);
    f.validate();
    const block_options bo = to_block_options(o);
    (void)rounder<float>(f.element, {bo.mode, bo.on_overflow, bo.random_bits, bo.seed, bo.index});
  });

  m.def("quantize_blocks", [](std::uintptr_t in, std::uintptr_t out, std::size_t before, std::size_t length,
                              std::size_t after, const block_format_tuple& t, const block_options_tuple& o, int threads,
                              bool want_stats) {
    const block_format f = to_block_format(t);
    return quantize_blocks_call(in, out, geometry(before, length, after, f), f, to_block_options(o), threads, want_stats);
  });
  m.def("encode_blocks", [](std::uintptr_t in, std::uintptr_t elements, std::uintptr_t scales, bool packed,
                            std::size_t before, std::size_t length, std::size_t after, const block_format_tuple& t,
                            const block_options_tuple& o, int threads, bool want_stats) {
    const block_format f = to_block_format(t);
    return encode_blocks_call(in, elements, scales, packed, geometry(before, length, after, f), f, to_block_options(o),
                              threads, want_stats);
  });
  m.def("decode_blocks", [](std::uintptr_t elements, std::size_t element_bytes, bool packed, std::uintptr_t scales,
                            std::uintptr_t out, std::size_t before, std::size_t length, std::size_t after,
                            const block_format_tuple& t, float tensor_scale, int threads) {
    const block_format f = to_block_format(t);
    decode_blocks_call(elements, element_bytes, packed, scales, out, geometry(before, length, after, f), f, tensor_scale,
                       threads);
  });

  // For python/bench/bench_blocks.py: block.hpp's quantize_blocks on the same buffers, one call
  // over one row of blocks, timed in C++ (one thread), with no Python in between.
  m.def("time_quantize_blocks", [](std::uintptr_t in, std::uintptr_t out, std::size_t n, const block_format_tuple& t,
                                   const block_options_tuple& o) {
    const block_format f = to_block_format(t);
    const block_options bo = to_block_options(o);
    py::gil_scoped_release unlocked;
    const auto t0 = std::chrono::steady_clock::now();
    quantize_blocks(span_at<const float>(in, n), span_at<float>(out, n), f, bo);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
}

}  // namespace minifloat::python
