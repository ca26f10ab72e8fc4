// Overflow-driven precision promotion (§4.2, docs/semantics.md §2): the threshold compares
// with >=, only low forward tensors are promoted, only the overflowing tensor, permanently, and
// every promotion is logged with its step, site and ratio.
#include <catch2/catch.hpp>

#include <minifloat/training/assignment.hpp>
#include <minifloat/training/promotion.hpp>

#include <vector>

#include "training/graphs.hpp"

namespace mt = minifloat::training;

namespace {
/// Applies `n` values to site `s`, `overflowing` of them above every low format's threshold.
void feed(mt::site& s, int n, int overflowing) {
  std::vector<float> v(static_cast<std::size_t>(n), 0.5f);
  for (int i = 0; i < overflowing; ++i) v[static_cast<std::size_t>(i)] = 1.0e6f;
  s.apply(v);
}
}  // namespace

TEST_CASE("a ratio equal to theta promotes, one just below does not", "[promotion]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::uniform(g));
  mt::site& a = g.at(g.find("fc1.Y"));
  mt::site& b = g.at(g.find("relu1.Y"));
  feed(a, 4, 1);  // 0.25
  feed(b, 5, 1);  // 0.2
  mt::overflow_promotion promo(0.25);
  CHECK(promo.promote(g.sites(), 0) == 1);
  CHECK(a.level() == mt::precision::high);
  CHECK(b.level() == mt::precision::low);
}

TEST_CASE("gradients are never promoted, whatever their overflow ratio", "[promotion]") {
  mt::precision_candidates c;
  c.weight_gradients_stay_high = false;
  mt::graph g(c);
  g.add_input("x", 2);
  const auto fc = g.add_module("fc", mt::module_kind::gemm, 2);
  g.add_parameter(fc, "weight", 2);
  mt::apply(g, mt::uniform(g));
  for (auto name : {"fc.GY", "fc.weight.grad"}) {
    REQUIRE(g.at(g.find(name)).is_low());
    feed(g.at(g.find(name)), 2, 2);
  }
  mt::overflow_promotion promo;
  CHECK(promo.promote(g.sites(), 0) == 0);
  CHECK(g.at(g.find("fc.GY")).is_low());
  CHECK(g.at(g.find("fc.weight.grad")).is_low());
  CHECK(promo.log().empty());
}

TEST_CASE("weights and activations in low precision are promoted; high or disabled ones are not", "[promotion]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::operator_based(g));  // relu1.Y, fc2.weight, fc2.GY low
  feed(g.at(g.find("fc2.weight")), 10, 1);
  feed(g.at(g.find("relu1.Y")), 10, 0);
  std::vector<float> huge = {1.0e10f};  // overflows even fp(6,9,0), but fc2.Y is already high
  g.at(g.find("fc2.Y")).apply(huge);
  CHECK(g.at(g.find("fc2.Y")).overflow_ratio() == 1.0);

  mt::overflow_promotion promo(0.1);
  CHECK(promo.promote(g.sites(), 12) == 1);
  CHECK(g.at(g.find("fc2.weight")).level() == mt::precision::high);
  CHECK(g.at(g.find("relu1.Y")).is_low());  // only the overflowing tensor, not its neighbours
  CHECK(g.at(g.find("fc2.GY")).is_low());

  mt::site& off = g.at(g.find("relu1.Y"));
  off.set_enabled(false);
  std::vector<float> v = {1.0e6f};
  off.apply(v);
  CHECK_FALSE(promo.qualifies(off));
}

TEST_CASE("promotion is permanent and logged once with step, name and ratio", "[promotion]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::uniform(g));
  mt::overflow_promotion promo;  // theta 0.01
  CHECK(promo.theta() == 0.01);

  g.begin_step(0);
  feed(g.at(g.find("relu2.Y")), 100, 1);  // exactly 0.01
  feed(g.at(g.find("fc3.weight")), 200, 1);  // 0.005
  CHECK(promo.promote(g.sites(), 0) == 1);

  g.begin_step(1);
  feed(g.at(g.find("fc3.weight")), 50, 1);  // 0.02
  feed(g.at(g.find("relu2.Y")), 100, 0);
  CHECK(promo.promote(g.sites(), 1) == 1);

  for (std::uint64_t step = 2; step < 5; ++step) {
    g.begin_step(step);
    feed(g.at(g.find("relu2.Y")), 10, 10);  // high now: rounded to fp(6,9,0), no overflow there
    CHECK(promo.promote(g.sites(), step) == 0);
  }
  CHECK(g.at(g.find("relu2.Y")).level() == mt::precision::high);
  CHECK(g.at(g.find("fc3.weight")).level() == mt::precision::high);
  REQUIRE(promo.log().size() == 2);
  CHECK(promo.log()[0].step == 0);
  CHECK(promo.log()[0].site == "relu2.Y");
  CHECK(promo.log()[0].overflow_ratio == 0.01);
  CHECK(promo.log()[1].step == 1);
  CHECK(promo.log()[1].site == "fc3.weight");
  CHECK(promo.log()[1].overflow_ratio == 0.02);
}

TEST_CASE("a site that rounded nothing this step is not promoted even with theta 0", "[promotion]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::uniform(g));
  mt::overflow_promotion promo(0.0);
  CHECK(promo.promote(g.sites(), 0) == 0);
  feed(g.at(g.find("x.Y")), 3, 0);
  CHECK(promo.promote(g.sites(), 0) == 1);  // with values, ratio 0 >= 0
}

TEST_CASE("theta outside [0, 1] is rejected", "[promotion]") {
  CHECK_THROWS_AS(mt::overflow_promotion(-0.5), std::invalid_argument);
  CHECK_THROWS_AS(mt::overflow_promotion(2.0), std::invalid_argument);
}
