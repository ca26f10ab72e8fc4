// dynamic_containers.hpp — the example trainer's dynamic fp32 containers (Schrödinger's FP:
// QM+QE §3.1 and BitWave §3.2, optionally with Gecko §3.3), wired to the example layers'
// rounding hook. docs/dynamic-containers.md states the rules; `train --help` the flags.
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

#include <minifloat/training/training.hpp>

#include "nn/hooks.hpp"
#include "nn/sequential.hpp"
#include "output_file.hpp"

namespace examples {

namespace mt = minifloat::training;

enum class dynamic_method : std::uint8_t { quantum, bitwave };

struct dynamic_options {
  dynamic_method method = dynamic_method::quantum;
  bool gecko = false;  ///< also count the +G footprints (Gecko-encoded exponents)
  minifloat::storage::gecko_variant gecko_variant = minifloat::storage::gecko_variant::faithful;
  mt::quantum_options quantum{};
  std::size_t learn_epochs = 5;    ///< QM+QE: bitlengths learn in the first N epochs
  std::size_t relearn_epochs = 5;  ///< … and M epochs after each learning-rate change
  /// An epoch whose starting learning rate is at most this fraction of the rate when the last
  /// learning period began counts as a learning-rate change (the cosine schedule has no steps;
  /// 0.1 matches the paper's 10× drops).
  double relearn_lr_factor = 0.1;
  mt::bitwave_options bitwave{};
  std::size_t bitwave_fix_epochs = 5;  ///< fix BitWave's container after this many epochs (0: never)
  mt::sign_rule sign = mt::sign_rule::omit_when_nonnegative;
  std::string tensor_csv;  ///< per-tensor bitlengths per epoch
};

/// The `--dc-*` flags; returns false for a flag that is not one of them, throws
/// std::invalid_argument for a bad value.
bool parse_dynamic_flag(std::string_view flag, std::string_view value, dynamic_options& o);
/// The flags parse_dynamic_flag reads (each takes a value).
inline constexpr std::string_view dynamic_value_flags[] = {
    "--dc-gamma-m",     "--dc-gamma-e",        "--dc-bit-lr",     "--dc-lambda",      "--dc-exponent-gradient",
    "--dc-learn-epochs", "--dc-relearn-epochs", "--dc-relearn-lr-factor", "--dc-bw-history", "--dc-bw-threshold",
    "--dc-bw-cadence",  "--dc-bw-fix-epoch",   "--dc-gecko",      "--dc-sign",        "--dc-tensor-csv"};
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
  dynamic_container_hooks(const nn::model_description& d, const dynamic_options& o, output_file tensor_csv = {});

  void round(const nn::tensor_site& site, std::span<float> values) override;
  /// Training passes save inputs, draw bitlengths and count; evaluation passes do none of that.
  void set_counting(bool training);

  void begin_epoch(std::size_t epoch, double lr);
  void begin_step(std::uint64_t step);
  void end_step(double batch_loss);
  void end_epoch();

  bool learning() const;
  const mt::container_ledger& epoch_ledger() const { return epoch_; }
  const mt::container_ledger& run_ledger() const { return run_; }
  std::span<const mt::quantum_tensor> tensors() const { return containers_.tensors(); }
  std::span<mt::quantum_tensor> tensors() { return containers_.tensors(); }  ///< e.g. to preset bitlengths

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
  dynamic_options options_;
  std::vector<std::size_t> forward_of_;   // site id → tensor index (Y and P), or none
  std::vector<std::size_t> backward_of_;  // site id → tensor index (GY and GP), or none
  mt::quantum_containers containers_;     // built after (and filling) the two maps above
  mt::bitlength_schedule schedule_;
  mt::bitwave bitwave_;
  mt::container_ledger epoch_, run_;
  bool training_ = true;
  double period_lr_ = 0;
  std::size_t epoch_index_ = 0;
  output_file tensor_csv_;
};

}  // namespace examples
