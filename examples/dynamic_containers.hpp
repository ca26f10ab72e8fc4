// dynamic_containers.hpp — the example trainer's dynamic fp32 containers (Schrödinger's FP:
// QM+QE §3.1 and BitWave §3.2, optionally with Gecko §3.3), wired to the example layers'
// rounding hook, and their --dc-* flags. The epoch and step decisions, the options' defaults and
// names are the library's controller (minifloat/training/dynamic_controller.hpp), which
// minifloat.training's DynamicContainers calls too. docs/dynamic-containers.md states the rules;
// `train --help` the flags.
//
// What it quantizes: every weight (P, the `used` copy) and every layer output (Y of modules 1..);
// the input batch (module 0's Y) is data, stored once as bytes, and is neither learned nor
// counted. Gradients (GY, GP) stay fp32: their hooks only run the containers' backward (eq. 8 on
// the value gradient and, while learning, the bitlength gradients). Evaluation quantizes with
// ceil(n) (QM+QE) or BitWave's current container and counts nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <minifloat/training/dynamic_controller.hpp>
#include <minifloat/training/training.hpp>

#include "nn/hooks.hpp"
#include "nn/sequential.hpp"
#include "output_file.hpp"

namespace examples {

namespace mt = minifloat::training;

/// The dynamic containers' options as the --dc-* flags and --assignment set them.
struct dynamic_options {
  /// The controller's options; train sets method, gecko and the seed from --assignment and --seed.
  mt::dynamic_options controller{};
  /// --dc-gecko: the Gecko variant counted when --assignment has +gecko.
  minifloat::storage::gecko_variant gecko_variant = minifloat::storage::gecko_variant::faithful;
  std::string tensor_csv;  ///< per-tensor bitlengths per epoch
};

/// The help group of the --dc-* flags.
inline constexpr std::string_view dynamic_group = "dynamic containers (--assignment qm-qe, qm-qe+gecko, bitwave, bitwave+gecko)";
/// Declares the --dc-* flags on `app`, each writing its field of `o`.
void add_dynamic_flags(CLI::App& app, dynamic_options& o);
/// Whether any --dc-* flag was given.
bool dynamic_flag_given(const CLI::App& app);
/// What the help says about the group after the flags.
extern const std::string_view dynamic_help;

/// Which bits a spread is about: the mantissa, the exponent, or sign + exponent + mantissa.
enum class bit_component : std::uint8_t { mantissa, exponent, total };

/// Mean (element-weighted) and spread over tensors of per-tensor epoch-mean bitlengths.
struct bitlength_spread {
  double mean = 0, min = 0, max = 0;
};

class dynamic_container_hooks final : public nn::rounding_hooks {
 public:
  /// tensor_csv: the opened --dc-tensor-csv (with its header), or none.
  dynamic_container_hooks(const nn::model_description& d, const mt::dynamic_options& o, output_file tensor_csv = {});

  void round(const nn::tensor_site& site, std::span<float> values) override;
  /// Training passes save inputs, draw bitlengths and count; evaluation passes do none of that.
  void set_counting(bool training);

  void begin_epoch(std::size_t epoch, double lr);
  void begin_step(std::uint64_t step);
  void end_step(double batch_loss);
  void end_epoch();

  bool learning() const { return control_.learning(); }
  const mt::container_ledger& epoch_ledger() const { return epoch_; }
  const mt::container_ledger& run_ledger() const { return run_; }
  std::span<const mt::quantum_tensor> tensors() const { return control_.containers().tensors(); }
  std::span<mt::quantum_tensor> tensors() { return control_.containers().tensors(); }  ///< e.g. to preset bitlengths

  /// Over this epoch's steps: per class, the spread of mantissa, exponent and total bits.
  bitlength_spread spread(mt::tensor_class cls, bit_component component) const;
  std::string describe() const;          ///< the setup, for the log
  std::string epoch_line() const;        ///< one indented line after the trainer's epoch line
  static std::string csv_header();       ///< columns appended to the trainer's --csv
  std::string csv_columns() const;
  /// --dc-tensor-csv: the header, and the rows of one epoch (to the file given to the constructor).
  static std::string tensor_csv_header();
  void write_tensor_rows(std::size_t epoch);
  void close_outputs();

 private:
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  mt::dynamic_options options_;
  std::vector<std::size_t> forward_of_;   // site id → tensor index (Y and P), or none
  std::vector<std::size_t> backward_of_;  // site id → tensor index (GY and GP), or none
  mt::dynamic_controller control_;        // built after (and filling) the two maps above
  mt::container_ledger epoch_, run_;
  bool training_ = true;
  output_file tensor_csv_;
};

}  // namespace examples
