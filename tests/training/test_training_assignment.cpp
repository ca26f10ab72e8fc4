// The baseline precision assignments of the precision-assignment paper (§3.1, eq. 2) on the
// hand-made MLP and CNN: all-high, uniform, operator-based and its variant, with the low sets
// derived by hand; and apply() / disable_rounding() on the sites.
#include <catch2/catch.hpp>

#include <minifloat/training/assignment.hpp>

#include <set>
#include <string>

#include "training/graphs.hpp"

namespace mt = minifloat::training;

namespace {
std::set<std::string> low_names(const mt::graph& g, const mt::assignment& a) {
  std::set<std::string> out;
  for (auto s : a.low_sites()) out.insert(g.at(s).name());
  return out;
}
std::set<std::string> all_names_except_weight_grads(const mt::graph& g) {
  std::set<std::string> out;
  for (const auto& s : g.sites())
    if (s.kind() != mt::role::weight_gradient) out.insert(s.name());
  return out;
}
}  // namespace

TEST_CASE("all-high puts nothing low", "[assignment]") {
  const mt::graph g = test_graphs::cnn();
  CHECK(mt::all_high(g).low_sites().empty());
}

TEST_CASE("uniform puts every tensor low except the weight gradients the paper keeps high", "[assignment]") {
  for (const mt::graph& g : {test_graphs::mlp(), test_graphs::cnn()}) CHECK(low_names(g, mt::uniform(g)) == all_names_except_weight_grads(g));
}

TEST_CASE("uniform puts weight gradients low too when the candidates allow it", "[assignment]") {
  mt::precision_candidates c;
  c.weight_gradients_stay_high = false;
  mt::graph g(c);
  g.add_input("x", 2);
  const auto fc = g.add_module("fc", mt::module_kind::gemm, 2);
  g.add_parameter(fc, "weight", 4);
  CHECK(low_names(g, mt::uniform(g)) == std::set<std::string>{"x.Y", "fc.Y", "fc.GY", "fc.weight", "fc.weight.grad"});
}

TEST_CASE("mlp operator-based: only the middle GEMM's input activation, weights and output gradient", "[assignment]") {
  const mt::graph g = test_graphs::mlp();
  CHECK(low_names(g, mt::operator_based(g)) == std::set<std::string>{"relu1.Y", "fc2.weight", "fc2.GY"});
}

TEST_CASE("mlp operator-based variant adds the middle GEMM's output and input gradient", "[assignment]") {
  const mt::graph g = test_graphs::mlp();
  CHECK(low_names(g, mt::operator_based_variant(g)) ==
        std::set<std::string>{"relu1.Y", "fc2.weight", "fc2.GY", "fc2.Y", "relu1.GY"});
}

TEST_CASE("cnn operator-based and variant: conv2 is the only GEMM that is neither first nor last", "[assignment]") {
  const mt::graph g = test_graphs::cnn();
  CHECK(low_names(g, mt::operator_based(g)) == std::set<std::string>{"pool1.Y", "conv2.weight", "conv2.GY"});
  CHECK(low_names(g, mt::operator_based_variant(g)) ==
        std::set<std::string>{"pool1.Y", "conv2.weight", "conv2.GY", "conv2.Y", "pool1.GY"});
}

TEST_CASE("operator-based with two GEMMs or fewer leaves everything high", "[assignment]") {
  mt::graph g;
  g.add_input("x", 2);
  g.add_module("fc1", mt::module_kind::gemm, 2);
  g.add_module("relu", mt::module_kind::other, 2);
  g.add_module("fc2", mt::module_kind::gemm, 2);
  CHECK(mt::operator_based(g).low_sites().empty());
  CHECK(mt::operator_based_variant(g).low_sites().empty());
}

TEST_CASE("apply gives each site its role's candidates and level; disable_rounding turns every site off", "[assignment]") {
  mt::graph g = test_graphs::mlp();
  mt::apply(g, mt::operator_based(g));
  CHECK(g.at(g.find("relu1.Y")).current_format() == minifloat::fp_4_3_4);
  CHECK(g.at(g.find("fc2.GY")).current_format() == minifloat::fp_5_2_0);
  CHECK(g.at(g.find("fc2.Y")).current_format() == minifloat::fp_6_9_0);
  CHECK(g.at(g.find("fc2.Y")).bits_per_element() == 16);
  CHECK(g.at(g.find("fc2.weight")).bits_per_element() == 8);
  mt::disable_rounding(g);
  for (const auto& s : g.sites()) {
    CHECK_FALSE(s.enabled());
    CHECK(s.bits_per_element() == 32);
  }
  mt::apply(g, mt::all_high(g));
  for (const auto& s : g.sites()) CHECK(s.enabled());
  CHECK_THROWS_AS(mt::apply(g, mt::assignment{}), std::invalid_argument);
}
