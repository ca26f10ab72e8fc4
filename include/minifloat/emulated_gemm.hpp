// minifloat/emulated_gemm.hpp — a GEMM whose products and running sums are rounded to given
// formats: a model of a tensor core's limited-precision accumulation, with optional promotion
// of the partial sum to an fp32 accumulator every N elements of the reduction, as DeepSeek-V3
// does for its FP8 GEMMs (DeepSeek-V3 Technical Report, arXiv:2412.19437, §3.3.2: on Hopper the
// FP8 tensor cores keep about 14 bits of the aligned products, so partial sums go to FP32
// registers every 128 elements).
//
// The model (docs/recipes.md), for C = A · B with A M × K and B K × N, per output C(i, j):
//   p_k   = product(A(i, k) · B(k, j))     the exact product (in double), rounded to `product`
//   s     = accumulator(s + p_k)           the exact sum, rounded once to `accumulator`
// k running 0, 1, ..., K − 1 from s = +0; with promote_every = N > 0 the reduction is cut into
// chunks of N (the last shorter), each summed as above from s = +0, and each chunk's s is added
// to an fp32 total (a float addition, nearest-even, from +0) in chunk order; C(i, j) = the total
// (or s without promotion). Rounding a sum once from its exact value goes through round-to-odd
// at double precision (53 bits, at least two more than any accumulator format of at most float's
// 24 bits), which then rounds to the accumulator exactly as the exact value would in every
// deterministic mode (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
// algorithms using rounding to odd", IEEE TC 2008); stochastic rounding decides on that
// round-to-odd value's fraction. It is a model of the hardware (which aligns products to the
// largest exponent and truncates), not the hardware itself: the accumulator's mantissa width
// and rounding stand for "how many bits survive".
// Stochastic draws: products from seed fold_seed(seed, 0), sums from fold_seed(seed, 1), each at
// element index (i · K + k) · N + j: a function of (seed, output, k) only. Every rounding goes
// through bulk.hpp's quantize (the one core's SIMD path), a row of N products or sums per call.
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

#include "bulk.hpp"
#include "config.hpp"
#include "format.hpp"
#include "random.hpp"
#include "round.hpp"

namespace minifloat {

/// How an emulated GEMM rounds: products to `product`, running sums to `accumulator` (formats
/// whose values are floats), each in its own mode; partial sums promoted to fp32 every
/// `promote_every` elements of the reduction (0: never).
struct accumulation {
  format product = binary32;
  rounding product_rounding = rounding::nearest_even;
  format accumulator = binary32;
  rounding accumulator_rounding = rounding::nearest_even;
  overflow on_overflow = overflow::infinity;
  std::size_t promote_every = 0;
  int random_bits = 0;  ///< stochastic only, as rounding_options::random_bits (of a 64-bit draw)
  std::uint64_t seed = 0;
  friend constexpr bool operator==(const accumulation&, const accumulation&) = default;
};

/// A model, not a measurement, of Hopper's FP8 tensor-core accumulation as DeepSeek-V3 describes
/// it ("about 14 bits"): products exact in fp32, sums truncated to 13 mantissa bits (14 with the
/// implicit bit) in fp32's exponent range, promoted to fp32 every 128 elements.
inline constexpr accumulation hopper_fp8_model{binary32, rounding::nearest_even, format{8, 13, 127},
                                               rounding::toward_zero, overflow::infinity, 128};

/// C = A · B as stored: A is m × k row-major (k × m when a_transposed: A^T is stored), B is
/// k × n (n × k when b_transposed), C is m × n row-major.
struct gemm_shape {
  std::size_t m = 0, n = 0, k = 0;
  bool a_transposed = false, b_transposed = false;
  friend constexpr bool operator==(const gemm_shape&, const gemm_shape&) = default;
};

/// x + y rounded to odd at double precision: the nearest-even double sum, moved one unit toward
/// the exact sum when the sum was inexact and its last bit is even (TwoSum gives the exact
/// error). An infinite or NaN sum is returned as it is (its error is NaN). Branch-free, so a
/// loop over a row of sums vectorises.
MINIFLOAT_HD inline double sum_to_odd(double x, double y) {
  const double s = x + y;
  const double y_part = s - x;
  const double error = (x - (s - y_part)) + (y - y_part);
  const auto bits = std::bit_cast<std::uint64_t>(s);
  const bool inexact = error != 0 && error == error;  // NaN: an infinite or NaN sum
  const bool even = (bits & 1u) == 0;
  const bool away = std::signbit(error) == std::signbit(s);  // the exact sum is farther from zero
  const std::uint64_t step = inexact && even ? (away ? 1u : ~std::uint64_t{0}) : 0u;
  return std::bit_cast<double>(bits + step);
}

namespace detail {
inline void check_accumulation_format(const format& f, const char* name) {
  if (auto p = source_problem<float>(f); !p.empty())
    throw std::invalid_argument(std::string("minifloat::emulated_gemm: accumulation.") + name + ": " + p +
                                " (its values must be floats)");
}
inline bool spans_overlap(std::span<const float> a, std::span<const float> b) {
  const auto x = reinterpret_cast<std::uintptr_t>(a.data()), y = reinterpret_cast<std::uintptr_t>(b.data());
  return !a.empty() && !b.empty() && x < y + b.size_bytes() && y < x + a.size_bytes();
}
}  // namespace detail

/// The seeds of the two streams of an emulated GEMM's stochastic draws.
constexpr std::uint64_t product_seed(const accumulation& acc) { return fold_seed(acc.seed, 0u); }
constexpr std::uint64_t sum_seed(const accumulation& acc) { return fold_seed(acc.seed, 1u); }

/// c = a · b under `acc` (see the top of this header for the model and its order). Throws
/// std::invalid_argument naming the argument, before writing, when a span's size is not the
/// shape's, c overlaps a or b, a format's values are not floats, or an option is invalid.
inline void emulated_gemm(std::span<const float> a, std::span<const float> b, std::span<float> c,
                          const gemm_shape& shape, const accumulation& acc) {
  constexpr const char* who = "minifloat::emulated_gemm";
  const auto holds = [](std::size_t size, std::size_t rows, std::size_t cols) {
    return cols == 0 ? size == 0 : size % cols == 0 && size / cols == rows;
  };
  if (!holds(a.size(), shape.m, shape.k))
    throw std::invalid_argument(std::string(who) + ": a has " + std::to_string(a.size()) + " values, not m * k = " +
                                std::to_string(shape.m) + " * " + std::to_string(shape.k));
  if (!holds(b.size(), shape.k, shape.n))
    throw std::invalid_argument(std::string(who) + ": b has " + std::to_string(b.size()) + " values, not k * n = " +
                                std::to_string(shape.k) + " * " + std::to_string(shape.n));
  if (!holds(c.size(), shape.m, shape.n))
    throw std::invalid_argument(std::string(who) + ": c has " + std::to_string(c.size()) + " values, not m * n = " +
                                std::to_string(shape.m) + " * " + std::to_string(shape.n));
  if (detail::spans_overlap(c, a) || detail::spans_overlap(c, b))
    throw std::invalid_argument(std::string(who) + ": c overlaps a or b");
  detail::check_accumulation_format(acc.product, "product");
  detail::check_accumulation_format(acc.accumulator, "accumulator");
  const rounder<double> product(acc.product, {acc.product_rounding, acc.on_overflow, acc.random_bits, product_seed(acc)});
  const rounder<double> sum(acc.accumulator,
                            {acc.accumulator_rounding, acc.on_overflow, acc.random_bits, sum_seed(acc)});
  const std::size_t m = shape.m, n = shape.n, k = shape.k;
  if (m == 0 || n == 0) return;
  const std::size_t chunk = acc.promote_every == 0 ? k : acc.promote_every;
  const std::size_t a_row = shape.a_transposed ? 1 : k, a_step = shape.a_transposed ? m : 1;  // A(i, l) = a[i * a_row + l * a_step]
  const std::size_t b_row = shape.b_transposed ? 1 : n, b_col = shape.b_transposed ? k : 1;   // B(l, j) = b[l * b_row + j * b_col]
  std::vector<double> partial(n), terms(n);
  std::vector<float> total(n);
  for (std::size_t i = 0; i < m; ++i) {
    std::fill(total.begin(), total.end(), 0.0f);
    std::fill(partial.begin(), partial.end(), 0.0);
    for (std::size_t begin = 0; begin < k; begin += chunk) {
      const std::size_t end = std::min(k, begin + chunk);
      std::fill(partial.begin(), partial.end(), 0.0);
      // one row of outputs at a time, l outermost, so B is read along its rows and each call of
      // the bulk kernel rounds N products (or sums) with consecutive indices; each output still
      // sums its products in the order l = begin, begin + 1, ...
      for (std::size_t l = begin; l < end; ++l) {
        const double x = a[i * a_row + l * a_step];
        const float* b_line = b.data() + l * b_row;
        for (std::size_t j = 0; j < n; ++j) terms[j] = x * static_cast<double>(b_line[j * b_col]);  // exact
        const std::uint64_t first = (i * k + l) * n;
        quantize(std::span<const double>(terms), std::span<double>(terms), product.advanced(first));
        for (std::size_t j = 0; j < n; ++j) terms[j] = sum_to_odd(partial[j], terms[j]);
        quantize(std::span<const double>(terms), std::span<double>(partial), sum.advanced(first));
      }
      if (acc.promote_every != 0)
        for (std::size_t j = 0; j < n; ++j) total[j] += static_cast<float>(partial[j]);
    }
    for (std::size_t j = 0; j < n; ++j)
      c[i * n + j] = acc.promote_every != 0 ? total[j] : static_cast<float>(partial[j]);
  }
}

}  // namespace minifloat
