// One training step of the example trainer with dynamic containers (Schrödinger's FP: QM+QE
// learning its bitlengths, BitWave) against the same step with fixed formats: the overhead of
// learning bitlengths (target: ≤ 10 % of the step time).
//
//   bm_step/<model>/<variant>   model: 0 MLP (width 1), 1 CNN (width 0.25)
//     variant 0  fp32: no rounding at all
//             1  fixed formats: the trainer's `--assignment uniform` (every P, Y, GY, GP rounded
//                through its site to fp(4,3,4) / fp(5,2,0), examples/site_wiring.hpp)
//             2  fixed containers: the dynamic-container hooks with frozen bitlengths (k_m = 3,
//                k_e = 4 everywhere): the quantizer, the saved input and eq. 8, no learning
//             3  QM+QE learning: draws, quantizer, bitlength gradients, regularizer, update
//             4  QM+QE learning with the faithful Gecko size of every stored tensor (+G)
//             5  BitWave (not yet fixed): controller per batch, same quantizer
// The step is the trainer's: begin_step, forward, loss, backward, the containers' end_step, SGD on
// the fp32 masters. Synthetic batch of 128 (fixed-seed bytes), as in bench_training_step.cpp.
// docs/performance.md records the command and the results.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <minifloat/training/training.hpp>

#include "dynamic_containers.hpp"
#include "nn/loss.hpp"
#include "nn/models.hpp"
#include "nn/sgd.hpp"
#include "site_wiring.hpp"
#include "synthetic_batch.hpp"

namespace {

namespace mt = minifloat::training;

constexpr std::size_t batch = 128;

const char* variant_name(std::int64_t v) {
  static const char* const names[] = {"fp32", "fixed-formats", "fixed-containers", "qm-qe", "qm-qe+gecko", "bitwave"};
  return names[v];
}

void bm_step(benchmark::State& state) {
  const std::int64_t model = state.range(0), variant = state.range(1);
  nn::sequential net = model == 0 ? nn::make_mlp({.width = 1.0}) : nn::make_cnn({.width = 0.25});
  const nn::model_description desc = net.describe(batch);
  examples::wired_graph wired = examples::describe(desc);
  mt::graph& g = wired.graph;
  if (variant == 1) mt::apply(g, mt::uniform(g));
  else mt::disable_rounding(g);
  g.seed_sites(1);
  examples::site_hooks sites(g, wired.site_of, 1);

  mt::dynamic_options o;
  o.method = variant == 5 ? mt::dynamic_method::bitwave : mt::dynamic_method::quantum;
  if (variant == 4) o.gecko = minifloat::storage::gecko_variant::faithful;
  o.quantum.seed = 1;
  o.learn_epochs = variant == 2 ? 0 : 1000;  // fixed containers: frozen from the start
  std::unique_ptr<examples::dynamic_container_hooks> dynamic;
  if (variant >= 2) {
    dynamic = std::make_unique<examples::dynamic_container_hooks>(desc, o);
    if (variant == 2)
      for (mt::quantum_tensor& t : dynamic->tensors()) t.set_lengths(3, 4);
    dynamic->begin_epoch(0, 0.01);
  }
  nn::rounding_hooks& hooks = dynamic ? static_cast<nn::rounding_hooks&>(*dynamic) : sites;

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
    if (dynamic) dynamic->begin_step(step);
    const double l = loss.forward(net.forward(x, hooks, nn::mode::train), y);
    loss_sum += l;
    net.backward(loss.backward(1.0f), hooks);
    if (dynamic) dynamic->end_step(l);
    opt.step(params, 0.01f);
    ++step;
    if (dynamic && step % 64 == 0) dynamic->end_epoch();  // keeps the ledger's work in the loop
  }
  benchmark::DoNotOptimize(loss_sum);
  state.SetLabel(std::string(model == 0 ? "mlp" : "cnn-w0.25") + "/" + variant_name(variant));
  if (dynamic) {
    // What the containers stored in the last step: checks that the learned variants did learn.
    const auto w = dynamic->spread(mt::tensor_class::weight, examples::bit_component::mantissa);
    state.counters["weight_mantissa_bits"] = w.mean;
  }
}

}  // namespace

// Model by model, the variants one after the other, so that the runs compared are close in time.
BENCHMARK(bm_step)
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (std::int64_t model = 0; model < 2; ++model)
        for (std::int64_t variant = 0; variant < 6; ++variant) b->Args({model, variant});
    })
    ->ArgNames({"model", "variant"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(1.0);

BENCHMARK_MAIN();
