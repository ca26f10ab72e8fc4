// low_tensor (minifloat/storage/low_tensor.hpp): weights kept only as packed codes; an optimizer
// step is the fp32 step rounded to the format, and stochastic rounding does not depend on chunks.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include <minifloat/bulk.hpp>
#include <minifloat/storage/low_tensor.hpp>
#include <minifloat/storage/optimizers.hpp>

#include "support.hpp"

namespace ms = minifloat::storage;

namespace {
using test_support::normal_floats;
std::vector<float> rounded(std::vector<float> v, const minifloat::format& f) {
  minifloat::quantize(std::span<const float>(v), std::span<float>(v),
                      minifloat::rounder<float>(f, {minifloat::rounding::nearest_even, minifloat::overflow::saturate}));
  return v;
}
}  // namespace

TEST_CASE("an SGD step on low-only weights is the fp32 step rounded to nearest") {
  for (const minifloat::format f : {minifloat::bfloat16, minifloat::binary16, minifloat::e4m3}) {
    const std::size_t n = 4100;  // more than one optimizer chunk, not a multiple of 32
    const auto x0 = rounded(normal_floats(n, 1, 0.5f), f);
    const auto g = normal_floats(n, 2, 1.0f);
    ms::low_tensor t(x0, f);
    std::vector<float> decoded(n);
    t.decode(decoded);
    REQUIRE(decoded == x0);
    std::vector<float> reference = x0;
    ms::sgd_state s1, s2;
    const ms::sgd_options o{0.1, 0.9, 0, 1e-3};
    for (int step = 0; step < 3; ++step) {
      ms::sgd_step(t, g, s1, o);
      ms::sgd_step(std::span<float>(reference), g, s2, o);
      reference = rounded(reference, f);
    }
    t.decode(decoded);
    CHECK(decoded == reference);
    CHECK(t.generation() == 3);
  }
}

TEST_CASE("low_tensor stochastic rounding: chunked stores equal one store, and the mean is unbiased") {
  const std::size_t n = 4096;
  const std::vector<float> x(n, 1.0f + 0x1p-10f);  // an eighth of a bf16 ulp above 1
  ms::low_tensor whole(x, minifloat::bfloat16, minifloat::rounding::stochastic, 7);
  ms::low_tensor chunked(std::vector<float>(n, 0.0f), minifloat::bfloat16, minifloat::rounding::stochastic, 7);
  chunked.store(0, std::span(x).first(1024));
  chunked.store(1024, std::span(x).subspan(1024));
  CHECK(whole.codes().words()[0] == chunked.codes().words()[0]);
  std::vector<float> a(n), b(n);
  whole.decode(a);
  chunked.decode(b);
  CHECK(a == b);
  double mean = 0;
  for (float v : a) mean += v;
  mean /= static_cast<double>(n);
  CHECK(std::fabs(mean - (1.0 + 0x1p-10)) < 2e-4);
  CHECK_THROWS_AS(ms::low_tensor(x, minifloat::bfloat16, minifloat::rounding::toward_zero), std::invalid_argument);
  CHECK_THROWS_AS(whole.store(16, std::span(x).first(32)), std::out_of_range);
}
