// Pack and unpack throughput of bitpack.hpp for field widths k in {1,3,4,5,7,8,12,13,16} at
// 64K values (in cache) and 16M values (in memory), beside a memcpy of the uncompressed values
// (4 bytes each) in the same run, so the ratios are fair. Buffers are plain std::vectors, as a
// user's would be. docs/performance.md ("Bit-packing") records the results and the command.
#include <benchmark/benchmark.h>

#include <minifloat/storage/bitpack.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

namespace ms = minifloat::storage;

const std::vector<std::uint32_t>& input(std::size_t n) {
  static std::vector<std::uint32_t> cache[2];
  auto& v = cache[n > (1u << 16)];
  if (v.size() != n) {
    std::mt19937 gen(12345);
    v.resize(n);
    for (auto& x : v) x = static_cast<std::uint32_t>(gen());
  }
  return v;
}

void set_rate(benchmark::State& state, std::size_t n) {
  state.counters["values_per_ns"] =
      benchmark::Counter(static_cast<double>(n) * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(n * sizeof(std::uint32_t)));
}

void bm_memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& in = input(n);
  std::vector<std::uint32_t> out(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(out.data());  // the copy has an observer: no compiler may drop it
    std::memcpy(out.data(), in.data(), n * sizeof(std::uint32_t));
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

// Arguments: values, k.
void bm_pack(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  const auto& in = input(n);
  std::vector<std::uint32_t> words(ms::packed_words(n, k));
  for (auto _ : state) {
    benchmark::DoNotOptimize(words.data());
    ms::pack(in, k, words);
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

void bm_unpack(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  std::vector<std::uint32_t> words(ms::packed_words(n, k));
  ms::pack(input(n), k, words);
  std::vector<std::uint32_t> out(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(out.data());
    ms::unpack(words, k, n, out);
    benchmark::ClobberMemory();
  }
  set_rate(state, n);
}

constexpr std::int64_t sizes[] = {1 << 16, 1 << 24};
constexpr std::int64_t widths[] = {1, 3, 4, 5, 7, 8, 12, 13, 16};

void memcpy_args(benchmark::internal::Benchmark* b) {
  for (auto n : sizes) b->Arg(n);
}
void pack_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "k"});
  for (auto n : sizes)
    for (auto k : widths) b->Args({n, k});
}

BENCHMARK(bm_memcpy)->Apply(memcpy_args);
BENCHMARK(bm_pack)->Apply(pack_args);
BENCHMARK(bm_unpack)->Apply(pack_args);

}  // namespace

BENCHMARK_MAIN();
