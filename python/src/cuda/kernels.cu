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
// Block formats (MX, NVFP4): one thread per block finds the block's largest magnitude, its
// scale by block.hpp's scale_finder, and rounds each element V / X with the core, with
// block.hpp's own element rules (sticky_underflow, integer_element), as the CPU block kernel does.
//
// float data for a format that rounds_through_double (E8M0) is rounded by the double plan,
// widened exactly on load and narrowed exactly on store, as rounder<float> and the bulk
// kernels do.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include <minifloat/block.hpp>
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
template <detail::lane_path Path, class S>
__device__ typename source_layout<S>::bits round_deterministic(const rounding_plan<S>& p,
                                                               typename source_layout<S>::bits u) {
  using bits = typename source_layout<S>::bits;
  switch (p.mode) {
    case rounding::nearest_even: return detail::round_bits<rounding::nearest_even, Path>(p, u, bits{});
    case rounding::nearest_away: return detail::round_bits<rounding::nearest_away, Path>(p, u, bits{});
    case rounding::toward_zero: return detail::round_bits<rounding::toward_zero, Path>(p, u, bits{});
    case rounding::toward_positive: return detail::round_bits<rounding::toward_positive, Path>(p, u, bits{});
    case rounding::toward_negative: return detail::round_bits<rounding::toward_negative, Path>(p, u, bits{});
    case rounding::to_odd: return detail::round_bits<rounding::to_odd, Path>(p, u, bits{});
    case rounding::stochastic: break;  // never here: round_each's stochastic branch
  }
  return u;
}

/// Whether every value this thread holds meets lane_path::plain's condition, in every thread of
/// the warp: the warp then takes the core's single-binade path (about a fifth of the general
/// path's instructions), else the general one; both give the same bits (round.hpp). One vote
/// per warp keeps the warp on one path.
template <class S, unsigned U>
__device__ bool warp_is_plain(const rounding_plan<S>& p, const typename source_layout<S>::bits (&u)[U]) {
  bool plain = true;
#pragma unroll
  for (unsigned j = 0; j < U; ++j) plain = plain && detail::plain_input(p, u[j]);
  return __all_sync(__activemask(), plain);
}

/// Calls visit(i, u, rounded, plain) for each element i < n this thread owns in a grid-stride loop: u is
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
      if (warp_is_plain(p, u)) {  // elements past n hold 0, which is plain
#pragma unroll
        for (unsigned j = 0; j < U; ++j) {
          const std::size_t i = base + std::size_t{j} * blockDim.x;
          if (i < n) visit(i, u[j], round_deterministic<detail::lane_path::plain>(p, u[j]), true);
        }
      } else {
#pragma unroll
        for (unsigned j = 0; j < U; ++j) {
          const std::size_t i = base + std::size_t{j} * blockDim.x;
          if (i < n) visit(i, u[j], round_deterministic<detail::lane_path::any>(p, u[j]), false);
        }
      }
    }
  } else {
    // The generator's AES rounds read the round table (random.hpp, ars_tabled) from shared
    // memory: the same bits as counter_rng::block, without evaluating the S-box per byte.
    __shared__ std::uint32_t round_table[256];
    for (unsigned x = threadIdx.x; x < 256; x += blockDim.x)
      round_table[x] = detail::aes_round_table_entry(static_cast<std::uint8_t>(x));
    __syncthreads();
    const detail::block128 key = r.rng().key();
    constexpr unsigned G = draws_per_block<S>;
    constexpr std::uint64_t domain = sizeof(S) == 4 ? detail::domain_bits32 : detail::domain_bits64;
    const std::uint64_t head = first % G;  // indices of the first block before element 0
    const std::size_t units = (head + n + G - 1) / G;
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    for (std::size_t k = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; k < units; k += stride) {
      const std::uint64_t start = first - head + k * G;  // element index of the block's word 0, mod 2^64
      const detail::block128 b =
          detail::ars_tabled<detail::ars_rounds>(detail::block128::from(start / G, domain), key, round_table);
      bits u[G];
#pragma unroll
      for (unsigned w = 0; w < G; ++w) {
        const std::size_t i = static_cast<std::size_t>(start + w - first);  // wraps for words before element 0
        u[w] = i < n ? std::bit_cast<bits>(static_cast<S>(in[i])) : bits{0};
      }
      const bool plain = warp_is_plain(p, u);
#pragma unroll
      for (unsigned w = 0; w < G; ++w) {
        const std::size_t i = static_cast<std::size_t>(start + w - first);
        if (i >= n) continue;
        visit(i, u[w],
              plain ? detail::round_bits<rounding::stochastic, detail::lane_path::plain>(p, u[w], block_word<S>(b, w))
                    : detail::round_bits<rounding::stochastic, detail::lane_path::any>(p, u[w], block_word<S>(b, w)),
              plain);
      }
    }
  }
}

/// Adds a thread's counts into counts[0..F): per block in shared memory, then once per block
/// into global memory (any block size, one thread included).
template <unsigned F>
__device__ void add_block_counts(const counter (&mine)[F], counter* counts) {
  __shared__ counter block_counts[F];
  for (unsigned f = threadIdx.x; f < F; f += blockDim.x) block_counts[f] = 0;
  __syncthreads();
  for (unsigned f = 0; f < F; ++f)
    if (mine[f] != 0) atomicAdd(&block_counts[f], mine[f]);
  __syncthreads();
  for (unsigned f = threadIdx.x; f < F; f += blockDim.x)
    if (block_counts[f] != 0) atomicAdd(&counts[f], block_counts[f]);
}

__device__ void add_counts(const rounding_stats& st, counter* counts) {
  const counter mine[stat_fields] = {st.values, st.overflows, st.underflows, st.nans, st.infinities};
  add_block_counts(mine, counts);
}

template <bool Stochastic, bool Count, class T, class S>
__global__ void quantize_kernel(const T* in, T* out, std::size_t n, const rounder<S> r, counter* counts) {
  rounding_stats st;
  // A plain value (round.hpp, plain_input) is never an overflow, underflow, NaN or Inf: only the
  // values count, which the host knows, so plain warps count nothing here.
  auto store = [&](std::size_t i, typename source_layout<S>::bits u, typename source_layout<S>::bits rounded,
                   bool plain) {
    if constexpr (Count)
      if (!plain) detail::count(r.plan(), u, rounded, st);
    out[i] = static_cast<T>(std::bit_cast<S>(rounded));
  };
  round_each<Stochastic>(in, n, r, store);
  if constexpr (Count) add_counts(st, counts);
}

template <bool Stochastic, class T, class S, class C>
__global__ void encode_kernel(const T* in, C* out, std::size_t n, const rounder<S> r, counter* first_without_code) {
  const format f = r.plan().fmt;
  auto store = [&](std::size_t i, typename source_layout<S>::bits, typename source_layout<S>::bits rounded, bool) {
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

/// Blocks of values along the middle axis of a (before, length, after) C-order array: block b
/// covers `length`-axis positions k·B .. k·B + m − 1 of column (p, c), where
/// b = (p · blocks_along + k) · after + c, so neighbouring threads take neighbouring columns.
struct block_geometry {
  std::size_t before, length, after, block_size, blocks_along;
  __host__ __device__ std::size_t blocks() const { return before * blocks_along * after; }
};

/// NVFP4's default tensor scale needs the largest finite magnitude of the tensor (as bits:
/// |v| orders like its bit pattern).
__global__ void finite_amax_kernel(const float* in, std::size_t n, unsigned* amax_bits) {
  unsigned mine = 0;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const unsigned a = std::bit_cast<unsigned>(in[i]) & 0x7fffffffu;
    if (a < 0x7f800000u) mine = std::max(mine, a);
  }
  for (int offset = 16; offset > 0; offset /= 2) mine = std::max(mine, __shfl_xor_sync(0xffffffffu, mine, offset));
  if ((threadIdx.x & 31) == 0 && mine != 0) atomicMax(amax_bits, mine);
}

/// Block statistics as counters: the element counts but values (overflows, underflows, nans,
/// infinities), then scale_clamped and nan_blocks; values and blocks are known on the host.
constexpr unsigned block_stat_fields = 6;

template <rounding Mode, bool Count, bool Divide>
__global__ void block_quantize_kernel(const float* in, float* out, const block_geometry g, const rounder<float> r,
                                      const detail::scale_finder scales, bool integer, counter* counts) {
  constexpr bool stochastic = Mode == rounding::stochastic;
  __shared__ std::uint32_t round_table[stochastic ? 256 : 1];
  if constexpr (stochastic) {
    for (unsigned x = threadIdx.x; x < 256; x += blockDim.x)
      round_table[x] = detail::aes_round_table_entry(static_cast<std::uint8_t>(x));
    __syncthreads();
  }
  const detail::block128 key = r.rng().key();
  const rounding_plan<float>& p = r.plan();
  rounding_stats st;
  counter clamped = 0, nan_blocks = 0;
  const std::size_t blocks = g.blocks(), grid_stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t b = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; b < blocks; b += grid_stride) {
    const std::size_t c = b % g.after, line = b / g.after, k = line % g.blocks_along, q = line / g.blocks_along;
    const std::size_t first = (q * g.length + k * g.block_size) * g.after + c, stride = g.after;
    const std::size_t m = std::min(g.block_size, g.length - k * g.block_size);
    std::uint32_t amax = 0;
    for (std::size_t j = 0; j < m; ++j) amax = std::max(amax, std::bit_cast<std::uint32_t>(in[first + j * stride]) & 0x7fffffffu);
    const detail::block_scale s = scales(amax);
    clamped += s.clamped;
    if (s.nan) {
      ++nan_blocks;
      for (std::size_t j = 0; j < m; ++j) {
        const std::size_t i = first + j * stride;
        if constexpr (Count) {
          const std::uint32_t a = std::bit_cast<std::uint32_t>(in[i]) & 0x7fffffffu;
          st.nans += a > 0x7f800000u;
          st.infinities += a == 0x7f800000u;
          st.overflows += a >= 0x7f800000u;
        }
        out[i] = std::numeric_limits<float>::quiet_NaN();
      }
      continue;
    }
    std::uint64_t drawn_block = ~std::uint64_t{0};  // the ARS block `words` holds (stride 1 reuses it)
    detail::block128 words{};
    for (std::size_t j = 0; j < m; ++j) {
      const std::size_t i = first + j * stride;
      const float v = in[i];
      const std::uint32_t v_bits = std::bit_cast<std::uint32_t>(v);
      float y;
      if constexpr (Divide) y = s.zero ? v * 0.0f : v / s.from_element;  // a scale that rounded to 0: signed zeros
      else y = v * s.to_element;
      std::uint32_t y_bits = std::bit_cast<std::uint32_t>(y);
      if constexpr (Count && Divide)
        if (s.zero) st.underflows += (v_bits & 0x7fffffffu) != 0;
      if constexpr (detail::sticky_matters<Mode, Count>)
        if (!s.zero) y_bits = detail::sticky_underflow(y_bits, v_bits);
      std::uint32_t random = 0;
      if constexpr (stochastic) {
        const std::uint64_t index = r.first_index() + i;  // counter_rng::bits32(index)
        if (index / 4 != drawn_block) {
          drawn_block = index / 4;
          words = detail::ars_tabled<detail::ars_rounds>(detail::block128::from(drawn_block, detail::domain_bits32), key,
                                                         round_table);
        }
        random = words.w[index % 4];
      }
      std::uint32_t rounded = detail::round_bits<Mode, detail::lane_path::any>(p, y_bits, random);
      if constexpr (Count) detail::count(p, y_bits, rounded, st);
      if (integer) rounded = detail::integer_element(rounded);
      // A NaN element (overflow to NaN in a format without Inf) keeps its sign and payload, as
      // the x86 multiply of the CPU kernels keeps them; the GPU's multiply would give its
      // canonical NaN instead.
      const float element = std::bit_cast<float>(rounded);
      out[i] = element != element ? element : element * s.from_element;
    }
  }
  if constexpr (Count) {
    const counter mine[block_stat_fields] = {st.overflows, st.underflows, st.nans, st.infinities, clamped, nan_blocks};
    add_block_counts(mine, counts);
  }
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

/// The most counters a call reads back.
constexpr std::size_t max_counters = 8;

/// A few counters in device memory, allocated and freed in stream order.
class device_counters {
 public:
  device_counters(std::size_t count, counter initial, cudaStream_t stream, const char* who)
      : count_(count), stream_(stream), who_(who) {
    if (count > max_counters) throw std::logic_error("minifloat._cuda: more than max_counters counters");
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
  counter host_[max_counters] = {};
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
  *stats += rounding_stats{n, c[1], c[2], c[3], c[4]};  // c[0] misses the plain warps' values
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

template <rounding Mode>
void launch_block_quantize(const float* in, float* out, const block_geometry& bg, const rounder<float>& r,
                           const detail::scale_finder& scales, bool integer, counter* counts, const grid& g) {
  const bool divide = scales.f.scaling == block_scaling::e4m3_times_tensor;
  if (counts != nullptr) {
    if (divide) block_quantize_kernel<Mode, true, true><<<g.blocks, g.threads, 0, g.stream>>>(in, out, bg, r, scales, integer, counts);
    else block_quantize_kernel<Mode, true, false><<<g.blocks, g.threads, 0, g.stream>>>(in, out, bg, r, scales, integer, counts);
  } else {
    if (divide) block_quantize_kernel<Mode, false, true><<<g.blocks, g.threads, 0, g.stream>>>(in, out, bg, r, scales, integer, counts);
    else block_quantize_kernel<Mode, false, false><<<g.blocks, g.threads, 0, g.stream>>>(in, out, bg, r, scales, integer, counts);
  }
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

void quantize_blocks(const float* in, float* out, std::size_t before, std::size_t length, std::size_t after,
                     const block_format& f, const block_options& o, const launch_config& l, block_stats* stats) {
  const char* who = "quantize_blocks";
  f.validate();  // std::invalid_argument naming the field, before any launch
  const rounder<float> r(f.element, {o.mode, o.on_overflow, o.random_bits, o.seed, o.index});
  (void)detail::make_scale_finder(f, o, 1.0f);  // a given tensor scale checked before any CUDA call
  const std::size_t n = before * length * after;
  if (n == 0) return;
  const auto block_size = static_cast<std::size_t>(f.block_size);
  const block_geometry bg{before, length, after, block_size, (length + block_size - 1) / block_size};
  const grid g = grid_for(bg.blocks(), l, who);
  float default_tensor_scale = 1;
  if (f.scaling == block_scaling::e4m3_times_tensor && o.tensor_scale == 0) {
    device_counters amax(1, 0, g.stream, who);  // the bits of a float fit the low word (little-endian)
    finite_amax_kernel<<<grid_for(n, l, who).blocks, g.threads, 0, g.stream>>>(in, n, reinterpret_cast<unsigned*>(amax.data()));
    check(cudaGetLastError(), who);
    default_tensor_scale = nvfp4_tensor_scale_of_amax(std::bit_cast<float>(static_cast<std::uint32_t>(amax.read()[0])));
  }
  const detail::scale_finder scales = detail::make_scale_finder(f, o, default_tensor_scale);
  std::optional<device_counters> counts;
  if (stats != nullptr) counts.emplace(block_stat_fields, 0, g.stream, who);
  counter* c = counts ? counts->data() : nullptr;
  switch (o.mode) {
    case rounding::nearest_even: launch_block_quantize<rounding::nearest_even>(in, out, bg, r, scales, f.integer_elements, c, g); break;
    case rounding::nearest_away: launch_block_quantize<rounding::nearest_away>(in, out, bg, r, scales, f.integer_elements, c, g); break;
    case rounding::toward_zero: launch_block_quantize<rounding::toward_zero>(in, out, bg, r, scales, f.integer_elements, c, g); break;
    case rounding::stochastic: launch_block_quantize<rounding::stochastic>(in, out, bg, r, scales, f.integer_elements, c, g); break;
    case rounding::toward_positive: launch_block_quantize<rounding::toward_positive>(in, out, bg, r, scales, f.integer_elements, c, g); break;
    case rounding::toward_negative: launch_block_quantize<rounding::toward_negative>(in, out, bg, r, scales, f.integer_elements, c, g); break;
    case rounding::to_odd: launch_block_quantize<rounding::to_odd>(in, out, bg, r, scales, f.integer_elements, c, g); break;
  }
  check(cudaGetLastError(), who);
  if (stats == nullptr) return;
  const counter* got = counts->read();
  block_stats add;
  add.elements = rounding_stats{n, got[0], got[1], got[2], got[3]};
  add.blocks = bg.blocks();
  add.scale_clamped = got[4];
  add.nan_blocks = got[5];
  *stats += add;
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
