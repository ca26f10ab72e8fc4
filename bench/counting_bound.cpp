// What exact overflow and underflow counts can cost beside quantize's nearest-even loop in cache
// (the "counting adds at most 10 %" target; docs/performance.md, "Counting in cache: the bound").
//
// At 64K floats (256 KiB each way, in L2) it times, on the wall clock, with the repetitions of all
// rows interleaved and a memcpy of the same bytes among them:
//   quantize            minifloat::quantize without statistics (the float-arithmetic form, AVX-512)
//   quantize + stats    the same with a rounding_stats: the library's counting
//   loop                that form's loop written out here (detail::float_add_rounding per register,
//                       lines requested ahead as quantize does) without quantize's NaN/Inf test:
//                       the base the next two rows add to
//   loop + 1 compare    the loop and one compare into a mask register per register, the mask stored
//                       to memory and popcounted after the loop: cheaper than any exact count
//                       (overflows alone)
//   loop + both counts  overflows (a >= threshold) and underflows (1 <= a < first nonzero: a
//                       subtraction and a compare) the same way: the cheapest exact pair found
// Each row prints its median over the repetitions and its cost against `quantize`. The written-out
// loops need AVX-512 (the form's); elsewhere the program says so and exits.
//   cmake --build build/release --target counting_bound && build/release/bench/counting_bound
#include <minifloat/minifloat.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <vector>

constexpr const char* no_form = "counting_bound: the float-arithmetic form needs AVX-512; nothing to measure here";

#if defined(__AVX512F__)
#include <immintrin.h>

namespace {

namespace md = minifloat::detail;
using lanes_u32 = md::simd_t<std::uint32_t>;
constexpr std::size_t n = std::size_t{1} << 16;
constexpr std::size_t registers = n / 16;

enum class extra { none, one_compare, both_counts };

struct counts {
  std::uint64_t overflows = 0, underflows = 0;
};

/// The float-arithmetic nearest-even loop of a saturating plan, with `what` added per register.
/// Returns the counts (zero where not counted), which also keeps them from being optimised away.
template <extra What>
[[gnu::noinline]] counts loop(const minifloat::rounding_plan<float>& p, const float* in, float* out,
                                     std::uint32_t first_nonzero, std::uint16_t* over_masks,
                                     std::uint16_t* under_masks) {
  const md::float_add_plan<lanes_u32> fa(p);
  const __m512i threshold = _mm512_set1_epi32(static_cast<int>(p.threshold_bits));
  const __m512i below_first = _mm512_set1_epi32(static_cast<int>(first_nonzero - 1));
  const __m512i one = _mm512_set1_epi32(1), magnitude = _mm512_set1_epi32(0x7fffffff);
  for (std::size_t r = 0; r < registers; ++r) {
    md::prefetch_stream(in, out, 16 * r, n);  // as quantize's loop does
    lanes_u32 u;
    std::memcpy(&u, in + 16 * r, 64);
    const lanes_u32 result =
        md::float_add_rounding<minifloat::rounding::nearest_even, md::float_add_shape::saturating>(fa, u);
    if constexpr (What != extra::none) {
      const __m512i a = _mm512_and_si512(std::bit_cast<__m512i>(u), magnitude);
      _store_mask16(over_masks + r, _mm512_cmpge_epu32_mask(a, threshold));
      if constexpr (What == extra::both_counts)
        _store_mask16(under_masks + r, _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a, one), below_first));
    }
    std::memcpy(out + 16 * r, &result, 64);
  }
  counts counted;
  if constexpr (What != extra::none) {
    for (std::size_t r = 0; r < registers; r += 4) {  // four 16-bit masks a popcount
      std::uint64_t over, under;
      std::memcpy(&over, over_masks + r, 8);
      std::memcpy(&under, under_masks + r, 8);
      counted.overflows += static_cast<std::uint64_t>(std::popcount(over));
      if constexpr (What == extra::both_counts) counted.underflows += static_cast<std::uint64_t>(std::popcount(under));
    }
  }
  return counted;
}

}  // namespace

int main() {
  if (!md::float_add_form<lanes_u32>) {
    std::puts(no_form);
    return 0;
  }
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> binade(-40, 40);
  std::vector<float> data[2] = {std::vector<float>(n), std::vector<float>(n)};
  for (std::size_t i = 0; i < n; ++i) {
    data[0][i] = normal(gen);
    data[1][i] = std::ldexp(normal(gen), binade(gen));
  }
  std::vector<float> out(n);
  std::vector<std::uint16_t> over_masks(registers), under_masks(registers);
  const char* data_names[] = {"normal", "wide"};
  struct named_format {
    const char* name;
    minifloat::format f;
  };
  const named_format formats[] = {{"e4m3", minifloat::e4m3}, {"e5m2", minifloat::e5m2}};
  const char* rows[] = {"memcpy", "quantize", "quantize + stats", "loop", "loop + 1 compare", "loop + both counts"};
  constexpr int row_count = 6, repetitions = 400, calls = 10;
  std::uint64_t sink = 0;
  for (const named_format& nf : formats)
    for (int d = 0; d < 2; ++d) {
      const std::vector<float>& in = data[d];
      const minifloat::rounding_options options{minifloat::rounding::nearest_even, minifloat::overflow::saturate};
      const minifloat::rounder<float> rounder(nf.f, options);
      const auto plan = minifloat::make_plan<float>(nf.f, options);
      if (!md::float_add_applies(plan)) continue;
      const std::uint32_t first_nonzero = md::first_nonzero_magnitude<minifloat::rounding::nearest_even>(plan);
      {  // the probe's pair of counts is exact: the library's statistics agree
        minifloat::rounding_stats stats;
        minifloat::quantize(std::span<const float>(in), std::span<float>(out), rounder, stats);
        const counts probe = loop<extra::both_counts>(plan, in.data(), out.data(), first_nonzero,
                                                      over_masks.data(), under_masks.data());
        if (probe.overflows != stats.overflows || probe.underflows != stats.underflows) {
          std::printf("%s %s: the probe counted %llu overflows and %llu underflows, quantize %llu and %llu\n",
                      nf.name, data_names[d], static_cast<unsigned long long>(probe.overflows),
                      static_cast<unsigned long long>(probe.underflows),
                      static_cast<unsigned long long>(stats.overflows),
                      static_cast<unsigned long long>(stats.underflows));
          return 1;
        }
      }
      const auto run = [&](int row) {
        const std::span<const float> source(in);
        switch (row) {
          case 0: std::memcpy(out.data(), in.data(), n * sizeof(float)); break;
          case 1: minifloat::quantize(source, std::span<float>(out), rounder); break;
          case 2: {
            minifloat::rounding_stats stats;
            minifloat::quantize(source, std::span<float>(out), rounder, stats);
            sink += stats.overflows + stats.underflows;
            break;
          }
          case 3: loop<extra::none>(plan, in.data(), out.data(), first_nonzero, nullptr, nullptr); break;
          case 4:
            sink += loop<extra::one_compare>(plan, in.data(), out.data(), first_nonzero, over_masks.data(),
                                             under_masks.data())
                        .overflows;
            break;
          default: {
            const counts c = loop<extra::both_counts>(plan, in.data(), out.data(), first_nonzero, over_masks.data(),
                                                      under_masks.data());
            sink += c.overflows + c.underflows;
          }
        }
      };
      std::vector<double> ns[row_count];
      for (int rep = 0; rep < repetitions; ++rep)
        for (int k = 0; k < row_count; ++k) {
          const int row = (k + rep) % row_count;  // a different order each repetition
          const auto t0 = std::chrono::steady_clock::now();
          for (int c = 0; c < calls; ++c) run(row);
          ns[row].push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                            calls);
        }
      double median[row_count];
      for (int k = 0; k < row_count; ++k) {
        std::sort(ns[k].begin(), ns[k].end());
        median[k] = ns[k][repetitions / 2];
      }
      for (int k = 0; k < row_count; ++k)
        std::printf("%-5s %-6s %-19s %6.2f values/ns  %5.2fx memcpy  %+6.1f %% vs quantize\n", nf.name,
                    data_names[d], rows[k], n / median[k], median[0] / median[k], 100 * (median[k] / median[1] - 1));
    }
  std::printf("(all counts %llu)\n", static_cast<unsigned long long>(sink));  // keeps them observable
}
#else
int main() { std::puts(no_form); }
#endif
