// The README's demo: rounds a few values and a normally distributed array to the named formats
// in every rounding mode and prints the results and the overflow/underflow statistics.
#include <minifloat/minifloat.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

namespace {

struct named_format {
  const char* name;
  minifloat::format fmt;
};

constexpr named_format formats[] = {
    {"binary16", minifloat::binary16}, {"bfloat16", minifloat::bfloat16}, {"e5m2", minifloat::e5m2},
    {"e4m3", minifloat::e4m3},         {"fp(6,9,0)", minifloat::fp_6_9_0}, {"fp(4,3,4)", minifloat::fp_4_3_4},
    {"fp(5,2,0)", minifloat::fp_5_2_0},
};

constexpr struct {
  const char* name;
  minifloat::rounding mode;
} modes[] = {{"nearest_even", minifloat::rounding::nearest_even},
             {"nearest_away", minifloat::rounding::nearest_away},
             {"toward_zero", minifloat::rounding::toward_zero},
             {"stochastic", minifloat::rounding::stochastic}};

}  // namespace

int main() {
  const float samples[] = {0.1f, 1.0f / 3.0f, 3.14159265f, 100.5f, 1000.0f, 1e-5f, -65519.0f, INFINITY, NAN};
  std::printf("Scalars rounded to nearest-even (overflow -> saturate):\n%-10s", "x");
  for (const auto& f : formats) std::printf(" %13s", f.name);
  std::printf("\n");
  for (float x : samples) {
    std::printf("%-10.4g", static_cast<double>(x));
    for (const auto& f : formats) {
      const float r = minifloat::round(x, f.fmt, {minifloat::rounding::nearest_even, minifloat::overflow::saturate});
      std::printf(" %13.6g", static_cast<double>(r));
    }
    std::printf("\n");
  }

  // An activation-like array: N(0, 1) scaled over a wide range, so every format sees overflow
  // and underflow somewhere.
  std::mt19937 gen(2026);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> data(1 << 20);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = normal(gen) * std::ldexp(1.0f, static_cast<int>(i % 41) - 20);
  std::vector<float> out(data.size());

  std::printf("\n%zu values, N(0,1) * 2^[-20,20]; overflow policy saturate, seed 7 for stochastic rounding\n",
              data.size());
  std::printf("%-10s %-13s %10s %10s %10s %12s\n", "format", "mode", "overflow%", "underflow%", "rel.err", "|x| shift");
  for (const auto& f : formats) {
    for (const auto& m : modes) {
      minifloat::rounding_stats stats;
      minifloat::quantize(std::span<const float>(data), std::span<float>(out), f.fmt,
                          {m.mode, minifloat::overflow::saturate, 0, 7, 0}, stats);
      double err = 0, norm = 0, shift = 0;
      for (std::size_t i = 0; i < data.size(); ++i) {
        if (std::fabs(data[i]) >= f.fmt.max_finite() || std::fabs(data[i]) < f.fmt.min_normal()) continue;
        err += std::fabs(out[i] - data[i]) / std::fabs(data[i]);
        shift += (std::fabs(out[i]) - std::fabs(data[i])) / std::fabs(data[i]);
        norm += 1;
      }
      std::printf("%-10s %-13s %10.3f %10.3f %10.2e %12.2e\n", f.name, m.name, 100 * stats.overflow_ratio(),
                  100 * stats.underflow_ratio(), err / norm, shift / norm);
    }
  }
  std::printf("\n(rel.err = mean |r - x| / |x| and |x| shift = mean (|r| - |x|) / |x|, over the values inside\n"
              " each format's normal range: toward_zero shrinks magnitudes; stochastic rounding has a larger\n"
              " error than nearest but no systematic shift.)\n");
  return 0;
}
