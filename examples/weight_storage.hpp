// weight_storage.hpp — where the example trainer keeps its weights and how it updates them: an
// fp32 master copy, the low-precision weights alone, or the visible low-precision weights plus
// k packed extra mantissa bits with no fp32 copy at all (extra-mantissa-bits paper §3.1), with
// SGD-momentum or AdamW from minifloat/storage/optimizers.hpp, applied after the backward pass
// or fused into it layer by layer (§3.2), with dynamic loss scaling and gradient clipping
// (§4.1). Low-only weights may also be an OCP MX block format (low_block_tensor.hpp: blocks along
// each weight's rows, whole blocks re-quantized per update). docs/no-master-weights.md states
// every rule with a worked example.
//
// A weight_store is the model's parameter_source (θ̂ for each forward: the master copy, or the
// decoded visible codes) and, fused, its gradient_sink (each layer's update as soon as its
// gradients are final, then the gradient is freed). One training step:
//   store.begin_step(lr); net.forward(x, hooks, train, &store);
//   net.backward(dlogits, hooks, store.sink());   // sink() is null unless fused
//   outcome = store.finish_step();  scaler.update();
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <minifloat/block.hpp>
#include <minifloat/format.hpp>
#include <minifloat/storage/low_block_tensor.hpp>
#include <minifloat/storage/low_tensor.hpp>
#include <minifloat/storage/memory_ledger.hpp>
#include <minifloat/storage/optimizers.hpp>
#include <minifloat/storage/split.hpp>
#include <minifloat/training/loss_scale.hpp>

#include "nn/parameter_hooks.hpp"
#include "nn/sequential.hpp"

namespace examples {

enum class weight_mode : std::uint8_t {
  fp32_master,  ///< θ in fp32 (parameter::value); θ̂ rounded from it each forward
  low_only,     ///< θ = the visible codes alone; each update rounds to the visible format
  low_extra,    ///< θ = visible codes + extra_bits packed extra bits (split storage)
};

enum class optimizer_kind : std::uint8_t { sgd, adamw };

/// What a fused update does when a gradient overflows after some layers were already updated.
enum class overflow_policy : std::uint8_t {
  rollback,  ///< journal each layer's stored state before its update; on overflow restore all
  partial,   ///< updates already applied stand; the rest of the step is skipped
};

struct clip_options {
  std::optional<float> value;        ///< clamp every gradient element to [-value, value]
  std::optional<float> tensor_norm;  ///< scale each tensor's gradient to L2 norm <= tensor_norm
  std::optional<float> global_norm;  ///< scale all gradients to a joint L2 norm <= global_norm (unfused only)
};

struct weight_config {
  weight_mode mode = weight_mode::fp32_master;
  minifloat::format visible = minifloat::bfloat16;  ///< low_only, low_extra
  /// low_only: the weights are this OCP MX block format instead of `visible` (blocks along each
  /// weight's rows: out rows of in·kh·kw; a vector is one row). Not NVFP4, not low_extra.
  std::optional<minifloat::block_format> visible_blocks;
  int extra_bits = 16;                               ///< low_extra
  minifloat::storage::split_mode split = minifloat::storage::split_mode::truncate;  ///< low_only: stochastic rounding
  optimizer_kind optimizer = optimizer_kind::sgd;
  double momentum = 0.9;      ///< SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  ///< AdamW
  double weight_decay = 5e-4;  ///< SGD: L2 in the gradient; AdamW: decoupled
  bool fused = false;
  overflow_policy on_overflow = overflow_policy::rollback;
  clip_options clip;
  std::uint64_t seed = 1;  ///< stochastic split / rounding draws

  /// Throws std::invalid_argument naming the first bad field.
  void validate() const;
};

/// What finish_step() did.
/// An update that would store a value the weights' format has no code for (NaN or ±Inf in an
/// all_finite --visible format); the stored weights and optimizer state are as before the step.
struct unstorable_update : std::domain_error {
  using std::domain_error::domain_error;
};

struct step_outcome {
  bool overflow = false;       ///< a non-finite gradient was seen (the loss scaler backs off)
  std::size_t updated = 0;     ///< parameter tensors whose update stands
  std::size_t rolled_back = 0; ///< fused rollback: updates undone
};

class weight_store final : public nn::parameter_source, public nn::gradient_sink {
 public:
  /// Takes the model's initial parameter values; in low_only / low_extra mode they are split or
  /// rounded into the store and each parameter's value is freed. Fused, the gradients are freed
  /// too (the model allocates each layer's before its backward). `ledger` (optional, must
  /// outlive the store) is charged with the store's buffers.
  weight_store(nn::sequential& net, const weight_config& config, minifloat::training::loss_scaler& scaler,
               minifloat::storage::memory_ledger* ledger = nullptr);

  const weight_config& config() const { return config_; }
  /// The gradient sink to give sequential::backward: this store when fused, else null.
  nn::gradient_sink* sink() { return config_.fused ? this : nullptr; }

  void begin_step(double lr);
  /// θ̂ source: p.used = the master value, or the decoded visible codes.
  void load(std::size_t index, nn::parameter& p) override;
  /// Fused: unscale, check, clip and update this layer, then free its gradients.
  void gradients_ready(std::size_t first_index, std::span<nn::parameter> params) override;
  /// Unfused: unscale, check, clip and update every parameter (or skip all on overflow).
  /// Fused: ends the step (on overflow: rollback or partial). Call before scaler.update().
  step_outcome finish_step();

  /// The fp32 values the store holds for parameter `index` (restored from split storage).
  std::vector<float> stored_values(std::size_t index) const;
  std::size_t size() const { return slots_.size(); }

 private:
  using stored = std::variant<std::monostate, minifloat::storage::split_tensor, minifloat::storage::low_tensor,
                              minifloat::storage::low_block_tensor>;
  struct slot {
    nn::parameter* param = nullptr;
    std::string name;  ///< e.g. "fc1.weight" (for messages)
    stored weights;  ///< monostate: the master copy in param->value
    minifloat::storage::sgd_state sgd;
    minifloat::storage::adam_state adam;
    minifloat::storage::ledger_charge weight_bytes, extra_bytes, state_bytes;
  };
  struct journal_entry {
    std::size_t slot = 0;
    nn::float_buffer master;
    stored weights;
    minifloat::storage::sgd_state sgd;
    minifloat::storage::adam_state adam;
    minifloat::storage::ledger_charge bytes;
  };

  void prepare(nn::parameter& p);  // unscale + per-tensor clipping
  void update(slot& s);
  void journal(std::size_t index);
  void roll_back();
  std::size_t state_bytes(const slot& s) const;

  weight_config config_;
  minifloat::training::loss_scaler& scaler_;
  minifloat::storage::memory_ledger* ledger_;
  std::vector<slot> slots_;
  std::vector<journal_entry> journal_;
  double lr_ = 0;
  // The step in progress (fused).
  bool overflow_ = false;
  std::size_t updated_ = 0;
  std::size_t rolled_back_ = 0;
};

/// The rows of the block layout of a parameter of PyTorch shape `s` in a low_block_tensor: its
/// first dimension, or 1 for a vector (bias, batch-norm scale and shift).
std::size_t block_rows(const nn::shape4& s);

/// L2 norm, accumulated in double (what the clipping rules compare with their limits).
double l2_norm(std::span<const float> values);

}  // namespace examples
