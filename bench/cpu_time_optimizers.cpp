// CPU-time companion of bench_split_optimizers (built by CMake as build/release/bench/cpu_time_optimizers, or by hand as below; docs/performance.md gives the
// command): the library's fp32 SGD or Adam step and split steps on the same 16M weights and
// gradients, thread CPU time, best of 5 steps after one untimed step. A third argument sets the
// number of weights (a layout name or "all" second): fewer than 16M are stepped repeatedly, 16M
// weights' worth per timed pass (32768: in cache), and times are per 16M weights.
//   g++ -std=c++20 -O3 -march=native -Iinclude bench/cpu_time_optimizers.cpp -o build/release/bench/cpu_time_optimizers
//   build/release/bench/cpu_time_optimizers sgd; build/release/bench/cpu_time_optimizers adam [layout name|all] [weights]
#include <minifloat/storage/optimizers.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <random>
#include <vector>
namespace ms = minifloat::storage;
static double cpu() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
  const std::size_t n = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : std::size_t{1} << 24;
  if (n == 0 || n > (std::size_t{1} << 24)) { std::fprintf(stderr, "weights: 1 .. 16777216\n"); return 2; }
  const std::size_t repeats = (std::size_t{1} << 24) / n;
  std::vector<float> w0(n), g(n);
  std::mt19937 gen(1);
  std::normal_distribution<float> d(0, 0.02f), dg(0, 1e-3f);
  for (auto& x : w0) x = d(gen);
  for (auto& x : g) x = dg(gen);
  const ms::sgd_options so{0.01, 0.9, 0, 1e-4};
  const ms::adam_options ao{1e-3};
  const bool adam = argc > 1 && argv[1][0] == 'a';
  auto best = [&](auto&& step) {
    step();
    double b = 1e9;
    for (int r = 0; r < 5; ++r) {
      const double t0 = cpu();
      for (std::size_t k = 0; k < repeats; ++k) step();
      b = std::min(b, (cpu() - t0) * static_cast<double>(std::size_t{1} << 24) / static_cast<double>(n * repeats));
    }
    return b;
  };
  std::vector<float> wf = w0; ms::sgd_state sf; ms::adam_state af;
  const double fp32 = adam ? best([&] { ms::adam_step(wf, g, af, ao); }) : best([&] { ms::sgd_step(wf, g, sf, so); });
  std::vector<float> out(n);
  const double mc = best([&] { std::memcpy(out.data(), w0.data(), n * 4); });
  std::printf("memcpy %.2f ms, fp32 %s step %.2f ms\n", mc * 1e3, adam ? "adam" : "sgd", fp32 * 1e3);
  struct L { const char* name; ms::split_layout l; } ls[] = {
    {"bf16+16", {minifloat::bfloat16, 16}}, {"bf16+8", {minifloat::bfloat16, 8}}, {"fp16+8", {minifloat::binary16, 8}},
    {"e4m3+8", {minifloat::e4m3, 8}}, {"bf16+8 st", {minifloat::bfloat16, 8, ms::split_mode::stochastic}},
    {"fp16+8 st", {minifloat::binary16, 8, ms::split_mode::stochastic}}, {"e4m3+8 st", {minifloat::e4m3, 8, ms::split_mode::stochastic}}};
  for (auto& l : ls) {
    if (argc > 2 && std::strcmp(argv[2], "all") != 0 && std::strcmp(l.name, argv[2]) != 0) continue;
    ms::split_tensor t(w0, l.l);
    ms::sgd_state s; ms::adam_state a;
    const double tt = adam ? best([&] { ms::adam_step(t, g, a, ao); }) : best([&] { ms::sgd_step(t, g, s, so); });
    std::printf("%-10s %.2f ms  x fp32 step %.2f\n", l.name, tt * 1e3, fp32 / tt);
  }
}
