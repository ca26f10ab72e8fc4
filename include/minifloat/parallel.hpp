// minifloat/parallel.hpp — the bulk kernels of bulk.hpp on several threads.
//
// Each overload takes a `threads` count and cuts the span into that many contiguous chunks (at
// most; short spans use fewer), each a multiple of `parallel_grain` values, and runs the
// ordinary kernel on every chunk: the calling thread takes the first, std::threads the rest.
// Stochastic rounding draws element i's random word from (seed, index + i) whatever the chunk
// (bulk.hpp), so results are bit-identical to the one-thread call for every thread count;
// statistics are sums of integers, identical too. Host code only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <span>
#include <thread>
#include <vector>

#include "bulk.hpp"

namespace minifloat {

/// How many threads a parallel kernel may use; 0 means std::thread::hardware_concurrency().
struct threads {
  unsigned count = 0;
};

/// Chunks are multiples of this many values (a whole number of 64-byte cache lines and SIMD
/// registers for every element type, and of 32-value groups of any bit-packing width).
inline constexpr std::size_t parallel_grain = 1024;
/// Fewer values than this per thread are not worth a thread's start.
inline constexpr std::size_t parallel_min_chunk = std::size_t{1} << 15;

namespace detail {
/// The number of threads t asks for (0: the hardware's), at least 1.
inline std::size_t thread_count(threads t) {
  return std::max(1u, t.count == 0 ? std::thread::hardware_concurrency() : t.count);
}

/// Calls f(chunk, start, length) for chunk = 0..k-1 covering [0, n), f(0, ...) on this thread,
/// and returns k. Rethrows the first exception a chunk threw, after every thread has finished.
/// Every start is a multiple of `grain` (parallel_grain unless the caller needs coarser cuts).
template <class F>
std::size_t for_each_chunk(std::size_t n, threads t, F&& f, std::size_t grain = parallel_grain) {
  std::size_t k = std::max<std::size_t>(1, std::min(thread_count(t), n / parallel_min_chunk));
  const std::size_t grains = (n + grain - 1) / grain;
  const std::size_t per = (grains + k - 1) / k * grain;
  k = n == 0 ? 1 : (n + per - 1) / per;
  std::vector<std::exception_ptr> errors(k);
  auto run = [&](std::size_t c) {
    try {
      const std::size_t start = c * per;
      f(c, start, std::min(per, n - std::min(n, start)));
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> workers;
    workers.reserve(k - 1);
    for (std::size_t c = 1; c < k; ++c) workers.emplace_back(run, c);
    run(0);
  }  // joins
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return k;
}
}  // namespace detail

/// quantize(in, out, r) on up to t threads; bit-identical to the one-thread call.
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const rounder<S>& r, threads t) {
  detail::check_same_size(in.size(), out.size());
  detail::for_each_chunk(in.size(), t, [&](std::size_t, std::size_t start, std::size_t n) {
    quantize(in.subspan(start, n), out.subspan(start, n), r.advanced(start));
  });
}
/// The counting form: st receives the same counts as from the one-thread call.
template <std::floating_point S>
void quantize(std::span<const S> in, std::span<S> out, const rounder<S>& r, rounding_stats& st, threads t) {
  detail::check_same_size(in.size(), out.size());
  std::vector<rounding_stats> part(detail::thread_count(t));
  const std::size_t k = detail::for_each_chunk(in.size(), threads{static_cast<unsigned>(part.size())},
                                               [&](std::size_t c, std::size_t start, std::size_t n) {
                                                 quantize(in.subspan(start, n), out.subspan(start, n),
                                                          r.advanced(start), part[c]);
                                               });
  for (std::size_t c = 0; c < k; ++c) st += part[c];
}
template <std::floating_point S>
void quantize(std::span<S> values, const format& f, const rounding_options& o, threads t) {
  quantize(std::span<const S>(values), values, rounder<S>(f, o), t);
}

/// try_encode on up to t threads: returns the index of the first value without a code, or
/// in.size(). Every code before that index is written (codes after it may be written too).
template <std::floating_point S, std::unsigned_integral C>
std::size_t try_encode(std::span<const S> in, std::span<C> out, const rounder<S>& r, threads t) {
  detail::check_same_size(in.size(), out.size());
  const format& f = r.plan().fmt;
  if (f.bit_width() > static_cast<int>(sizeof(C) * 8))
    throw std::invalid_argument("minifloat::encode: codes of " + to_string(f) + " do not fit the output type");
  std::vector<std::size_t> first(detail::thread_count(t), in.size());
  const std::size_t k = detail::for_each_chunk(in.size(), threads{static_cast<unsigned>(first.size())},
                                               [&](std::size_t c, std::size_t start, std::size_t n) {
                                                 const std::size_t done = try_encode(
                                                     in.subspan(start, n), out.subspan(start, n), r.advanced(start));
                                                 if (done < n) first[c] = start + done;
                                               });
  return *std::min_element(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(k));
}
/// encode on up to t threads: throws std::domain_error naming the first value without a code.
template <std::floating_point S, std::unsigned_integral C>
void encode(std::span<const S> in, std::span<C> out, const rounder<S>& r, threads t) {
  if (const std::size_t first = try_encode(in, out, r, t); first < in.size())
    throw std::domain_error("minifloat::encode: element " + std::to_string(first) + " has no code in " +
                            to_string(r.plan().fmt));
}
/// decode on up to t threads.
template <std::floating_point S, std::unsigned_integral C>
void decode(std::span<const C> in, std::span<S> out, const format& f, threads t) {
  detail::check_same_size(in.size(), out.size());
  if (auto p = conversion_problem<S>(f); !p.empty())
    throw std::invalid_argument("minifloat::format: " + p);
  detail::for_each_chunk(in.size(), t, [&](std::size_t, std::size_t start, std::size_t n) {
    decode(in.subspan(start, n), out.subspan(start, n), f);
  });
}

}  // namespace minifloat
