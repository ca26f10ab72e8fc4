// Dynamic loss scaling against torch.cuda.amp.GradScaler's rules, step by step: growth after
// growth_interval successful steps, backoff and counter reset on a non-finite gradient (the step
// is skipped), growth that would overflow to Inf is dropped, unscaling by a float 1/scale
// computed in double, and the disabled scaler.
#include <catch2/catch.hpp>

#include <minifloat/training/loss_scale.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace mt = minifloat::training;

namespace {
struct expected_step {
  bool found_inf;
  float scale_after;
  std::int64_t tracker_after;
};

void run(mt::loss_scaler& s, const std::vector<expected_step>& steps) {
  int k = 0;
  for (const auto& e : steps) {
    INFO("step " << ++k);
    s.update(e.found_inf);
    CHECK(s.scale() == e.scale_after);
    CHECK(s.growth_tracker() == e.tracker_after);
  }
}
constexpr float inf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("defaults are GradScaler's: 2^16, x2, x0.5, every 2000 steps", "[loss_scale]") {
  mt::loss_scaler s;
  CHECK(s.scale() == 65536.0f);
  CHECK(s.options().growth_factor == 2.0f);
  CHECK(s.options().backoff_factor == 0.5f);
  CHECK(s.options().growth_interval == 2000);
  for (int i = 0; i < 1999; ++i) s.update(false);
  CHECK(s.scale() == 65536.0f);
  CHECK(s.growth_tracker() == 1999);
  s.update(false);
  CHECK(s.scale() == 131072.0f);
  CHECK(s.growth_tracker() == 0);
}

TEST_CASE("growth every interval of successful steps; a non-finite step backs off and restarts the count", "[loss_scale]") {
  mt::loss_scaler s({8.0f, 2.0f, 0.5f, 3, true});
  run(s, {
             {false, 8.0f, 1},
             {false, 8.0f, 2},
             {false, 16.0f, 0},  // third success in a row: grow
             {true, 8.0f, 0},    // backoff, skip
             {false, 8.0f, 1},
             {true, 4.0f, 0},    // a backoff before the interval resets the count too
             {false, 4.0f, 1},
             {false, 4.0f, 2},
             {false, 8.0f, 0},
             {false, 8.0f, 1},
             {true, 4.0f, 0},
             {true, 2.0f, 0},    // consecutive backoffs compound
         });
}

TEST_CASE("growth interval 1 grows after every successful step", "[loss_scale]") {
  mt::loss_scaler s({1.0f, 2.0f, 0.5f, 1, true});
  run(s, {{false, 2.0f, 0}, {false, 4.0f, 0}, {true, 2.0f, 0}, {false, 4.0f, 0}});
}

TEST_CASE("a growth that would overflow float to inf keeps the scale and still resets the count", "[loss_scale]") {
  const float big = std::ldexp(1.0f, 127);
  mt::loss_scaler s({big, 2.0f, 0.5f, 2, true});
  run(s, {{false, big, 1}, {false, big, 0}, {false, big, 1}, {true, std::ldexp(1.0f, 126), 0}, {false, std::ldexp(1.0f, 126), 1},
          {false, big, 0}});
}

TEST_CASE("unscale checks the scaled gradients, multiplies by 1/scale and decides the step", "[loss_scale]") {
  mt::loss_scaler s({8.0f, 2.0f, 0.5f, 2000, true});
  std::vector<float> g = {8.0f, 16.0f, -4.0f};
  CHECK_FALSE(s.unscale(g));
  CHECK(g == std::vector<float>{1.0f, 2.0f, -0.5f});
  CHECK(s.should_step());
  s.update();
  CHECK(s.growth_tracker() == 1);

  std::vector<float> a = {1.0f, 2.0f};
  std::vector<float> b = {inf, 3.0f};
  std::vector<float> c = {5.0f};
  CHECK_FALSE(s.unscale(a));
  CHECK(s.unscale(b));  // one non-finite tensor...
  CHECK(s.unscale(c));  // ...marks the whole step
  CHECK(std::isinf(b[0]));
  CHECK_FALSE(s.should_step());
  s.update();
  CHECK(s.scale() == 4.0f);
  CHECK(s.growth_tracker() == 0);
  CHECK_FALSE(s.found_inf());  // cleared for the next step
  CHECK(s.should_step());

  std::vector<float> n = {std::numeric_limits<float>::quiet_NaN()};
  CHECK(s.check(n));
  CHECK_FALSE(s.should_step());
}

TEST_CASE("the inverse scale is 1/scale computed in double and rounded to float once", "[loss_scale]") {
  mt::loss_scaler s({3.0f, 2.0f, 0.5f, 10, true});
  CHECK(s.inverse_scale() == static_cast<float>(1.0 / 3.0));
  std::vector<float> g = {3.0f, 0.75f};
  s.unscale(g);
  CHECK(g[0] == 3.0f * static_cast<float>(1.0 / 3.0));
  CHECK(g[1] == 0.75f * static_cast<float>(1.0 / 3.0));
}

TEST_CASE("all_finite spots Inf and NaN anywhere in a span", "[loss_scale]") {
  CHECK(mt::all_finite(std::vector<float>{1.0f, -2.0f, 0.0f}));
  CHECK_FALSE(mt::all_finite(std::vector<float>{1.0f, -inf}));
  CHECK_FALSE(mt::all_finite(std::vector<float>{std::numeric_limits<float>::quiet_NaN()}));
  CHECK(mt::all_finite(std::vector<float>{}));
}

TEST_CASE("a disabled scaler has scale 1, leaves gradients alone and never skips", "[loss_scale]") {
  mt::loss_scaler s({65536.0f, 2.0f, 0.5f, 1, false});
  CHECK(s.scale() == 1.0f);
  std::vector<float> g = {inf, 2.0f};
  CHECK_FALSE(s.unscale(g));
  CHECK(g[1] == 2.0f);
  CHECK(s.should_step());
  s.update(true);
  s.update(false);
  CHECK(s.scale() == 1.0f);
  CHECK(s.growth_tracker() == 0);
}

TEST_CASE("invalid scaler options are rejected", "[loss_scale]") {
  CHECK_THROWS_AS(mt::loss_scaler({0.0f, 2.0f, 0.5f, 1, true}), std::invalid_argument);
  CHECK_THROWS_AS(mt::loss_scaler({inf, 2.0f, 0.5f, 1, true}), std::invalid_argument);
  CHECK_THROWS_AS(mt::loss_scaler({1.0f, 1.0f, 0.5f, 1, true}), std::invalid_argument);
  CHECK_THROWS_AS(mt::loss_scaler({1.0f, 2.0f, 1.0f, 1, true}), std::invalid_argument);
  CHECK_THROWS_AS(mt::loss_scaler({1.0f, 2.0f, 0.5f, 0, true}), std::invalid_argument);
}
