// BitWave (training/bitwave.hpp) on synthetic loss curves: the normalised least-squares slope,
// improving / flat / worsening / noisy losses, the cadence, the clamps, and fixing the container
// at the average seen so far.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include <minifloat/random.hpp>
#include <minifloat/training/bitwave.hpp>

namespace mt = minifloat::training;

TEST_CASE("normalised least-squares slope", "[bitwave]") {
  std::vector<double> line;
  for (int i = 0; i < 10; ++i) line.push_back(3.0 - 0.1 * i);  // mean 2.55
  CHECK(mt::normalised_loss_slope(line) == Approx(-0.1 / 2.55));
  CHECK(mt::normalised_loss_slope(std::vector<double>{2.0, 2.0, 2.0}) == 0.0);
  CHECK(mt::normalised_loss_slope(std::vector<double>{1.0}) == 0.0);
  CHECK(mt::normalised_loss_slope(std::vector<double>{1.0, 3.0}) == Approx(2.0 / 2.0));
}

TEST_CASE("improving loss: one bit less and a narrower range per batch once the history is full", "[bitwave]") {
  mt::bitwave bw({.history = 100, .threshold = 1e-3});
  CHECK(bw.current() == mt::container{23, mt::exponent_range{}});
  for (int i = 0; i < 99; ++i) CHECK(bw.observe(2.0 - 0.005 * i) == mt::bitwave::decision::hold);
  CHECK(bw.mantissa_bits() == 23);
  for (int i = 99; i < 110; ++i) CHECK(bw.observe(2.0 - 0.005 * i) == mt::bitwave::decision::narrower);
  CHECK(bw.mantissa_bits() == 12);
  CHECK(bw.narrowing() == 11);
  CHECK(bw.current().range == mt::exponent_range{false, -115, 116});
  // Keeps going down to the clamps.
  for (int i = 110; i < 350; ++i) (void)bw.observe(2.0 - 0.005 * i);
  CHECK(bw.mantissa_bits() == 0);
  CHECK(bw.narrowing() == 126);
  CHECK(bw.current().exponent_bits() == 1);
}

TEST_CASE("flat loss holds; worsening loss adds bits back", "[bitwave]") {
  mt::bitwave bw({.history = 20, .threshold = 1e-3});
  for (int i = 0; i < 200; ++i) CHECK(bw.observe(1.5) == mt::bitwave::decision::hold);
  CHECK(bw.mantissa_bits() == 23);
  CHECK(bw.narrowing() == 0);

  mt::bitwave down_up({.history = 20, .threshold = 1e-3});
  for (int i = 0; i < 29; ++i) (void)down_up.observe(2.0 - 0.01 * i);  // 10 decisions down
  CHECK(down_up.mantissa_bits() == 13);
  CHECK(down_up.narrowing() == 10);
  // Worsening from where it was: the last 40 windows hold only rising losses.
  for (int i = 0; i < 60; ++i) (void)down_up.observe(1.72 + 0.05 * i);
  CHECK(down_up.mantissa_bits() == 23);
  CHECK(down_up.narrowing() == 0);
  CHECK(down_up.last_slope() > 1e-3);
  // A non-finite loss counts as a worsening.
  mt::bitwave nan_case({.history = 5, .initial_mantissa_bits = 4, .initial_narrowing = 9});
  CHECK(nan_case.observe(std::numeric_limits<double>::quiet_NaN()) == mt::bitwave::decision::wider);
  CHECK(nan_case.mantissa_bits() == 5);
  CHECK(nan_case.narrowing() == 8);
}

TEST_CASE("noisy but flat loss stays within the threshold", "[bitwave]") {
  mt::bitwave bw({.history = 100, .threshold = 1e-3});
  const minifloat::counter_rng rng{42};
  int moves = 0;
  for (int i = 0; i < 2000; ++i) {
    const double noise = (rng.bits32(static_cast<std::uint64_t>(i)) * 0x1p-32 - 0.5) * 0.1;  // ±5 %
    moves += bw.observe(1.0 + noise) != mt::bitwave::decision::hold;
  }
  CHECK(moves == 0);
  // The same noise on a clear downward trend still narrows.
  mt::bitwave trend({.history = 100, .threshold = 1e-3});
  for (int i = 0; i < 150; ++i)
    (void)trend.observe(2.0 - 0.01 * i + (rng.bits32(static_cast<std::uint64_t>(i)) * 0x1p-32 - 0.5) * 0.1);
  CHECK(trend.mantissa_bits() < 23);
}

TEST_CASE("cadence and per-component switches", "[bitwave]") {
  mt::bitwave bw({.history = 100, .threshold = 1e-3, .cadence = 5});
  for (int i = 0; i < 120; ++i) (void)bw.observe(2.0 - 0.005 * i);
  CHECK(bw.mantissa_bits() == 23 - 4);  // 21 batches with a full history: decisions at 5, 10, 15, 20
  mt::bitwave mantissa_only({.history = 10, .adjust_exponent = false});
  for (int i = 0; i < 15; ++i) (void)mantissa_only.observe(2.0 - 0.05 * i);
  CHECK(mantissa_only.mantissa_bits() == 17);
  CHECK(mantissa_only.narrowing() == 0);
  CHECK_THROWS_AS(mt::bitwave({.history = 1}), std::invalid_argument);
  CHECK_THROWS_AS(mt::bitwave({.cadence = 0}), std::invalid_argument);
  CHECK_THROWS_AS(mt::bitwave({.threshold = -1}), std::invalid_argument);
  CHECK_THROWS_AS(mt::bitwave({.initial_mantissa_bits = 24}), std::invalid_argument);
}

TEST_CASE("fix at the average: ceil of the mean mantissa bits, floor of the mean narrowing", "[bitwave]") {
  mt::bitwave bw({.history = 10, .threshold = 1e-3});
  double mantissa_sum = 0, narrowing_sum = 0;
  int batches = 0;
  const auto feed = [&](double loss) {
    mantissa_sum += bw.mantissa_bits();  // the container in force during this batch
    narrowing_sum += bw.narrowing();
    ++batches;
    (void)bw.observe(loss);
  };
  for (int i = 0; i < 30; ++i) feed(2.0 - 0.02 * i);
  for (int i = 0; i < 7; ++i) feed(1.5 + 0.1 * i);
  const double mean_m = mantissa_sum / batches, mean_s = narrowing_sum / batches;
  CHECK(bw.mean_mantissa_bits() == Approx(mean_m));
  CHECK(bw.mean_narrowing() == Approx(mean_s));
  REQUIRE(mean_m != std::floor(mean_m));  // the rounding is visible
  bw.fix_at_average();
  CHECK(bw.fixed());
  CHECK(bw.mantissa_bits() == static_cast<int>(std::ceil(mean_m)));
  CHECK(bw.narrowing() == static_cast<int>(std::floor(mean_s)));
  // Fixed: nothing moves any more.
  for (int i = 0; i < 50; ++i) CHECK(bw.observe(3.0 - 0.05 * i) == mt::bitwave::decision::hold);
  CHECK(bw.mantissa_bits() == static_cast<int>(std::ceil(mean_m)));
}
