// Optimizer steps on split storage (optimizers.hpp) against the same optimizer on fp32 master
// weights, at 16M parameters, with a memcpy of the fp32 weights timed in the same run.
// Reports parameters per ns; bytes_per_second counts the bytes each step must move (read and
// written) at its storage sizes. docs/perf/storage-bitpack.md records the results and the command.
#include <benchmark/benchmark.h>

#include <minifloat/storage/optimizers.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

namespace {

namespace ms = minifloat::storage;

constexpr std::size_t parameters = std::size_t{1} << 24;

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
};
const char* const layout_names[] = {"bf16+16", "fp16+13", "bf16+8", "bf16+9_stochastic", "fp(6,9,0)+8"};

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

// Times optimizer steps on w after one untimed step (which creates the optimizer's state).
// bytes: what one step reads and writes per parameter.
template <class State, class Weights, class Options>
void time_steps(benchmark::State& bm, Weights& w, const Options& o, double bytes) {
  State s;
  const auto step = [&] {
    if constexpr (std::is_same_v<State, ms::sgd_state>) ms::sgd_step(w, gradients(), s, o);
    else ms::adam_step(w, gradients(), s, o);
  };
  step();
  for (auto _ : bm) {
    step();
    benchmark::ClobberMemory();
  }
  set_rate(bm, bytes);
}

const ms::sgd_options sgd{0.01, 0.9, 0, 1e-4};  // momentum and weight decay
const ms::adam_options adam{1e-3};
// Bytes per parameter besides the weights: the gradient (read), the state (read and written).
constexpr double sgd_other = 4 + 4 * 2;
constexpr double adam_other = 4 + 8 * 2;

void bm_sgd_fp32(benchmark::State& state) {
  std::vector<float> w = initial_weights();
  time_steps<ms::sgd_state>(state, w, sgd, 4 * 2 + sgd_other);
}
void bm_sgd_split(benchmark::State& state) {
  const auto& l = layouts[state.range(0)];
  state.SetLabel(layout_names[state.range(0)]);
  ms::split_tensor w(initial_weights(), l);
  time_steps<ms::sgd_state>(state, w, sgd, weight_bytes(l) * 2 + sgd_other);
}
// Low-precision-only weights (low_tensor.hpp): bf16 (IEEE) and the all-finite fp(6,9,0).
void bm_sgd_low(benchmark::State& state) {
  const minifloat::format f = state.range(0) == 0 ? minifloat::bfloat16 : minifloat::fp_6_9_0;
  state.SetLabel(state.range(0) == 0 ? "bf16" : "fp(6,9,0)");
  ms::low_tensor w(initial_weights(), f);
  time_steps<ms::sgd_state>(state, w, sgd, 2 * 2 + sgd_other);
}
void bm_adam_fp32(benchmark::State& state) {
  std::vector<float> w = initial_weights();
  time_steps<ms::adam_state>(state, w, adam, 4 * 2 + adam_other);
}
void bm_adam_split(benchmark::State& state) {
  const auto& l = layouts[state.range(0)];
  state.SetLabel(layout_names[state.range(0)]);
  ms::split_tensor w(initial_weights(), l);
  time_steps<ms::adam_state>(state, w, adam, weight_bytes(l) * 2 + adam_other);
}

BENCHMARK(bm_memcpy_weights)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_sgd_fp32)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_sgd_split)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_sgd_low)->DenseRange(0, 1)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_adam_fp32)->Unit(benchmark::kMillisecond);
BENCHMARK(bm_adam_split)->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
