// Tensor grouping (docs/semantics.md §3) and size-ordered demotion (Algorithm 1) on hand-made
// graphs: group membership and sizes, decreasing / increasing / seeded random order, ties, the
// r crossing rule, r = 0 and r = 1.
#include <catch2/catch.hpp>

#include <minifloat/training/assignment.hpp>
#include <minifloat/training/grouping.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "training/graphs.hpp"

namespace mt = minifloat::training;

namespace {

std::set<std::string> names_of(const mt::graph& g, const std::vector<mt::site_id>& ids) {
  std::set<std::string> out;
  for (auto s : ids) out.insert(g.at(s).name());
  return out;
}

std::vector<std::uint64_t> sizes_of(const std::vector<mt::tensor_group>& groups) {
  std::vector<std::uint64_t> out;
  for (const auto& grp : groups) out.push_back(grp.size);
  return out;
}

std::set<std::string> low_names(const mt::graph& g, const mt::assignment& a) { return names_of(g, a.low_sites()); }

}  // namespace

TEST_CASE("mlp: a group starts at the input and at every GEMM; weights join the group feeding them", "[grouping]") {
  const mt::graph g = test_graphs::mlp();
  const auto groups = mt::group_tensors(g);
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].name == "x");
  CHECK(groups[1].name == "fc1");
  CHECK(groups[2].name == "fc2");
  CHECK(groups[3].name == "fc3");
  CHECK(names_of(g, groups[0].sites) == std::set<std::string>{"x.Y", "fc1.weight", "fc1.weight.grad"});
  CHECK(names_of(g, groups[1].sites) ==
        std::set<std::string>{"fc1.Y", "fc1.GY", "relu1.Y", "relu1.GY", "fc2.weight", "fc2.weight.grad"});
  CHECK(names_of(g, groups[2].sites) ==
        std::set<std::string>{"fc2.Y", "fc2.GY", "relu2.Y", "relu2.GY", "fc3.weight", "fc3.weight.grad"});
  CHECK(names_of(g, groups[3].sites) == std::set<std::string>{"fc3.Y", "fc3.GY", "loss.Y", "loss.GY"});
  CHECK(sizes_of(groups) == std::vector<std::uint64_t>{32, 42, 36, 10});
  CHECK(mt::total_size(groups) == 120);
  CHECK(groups[1].modules == std::vector<std::size_t>{1, 2});
}

TEST_CASE("cnn: BatchNorm parameters stay with their conv's group, the next conv's weights join it", "[grouping]") {
  const mt::graph g = test_graphs::cnn();
  const auto groups = mt::group_tensors(g);
  REQUIRE(groups.size() == 4);
  CHECK(names_of(g, groups[0].sites) == std::set<std::string>{"x.Y", "conv1.weight", "conv1.weight.grad"});
  CHECK(names_of(g, groups[1].sites) ==
        std::set<std::string>{"conv1.Y", "conv1.GY", "bn1.Y", "bn1.GY", "relu1.Y", "relu1.GY", "pool1.Y", "pool1.GY",
                              "bn1.gamma", "bn1.gamma.grad", "bn1.beta", "bn1.beta.grad", "conv2.weight",
                              "conv2.weight.grad"});
  CHECK(names_of(g, groups[2].sites) ==
        std::set<std::string>{"conv2.Y", "conv2.GY", "bn2.Y", "bn2.GY", "relu2.Y", "relu2.GY", "pool2.Y", "pool2.GY",
                              "bn2.gamma", "bn2.gamma.grad", "bn2.beta", "bn2.beta.grad", "fc.weight",
                              "fc.weight.grad"});
  CHECK(names_of(g, groups[3].sites) == std::set<std::string>{"fc.Y", "fc.GY", "loss.Y", "loss.GY"});
  CHECK(sizes_of(groups) == std::vector<std::uint64_t>{68, 568, 248, 14});
}

TEST_CASE("every site lands in exactly one group", "[grouping]") {
  for (const mt::graph& g : {test_graphs::mlp(), test_graphs::cnn(), test_graphs::ties()}) {
    std::vector<int> seen(g.sites().size(), 0);
    for (const auto& grp : mt::group_tensors(g))
      for (auto s : grp.sites) ++seen[s];
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("a branch input sends a module's parameters to the group of the module named as its input", "[grouping]") {
  mt::graph g;
  g.add_input("x", 4);
  g.add_module("fc1", mt::module_kind::gemm, 4);
  g.add_module("fc2", mt::module_kind::gemm, 4);
  const auto side = g.add_module("side_bn", mt::module_kind::other, 4, true, std::size_t{1});  // reads fc1's output
  g.add_parameter(side, "gamma", 2);
  const auto groups = mt::group_tensors(g);
  REQUIRE(groups.size() == 3);
  CHECK(names_of(g, groups[1].sites) == std::set<std::string>{"fc1.Y", "fc1.GY", "side_bn.gamma", "side_bn.gamma.grad"});
  CHECK(names_of(g, groups[2].sites) == std::set<std::string>{"fc2.Y", "fc2.GY", "side_bn.Y", "side_bn.GY"});
  CHECK_THROWS_AS(g.add_module("bad", mt::module_kind::other, 1, true, std::size_t{99}), std::invalid_argument);
}

TEST_CASE("decreasing order demotes the largest group first and stops once the share reaches r", "[demotion]") {
  const mt::graph g = test_graphs::mlp();  // sizes 32, 42, 36, 10 of 120
  const auto groups = mt::group_tensors(g);
  CHECK(mt::demotion_sequence(groups, mt::demotion_order::decreasing) == std::vector<std::size_t>{1, 2, 0, 3});

  struct row {
    double r;
    std::vector<std::size_t> demoted;
    double share;
  };
  // The group whose demotion crosses r is included: r = 0.3 takes G1 (42/120 = 0.35).
  const std::vector<row> rows = {
      {0.0, {}, 0.0},
      {0.01, {1}, 42.0 / 120},
      {0.3, {1}, 42.0 / 120},
      {0.35, {1}, 42.0 / 120},  // exactly reached: no further group
      {0.36, {1, 2}, 78.0 / 120},
      {0.65, {1, 2}, 78.0 / 120},
      {0.66, {1, 2, 0}, 110.0 / 120},
      {0.95, {1, 2, 0, 3}, 1.0},
      {1.0, {1, 2, 0, 3}, 1.0},
  };
  for (const row& rw : rows) {
    INFO("r = " << rw.r);
    const auto res = mt::demote_by_size(g, groups, rw.r);
    CHECK(res.groups_demoted == rw.demoted);
    CHECK(res.demoted_share == rw.share);
  }
}

TEST_CASE("demotion sets Y and P to the forward low format, GY to the backward one, and keeps GP high", "[demotion]") {
  mt::graph g = test_graphs::mlp();
  const auto res = mt::demote_by_size(g, 0.3);
  CHECK(low_names(g, res.levels) ==
        std::set<std::string>{"fc1.Y", "fc1.GY", "relu1.Y", "relu1.GY", "fc2.weight"});
  mt::apply(g, res.levels);
  CHECK(g.at(g.find("fc1.Y")).current_format() == minifloat::fp_4_3_4);
  CHECK(g.at(g.find("fc2.weight")).current_format() == minifloat::fp_4_3_4);
  CHECK(g.at(g.find("relu1.GY")).current_format() == minifloat::fp_5_2_0);
  CHECK(g.at(g.find("fc2.weight.grad")).current_format() == minifloat::fp_6_9_0);
  CHECK(g.at(g.find("fc2.Y")).current_format() == minifloat::fp_6_9_0);
}

TEST_CASE("r = 0 is all-high and r = 1 is uniform", "[demotion]") {
  for (const mt::graph& g : {test_graphs::mlp(), test_graphs::cnn(), test_graphs::ties()}) {
    CHECK(mt::demote_by_size(g, 0.0).levels.level == mt::all_high(g).level);
    CHECK(mt::demote_by_size(g, 1.0).levels.level == mt::uniform(g).level);
  }
}

TEST_CASE("ties keep the earlier group first in both orders", "[demotion]") {
  const mt::graph g = test_graphs::ties();  // sizes 10, 20, 20, 5 of 55
  const auto groups = mt::group_tensors(g);
  REQUIRE(sizes_of(groups) == std::vector<std::uint64_t>{10, 20, 20, 5});
  CHECK(mt::demotion_sequence(groups, mt::demotion_order::decreasing) == std::vector<std::size_t>{1, 2, 0, 3});
  CHECK(mt::demotion_sequence(groups, mt::demotion_order::increasing) == std::vector<std::size_t>{3, 0, 1, 2});
  CHECK(mt::demote_by_size(g, groups, 0.3).groups_demoted == std::vector<std::size_t>{1});     // 20/55
  CHECK(mt::demote_by_size(g, groups, 0.4).groups_demoted == std::vector<std::size_t>{1, 2});  // 40/55
}

TEST_CASE("increasing order demotes the smallest groups first", "[demotion]") {
  const mt::graph g = test_graphs::mlp();  // sizes 32, 42, 36, 10
  const auto groups = mt::group_tensors(g);
  CHECK(mt::demotion_sequence(groups, mt::demotion_order::increasing) == std::vector<std::size_t>{3, 0, 2, 1});
  const auto res = mt::demote_by_size(g, groups, 0.3, mt::demotion_order::increasing);
  CHECK(res.groups_demoted == std::vector<std::size_t>{3, 0});  // 10/120 < 0.3, then 42/120 >= 0.3
  CHECK(res.demoted_share == 42.0 / 120);
  CHECK(low_names(g, res.levels) ==
        std::set<std::string>{"fc3.Y", "fc3.GY", "loss.Y", "loss.GY", "x.Y", "fc1.weight"});
}

TEST_CASE("random order is a seeded permutation: reproducible, seed-dependent, and demotion follows it", "[demotion]") {
  const mt::graph g = test_graphs::mlp();
  const auto groups = mt::group_tensors(g);
  std::map<std::vector<std::size_t>, int> seen;
  std::vector<int> first(groups.size(), 0);
  constexpr int seeds = 4800;
  for (std::uint64_t seed = 0; seed < seeds; ++seed) {
    const auto seq = mt::demotion_sequence(groups, mt::demotion_order::random, seed);
    auto sorted = seq;
    std::sort(sorted.begin(), sorted.end());
    REQUIRE(sorted == std::vector<std::size_t>{0, 1, 2, 3});
    ++seen[seq];
    ++first[seq[0]];
  }
  CHECK(seen.size() == 24);  // every permutation of 4 groups occurs
  for (int n : first) CHECK(std::abs(n - seeds / 4) < seeds / 4 / 10);

  const auto seq = mt::demotion_sequence(groups, mt::demotion_order::random, 7);
  CHECK(mt::demotion_sequence(groups, mt::demotion_order::random, 7) == seq);
  const auto res = mt::demote_by_size(g, groups, 0.5, mt::demotion_order::random, 7);
  // The demoted groups are the shortest prefix of the sequence whose share reaches 0.5.
  std::uint64_t acc = 0;
  std::vector<std::size_t> prefix;
  for (auto k : seq) {
    if (acc * 2 >= 120) break;
    prefix.push_back(k);
    acc += groups[k].size;
  }
  CHECK(res.groups_demoted == prefix);
}

TEST_CASE("r outside [0, 1] is rejected", "[demotion]") {
  const mt::graph g = test_graphs::mlp();
  CHECK_THROWS_AS(mt::demote_by_size(g, -0.1), std::invalid_argument);
  CHECK_THROWS_AS(mt::demote_by_size(g, 1.5), std::invalid_argument);
}
