// minifloat/storage/low_block_tensor.hpp — weights kept only in an OCP MX block-scaled format
// (MXFP8, MXFP6, MXFP4, MXINT8: OCP Microscaling Formats v1.0 §5, §6.3), with no fp32 copy and no
// extra bits: the block-scaled counterpart of low_tensor.hpp (the "low precision only" rows of
// the extra-mantissa-bits paper's Table 3, §4), for training whose stored weights are MX tensors.
//
// The tensor is rows × cols, row-major; blocks of block_size consecutive elements run along each
// row (the last block of a row is shorter when block_size does not divide cols), so a weight
// stored as (out, in) has its blocks along the reduction dimension of y = W x. Element codes are
// bit-packed at the element format's width (bitpack.hpp), one E8M0 scale code per block beside
// them: the layout and byte count of packed_block.hpp, which packed() returns.
//
// An update restores a chunk to fp32, changes it and stores it back. A block's scale depends on
// all of its elements, so store() re-quantizes whole blocks only (through block.hpp, and so the
// one rounding core), from all of their updated values: the values of a block that a chunk ends
// inside wait in a small buffer (fewer than block_size floats) until the next chunk completes
// it; loads read the committed codes, i.e. the block's values before the update. Each rewrite is
// a new generation; stochastic draws come from (seed, generation, element index), so how an
// update is cut into chunks does not change a bit. Scales follow the spec's floor rule; elements
// saturate, as the spec's conversion does.
//
// NVFP4 is refused: its per-tensor scale comes from the amax of the whole updated tensor, which
// a chunked update without an fp32 copy does not have before it must encode the first block.
// A non-finite value is refused too (std::domain_error, nothing changed): the spec would make its
// whole block NaN. docs/no-master-weights.md states the rules with a worked example.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../block.hpp"
#include "../parallel.hpp"
#include "../random.hpp"
#include "bitpack.hpp"
#include "packed_block.hpp"

namespace minifloat::storage {

class low_block_tensor {
 public:
  /// x (rows × x.size() / rows, row-major) block-scaled to `f` with `mode` (nearest_even or
  /// stochastic), as generation 0. Throws std::invalid_argument for NVFP4, a bad format, mode or
  /// row count, and std::domain_error for a non-finite value.
  low_block_tensor(std::span<const float> x, const block_format& f, std::size_t rows = 1,
                   rounding mode = rounding::nearest_even, std::uint64_t seed = 0)
      : fmt_(checked(f)), mode_(checked(mode)), seed_(seed), rows_(rows), cols_(checked_cols(x.size(), rows)),
        elements_(x.size(), f.element.bit_width()), scales_(block_count(x.size(), f, layout())) {
    store(0, x);
  }

  std::size_t size() const { return elements_.size(); }
  const block_format& fmt() const { return fmt_; }
  rounding mode() const { return mode_; }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t generation() const { return generation_; }
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  block_layout layout() const { return {rows_, cols_, 1}; }
  const packed_array& elements() const { return elements_; }
  std::span<const std::uint8_t> scales() const { return scales_; }
  /// Bytes of the stored tensor: element words and one byte per scale (packed_block.hpp's count).
  std::size_t bytes() const { return packed_block_tensor::bytes_for(size(), fmt_, layout()); }
  /// The same codes as a packed_block_tensor (e.g. to write or decode them elsewhere).
  packed_block_tensor packed() const {
    return packed_block_tensor::from_parts(fmt_, layout(), size(), elements_.words(), scales_);
  }

  /// out = the stored values.
  void decode(std::span<float> out) const {
    if (out.size() != size())
      throw std::invalid_argument("minifloat::storage::low_block_tensor::decode: output of " + std::to_string(out.size()) +
                                  " for " + std::to_string(size()) + " weights");
    constexpr std::size_t chunk = 2048;
    for (std::size_t start = 0; start < size(); start += chunk)
      load(start, out.subspan(start, std::min(chunk, size() - start)));
  }

  // Chunked access for in-place updates (the interface optimizers.hpp steps). load() takes any
  // range; store() takes a range that starts at a block's first element, or right after the
  // previous store() when that one ended inside a block.
  void load(std::size_t start, std::span<float> out) const {
    check_range(start, out.size(), "load");
    if (out.empty()) return;
    const std::size_t first = block_start(start), end = block_end(start + out.size() - 1);
    std::vector<std::uint32_t> codes(end - first);
    if (first % 32 == 0)  // the fields from a word's start: the unpacking kernels, given just their
      // words (they read ahead as far as their span reaches, and another thread may be writing
      // the words after them)
      unpack(elements_.words_of(first, codes.size()), elements_.bits(), codes.size(), codes);
    else
      for (std::size_t i = first; i < end; ++i) codes[i - first] = elements_.get(i);
    std::vector<float> values(end - first);
    for_each_row_run(first, end, [&](std::size_t run, std::size_t n, std::size_t block) {
      const block_layout one_row{1, n, 1};
      decode_blocks<std::uint32_t>(std::span<const std::uint32_t>(codes).subspan(run - first, n),
                                   std::span<const std::uint8_t>(scales_).subspan(block, block_count(n, fmt_, one_row)),
                                   std::span<float>(values).subspan(run - first, n), fmt_, one_row);
    });
    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(start - first), out.size(), out.begin());
  }
  void store(std::size_t start, std::span<const float> x) {
    check_range(start, x.size(), "store");
    if (x.empty()) return;
    const std::size_t resume = pending_begin_ + pending_.size();
    if (pending_.empty() ? start != block_start(start) : start != resume)
      throw std::out_of_range("minifloat::storage::low_block_tensor::store: range starts at " + std::to_string(start) +
                              ", which is neither a block's first element nor where the unfinished block goes on (" +
                              (pending_.empty() ? std::string("none") : std::to_string(resume)) + ")");
    if (const std::size_t i = first_rejected(x); i < x.size())
      throw std::domain_error("minifloat::storage::low_block_tensor::store: weight " + std::to_string(start + i) + " is " +
                              (std::isnan(x[i]) ? "NaN" : "infinite") + ", which would make its block NaN; nothing was changed");
    std::size_t used = 0;
    if (!pending_.empty()) {  // complete the block the previous store ended in
      const std::size_t block_end_at = block_end(pending_begin_);
      used = std::min(block_end_at - start, x.size());
      pending_.insert(pending_.end(), x.begin(), x.begin() + static_cast<std::ptrdiff_t>(used));
      if (pending_begin_ + pending_.size() < block_end_at) return;
      encode(pending_begin_, pending_);
      pending_.clear();
    }
    const std::size_t from = start + used, end = start + x.size();
    const std::size_t commit = end == size() ? end : block_start(end);  // end's block is unfinished unless it starts there
    if (commit > from) encode(from, x.subspan(used, commit - from));
    if (commit < end) {
      pending_begin_ = commit;
      pending_.assign(x.begin() + static_cast<std::ptrdiff_t>(pending_begin_ - start), x.end());
    }
  }
  /// Starts a rewrite (fresh stochastic draws). Throws std::logic_error when the previous one left
  /// a block unfinished.
  void next_generation() {
    check_steppable();
    ++generation_;
  }
  /// Throws std::logic_error when a store left a block unfinished (a rewrite cannot start, so an
  /// optimizer step checks this before it changes anything).
  void check_steppable() const {
    if (!pending_.empty())
      throw std::logic_error("minifloat::storage::low_block_tensor: the block at " + std::to_string(pending_begin_) +
                             " was not stored completely");
  }
  /// Where an optimizer step's threads may cut the weights (optimizers.hpp): at multiples of
  /// parallel_grain when blocks tile every such range and each of its chunks (block_size divides
  /// both cols and parallel_grain), so that no store ends inside a block; otherwise nowhere (one
  /// thread), as a thread's range would share its unfinished block, and the buffer that holds
  /// it, with the next thread's.
  std::size_t thread_grain() const {
    const bool blocks_tile_grains = cols_ % block_size() == 0 && parallel_grain % block_size() == 0;
    return blocks_tile_grains ? parallel_grain : std::max<std::size_t>(size(), 1);
  }
  /// store() refuses NaN and ±Inf (the spec would make the whole block NaN).
  bool stores_every_float() const { return false; }
  std::size_t first_rejected(std::span<const float> x) const {
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!std::isfinite(x[i])) return i;
    return x.size();
  }
  /// A format whose range bounds every stored magnitude (an E8M0 scale reaches 2^127, so an MX
  /// value can be any finite float): the optimizers check each update before they commit it.
  format stored_format() const { return binary32; }

  /// The same stored tensor: format, mode, seed, generation, shape, codes and scales (and no
  /// block left unfinished by either).
  friend bool operator==(const low_block_tensor& a, const low_block_tensor& b) {
    return a.fmt_ == b.fmt_ && a.mode_ == b.mode_ && a.seed_ == b.seed_ && a.generation_ == b.generation_ &&
           a.rows_ == b.rows_ && a.cols_ == b.cols_ && a.elements_ == b.elements_ && a.scales_ == b.scales_ &&
           a.pending_.empty() && b.pending_.empty();
  }

 private:
  static block_format checked(const block_format& f) {
    f.validate();
    if (f.scaling != block_scaling::e8m0)
      throw std::invalid_argument("minifloat::storage::low_block_tensor: " + to_string(f) +
                                  " has a per-tensor scale from the whole tensor's amax, which a chunked update "
                                  "without an fp32 copy does not know before it encodes the first block (use an MX format)");
    return f;
  }
  static rounding checked(rounding m) {
    if (m != rounding::nearest_even && m != rounding::stochastic)
      throw std::invalid_argument("minifloat::storage::low_block_tensor: mode must be nearest_even or stochastic");
    return m;
  }
  static std::size_t checked_cols(std::size_t n, std::size_t rows) {
    if (rows == 0 || n % rows != 0)
      throw std::invalid_argument("minifloat::storage::low_block_tensor: rows = " + std::to_string(rows) +
                                  " does not divide " + std::to_string(n) + " weights");
    return n / rows;
  }
  void check_range(std::size_t start, std::size_t n, const char* who) const {
    if (start > size() || n > size() - start)
      throw std::out_of_range(std::string("minifloat::storage::low_block_tensor::") + who + ": range [" +
                              std::to_string(start) + ", +" + std::to_string(n) + ") of " + std::to_string(size()) +
                              " weights");
  }

  std::size_t block_size() const { return static_cast<std::size_t>(fmt_.block_size); }
  /// The first element of the block holding element i (i < size()).
  std::size_t block_start(std::size_t i) const {
    const std::size_t row = i / cols_;
    return row * cols_ + (i - row * cols_) / block_size() * block_size();
  }
  /// One past the last element of the block holding element i.
  std::size_t block_end(std::size_t i) const {
    const std::size_t row_end = (i / cols_ + 1) * cols_;
    return std::min(row_end, block_start(i) + block_size());
  }
  /// f(first, count, scale index) for each row's part of [first, end), both block boundaries.
  template <class F>
  void for_each_row_run(std::size_t first, std::size_t end, F f) const {
    const std::size_t per_row = (cols_ + block_size() - 1) / block_size();
    while (first < end) {
      const std::size_t row = first / cols_, run_end = std::min(end, (row + 1) * cols_);
      f(first, run_end - first, row * per_row + (first - row * cols_) / block_size());
      first = run_end;
    }
  }
  /// Re-quantizes the whole blocks [first, first + x.size()) from x.
  void encode(std::size_t first, std::span<const float> x) {
    std::vector<std::uint32_t> codes(x.size());
    block_options o;
    o.mode = mode_;
    o.seed = generation_seed(seed_, generation_);
    for_each_row_run(first, first + x.size(), [&](std::size_t run, std::size_t n, std::size_t block) {
      const block_layout one_row{1, n, 1};
      o.index = run;  // stochastic draws keyed by the element's index in the tensor
      encode_blocks<std::uint32_t>(x.subspan(run - first, n), std::span<std::uint32_t>(codes).subspan(run - first, n),
                                   std::span<std::uint8_t>(scales_).subspan(block, block_count(n, fmt_, one_row)), fmt_,
                                   o, one_row);
    });
    // Whole 32-field groups from a word's start (or the tensor's tail) through the packing
    // kernels, which write whole words; the other fields one by one, leaving their neighbours.
    std::size_t packed = 0;
    if (first % 32 == 0) {
      packed = first + codes.size() == size() ? codes.size() : codes.size() / 32 * 32;
      pack(std::span<const std::uint32_t>(codes).first(packed), elements_.bits(), elements_.words_from(first));
    }
    for (std::size_t i = packed; i < codes.size(); ++i) elements_.set(first + i, codes[i]);
  }

  block_format fmt_;
  rounding mode_;
  std::uint64_t seed_;
  std::uint64_t generation_ = 0;
  std::size_t rows_, cols_;
  packed_array elements_;
  std::vector<std::uint8_t> scales_;
  std::size_t pending_begin_ = 0;  ///< the unfinished block's first element (while pending_ holds values)
  std::vector<float> pending_;     ///< its updated values so far (fewer than block_size)
};

}  // namespace minifloat::storage
