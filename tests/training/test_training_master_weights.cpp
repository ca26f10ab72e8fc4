// FP32 master weights: the optimizer updates the master; refresh() rounds it into the layer's
// working copy through the weight's site (counted in the site's step statistics), in whatever
// format the site has in force — so a promoted weight is refreshed in high precision.
#include <catch2/catch.hpp>

#include <minifloat/minifloat.hpp>
#include <minifloat/training/master_weights.hpp>

#include <vector>

namespace mt = minifloat::training;

TEST_CASE("refresh rounds the master into the working copy and leaves the master exact", "[master_weights]") {
  std::vector<float> layer = {0.3f, -1.7f, 100.0f};
  mt::master_weights w(layer);
  mt::site s("fc.weight", mt::role::weight, 3, {minifloat::fp_6_9_0, minifloat::fp_4_3_4});
  s.set_level(mt::precision::low);

  w.refresh(s);
  CHECK(layer[0] == minifloat::round(0.3f, minifloat::fp_4_3_4));
  CHECK(layer[1] == minifloat::round(-1.7f, minifloat::fp_4_3_4));
  CHECK(layer[2] == 30.0f);  // weights saturate
  CHECK(w.master()[0] == 0.3f);
  CHECK(w.master()[2] == 100.0f);
  CHECK(s.step_stats().values == 3);
  CHECK(s.step_stats().overflows == 1);

  // An SGD update on the master, tiny against fp(4,3,4)'s spacing, survives in fp32.
  for (float& m : w.master()) m -= 1e-4f;
  CHECK(w.master()[0] == 0.3f - 1e-4f);

  s.begin_step(1);
  s.set_level(mt::precision::high);  // e.g. promoted after the last step
  w.refresh(s);
  CHECK(layer[0] == minifloat::round(0.3f - 1e-4f, minifloat::fp_6_9_0));
  CHECK(layer[2] == minifloat::round(100.0f - 1e-4f, minifloat::fp_6_9_0));
  CHECK(s.step_stats().overflows == 0);
}

TEST_CASE("a disabled weight site copies the master unchanged", "[master_weights]") {
  std::vector<float> layer = {0.3f};
  mt::master_weights w(layer);
  mt::site s("w", mt::role::weight, 1);
  s.set_enabled(false);
  w.master()[0] = 0.123456f;
  w.refresh(s);
  CHECK(layer[0] == 0.123456f);
}
