// Quantize throughput of the bulk kernels (bulk.hpp) per format, mode and data set, each timed on
// the wall clock beside a memcpy of the same bytes in the same iteration, with the best reference
// per format: the hardware round trip (F16C for binary16, AVX512-BF16 for bfloat16) and a plain
// scalar loop of the same semantics for the others.
// docs/performance.md records the results and the command.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <minifloat/minifloat.hpp>
#include <minifloat/storage/bitpack.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <vector>

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports (a false positive; fixed in later GCC).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

// Every benchmark below times, in each iteration, a memcpy of the same bytes and then its kernel,
// on the wall clock, so the ratio compares two timings taken a moment apart under the same load
// (the machine is shared). The kernel's time is the benchmark's (manual) time; "x_memcpy" is
// memcpy time / kernel time, and "memcpy_values_per_ns" the memcpy rate, over all iterations.
template <class Kernel>
void timed_beside_memcpy(benchmark::State& state, std::size_t n, const std::vector<float>& in, std::vector<float>& out,
                         Kernel kernel) {
  using clock = std::chrono::steady_clock;
  std::vector<float> copy(n);
  double memcpy_seconds = 0, kernel_seconds = 0;
  for (auto _ : state) {
    const auto t0 = clock::now();
    std::memcpy(copy.data(), in.data(), n * sizeof(float));
    benchmark::ClobberMemory();
    const auto t1 = clock::now();
    kernel();
    benchmark::ClobberMemory();
    const auto t2 = clock::now();
    const double k = std::chrono::duration<double>(t2 - t1).count();
    memcpy_seconds += std::chrono::duration<double>(t1 - t0).count();
    kernel_seconds += k;
    state.SetIterationTime(k);
  }
  benchmark::DoNotOptimize(out.data());
  const double values = static_cast<double>(n) * static_cast<double>(state.iterations());
  state.counters["values_per_ns"] = values / kernel_seconds / 1e9;
  state.counters["memcpy_values_per_ns"] = values / memcpy_seconds / 1e9;
  state.counters["x_memcpy"] = memcpy_seconds / kernel_seconds;
}

// fp32 -> binary16 -> fp32 with the hardware instructions (F16C), nearest-even.
void bm_f16c_round_trip(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n, static_cast<data_set>(state.range(1)));
  std::vector<float> out(n);
  timed_beside_memcpy(state, n, in, out, [&] {
    for (std::size_t i = 0; i + 16 <= n; i += 16) {
      const __m512 x = _mm512_loadu_ps(in.data() + i);
      const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm512_storeu_ps(out.data() + i, _mm512_cvtph_ps(h));
    }
  });
  state.SetLabel(std::string("binary16 hardware round trip") + (state.range(1) ? " wide" : " normal"));
}

#if defined(__AVX512BF16__)
// fp32 -> bfloat16 -> fp32 with AVX512-BF16 (vcvtneps2bf16: nearest-even; NaNs quieted), the
// widening back as a 16-bit shift.
void bm_bf16_round_trip(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n, static_cast<data_set>(state.range(1)));
  std::vector<float> out(n);
  timed_beside_memcpy(state, n, in, out, [&] {
    for (std::size_t i = 0; i + 16 <= n; i += 16) {
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(in.data() + i));
      __m256i hi;
      std::memcpy(&hi, &h, sizeof hi);
      _mm512_storeu_si512(out.data() + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
    }
  });
  state.SetLabel(std::string("bfloat16 hardware round trip") + (state.range(1) ? " wide" : " normal"));
}
#endif

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
  timed_beside_memcpy(state, n, in, out, [&] {
    if (counting) minifloat::quantize(std::span<const float>(in), std::span<float>(out), r, stats);
    else minifloat::quantize(std::span<const float>(in), std::span<float>(out), r);
  });
  benchmark::DoNotOptimize(stats);
  state.SetLabel(std::string(format_names[state.range(2)]) + " " + mode_names[state.range(3)] +
                 (state.range(1) ? " wide" : " normal") + (counting ? " counting" : ""));
}

// The reference for formats without a hardware instruction: a plain scalar loop of the same
// semantics, one value at a time through the scalar rounder (the core's scalar entry).
// Arguments: size, data set, format index, mode.
void bm_scalar_loop(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n, static_cast<data_set>(state.range(1)));
  const minifloat::rounder<float> r(formats[state.range(2)],
                                    {static_cast<minifloat::rounding>(state.range(3)), minifloat::overflow::saturate, 0, 1, 0});
  std::vector<float> out(n);
  timed_beside_memcpy(state, n, in, out, [&] {
    for (std::size_t i = 0; i < n; ++i) out[i] = r(in[i], i);
  });
  state.SetLabel(std::string(format_names[state.range(2)]) + " " + mode_names[state.range(3)] +
                 (state.range(1) ? " wide" : " normal") + " scalar loop");
}

// The stochastic-rounding generator alone (random.hpp's ARS-5 through the bulk kernels' vector
// path, bulk.hpp's lane_random): the 32-bit draws of n consecutive indices stored to out.
void bm_random_words(benchmark::State& state) {
  using V = minifloat::detail::simd_t<std::uint32_t>;
  constexpr std::size_t lanes = minifloat::detail::simd_lanes<std::uint32_t>;
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n, data_set::normal);
  std::vector<float> out(n);
  timed_beside_memcpy(state, n, in, out, [&] {
    minifloat::detail::lane_random<V> draw(minifloat::counter_rng{1});
    for (std::size_t i = 0; i + lanes <= n; i += lanes) {
      const V v = draw(i);
      std::memcpy(out.data() + i, &v, sizeof v);
    }
  });
  state.SetLabel("ARS-5 random words alone");
}

// The parallel forms (parallel.hpp) at 16M values. Arguments: kernel, threads. Kernels:
// 0 quantize e4m3 nearest-even, 1 quantize e4m3 stochastic, 2 encode binary16, 3 decode
// binary16, 4 pack 13-bit fields, 5 unpack them, 6 memcpy split into the same chunks (what the
// memory system gives t threads: the bound of the memory-bound kernels); wide data. Speed-up =
// the 2-thread row's rate over the 1-thread row's; x_memcpy compares with one thread's memcpy.
void bm_parallel(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << 24;
  const auto kernel = state.range(0);
  const minifloat::threads t{static_cast<unsigned>(state.range(1))};
  const auto& in = input(n, data_set::wide);
  std::vector<float> out(n);
  static std::vector<std::uint16_t> codes(n);
  static std::vector<std::uint32_t> fields(n), words(minifloat::storage::packed_words(n, 13));
  const minifloat::rounder<float> rne(kernel == 2 ? minifloat::binary16 : minifloat::e4m3,
                                      {kernel == 1 ? minifloat::rounding::stochastic : minifloat::rounding::nearest_even,
                                       minifloat::overflow::saturate, 0, 1, 0});
  if (kernel == 3) minifloat::encode(std::span<const float>(in), std::span<std::uint16_t>(codes), rne);
  if (kernel >= 4)
    for (std::size_t i = 0; i < n; ++i) fields[i] = static_cast<std::uint32_t>(i * 2654435761u) & 0x1fff;
  if (kernel == 5) minifloat::storage::pack(fields, 13, words);
  timed_beside_memcpy(state, n, in, out, [&] {
    switch (kernel) {
      case 0:
      case 1: minifloat::quantize(std::span<const float>(in), std::span<float>(out), rne, t); break;
      case 2: minifloat::encode(std::span<const float>(in), std::span<std::uint16_t>(codes), rne, t); break;
      case 3: minifloat::decode(std::span<const std::uint16_t>(codes), std::span<float>(out), minifloat::binary16, t); break;
      case 4: minifloat::storage::pack(fields, 13, words, t); break;
      case 6:
        minifloat::detail::for_each_chunk(n, t, [&](std::size_t, std::size_t start, std::size_t length) {
          std::memcpy(out.data() + start, in.data() + start, length * sizeof(float));
        });
        break;
      default: minifloat::storage::unpack(words, 13, n, fields, t); break;
    }
  });
  const char* const names[] = {"quantize e4m3 nearest_even", "quantize e4m3 stochastic", "encode binary16",
                               "decode binary16", "pack 13-bit", "unpack 13-bit", "memcpy"};
  state.SetLabel(std::string(names[kernel]) + " wide, " + std::to_string(t.count) + " threads");
}

constexpr std::int64_t in_cache = 1 << 16;
constexpr std::int64_t in_memory = 1 << 24;

}  // namespace

// The modes of the targets (nearest-even, nearest-away, toward-zero, stochastic); pass
// --benchmark_filter to pick rows.
BENCHMARK(bm_f16c_round_trip)->ArgsProduct({{in_cache, in_memory}, {0, 1}})->UseManualTime();
#if defined(__AVX512BF16__)
BENCHMARK(bm_bf16_round_trip)->ArgsProduct({{in_cache, in_memory}, {0, 1}})->UseManualTime();
#endif
BENCHMARK(bm_scalar_loop)->ArgsProduct({{in_cache, in_memory}, {0, 1}, {2, 3, 4}, {0, 1, 2, 3}})->UseManualTime();
BENCHMARK(bm_quantize)->ArgsProduct({{in_cache, in_memory}, {0, 1}, {0, 1, 2, 3, 4}, {0, 1, 2, 3}, {0, 1}})->UseManualTime();

BENCHMARK(bm_random_words)->Arg(in_cache)->Arg(in_memory)->UseManualTime();

BENCHMARK(bm_parallel)->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {1, 2}})->UseManualTime();

BENCHMARK_MAIN();
