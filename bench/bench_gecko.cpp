// bench_gecko — Gecko exponent codecs (faithful and improved, include/minifloat/storage/gecko.hpp)
// on three synthetic data sets, beside zstd level 1 on the same exponent bytes (one byte per
// exponent) and a memcpy of those bytes. Counters: values_per_ns (per CPU second, so a loaded
// machine does not inflate it; Google Benchmark prints it with a "/s" suffix) and
// bits_per_exponent, the encoded buffer's bits per value.
#include <benchmark/benchmark.h>
#include <zstd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include <minifloat/storage/gecko.hpp>
#include <minifloat/storage/gecko_tensor.hpp>

namespace {

namespace storage = minifloat::storage;
using storage::gecko_variant;

constexpr std::size_t value_count = std::size_t{1} << 20;

enum data_set : int { weight_like = 0, relu_like = 1, gradient_like = 2 };
constexpr const char* data_set_names[] = {"weight N(0,0.05)", "relu 50% zero |N(0,1)|", "gradient N(0,1e-4)"};

const std::vector<float>& data(int which) {
  static const std::vector<std::vector<float>> sets = [] {
    std::vector<std::vector<float>> s(3, std::vector<float>(value_count));
    std::mt19937_64 rng(20261121);
    std::normal_distribution<float> normal(0.0F, 1.0F);
    for (std::size_t i = 0; i < value_count; ++i) {
      s[weight_like][i] = 0.05F * normal(rng);
      const float z = std::fabs(normal(rng));
      s[relu_like][i] = (rng() & 1) != 0 ? z : 0.0F;
      s[gradient_like][i] = 1e-4F * normal(rng);
    }
    return s;
  }();
  return sets[static_cast<std::size_t>(which)];
}

std::vector<std::uint8_t> exponent_bytes(const std::vector<float>& v) {
  std::vector<std::uint8_t> e(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) e[i] = static_cast<std::uint8_t>(std::bit_cast<std::uint32_t>(v[i]) >> 23);
  return e;
}

void set_counters(benchmark::State& state, std::size_t encoded_bytes) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * value_count));
  state.counters["values_per_ns"] = benchmark::Counter(static_cast<double>(state.iterations() * value_count) * 1e-9,
                                                       benchmark::Counter::kIsRate);
  state.counters["bits_per_exponent"] = 8.0 * static_cast<double>(encoded_bytes) / static_cast<double>(value_count);
  state.SetLabel(data_set_names[state.range(0)]);
}

void gecko_encode(benchmark::State& state, gecko_variant variant) {
  const auto& v = data(static_cast<int>(state.range(0)));
  std::vector<std::uint8_t> out(storage::gecko_max_encoded_bytes(v.size(), variant));
  std::size_t bytes = 0;
  for (auto _ : state) {
    bytes = storage::gecko_encode_exponents(v, out, variant);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, bytes);
}

void gecko_decode(benchmark::State& state, gecko_variant variant) {
  const auto& v = data(static_cast<int>(state.range(0)));
  const auto encoded = storage::gecko_encode_exponents(v, variant);
  std::vector<std::uint8_t> exps(v.size());
  for (auto _ : state) {
    if (storage::gecko_decode_exponents(encoded, v.size(), exps, variant) != storage::gecko_errc::ok)
      state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(exps.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, encoded.size());
}

void BM_gecko_faithful_encode(benchmark::State& s) { gecko_encode(s, gecko_variant::faithful); }
void BM_gecko_faithful_decode(benchmark::State& s) { gecko_decode(s, gecko_variant::faithful); }
void BM_gecko_improved_encode(benchmark::State& s) { gecko_encode(s, gecko_variant::improved); }
void BM_gecko_improved_decode(benchmark::State& s) { gecko_decode(s, gecko_variant::improved); }

// The tensor codec at n = 7 (bfloat16's mantissa), improved variant: bits per value, not per
// exponent, in the bits counter.
void BM_gecko_tensor_n7_encode(benchmark::State& state) {
  const auto& v = data(static_cast<int>(state.range(0)));
  const storage::gecko_tensor_options options{gecko_variant::improved, 7};
  std::vector<std::uint8_t> out(storage::gecko_tensor_encoded_size(v, options).bytes);
  std::size_t bytes = 0;
  for (auto _ : state) {
    bytes = storage::gecko_encode_tensor(v, out, options);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, bytes);
}

void BM_gecko_tensor_n7_decode(benchmark::State& state) {
  const auto& v = data(static_cast<int>(state.range(0)));
  const auto encoded = storage::gecko_encode_tensor(v, {gecko_variant::improved, 7});
  std::vector<float> out(v.size());
  for (auto _ : state) {
    if (storage::gecko_decode_tensor(encoded, out) != storage::gecko_errc::ok) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, encoded.size());
}

void BM_zstd1_compress_exponents(benchmark::State& state) {
  const auto e = exponent_bytes(data(static_cast<int>(state.range(0))));
  std::vector<std::uint8_t> out(ZSTD_compressBound(e.size()));
  std::size_t bytes = 0;
  for (auto _ : state) {
    bytes = ZSTD_compress(out.data(), out.size(), e.data(), e.size(), 1);
    if (ZSTD_isError(bytes)) state.SkipWithError("zstd failed");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, bytes);
}

void BM_zstd1_decompress_exponents(benchmark::State& state) {
  const auto e = exponent_bytes(data(static_cast<int>(state.range(0))));
  std::vector<std::uint8_t> compressed(ZSTD_compressBound(e.size()));
  compressed.resize(ZSTD_compress(compressed.data(), compressed.size(), e.data(), e.size(), 1));
  std::vector<std::uint8_t> out(e.size());
  for (auto _ : state) {
    const std::size_t n = ZSTD_decompress(out.data(), out.size(), compressed.data(), compressed.size());
    if (ZSTD_isError(n) || n != e.size()) state.SkipWithError("zstd failed");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, compressed.size());
}

void BM_memcpy_exponents(benchmark::State& state) {
  const auto e = exponent_bytes(data(static_cast<int>(state.range(0))));
  std::vector<std::uint8_t> out(e.size());
  for (auto _ : state) {
    std::memcpy(out.data(), e.data(), e.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, e.size());
}

}  // namespace

BENCHMARK(BM_gecko_faithful_encode)->DenseRange(0, 2);
BENCHMARK(BM_gecko_faithful_decode)->DenseRange(0, 2);
BENCHMARK(BM_gecko_improved_encode)->DenseRange(0, 2);
BENCHMARK(BM_gecko_improved_decode)->DenseRange(0, 2);
BENCHMARK(BM_gecko_tensor_n7_encode)->DenseRange(0, 2);
BENCHMARK(BM_gecko_tensor_n7_decode)->DenseRange(0, 2);
BENCHMARK(BM_zstd1_compress_exponents)->DenseRange(0, 2);
BENCHMARK(BM_zstd1_decompress_exponents)->DenseRange(0, 2);
BENCHMARK(BM_memcpy_exponents)->DenseRange(0, 2);

BENCHMARK_MAIN();
