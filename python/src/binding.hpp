// python/src/binding.hpp — what both translation units of the extension share: raw buffers
// handed over by the Python layer, the format/option tuples it passes, and the thread split.
//
// The Python layer (python/minifloat/) checks dtypes, shapes, devices and contiguity and passes
// data pointers and element counts; nothing here makes a numeric decision — every rounding,
// code, packing and optimizer rule is the headers'. Work is split over threads by element
// range only; every kernel called is keyed by element index, so results are bit-identical for
// any thread count.
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <thread>
#include <tuple>
#include <vector>

#include <minifloat/format.hpp>
#include <minifloat/round.hpp>

namespace minifloat::python {

namespace py = pybind11;

/// A data pointer as Python's tensor.data_ptr() / ndarray.ctypes.data gives it.
template <class T>
T* at(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}
template <class T>
std::span<T> span_at(std::uintptr_t address, std::size_t count) {
  return {at<T>(address), count};
}

/// (exponent_bits, mantissa_bits, bias, subnormals, specials index) as the Python Format holds it.
using format_tuple = std::tuple<int, int, int, bool, int>;

inline format to_format(const format_tuple& t) {
  const auto [e, m, bias, subnormals, encoding] = t;
  if (encoding < 0 || encoding > static_cast<int>(specials::all_finite))
    throw std::invalid_argument("minifloat.format: specials index " + std::to_string(encoding) + " is unknown");
  return format{e, m, bias, subnormals, static_cast<specials>(encoding)};
}

/// (mode index, overflow index, random_bits, seed, index) as the Python layer passes them.
using options_tuple = std::tuple<int, int, int, std::uint64_t, std::uint64_t>;

inline rounding_options to_options(const options_tuple& t) {
  const auto [mode, on_overflow, random_bits, seed, index] = t;
  if (mode < 0 || mode > static_cast<int>(rounding::stochastic))
    throw std::invalid_argument("minifloat: rounding index " + std::to_string(mode) + " is unknown");
  if (on_overflow < 0 || on_overflow > static_cast<int>(overflow::infinity))
    throw std::invalid_argument("minifloat: overflow index " + std::to_string(on_overflow) + " is unknown");
  return {static_cast<rounding>(mode), static_cast<overflow>(on_overflow), random_bits, seed, index};
}

/// Below this many elements a call stays on the calling thread.
inline constexpr std::size_t min_elements_per_thread = std::size_t{1} << 16;

/// How many ranges for_ranges cuts n elements into with `threads` threads.
inline std::size_t range_count(std::size_t n, int threads) {
  const std::size_t most = std::max<std::size_t>(1, n / min_elements_per_thread);
  return std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), most);
}

/// Calls work(range, start, count) over [0, n) cut into range_count(n, threads) contiguous
/// ranges whose starts are multiples of 64, one thread each (kernels keyed by element index give
/// the same bits for any cut). The first exception thrown by any range is rethrown after every
/// thread has finished.
template <class Work>
void for_ranges(std::size_t n, int threads, Work work) {
  const std::size_t t = range_count(n, threads);
  if (t <= 1) {
    work(std::size_t{0}, std::size_t{0}, n);
    return;
  }
  const std::size_t step = ((n + t - 1) / t + 63) / 64 * 64;
  std::vector<std::exception_ptr> errors(t);
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  const auto run = [&](std::size_t k) {
    const std::size_t start = k * step;
    if (start >= n) return;
    try {
      work(k, start, std::min(step, n - start));
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  for (std::size_t k = 1; k < t; ++k) pool.emplace_back(run, k);
  run(0);
  for (auto& thread : pool) thread.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void bind_core(py::module_& m);
void bind_storage(py::module_& m);

}  // namespace minifloat::python
