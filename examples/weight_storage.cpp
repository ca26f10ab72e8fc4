#include "weight_storage.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <minifloat/random.hpp>
#include <minifloat/training/parameter_seed.hpp>

namespace examples {

namespace ms = minifloat::storage;
using ms::memory_category;

namespace {

std::invalid_argument config_error(const std::string& what) {
  return std::invalid_argument("examples::weight_config: " + what);
}

void check_limit(const std::optional<float>& limit, const char* field) {
  if (limit && !(*limit > 0.0f && std::isfinite(*limit)))
    throw config_error(std::string(field) + " must be positive and finite");
}

/// Bytes of the stored weight (visible codes or master) and of the extra bits.
std::pair<std::size_t, std::size_t> stored_bytes(const ms::split_tensor& t) {
  return {t.visible().words().size() * sizeof(std::uint32_t), t.extra().words().size() * sizeof(std::uint32_t)};
}
std::pair<std::size_t, std::size_t> stored_bytes(const ms::low_tensor& t) {
  return {t.codes().words().size() * sizeof(std::uint32_t), 0};
}
std::pair<std::size_t, std::size_t> stored_bytes(const ms::low_block_tensor& t) { return {t.bytes(), 0}; }
std::pair<std::size_t, std::size_t> stored_bytes(const std::monostate&) { return {0, 0}; }  // the nn buffer counts itself

double sum_of_squares(std::span<const float> values) {
  double sum = 0;
  for (float v : values) sum += static_cast<double>(v) * v;
  return sum;
}

/// torch.nn.utils.clip_grad_norm_: the gradients' factor max / (norm + 1e-6) when that is below
/// 1, else none (1).
double clip_factor(float max_norm, double norm) { return std::min(1.0, static_cast<double>(max_norm) / (norm + 1e-6)); }

void scale(std::span<float> values, double factor) {
  if (factor < 1.0)
    for (float& g : values) g *= static_cast<float>(factor);
}

}  // namespace

void weight_config::validate() const {
  if (visible_blocks) {
    if (const std::string p = visible_blocks->problem(); !p.empty()) throw config_error("visible_blocks: " + p);
    if (mode == weight_mode::fp32_master) throw config_error("visible_blocks applies to low_only only");
    if (mode == weight_mode::low_extra)
      throw config_error("visible_blocks: low_extra keeps extra bits below a fixed per-element grid, and a block's "
                         "grid moves whenever its scale does (use low_only)");
    if (visible_blocks->scaling != minifloat::block_scaling::e8m0)
      throw config_error("visible_blocks: " + minifloat::to_string(*visible_blocks) +
                         " has a per-tensor scale from the whole updated tensor's amax, unknown to a chunked update "
                         "without an fp32 copy (use an MX format)");
  } else if (mode != weight_mode::fp32_master) {
    if (const std::string p = minifloat::source_problem<float>(visible); !p.empty()) throw config_error("visible: " + p);
    if (visible.bit_width() > 32) throw config_error("visible: codes wider than 32 bits");
  }
  if (mode == weight_mode::low_extra) {
    if (const std::string p = ms::split_layout{visible, extra_bits, split}.problem(); !p.empty())
      throw config_error("extra_bits: " + p);
  }
  check_limit(clip.value, "clip.value");
  check_limit(clip.tensor_norm, "clip.tensor_norm");
  check_limit(clip.global_norm, "clip.global_norm");
  if (fused && clip.global_norm)
    throw config_error("clip.global_norm needs every gradient at once, which a fused update never holds "
                       "(use clip.value or clip.tensor_norm)");
  if (optimizer == optimizer_kind::sgd) ms::sgd_options{0, momentum, 0, weight_decay}.validate();
  else ms::adam_options{0, beta1, beta2, eps, weight_decay, true}.validate();
}

std::size_t block_rows(const nn::shape4& s) { return s.sample_numel() > 1 ? s.n : 1; }

double l2_norm(std::span<const float> values) { return std::sqrt(sum_of_squares(values)); }

weight_store::weight_store(nn::sequential& net, const weight_config& config, minifloat::training::loss_scaler& scaler,
                           ms::memory_ledger* ledger)
    : config_(config), scaler_(scaler), ledger_(ledger) {
  config_.validate();
  const auto params = net.parameters();
  slots_.resize(params.size());
  std::vector<std::string> names;
  for (const nn::module_info& m : net.describe(1).modules)
    for (const nn::parameter_info& p : m.parameters) names.push_back(m.name + "." + p.name);
  const auto rounding = config_.split == ms::split_mode::stochastic ? minifloat::rounding::stochastic
                                                                    : minifloat::rounding::nearest_even;
  for (std::size_t i = 0; i < params.size(); ++i) {
    slot& s = slots_[i];
    nn::parameter& p = *params[i];
    s.param = &p;
    s.name = i < names.size() ? names[i] : p.name;
    // Each tensor its own stream of stochastic draws.
    const std::uint64_t seed = minifloat::training::parameter_seed(config_.seed, i);
    if (config_.mode == weight_mode::low_extra)
      s.weights.emplace<ms::split_tensor>(p.value, ms::split_layout{config_.visible, config_.extra_bits, config_.split}, seed);
    else if (config_.mode == weight_mode::low_only && config_.visible_blocks)
      s.weights.emplace<ms::low_block_tensor>(p.value, *config_.visible_blocks, block_rows(p.shape), rounding, seed);
    else if (config_.mode == weight_mode::low_only)
      s.weights.emplace<ms::low_tensor>(p.value, config_.visible, rounding, seed);
    if (config_.mode != weight_mode::fp32_master) nn::release(p.value);  // no fp32 copy is held
    if (config_.fused) nn::release_gradient(p);
    const auto [weight, extra] = std::visit([](const auto& w) { return stored_bytes(w); }, s.weights);
    s.weight_bytes = ms::ledger_charge(ledger_, memory_category::weights, weight);
    s.extra_bytes = ms::ledger_charge(ledger_, memory_category::extra_bits, extra);
    s.state_bytes = ms::ledger_charge(ledger_, memory_category::optimizer_state, 0);
  }
}

void weight_store::begin_step(double lr) {
  lr_ = lr;
  overflow_ = false;
  updated_ = rolled_back_ = 0;
  journal_.clear();
}

void weight_store::load(std::size_t index, nn::parameter& p) {
  slot& s = slots_.at(index);
  if (s.param != &p) throw std::logic_error("examples::weight_store::load: parameter " + std::to_string(index) + " is not the store's");
  std::visit(
      [&](const auto& w) {
        using W = std::remove_cvref_t<decltype(w)>;
        if constexpr (std::is_same_v<W, std::monostate>) std::copy(p.value.begin(), p.value.end(), p.used.begin());
        else if constexpr (std::is_same_v<W, ms::split_tensor>) w.visible_values(p.used);
        else w.decode(p.used);
      },
      s.weights);
}

void weight_store::prepare(nn::parameter& p) {
  scaler_.unscale(p.grad);  // GradScaler: unscale (and check) before clipping and the update
  if (config_.clip.value) {
    const float v = *config_.clip.value;
    for (float& g : p.grad) g = std::clamp(g, -v, v);
  }
  if (config_.clip.tensor_norm) scale(p.grad, clip_factor(*config_.clip.tensor_norm, l2_norm(p.grad)));
}

std::size_t weight_store::state_bytes(const slot& s) const {
  return (s.sgd.momentum_buffer.capacity() + s.adam.exp_avg.capacity() + s.adam.exp_avg_sq.capacity()) * sizeof(float);
}

void weight_store::update(slot& s) {
  const std::span<const float> grad(s.param->grad);
  const auto step = [&](auto&& w) {  // the master copy as a span, or the split / low tensor
    if (config_.optimizer == optimizer_kind::sgd)
      ms::sgd_step(w, grad, s.sgd, ms::sgd_options{lr_, config_.momentum, 0, config_.weight_decay});
    else
      ms::adam_step(w, grad, s.adam,
                    ms::adam_options{lr_, config_.beta1, config_.beta2, config_.eps, config_.weight_decay, true});
  };
  try {
    std::visit(
        [&](auto& w) {
          if constexpr (std::is_same_v<std::remove_cvref_t<decltype(w)>, std::monostate>) step(std::span<float>(s.param->value));
          else step(w);
        },
        s.weights);
  } catch (const std::domain_error& e) {  // the optimizers' all-or-nothing rejection: nothing changed
    const bool blocks = std::holds_alternative<ms::low_block_tensor>(s.weights);
    throw unstorable_update("tensor " + s.name + " (" + std::to_string(s.param->numel()) + " weights): " + e.what() +
                            (blocks ? " (block-scaled weights hold finite values only: the MX spec would make the "
                                      "whole block NaN)"
                                    : ""));
  }
  s.state_bytes.resize(state_bytes(s));
}

void weight_store::journal(std::size_t index) {
  const slot& s = slots_[index];
  journal_entry e;
  e.slot = index;
  e.master = nn::float_buffer(s.param->value.begin(), s.param->value.end(),
                              ms::tracking_allocator<float>(ledger_, memory_category::journal));
  e.weights = s.weights;
  e.sgd = s.sgd;
  e.adam = s.adam;
  const auto [weight, extra] = std::visit([](const auto& w) { return stored_bytes(w); }, e.weights);
  e.bytes = ms::ledger_charge(ledger_, memory_category::journal, weight + extra + state_bytes(s));
  journal_.push_back(std::move(e));
}

void weight_store::roll_back() {
  for (journal_entry& e : journal_) {
    slot& s = slots_[e.slot];
    std::copy(e.master.begin(), e.master.end(), s.param->value.begin());
    s.weights = std::move(e.weights);
    s.sgd = std::move(e.sgd);
    s.adam = std::move(e.adam);
    s.state_bytes.resize(state_bytes(s));
  }
  rolled_back_ = journal_.size();
  updated_ = 0;
  journal_.clear();
}

void weight_store::gradients_ready(std::size_t first_index, std::span<nn::parameter> params) {
  for (nn::parameter& p : params) prepare(p);
  if (scaler_.found_inf()) {  // here or in a layer after this one (backward runs last to first)
    if (!overflow_ && config_.on_overflow == overflow_policy::rollback) roll_back();
    overflow_ = true;
  } else {
    for (std::size_t j = 0; j < params.size(); ++j) {
      if (config_.on_overflow == overflow_policy::rollback) journal(first_index + j);
      update(slots_.at(first_index + j));
      ++updated_;
    }
  }
  for (nn::parameter& p : params) nn::release_gradient(p);
}

step_outcome weight_store::finish_step() {
  if (config_.fused) {
    const step_outcome out{overflow_, updated_, rolled_back_};
    begin_step(lr_);  // drops the journal
    return out;
  }
  for (slot& s : slots_) prepare(*s.param);
  if (scaler_.found_inf()) return {true, 0, 0};
  if (config_.clip.global_norm) {
    double sum = 0;
    for (const slot& s : slots_) sum += sum_of_squares(s.param->grad);
    const double factor = clip_factor(*config_.clip.global_norm, std::sqrt(sum));
    for (slot& s : slots_) scale(s.param->grad, factor);
  }
  for (slot& s : slots_) update(s);
  return {false, slots_.size(), 0};
}

std::vector<float> weight_store::stored_values(std::size_t index) const {
  const slot& s = slots_.at(index);
  return std::visit(
      [&](const auto& w) {
        using W = std::remove_cvref_t<decltype(w)>;
        if constexpr (std::is_same_v<W, std::monostate>) return std::vector<float>(s.param->value.begin(), s.param->value.end());
        else if constexpr (std::is_same_v<W, ms::split_tensor>) return w.reconstruct();
        else {
          std::vector<float> out(w.size());
          w.decode(out);
          return out;
        }
      },
      s.weights);
}

}  // namespace examples
