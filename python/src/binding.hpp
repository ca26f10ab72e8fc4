// python/src/binding.hpp — what both translation units of the extension share: raw buffers
// handed over by the Python layer, the format/option tuples it passes, and the thread split.
//
// The Python layer (python/minifloat/) checks dtypes, shapes, devices and contiguity and passes
// data pointers and element counts; nothing here makes a numeric decision — every rounding,
// code, packing and optimizer rule is the headers'. Work is split over torch's OpenMP threads by
// element range only; every kernel called is keyed by element index, so results are bit-identical for
// any thread count and any assignment of pieces to threads.
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <span>
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

/// The names Python accepts for each enumerator, in enumerator order: the Python layer looks
/// names up in these tables (exported as _core.rounding_names, ...), so a mode, policy or
/// encoding added to the headers needs a name here and nothing in Python.
inline const std::vector<std::string> rounding_names{"nearest_even", "nearest_away", "toward_zero", "stochastic",
                                                     "toward_positive", "toward_negative", "to_odd"};
inline const std::vector<std::string> overflow_names{"saturate", "infinity"};
inline const std::vector<std::string> specials_names{"ieee", "nan_only", "all_finite", "fnuz", "unsigned_exponent"};

/// The enumerator at `index` of a name table; std::invalid_argument when there is none.
template <class E>
E enumerator(int index, const std::vector<std::string>& names, const char* what) {
  if (index < 0 || static_cast<std::size_t>(index) >= names.size())
    throw std::invalid_argument(std::string("minifloat: ") + what + " index " + std::to_string(index) + " is unknown");
  return static_cast<E>(index);
}

/// (exponent_bits, mantissa_bits, bias, subnormals, specials index) as the Python Format holds it.
using format_tuple = std::tuple<int, int, int, bool, int>;

inline format to_format(const format_tuple& t) {
  const auto [e, m, bias, subnormals, encoding] = t;
  return format{e, m, bias, subnormals, enumerator<specials>(encoding, specials_names, "specials")};
}
inline format_tuple to_tuple(const format& f) {
  return {f.exponent_bits, f.mantissa_bits, f.exponent_bias, f.subnormals, static_cast<int>(f.encoding)};
}

/// (mode index, overflow index, random_bits, seed, index) as the Python layer passes them.
using options_tuple = std::tuple<int, int, int, std::uint64_t, std::uint64_t>;

inline rounding_options to_options(const options_tuple& t) {
  const auto [mode, on_overflow, random_bits, seed, index] = t;
  return {enumerator<rounding>(mode, rounding_names, "rounding"), enumerator<overflow>(on_overflow, overflow_names, "overflow"),
          random_bits, seed, index};
}

/// Elements per piece of work handed to a thread (a multiple of 64).
inline constexpr std::size_t elements_per_piece = std::size_t{1} << 16;

/// How many threads for_ranges uses for n elements when `threads` are allowed: one per piece at most.
inline std::size_t worker_count(std::size_t n, int threads) {
  const std::size_t pieces = std::max<std::size_t>(1, (n + elements_per_piece - 1) / elements_per_piece);
  return std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), pieces);
}

/// Calls work(worker, start, count) for pieces of elements_per_piece elements covering [0, n),
/// with worker < worker_count(n, threads), on the threads of an OpenMP parallel region opened by
/// the calling thread (which takes part). The extension is built with GCC's OpenMP, the runtime
/// (libgomp) Debian's PyTorch runs its intra-op parallelism on, and opens its region as
/// at::parallel_for does (no num_threads clause: the team is the size torch.set_num_threads
/// set): libgomp keeps one pool of worker threads per calling thread, so this call runs on the
/// very threads torch's own parallel ops just used, which spin-wait for the next region for a
/// while after each one. Threads started for the call instead had to win a core from those
/// spinning workers, and on a machine with as many cores as torch threads often waited a whole
/// scheduler slice (docs/performance.md, "Python binding").
///
/// The first `workers` members of the team to arrive get a worker number and take the next
/// piece as they finish one, so a thread that gets no core on a busy machine holds up no one,
/// and a smaller team (a call from inside a parallel region) still covers every piece. Kernels
/// keyed by element index give the same bits whichever thread takes which piece; per-worker
/// results (statistics) are combined by the caller. No exception leaves the region (that
/// would end the process): the first one thrown stops the taking of pieces and is rethrown
/// after the region has closed.
template <class Work>
void for_ranges(std::size_t n, int threads, Work work) {
  const std::size_t workers = worker_count(n, threads);
  if (workers <= 1) {
    work(std::size_t{0}, std::size_t{0}, n);
    return;
  }
  std::atomic<std::size_t> next_worker{0};
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;  // written by the one thread that set `failed`
  const auto run = [&](std::size_t worker) {
    try {
      for (std::size_t start; !failed.load(std::memory_order_relaxed) &&
                              (start = next.fetch_add(elements_per_piece, std::memory_order_relaxed)) < n;)
        work(worker, start, std::min(elements_per_piece, n - start));
    } catch (...) {
      if (!failed.exchange(true, std::memory_order_relaxed)) first_error = std::current_exception();
    }
  };
#pragma omp parallel
  {
    const std::size_t worker = next_worker.fetch_add(1, std::memory_order_relaxed);
    if (worker < workers) run(worker);
  }
  if (first_error) std::rethrow_exception(first_error);  // the region's closing barrier ordered the write
}

void bind_core(py::module_& m);
void bind_storage(py::module_& m);
void bind_training(py::module_& m);
void bind_containers(py::module_& m);
void bind_blocks(py::module_& m);
void bind_operands(py::module_& m);

}  // namespace minifloat::python
