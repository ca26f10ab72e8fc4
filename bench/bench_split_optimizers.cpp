// Optimizer steps on split storage (optimizers.hpp) against the same optimizer on fp32 master
// weights, and the library's fp32 steps against a plain hand-written loop, at 16M parameters
// (MINIFLOAT_BENCH_PARAMETERS sets another count).
// Wall-clock time: every iteration first times the reference step (the library's fp32 step for
// split and low-precision weights, the plain loop for the library's fp32 step) on its own copy of
// the weights and state, then the step under test, so "x_ref" (reference time / step time) compares
// two timings taken a moment apart under the same load (the machine is shared); run with
// --benchmark_enable_random_interleaving. The *_threads rows time a split step on several threads
// against the same step on one (x_ref: the speed-up). Reports parameters per ns of the step under test;
// bytes_per_second counts the bytes each step must move (read and written) at its storage sizes.
// docs/performance.md records the results and the command.
#include <benchmark/benchmark.h>

#include <minifloat/storage/optimizers.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace ms = minifloat::storage;

// 16M parameters, or as many as MINIFLOAT_BENCH_PARAMETERS says (1048576: the steps' arrays fit in
// the caches).
const std::size_t parameters = [] {
  const char* text = std::getenv("MINIFLOAT_BENCH_PARAMETERS");
  if (text == nullptr) return std::size_t{1} << 24;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || n == 0 || n % 32 != 0) {
    std::fprintf(stderr, "MINIFLOAT_BENCH_PARAMETERS: expected a positive multiple of 32, got '%s'\n", text);
    std::exit(2);
  }
  return static_cast<std::size_t>(n);
}();

const std::vector<float>& initial_weights() {
  static const std::vector<float> w = [] {
    std::mt19937 gen(1);
    std::normal_distribution<float> d(0.0f, 0.02f);
    std::vector<float> v(parameters);
    for (auto& x : v) x = d(gen);
    return v;
  }();
  return w;
}
const std::vector<float>& gradients() {
  static const std::vector<float> g = [] {
    std::mt19937 gen(2);
    std::normal_distribution<float> d(0.0f, 1e-3f);
    std::vector<float> v(parameters);
    for (auto& x : v) x = d(gen);
    return v;
  }();
  return g;
}

void set_rate(benchmark::State& state, double bytes_per_parameter) {
  const double n = static_cast<double>(parameters) * static_cast<double>(state.iterations());
  state.counters["params_per_ns"] = benchmark::Counter(n / 1e9, benchmark::Counter::kIsRate);
  state.counters["bytes_per_second"] = benchmark::Counter(n * bytes_per_parameter, benchmark::Counter::kIsRate);
}

const ms::split_layout layouts[] = {
    {minifloat::bfloat16, 16},                             // lossless: bit-identical to fp32
    {minifloat::binary16, 13},                             // lossless in fp16's normal range
    {minifloat::bfloat16, 8},                              // 3 bytes per weight
    {minifloat::bfloat16, 9, minifloat::storage::split_mode::stochastic},  // paper's rstoc variant
    {minifloat::fp_6_9_0, 8},  // all-finite visible format: the step checks every value is storable first
    {minifloat::binary16, 8},
    {minifloat::e4m3, 8},
    {minifloat::bfloat16, 8, minifloat::storage::split_mode::stochastic},
    {minifloat::binary16, 8, minifloat::storage::split_mode::stochastic},
    {minifloat::e4m3, 8, minifloat::storage::split_mode::stochastic},
};
const char* const layout_names[] = {"bf16+16", "fp16+13",  "bf16+8", "bf16+9_stochastic", "fp(6,9,0)+8",
                                    "fp16+8",  "e4m3+8", "bf16+8_stochastic", "fp16+8_stochastic",
                                    "e4m3+8_stochastic"};
constexpr long layout_count = sizeof(layouts) / sizeof(layouts[0]);

double weight_bytes(const ms::split_layout& l) { return (l.visible_bits() + l.extra_bits) / 8.0; }

void bm_memcpy_weights(benchmark::State& state) {
  const auto& in = initial_weights();
  std::vector<float> out(parameters);
  for (auto _ : state) {
    benchmark::DoNotOptimize(out.data());  // the copy has an observer: no compiler may drop it
    std::memcpy(out.data(), in.data(), parameters * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_rate(state, 8);
}

const ms::sgd_options sgd{0.01, 0.9, 0, 1e-4};  // momentum and weight decay
const ms::adam_options adam{1e-3};
// Bytes per parameter besides the weights: the gradient (read), the state (read and written).
constexpr double sgd_other = 4 + 4 * 2;
constexpr double adam_other = 4 + 8 * 2;

/// A plain hand-written SGD loop (momentum, weight decay, after the first step), as a user writes
/// it: PyTorch's formulas with the same float factors, no library.
struct plain_sgd {
  std::vector<float> w = initial_weights(), buf = std::vector<float>(parameters, 0.0f);
  void step() {
    const float lr = static_cast<float>(sgd.lr), mom = static_cast<float>(sgd.momentum),
                damp = static_cast<float>(1 - sgd.dampening), wd = static_cast<float>(sgd.weight_decay);
    const float* g = gradients().data();
    float* p = w.data();
    float* b = buf.data();
    for (std::size_t i = 0; i < parameters; ++i) {
      const float d = std::fma(wd, p[i], g[i]);
      const float m = std::fma(damp, d, b[i] * mom);
      b[i] = m;
      p[i] = std::fma(-lr, m, p[i]);
    }
  }
};
/// A plain hand-written Adam loop (PyTorch 2's lerp first moment, bias corrections per step),
/// with std::sqrt as a user writes it.
struct plain_adam {
  std::vector<float> w = initial_weights(), m = std::vector<float>(parameters, 0.0f),
                     v = std::vector<float>(parameters, 0.0f);
  std::int64_t steps = 0;
  void step() {
    ++steps;
    const double bc1 = 1 - std::pow(adam.beta1, static_cast<double>(steps));
    const double bc2 = 1 - std::pow(adam.beta2, static_cast<double>(steps));
    const float w1 = static_cast<float>(1 - adam.beta1), b2 = static_cast<float>(adam.beta2),
                c2 = static_cast<float>(1 - adam.beta2), bc2_sqrt = static_cast<float>(std::sqrt(bc2)),
                eps = static_cast<float>(adam.eps), neg_step = static_cast<float>(-(adam.lr / bc1));
    const float* g = gradients().data();
    float* p = w.data();
    float* mp = m.data();
    float* vp = v.data();
    for (std::size_t i = 0; i < parameters; ++i) {
      mp[i] = std::fma(w1, g[i] - mp[i], mp[i]);
      vp[i] = std::fma(c2 * g[i], g[i], vp[i] * b2);
      p[i] = p[i] + neg_step * mp[i] / (std::sqrt(vp[i]) / bc2_sqrt + eps);
    }
  }
};

template <class State, class Weights, class Options>
struct library_step {
  Weights w;
  const Options& o;
  unsigned threads = 1;  ///< for split weights (optimizers.hpp's threaded overloads)
  State s{};
  void step() {
    if constexpr (std::is_same_v<Weights, std::vector<float>>) {
      if constexpr (std::is_same_v<State, ms::sgd_state>) ms::sgd_step(w, gradients(), s, o);
      else ms::adam_step(w, gradients(), s, o);
    } else {
      if constexpr (std::is_same_v<State, ms::sgd_state>) ms::sgd_step(w, gradients(), s, o, minifloat::threads{threads});
      else ms::adam_step(w, gradients(), s, o, minifloat::threads{threads});
    }
  }
};

// Times `tested.step()` on the wall clock after one untimed step of each (which creates the
// optimizer's state), with `reference.step()` timed just before it in every iteration.
// bytes: what one step under test reads and writes per parameter.
template <class Tested, class Reference>
void time_against(benchmark::State& bm, Tested& tested, Reference& reference, double bytes) {
  using clock = std::chrono::steady_clock;
  tested.step();
  reference.step();
  double reference_seconds = 0, tested_seconds = 0;
  for (auto _ : bm) {
    const auto t0 = clock::now();
    reference.step();
    benchmark::ClobberMemory();
    const auto t1 = clock::now();
    tested.step();
    benchmark::ClobberMemory();
    const auto t2 = clock::now();
    const double r = std::chrono::duration<double>(t1 - t0).count(), k = std::chrono::duration<double>(t2 - t1).count();
    reference_seconds += r;
    tested_seconds += k;
    bm.SetIterationTime(k);
  }
  set_rate(bm, bytes);
  bm.counters["x_ref"] = reference_seconds / tested_seconds;
}

using sgd_fp32 = library_step<ms::sgd_state, std::vector<float>, ms::sgd_options>;
using adam_fp32 = library_step<ms::adam_state, std::vector<float>, ms::adam_options>;

void bm_sgd_fp32(benchmark::State& state) {
  state.SetLabel("vs plain loop");
  sgd_fp32 tested{initial_weights(), sgd};
  plain_sgd reference;
  time_against(state, tested, reference, 4 * 2 + sgd_other);
}
void bm_sgd_split(benchmark::State& state) {
  const auto& l = layouts[state.range(0)];
  state.SetLabel(layout_names[state.range(0)]);
  library_step<ms::sgd_state, ms::split_tensor, ms::sgd_options> tested{ms::split_tensor(initial_weights(), l), sgd};
  sgd_fp32 reference{initial_weights(), sgd};
  time_against(state, tested, reference, weight_bytes(l) * 2 + sgd_other);
}
// Low-precision-only weights (low_tensor.hpp): bf16 (IEEE) and the all-finite fp(6,9,0).
void bm_sgd_low(benchmark::State& state) {
  const minifloat::format f = state.range(0) == 0 ? minifloat::bfloat16 : minifloat::fp_6_9_0;
  state.SetLabel(state.range(0) == 0 ? "bf16" : "fp(6,9,0)");
  library_step<ms::sgd_state, ms::low_tensor, ms::sgd_options> tested{ms::low_tensor(initial_weights(), f), sgd};
  sgd_fp32 reference{initial_weights(), sgd};
  time_against(state, tested, reference, 2 * 2 + sgd_other);
}
void bm_adam_fp32(benchmark::State& state) {
  state.SetLabel("vs plain loop");
  adam_fp32 tested{initial_weights(), adam};
  plain_adam reference;
  time_against(state, tested, reference, 4 * 2 + adam_other);
}
void bm_adam_split(benchmark::State& state) {
  const auto& l = layouts[state.range(0)];
  state.SetLabel(layout_names[state.range(0)]);
  library_step<ms::adam_state, ms::split_tensor, ms::adam_options> tested{ms::split_tensor(initial_weights(), l), adam};
  adam_fp32 reference{initial_weights(), adam};
  time_against(state, tested, reference, weight_bytes(l) * 2 + adam_other);
}

// Layout range(0) on range(1) threads against the same layout on one thread.
template <class State, class Options>
void split_threads(benchmark::State& state, const Options& o, double other_bytes) {
  const auto& l = layouts[state.range(0)];
  const auto threads = static_cast<unsigned>(state.range(1));
  state.SetLabel(std::string(layout_names[state.range(0)]) + " " + std::to_string(threads) + " threads vs 1");
  library_step<State, ms::split_tensor, Options> tested{ms::split_tensor(initial_weights(), l), o, threads};
  library_step<State, ms::split_tensor, Options> reference{ms::split_tensor(initial_weights(), l), o, 1};
  time_against(state, tested, reference, weight_bytes(l) * 2 + other_bytes);
}
void bm_sgd_split_threads(benchmark::State& state) { split_threads<ms::sgd_state>(state, sgd, sgd_other); }
void bm_adam_split_threads(benchmark::State& state) { split_threads<ms::adam_state>(state, adam, adam_other); }

BENCHMARK(bm_memcpy_weights)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_sgd_fp32)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(bm_sgd_split)->DenseRange(0, layout_count - 1)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(bm_sgd_low)->DenseRange(0, 1)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(bm_adam_fp32)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(bm_adam_split)->DenseRange(0, layout_count - 1)->Unit(benchmark::kMillisecond)->UseManualTime();
// The named layouts (bf16+16, bf16+8, fp16+8, e4m3+8 and the stochastic three) and the chunked
// bf16+9 stochastic, on 2 threads.
BENCHMARK(bm_sgd_split_threads)->ArgsProduct({{0, 2, 3, 5, 6, 7, 8, 9}, {2}})->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(bm_adam_split_threads)->ArgsProduct({{0, 2, 3, 5, 6, 7, 8, 9}, {2}})->Unit(benchmark::kMillisecond)->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
