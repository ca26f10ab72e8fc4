// python/src/module.cpp — the extension module minifloat._core: formats, rounding, codes and the
// QPyTorch-compatible quantizer (storage.cpp binds the storage layer). A thin layer over
// minifloat/bulk.hpp, format_name.hpp and compat/qtorch.hpp; see binding.hpp for the conventions.
#include <pybind11/stl.h>

#include <unistd.h>  // gettid, for the test hook piece_threads

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <minifloat/bulk.hpp>
#include <minifloat/compat/qtorch.hpp>
#include <minifloat/format_name.hpp>
#include <minifloat/random.hpp>
#include <minifloat/version.hpp>

#include "binding.hpp"

namespace minifloat::python {

namespace {


template <class S>
py::object quantize_typed(std::uintptr_t in, std::uintptr_t out, std::size_t n, const format& f,
                          const rounding_options& o, int threads, bool want_stats) {
  const rounder<S> r(f, o);  // validates before anything is written
  std::vector<rounding_stats> stats(worker_count(n, threads));  // one per thread: no shared counters
  {
    py::gil_scoped_release unlocked;
    for_ranges(n, threads, [&](std::size_t worker, std::size_t start, std::size_t count) {
      const auto source = span_at<const S>(in, n).subspan(start, count);
      const auto target = span_at<S>(out, n).subspan(start, count);
      if (want_stats) quantize(source, target, r.advanced(start), stats[worker]);  // adds to the counts
      else quantize(source, target, r.advanced(start));
    });
  }
  if (!want_stats) return py::none();
  rounding_stats total;
  for (const auto& s : stats) total += s;
  return py::make_tuple(total.values, total.overflows, total.underflows, total.nans, total.infinities);
}

template <class S, class C>
std::size_t encode_typed(std::uintptr_t in, std::uintptr_t out, std::size_t n, const format& f,
                         const rounding_options& o, int threads) {
  const rounder<S> r(f, o);
  if (f.bit_width() > static_cast<int>(sizeof(C) * 8))
    throw std::invalid_argument("minifloat.encode: codes of " + to_string(f) + " do not fit " +
                                std::to_string(sizeof(C) * 8) + "-bit integers");
  std::vector<std::size_t> first_bad(worker_count(n, threads), n);  // per thread: the first value without a code
  py::gil_scoped_release unlocked;
  for_ranges(n, threads, [&](std::size_t worker, std::size_t start, std::size_t count) {
    const std::size_t k = try_encode(span_at<const S>(in, n).subspan(start, count),
                                     span_at<C>(out, n).subspan(start, count), r.advanced(start));
    if (k < count) first_bad[worker] = std::min(first_bad[worker], start + k);
  });
  return *std::min_element(first_bad.begin(), first_bad.end());
}

template <class S>
std::size_t encode_dispatch(std::uintptr_t in, std::uintptr_t out, std::size_t n, int code_bytes, const format& f,
                            const rounding_options& o, int threads) {
  switch (code_bytes) {
    case 1: return encode_typed<S, std::uint8_t>(in, out, n, f, o, threads);
    case 2: return encode_typed<S, std::uint16_t>(in, out, n, f, o, threads);
    case 4: return encode_typed<S, std::uint32_t>(in, out, n, f, o, threads);
    case 8: return encode_typed<S, std::uint64_t>(in, out, n, f, o, threads);
  }
  throw std::invalid_argument("minifloat.encode: code size " + std::to_string(code_bytes) + " is not 1, 2, 4 or 8 bytes");
}

template <class S, class C>
void decode_typed(std::uintptr_t in, std::uintptr_t out, std::size_t n, const format& f, int threads) {
  if (auto p = conversion_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat.format: " + p);
  py::gil_scoped_release unlocked;
  for_ranges(n, threads, [&](std::size_t, std::size_t start, std::size_t count) {
    decode(span_at<const C>(in, n).subspan(start, count), span_at<S>(out, n).subspan(start, count), f);
  });
}

template <class S>
void decode_dispatch(std::uintptr_t in, int code_bytes, std::uintptr_t out, std::size_t n, const format& f, int threads) {
  switch (code_bytes) {
    case 1: return decode_typed<S, std::uint8_t>(in, out, n, f, threads);
    case 2: return decode_typed<S, std::uint16_t>(in, out, n, f, threads);
    case 4: return decode_typed<S, std::uint32_t>(in, out, n, f, threads);
    case 8: return decode_typed<S, std::uint64_t>(in, out, n, f, threads);
  }
  throw std::invalid_argument("minifloat.decode: code size " + std::to_string(code_bytes) + " is not 1, 2, 4 or 8 bytes");
}

}  // namespace

void bind_core(py::module_& m) {
  m.attr("version") = std::string(version);
  m.attr("rounding_names") = rounding_names;
  m.attr("overflow_names") = overflow_names;
  m.attr("specials_names") = specials_names;

  py::list constants;
  for (const auto& [name, f] : {std::pair{"binary32", binary32}, {"binary16", binary16}, {"bfloat16", bfloat16},
                                {"e5m2", e5m2}, {"e4m3", e4m3}, {"fp_6_9_0", fp_6_9_0}, {"fp_4_3_4", fp_4_3_4},
                                {"fp_5_2_0", fp_5_2_0}, {"e4m3fnuz", e4m3fnuz}, {"e5m2fnuz", e5m2fnuz},
                                {"e2m3", e2m3}, {"e3m2", e3m2}, {"e2m1", e2m1}, {"int8_mx", int8_mx}})
    constants.append(py::make_tuple(name, to_tuple(f)));
  m.attr("named_formats") = constants;
  py::list parse_names;
  for (const auto& [name, f] : detail::named_formats) parse_names.append(py::make_tuple(std::string(name), to_tuple(f)));
  m.attr("parse_names") = parse_names;

  m.def("fold_seed", [](std::uint64_t seed, const std::vector<std::uint64_t>& keys) {
    for (const std::uint64_t key : keys) seed = fold_seed(seed, key);
    return seed;
  });
  m.def("format_problem", [](const format_tuple& t) { return to_format(t).problem(); });
  m.def("conversion_problem", [](const format_tuple& t, bool is_double) {
    const format f = to_format(t);
    return is_double ? conversion_problem<double>(f) : conversion_problem<float>(f);
  });
  m.def("format_string", [](const format_tuple& t) { return to_string(to_format(t)); });
  m.def("parse_format", [](const std::string& name) { return to_tuple(parse_format(name)); });
  m.def("format_constants", [](const format_tuple& t) {
    const format f = to_format(t);
    f.validate();
    py::dict d;
    d["bit_width"] = f.bit_width();
    d["emax"] = f.emax();
    d["emin"] = f.emin();
    d["max_finite"] = f.max_finite();
    d["min_normal"] = f.min_normal();
    d["min_subnormal"] = f.min_subnormal();
    d["min_positive"] = f.min_positive();
    d["epsilon"] = f.epsilon();
    d["overflow_threshold"] = f.overflow_threshold();
    d["has_infinity"] = f.has_infinity();
    d["has_nan"] = f.has_nan();
    return d;
  });

  m.def("quantize", [](std::uintptr_t in, std::uintptr_t out, std::size_t n, bool is_double, const format_tuple& f,
                       const options_tuple& o, int threads, bool want_stats) {
    return is_double ? quantize_typed<double>(in, out, n, to_format(f), to_options(o), threads, want_stats)
                     : quantize_typed<float>(in, out, n, to_format(f), to_options(o), threads, want_stats);
  });
  m.def("check_options", [](const format_tuple& f, const options_tuple& o, bool is_double) {
    if (is_double) (void)rounder<double>(to_format(f), to_options(o));
    else (void)rounder<float>(to_format(f), to_options(o));  // rounder: E8M0 from float goes through double
  });
  m.def("encode", [](std::uintptr_t in, std::uintptr_t out, std::size_t n, bool is_double, int code_bytes,
                     const format_tuple& f, const options_tuple& o, int threads) {
    return is_double ? encode_dispatch<double>(in, out, n, code_bytes, to_format(f), to_options(o), threads)
                     : encode_dispatch<float>(in, out, n, code_bytes, to_format(f), to_options(o), threads);
  });
  m.def("decode", [](std::uintptr_t in, int code_bytes, std::uintptr_t out, std::size_t n, bool is_double,
                     const format_tuple& f, int threads) {
    if (is_double) decode_dispatch<double>(in, code_bytes, out, n, to_format(f), threads);
    else decode_dispatch<float>(in, code_bytes, out, n, to_format(f), threads);
  });

  m.def("qtorch_problem", &compat::qtorch_problem);
  m.def("qtorch_quantize", [](std::uintptr_t in, std::uintptr_t out, std::size_t n, int exp_bits, int man_bits,
                              bool stochastic, std::uint64_t seed, std::uint64_t index, int threads) {
    const compat::qtorch_quantizer q(exp_bits, man_bits, stochastic, seed, index);
    py::gil_scoped_release unlocked;
    for_ranges(n, threads, [&](std::size_t, std::size_t start, std::size_t count) {
      q.advanced(start).apply(span_at<const float>(in, n).subspan(start, count), span_at<float>(out, n).subspan(start, count));
    });
  });

  // For the tests: the core's scalar entry (rounder::operator(), not the SIMD bulk kernels), one
  // element at a time with element index o.index + i, counting as the scalar core counts.
  m.def("scalar_quantize", [](std::uintptr_t in, std::uintptr_t out, std::size_t n, bool is_double,
                              const format_tuple& f, const options_tuple& o) {
    rounding_stats st;
    const auto run = [&](auto zero) {
      using S = decltype(zero);
      const rounder<S> r(to_format(f), to_options(o));
      for (std::size_t i = 0; i < n; ++i) at<S>(out)[i] = r(at<const S>(in)[i], r.first_index() + i, st);
    };
    if (is_double) run(0.0);
    else run(0.0f);
    return py::make_tuple(st.values, st.overflows, st.underflows, st.nans, st.infinities);
  });

  // For the tests: which OS threads for_ranges runs its pieces on. Returns the thread id
  // (gettid) that took each elements_per_piece piece of n elements; piece `failing_piece` (none
  // when negative) throws std::invalid_argument instead. Each piece waits (at most 5 s in all)
  // until min(threads, pieces) distinct threads have taken one, so that every thread of the
  // team shows up even when one could take all pieces before the others wake.
  m.def("piece_threads", [](std::size_t n, int threads, long failing_piece) {
    std::vector<long> owner((n + elements_per_piece - 1) / elements_per_piece, 0);
    const std::size_t expected = worker_count(n, threads);
    std::mutex seen_lock;
    std::set<long> seen;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    py::gil_scoped_release unlocked;
    for_ranges(n, threads, [&](std::size_t, std::size_t start, std::size_t) {
      const std::size_t piece = start / elements_per_piece;
      if (static_cast<long>(piece) == failing_piece) throw std::invalid_argument("piece " + std::to_string(piece) + " failed");
      owner[piece] = gettid();
      const auto seen_enough = [&] {
        const std::lock_guard hold(seen_lock);
        seen.insert(owner[piece]);
        return seen.size() >= expected;
      };
      while (!seen_enough() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
    return owner;
  });

  // For bench/bench_python.py: the C++ bulk kernel on the same buffers, timed in C++ (one thread).
  m.def("time_bulk_quantize", [](std::uintptr_t in, std::uintptr_t out, std::size_t n, const format_tuple& f,
                                 const options_tuple& o) {
    const rounder<float> r(to_format(f), to_options(o));
    py::gil_scoped_release unlocked;
    const auto t0 = std::chrono::steady_clock::now();
    quantize(span_at<const float>(in, n), span_at<float>(out, n), r);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
}

void bind_distributed(py::module_& m);  // distributed.cpp: the communication hook's passes

}  // namespace minifloat::python

PYBIND11_MODULE(_core, m) {
  m.doc() = "minifloat's C++ kernels (use the minifloat package, not this module)";
  minifloat::python::bind_core(m);
  minifloat::python::bind_storage(m);
  minifloat::python::bind_training(m);
  minifloat::python::bind_containers(m);
  minifloat::python::bind_blocks(m);
  minifloat::python::bind_operands(m);
  minifloat::python::bind_distributed(m);
}
