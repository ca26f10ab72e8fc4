// Times every GEMM backend of this build on the products the example models run (batch 128)
// and checks that they agree; docs/examples.md records the numbers and the choice they led to.
//   nn_gemm_compare [seconds per product and backend, default 1; spent in 7 interleaved rounds]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "nn/gemm.hpp"

namespace {

struct shape {
  const char* what;
  nn::transpose ta, tb;
  std::size_t m, n, k;
  std::size_t calls;  // products of this shape per training step (per-image products: the batch)
};

constexpr auto N = nn::transpose::no;
constexpr auto T = nn::transpose::yes;

// MLP 784-512-512-10 and CNN (conv 1->32, conv 32->64, 3x3, 28x28 and 14x14) at batch 128.
const shape shapes[] = {
    {"mlp fc1 forward      Y = X W^T", N, T, 128, 512, 784, 1},
    {"mlp fc1 weight grad  dW = dY^T X", T, N, 512, 784, 128, 1},
    {"mlp fc2 forward", N, T, 128, 512, 512, 1},
    {"mlp fc2 input grad   dX = dY W", N, N, 128, 512, 512, 1},
    {"mlp fc2 weight grad", T, N, 512, 512, 128, 1},
    {"cnn conv1 forward    Y = W col (per image)", N, N, 32, 784, 9, 128},
    {"cnn conv1 weight grad dW = dY col^T", N, T, 32, 9, 784, 128},
    {"cnn conv2 forward (per image)", N, N, 64, 196, 288, 128},
    {"cnn conv2 weight grad", N, T, 64, 288, 196, 128},
    {"cnn conv2 input grad dcol = W^T dY", T, N, 288, 196, 64, 128},
    {"cnn conv2 forward, 8 images at once (alt.)", N, N, 64, 196 * 8, 288, 0},
    {"cnn fc forward", N, T, 128, 10, 3136, 1},
    {"cnn fc weight grad", T, N, 10, 3136, 128, 1},
    {"cnn fc input grad", N, N, 128, 3136, 10, 1},
};

struct operands {
  std::vector<float> a, b, c;
  std::size_t lda, ldb, ldc;
};

operands make(const shape& s, std::mt19937& rng) {
  std::normal_distribution<float> d;
  operands o;
  o.lda = s.ta == N ? s.k : s.m;
  o.ldb = s.tb == N ? s.n : s.k;
  o.ldc = s.n;
  o.a.resize(s.m * s.k);
  o.b.resize(s.k * s.n);
  o.c.resize(s.m * s.n);
  for (float& v : o.a) v = d(rng);
  for (float& v : o.b) v = d(rng);
  return o;
}

nn::gemm_args args(const shape& s, operands& o) {
  return {.trans_a = s.ta, .trans_b = s.tb, .m = s.m, .n = s.n, .k = s.k, .alpha = 1.0f, .a = o.a.data(),
          .lda = o.lda, .b = o.b.data(), .ldb = o.ldb, .beta = 0.0f, .c = o.c.data(), .ldc = o.ldc};
}

// Reference in double, to check every backend against.
std::vector<double> reference(const shape& s, const operands& o) {
  std::vector<double> c(s.m * s.n, 0.0);
  for (std::size_t i = 0; i < s.m; ++i)
    for (std::size_t p = 0; p < s.k; ++p) {
      const double a = s.ta == N ? o.a[i * o.lda + p] : o.a[p * o.lda + i];
      for (std::size_t j = 0; j < s.n; ++j) c[i * s.n + j] += a * (s.tb == N ? o.b[p * o.ldb + j] : o.b[j * o.ldb + p]);
    }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  const nn::gemm_backend backends[] = {nn::gemm_backend::blocked, nn::gemm_backend::openblas, nn::gemm_backend::eigen};
  std::printf("%-44s %-9s", "product (m x n x k)", "");
  for (auto b : backends)
    if (nn::gemm_available(b)) std::printf(" %12s", std::string(nn::name(b)).c_str());
  std::printf("   GFLOP/s, one thread; default: %s\n", std::string(nn::name(nn::default_gemm_backend())).c_str());
  std::mt19937 rng(7);
  double step_ms[2][3] = {};  // [mlp, cnn][backend]
  constexpr int rounds = 7;
  for (const shape& s : shapes) {
    operands o = make(s, rng);
    const auto ref = reference(s, o);
    std::printf("%-44s %4zux%4zux%4zu", s.what, s.m, s.n, s.k);
    for (const auto b : backends) {
      if (!nn::gemm_available(b)) continue;
      nn::gemm(b, args(s, o));
      double worst = 0.0;
      for (std::size_t i = 0; i < ref.size(); ++i)
        worst = std::max(worst, std::abs(o.c[i] - ref[i]) / (1.0 + std::abs(ref[i])));
      if (worst > 1e-4) {
        std::printf("\n%s disagrees with the double reference: %g\n", std::string(nn::name(b)).c_str(), worst);
        return 1;
      }
    }
    // Rounds interleave the backends and each keeps its best round: on a shared machine the
    // fastest round is the one least disturbed by other processes.
    double best[3] = {1e30, 1e30, 1e30};
    for (int round = 0; round < rounds; ++round)
      for (std::size_t bi = 0; bi < 3; ++bi) {
        if (!nn::gemm_available(backends[bi])) continue;
        const auto g = args(s, o);
        std::size_t reps = 0;
        const auto t0 = std::chrono::steady_clock::now();
        double elapsed = 0.0;
        do {
          nn::gemm(backends[bi], g);
          ++reps;
          elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        } while (elapsed < seconds / rounds);
        best[bi] = std::min(best[bi], elapsed / static_cast<double>(reps));
      }
    for (std::size_t bi = 0; bi < 3; ++bi) {
      if (!nn::gemm_available(backends[bi])) continue;
      step_ms[std::string(s.what).starts_with("cnn") ? 1 : 0][bi] += best[bi] * static_cast<double>(s.calls) * 1e3;
      std::printf(" %12.1f", 2.0 * static_cast<double>(s.m * s.n * s.k) / best[bi] * 1e-9);
    }
    std::printf("\n");
  }
  for (int model = 0; model < 2; ++model) {
    std::printf("%-58s", model == 0 ? "MLP: ms of these products per step (calls x time)"
                                    : "CNN: ms of these products per step (alt. excluded)");
    for (std::size_t bi = 0; bi < 3; ++bi)
      if (nn::gemm_available(backends[bi])) std::printf(" %12.2f", step_ms[model][bi]);
    std::printf("\n");
  }
}
