// python/src/torch_ops.cpp — the CPU kernels of the torch operators minifloat::quantize,
// quantize_with_stats and quantize_, registered in torch's dispatcher, so that a
// compiled graph (torch.compile, torch.export) calls the rounding with no Python in between.
//
// Built as its own library (minifloat/_torch_ops.so) only where the build finds torch's CMake
// package, and loaded by python/minifloat/_custom_ops.py, which defines the schemas, the fake
// (meta) and autograd implementations and the CUDA kernels, and keeps the Python CPU kernels
// as the fallback wherever this library is absent or does not load. The arguments are the ones
// the extension minifloat._core takes: the format key (exponent bits, mantissa bits, bias,
// subnormals, specials index) and the option indices, seed and index (signed in torch's schema,
// the same 64 bits). Nothing here makes a numeric decision: every value is rounded by
// minifloat/bulk.hpp's quantize, as _core.quantize rounds it, and bad arguments are refused by
// the headers' own validation (rounder), raised as ValueError.
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <cstdint>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>

#include <minifloat/bulk.hpp>
#include <minifloat/format.hpp>
#include <minifloat/round.hpp>

namespace minifloat::python {
namespace {

/// Elements per piece of work handed to one of torch's threads (the extension's piece size).
constexpr std::int64_t elements_per_piece = std::int64_t{1} << 16;

/// The enumerator at `index`, refused when past `last` (the enumeration's last enumerator).
template <class E>
E enumerator(std::int64_t index, E last, const char* what) {
  TORCH_CHECK_VALUE(index >= 0 && index <= static_cast<std::int64_t>(last), "minifloat: ", what, " index ", index,
                    " is unknown");
  return static_cast<E>(index);
}

format to_format(c10::IntArrayRef key) {
  TORCH_CHECK_VALUE(key.size() == 5, "minifloat: a format key has 5 entries, not ", key.size());
  return format{static_cast<int>(key[0]), static_cast<int>(key[1]), static_cast<int>(key[2]), key[3] != 0,
                enumerator(key[4], specials::unsigned_exponent, "specials")};
}

rounding_options to_options(std::int64_t mode, std::int64_t on_overflow, std::int64_t random_bits, std::int64_t seed,
                            std::int64_t index) {
  TORCH_CHECK_VALUE(random_bits >= 0 && random_bits <= 64, "minifloat: random_bits = ", random_bits,
                    " is outside 0..64");
  return {enumerator(mode, rounding::to_odd, "rounding"), enumerator(on_overflow, overflow::infinity, "overflow"),
          static_cast<int>(random_bits), static_cast<std::uint64_t>(seed), static_cast<std::uint64_t>(index)};
}

/// The headers' validation (rounder's constructor), its std::invalid_argument raised as ValueError.
template <class S>
rounder<S> make_rounder(const format& f, const rounding_options& o) {
  try {
    return rounder<S>(f, o);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

void check_values(const at::Tensor& x, const char* who) {
  TORCH_CHECK_TYPE(x.layout() == at::kStrided, who, ": x has layout ", x.layout(), "; only dense tensors are supported");
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble, who, ": x has dtype ",
                   x.scalar_type(), "; expected float32 or float64");
}

/// out = x rounded (both contiguous, of element type S), split over torch's threads by element
/// range; each piece starts its rounder at its first element's index, so the bits are the same
/// for any thread count. The counts of every piece when want_stats.
template <class S>
rounding_stats round_into(const at::Tensor& x, const at::Tensor& out, const rounder<S>& r, bool want_stats) {
  const S* in = x.const_data_ptr<S>();
  S* target = out.mutable_data_ptr<S>();
  rounding_stats total;
  std::mutex adding;
  at::parallel_for(0, x.numel(), elements_per_piece, [&](std::int64_t begin, std::int64_t end) {
    const auto start = static_cast<std::size_t>(begin), count = static_cast<std::size_t>(end - begin);
    const std::span<const S> source(in + start, count);
    const std::span<S> destination(target + start, count);
    if (!want_stats) return quantize(source, destination, r.advanced(start));
    rounding_stats piece;
    quantize(source, destination, r.advanced(start), piece);
    const std::lock_guard lock(adding);
    total += piece;
  });
  return total;
}

/// x rounded into `out` (a new contiguous tensor when absent); the checks all come first.
rounding_stats round_values(const at::Tensor& x, const at::Tensor& out, c10::IntArrayRef fmt, std::int64_t mode,
                            std::int64_t on_overflow, std::int64_t seed, std::int64_t index, std::int64_t random_bits,
                            bool want_stats) {
  const format f = to_format(fmt);
  const rounding_options o = to_options(mode, on_overflow, random_bits, seed, index);
  if (x.scalar_type() == at::kDouble) return round_into(x, out, make_rounder<double>(f, o), want_stats);
  return round_into(x, out, make_rounder<float>(f, o), want_stats);
}

at::Tensor quantize_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t mode, std::int64_t on_overflow,
                       std::int64_t seed, std::int64_t index, std::int64_t random_bits) {
  check_values(x, "minifloat.quantize");
  const at::Tensor source = x.resolve_neg().contiguous();
  at::Tensor result = at::empty_like(source, at::MemoryFormat::Contiguous);
  round_values(source, result, fmt, mode, on_overflow, seed, index, random_bits, false);
  return result;
}

std::tuple<at::Tensor, at::Tensor> quantize_with_stats_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t mode,
                                                          std::int64_t on_overflow, std::int64_t seed,
                                                          std::int64_t index, std::int64_t random_bits) {
  check_values(x, "minifloat.quantize");
  const at::Tensor source = x.resolve_neg().contiguous();
  at::Tensor result = at::empty_like(source, at::MemoryFormat::Contiguous);
  const rounding_stats s = round_values(source, result, fmt, mode, on_overflow, seed, index, random_bits, true);
  at::Tensor counts = at::empty({5}, x.options().dtype(at::kLong));
  std::int64_t* c = counts.mutable_data_ptr<std::int64_t>();
  c[0] = static_cast<std::int64_t>(s.values);
  c[1] = static_cast<std::int64_t>(s.overflows);
  c[2] = static_cast<std::int64_t>(s.underflows);
  c[3] = static_cast<std::int64_t>(s.nans);
  c[4] = static_cast<std::int64_t>(s.infinities);
  return {result, counts};
}

void quantize_in_place_op(const at::Tensor& x, c10::IntArrayRef fmt, std::int64_t mode, std::int64_t on_overflow,
                          std::int64_t seed, std::int64_t index, std::int64_t random_bits) {
  check_values(x, "minifloat.quantize_");
  TORCH_CHECK_VALUE(at::has_internal_overlap(x) != at::MemOverlap::Yes,
                    "minifloat.quantize_: x has elements that share memory; write into a tensor with one location "
                    "per element");
  if (x.is_contiguous() && !x.is_neg()) {
    round_values(x, x, fmt, mode, on_overflow, seed, index, random_bits, false);
    return;
  }
  const at::Tensor source = x.resolve_neg().contiguous();
  const at::Tensor result = at::empty_like(source, at::MemoryFormat::Contiguous);
  round_values(source, result, fmt, mode, on_overflow, seed, index, random_bits, false);
  x.copy_(result);
}

}  // namespace

TORCH_LIBRARY_IMPL(minifloat, CPU, m) {
  m.impl("quantize", &quantize_op);
  m.impl("quantize_with_stats", &quantize_with_stats_op);
  m.impl("quantize_", &quantize_in_place_op);
}

}  // namespace minifloat::python
