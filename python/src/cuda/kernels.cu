// python/src/cuda/kernels.cu — quantize, encode and decode on the GPU, from the same headers as
// the CPU paths: every element goes through the core's own per-element functions
// (detail::round_bits, detail::count, detail::code_of_rounded, detail::bits_of_code); this file
// holds only grid-stride loops, the mode dispatch, counters and launches.
//
// Stochastic rounding: element i draws counter_rng word (index + i), as on the CPU. One ARS
// block holds the draws of 4 consecutive float indices (2 double ones), so a thread takes one
// block's elements and computes the block once instead of once per element; which element gets
// which word follows counter_rng::bits32 / bits64 (random.hpp), so the bits are the CPU's for
// any grid and any alignment of `index`.
//
// float data for a format that rounds_through_double (E8M0) is rounded by the double plan,
// widened exactly on load and narrowed exactly on store, as rounder<float> and the bulk
// kernels do.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#include <minifloat/encode.hpp>
#include <minifloat/round.hpp>

#include "launch.hpp"

namespace minifloat::cuda {

namespace {

using counter = unsigned long long;  // what atomicAdd / atomicMin take
constexpr int stat_fields = 5;       // rounding_stats: values, overflows, underflows, nans, infinities

void check(cudaError_t e, const char* who) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("minifloat._cuda.") + who + ": CUDA error " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}

/// Elements a thread loads per pass of the deterministic modes (round_each).
constexpr unsigned elements_per_thread = 4;

/// Source words drawn per ARS block: four 32-bit draws for float, two 64-bit ones for double.
template <class S>
constexpr unsigned draws_per_block = sizeof(S) == 4 ? 4 : 2;

/// Word `w` of an ARS block as counter_rng::bits32 (float) or bits64 (double) reads it.
template <class S>
__device__ typename source_layout<S>::bits block_word(const detail::block128& b, unsigned w) {
  if constexpr (sizeof(S) == 4) return b.w[w];
  else return w == 0 ? b.low() : b.high();
}

/// detail::round_one without its stochastic case, whose draws round_each makes once per ARS
/// block: the core's round_bits for the plan's deterministic mode. Keeps the generator's code out
/// of the deterministic kernels (their loop holds elements_per_thread copies of this).
template <class S>
__device__ typename source_layout<S>::bits round_deterministic(const rounding_plan<S>& p,
                                                               typename source_layout<S>::bits u) {
  using bits = typename source_layout<S>::bits;
  using detail::lane_path;
  switch (p.mode) {
    case rounding::nearest_even: return detail::round_bits<rounding::nearest_even, lane_path::any>(p, u, bits{});
    case rounding::nearest_away: return detail::round_bits<rounding::nearest_away, lane_path::any>(p, u, bits{});
    case rounding::toward_zero: return detail::round_bits<rounding::toward_zero, lane_path::any>(p, u, bits{});
    case rounding::toward_positive: return detail::round_bits<rounding::toward_positive, lane_path::any>(p, u, bits{});
    case rounding::toward_negative: return detail::round_bits<rounding::toward_negative, lane_path::any>(p, u, bits{});
    case rounding::to_odd: return detail::round_bits<rounding::to_odd, lane_path::any>(p, u, bits{});
    case rounding::stochastic: break;  // never here: round_each's stochastic branch
  }
  return u;
}

/// Calls visit(i, u, rounded) for each element i < n this thread owns in a grid-stride loop: u is
/// the source bits of element i (in[i] converted to S, exactly), rounded its bits after rounding
/// by r with element index r.first_index() + i. A thread takes units (work_units): for stochastic
/// rounding the elements of one ARS block, else elements_per_thread elements a block apart.
template <bool Stochastic, class T, class S, class Visit>
__device__ void round_each(const T* in, std::size_t n, const rounder<S>& r, Visit& visit) {
  using bits = typename source_layout<S>::bits;
  const rounding_plan<S>& p = r.plan();
  const std::uint64_t first = r.first_index();
  if constexpr (!Stochastic) {
    // Each pass loads elements_per_thread values (a block's worth apart, so every load of a warp
    // is coalesced) before rounding and storing any: independent loads in flight, as a streaming
    // copy has. A loop that stored between loads could not overlap them, since out may be in.
    constexpr unsigned U = elements_per_thread;
    const std::size_t block_span = std::size_t{blockDim.x} * U;
    for (std::size_t base = std::size_t{blockIdx.x} * block_span + threadIdx.x; base < n;
         base += std::size_t{gridDim.x} * block_span) {
      bits u[U];
#pragma unroll
      for (unsigned j = 0; j < U; ++j) {
        const std::size_t i = base + std::size_t{j} * blockDim.x;
        u[j] = i < n ? std::bit_cast<bits>(static_cast<S>(in[i])) : bits{0};
      }
#pragma unroll
      for (unsigned j = 0; j < U; ++j) {
        const std::size_t i = base + std::size_t{j} * blockDim.x;
        if (i < n) visit(i, u[j], round_deterministic(p, u[j]));
      }
    }
  } else {
    constexpr unsigned G = draws_per_block<S>;
    constexpr std::uint64_t domain = sizeof(S) == 4 ? detail::domain_bits32 : detail::domain_bits64;
    const std::uint64_t head = first % G;  // indices of the first block before element 0
    const std::size_t units = (head + n + G - 1) / G;
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t k = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; k < units; k += stride) {
      const std::uint64_t start = first - head + k * G;  // element index of the block's word 0, mod 2^64
      const detail::block128 b = r.rng().block(start / G, domain);
#pragma unroll
      for (unsigned w = 0; w < G; ++w) {
        const std::size_t i = static_cast<std::size_t>(start + w - first);  // wraps for words before element 0
        if (i >= n) continue;
        const bits u = std::bit_cast<bits>(static_cast<S>(in[i]));
        visit(i, u, detail::round_bits<rounding::stochastic, detail::lane_path::any>(p, u, block_word<S>(b, w)));
      }
    }
  }
}

/// Adds a thread's counts into counts[0..5): per block in shared memory, then once per block
/// into global memory (any block size).
__device__ void add_counts(const rounding_stats& st, counter* counts) {
  __shared__ counter block_counts[stat_fields];
  if (threadIdx.x < stat_fields) block_counts[threadIdx.x] = 0;
  __syncthreads();
  const counter mine[stat_fields] = {st.values, st.overflows, st.underflows, st.nans, st.infinities};
  for (int f = 0; f < stat_fields; ++f)
    if (mine[f] != 0) atomicAdd(&block_counts[f], mine[f]);
  __syncthreads();
  if (threadIdx.x < stat_fields && block_counts[threadIdx.x] != 0) atomicAdd(&counts[threadIdx.x], block_counts[threadIdx.x]);
}

template <bool Stochastic, bool Count, class T, class S>
__global__ void quantize_kernel(const T* in, T* out, std::size_t n, const rounder<S> r, counter* counts) {
  rounding_stats st;
  auto store = [&](std::size_t i, typename source_layout<S>::bits u, typename source_layout<S>::bits rounded) {
    if constexpr (Count) detail::count(r.plan(), u, rounded, st);
    out[i] = static_cast<T>(std::bit_cast<S>(rounded));
  };
  round_each<Stochastic>(in, n, r, store);
  if constexpr (Count) add_counts(st, counts);
}

template <bool Stochastic, class T, class S, class C>
__global__ void encode_kernel(const T* in, C* out, std::size_t n, const rounder<S> r, counter* first_without_code) {
  const format f = r.plan().fmt;
  auto store = [&](std::size_t i, typename source_layout<S>::bits, typename source_layout<S>::bits rounded) {
    const code_result c = detail::code_of_rounded<S>(f, rounded);
    out[i] = static_cast<C>(c.code);
    if (!c.representable) atomicMin(first_without_code, counter{i});
  };
  round_each<Stochastic>(in, n, r, store);
}

template <class T, class S, class C>
__global__ void decode_kernel(const C* in, T* out, std::size_t n, const format f) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<T>(std::bit_cast<S>(detail::bits_of_code<S>(f, static_cast<std::uint64_t>(in[i]))));
}

/// What round_each hands one thread at a time: ARS blocks (stochastic) or elements_per_thread elements.
template <class S>
std::size_t work_units(std::size_t n, const rounder<S>& r) {
  if (r.plan().mode != rounding::stochastic) return (n + elements_per_thread - 1) / elements_per_thread;
  constexpr unsigned G = draws_per_block<S>;
  return (r.first_index() % G + n + G - 1) / G;
}

struct grid {
  unsigned blocks, threads;
  cudaStream_t stream;
};

/// The grid for `units` units of work: the caller's, or 256 threads per block and at most 8
/// blocks per multiprocessor (grid-stride loops cover the rest).
grid grid_for(std::size_t units, const launch_config& l, const char* who) {
  if (l.threads > 1024)
    throw std::invalid_argument(std::string("minifloat._cuda.") + who + ": threads = " + std::to_string(l.threads) +
                                " is more than 1024 per block");
  const unsigned threads = l.threads == 0 ? 256 : l.threads;
  unsigned blocks = l.blocks;
  if (blocks == 0) {
    int device = 0, multiprocessors = 0;
    check(cudaGetDevice(&device), who);
    check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device), who);
    const std::size_t needed = std::max<std::size_t>(1, (units + threads - 1) / threads);
    blocks = static_cast<unsigned>(std::min<std::size_t>(needed, std::size_t{8} * static_cast<unsigned>(multiprocessors)));
  }
  return {blocks, threads, reinterpret_cast<cudaStream_t>(l.stream)};
}

/// A few counters in device memory, allocated and freed in stream order.
class device_counters {
 public:
  device_counters(std::size_t count, counter initial, cudaStream_t stream, const char* who)
      : count_(count), stream_(stream), who_(who) {
    check(cudaMallocAsync(reinterpret_cast<void**>(&data_), count * sizeof(counter), stream), who);
    for (std::size_t k = 0; k < count; ++k) host_[k] = initial;
    const cudaError_t e = cudaMemcpyAsync(data_, host_, count * sizeof(counter), cudaMemcpyHostToDevice, stream);
    if (e != cudaSuccess) {
      cudaFreeAsync(data_, stream);
      check(e, who);
    }
  }
  device_counters(const device_counters&) = delete;
  device_counters& operator=(const device_counters&) = delete;
  ~device_counters() { cudaFreeAsync(data_, stream_); }
  counter* data() const { return data_; }
  /// Waits for the stream and returns the counters.
  const counter* read() {
    check(cudaMemcpyAsync(host_, data_, count_ * sizeof(counter), cudaMemcpyDeviceToHost, stream_), who_);
    check(cudaStreamSynchronize(stream_), who_);
    return host_;
  }

 private:
  counter* data_ = nullptr;
  counter host_[stat_fields] = {};
  std::size_t count_;
  cudaStream_t stream_;
  const char* who_;
};

template <class T, class S>
void quantize_with(const T* in, T* out, std::size_t n, const rounder<S>& r, const launch_config& l,
                   rounding_stats* stats) {
  const char* who = "quantize";
  const bool stochastic = r.plan().mode == rounding::stochastic;
  const std::size_t units = work_units(n, r);
  const grid g = grid_for(units, l, who);
  if (stats == nullptr) {
    if (stochastic) quantize_kernel<true, false><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, r, nullptr);
    else quantize_kernel<false, false><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, r, nullptr);
    check(cudaGetLastError(), who);
    return;
  }
  device_counters counts(stat_fields, 0, g.stream, who);
  if (stochastic) quantize_kernel<true, true><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, r, counts.data());
  else quantize_kernel<false, true><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, r, counts.data());
  check(cudaGetLastError(), who);
  const counter* c = counts.read();
  *stats += rounding_stats{c[0], c[1], c[2], c[3], c[4]};
}

template <class T, class S, class C>
std::size_t encode_with(const T* in, C* out, std::size_t n, const rounder<S>& r, const launch_config& l) {
  const char* who = "encode";
  const bool stochastic = r.plan().mode == rounding::stochastic;
  const std::size_t units = work_units(n, r);
  const grid g = grid_for(units, l, who);
  if (r.plan().fmt.encoding != specials::all_finite) {  // every rounded value has a code
    if (stochastic) encode_kernel<true><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, r, nullptr);
    else encode_kernel<false><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, r, nullptr);
    check(cudaGetLastError(), who);
    return n;
  }
  device_counters first(1, counter{n}, g.stream, who);
  if (stochastic) encode_kernel<true><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, r, first.data());
  else encode_kernel<false><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, r, first.data());
  check(cudaGetLastError(), who);
  return static_cast<std::size_t>(first.read()[0]);
}

template <class T, class S, class C>
void decode_with(const C* in, T* out, std::size_t n, const format& f, const launch_config& l) {
  const grid g = grid_for(n, l, "decode");
  decode_kernel<T, S><<<g.blocks, g.threads, 0, g.stream>>>(in, out, n, f);
  check(cudaGetLastError(), "decode");
}

}  // namespace

template <std::floating_point S>
void quantize(const S* in, S* out, std::size_t n, const rounder<S>& r, const launch_config& l, rounding_stats* stats) {
  if (n == 0) return;
  if constexpr (sizeof(S) == 4)
    if (r.widened()) return quantize_with<S, double>(in, out, n, r.through_double(), l, stats);
  quantize_with<S, S>(in, out, n, r, l, stats);
}

template <std::floating_point S, std::unsigned_integral C>
std::size_t try_encode(const S* in, C* out, std::size_t n, const rounder<S>& r, const launch_config& l) {
  const format& f = r.plan().fmt;
  if (f.bit_width() > static_cast<int>(sizeof(C) * 8))
    throw std::invalid_argument("minifloat._cuda.encode: codes of " + to_string(f) + " do not fit " +
                                std::to_string(sizeof(C) * 8) + "-bit integers");
  if (n == 0) return 0;
  if constexpr (sizeof(S) == 4)
    if (r.widened()) return encode_with<S, double, C>(in, out, n, r.through_double(), l);
  return encode_with<S, S, C>(in, out, n, r, l);
}

template <std::floating_point S, std::unsigned_integral C>
void decode(const C* in, S* out, std::size_t n, const format& f, const launch_config& l) {
  if constexpr (sizeof(S) == 4) {
    if (rounds_through_double<S>(f)) {  // E8M0: every value is a float, 2^-127 a subnormal; via double
      if (n != 0) decode_with<S, double, C>(in, out, n, f, l);
      return;
    }
  }
  if (auto p = source_problem<S>(f); !p.empty()) throw std::invalid_argument("minifloat._cuda.decode: format: " + p);
  if (n != 0) decode_with<S, S, C>(in, out, n, f, l);
}

int device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

std::string runtime_problem() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  return count == 0 ? "no CUDA device" : "";
}

int runtime_version() {
  int v = 0;
  cudaRuntimeGetVersion(&v);
  return v;
}

int driver_version() {
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess ? v : 0;
}

// The instantiations module.cpp calls: float and double data, codes of 1, 2, 4 and 8 bytes.
template void quantize<float>(const float*, float*, std::size_t, const rounder<float>&, const launch_config&, rounding_stats*);
template void quantize<double>(const double*, double*, std::size_t, const rounder<double>&, const launch_config&, rounding_stats*);
template std::size_t try_encode<float, std::uint8_t>(const float*, std::uint8_t*, std::size_t, const rounder<float>&, const launch_config&);
template void decode<float, std::uint8_t>(const std::uint8_t*, float*, std::size_t, const format&, const launch_config&);
template std::size_t try_encode<float, std::uint16_t>(const float*, std::uint16_t*, std::size_t, const rounder<float>&, const launch_config&);
template void decode<float, std::uint16_t>(const std::uint16_t*, float*, std::size_t, const format&, const launch_config&);
template std::size_t try_encode<float, std::uint32_t>(const float*, std::uint32_t*, std::size_t, const rounder<float>&, const launch_config&);
template void decode<float, std::uint32_t>(const std::uint32_t*, float*, std::size_t, const format&, const launch_config&);
template std::size_t try_encode<float, std::uint64_t>(const float*, std::uint64_t*, std::size_t, const rounder<float>&, const launch_config&);
template void decode<float, std::uint64_t>(const std::uint64_t*, float*, std::size_t, const format&, const launch_config&);
template std::size_t try_encode<double, std::uint8_t>(const double*, std::uint8_t*, std::size_t, const rounder<double>&, const launch_config&);
template void decode<double, std::uint8_t>(const std::uint8_t*, double*, std::size_t, const format&, const launch_config&);
template std::size_t try_encode<double, std::uint16_t>(const double*, std::uint16_t*, std::size_t, const rounder<double>&, const launch_config&);
template void decode<double, std::uint16_t>(const std::uint16_t*, double*, std::size_t, const format&, const launch_config&);
template std::size_t try_encode<double, std::uint32_t>(const double*, std::uint32_t*, std::size_t, const rounder<double>&, const launch_config&);
template void decode<double, std::uint32_t>(const std::uint32_t*, double*, std::size_t, const format&, const launch_config&);
template std::size_t try_encode<double, std::uint64_t>(const double*, std::uint64_t*, std::size_t, const rounder<double>&, const launch_config&);
template void decode<double, std::uint64_t>(const std::uint64_t*, double*, std::size_t, const format&, const launch_config&);

}  // namespace minifloat::cuda
