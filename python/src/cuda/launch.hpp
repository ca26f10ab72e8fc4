// python/src/cuda/launch.hpp — the CUDA kernels of minifloat._cuda as plain C++ functions.
//
// kernels.cu (nvcc) defines them; module.cpp (the host compiler, with pybind11) calls them, so
// nvcc never compiles pybind11 and the binding's glue never sees a CUDA header. Pointers are
// device pointers; every call is queued on `stream` without a host round trip, except where a
// result must be read back (statistics, the first value without a code) — then the call waits
// for the stream. Element i is rounded with element index r.first_index() + i, as the CPU bulk
// kernels do, so stochastic rounding draws the same bits for any grid. CUDA errors (no driver,
// no device, a bad pointer) are thrown as std::runtime_error naming the call.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

#include <minifloat/block.hpp>
#include <minifloat/format.hpp>
#include <minifloat/round.hpp>
#include <minifloat/stats.hpp>

namespace minifloat::cuda {

/// Where and how a call runs: the stream as torch.cuda.current_stream().cuda_stream gives it
/// (0: the legacy default stream) and an optional grid, for tests that vary it.
struct launch_config {
  std::uintptr_t stream = 0;
  unsigned blocks = 0;   ///< 0: 8 blocks per multiprocessor of the current device, fewer for small calls
  unsigned threads = 0;  ///< threads per block, 1..1024; 0: 256
};

/// out[i] = in[i] rounded by r; with `stats`, adds the pass's counts to it (waits for the stream).
/// In place (in == out) is allowed.
template <std::floating_point S>
void quantize(const S* in, S* out, std::size_t n, const rounder<S>& r, const launch_config& l, rounding_stats* stats);

/// out[i] = code of in[i] rounded by r. Returns n, or for an all_finite format (the only kind
/// with values that have no code) the smallest index whose value has none (waits for the
/// stream only then). std::invalid_argument when the format's codes do not fit C.
template <std::floating_point S, std::unsigned_integral C>
std::size_t try_encode(const S* in, C* out, std::size_t n, const rounder<S>& r, const launch_config& l);

/// out[i] = the value of code in[i] in f (bits above the format's width ignored).
/// std::invalid_argument when S cannot hold f's values.
template <std::floating_point S, std::unsigned_integral C>
void decode(const C* in, S* out, std::size_t n, const format& f, const launch_config& l);

/// out = in fake-quantized to the block format f (block.hpp's quantize_blocks), with blocks along
/// the middle axis of a C-order (before, length, after) array; element i (flat) draws with index
/// o.index + i. NVFP4 with o.tensor_scale = 0 takes the tensor's finite amax (waits for the
/// stream). With `stats`, adds the call's counts (waits for the stream). In place is allowed.
void quantize_blocks(const float* in, float* out, std::size_t before, std::size_t length, std::size_t after,
                     const block_format& f, const block_options& o, const launch_config& l, block_stats* stats);

/// How many CUDA devices the runtime sees: 0 without a driver or a device (never throws).
int device_count();
/// Why no kernel can run here (the CUDA runtime's error), or an empty string when one can.
std::string runtime_problem();
/// The CUDA runtime version this module was built with and the driver's (0 without a driver).
int runtime_version();
int driver_version();

}  // namespace minifloat::cuda
