// Optimizers on split storage: bit-identical to the fp32-master optimizer when the split is
// lossless (bf16 + 16), PyTorch's update rules against a double-precision transcription,
// multi-tensor steps equal to per-tensor steps, and validation before anything is modified.
#include <catch2/catch.hpp>

#include <minifloat/storage/optimizers.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
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
