// CPU-time companion of bench_quantize (built by CMake as build/release/bench/cpu_time_quantize, or by hand as below; docs/performance.md gives the command):
// minifloat::quantize with and without a rounding_stats, 64K values (in cache), both benchmark data
// sets, thread CPU time, best of 5 passes of `reps` calls. Under a shared machine's load the wall
// clock swings by +-30 %; thread CPU time does not count time the scheduler gave to others.
//   g++ -std=c++20 -O3 -march=native -Iinclude bench/cpu_time_quantize.cpp -o build/release/bench/cpu_time_quantize
//   build/release/bench/cpu_time_quantize 150
#include <minifloat/minifloat.hpp>
#include <cstdio>
#include <ctime>
#include <random>
#include <vector>
#include <cmath>
static double cpu() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
  const std::size_t n = 1 << 16;
  std::mt19937 gen(1);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> e(-40, 40);
  std::vector<float> normal(n), wide(n), out(n);
  for (std::size_t i = 0; i < n; ++i) { normal[i] = nd(gen); wide[i] = std::ldexp(nd(gen), e(gen)); }
  struct F { const char* name; minifloat::format f; } fs[] = {{"bfloat16", minifloat::bfloat16}, {"binary16", minifloat::binary16}, {"e4m3", minifloat::e4m3}, {"e5m2", minifloat::e5m2}, {"fp434", minifloat::fp_4_3_4}};
  struct M { const char* name; minifloat::rounding m; } ms[] = {{"rne", minifloat::rounding::nearest_even}, {"rna", minifloat::rounding::nearest_away}, {"rz", minifloat::rounding::toward_zero}, {"sr", minifloat::rounding::stochastic}};
  const int reps = argc > 1 ? std::atoi(argv[1]) : 400;
  for (int d = 0; d < 2; ++d) for (auto& f : fs) for (auto& m : ms) {
    const auto& in = d ? wide : normal;
    minifloat::rounder<float> r(f.f, {m.m, minifloat::overflow::saturate});
    double best[2] = {1e9, 1e9};
    for (int pass = 0; pass < 5; ++pass) for (int c = 0; c < 2; ++c) {
      minifloat::rounding_stats st;
      const double t0 = cpu();
      for (int k = 0; k < reps; ++k) {
        if (c) minifloat::quantize(std::span<const float>(in), std::span<float>(out), r, st);
        else minifloat::quantize(std::span<const float>(in), std::span<float>(out), r);
      }
      const double t = cpu() - t0;
      if (t < best[c]) best[c] = t;
    }
    std::printf("%s %-8s %-3s plain %.2f counting %.2f values/ns cost %+.1f%%\n", d ? "wide  " : "normal", f.name, m.name,
                n * reps / best[0] * 1e-9, n * reps / best[1] * 1e-9, (best[1] / best[0] - 1) * 100);
  }
}
