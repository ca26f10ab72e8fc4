// Footprint accounting of dynamic containers (training/container_footprint.hpp) on hand-computed
// cases: the sign rule, Gecko exponent sizes, every Table-1 variant, the reductions vs FP32,
// BFloat16 and FP8, the mantissa/exponent shares, and the per-class ledger.
#include <catch2/catch.hpp>

#include <limits>
#include <stdexcept>
#include <vector>

#include <minifloat/training/container_footprint.hpp>

namespace mt = minifloat::training;
using minifloat::storage::gecko_variant;

TEST_CASE("the sign bit is omitted only when no stored value is negative", "[container_footprint]") {
  CHECK(mt::needs_sign_bit(std::vector<float>{1, 0, 2}, mt::sign_rule::omit_when_nonnegative) == false);
  CHECK(mt::needs_sign_bit(std::vector<float>{1, -0.0f, std::numeric_limits<float>::quiet_NaN()},
                           mt::sign_rule::omit_when_nonnegative) == false);
  CHECK(mt::needs_sign_bit(std::vector<float>{1, -1e-30f}, mt::sign_rule::omit_when_nonnegative) == true);
  CHECK(mt::needs_sign_bit(std::vector<float>{1, 2}, mt::sign_rule::always) == true);
}

TEST_CASE("one stored tensor: every Table-1 variant by hand, with Gecko", "[container_footprint]") {
  // Group 1: exponents d = E − 127 of {1.5, −2, 0.25, 3, 1, 1, 1, 1} are 0, 1, −2, 1, 0…: width 2,
  // 3 + 8·2 = 19 bits. Group 2 holds a zero: the escape, 3 + 8·8 = 67 bits. Total 86.
  const std::vector<float> v{1.5f, -2.0f, 0.25f, 3.0f, 1, 1, 1, 1, 0.0f, 1, 1, 1, 1, 1, 1, 1};
  const mt::stored_tensor s = mt::describe_stored(v, 3, 4, mt::sign_rule::omit_when_nonnegative, gecko_variant::faithful);
  CHECK(s.elements == 16);
  CHECK(s.sign);
  REQUIRE(s.gecko_exponent_bits);
  CHECK(*s.gecko_exponent_bits == 86);

  mt::footprint_totals t;
  t.add(s);
  using fv = mt::footprint_variant;
  CHECK(t.bits(fv::fp32) == 512);
  CHECK(t.bits(fv::mantissa) == 16 + 16 * 8 + 16 * 3);         // 192
  CHECK(t.bits(fv::exponent) == 16 + 16 * 4 + 16 * 23);        // 448
  CHECK(t.bits(fv::exponent_gecko) == 16 + 86 + 16 * 23);      // 470
  CHECK(t.bits(fv::both) == 16 + 16 * 4 + 16 * 3);             // 128
  CHECK(t.bits(fv::both_gecko) == 16 + 86 + 16 * 3);           // 150
  CHECK(t.reduction(fv::both) == 4.0);
  CHECK(t.reduction(fv::both, 16) == 2.0);  // vs BFloat16
  CHECK(t.reduction(fv::both, 8) == 1.0);   // vs FP8
  CHECK(t.reduction(fv::mantissa) == Approx(512.0 / 192));
  CHECK(t.bits_per_element(fv::both_gecko) == Approx(150.0 / 16));
  CHECK(t.mantissa_share() == Approx(3.0 / 23));
  CHECK(t.exponent_share() == Approx(4.0 / 8));
  CHECK(t.gecko_exponent_share() == Approx(86.0 / 128));

  // The improved variant is passed through as well (its exact size is the codec's).
  const mt::stored_tensor improved = mt::describe_stored(v, 3, 4, mt::sign_rule::always, gecko_variant::improved);
  CHECK(*improved.gecko_exponent_bits == minifloat::storage::gecko_encoded_size(v, gecko_variant::improved).bits);
}

TEST_CASE("non-negative tensors drop the sign; +G needs Gecko sizes for every element", "[container_footprint]") {
  const std::vector<float> relu{0.0f, 0.5f, 2.0f, 0.0f};
  const mt::stored_tensor s = mt::describe_stored(relu, 2, 3, mt::sign_rule::omit_when_nonnegative);
  CHECK_FALSE(s.sign);
  CHECK_FALSE(s.gecko_exponent_bits);
  mt::footprint_totals t;
  t.add(s);
  CHECK(t.bits(mt::footprint_variant::both) == 4 * 5);
  CHECK(t.reduction(mt::footprint_variant::both) == Approx(128.0 / 20));
  CHECK_FALSE(t.has_gecko());
  CHECK_THROWS_AS(t.bits(mt::footprint_variant::both_gecko), std::logic_error);
}

TEST_CASE("ledger: per tensor over steps, per class, cumulative", "[container_footprint]") {
  mt::container_ledger epoch({mt::tensor_class::weight, mt::tensor_class::activation});
  // Weight: 10 elements, two steps at (k_m, k_e) = (4, 5) then (3, 5); activation: 20 elements
  // without sign at (2, 4).
  epoch.record(0, {10, true, 4, 5, std::nullopt});
  epoch.record(0, {10, true, 3, 5, std::nullopt});
  epoch.record(1, {20, false, 2, 4, std::nullopt});
  const auto w = epoch.totals(mt::tensor_class::weight);
  CHECK(w.elements == 20);
  CHECK(w.mantissa_bits == 70);
  CHECK(w.bits(mt::footprint_variant::both) == 20 + 100 + 70);
  CHECK(static_cast<double>(epoch.tensor(0).mantissa_bits) / epoch.tensor(0).elements == 3.5);
  const auto a = epoch.totals(mt::tensor_class::activation);
  CHECK(a.bits(mt::footprint_variant::both) == 120);
  const auto all = epoch.totals();
  CHECK(all.bits(mt::footprint_variant::both) == 190 + 120);
  CHECK(all.reduction(mt::footprint_variant::both) == Approx(40.0 * 32 / 310));

  mt::container_ledger run({mt::tensor_class::weight, mt::tensor_class::activation});
  run += epoch;
  run += epoch;
  CHECK(run.totals().elements == 80);
  epoch.clear();
  CHECK(epoch.totals().elements == 0);
  mt::container_ledger other({mt::tensor_class::weight});
  CHECK_THROWS_AS(run += other, std::invalid_argument);
}
