// minifloat/storage/low_tensor.hpp — weights kept only in a low-precision format, with no fp32
// copy and no extra bits: the "fp16", "bf16" and "fp8" rows of the extra-mantissa-bits paper's
// Table 3 (§4), the baseline that split storage (split.hpp, §3.1) improves on.
//
// The codes are bit-packed at the format's width (packed_minifloat.hpp). An update restores a
// chunk to fp32, changes it and rounds it back — to nearest even, or stochastically — so updates
// smaller than half a unit in the last place vanish (nearest) or survive only on average
// (stochastic). Overflow saturates at the largest finite value, as a forward tensor does.
// Like split_tensor, each rewrite is a new generation and stochastic draws come from (seed,
// generation, element index), so the chunking of an update does not change its result.
// The optimizers of optimizers.hpp step it through the same chunked interface as a split_tensor.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "../format.hpp"
#include "../random.hpp"
#include "../round.hpp"
#include "packed_minifloat.hpp"

namespace minifloat::storage {

class low_tensor {
 public:
  /// x rounded to `f` with `mode` (nearest_even or stochastic), as generation 0.
  low_tensor(std::span<const float> x, const format& f, rounding mode = rounding::nearest_even, std::uint64_t seed = 0)
      : fmt_(f), mode_(checked(mode)), seed_(seed), codes_(x.size(), checked_bits(f)) {
    store(0, x);
  }

  /// The tensor whose parts these are — what fmt(), mode(), seed(), generation() and codes()
  /// return — so a checkpoint restores it exactly, later stochastic draws included. Throws
  /// std::invalid_argument when the codes' field width is not the format's.
  static low_tensor from_parts(const format& f, rounding mode, std::uint64_t seed, std::uint64_t generation,
                               packed_array codes) {
    low_tensor t(std::span<const float>{}, f, mode, seed);
    if (codes.bits() != t.codes_.bits())
      throw std::invalid_argument("minifloat::storage::low_tensor::from_parts: codes of " + std::to_string(codes.bits()) +
                                  " bits for a format of " + std::to_string(t.codes_.bits()));
    t.codes_ = std::move(codes);
    t.generation_ = generation;
    return t;
  }

  std::size_t size() const { return codes_.size(); }
  const format& fmt() const { return fmt_; }
  rounding mode() const { return mode_; }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t generation() const { return generation_; }
  const packed_array& codes() const { return codes_; }

  /// out = the stored values.
  void decode(std::span<float> out) const {
    if (out.size() != size())
      throw std::invalid_argument("minifloat::storage::low_tensor::decode: output of " + std::to_string(out.size()) +
                                  " for " + std::to_string(size()) + " weights");
    decode_packed(codes_.words(), out, fmt_);
  }

  // Chunked access for in-place updates (the interface optimizers.hpp steps): `start` must be
  // a multiple of 32, and a stored range must end at a multiple of 32 or at the last weight.
  void load(std::size_t start, std::span<float> out) const {
    check_range(start, out.size(), out.size() == size() - start || out.size() % 32 == 0, "load");
    decode_packed(codes_.words_of(start, out.size()), out, fmt_);
  }
  void store(std::size_t start, std::span<const float> x) {
    check_range(start, x.size(), x.size() == size() - start || x.size() % 32 == 0, "store");
    const rounding_options o{mode_, overflow::saturate, 0, generation_seed(seed_, generation_), start};
    encode_packed(x, codes_.words_from(start), fmt_, o);
  }
  void next_generation() { ++generation_; }
  /// Whether store() accepts every float: false for an all_finite format, which has no code for
  /// NaN (±Inf saturates to ±max; store() throws std::domain_error for NaN).
  bool stores_every_float() const { return fmt_.encoding != specials::all_finite; }
  /// The index of the first value of x that store() would reject, or x.size().
  std::size_t first_rejected(std::span<const float> x) const {
    if (stores_every_float()) return x.size();
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::isnan(x[i])) return i;
    return x.size();
  }
  const format& stored_format() const { return fmt_; }

 private:
  static rounding checked(rounding m) {
    if (m != rounding::nearest_even && m != rounding::stochastic)
      throw std::invalid_argument("minifloat::storage::low_tensor: mode must be nearest_even or stochastic");
    return m;
  }
  static int checked_bits(const format& f) {
    detail::check_codes_fit(f, sign_storage::stored, "minifloat::storage::low_tensor");
    return code_bits(f, sign_storage::stored);
  }
  void check_range(std::size_t start, std::size_t n, bool whole_words, const char* who) const {
    if (start % 32 != 0 || start > size() || n > size() - start || !whole_words)
      throw std::out_of_range(std::string("minifloat::storage::low_tensor::") + who + ": range [" +
                              std::to_string(start) + ", +" + std::to_string(n) + ") of " + std::to_string(size()) +
                              " weights (32-aligned, whole words unless it ends at the last weight)");
  }

  format fmt_;
  rounding mode_;
  std::uint64_t seed_;
  std::uint64_t generation_ = 0;
  packed_array codes_;
};

}  // namespace minifloat::storage
