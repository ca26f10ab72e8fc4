// The example trainer's weight store (examples/weight_storage.hpp; extra-mantissa-bits paper
// §3.1, §3.2, §4.1): fused and unfused updates agree bit for bit; bf16 + 16 truncating split
// training is fp32-master training with a truncated compute copy; the overflow rules of the
// fused update (rollback = the unfused skip, partial = earlier-applied updates stand); and the
// memory ledger's counts on a hand-computed model; low-only OCP MX weights (blocks along rows,
// each update the fp32 step re-quantized in whole blocks) and the configurations refused.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <minifloat/block.hpp>
#include <minifloat/bulk.hpp>
#include <minifloat/random.hpp>
#include <minifloat/round.hpp>
#include <minifloat/storage/memory_ledger.hpp>

#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "nn/models.hpp"
#include "weight_storage.hpp"

namespace {

namespace ms = minifloat::storage;
using examples::weight_config;
using examples::weight_mode;

struct batch {
  nn::tensor x;
  std::vector<std::int32_t> y;
};

batch make_batch(std::size_t n, nn::shape4 sample, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  batch b{nn::tensor({n, sample.c, sample.h, sample.w}), std::vector<std::int32_t>(n)};
  for (float& v : b.x.values) v = d(rng);
  for (std::size_t i = 0; i < n; ++i) b.y[i] = static_cast<std::int32_t>((i * 7 + seed) % 10);
  return b;
}

nn::sequential small_cnn() {
  return nn::make_cnn({.sample = {1, 1, 8, 8}, .channels = 2, .blocks = 2, .classes = 10, .width = 1.0, .seed = 3});
}

/// Rounds P to bf16 toward zero (the compute copy of a truncating split), everything else as is;
/// optionally puts +Inf into one parameter gradient of one module at one step.
class test_hooks final : public nn::rounding_hooks {
 public:
  bool truncate_weights = false;
  std::size_t inf_module = 0;  // 0: no injection
  int inf_step = -1;
  int step = 0;

  void round(const nn::tensor_site& s, std::span<float> v) override {
    if (truncate_weights && s.kind == nn::tensor_kind::parameter)
      minifloat::quantize(std::span<const float>(v), v,
                          minifloat::rounder<float>(minifloat::bfloat16, {minifloat::rounding::toward_zero,
                                                                          minifloat::overflow::infinity}));
    if (s.kind == nn::tensor_kind::parameter_gradient && s.module == inf_module && step == inf_step && s.parameter == 0)
      v[0] = std::numeric_limits<float>::infinity();
  }
};

struct run_result {
  std::vector<std::vector<float>> weights;  // stored values per parameter after the run
  std::vector<double> losses;
  std::vector<examples::step_outcome> outcomes;
  std::vector<float> scales;
  std::size_t journal_peak = 0, gradient_peak = 0;
};

/// `steps` training steps on a fixed set of batches, as the trainer runs them.
run_result train(nn::sequential net, weight_config c, int steps, test_hooks hooks = {}) {
  ms::memory_ledger ledger;
  net.track_memory(ledger);
  minifloat::training::loss_scaler scaler({1024.0f, 2.0f, 0.5f, 1000, true});
  examples::weight_store store(net, c, scaler, &ledger);
  ledger.reset_peaks();  // the gradients the model was built with are released by a fused store
  nn::softmax_cross_entropy loss;
  run_result r;
  for (int s = 0; s < steps; ++s) {
    const batch b = make_batch(6, {1, 1, 8, 8}, static_cast<std::uint64_t>(s % 3));
    hooks.step = s;
    store.begin_step(0.05 / (1 + s));
    r.losses.push_back(loss.forward(net.forward(b.x, hooks, nn::mode::train, &store), b.y));
    net.backward(loss.backward(scaler.scale()), hooks, store.sink());
    r.outcomes.push_back(store.finish_step());
    scaler.update();
    r.scales.push_back(scaler.scale());
  }
  for (std::size_t i = 0; i < store.size(); ++i) r.weights.push_back(store.stored_values(i));
  r.journal_peak = ledger.peak(ms::memory_category::journal);
  r.gradient_peak = ledger.peak(ms::memory_category::gradients);
  return r;
}

bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size()) return false;
    for (std::size_t j = 0; j < a[i].size(); ++j)
      if (std::bit_cast<std::uint32_t>(a[i][j]) != std::bit_cast<std::uint32_t>(b[i][j])) return false;
  }
  return true;
}

std::vector<weight_config> storage_variants() {
  std::vector<weight_config> out;
  weight_config master;
  out.push_back(master);
  weight_config low = master;
  low.mode = weight_mode::low_only;
  low.visible = minifloat::bfloat16;
  out.push_back(low);
  weight_config extra = master;
  extra.mode = weight_mode::low_extra;
  extra.visible = minifloat::binary16;
  extra.extra_bits = 8;
  extra.split = ms::split_mode::stochastic;
  out.push_back(extra);
  weight_config mx = master;
  mx.mode = weight_mode::low_only;
  mx.visible_blocks = minifloat::mxfp8_e4m3;
  mx.split = ms::split_mode::stochastic;
  out.push_back(mx);
  return out;
}

/// The hand-computed model of the memory tests: linear 3 -> 2 with bias, tracked by `ledger`.
nn::sequential linear_3_to_2(ms::memory_ledger& ledger) {
  nn::sequential net({1, 3, 1, 1});
  std::mt19937_64 rng(1);
  net.emplace<nn::linear>("fc", std::size_t{3}, std::size_t{2}, true, rng);
  net.track_memory(ledger);
  return net;
}
/// Its forward and backward pass on a fixed batch of 4, unrounded, in a step of learning rate lr;
/// the caller ends the step (store.finish_step()).
void linear_forward_backward(nn::sequential& net, examples::weight_store& store, double lr) {
  batch b{nn::tensor({4, 3, 1, 1}), {0, 1, 1, 0}};
  for (std::size_t i = 0; i < 12; ++i) b.x.values[i] = 0.25f * static_cast<float>(i) - 1.0f;
  nn::no_rounding hooks;
  nn::softmax_cross_entropy loss;
  store.begin_step(lr);
  loss.forward(net.forward(b.x, hooks, nn::mode::train, &store), b.y);
  net.backward(loss.backward(), hooks, store.sink());
}

}  // namespace

TEST_CASE("fused and unfused updates leave bit-identical weights when nothing overflows") {
  for (const auto optimizer : {examples::optimizer_kind::sgd, examples::optimizer_kind::adamw}) {
    for (weight_config c : storage_variants()) {
      c.optimizer = optimizer;
      c.clip.tensor_norm = 0.5f;  // per-tensor clipping is a per-parameter hook: allowed fused
      const run_result unfused = train(small_cnn(), c, 4);
      c.fused = true;
      const run_result fused = train(small_cnn(), c, 4);
      INFO("mode " << static_cast<int>(c.mode) << ", optimizer " << static_cast<int>(optimizer));
      for (const auto& o : unfused.outcomes) REQUIRE_FALSE(o.overflow);
      CHECK(bitwise_equal(unfused.weights, fused.weights));
      CHECK(unfused.losses == fused.losses);
      // The weights did move (the comparison is not of two untouched models).
      CHECK_FALSE(bitwise_equal(unfused.weights, train(small_cnn(), c, 0).weights));
      // Fused, at most one layer's gradients are ever held: conv1's 18 + bn's 4 floats are less
      // than the whole model's.
      CHECK(fused.gradient_peak < unfused.gradient_peak);
    }
  }
}

TEST_CASE("bf16 + 16 truncating split training is fp32-master training with the master truncated to bf16") {
  for (const auto optimizer : {examples::optimizer_kind::sgd, examples::optimizer_kind::adamw}) {
    test_hooks truncating;
    truncating.truncate_weights = true;
    weight_config master;
    master.optimizer = optimizer;
    weight_config split = master;
    split.mode = weight_mode::low_extra;
    split.visible = minifloat::bfloat16;
    split.extra_bits = 16;
    const run_result a = train(small_cnn(), master, 5, truncating);
    const run_result b = train(small_cnn(), split, 5, truncating);
    CHECK(bitwise_equal(a.weights, b.weights));
    CHECK(a.losses == b.losses);
    // Without truncating the compute copy, fp32 master training differs (the test can fail).
    const run_result plain = train(small_cnn(), master, 5);
    CHECK_FALSE(bitwise_equal(a.weights, plain.weights));
  }
}

TEST_CASE("an overflow late in the backward pass: rollback equals the unfused skip, partial keeps earlier updates") {
  // Module 1 (conv1) is the last layer the backward reaches: by then every other layer of a
  // fused step has been updated.
  test_hooks inject;
  inject.inf_module = 1;
  inject.inf_step = 2;
  for (const auto optimizer : {examples::optimizer_kind::sgd, examples::optimizer_kind::adamw}) {
    weight_config c;
    c.mode = weight_mode::low_extra;
    c.visible = minifloat::binary16;
    c.extra_bits = 8;
    c.optimizer = optimizer;
    const run_result unfused = train(small_cnn(), c, 4, inject);
    REQUIRE(unfused.outcomes[2].overflow);
    CHECK(unfused.outcomes[2].updated == 0);
    CHECK(unfused.scales[2] == unfused.scales[1] / 2);

    c.fused = true;
    c.on_overflow = examples::overflow_policy::rollback;
    const run_result rollback = train(small_cnn(), c, 4, inject);
    REQUIRE(rollback.outcomes[2].overflow);
    const std::size_t params = rollback.weights.size();
    CHECK(rollback.outcomes[2].rolled_back == params - 1);  // all but conv1.weight had been updated
    CHECK(rollback.outcomes[2].updated == 0);
    CHECK(bitwise_equal(unfused.weights, rollback.weights));  // including the step after the skip
    CHECK(unfused.losses == rollback.losses);
    CHECK(unfused.scales == rollback.scales);
    CHECK(rollback.journal_peak > 0);  // the price: the journal is counted

    c.on_overflow = examples::overflow_policy::partial;
    const run_result partial = train(small_cnn(), c, 3, inject);  // ends with the overflowed step
    const run_result before = train(small_cnn(), c, 2, inject);   // the state before it
    REQUIRE(partial.outcomes[2].overflow);
    CHECK(partial.outcomes[2].updated == params - 1);
    CHECK(partial.scales[2] == partial.scales[1] / 2);
    CHECK(partial.journal_peak == 0);
    CHECK(partial.weights[0] == before.weights[0]);        // conv1.weight: skipped
    for (std::size_t i = 1; i < params; ++i) CHECK(partial.weights[i] != before.weights[i]);  // applied
  }
}

TEST_CASE("global-norm clipping is refused for a fused update; bad layouts name their field") {
  weight_config c;
  c.fused = true;
  c.clip.global_norm = 1.0f;
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("clip.global_norm"));
  weight_config k;
  k.mode = weight_mode::low_extra;
  k.visible = minifloat::bfloat16;
  k.extra_bits = 17;  // 7 + 17 > 23
  REQUIRE_THROWS_WITH(k.validate(), Catch::Contains("extra_bits"));
}

TEST_CASE("memory ledger on a hand-computed model: linear 3 -> 2, batch 4, bf16 + 8 split, SGD momentum") {
  ms::memory_ledger ledger;
  nn::sequential net = linear_3_to_2(ledger);
  // value, used, grad: 6 + 2 floats each.
  CHECK(ledger.current(ms::memory_category::weights) == 32);
  CHECK(ledger.current(ms::memory_category::compute_copy) == 32);
  CHECK(ledger.current(ms::memory_category::gradients) == 32);
  minifloat::training::loss_scaler scaler({1.0f, 2.0f, 0.5f, 1000, false});
  weight_config c;
  c.mode = weight_mode::low_extra;
  c.visible = minifloat::bfloat16;
  c.extra_bits = 8;
  examples::weight_store store(net, c, scaler, &ledger);
  // No fp32 value is held: weight 6 x 16 bits = 3 words, bias 2 x 16 = 1 word -> 16 bytes;
  // extra bits 6 x 8 = 48 bits -> 2 words, 2 x 8 -> 1 word -> 12 bytes.
  CHECK(ledger.current(ms::memory_category::weights) == 16);
  CHECK(ledger.current(ms::memory_category::extra_bits) == 12);
  ledger.reset_peaks();

  linear_forward_backward(net, store, 0.1);
  REQUIRE_FALSE(store.finish_step().overflow);
  // Y of the input (4 x 3) and of fc (4 x 2): 80 bytes; GY of fc (4 x 2): 32 bytes (the input's
  // is never computed); the momentum buffers: 8 floats.
  CHECK(ledger.current(ms::memory_category::activations) == 80);
  CHECK(ledger.current(ms::memory_category::activation_gradients) == 32);
  CHECK(ledger.current(ms::memory_category::optimizer_state) == 32);
  CHECK(ledger.peak_total() == 16 + 12 + 32 + 32 + 80 + 32 + 32);
  CHECK(ledger.breakdown_at_peak()[static_cast<std::size_t>(ms::memory_category::extra_bits)] == 12);
}

TEST_CASE("low-only MX weights: each update is the fp32 step re-quantized along rows; the ledger counts packed codes and scales") {
  // A linear layer 3 -> 2 with bias, batch 4, MXFP8 (e4m3) weights, SGD momentum, nearest even.
  ms::memory_ledger ledger;
  nn::sequential net = linear_3_to_2(ledger);
  std::vector<std::vector<float>> initial;
  for (nn::parameter* p : net.parameters()) initial.emplace_back(p->value.begin(), p->value.end());
  minifloat::training::loss_scaler scaler({1.0f, 2.0f, 0.5f, 1000, false});
  weight_config c;
  c.mode = weight_mode::low_only;
  c.visible_blocks = minifloat::mxfp8_e4m3;
  examples::weight_store store(net, c, scaler, &ledger);
  // fc.weight: 2 rows of 3, one block per row: 6 x 8 bits = 2 words (8 bytes) + 2 scale bytes;
  // fc.bias: a vector, one block: 2 x 8 bits = 1 word (4 bytes) + 1 scale byte. 15 bytes.
  CHECK(ledger.current(ms::memory_category::weights) == 15);
  CHECK(ledger.current(ms::memory_category::extra_bits) == 0);
  const auto rows = [&](std::size_t i) { return i == 0 ? std::size_t{2} : std::size_t{1}; };
  const auto requantize = [&](std::vector<float> v, std::size_t i) {
    minifloat::quantize_blocks(std::span<const float>(v), std::span<float>(v), minifloat::mxfp8_e4m3, {},
                               {rows(i), v.size() / rows(i), 1});
    return v;
  };
  for (std::size_t i = 0; i < 2; ++i) CHECK(store.stored_values(i) == requantize(initial[i], i));
  ledger.reset_peaks();

  std::vector<std::vector<float>> expected;
  std::vector<ms::sgd_state> states(2);
  for (int step = 0; step < 2; ++step) {
    expected = {store.stored_values(0), store.stored_values(1)};
    linear_forward_backward(net, store, 0.5);
    const auto params = net.parameters();
    for (std::size_t i = 0; i < 2; ++i) {  // the independent route: fp32 SGD, then quantize_blocks
      ms::sgd_step(std::span<float>(expected[i]), params[i]->grad, states[i], {0.5, c.momentum, 0, c.weight_decay});
      expected[i] = requantize(expected[i], i);
    }
    REQUIRE_FALSE(store.finish_step().overflow);
    for (std::size_t i = 0; i < 2; ++i) CHECK(store.stored_values(i) == expected[i]);
  }
  CHECK(store.stored_values(0) != requantize(initial[0], 0));  // the weights moved
  // Activations 80, activation gradients 32, compute copy 32, gradients 32, momentum 32.
  CHECK(ledger.peak_total() == 15 + 32 + 32 + 80 + 32 + 32);
  CHECK(ledger.breakdown_at_peak()[static_cast<std::size_t>(ms::memory_category::weights)] == 15);
}

TEST_CASE("MX weights train reproducibly and their rows are PyTorch's first dimension") {
  weight_config c;
  c.mode = weight_mode::low_only;
  c.visible_blocks = minifloat::mxfp4;
  c.split = ms::split_mode::stochastic;
  const run_result a = train(small_cnn(), c, 3);
  const run_result b = train(small_cnn(), c, 3);
  CHECK(bitwise_equal(a.weights, b.weights));
  c.seed = 2;  // another seed draws other roundings
  CHECK_FALSE(bitwise_equal(a.weights, train(small_cnn(), c, 3).weights));
  CHECK(examples::block_rows({4, 3, 3, 3}) == 4);  // conv weight: 4 rows of 27
  CHECK(examples::block_rows({10, 128, 1, 1}) == 10);
  CHECK(examples::block_rows({10, 1, 1, 1}) == 1);  // bias: one row
}

TEST_CASE("block formats are refused where the store cannot keep them: low+k, NVFP4, fp32-master") {
  weight_config k;
  k.mode = weight_mode::low_extra;
  k.visible_blocks = minifloat::mxfp8_e4m3;
  k.extra_bits = 8;
  REQUIRE_THROWS_WITH(k.validate(), Catch::Contains("visible_blocks") && Catch::Contains("grid moves"));
  weight_config nv;
  nv.mode = weight_mode::low_only;
  nv.visible_blocks = minifloat::nvfp4;
  REQUIRE_THROWS_WITH(nv.validate(), Catch::Contains("per-tensor scale"));
  weight_config master;
  master.visible_blocks = minifloat::mxfp4;
  REQUIRE_THROWS_WITH(master.validate(), Catch::Contains("low_only"));
}

TEST_CASE("an update MX weights cannot hold is refused naming the tensor, and nothing changes") {
  ms::memory_ledger ledger;
  nn::sequential net = linear_3_to_2(ledger);
  minifloat::training::loss_scaler scaler({1.0f, 2.0f, 0.5f, 1000, false});
  weight_config c;
  c.mode = weight_mode::low_only;
  c.visible_blocks = minifloat::mxfp4;
  examples::weight_store store(net, c, scaler, &ledger);
  const std::vector<float> before = store.stored_values(0);
  linear_forward_backward(net, store, 1e30);
  for (float& g : net.parameters()[0]->grad) g = 1e30f;  // finite, but w - lr * g overflows float
  REQUIRE_THROWS_WITH(store.finish_step(), Catch::Contains("tensor fc.weight") && Catch::Contains("-Inf") &&
                                               Catch::Contains("block-scaled weights hold finite values only"));
  CHECK(store.stored_values(0) == before);
}
