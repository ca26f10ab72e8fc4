// minifloat/training/dynamic_controller.hpp — the epoch and step controller of Schrödinger's FP's
// dynamic fp32 containers (Nikolić et al., MLSys 2024, arXiv:2204.13666): §3.1's bitlength
// selection schedule for QM+QE (learn in the first epochs and after each learning-rate change,
// else rounded up and frozen) and §3.2's BitWave (one imposed container, steered by the loss, fixed
// at its average after some epochs); the options' defaults and the names of every option.
//
// The C++ example trainer (examples/dynamic_containers.cpp) and minifloat.training's
// DynamicContainers both drive their containers through this one controller, so one seed and one
// sequence of (epoch, learning rate, step, loss) give the same draws and decisions in both, and a
// default changed here changes in both. The quantization and the learning step themselves are
// quantum.hpp's and bitwave.hpp's; what is stored is counted by container_footprint.hpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "../storage/gecko.hpp"
#include "bitwave.hpp"
#include "container_footprint.hpp"
#include "quantum.hpp"

namespace minifloat::training {

/// Which of the paper's methods sets the containers' widths.
enum class dynamic_method : std::uint8_t {
  quantum,  ///< QM+QE (§3.1): per-tensor bitlengths learned by gradient descent
  bitwave,  ///< BitWave (§3.2): one network-wide container steered by the loss slope
};

/// A name table: each enumerator with the name the trainers' flags and Python's options use.
template <class E>
using named = std::pair<std::string_view, E>;

inline constexpr named<dynamic_method> named_dynamic_methods[] = {
    {"qm-qe", dynamic_method::quantum},
    {"bitwave", dynamic_method::bitwave},
};
inline constexpr named<lambda_rule> named_lambda_rules[] = {
    {"footprint", lambda_rule::footprint_share},
    {"elements", lambda_rule::element_share},
};
inline constexpr named<exponent_gradient> named_exponent_gradients[] = {
    {"exact", exponent_gradient::finite_difference},
    {"linearised", exponent_gradient::linearised},
};
inline constexpr named<sign_rule> named_sign_rules[] = {
    {"omit", sign_rule::omit_when_nonnegative},
    {"always", sign_rule::always},
};
inline constexpr named<storage::gecko_variant> named_gecko_variants[] = {
    {"faithful", storage::gecko_variant::faithful},
    {"improved", storage::gecko_variant::improved},
};

/// The enumerator called `name` in `table`, or nothing when none is.
template <class E, std::size_t N>
constexpr std::optional<E> find_named(const named<E> (&table)[N], std::string_view name) {
  for (const auto& [n, value] : table)
    if (n == name) return value;
  return std::nullopt;
}

/// The name of `value` in `table` ("" when the table has none).
template <class E, std::size_t N>
constexpr std::string_view name_in(const named<E> (&table)[N], E value) {
  for (const auto& [n, v] : table)
    if (v == value) return n;
  return {};
}

/// Every option of the dynamic containers, with the defaults both trainers use.
struct dynamic_options {
  dynamic_method method = dynamic_method::quantum;
  quantum_options quantum{};       ///< QM+QE: γ_m, γ_e, the bitlengths' step, λ rule, exponent gradient, seed
  std::size_t learn_epochs = 5;    ///< QM+QE: bitlengths learn in the first N epochs
  std::size_t relearn_epochs = 5;  ///< … and M epochs after each learning-rate change
  /// An epoch whose starting learning rate is at most this fraction of the rate when the last
  /// learning period began counts as a learning-rate change (a cosine schedule has no steps; 0.1
  /// matches the paper's 10× drops).
  double relearn_lr_factor = 0.1;
  bitwave_options bitwave{};            ///< BitWave: history, threshold, cadence
  std::size_t bitwave_fix_epochs = 5;   ///< fix BitWave's container after this many epochs (0: never)
  /// What the trainers' ledgers count of each stored tensor: its sign bit (omitted for a tensor
  /// without negative values unless `always`) and, when set, its Gecko-encoded exponents (+G).
  sign_rule sign = sign_rule::omit_when_nonnegative;
  std::optional<storage::gecko_variant> gecko;

  void validate() const {
    quantum.validate();
    bitwave.validate();
    if (!(relearn_lr_factor >= 0) || !std::isfinite(relearn_lr_factor))
      throw std::invalid_argument("dynamic_options: relearn_lr_factor = " + std::to_string(relearn_lr_factor) +
                                  " must be finite and >= 0");
  }
};

/// The containers of one network and the decisions of their epochs and steps. A trainer adds a
/// container per tensor, then calls begin_epoch, per step begin_step and (after the backward)
/// end_step, end_epoch, and begin_evaluation before evaluation passes; the containers' forward and
/// backward go through containers().
class dynamic_controller {
 public:
  explicit dynamic_controller(const dynamic_options& options)
      : options_(validated(options)),
        containers_(options.quantum),
        schedule_(options.learn_epochs, options.relearn_epochs),
        bitwave_(options.bitwave) {
    // BitWave imposes its container and learns from the loss alone: no bitlength gradients.
    if (options_.method == dynamic_method::bitwave) containers_.set_learning(false);
  }

  /// A container for a tensor; under BitWave it holds BitWave's current container at once.
  std::size_t add(std::string name, tensor_class cls, std::size_t numel) {
    const std::size_t t = containers_.add(std::move(name), cls, numel);
    if (options_.method == dynamic_method::bitwave) containers_.tensors()[t].impose(bitwave_.current());
    return t;
  }

  const dynamic_options& options() const { return options_; }
  quantum_containers& containers() { return containers_; }
  const quantum_containers& containers() const { return containers_; }
  const training::bitwave& bitwave_state() const { return bitwave_; }

  /// Epoch `epoch` (0-based) starts at learning rate `lr`. QM+QE: the first epoch's rate starts a
  /// learning period; a rate at most relearn_lr_factor times that period's is a learning-rate
  /// change, which starts another; the schedule then says whether bitlengths learn. BitWave: at
  /// epoch bitwave_fix_epochs its container is fixed at its average.
  void begin_epoch(std::size_t epoch, double lr) {
    if (options_.method == dynamic_method::bitwave) {
      if (options_.bitwave_fix_epochs != 0 && epoch == options_.bitwave_fix_epochs && !bitwave_.fixed())
        bitwave_.fix_at_average();
      return;
    }
    if (epoch == 0 || !period_lr_) {
      period_lr_ = lr;
    } else if (lr <= options_.relearn_lr_factor * *period_lr_) {
      schedule_.learning_rate_changed(epoch);
      period_lr_ = lr;
    }
    containers_.set_learning(schedule_.learning_in(epoch));
  }

  /// QM+QE: every tensor's integer bitlengths drawn for `step` (counter-based on the seed);
  /// BitWave: its current container on every tensor.
  void begin_step(std::uint64_t step) {
    if (options_.method == dynamic_method::quantum) containers_.begin_step(step);
    else impose();
  }

  /// After the step's backward: QM+QE's bitlength update, or BitWave's observation of the loss
  /// (its decision is returned; QM+QE returns hold).
  bitwave::decision end_step(double batch_loss) {
    if (options_.method == dynamic_method::bitwave) return bitwave_.observe(batch_loss);
    containers_.end_step();
    return bitwave::decision::hold;
  }

  /// Evaluation passes quantize at ceil(n) (QM+QE) or BitWave's current container.
  void begin_evaluation() {
    if (options_.method == dynamic_method::quantum) containers_.begin_evaluation();
    else impose();
  }

  /// Whether the widths still move: QM+QE learning, or BitWave not yet fixed.
  bool learning() const {
    return options_.method == dynamic_method::quantum ? containers_.learning() : !bitwave_.fixed();
  }

 private:
  static const dynamic_options& validated(const dynamic_options& o) {
    o.validate();
    return o;
  }
  void impose() {
    for (quantum_tensor& t : containers_.tensors()) t.impose(bitwave_.current());
  }

  dynamic_options options_;
  quantum_containers containers_;
  bitlength_schedule schedule_;
  training::bitwave bitwave_;
  std::optional<double> period_lr_;  ///< the learning rate when the current learning period began
};

}  // namespace minifloat::training
