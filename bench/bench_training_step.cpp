// One training step of the example trainer (examples/train.cpp) with every rounding site active
// vs the same step with rounding disabled: the cost of emulating low precision (target: ≤ 1.3×).
// The step is the trainer's, through the same wiring (examples/site_wiring.hpp): begin_step,
// forward with P and Y rounding, loss, backward with GY and GP rounding, unscaling, the SGD
// step on the fp32 masters, the loss-scaler update, promotion and the footprint measurement.
//
//   bm_step/<model>/<assignment>   model: 0 MLP (width 1), 1 CNN (width 1), 2 CNN (width 0.25)
//                                  assignment: 0 fp32 (sites disabled), 1 all-high, 2 uniform,
//                                  3 uniform with stochastic rounding
//
// Synthetic batch of 128 images (bytes drawn from a fixed seed, normalised like Fashion-MNIST), so
// the benchmark runs without the data set; the work per step does not depend on the pixels.
// docs/performance.md (training sections) records the results and the command.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include <minifloat/training/training.hpp>

#include "nn/loss.hpp"
#include "nn/models.hpp"
#include "nn/sgd.hpp"
#include "site_wiring.hpp"
#include "synthetic_batch.hpp"

namespace {

namespace mt = minifloat::training;

constexpr std::size_t batch = 128;

nn::sequential make_model(std::int64_t which) {
  switch (which) {
    case 0: return nn::make_mlp({.width = 1.0});
    case 1: return nn::make_cnn({.width = 1.0});
    default: return nn::make_cnn({.width = 0.25});
  }
}

const char* model_name(std::int64_t which) { return which == 0 ? "mlp" : which == 1 ? "cnn" : "cnn-w0.25"; }
const char* assignment_name(std::int64_t a) {
  return a == 0 ? "fp32" : a == 1 ? "all-high" : a == 2 ? "uniform" : "uniform-stochastic";
}

void bm_step(benchmark::State& state) {
  const std::int64_t which = state.range(0), assignment = state.range(1);
  nn::sequential net = make_model(which);
  examples::wired_graph wired = examples::describe(net.describe(batch));
  mt::graph& g = wired.graph;
  switch (assignment) {
    case 0: mt::disable_rounding(g); break;
    case 1: mt::apply(g, mt::all_high(g)); break;
    default: mt::apply(g, mt::uniform(g)); break;
  }
  if (assignment == 3)
    for (mt::site& s : g.sites()) s.set_mode(minifloat::rounding::stochastic);
  g.seed_sites(1);
  examples::site_hooks hooks(g, wired.site_of, 1);
  mt::loss_scaler scaler({65536.0f, 2.0f, 0.5f, 469, assignment != 0});
  mt::overflow_promotion promo(0.01);
  nn::sgd opt({.momentum = 0.9f, .weight_decay = 5e-4f});
  const auto params = net.parameters();
  nn::softmax_cross_entropy loss;

  const bench_support::synthetic_batch input(batch);
  const nn::tensor& x = input.images;
  const std::vector<std::int32_t>& y = input.labels;

  std::uint64_t step = 0;
  double loss_sum = 0;
  for (auto _ : state) {
    g.begin_step(step);
    loss_sum += loss.forward(net.forward(x, hooks, nn::mode::train), y);
    net.backward(loss.backward(scaler.scale()), hooks);
    for (nn::parameter* p : params) scaler.unscale(p->grad);
    if (scaler.should_step()) opt.step(params, 0.01f);
    scaler.update();
    promo.promote(g.sites(), step);
    benchmark::DoNotOptimize(mt::measure_footprint(g.sites()).total_bits);
    ++step;
  }
  benchmark::DoNotOptimize(loss_sum);
  state.SetLabel(std::string(model_name(which)) + "/" + assignment_name(assignment));
  // What the sites actually counted in the last step: checks that every tensor was rounded.
  std::uint64_t rounded = 0;
  for (const mt::site& s : g.sites()) rounded += s.step_stats().values;
  state.counters["rounded_per_step"] = static_cast<double>(rounded);
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(batch) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

// Model by model, each model's four assignments one after the other, so that the runs compared
// with each other are close in time (the machine is shared).
BENCHMARK(bm_step)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (std::int64_t model = 0; model < 3; ++model)
        for (std::int64_t assignment = 0; assignment < 4; ++assignment) b->Args({model, assignment});
    })
    ->ArgNames({"model", "assignment"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

BENCHMARK_MAIN();
