// The dynamic containers' controller (training/dynamic_controller.hpp) and the per-parameter seed
// rule (training/parameter_seed.hpp). The draws, decisions and seeds below are committed: the
// Python test (python/tests/test_training_dynamic.py) checks the same numbers through the binding
// and through minifloat.training.DynamicContainers, so both trainers make the same ones.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <vector>

#include <minifloat/training/dynamic_controller.hpp>
#include <minifloat/training/parameter_seed.hpp>

namespace mt = minifloat::training;

TEST_CASE("parameter_seed folds the parameter's index into the run seed", "[dynamic_controller]") {
  // The committed values the Python test also checks.
  STATIC_REQUIRE(mt::parameter_seed(1, 0) == 0x630842168870933cULL);
  STATIC_REQUIRE(mt::parameter_seed(1, 1) == 0x89fefd02fb65d1d6ULL);
  STATIC_REQUIRE(mt::parameter_seed(42, 2) == 0x014dc37469f5f66eULL);
  for (std::uint64_t seed : {0ULL, 1ULL, 42ULL, ~0ULL})
    for (std::uint64_t i = 0; i < 8; ++i) {
      REQUIRE(mt::parameter_seed(seed, i) == minifloat::fold_seed(seed, i));
      REQUIRE(mt::parameter_seed(seed, i) != mt::parameter_seed(seed, i + 1));
    }
}

TEST_CASE("QM+QE learns in the first epochs and again after each tenfold drop of the learning rate",
          "[dynamic_controller]") {
  mt::dynamic_options o;
  o.learn_epochs = 2;
  o.relearn_epochs = 1;
  mt::dynamic_controller c(o);
  c.add("w", mt::tensor_class::weight, 4);
  // 0.004 <= 0.1 x 0.05 starts a period at epoch 2; 0.003 > 0.1 x 0.004 does not; 0.0003 does.
  const std::array<double, 5> lr{0.05, 0.04, 0.004, 0.003, 0.0003};
  const std::array<bool, 5> learning{true, true, true, false, true};
  for (std::size_t e = 0; e < lr.size(); ++e) {
    c.begin_epoch(e, lr[e]);
    CAPTURE(e);
    REQUIRE(c.learning() == learning[e]);
  }
}

TEST_CASE("freezing rounds the learned bitlengths up", "[dynamic_controller]") {
  mt::dynamic_options o;
  o.learn_epochs = 1;
  mt::dynamic_controller c(o);
  c.add("w", mt::tensor_class::weight, 4);
  c.begin_epoch(0, 0.1);
  c.containers().tensors()[0].set_lengths(10.25, 4.5);
  c.begin_epoch(1, 0.1);
  REQUIRE_FALSE(c.learning());
  REQUIRE(c.containers().tensors()[0].mantissa_length() == 11.0);
  REQUIRE(c.containers().tensors()[0].exponent_length() == 5.0);
}

TEST_CASE("QM+QE's per-step draws depend only on the seed, the tensor and the step", "[dynamic_controller]") {
  mt::dynamic_options o;
  o.quantum.seed = 7;
  mt::dynamic_controller c(o);
  c.add("a", mt::tensor_class::weight, 4);
  c.add("b", mt::tensor_class::activation, 4);
  c.containers().tensors()[0].set_lengths(10.5, 4.25);
  c.containers().tensors()[1].set_lengths(3.75, 6.5);
  // (k_m, k_e) of tensor a, then of b, at steps 0..7: committed, checked by the Python test too.
  const std::vector<std::array<int, 4>> draws{{10, 4, 4, 7}, {11, 5, 3, 7}, {10, 4, 3, 6}, {11, 4, 4, 7},
                                              {10, 5, 3, 7}, {10, 4, 4, 7}, {11, 4, 4, 6}, {10, 4, 4, 7}};
  for (std::uint64_t step = 0; step < draws.size(); ++step) {
    c.begin_step(step);
    const auto t = c.containers().tensors();
    CAPTURE(step);
    REQUIRE(std::array{t[0].mantissa_bits(), t[0].exponent_bits(), t[1].mantissa_bits(), t[1].exponent_bits()} ==
            draws[step]);
  }
  c.begin_evaluation();  // ceil(n)
  REQUIRE(c.containers().tensors()[0].mantissa_bits() == 11);
  REQUIRE(c.containers().tensors()[1].exponent_bits() == 7);
}

TEST_CASE("BitWave narrows on a falling loss, widens on a rising one and is fixed at its average",
          "[dynamic_controller]") {
  mt::dynamic_options o;
  o.method = mt::dynamic_method::bitwave;
  o.bitwave.history = 4;
  o.bitwave_fix_epochs = 1;
  mt::dynamic_controller c(o);
  c.add("w", mt::tensor_class::weight, 4);
  REQUIRE(c.containers().tensors()[0].mantissa_bits() == 23);  // BitWave's container from the start
  REQUIRE_FALSE(c.containers().learning());                   // no bitlength gradients
  const std::array<double, 12> losses{2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.5, 1.5, 1.6, 1.7, 1.8, 1.9};
  // (decision, mantissa bits, narrowing) after each step: committed, checked by the Python test too.
  const std::array<std::array<int, 3>, 12> after{{{0, 23, 0}, {0, 23, 0}, {0, 23, 0}, {-1, 22, 1}, {-1, 21, 2}, {-1, 20, 3},
                                                  {-1, 19, 4}, {-1, 18, 5}, {1, 19, 4}, {1, 20, 3}, {1, 21, 2}, {1, 22, 1}}};
  c.begin_epoch(0, 0.1);
  for (std::size_t k = 0; k < losses.size(); ++k) {
    c.begin_step(k);
    REQUIRE(c.containers().tensors()[0].mantissa_bits() == (k ? after[k - 1][1] : 23));
    const int decision = static_cast<int>(c.end_step(losses[k]));
    CAPTURE(k);
    REQUIRE(std::array{decision, c.bitwave_state().mantissa_bits(), c.bitwave_state().narrowing()} == after[k]);
  }
  REQUIRE(c.learning());
  c.begin_epoch(1, 0.1);
  REQUIRE_FALSE(c.learning());
  REQUIRE(c.bitwave_state().mantissa_bits() == 21);
  REQUIRE(c.bitwave_state().narrowing() == 2);
}

TEST_CASE("every dynamic option's name reads back to its enumerator", "[dynamic_controller]") {
  STATIC_REQUIRE(mt::find_named(mt::named_dynamic_methods, "bitwave") == mt::dynamic_method::bitwave);
  STATIC_REQUIRE(mt::find_named(mt::named_lambda_rules, "elements") == mt::lambda_rule::element_share);
  STATIC_REQUIRE(mt::find_named(mt::named_exponent_gradients, "linearised") == mt::exponent_gradient::linearised);
  STATIC_REQUIRE(mt::find_named(mt::named_sign_rules, "always") == mt::sign_rule::always);
  STATIC_REQUIRE(mt::find_named(mt::named_gecko_variants, "improved") == minifloat::storage::gecko_variant::improved);
  STATIC_REQUIRE(!mt::find_named(mt::named_sign_rules, "never"));
  for (const auto& [name, value] : mt::named_exponent_gradients) REQUIRE(mt::name_in(mt::named_exponent_gradients, value) == name);
  for (const auto& [name, value] : mt::named_lambda_rules) REQUIRE(mt::name_in(mt::named_lambda_rules, value) == name);
}

TEST_CASE("dynamic_options refuses a negative or non-finite relearn factor", "[dynamic_controller]") {
  mt::dynamic_options o;
  o.relearn_lr_factor = -1;
  REQUIRE_THROWS_WITH(mt::dynamic_controller(o), Catch::Contains("relearn_lr_factor"));
  o.relearn_lr_factor = 0.1;
  o.bitwave.history = 1;
  REQUIRE_THROWS_WITH(mt::dynamic_controller(o), Catch::Contains("history"));
}
