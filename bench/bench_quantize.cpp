// Quantize throughput of the bulk kernels (bulk.hpp) per format, mode and data set, beside a
// memcpy of the same bytes and the CPU's F16C round trip, all in one run so ratios are fair.
// docs/performance.md records the results and the command.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <minifloat/minifloat.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace {

enum class data_set { normal, wide };

const std::vector<float>& input(std::size_t n, data_set d) {
  static std::vector<float> cache[2][2];
  auto& v = cache[n > (1u << 16)][d == data_set::wide];
  if (v.size() != n) {
    std::mt19937 gen(12345);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> exponent(-40, 40);
    v.resize(n);
    for (auto& x : v) x = d == data_set::normal ? normal(gen) : std::ldexp(normal(gen), exponent(gen));
  }
  return v;
}

void set_rate(benchmark::State& state, std::size_t n) {
  state.counters["values_per_ns"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n * sizeof(float)));
}

void bm_memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n, data_set::normal);
  std::vector<float> out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

// fp32 -> binary16 -> fp32 with the hardware instructions, nearest-even.
void bm_f16c_round_trip(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n, static_cast<data_set>(state.range(1)));
  std::vector<float> out(n);
  for (auto _ : state) {
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
      const __m256 x = _mm256_loadu_ps(in.data() + i);
      const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm256_storeu_ps(out.data() + i, _mm256_cvtph_ps(h));
    }
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

const minifloat::format formats[] = {minifloat::bfloat16, minifloat::binary16, minifloat::e4m3, minifloat::e5m2,
                                     minifloat::fp_4_3_4};
const char* const format_names[] = {"bfloat16", "binary16", "e4m3", "e5m2", "fp(4,3,4)"};
const char* const mode_names[] = {"nearest_even",    "nearest_away",    "toward_zero", "stochastic",
                                   "toward_positive", "toward_negative", "to_odd"};

// Arguments: size, data set, format index, mode, counting.
void bm_quantize(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n, static_cast<data_set>(state.range(1)));
  const minifloat::rounder<float> r(formats[state.range(2)],
                                    {static_cast<minifloat::rounding>(state.range(3)), minifloat::overflow::saturate, 0, 1, 0});
  const bool counting = state.range(4) != 0;
  std::vector<float> out(n);
  minifloat::rounding_stats stats;
  for (auto _ : state) {
    if (counting) minifloat::quantize(std::span<const float>(in), std::span<float>(out), r, stats);
    else minifloat::quantize(std::span<const float>(in), std::span<float>(out), r);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(stats);
  set_rate(state, n);
  state.SetLabel(std::string(format_names[state.range(2)]) + " " + mode_names[state.range(3)] +
                 (state.range(1) ? " wide" : " normal") + (counting ? " counting" : ""));
}

constexpr std::int64_t in_cache = 1 << 16;
constexpr std::int64_t in_memory = 1 << 24;

}  // namespace

BENCHMARK(bm_memcpy)->Arg(in_cache)->Arg(in_memory);
BENCHMARK(bm_f16c_round_trip)->ArgsProduct({{in_cache, in_memory}, {0, 1}});
BENCHMARK(bm_quantize)->ArgsProduct({{in_cache, in_memory}, {0, 1}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4, 5, 6}, {0, 1}});

BENCHMARK_MAIN();
