// python/src/cuda/module.cpp — the extension module minifloat._cuda_kernels, whose Python face is
// minifloat/_cuda.py (a module and an extension of one name cannot sit side by side): quantize,
// encode and decode of device memory through the kernels of kernels.cu (launch.hpp). The same
// format and option tuples as minifloat._core (binding.hpp's to_format / to_options and name
// tables), plus the stream (torch.cuda.current_stream().cuda_stream) and an optional grid
// (0 = automatic) that tests use to show that results do not depend on it. Compiled by the host
// compiler: nvcc sees no pybind11 header. The CUDA runtime is linked statically, so importing
// this module needs no libcudart and no driver; a call without a usable driver or device raises
// RuntimeError.
#include <pybind11/stl.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "../binding.hpp"
#include "../block_tuples.hpp"
#include "launch.hpp"

namespace minifloat::python {

namespace {

cuda::launch_config config(std::uintptr_t stream, unsigned blocks, unsigned threads) {
  return {stream, blocks, threads};
}

template <class S>
py::object quantize_typed(std::uintptr_t in, std::uintptr_t out, std::size_t n, const format& f,
                          const rounding_options& o, bool want_stats, const cuda::launch_config& l) {
  const rounder<S> r(f, o);  // validates (std::invalid_argument naming the field) before any launch
  rounding_stats stats;
  {
    py::gil_scoped_release unlocked;
    cuda::quantize(at<const S>(in), at<S>(out), n, r, l, want_stats ? &stats : nullptr);
  }
  if (!want_stats) return py::none();
  return py::make_tuple(stats.values, stats.overflows, stats.underflows, stats.nans, stats.infinities);
}

template <class S>
std::size_t encode_typed(std::uintptr_t in, std::uintptr_t out, std::size_t n, int code_bytes, const format& f,
                         const rounding_options& o, const cuda::launch_config& l) {
  const rounder<S> r(f, o);
  py::gil_scoped_release unlocked;
  switch (code_bytes) {
    case 1: return cuda::try_encode(at<const S>(in), at<std::uint8_t>(out), n, r, l);
    case 2: return cuda::try_encode(at<const S>(in), at<std::uint16_t>(out), n, r, l);
    case 4: return cuda::try_encode(at<const S>(in), at<std::uint32_t>(out), n, r, l);
    case 8: return cuda::try_encode(at<const S>(in), at<std::uint64_t>(out), n, r, l);
  }
  throw std::invalid_argument("minifloat._cuda.encode: code_bytes = " + std::to_string(code_bytes) +
                              " is not 1, 2, 4 or 8");
}

template <class S>
void decode_typed(std::uintptr_t in, int code_bytes, std::uintptr_t out, std::size_t n, const format& f,
                  const cuda::launch_config& l) {
  py::gil_scoped_release unlocked;
  switch (code_bytes) {
    case 1: return cuda::decode(at<const std::uint8_t>(in), at<S>(out), n, f, l);
    case 2: return cuda::decode(at<const std::uint16_t>(in), at<S>(out), n, f, l);
    case 4: return cuda::decode(at<const std::uint32_t>(in), at<S>(out), n, f, l);
    case 8: return cuda::decode(at<const std::uint64_t>(in), at<S>(out), n, f, l);
  }
  throw std::invalid_argument("minifloat._cuda.decode: code_bytes = " + std::to_string(code_bytes) +
                              " is not 1, 2, 4 or 8");
}

py::object quantize_blocks_typed(std::uintptr_t in, std::uintptr_t out, std::size_t before, std::size_t length,
                                 std::size_t after, const block_format& f, const block_options& o, bool want_stats,
                                 const cuda::launch_config& l) {
  f.validate();  // std::invalid_argument naming the field, before any launch
  (void)rounder<float>(f.element, {o.mode, o.on_overflow, o.random_bits, o.seed, o.index});
  block_stats stats;
  {
    py::gil_scoped_release unlocked;
    cuda::quantize_blocks(at<const float>(in), at<float>(out), before, length, after, f, o, l,
                          want_stats ? &stats : nullptr);
  }
  if (!want_stats) return py::none();
  return stats_tuple(stats);
}

}  // namespace

}  // namespace minifloat::python

PYBIND11_MODULE(_cuda_kernels, m) {
  namespace py = pybind11;
  using namespace minifloat::python;
  m.doc() = "minifloat's CUDA kernels on device pointers (use minifloat._cuda, not this module)";

  m.def("device_count", &minifloat::cuda::device_count, "CUDA devices the runtime sees (0 without a driver)");
  m.def("runtime_problem", &minifloat::cuda::runtime_problem,
        "why no kernel can run here (the CUDA runtime's error), or '' when one can");
  m.def("runtime_version", &minifloat::cuda::runtime_version);
  m.def("driver_version", &minifloat::cuda::driver_version);

  m.def(
      "quantize",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t n, bool is_double, const format_tuple& f,
         const options_tuple& o, bool want_stats, std::uintptr_t stream, unsigned blocks, unsigned threads) {
        const auto l = config(stream, blocks, threads);
        return is_double ? quantize_typed<double>(in, out, n, to_format(f), to_options(o), want_stats, l)
                         : quantize_typed<float>(in, out, n, to_format(f), to_options(o), want_stats, l);
      },
      py::arg("in_ptr"), py::arg("out_ptr"), py::arg("n"), py::arg("is_double"), py::arg("format"),
      py::arg("options"), py::arg("want_stats"), py::arg("stream"), py::arg("blocks") = 0u, py::arg("threads") = 0u);
  m.def(
      "encode",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t n, bool is_double, int code_bytes, const format_tuple& f,
         const options_tuple& o, std::uintptr_t stream, unsigned blocks, unsigned threads) {
        const auto l = config(stream, blocks, threads);
        return is_double ? encode_typed<double>(in, out, n, code_bytes, to_format(f), to_options(o), l)
                         : encode_typed<float>(in, out, n, code_bytes, to_format(f), to_options(o), l);
      },
      py::arg("in_ptr"), py::arg("out_ptr"), py::arg("n"), py::arg("is_double"), py::arg("code_bytes"),
      py::arg("format"), py::arg("options"), py::arg("stream"), py::arg("blocks") = 0u, py::arg("threads") = 0u);
  m.def(
      "quantize_blocks",
      [](std::uintptr_t in, std::uintptr_t out, std::size_t before, std::size_t length, std::size_t after,
         const block_format_tuple& f, const block_options_tuple& o, bool want_stats, std::uintptr_t stream,
         unsigned blocks, unsigned threads) {
        return quantize_blocks_typed(in, out, before, length, after, to_block_format(f), to_block_options(o), want_stats,
                                     config(stream, blocks, threads));
      },
      py::arg("in_ptr"), py::arg("out_ptr"), py::arg("before"), py::arg("length"), py::arg("after"), py::arg("format"),
      py::arg("options"), py::arg("want_stats"), py::arg("stream"), py::arg("blocks") = 0u, py::arg("threads") = 0u);
  m.def(
      "decode",
      [](std::uintptr_t in, int code_bytes, std::uintptr_t out, std::size_t n, bool is_double, const format_tuple& f,
         std::uintptr_t stream, unsigned blocks, unsigned threads) {
        const auto l = config(stream, blocks, threads);
        if (is_double) decode_typed<double>(in, code_bytes, out, n, to_format(f), l);
        else decode_typed<float>(in, code_bytes, out, n, to_format(f), l);
      },
      py::arg("in_ptr"), py::arg("code_bytes"), py::arg("out_ptr"), py::arg("n"), py::arg("is_double"),
      py::arg("format"), py::arg("stream"), py::arg("blocks") = 0u, py::arg("threads") = 0u);
}
