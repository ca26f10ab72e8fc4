// Quantum Mantissa / Quantum Exponent / Quantum Integer (training/quantum.hpp,
// training/container_quantize.hpp): the quantizer's edge cases, the integerization
// probabilities, the bitlength gradients against finite differences of the exact expected loss,
// the regularizer weights, the update and the learn-then-freeze schedule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <minifloat/random.hpp>
#include <minifloat/training/quantum.hpp>

#include "support.hpp"

namespace mt = minifloat::training;

namespace {

float q(float x, int km, int ke) { return mt::quantize_container(x, mt::container{km, mt::exponent_range::from_bits(ke)}); }

/// A deterministic spread of floats over many binades, both signs.
std::vector<float> sample_values(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  const minifloat::counter_rng rng{seed};
  for (std::size_t i = 0; i < n; ++i) {
    const double u = rng.bits32(2 * i) * 0x1p-32, s = rng.bits32(2 * i + 1) * 0x1p-32;
    v[i] = static_cast<float>((s < 0.5 ? -1 : 1) * std::ldexp(1.0 + u, static_cast<int>(s * 24) - 14));
  }
  return v;
}

/// The tensor's draw for `step` forced to the wanted integer bitlengths: the first step whose
/// draw gives them (with a fractional n both neighbours come up within a few steps).
std::uint64_t step_drawing(mt::quantum_tensor& t, int km, int ke) {
  for (std::uint64_t step = 0; step < 1000; ++step) {
    t.draw(7, 0, step);
    if (t.mantissa_bits() == km && t.exponent_bits() == ke) return step;
  }
  FAIL("no step draws the wanted bitlengths");
  return 0;
}

}  // namespace

TEST_CASE("k_m = 23 and k_e = 8 is the identity on every float class", "[quantum]") {
  const mt::container_bounds full = mt::container_bounds::of({23, mt::exponent_range::from_bits(8)});
  const std::uint32_t stride = test_support::sanitize ? 104729u : 4099u;
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += stride)
    REQUIRE(mt::quantize_container_bits(static_cast<std::uint32_t>(u), full) == u);
  for (std::uint32_t u : {0x00000001u, 0x80000001u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u, 0x7f7fffffu})
    CHECK(mt::quantize_container_bits(u, full) == u);
}

TEST_CASE("mantissa truncation keeps the top k bits, toward zero (eq. 5)", "[quantum]") {
  CHECK(q(1.75f, 0, 8) == 1.0f);
  CHECK(q(-3.5f, 0, 8) == -2.0f);
  CHECK(q(1.75f, 1, 8) == 1.5f);
  CHECK(q(1.875f, 2, 8) == 1.75f);
  CHECK(q(0.1f, 23, 8) == 0.1f);
  CHECK(std::bit_cast<std::uint32_t>(q(-0.0f, 3, 8)) == 0x80000000u);
  // The closed form of the mantissa difference: the dropped bit times its weight.
  for (float x : sample_values(2000, 3))
    for (int k = 0; k < 23; ++k) {
      int e = 0;
      (void)std::frexp(x, &e);  // x = f·2^e, f in [0.5, 1): leading bit has weight 2^(e−1)
      const std::uint32_t bit = (std::bit_cast<std::uint32_t>(x) >> (22 - k)) & 1u;
      const double expected = std::copysign(bit * std::ldexp(1.0, e - 1 - (k + 1)), x);
      REQUIRE(static_cast<double>(q(x, k + 1, 8)) - static_cast<double>(q(x, k, 8)) == expected);
    }
}

TEST_CASE("exponent ranges of eqs. 13-14, k_e = 0 and the BitWave narrowing", "[quantum]") {
  for (int k = 0; k <= 8; ++k) CHECK(mt::exponent_range::from_bits(k).bits() == k);
  CHECK(mt::exponent_range::from_bits(3) == mt::exponent_range{false, -4, 3});
  CHECK(mt::exponent_range::from_bits(0) == mt::exponent_range{false, 0, 0});
  CHECK(mt::exponent_range::from_bits(8).full);
  CHECK(mt::exponent_range::narrowed(0).full);
  CHECK(mt::exponent_range::narrowed(1) == mt::exponent_range{false, -125, 126});
  CHECK(mt::exponent_range::narrowed(1).bits() == 8);
  CHECK(mt::exponent_range::narrowed(63).bits() == 7);   // [-63, 64]: 128 exponents
  CHECK(mt::exponent_range::narrowed(126).bits() == 1);  // [0, 1]
  CHECK_THROWS_AS(mt::exponent_range::from_bits(9), std::invalid_argument);
  CHECK_THROWS_AS(mt::exponent_range::from_bits(-1), std::invalid_argument);
  CHECK_THROWS_AS(mt::exponent_range::narrowed(127), std::invalid_argument);
  CHECK_THROWS_AS(mt::mantissa_keep_mask(24), std::invalid_argument);
}

TEST_CASE("the range bound of eq. 7: saturation, rounding up to V_min, flushing, Inf and NaN", "[quantum]") {
  // k_e = 3: [-4, 3]; with k_m = 2, V_max = 1.75·8 = 14 and V_min = 1/16.
  CHECK(q(100.0f, 2, 3) == 14.0f);
  CHECK(q(-100.0f, 2, 3) == -14.0f);
  CHECK(q(14.0f, 2, 3) == 14.0f);
  CHECK(q(15.9f, 2, 3) == 14.0f);
  CHECK(q(std::numeric_limits<float>::infinity(), 2, 3) == 14.0f);
  CHECK(q(-std::numeric_limits<float>::infinity(), 2, 3) == -14.0f);
  CHECK(q(0.0625f, 2, 3) == 0.0625f);
  CHECK(q(0.03125f, 2, 3) == 0.0625f);   // V_min/2 rounds up to V_min
  CHECK(q(-0.04f, 2, 3) == -0.0625f);
  CHECK(q(0.03f, 2, 3) == 0.0f);         // below V_min/2: zero
  CHECK(std::bit_cast<std::uint32_t>(q(-0.03f, 2, 3)) == 0x80000000u);
  const float nan = std::bit_cast<float>(0x7fc01234u);
  CHECK(std::bit_cast<std::uint32_t>(q(nan, 0, 0)) == 0x7fc01234u);
  // k_e = 0: the single exponent 0, values in ±[1, 2).
  CHECK(q(5.0f, 3, 0) == 1.875f);
  CHECK(q(0.6f, 3, 0) == 1.0f);
  CHECK(q(0.4f, 3, 0) == 0.0f);
  CHECK(q(1.3f, 0, 0) == 1.0f);
}

TEST_CASE("eq. 8: the value gradient passes straight through except where clipped", "[quantum]") {
  mt::quantum_tensor t("w", mt::tensor_class::weight, 6, mt::container_kind::floating_point);
  t.set_lengths(2, 3);
  t.draw_ceiling();
  std::vector<float> x{1.0f, 14.0f, -20.0f, 0.01f, std::numeric_limits<float>::infinity(), 13.9f};
  t.forward(x, true);
  CHECK(x == std::vector<float>{1.0f, 14.0f, -14.0f, 0.0f, 14.0f, 12.0f});
  std::vector<float> g{1, 2, 3, 4, 5, 6};
  (void)t.backward(g, false);
  CHECK(g == std::vector<float>{1, 0, 0, 4, 0, 6});
  std::vector<float> wrong(3);
  CHECK_THROWS_AS(t.backward(wrong, false), std::invalid_argument);
}

TEST_CASE("integerization: k in {floor n, floor n + 1} with frequency frac(n), reproducible", "[quantum]") {
  mt::quantum_tensor a("a", mt::tensor_class::activation, 1, mt::container_kind::floating_point);
  mt::quantum_tensor b("b", mt::tensor_class::activation, 1, mt::container_kind::floating_point);
  a.set_lengths(3.3, 5.75);
  b.set_lengths(3.3, 5.75);
  const int draws = test_support::sanitize ? 4000 : 20000;
  int upper_m = 0, upper_e = 0, differ_seed = 0;
  for (int s = 0; s < draws; ++s) {
    a.draw(11, 4, static_cast<std::uint64_t>(s));
    REQUIRE((a.mantissa_bits() == 3 || a.mantissa_bits() == 4));
    REQUIRE((a.exponent_bits() == 5 || a.exponent_bits() == 6));
    upper_m += a.mantissa_bits() == 4;
    upper_e += a.exponent_bits() == 6;
    b.draw(11, 4, static_cast<std::uint64_t>(s));
    REQUIRE(b.mantissa_bits() == a.mantissa_bits());  // same seed, tensor and step: same draw
    REQUIRE(b.exponent_bits() == a.exponent_bits());
    b.draw(12, 4, static_cast<std::uint64_t>(s));
    differ_seed += b.mantissa_bits() != a.mantissa_bits();
  }
  const double n = draws;
  // 5 standard deviations of a binomial proportion.
  CHECK(std::abs(upper_m / n - 0.3) < 5 * std::sqrt(0.3 * 0.7 / n));
  CHECK(std::abs(upper_e / n - 0.75) < 5 * std::sqrt(0.75 * 0.25 / n));
  CHECK(differ_seed > draws / 10);  // another seed gives another sequence
  // Integer n is deterministic.
  a.set_lengths(7, 2);
  for (std::uint64_t s = 0; s < 100; ++s) {
    a.draw(1, 0, s);
    REQUIRE(a.mantissa_bits() == 7);
    REQUIRE(a.exponent_bits() == 2);
  }
}

namespace {

/// The exact expected loss E_k[L(Q_k(x))] over the two integer neighbours of the real bitlength
/// that `set` sets, for the loss `loss` of the quantized values.
template <class Set, class Loss>
double expected_loss(mt::quantum_tensor& t, const std::vector<float>& x, double n, Set set, Loss loss) {
  set(t, n);
  const double lo = std::floor(n), frac = n - lo;
  double e = 0;
  for (int upper = 0; upper < 2; ++upper) {
    set(t, lo + upper);
    t.draw_ceiling();
    std::vector<float> v = x;
    t.forward(v, false);
    e += (upper ? frac : 1 - frac) * loss(v);
  }
  set(t, n);
  return e;
}

/// dL/dx̂ of the linear loss below: sin(f·i) or cos(f·i), both signs, many magnitudes.
std::vector<float> coefficients(std::size_t n, double f, bool cosine) {
  std::vector<float> c(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double a = f * static_cast<double>(i);
    c[i] = static_cast<float>(cosine ? std::cos(a) : std::sin(a));
  }
  return c;
}

/// L(x̂) = Σ c_i x̂_i: its expected value over the draw is linear in n between two integers, so
/// a central difference of the expectation is its exact derivative.
auto linear_loss(const std::vector<float>& c) {
  return [&c](const std::vector<float>& v) {
    double s = 0;
    for (std::size_t i = 0; i < v.size(); ++i) s += static_cast<double>(c[i]) * v[i];
    return s;
  };
}

/// The backward kernel sums each lane's terms in float over at most 64 terms before adding them
/// in double (quantum.hpp): its rounding stays within 64·2^−24 of Σ|g·ΔQ| (plus the double
/// sums' own, far smaller). ΔQ for element i is delta(i).
template <class Delta>
double float_sum_slack(const std::vector<float>& g, Delta delta) {
  double magnitude = 0;
  for (std::size_t i = 0; i < g.size(); ++i) magnitude += std::abs(static_cast<double>(g[i]) * delta(i));
  return 64 * 0x1p-24 * magnitude + 1e-12;
}

}  // namespace

TEST_CASE("bitlength gradients equal the derivative of the exact expected loss (linear loss)", "[quantum]") {
  const std::vector<float> x = sample_values(512, 5);
  const std::vector<float> c = coefficients(x.size(), 0.37, false);
  const auto linear = linear_loss(c);
  mt::quantum_tensor t("y", mt::tensor_class::activation, x.size(), mt::container_kind::floating_point);

  SECTION("mantissa, exponent fixed at 4 bits") {
    const auto set = [](mt::quantum_tensor& q, double n) { q.set_lengths(n, 4); };
    for (double n : {0.4, 2.3, 9.7, 22.5}) {
      const double h = 0.05;
      const double fd = (expected_loss(t, x, n + h, set, linear) - expected_loss(t, x, n - h, set, linear)) / (2 * h);
      set(t, n);
      const int k0 = static_cast<int>(std::floor(n));
      for (int k : {k0, k0 + 1}) {  // the estimate is the same whichever neighbour was drawn
        (void)step_drawing(t, k, 4);
        std::vector<float> v = x;
        t.forward(v, true);
        std::vector<float> g = c;
        const mt::bitlength_gradients grad = t.backward(g, true);
        const double slack = float_sum_slack(c, [&](std::size_t i) { return q(x[i], k0 + 1, 4) - q(x[i], k0, 4); });
        CHECK(grad.mantissa == Approx(fd).margin(slack));
      }
    }
  }
  SECTION("exponent, mantissa fixed at 5 bits") {
    const auto set = [](mt::quantum_tensor& q, double n) { q.set_lengths(5, n); };
    for (double n : {0.5, 1.2, 2.6, 3.5, 4.25}) {
      const double h = 0.05;
      const double fd = (expected_loss(t, x, n + h, set, linear) - expected_loss(t, x, n - h, set, linear)) / (2 * h);
      set(t, n);
      (void)step_drawing(t, 5, static_cast<int>(std::floor(n)));
      std::vector<float> v = x;
      t.forward(v, true);
      std::vector<float> g = c;
      const mt::bitlength_gradients grad = t.backward(g, true);
      const int e0 = static_cast<int>(std::floor(n));
      const double slack = float_sum_slack(c, [&](std::size_t i) { return q(x[i], 5, e0 + 1) - q(x[i], 5, e0); });
      CHECK(grad.exponent == Approx(fd).margin(slack));
      CHECK(fd != 0.0);  // the range matters at these bitlengths for this sample
    }
  }
  SECTION("at the maximum the difference is the last step down") {
    t.set_lengths(23, 8);
    t.draw_ceiling();
    std::vector<float> v = x;
    t.forward(v, true);
    std::vector<float> g = c;
    const mt::bitlength_gradients grad = t.backward(g, true);
    double m = 0, e = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      m += c[i] * (static_cast<double>(x[i]) - q(x[i], 22, 8));
      e += c[i] * (static_cast<double>(x[i]) - q(x[i], 23, 7));
    }
    CHECK(grad.mantissa == Approx(m).margin(float_sum_slack(c, [&](std::size_t i) { return x[i] - q(x[i], 22, 8); })));
    CHECK(grad.exponent == Approx(e).margin(float_sum_slack(c, [&](std::size_t i) { return x[i] - q(x[i], 23, 7); })));
    CHECK(m != 0.0);  // (e is 0: this sample lies inside k_e = 7's range [-64, 63])
  }
}

TEST_CASE("bitlength gradient for a smooth loss: the expected estimate is within its bound of the exact one", "[quantum]") {
  // L = Σ (x̂ − t)²/2. The exact derivative of E[L] in n is Σ ΔQ·((Q0 + Q1)/2 − t); the estimator
  // drawn at k is Σ ΔQ·(Q_k − t); its expectation differs by (frac − 1/2)·Σ ΔQ², zero at frac = 1/2.
  const std::vector<float> x = sample_values(256, 9);
  std::vector<float> target(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) target[i] = 0.5f * x[i] + 0.1f;
  const auto quadratic = [&](const std::vector<float>& v) {
    double s = 0;
    for (std::size_t i = 0; i < v.size(); ++i) s += 0.5 * (v[i] - static_cast<double>(target[i])) * (v[i] - target[i]);
    return s;
  };
  mt::quantum_tensor t("y", mt::tensor_class::activation, x.size(), mt::container_kind::floating_point);
  const auto set = [](mt::quantum_tensor& qt, double n) { qt.set_lengths(n, 8); };
  for (double n : {1.5, 2.25, 4.8}) {
    const double h = 0.05;
    const double fd = (expected_loss(t, x, n + h, set, quadratic) - expected_loss(t, x, n - h, set, quadratic)) / (2 * h);
    set(t, n);
    const int k0 = static_cast<int>(std::floor(n));
    double estimate[2] = {0, 0}, delta_sq = 0, slack = 0;
    for (int upper = 0; upper < 2; ++upper) {
      (void)step_drawing(t, k0 + upper, 8);
      std::vector<float> v = x;
      t.forward(v, true);
      std::vector<float> g(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) g[i] = v[i] - target[i];
      slack += float_sum_slack(g, [&](std::size_t i) { return q(x[i], k0 + 1, 8) - q(x[i], k0, 8); });
      estimate[upper] = t.backward(g, true).mantissa;
    }
    for (float xi : x) delta_sq += std::pow(static_cast<double>(q(xi, k0 + 1, 8)) - q(xi, k0, 8), 2);
    const double frac = n - k0;
    const double expected_estimate = (1 - frac) * estimate[0] + frac * estimate[1];
    // Slack: the kernel's float partial sums, and the rounding of the summed losses (relative
    // to the derivative's own size).
    const double rounding = slack + 1e-9 * std::max(1.0, std::abs(fd));
    CHECK(std::abs(expected_estimate - fd) <= std::abs(frac - 0.5) * delta_sq * (1 + 1e-6) + rounding);
    if (frac == 0.5) CHECK(expected_estimate == Approx(fd).margin(rounding));
  }
}

TEST_CASE("linearised exponent gradient (eqs. 9-10) on the worked example", "[quantum]") {
  // docs/dynamic-containers.md §2: n_e = 3.6 so k0 = 3, range [-4, 3]; k_m = 2: V_max = 14,
  // V_min = 1/16; dV_max/dn = 14·ln²2·4, dV_min/dn = −(1/16)·ln²2·4.
  mt::quantum_tensor t("y", mt::tensor_class::activation, 4, mt::container_kind::floating_point);
  t.set_lengths(2.3, 3.6);
  (void)step_drawing(t, 2, 3);
  std::vector<float> x{13.9f, -20.0f, 0.04f, 0.01f};
  t.forward(x, true);
  std::vector<float> g{0.1f, 0.2f, -0.3f, 0.4f};
  const double c = std::log(2.0) * std::log(2.0) * 4;
  // −20: −1·dV_max; 0.04 in [V_min/2, V_min): +1·dV_min; 0.01 in (0, V_min/2): −1·dV_min.
  const double expected = 0.2 * (-1) * 14 * c + (-0.3) * (-0.0625 * c) + 0.4 * (-1) * (-0.0625 * c);
  std::vector<float> g_exact = g;
  const mt::bitlength_gradients lin = t.backward(g, true, mt::exponent_gradient::linearised);
  CHECK(lin.exponent == Approx(expected).epsilon(1e-6));
  CHECK(g == std::vector<float>{0.1f, 0.0f, -0.3f, 0.4f});  // eq. 8 as before
  const mt::bitlength_gradients exact = t.backward(g_exact, true);
  CHECK(lin.mantissa == exact.mantissa);  // the mantissa gradient does not change
  CHECK(exact.exponent == Approx(-1.1890625).epsilon(1e-6));
}

TEST_CASE("Quantum Integer: power-of-two scale, truncation, saturation and its bitlength gradient", "[quantum]") {
  CHECK(mt::fixed_point_scale_exponent(std::vector<float>{0.75f, -0.2f}) == 0);
  CHECK(mt::fixed_point_scale_exponent(std::vector<float>{1.0f}) == 1);
  CHECK(mt::fixed_point_scale_exponent(std::vector<float>{0.0f, -0.0f}) == 0);
  CHECK(mt::fixed_point_scale_exponent(std::vector<float>{3.0f, std::numeric_limits<float>::infinity()}) == 2);
  CHECK(mt::quantize_fixed_point(0.7f, 2, 0) == 0.5f);
  CHECK(mt::quantize_fixed_point(-0.7f, 2, 0) == -0.5f);
  CHECK(mt::quantize_fixed_point(0.99f, 2, 0) == 0.75f);
  CHECK(mt::quantize_fixed_point(0.3f, 0, 0) == 0.0f);
  CHECK(mt::quantize_fixed_point(std::numeric_limits<float>::infinity(), 2, 0) == 0.75f);
  CHECK(std::isnan(mt::quantize_fixed_point(std::numeric_limits<float>::quiet_NaN(), 2, 0)));

  const std::vector<float> x = sample_values(300, 13);
  const std::vector<float> c = coefficients(x.size(), 0.11, true);
  const auto linear = linear_loss(c);
  mt::quantum_tensor t("qi", mt::tensor_class::activation, x.size(), mt::container_kind::fixed_point);
  CHECK(t.mantissa_length() == 24);
  CHECK(t.exponent_length() == 0);
  const auto set = [](mt::quantum_tensor& qt, double n) { qt.set_lengths(n, 0); };
  for (double n : {3.4, 10.6}) {
    const double h = 0.05;
    const double fd = (expected_loss(t, x, n + h, set, linear) - expected_loss(t, x, n - h, set, linear)) / (2 * h);
    set(t, n);
    (void)step_drawing(t, static_cast<int>(std::floor(n)), 0);
    std::vector<float> v = x;
    t.forward(v, true);
    std::vector<float> g = c;
    CHECK(t.backward(g, true).mantissa == Approx(fd).epsilon(1e-9).margin(1e-12));
  }
}

TEST_CASE("regularizer weights are footprint (or element) shares, and the update adds gamma·lambda", "[quantum]") {
  mt::quantum_options o;
  o.learning_rate = 0.5;
  o.gamma_mantissa = 0.1;
  o.gamma_exponent = 0.2;
  mt::quantum_containers qc(o);
  qc.add("a", mt::tensor_class::weight, 100);
  qc.add("b", mt::tensor_class::activation, 300);
  qc.tensors()[1].set_lengths(3, 4);  // 300·(1+3+4) = 2400 bits vs 100·32 = 3200
  const auto footprint = mt::regularizer_weights(qc.tensors(), mt::lambda_rule::footprint_share);
  CHECK(footprint[0] == Approx(3200.0 / 5600));
  CHECK(footprint[1] == Approx(2400.0 / 5600));
  const auto elements = mt::regularizer_weights(qc.tensors(), mt::lambda_rule::element_share);
  CHECK(elements[0] == Approx(0.25));
  CHECK(elements[1] == Approx(0.75));

  // A step with a zero task gradient moves each bitlength by lr·γ·λ.
  qc.begin_step(0);
  std::vector<float> zeros_a(100, 0.0f), zeros_b(300, 0.0f);
  qc.forward(0, zeros_a, true);
  qc.forward(1, zeros_b, true);
  qc.backward(0, zeros_a);
  qc.backward(1, zeros_b);
  qc.end_step();
  CHECK(qc.tensors()[0].mantissa_length() == Approx(23 - 0.5 * 0.1 * 3200.0 / 5600));
  CHECK(qc.tensors()[0].exponent_length() == Approx(8 - 0.5 * 0.2 * 3200.0 / 5600));
  CHECK(qc.tensors()[1].mantissa_length() == Approx(3 - 0.5 * 0.1 * 2400.0 / 5600));
  CHECK(qc.tensors()[1].exponent_length() == Approx(4 - 0.5 * 0.2 * 2400.0 / 5600));

  // Clipped at 0 and at the maximum.
  qc.tensors()[1].set_lengths(-3, 40);
  CHECK(qc.tensors()[1].mantissa_length() == 0);
  CHECK(qc.tensors()[1].exponent_length() == 8);
  CHECK_THROWS_AS(qc.tensors()[1].set_lengths(std::nan(""), 1), std::invalid_argument);

  // Frozen: the update does nothing, and freezing rounded up.
  qc.tensors()[0].set_lengths(2.2, 3.01);
  qc.set_learning(false);
  CHECK(qc.tensors()[0].mantissa_length() == 3);
  CHECK(qc.tensors()[0].exponent_length() == 4);
  qc.begin_step(1);
  qc.end_step();
  CHECK(qc.tensors()[0].mantissa_length() == 3);

  mt::quantum_options bad;
  bad.gamma_exponent = -1;
  CHECK_THROWS_WITH(mt::quantum_containers(bad), Catch::Contains("gamma_exponent"));
  bad = {};
  bad.learning_rate = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(mt::quantum_containers(bad), Catch::Contains("learning_rate"));
}

TEST_CASE("QM alone keeps the exponent at 8 bits; QE alone keeps the mantissa at 23", "[quantum]") {
  mt::quantum_options o;
  o.learn_exponent = false;
  mt::quantum_containers qm(o);
  qm.add("w", mt::tensor_class::weight, 4);
  std::vector<float> v{1, 2, 3, 4};
  for (std::uint64_t s = 0; s < 5; ++s) {
    qm.begin_step(s);
    qm.forward(0, v, true);
    qm.backward(0, v);
    qm.end_step();
  }
  CHECK(qm.tensors()[0].exponent_length() == 8);
  CHECK(qm.tensors()[0].mantissa_length() < 23);
}

TEST_CASE("schedule: learn the first N epochs, then M epochs after each learning-rate change", "[quantum]") {
  mt::bitlength_schedule s(5, 3);
  for (std::size_t e = 0; e < 5; ++e) CHECK(s.learning_in(e));
  for (std::size_t e = 5; e < 20; ++e) CHECK_FALSE(s.learning_in(e));
  s.learning_rate_changed(8);
  CHECK_FALSE(s.learning_in(7));
  CHECK(s.learning_in(8));
  CHECK(s.learning_in(10));
  CHECK_FALSE(s.learning_in(11));
}
