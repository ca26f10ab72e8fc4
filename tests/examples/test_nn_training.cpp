// Training pieces of the example trainer: SGD (PyTorch's update rule), the cosine schedule,
// batch-norm statistics, the GEMM backends, the model factories, and that a few SGD steps on a
// tiny batch reduce the loss.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include "nn/batch_norm.hpp"
#include "nn/gemm.hpp"
#include "nn/loss.hpp"
#include "nn/models.hpp"
#include "nn/schedule.hpp"
#include "nn/sgd.hpp"

namespace {

struct tiny_set {
  nn::tensor x;
  std::vector<std::int32_t> y;
};

// Ten classes, each a noisy copy of its own random prototype: learnable in a few steps.
tiny_set make_tiny_set(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> prototypes(10 * 784);
  for (float& v : prototypes) v = d(rng);
  tiny_set s{nn::tensor({n, 1, 28, 28}), std::vector<std::int32_t>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    s.y[i] = static_cast<std::int32_t>(i % 10);
    for (std::size_t p = 0; p < 784; ++p)
      s.x.values[i * 784 + p] = prototypes[static_cast<std::size_t>(s.y[i]) * 784 + p] + 0.5f * d(rng);
  }
  return s;
}

std::vector<double> train(nn::sequential& net, const tiny_set& s, int steps, float lr) {
  nn::no_rounding fp32;
  nn::softmax_cross_entropy ce;
  nn::sgd opt({.momentum = 0.9f, .weight_decay = 5e-4f});
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    losses.push_back(ce.forward(net.forward(s.x, fp32, nn::mode::train), s.y));
    net.backward(ce.backward(), fp32);
    opt.step(net.parameters(), lr);
  }
  losses.push_back(ce.forward(net.forward(s.x, fp32, nn::mode::train), s.y));
  return losses;
}

}  // namespace

TEST_CASE("a few SGD steps on a tiny batch reduce the loss", "[nn][training]") {
  const tiny_set s = make_tiny_set(20, 1);
  nn::sequential mlp = nn::make_mlp({.width = 0.125});
  const auto mlp_losses = train(mlp, s, 8, 0.05f);
  INFO("MLP losses " << mlp_losses.front() << " -> " << mlp_losses.back());
  CHECK(mlp_losses.front() > 1.5);  // about log 10 at initialisation
  CHECK(mlp_losses.back() < 0.25 * mlp_losses.front());

  nn::sequential cnn = nn::make_cnn({.width = 0.25});
  const auto cnn_losses = train(cnn, s, 8, 0.05f);
  INFO("CNN losses " << cnn_losses.front() << " -> " << cnn_losses.back());
  CHECK(cnn_losses.back() < 0.25 * cnn_losses.front());
}

TEST_CASE("SGD follows torch.optim.SGD: weight decay, momentum, dampening, nesterov, unscaling", "[nn][training]") {
  const auto run = [](const nn::sgd_options& o, float grad_scale) {
    nn::parameter p("w", {1, 1, 1, 1});
    p.value = {1.0f};
    nn::sgd opt(o);
    std::vector<float> trace;
    const float grads[] = {0.5f, -0.25f, 1.0f};
    for (float g : grads) {
      p.grad = {g / grad_scale};
      nn::parameter* ps[] = {&p};
      opt.step(ps, 0.1f, grad_scale);
      trace.push_back(p.value[0]);
    }
    return trace;
  };
  // Reference values from a Python transcription of torch.optim.SGD.step (in double; float agrees to 1e-6).
  const auto expect = [](const std::vector<float>& got, std::initializer_list<double> want) {
    REQUIRE(got.size() == want.size());
    std::size_t i = 0;
    for (double w : want) CHECK(got[i++] == Approx(w).epsilon(1e-6));
  };
  // plain: w -= 0.1 g
  expect(run({.momentum = 0.0f, .weight_decay = 0.0f}, 1.0f), {0.95, 0.975, 0.875});
  // weight decay 0.1: g' = g + 0.1 w
  expect(run({.momentum = 0.0f, .weight_decay = 0.1f}, 1.0f), {0.94, 0.9556, 0.846044});
  // momentum 0.9: b1 = g1, b = 0.9 b + g
  expect(run({.momentum = 0.9f, .weight_decay = 0.0f}, 1.0f), {0.95, 0.93, 0.812});
  // momentum 0.9, dampening 0.5: b = 0.9 b + 0.5 g (not on the first step)
  expect(run({.momentum = 0.9f, .weight_decay = 0.0f, .dampening = 0.5f}, 1.0f), {0.95, 0.9175, 0.83825});
  // nesterov: g + 0.9 b
  expect(run({.momentum = 0.9f, .weight_decay = 0.0f, .nesterov = true}, 1.0f), {0.905, 0.912, 0.7058});
  // a loss scale of 1024 undone by grad_scale gives the unscaled trajectory
  expect(run({.momentum = 0.9f, .weight_decay = 0.0f}, 1024.0f), {0.95, 0.93, 0.812});
  CHECK_THROWS_AS(nn::sgd({.momentum = 0.0f, .nesterov = true}), std::invalid_argument);
}

TEST_CASE("cosine schedule: PyTorch's closed form, warm-up, and the floor after the end", "[nn][training]") {
  const nn::cosine_schedule s{.base_lr = 0.1, .min_lr = 0.001, .total = 100};
  CHECK(s(0) == Approx(0.1));
  CHECK(s(50) == Approx(0.0505));
  CHECK(s(25) == Approx(0.001 + 0.099 * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(s(100) == 0.001);
  CHECK(s(1000) == 0.001);
  for (std::size_t t = 1; t < 100; ++t) CHECK(s(t) < s(t - 1));
  const nn::cosine_schedule w{.base_lr = 0.2, .total = 110, .warmup = 10};
  CHECK(w(0) == Approx(0.02));
  CHECK(w(9) == Approx(0.2));
  CHECK(w(10) == Approx(0.2));
  CHECK(w(60) == Approx(0.1));
}

TEST_CASE("batch norm: running statistics with momentum and unbiased variance; eval mode uses them", "[nn][training]") {
  nn::batch_norm bn({.channels = 2, .momentum = 0.1f, .eps = 1e-5f});
  for (nn::parameter& p : bn.parameters()) p.used = p.value;
  nn::tensor x({2, 2, 1, 2});
  x.values = {1, 2, 10, 20,   // sample 0: channel 0 {1, 2}, channel 1 {10, 20}
              3, 4, 30, 40};  // sample 1: channel 0 {3, 4}, channel 1 {30, 40}
  nn::tensor y;
  bn.forward(x, y, nn::mode::train);
  // channel 0: mean 2.5, biased var 1.25, unbiased 5/3
  CHECK(bn.running_mean()[0] == Approx(0.25));
  CHECK(bn.running_var()[0] == Approx(0.9 + 0.1 * 5.0 / 3.0));
  CHECK(bn.running_mean()[1] == Approx(2.5));
  CHECK(y.values[0] == Approx((1 - 2.5) / std::sqrt(1.25 + 1e-5)));
  double mean = 0;
  for (std::size_t i : {0, 1, 4, 5}) mean += y.values[i];
  CHECK(mean == Approx(0.0).margin(1e-6));

  bn.forward(x, y, nn::mode::eval);
  CHECK(y.values[0] == Approx((1 - 0.25) / std::sqrt(0.9 + 0.1 * 5.0 / 3.0 + 1e-5)));
  CHECK_THROWS_AS(bn.backward(x, y, nullptr), std::logic_error);
  nn::tensor one({1, 2, 1, 1});
  CHECK_THROWS_AS(bn.forward(one, y, nn::mode::train), std::invalid_argument);
}

TEST_CASE("every GEMM backend of this build agrees with a double reference", "[nn][gemm]") {
  std::mt19937_64 rng(21);
  std::normal_distribution<float> d;
  struct dims {
    std::size_t m, n, k;
  };
  const dims sizes[] = {{1, 1, 1}, {7, 33, 5}, {6, 32, 256}, {13, 70, 300}, {130, 37, 9}, {64, 196, 288}};
  for (const auto backend : {nn::gemm_backend::blocked, nn::gemm_backend::openblas, nn::gemm_backend::eigen}) {
    if (!nn::gemm_available(backend)) {
      WARN("no " << nn::name(backend) << " backend in this build");
      continue;
    }
    for (const dims s : sizes)
      for (const auto ta : {nn::transpose::no, nn::transpose::yes})
        for (const auto tb : {nn::transpose::no, nn::transpose::yes})
          for (const float beta : {0.0f, 1.0f, -0.5f}) {
            INFO(nn::name(backend) << " " << s.m << "x" << s.n << "x" << s.k << " ta " << (ta == nn::transpose::yes)
                                   << " tb " << (tb == nn::transpose::yes) << " beta " << beta);
            // Leading dimensions wider than the rows, to catch a backend that ignores them.
            const std::size_t lda = (ta == nn::transpose::no ? s.k : s.m) + 3;
            const std::size_t ldb = (tb == nn::transpose::no ? s.n : s.k) + 2;
            const std::size_t ldc = s.n + 1;
            std::vector<float> a(lda * (ta == nn::transpose::no ? s.m : s.k)), b(ldb * (tb == nn::transpose::no ? s.k : s.n));
            std::vector<float> c(ldc * s.m);
            for (float& v : a) v = d(rng);
            for (float& v : b) v = d(rng);
            for (float& v : c) v = beta == 0.0f ? std::numeric_limits<float>::quiet_NaN() : d(rng);  // beta 0 must not read C
            const std::vector<float> c0 = c;
            nn::gemm(backend, {.trans_a = ta, .trans_b = tb, .m = s.m, .n = s.n, .k = s.k, .alpha = 0.75f, .a = a.data(),
                               .lda = lda, .b = b.data(), .ldb = ldb, .beta = beta, .c = c.data(), .ldc = ldc});
            double worst = 0.0;
            for (std::size_t i = 0; i < s.m; ++i)
              for (std::size_t j = 0; j < s.n; ++j) {
                double ref = 0.0;
                for (std::size_t p = 0; p < s.k; ++p)
                  ref += static_cast<double>(ta == nn::transpose::no ? a[i * lda + p] : a[p * lda + i]) *
                         (tb == nn::transpose::no ? b[p * ldb + j] : b[j * ldb + p]);
                ref = 0.75 * ref + (beta == 0.0f ? 0.0 : beta * static_cast<double>(c0[i * ldc + j]));
                worst = std::max(worst, std::abs(c[i * ldc + j] - ref) / (1.0 + std::abs(ref)));
              }
            CHECK(worst < 1e-4);
            // The padding column of C is not part of the product.
            for (std::size_t i = 0; i < s.m; ++i) {
              const float pad = c[i * ldc + s.n], pad0 = c0[i * ldc + s.n];
              CHECK((pad == pad0 || (std::isnan(pad) && std::isnan(pad0))));
            }
          }
  }
  CHECK(nn::gemm_available(nn::default_gemm_backend()));
  float x = 0;
  CHECK_THROWS_AS(nn::gemm({.m = 1, .n = 1, .k = 2, .a = &x, .lda = 1, .b = &x, .ldb = 1, .c = &x, .ldc = 1}),
                  std::invalid_argument);
}

TEST_CASE("model factories: sizes at width 1 and the width multiplier", "[nn][models]") {
  CHECK(nn::scaled_width(512, 1.0) == 512);
  CHECK(nn::scaled_width(512, 0.25) == 128);
  CHECK(nn::scaled_width(32, 0.01) == 1);
  CHECK_THROWS_AS(nn::scaled_width(32, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(nn::scaled_width(32, -1.0), std::invalid_argument);

  // 784·512 + 512 + 512·512 + 512 + 512·10 + 10
  CHECK(nn::make_mlp().parameter_count() == 669706);
  // conv 1·32·9 + bn 64 + conv 32·64·9 + bn 128 + fc 64·49·10 + 10
  CHECK(nn::make_cnn().parameter_count() == 288 + 64 + 18432 + 128 + 31360 + 10);
  const auto half = nn::make_cnn({.width = 0.5}).describe(1);
  CHECK(half.modules[1].y_shape.c == 16);
  CHECK(half.modules[5].y_shape.c == 32);
  CHECK(nn::make_mlp({.width = 0.25}).describe(1).modules[1].y_shape.c == 128);
  // Same seed, same initial weights; another seed, others.
  CHECK(nn::make_mlp({.seed = 7}).parameters()[0]->value == nn::make_mlp({.seed = 7}).parameters()[0]->value);
  CHECK(nn::make_mlp({.seed = 7}).parameters()[0]->value != nn::make_mlp({.seed = 8}).parameters()[0]->value);
}
