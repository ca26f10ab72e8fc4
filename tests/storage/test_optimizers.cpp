// Optimizers on split storage: bit-identical to the fp32-master optimizer when the split is
// lossless (bf16 + 16), PyTorch's update rules against a double-precision transcription,
// multi-tensor steps equal to per-tensor steps, and validation before anything is modified.
#include <catch2/catch.hpp>

#include <minifloat/storage/optimizers.hpp>

#include "split_oracle.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ms = minifloat::storage;

namespace {

std::vector<float> normal_vector(std::size_t n, float sigma, std::mt19937& gen) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

const ms::split_layout bf16_16{minifloat::bfloat16, 16};

}  // namespace

TEST_CASE("SGD on bf16 + 16 split weights is bit-identical to SGD on fp32 master weights", "[optimizers]") {
  const ms::sgd_options settings[] = {
      {0.1, 0, 0, 0, false, false},         // plain
      {0.05, 0.9, 0, 1e-4, false, false},   // momentum, weight decay
      {0.05, 0.9, 0, 5e-4, true, false},    // Nesterov
      {0.01, 0.8, 0.1, 0, false, true},     // dampening, maximize
  };
  for (const auto& o : settings) {
    std::mt19937 gen(17);
    auto master = normal_vector(5000, 0.05f, gen);
    ms::split_tensor split(master, bf16_16);
    ms::sgd_state fp32_state, split_state;
    for (int step = 0; step < 60; ++step) {
      const auto grads = normal_vector(master.size(), 0.01f, gen);
      ms::sgd_step(master, grads, fp32_state, o);
      ms::sgd_step(split, grads, split_state, o);
      REQUIRE(bitwise_equal(split.reconstruct(), master));
      REQUIRE(bitwise_equal(split_state.momentum_buffer, fp32_state.momentum_buffer));
    }
  }
}

TEST_CASE("Adam and AdamW on bf16 + 16 split weights are bit-identical to fp32 master weights", "[optimizers]") {
  const ms::adam_options settings[] = {
      {1e-3, 0.9, 0.999, 1e-8, 0, false, false},
      {3e-3, 0.8, 0.99, 1e-6, 1e-2, false, false},  // L2 weight decay
      {2e-3, 0.9, 0.999, 1e-8, 1e-2, true, false},  // AdamW
      {1e-3, 0.3, 0.9, 1e-8, 0, false, true},       // beta1 < 0.5 takes lerp's other branch; maximize
  };
  for (const auto& o : settings) {
    std::mt19937 gen(23);
    auto master = normal_vector(3001, 0.05f, gen);
    ms::split_tensor split(master, bf16_16);
    ms::adam_state fp32_state, split_state;
    for (int step = 0; step < 60; ++step) {
      const auto grads = normal_vector(master.size(), 0.01f, gen);
      ms::adam_step(master, grads, fp32_state, o);
      ms::adam_step(split, grads, split_state, o);
      REQUIRE(bitwise_equal(split.reconstruct(), master));
      REQUIRE(bitwise_equal(split_state.exp_avg, fp32_state.exp_avg));
      REQUIRE(bitwise_equal(split_state.exp_avg_sq, fp32_state.exp_avg_sq));
      REQUIRE(split_state.steps == step + 1);
    }
  }
}

TEST_CASE("SGD follows torch.optim.SGD: buffer = first direction, then momentum * buf + (1 - dampening) * d",
          "[optimizers]") {
  // A double-precision transcription of PyTorch's loop; float results must agree to rounding.
  const ms::sgd_options o{0.1, 0.9, 0.25, 0.01, false, false};
  std::vector<float> p{1.0f, -2.0f, 0.5f};
  std::vector<double> ref(p.begin(), p.end()), buf(3);
  ms::sgd_state s;
  std::mt19937 gen(2);
  for (int step = 0; step < 20; ++step) {
    const auto g = normal_vector(3, 1.0f, gen);
    ms::sgd_step(p, g, s, o);
    for (std::size_t i = 0; i < 3; ++i) {
      const double d = g[i] + o.weight_decay * ref[i];
      buf[i] = step == 0 ? d : o.momentum * buf[i] + (1 - o.dampening) * d;
      ref[i] -= o.lr * buf[i];
      CHECK(p[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));
    }
  }
  CHECK(s.steps == 20);
}

TEST_CASE("Adam follows torch.optim.Adam: bias-corrected moments, eps outside the square root", "[optimizers]") {
  for (bool decoupled : {false, true}) {
    const ms::adam_options o{1e-2, 0.9, 0.999, 1e-8, 0.1, decoupled, false};
    std::vector<float> p{1.0f, -2.0f, 0.5f, 3.0f};
    std::vector<double> ref(p.begin(), p.end()), m(4), v(4);
    ms::adam_state s;
    std::mt19937 gen(3);
    for (int step = 1; step <= 30; ++step) {
      const auto g = normal_vector(4, 1.0f, gen);
      ms::adam_step(p, g, s, o);
      for (std::size_t i = 0; i < 4; ++i) {
        double grad = g[i];
        if (decoupled) ref[i] *= 1 - o.lr * o.weight_decay;
        else grad += o.weight_decay * ref[i];
        m[i] = o.beta1 * m[i] + (1 - o.beta1) * grad;
        v[i] = o.beta2 * v[i] + (1 - o.beta2) * grad * grad;
        const double bc1 = 1 - std::pow(o.beta1, step), bc2 = 1 - std::pow(o.beta2, step);
        ref[i] -= o.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.eps);
        CHECK(p[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-6));
      }
    }
  }
  // The first step moves every weight by lr against its gradient's sign (m-hat / sqrt(v-hat) = ±1).
  std::vector<float> p{0.0f, 0.0f};
  ms::adam_state s;
  ms::adam_step(p, std::vector<float>{3.0f, -1e-3f}, s, {0.5});
  CHECK(p[0] == Approx(-0.5f));
  CHECK(p[1] == Approx(0.5f).epsilon(1e-4));
}

TEST_CASE("a multi-tensor step equals one step per tensor, for lossy and stochastic layouts too", "[optimizers]") {
  std::mt19937 gen(8);
  const ms::split_layout layouts[] = {bf16_16, {minifloat::binary16, 8}, {minifloat::bfloat16, 9, ms::split_mode::stochastic}};
  std::vector<std::vector<float>> weights, grads;
  for (std::size_t n : {100u, 2048u, 4097u}) {
    weights.push_back(normal_vector(n, 0.1f, gen));
    grads.push_back(normal_vector(n, 0.01f, gen));
  }
  std::vector<ms::split_tensor> fused, single;
  for (std::size_t t = 0; t < 3; ++t) {
    fused.emplace_back(weights[t], layouts[t], 100 + t);
    single.emplace_back(weights[t], layouts[t], 100 + t);
  }
  std::vector<ms::adam_state> fused_state(3), single_state(3);
  std::vector<ms::split_group<ms::adam_state>> groups;
  for (std::size_t t = 0; t < 3; ++t) groups.push_back({&fused[t], grads[t], &fused_state[t]});
  const ms::adam_options o{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
  for (int step = 0; step < 5; ++step) {
    ms::adam_step(groups, o);
    for (std::size_t t = 0; t < 3; ++t) ms::adam_step(single[t], grads[t], single_state[t], o);
  }
  for (std::size_t t = 0; t < 3; ++t) {
    CHECK(fused[t].visible() == single[t].visible());
    CHECK(fused[t].extra() == single[t].extra());
  }
  std::vector<ms::sgd_state> sgd_state(3);
  std::vector<ms::split_group<ms::sgd_state>> sgd_groups;
  for (std::size_t t = 0; t < 3; ++t) sgd_groups.push_back({&fused[t], grads[t], &sgd_state[t]});
  ms::sgd_step(sgd_groups, {0.1, 0.9});
  ms::sgd_state one;
  ms::sgd_step(single[1], grads[1], one, {0.1, 0.9});
  CHECK(fused[1].visible() == single[1].visible());
}

TEST_CASE("lossy splits track fp32 master weights; stochastic splits make the visible values unbiased",
          "[optimizers]") {
  std::mt19937 gen(12);
  const auto start = normal_vector(4096, 1.0f, gen);
  std::vector<float> master = start;
  ms::split_tensor truncating(start, {minifloat::bfloat16, 8});
  ms::split_tensor stochastic(start, {minifloat::bfloat16, 9, ms::split_mode::stochastic}, 5);
  ms::sgd_state s0, s1, s2;
  const std::vector<float> grads(start.size(), 1.0f);
  const ms::sgd_options o{1e-4};  // far below bf16's resolution at |w| ~ 1, above that of 8 more bits
  for (int step = 0; step < 200; ++step) {
    ms::sgd_step(master, grads, s0, o);
    ms::sgd_step(truncating, grads, s1, o);
    ms::sgd_step(stochastic, grads, s2, o);
  }
  const auto wt = truncating.reconstruct(), ws = stochastic.reconstruct();
  std::vector<float> ht(start.size()), hs(start.size());
  truncating.visible_values(ht);
  stochastic.visible_values(hs);
  double drift_master = 0, drift_t = 0, drift_s = 0, bias_t = 0, bias_s = 0;
  for (std::size_t i = 0; i < start.size(); ++i) {
    drift_master += master[i] - start[i];
    drift_t += wt[i] - start[i];
    drift_s += ws[i] - start[i];
    bias_t += std::fabs(ht[i]) - std::fabs(wt[i]);  // h below the weight: truncated toward zero
    bias_s += std::fabs(hs[i]) - std::fabs(ws[i]);
  }
  const double n = static_cast<double>(start.size());
  CHECK(drift_master / n == Approx(-0.02).epsilon(1e-3));
  // 8 bits below bf16's 7: the weights resolve the 1e-4 steps (truncation's bias cancels over signs).
  CHECK(drift_t / n == Approx(-0.02).epsilon(0.15));
  CHECK(drift_s / n == Approx(-0.02).epsilon(0.15));
  // Truncated h lies about half a bf16 step (2^-8 near 1) toward zero from the weight; stochastic h
  // is unbiased.
  CHECK(bias_t / n < -1e-3);
  CHECK(std::fabs(bias_s / n) < 3e-4);
}

TEST_CASE("invalid hyperparameters and mismatched sizes throw before anything changes", "[optimizers]") {
  std::vector<float> p(64, 1.0f);
  const std::vector<float> g(64, 1.0f), short_g(63, 1.0f);
  ms::sgd_state s;
  CHECK_THROWS_AS(ms::sgd_step(p, g, s, {0.1, 0.0, 0.0, 0.0, true}), std::invalid_argument);  // Nesterov needs momentum
  CHECK_THROWS_AS(ms::sgd_step(p, g, s, {-0.1}), std::invalid_argument);
  CHECK_THROWS_AS(ms::sgd_step(p, short_g, s, {0.1}), std::invalid_argument);
  CHECK(p == std::vector<float>(64, 1.0f));
  CHECK(s.steps == 0);
  ms::adam_state a;
  CHECK_THROWS_AS(ms::adam_step(p, g, a, {1e-3, 1.0}), std::invalid_argument);  // beta1 must be < 1
  CHECK_THROWS_AS(ms::adam_step(p, g, a, {1e-3, 0.9, 0.999, -1.0}), std::invalid_argument);
  a.exp_avg.assign(10, 0.0f);
  CHECK_THROWS_WITH(ms::adam_step(p, g, a, {}), Catch::Contains("first moment"));
  ms::split_tensor t(p, bf16_16);
  ms::split_tensor u(std::vector<float>(10, 1.0f), bf16_16);
  ms::adam_state ok, bad;
  const std::vector<ms::split_group<ms::adam_state>> groups{{&t, g, &ok}, {&u, g, &bad}};  // u: 64 grads for 10
  CHECK_THROWS_AS(ms::adam_step(groups, {}), std::invalid_argument);
  CHECK(ok.steps == 0);
  CHECK(t.generation() == 0);
}

namespace {

/// Everything a step may change: the stored words, the generation and the optimizer state.
struct snapshot {
  std::vector<std::uint32_t> words, extra;
  std::uint64_t generation = 0;
  std::vector<float> b, m, v;
  std::int64_t sgd_steps = 0, adam_steps = 0;
  bool operator==(const snapshot&) const = default;
};
snapshot take(const ms::split_tensor& t, const ms::sgd_state& s, const ms::adam_state& a) {
  const auto w = t.visible().words(), e = t.extra().words();
  return {{w.begin(), w.end()}, {e.begin(), e.end()}, t.generation(), s.momentum_buffer, a.exp_avg, a.exp_avg_sq, s.steps, a.steps};
}
snapshot take(const ms::low_tensor& t, const ms::sgd_state& s, const ms::adam_state& a) {
  const auto w = t.codes().words();
  return {{w.begin(), w.end()}, {}, t.generation(), s.momentum_buffer, a.exp_avg, a.exp_avg_sq, s.steps, a.steps};
}

// Weights at every chunk boundary and inside every chunk of a 5000-weight tensor (chunks of 2048).
constexpr std::size_t rejected_positions[] = {0, 1, 31, 32, 2047, 2048, 2049, 4095, 4096, 4500, 4999};

enum class injected { nan_gradient, inf_gradient, huge_update };

/// Steps `t` (state prepared by `warm` clean steps) with one bad gradient at `at`; returns whether
/// the step threw std::domain_error, after checking that a throwing step changed nothing.
template <class W>
bool step_rejects(W& t, int warm, bool adam, const ms::sgd_options& so, const ms::adam_options& ao, std::size_t at,
                  injected kind) {
  ms::sgd_state s;
  ms::adam_state a;
  const std::vector<float> clean(t.size(), 0.01f);
  for (int k = 0; k < warm; ++k) {
    if (adam) ms::adam_step(t, clean, a, ao);
    else ms::sgd_step(t, clean, s, so);
  }
  std::vector<float> g = clean;
  g[at] = kind == injected::nan_gradient ? NAN : kind == injected::inf_gradient ? INFINITY : std::numeric_limits<float>::max();
  const snapshot before = take(t, s, a);
  try {
    if (adam) ms::adam_step(t, g, a, ao);
    else ms::sgd_step(t, g, s, so);
  } catch (const std::domain_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("weight " + std::to_string(at)) && Catch::Contains("nothing was changed"));
    CHECK(take(t, s, a) == before);
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("issue reproducer: a NaN gradient at 4500 of 5000 leaves weights, momentum and step count as they were",
          "[optimizers]") {
  ms::split_tensor t(std::vector<float>(5000, .5f), {minifloat::fp_6_9_0, 8});
  std::vector<float> g(5000, 0.01f);
  ms::sgd_state state;
  ms::sgd_step(t, g, state, {0.1, 0.9});  // a first, clean step: the state exists
  const auto words = std::vector<std::uint32_t>(t.visible().words().begin(), t.visible().words().end());
  const auto extra = std::vector<std::uint32_t>(t.extra().words().begin(), t.extra().words().end());
  const auto buffer = state.momentum_buffer;
  g[4500] = NAN;
  CHECK_THROWS_AS(ms::sgd_step(t, g, state, {0.1, 0.9}), std::domain_error);
  CHECK(std::equal(words.begin(), words.end(), t.visible().words().begin(), t.visible().words().end()));
  CHECK(std::equal(extra.begin(), extra.end(), t.extra().words().begin(), t.extra().words().end()));
  CHECK(bitwise_equal(state.momentum_buffer, buffer));
  CHECK(state.steps == 1);
  CHECK(t.generation() == 1);
  g[4500] = 0.01f;  // and the next good step is the step it would have been
  ms::split_tensor reference(std::vector<float>(5000, .5f), {minifloat::fp_6_9_0, 8});
  ms::sgd_state reference_state;
  ms::sgd_step(reference, g, reference_state, {0.1, 0.9});
  ms::sgd_step(reference, g, reference_state, {0.1, 0.9});
  ms::sgd_step(t, g, state, {0.1, 0.9});
  CHECK(t.visible() == reference.visible());
  CHECK(t.extra() == reference.extra());
}

TEST_CASE("an optimizer step that would store NaN or Inf in an all-finite format changes nothing, at every chunk position",
          "[optimizers]") {
  const ms::sgd_options sgd{4.0, 0.9, 0, 1e-4};  // lr 4: FLT_MAX * 4 overflows to Inf
  const ms::adam_options adam{1e-3, 0.9, 0.999, 1e-8, 0, false}, adamw{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
  const std::vector<float> start(5000, 0.5f);
  for (const bool stochastic : {false, true}) {
    for (const int warm : {0, 2}) {  // the first step (state created by it) and a later one
      for (const std::size_t at : rejected_positions) {
        CAPTURE(stochastic, warm, at);
        const ms::split_layout layout{minifloat::fp_6_9_0, 8, stochastic ? ms::split_mode::stochastic : ms::split_mode::truncate};
        for (const injected kind : {injected::nan_gradient, injected::inf_gradient, injected::huge_update}) {
          ms::split_tensor t(start, layout, 7);
          CHECK(step_rejects(t, warm, false, sgd, adam, at, kind));  // SGD: NaN, -Inf, -Inf
        }
        for (const auto& o : {adam, adamw}) {
          ms::split_tensor nan_t(start, layout, 7), inf_t(start, layout, 7);
          CHECK(step_rejects(nan_t, warm, true, sgd, o, at, injected::nan_gradient));
          CHECK(step_rejects(inf_t, warm, true, sgd, o, at, injected::inf_gradient));  // Inf / Inf = NaN
        }
        // Low-precision-only weights: NaN has no code; ±Inf saturates to ±max, as documented.
        ms::low_tensor low(start, minifloat::fp_6_9_0, stochastic ? minifloat::rounding::stochastic
                                                                   : minifloat::rounding::nearest_even, 3);
        CHECK(step_rejects(low, warm, false, sgd, adam, at, injected::nan_gradient));
        ms::low_tensor low_adam(start, minifloat::fp_6_9_0);
        CHECK(step_rejects(low_adam, warm, true, sgd, adamw, at, injected::inf_gradient));
        ms::low_tensor saturating(start, minifloat::fp_6_9_0);
        CHECK_FALSE(step_rejects(saturating, warm, false, sgd, adam, at, injected::huge_update));
        std::vector<float> after(saturating.size());
        saturating.decode(after);
        CHECK(after[at] == -static_cast<float>(minifloat::fp_6_9_0.max_finite()));
      }
    }
  }
}

TEST_CASE("formats that hold NaN and Inf take them without a check; a multi-tensor step is all-or-nothing across groups",
          "[optimizers]") {
  // bf16 + 8 holds NaN: PyTorch's behaviour, the NaN is stored.
  ms::split_tensor ieee(std::vector<float>(5000, 0.5f), {minifloat::bfloat16, 8});
  std::vector<float> g(5000, 0.01f);
  g[4500] = NAN;
  ms::sgd_state s;
  ms::sgd_step(ieee, g, s, {0.1, 0.9});
  CHECK(std::isnan(ieee.reconstruct()[4500]));
  CHECK(s.steps == 1);

  for (const std::size_t at : rejected_positions) {
    CAPTURE(at);
    const ms::split_layout layout{minifloat::fp_6_9_0, 8};
    std::vector<ms::split_tensor> tensors;
    std::vector<ms::low_tensor> lows;
    for (int k = 0; k < 3; ++k) {
      tensors.emplace_back(std::vector<float>(5000, 0.25f * (k + 1)), layout, k);
      lows.emplace_back(std::vector<float>(5000, 0.25f * (k + 1)), minifloat::fp_6_9_0);
    }
    const std::vector<float> clean(5000, 0.01f);
    std::vector<float> bad = clean;
    bad[at] = NAN;
    std::vector<ms::sgd_state> sgd(3);
    std::vector<ms::adam_state> adam(3);
    const auto sgd_groups = [&](std::size_t failing) {
      std::vector<ms::split_group<ms::sgd_state>> out;
      for (std::size_t k = 0; k < 3; ++k) out.push_back({&tensors[k], k == failing ? bad : clean, &sgd[k]});
      return out;
    };
    const auto adam_groups = [&](std::size_t failing) {
      std::vector<ms::split_group<ms::adam_state, ms::low_tensor>> out;
      for (std::size_t k = 0; k < 3; ++k) out.push_back({&lows[k], k == failing ? bad : clean, &adam[k]});
      return out;
    };
    ms::sgd_step(sgd_groups(3), {0.1, 0.9});  // a clean step first: the state exists
    ms::adam_step(adam_groups(3), {});
    std::vector<snapshot> before, low_before;
    for (std::size_t k = 0; k < 3; ++k) {
      before.push_back(take(tensors[k], sgd[k], adam[k]));
      low_before.push_back(take(lows[k], sgd[k], adam[k]));
    }
    CHECK_THROWS_AS(ms::sgd_step(sgd_groups(2), {0.1, 0.9}), std::domain_error);  // the last group fails
    for (std::size_t k = 0; k < 3; ++k) CHECK(take(tensors[k], sgd[k], adam[k]) == before[k]);
    CHECK_THROWS_AS(ms::adam_step(adam_groups(1), {}), std::domain_error);  // the middle one
    for (std::size_t k = 0; k < 3; ++k) CHECK(take(lows[k], sgd[k], adam[k]) == low_before[k]);
  }
}

TEST_CASE("an all-finite step's fast path (a bound from magnitudes) and its scratch check agree", "[optimizers]") {
  // Inputs that are finite but whose bound fails (a huge momentum buffer that lr brings back into
  // range, a negative second moment): the step must take the scratch check and decide by the
  // values themselves.
  ms::split_tensor t(std::vector<float>(3000, 0.5f), {minifloat::fp_6_9_0, 8});
  ms::sgd_state s;
  s.momentum_buffer.assign(3000, 0.0f);
  s.momentum_buffer[2500] = 3e38f;  // |bound| > FLT_MAX / 2, yet 1e-30 * 0.9 * 3e38 is finite
  const std::vector<float> g(3000, 0.01f);
  ms::sgd_step(t, g, s, {1e-30, 0.9});
  CHECK(s.steps == 1);
  ms::adam_state a;
  a.exp_avg.assign(3000, 0.0f);
  a.exp_avg_sq.assign(3000, 0.0f);
  a.exp_avg_sq[100] = -1.0f;  // sqrt of a negative second moment is NaN: rejected, nothing changed
  const auto before = take(t, s, a);
  CHECK_THROWS_AS(ms::adam_step(t, g, a, {}), std::domain_error);
  CHECK(take(t, s, a) == before);
  a.exp_avg_sq[100] = 0.0f;
  ms::adam_step(t, g, a, {});
  CHECK(a.steps == 1);
}

namespace {
/// One Adam step on one weight as PyTorch's kernels compute it, every rounding spelled out
/// (volatile keeps the compiler from fusing a product into the next add).
float pytorch_adam_step(float w, float g, float& m, float& v, const ms::adam_options& o, int step) {
  const auto f = [](double x) { return static_cast<float>(x); };
  if (o.decoupled_weight_decay) {
    const volatile float decayed = w * f(1 - o.lr * o.weight_decay);  // param.mul_(1 - lr * wd)
    w = decayed;
  } else if (o.weight_decay != 0) {
    g = std::fma(f(o.weight_decay), w, g);  // grad.add(param, alpha=wd)
  }
  if (o.first_moment == ms::adam_first_moment::scale_add) {
    const volatile float scaled = m * f(o.beta1);  // exp_avg.mul_(beta1)
    m = std::fma(f(1 - o.beta1), g, scaled);       // .add_(grad, alpha=1 - beta1)
  } else {
    m = std::fma(f(1 - o.beta1), g - m, m);  // lerp_(grad, 1 - beta1), weight < 0.5
  }
  const volatile float scaled_v = v * f(o.beta2);
  v = std::fma(f(1 - o.beta2) * g, g, scaled_v);  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
  const double bc1 = 1 - std::pow(o.beta1, step), bc2 = 1 - std::pow(o.beta2, step);
  const volatile float root = std::sqrt(v) / f(std::sqrt(bc2));
  const float denom = root + f(o.eps);
  const volatile float quotient = f(-(o.lr / bc1)) * m / denom;  // addcdiv_: self + (value * t1) / t2
  return w + quotient;
}
}  // namespace

TEST_CASE("Adam's step is PyTorch's kernels bit for bit: scale_add (1.x) or lerp first moment, addcdiv order",
          "[optimizers]") {
  for (const auto rule : {ms::adam_first_moment::scale_add, ms::adam_first_moment::lerp}) {
    for (const bool decoupled : {false, true}) {
      ms::adam_options o{2e-2, 0.9, 0.999, 1e-8, 0.1, decoupled, false};
      o.first_moment = rule;
      std::mt19937 gen(41);
      auto p = normal_vector(1001, 0.5f, gen);
      auto ref = p;
      std::vector<float> m(p.size()), v(p.size());
      ms::adam_state s;
      for (int step = 1; step <= 10; ++step) {
        const auto g = normal_vector(p.size(), 1.0f, gen);
        ms::adam_step(p, g, s, o);
        for (std::size_t i = 0; i < p.size(); ++i) ref[i] = pytorch_adam_step(ref[i], g[i], m[i], v[i], o, step);
        REQUIRE(bitwise_equal(p, ref));
        REQUIRE(bitwise_equal(s.exp_avg, m));
      }
    }
  }
}

TEST_CASE("a split or low tensor rebuilt from its parts continues bit for bit, stochastic draws included",
          "[optimizers]") {
  std::mt19937 gen(61);
  auto w0 = normal_vector(1000, 0.1f, gen);
  const ms::split_layout layout{minifloat::binary16, 6, ms::split_mode::stochastic};
  ms::split_tensor split(w0, layout, 9);
  ms::low_tensor low(w0, minifloat::bfloat16, minifloat::rounding::stochastic, 9);
  ms::sgd_state split_state, low_state;
  const ms::sgd_options o{0.05, 0.9, 0, 1e-4, false, false};
  for (int step = 0; step < 3; ++step) {
    const auto g = normal_vector(w0.size(), 0.01f, gen);
    ms::sgd_step(split, g, split_state, o);
    ms::sgd_step(low, g, low_state, o);
  }
  auto split_copy = ms::split_tensor::from_parts(split.layout(), split.seed(), split.generation(), split.visible(),
                                                 split.extra());
  auto low_copy = ms::low_tensor::from_parts(low.fmt(), low.mode(), low.seed(), low.generation(), low.codes());
  ms::sgd_state split_copy_state = split_state, low_copy_state = low_state;
  for (int step = 0; step < 3; ++step) {
    const auto g = normal_vector(w0.size(), 0.01f, gen);
    ms::sgd_step(split, g, split_state, o);
    ms::sgd_step(split_copy, g, split_copy_state, o);
    ms::sgd_step(low, g, low_state, o);
    ms::sgd_step(low_copy, g, low_copy_state, o);
    REQUIRE(split_copy.visible() == split.visible());
    REQUIRE(split_copy.extra() == split.extra());
    REQUIRE(low_copy.codes() == low.codes());
  }
  // A copy that forgot its generation draws differently: the generation matters.
  auto stale = ms::split_tensor::from_parts(split.layout(), split.seed(), 0, split.visible(), split.extra());
  ms::sgd_state stale_state = split_state;
  const auto g = normal_vector(w0.size(), 0.01f, gen);
  ms::sgd_step(split, g, split_state, o);
  ms::sgd_step(stale, g, stale_state, o);
  CHECK_FALSE(stale.visible() == split.visible());

  CHECK_THROWS_AS(ms::split_tensor::from_parts(layout, 0, 0, split.extra(), split.visible()), std::invalid_argument);
  CHECK_THROWS_AS(ms::low_tensor::from_parts(minifloat::e4m3, minifloat::rounding::nearest_even, 0, 0, low.codes()),
                  std::invalid_argument);
}

TEST_CASE("a split SGD or Adam step is the fp32 step on the restored weights, split again (every layout kind)",
          "[optimizers]") {
  const ms::split_layout layouts[] = {
      {minifloat::bfloat16, 8},  {minifloat::bfloat16, 16}, {minifloat::binary16, 8},
      {minifloat::e4m3, 8},      {minifloat::bfloat16, 9, ms::split_mode::stochastic},
      {minifloat::binary16, 8, ms::split_mode::stochastic}, {minifloat::e4m3, 8, ms::split_mode::stochastic}};
  const ms::sgd_options sgd_settings[] = {
      {0.05, 0.9, 0, 1e-4, false, false}, {0.1, 0, 0, 0, false, false}, {0.05, 0.9, 0, 5e-4, true, true},
      {0.01, 0.8, 0.1, 0, false, false}};
  for (const auto& l : layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits << (l.mode == ms::split_mode::stochastic ? " stochastic" : ""));
    for (const auto& o : sgd_settings) {
      std::mt19937 gen(5);
      const auto initial = normal_vector(4133, 0.05f, gen);  // two chunks and a partial one
      ms::split_tensor split(initial, l, 99);
      ms::sgd_state split_state, reference_state;
      for (int step = 0; step < 4; ++step) {
        const auto grads = normal_vector(initial.size(), 0.01f, gen);
        std::vector<float> reference = split.reconstruct();
        ms::sgd_step(reference, grads, reference_state, o);
        ms::split_tensor expected = ms::split_tensor::from_parts(l, split.seed(), split.generation(),
                                                                 split.visible(), split.extra());
        expected.assign(reference);  // the next generation, as the step's
        ms::sgd_step(split, grads, split_state, o);
        REQUIRE(std::ranges::equal(split.visible().words(), expected.visible().words()));
        REQUIRE(std::ranges::equal(split.extra().words(), expected.extra().words()));
        REQUIRE(bitwise_equal(split_state.momentum_buffer, reference_state.momentum_buffer));
      }
    }
    std::mt19937 gen(6);
    const auto initial = normal_vector(4133, 0.05f, gen);
    ms::split_tensor split(initial, l, 3);
    ms::adam_state split_state, reference_state;
    const ms::adam_options o{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
    for (int step = 0; step < 4; ++step) {
      const auto grads = normal_vector(initial.size(), 0.01f, gen);
      std::vector<float> reference = split.reconstruct();
      ms::adam_step(reference, grads, reference_state, o);
      ms::split_tensor expected =
          ms::split_tensor::from_parts(l, split.seed(), split.generation(), split.visible(), split.extra());
      expected.assign(reference);
      ms::adam_step(split, grads, split_state, o);
      REQUIRE(std::ranges::equal(split.visible().words(), expected.visible().words()));
      REQUIRE(std::ranges::equal(split.extra().words(), expected.extra().words()));
      REQUIRE(bitwise_equal(split_state.exp_avg, reference_state.exp_avg));
    }
  }
}

TEST_CASE("the one-pass step over 8- and 16-bit fields stores the scalar core's split of the fp32 step, specials and "
          "stochastic draws at tile and register boundaries included",
          "[optimizers][byte_fields]") {
  const ms::split_layout layouts[] = {
      {minifloat::binary16, 8},  {minifloat::e4m3, 8}, {minifloat::e5m2, 8}, {minifloat::fp_6_9_0, 8},
      {minifloat::bfloat16, 8},  {minifloat::bfloat16, 16},
      {minifloat::bfloat16, 8, ms::split_mode::stochastic}, {minifloat::binary16, 8, ms::split_mode::stochastic},
      {minifloat::e4m3, 8, ms::split_mode::stochastic},     {minifloat::e4m3fnuz, 8, ms::split_mode::stochastic}};
  for (const auto& l : layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits << (l.mode == ms::split_mode::stochastic ? " stochastic" : ""));
    REQUIRE(ms::detail::byte_field_layout(l));
    std::mt19937 gen(21);
    // 1000 weights: 7 tiles of 128 (field_tile), then 104 (6 registers and a partial one); huge values only
    // where an overflowing update can be stored.
    std::vector<float> initial = split_oracle::split_specials(l, 1000, gen);
    for (auto& w : initial)
      if (l.visible.encoding == minifloat::specials::all_finite && std::fabs(w) > 1e4f) w = 0.5f;
    // Tiles 2 to 5 hold a layer's weights, N(0, 0.02): registers of normal-range values (the
    // fast forms' case), some with a weight too small for them.
    std::normal_distribution<float> layer(0.0f, 0.02f);
    for (std::size_t i = 256; i < 768; ++i) initial[i] = i % 97 == 0 ? 1e-6f * layer(gen) : layer(gen);
    ms::split_tensor split(initial, l, 41);
    ms::sgd_state sgd_split, sgd_reference;
    ms::adam_state adam_split, adam_reference;
    for (int step = 0; step < 6; ++step) {
      std::vector<float> grads = normal_vector(initial.size(), 0.01f, gen);
      grads[3] = 0.0f;
      grads[64] = -0.0f;
      std::vector<float> reference = split.reconstruct();
      if (step % 2 == 0) {
        const ms::sgd_options o{0.05, 0.9, 0, 1e-4};
        ms::sgd_step(reference, grads, sgd_reference, o);
        ms::sgd_step(split, grads, sgd_split, o);
        REQUIRE(bitwise_equal(sgd_split.momentum_buffer, sgd_reference.momentum_buffer));
      } else {
        const ms::adam_options o{1e-3, 0.9, 0.999, 1e-8, 1e-2, true};
        ms::adam_step(reference, grads, adam_reference, o);
        ms::adam_step(split, grads, adam_split, o);
        REQUIRE(bitwise_equal(adam_split.exp_avg, adam_reference.exp_avg));
        REQUIRE(bitwise_equal(adam_split.exp_avg_sq, adam_reference.exp_avg_sq));
      }
      const std::uint64_t seed = minifloat::generation_seed(split.seed(), split.generation());
      for (std::size_t i = 0; i < reference.size(); ++i) {
        INFO("step " << step << ", weight " << i << ": " << reference[i]);
        const auto [h, e] = split_oracle::scalar_fields(l, reference[i], seed, i);
        REQUIRE(split.visible().get(i) == h);
        REQUIRE(split.extra().get(i) == e);
      }
    }
  }
}

namespace {

std::vector<std::uint32_t> words_of(const ms::split_tensor& t) {
  std::vector<std::uint32_t> w(t.visible().words().begin(), t.visible().words().end());
  w.insert(w.end(), t.extra().words().begin(), t.extra().words().end());
  return w;
}
std::vector<std::uint32_t> words_of(const ms::low_tensor& t) {
  return {t.codes().words().begin(), t.codes().words().end()};
}

/// Three SGD steps (momentum, weight decay) and two Adam steps on copies of `start` on `t` threads,
/// the second SGD step with gradients large enough that an all_finite layout takes the chunked
/// storability check; returns the words after each step and the final state.
template <class Tensor>
std::vector<std::vector<std::uint32_t>> steps_on_threads(const Tensor& start, unsigned t, ms::sgd_state& sgd,
                                                         ms::adam_state& adam) {
  std::mt19937 gen(11);
  std::vector<std::vector<std::uint32_t>> after;
  Tensor sgd_weights = start, adam_weights = start;
  for (int step = 0; step < 3; ++step) {
    auto grads = normal_vector(start.size(), 0.01f, gen);
    if (step == 1) grads[start.size() / 2] = 1e37f;
    ms::sgd_step(sgd_weights, grads, sgd, {0.05, 0.9, 0, 1e-4}, minifloat::threads{t});
    after.push_back(words_of(sgd_weights));
  }
  for (int step = 0; step < 2; ++step) {
    ms::adam_step(adam_weights, normal_vector(start.size(), 0.01f, gen), adam, {1e-3, 0.9, 0.999, 1e-8, 1e-2, true},
                  minifloat::threads{t});
    after.push_back(words_of(adam_weights));
  }
  return after;
}

}  // namespace

TEST_CASE("SGD and Adam steps on 2, 3 or 4 threads store the one-thread step's weights and state, bit for bit",
          "[optimizers][threads]") {
  // 3 * 32768 + 1037 weights: enough for four threads' ranges (parallel_min_chunk each), which
  // start at multiples of parallel_grain, the last ending in a partial tile and a partial chunk.
  constexpr std::size_t n = 3 * 32768 + 1037;
  std::mt19937 gen(10);
  const auto initial = normal_vector(n, 0.05f, gen);
  const ms::split_layout layouts[] = {
      {minifloat::binary16, 8},  // byte-field tiles
      {minifloat::bfloat16, 8},
      {minifloat::bfloat16, 16},
      {minifloat::e4m3, 8, ms::split_mode::stochastic},
      {minifloat::bfloat16, 8, ms::split_mode::stochastic},
      {minifloat::fp_6_9_0, 8},                              // all_finite: the storability check
      {minifloat::bfloat16, 9, ms::split_mode::stochastic},  // chunks through the packed fields
      {minifloat::fp_6_9_0, 5}};
  const auto compare = [&](const auto& start) {
    ms::sgd_state sgd1;
    ms::adam_state adam1;
    const auto one = steps_on_threads(start, 1, sgd1, adam1);
    for (const unsigned t : {2U, 3U, 4U}) {
      INFO(t << " threads");
      ms::sgd_state sgd;
      ms::adam_state adam;
      const auto many = steps_on_threads(start, t, sgd, adam);
      REQUIRE(many.size() == one.size());
      for (std::size_t step = 0; step < one.size(); ++step) {
        INFO("step " << step);
        CHECK(many[step] == one[step]);
      }
      CHECK(bitwise_equal(sgd.momentum_buffer, sgd1.momentum_buffer));
      CHECK(bitwise_equal(adam.exp_avg, adam1.exp_avg));
      CHECK(bitwise_equal(adam.exp_avg_sq, adam1.exp_avg_sq));
      CHECK(sgd.steps == 3);
      CHECK(adam.steps == 2);
    }
  };
  for (const auto& l : layouts) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits << (l.mode == ms::split_mode::stochastic ? " stochastic" : ""));
    compare(ms::split_tensor(initial, l, 77));
  }
  INFO("low_tensor e4m3 stochastic");
  compare(ms::low_tensor(initial, minifloat::e4m3, minifloat::rounding::stochastic, 77));
}

TEST_CASE("a step on several threads that cannot store a weight names the first one, as on one thread, and changes nothing",
          "[optimizers][threads]") {
  constexpr std::size_t n = 3 * 32768 + 1037;
  std::mt19937 gen(12);
  const auto initial = normal_vector(n, 0.05f, gen);
  for (const ms::split_layout& l : {ms::split_layout{minifloat::fp_6_9_0, 8}, ms::split_layout{minifloat::fp_6_9_0, 5}}) {
    INFO(minifloat::to_string(l.visible) << " + " << l.extra_bits);
    auto grads = normal_vector(n, 0.01f, gen);
    grads[70000] = NAN;  // in the third of four threads' ranges
    grads[40000] = NAN;  // in the second: the first weight the step cannot store
    std::string one_thread;
    for (const unsigned t : {1U, 2U, 4U}) {
      INFO(t << " threads");
      ms::split_tensor weights(initial, l, 5);
      ms::sgd_state state;
      ms::sgd_step(weights, normal_vector(n, 0.01f, gen), state, {0.1, 0.9}, minifloat::threads{t});
      const auto words = words_of(weights);
      const auto buffer = state.momentum_buffer;
      try {
        ms::sgd_step(weights, grads, state, {0.1, 0.9}, minifloat::threads{t});
        FAIL("the step stored a NaN");
      } catch (const std::domain_error& e) {
        if (t == 1) one_thread = e.what();
        CHECK(std::string(e.what()) == one_thread);
        CHECK(std::string(e.what()).find("weight 40000 NaN") != std::string::npos);
      }
      CHECK(words_of(weights) == words);
      CHECK(bitwise_equal(state.momentum_buffer, buffer));
      CHECK(state.steps == 1);
    }
  }
}

TEST_CASE("a multi-tensor step on several threads equals one-thread steps of each group", "[optimizers][threads]") {
  constexpr std::size_t n = 3 * 32768 + 1037;
  std::mt19937 gen(13);
  const auto w0 = normal_vector(n, 0.05f, gen), w1 = normal_vector(n / 2, 0.05f, gen);
  const auto g0 = normal_vector(n, 0.01f, gen), g1 = normal_vector(n / 2, 0.01f, gen);
  const ms::split_layout fp16_8{minifloat::binary16, 8}, e4m3_8s{minifloat::e4m3, 8, ms::split_mode::stochastic};
  ms::split_tensor a(w0, fp16_8, 1), b(w1, e4m3_8s, 2), a1(w0, fp16_8, 1), b1(w1, e4m3_8s, 2);
  ms::sgd_state sa, sb, sa1, sb1;
  ms::adam_state ma, mb, ma1, mb1;
  for (int step = 0; step < 2; ++step) {
    const std::vector<ms::split_group<ms::sgd_state>> sgd_groups{{&a, g0, &sa}, {&b, g1, &sb}};
    ms::sgd_step(sgd_groups, {0.05, 0.9}, minifloat::threads{3});
    ms::sgd_step(a1, g0, sa1, {0.05, 0.9});
    ms::sgd_step(b1, g1, sb1, {0.05, 0.9});
    CHECK(words_of(a) == words_of(a1));
    CHECK(words_of(b) == words_of(b1));
    CHECK(bitwise_equal(sa.momentum_buffer, sa1.momentum_buffer));
    CHECK(bitwise_equal(sb.momentum_buffer, sb1.momentum_buffer));
  }
  for (int step = 0; step < 2; ++step) {
    const std::vector<ms::split_group<ms::adam_state>> adam_groups{{&a, g0, &ma}, {&b, g1, &mb}};
    ms::adam_step(adam_groups, {}, minifloat::threads{2});
    ms::adam_step(a1, g0, ma1, {});
    ms::adam_step(b1, g1, mb1, {});
    CHECK(words_of(a) == words_of(a1));
    CHECK(words_of(b) == words_of(b1));
    CHECK(bitwise_equal(ma.exp_avg_sq, ma1.exp_avg_sq));
    CHECK(bitwise_equal(mb.exp_avg, mb1.exp_avg));
  }
}
