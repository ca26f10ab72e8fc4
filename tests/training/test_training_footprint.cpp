// The low-precision ratio counted in bits over P, Y, GY, GP and the model aggregate, on the
// hand-made MLP (element counts in training/graphs.hpp): demotion, baselines, promotion, the
// fp32 baseline, the per-epoch mean, and agreement with the reference code's formula.
#include <catch2/catch.hpp>

#include <minifloat/training/assignment.hpp>
#include <minifloat/training/footprint.hpp>

#include "training/graphs.hpp"

namespace mt = minifloat::training;

TEST_CASE("all-high: 120 elements x 16 bits, ratio 0", "[footprint]") {
  mt::graph g = test_graphs::mlp();
  const auto f = mt::measure_footprint(g.sites());
  CHECK(f.total_bits == 1920);
  CHECK(f.all_high_bits == 1920);
  CHECK(f.saveable_bits == 960);
  CHECK(f.low_ratio() == 0.0);
}

TEST_CASE("demotion to r = 0.3 saves 33 of 120 elements' 8 bits: ratio 0.275, below r because GP stays high", "[footprint]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::demote_by_size(g, 0.3).levels);  // G1: fc1 Y/GY 12, relu1 Y/GY 12, fc2.weight 9 low
  const auto f = mt::measure_footprint(g.sites());
  CHECK(f.saved_bits == 33 * 8);
  CHECK(f.total_bits == 1920 - 264);
  CHECK(f.low_ratio() == 33.0 / 120.0);
  CHECK(f.low_ratio() < 0.3);
  // The reference code's measure: (all_bit_num - upd_bit_num) / all_bit_num * 2.
  CHECK(f.low_ratio() == Approx(static_cast<double>(f.all_high_bits - f.total_bits) / f.all_high_bits * 2));
}

TEST_CASE("uniform leaves the 27 weight-gradient elements high: ratio 93/120", "[footprint]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::uniform(g));
  const auto f = mt::measure_footprint(g.sites());
  CHECK(f.low_ratio() == 93.0 / 120.0);
  CHECK(f.total_bits == 93 * 8 + 27 * 16);
}

TEST_CASE("operator-based: relu1.Y 6 + fc2.weight 9 + fc2.GY 6 low: ratio 21/120", "[footprint]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::operator_based(g));
  CHECK(mt::measure_footprint(g.sites()).low_ratio() == 21.0 / 120.0);
}

TEST_CASE("fp32: every tensor 32 bits, nothing low", "[footprint]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::uniform(g));
  mt::disable_rounding(g);
  const auto f = mt::measure_footprint(g.sites());
  CHECK(f.total_bits == 120 * 32);
  CHECK(f.low_ratio() == 0.0);
}

TEST_CASE("the epoch mean averages the per-step ratio and aggregate, e.g. across a promotion", "[footprint]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::demote_by_size(g, 0.3).levels);
  mt::footprint_accumulator acc;
  acc.add(mt::measure_footprint(g.sites()));  // 33/120 = 0.275, 1656 bits
  g.at(g.find("fc2.weight")).set_level(mt::precision::high);
  acc.add(mt::measure_footprint(g.sites()));  // 24/120 = 0.2, 1728 bits
  CHECK(acc.steps() == 2);
  CHECK(acc.mean_low_ratio() == Approx(0.2375));
  CHECK(acc.mean_total_bits() == 1692.0);
  acc.reset();
  CHECK(acc.steps() == 0);
  CHECK(acc.mean_low_ratio() == 0.0);
}

TEST_CASE("sites whose candidates are equally wide count in the aggregate but cannot save", "[footprint]") {
  std::vector<mt::site> sites;
  sites.emplace_back("a", mt::role::activation, 10, mt::format_pair{minifloat::binary16, minifloat::binary16});
  sites.emplace_back("b", mt::role::activation, 10, mt::format_pair{minifloat::binary16, minifloat::e5m2});
  sites[0].set_level(mt::precision::low);
  sites[1].set_level(mt::precision::low);
  const auto f = mt::measure_footprint(sites);
  CHECK(f.total_bits == 160 + 80);
  CHECK(f.saveable_bits == 80);
  CHECK(f.low_ratio() == 1.0);
}
