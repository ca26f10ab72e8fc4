// The emulated GEMM (emulated_gemm.hpp) against a plain fp32 loop of the same loop order in the
// same run, in GFLOP/s (2 m n k flops per GEMM), one thread; and the operand transforms that a
// recipe runs before it (hadamard.hpp's 16-wide transform, operand.hpp's 16x16 tiles), in values
// per ns. The machine's BLAS is timed from Python (torch.matmul; docs/recipes.md gives the
// command), since this program links only Google Benchmark.
// Wall-clock time (UseRealTime): the machine is shared, so compare within one run.
#include <benchmark/benchmark.h>

#include <minifloat/emulated_gemm.hpp>
#include <minifloat/hadamard.hpp>
#include <minifloat/operand.hpp>

#include <random>
#include <span>
#include <vector>

namespace {

std::vector<float> normal_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = minifloat::round(normal(gen), minifloat::e4m3);  // FP8 GEMM inputs
  return v;
}

void set_gflops(benchmark::State& state, std::size_t m, std::size_t n, std::size_t k) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// The plain fp32 GEMM as a compiler builds it at -O3 -march=native: row of C at a time, k
// outermost (the emulated GEMM's order), vectorised over j (and free to contract to FMA).
void bm_plain_fp32(benchmark::State& state) {
  const auto s = static_cast<std::size_t>(state.range(0));
  const auto a = normal_values(s * s, 1), b = normal_values(s * s, 2);
  std::vector<float> c(s * s);
  for (auto _ : state) {
    for (std::size_t i = 0; i < s; ++i) {
      float* row = c.data() + i * s;
      for (std::size_t j = 0; j < s; ++j) row[j] = 0.0f;
      for (std::size_t l = 0; l < s; ++l) {
        const float x = a[i * s + l];
        const float* bl = b.data() + l * s;
        for (std::size_t j = 0; j < s; ++j) row[j] += x * bl[j];
      }
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_gflops(state, s, s, s);
}

const minifloat::accumulation rules[] = {
    {},                            // fp32 products and sums, nearest-even
    minifloat::hopper_fp8_model,   // 14-bit truncated sums, fp32 every 128
    {minifloat::bfloat16, minifloat::rounding::stochastic, minifloat::bfloat16, minifloat::rounding::stochastic,
     minifloat::overflow::infinity, 0, 0, 7},
};
const char* const rule_names[] = {"fp32", "hopper_fp8_model", "bf16_stochastic"};

void bm_emulated_gemm(benchmark::State& state) {
  const auto s = static_cast<std::size_t>(state.range(0));
  const auto& rule = rules[state.range(1)];
  state.SetLabel(rule_names[state.range(1)]);
  const auto a = normal_values(s * s, 1), b = normal_values(s * s, 2);
  std::vector<float> c(s * s);
  for (auto _ : state) {
    minifloat::emulated_gemm(a, b, c, {s, s, s}, rule);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_gflops(state, s, s, s);
}

void set_rate(benchmark::State& state, std::size_t n) {
  state.counters["values_per_ns"] = benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()) / 1e9,
                                                       benchmark::Counter::kIsRate);
}

// Argument: axis (1 = along rows, 0 = down columns) of a 1024 x 1024 matrix, 16-wide blocks.
void bm_hadamard16(benchmark::State& state) {
  const std::size_t s = 1024;
  const auto x = normal_values(s * s, 3);
  std::vector<float> y(s * s);
  const auto signs = minifloat::hadamard_signs(1, 16);
  for (auto _ : state) {
    minifloat::hadamard_transform(x, y, signs, {s, s, static_cast<int>(state.range(0))});
    benchmark::ClobberMemory();
  }
  set_rate(state, s * s);
}

// NVFP4 16x16 tiles of a 1024 x 1024 weight (argument 1: stored transposed).
void bm_nvfp4_tiles(benchmark::State& state) {
  const std::size_t s = 1024;
  const auto x = normal_values(s * s, 4);
  std::vector<float> y(s * s);
  for (auto _ : state) {
    minifloat::quantize_tiles(x, y, minifloat::nvfp4, {}, s, s, state.range(0) != 0);
    benchmark::ClobberMemory();
  }
  set_rate(state, s * s);
}

// NVFP4 with the 4-over-6 choice against plain NVFP4 blocks (argument 1), 1024 x 1024 along rows.
void bm_four_over_six(benchmark::State& state) {
  const std::size_t s = 1024;
  const auto x = normal_values(s * s, 5);
  std::vector<float> y(s * s);
  for (auto _ : state) {
    if (state.range(0) != 0) minifloat::quantize_blocks(x, y, minifloat::nvfp4, {}, {s, s, 1});
    else minifloat::quantize_four_over_six(x, y, minifloat::nvfp4, {}, {s, s, 1});
    benchmark::ClobberMemory();
  }
  set_rate(state, s * s);
}

}  // namespace

BENCHMARK(bm_plain_fp32)->Arg(128)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(bm_emulated_gemm)
    ->ArgsProduct({{128, 256}, {0, 1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(bm_hadamard16)->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(bm_nvfp4_tiles)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(bm_four_over_six)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
