// Block-scaled quantization (block.hpp) and packed block tensors (storage/packed_block.hpp):
// MXFP8, MXFP6, MXFP4, MXINT8 and NVFP4 quantize+dequantize in one pass over blocks, and MXFP4
// encoding into packed words, beside a memcpy of the same fp32 bytes in the same run.
// Wall-clock time (UseRealTime): the machine is shared, so ratios are taken within one run.
// docs/performance.md records the results and the command.
#include <benchmark/benchmark.h>

#include <minifloat/block.hpp>
#include <minifloat/storage/packed_block.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

const std::vector<float>& input(std::size_t n) {
  static std::vector<float> small, large;
  auto& v = n > (1u << 16) ? large : small;
  if (v.size() != n) {
    std::mt19937 gen(12345);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    v.resize(n);
    for (auto& x : v) x = normal(gen);
  }
  return v;
}

void set_rate(benchmark::State& state, std::size_t n) {
  state.counters["values_per_ns"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

void bm_memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n);
  std::vector<float> out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

const minifloat::block_format formats[] = {minifloat::mxfp8_e4m3, minifloat::mxfp8_e5m2, minifloat::mxfp6_e2m3,
                                           minifloat::mxfp4, minifloat::mxint8, minifloat::nvfp4};
const char* const format_names[] = {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp4", "mxint8", "nvfp4"};

// Arguments: size, format index, mode (0 nearest_even, 3 stochastic), counting.
void bm_quantize_blocks(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n);
  const minifloat::block_format& f = formats[state.range(1)];
  minifloat::block_options o{.mode = static_cast<minifloat::rounding>(state.range(2)), .seed = 1};
  if (f.scaling == minifloat::block_scaling::e4m3_times_tensor) o.tensor_scale = minifloat::nvfp4_tensor_scale(in);
  const bool counting = state.range(3) != 0;
  std::vector<float> out(n);
  minifloat::block_stats stats;
  for (auto _ : state) {
    if (counting) minifloat::quantize_blocks(in, out, f, o, {}, stats);
    else minifloat::quantize_blocks(in, out, f, o);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(stats);
  set_rate(state, n);
  state.SetLabel(std::string(format_names[state.range(1)]) + (state.range(2) == 3 ? " stochastic" : " nearest_even") +
                 (counting ? " counting" : ""));
}

void bm_encode_packed_mxfp4(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n);
  for (auto _ : state) {
    minifloat::storage::packed_block_tensor t(in, minifloat::mxfp4);
    benchmark::DoNotOptimize(t.elements().words().data());
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

void bm_decode_packed_mxfp4(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const minifloat::storage::packed_block_tensor t(input(n), minifloat::mxfp4);
  std::vector<float> out(n);
  for (auto _ : state) {
    t.decode(out);
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

constexpr std::int64_t in_cache = 1 << 14;  // 64 KiB in + 64 KiB out
constexpr std::int64_t in_memory = 1 << 24;

}  // namespace

BENCHMARK(bm_memcpy)->Arg(in_cache)->Arg(in_memory)->UseRealTime();
BENCHMARK(bm_quantize_blocks)->ArgsProduct({{in_cache, in_memory}, {0, 1, 2, 3, 4, 5}, {0}, {0, 1}})->UseRealTime();
BENCHMARK(bm_quantize_blocks)->ArgsProduct({{in_cache, in_memory}, {0, 3}, {3}, {0}})->UseRealTime();
BENCHMARK(bm_encode_packed_mxfp4)->Arg(in_cache)->Arg(in_memory)->UseRealTime();
BENCHMARK(bm_decode_packed_mxfp4)->Arg(in_cache)->Arg(in_memory)->UseRealTime();

BENCHMARK_MAIN();
