// minifloat/training/site.hpp — a rounding site: one named tensor of the training graph (an
// output activation Y, its gradient GY, a parameter P or a parameter gradient GP) and the
// rounding applied to it, rnd_π(t)(·) of eq. (1) in the precision-assignment paper (§3.1).
//
// A site knows its precision candidates (high and low format, §3.1's C(t, hi) / C(t, lo)), which
// one is in force, the overflow policy of its role (docs/semantics.md §1: forward
// tensors saturate, gradients overflow to Inf so loss scaling sees them) and the rounding
// statistics of the current training step, the input of overflow-driven promotion (§4.2).
// All rounding goes through the core (minifloat::quantize, or minifloat::quantize_blocks for a
// block-scaled candidate such as MXFP8 or NVFP4, block.hpp); this header holds no bit logic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "../block.hpp"
#include "../bulk.hpp"
#include "../format.hpp"
#include "../random.hpp"
#include "../round.hpp"
#include "../stats.hpp"

namespace minifloat::training {

/// What a tensor is in the gradient computation of eq. (1): v_i, dv_i, θ_j or dθ_j.
enum class role : std::uint8_t { activation, activation_gradient, weight, weight_gradient };

/// Forward tensors (activations and weights) are the ones precision promotion may touch (§4.2).
constexpr bool is_forward(role r) { return r == role::activation || r == role::weight; }

/// Forward tensors saturate; gradients become ±Inf so that dynamic loss scaling detects the
/// overflow and skips the step (docs/semantics.md §1).
constexpr overflow default_overflow(role r) { return is_forward(r) ? overflow::saturate : overflow::infinity; }

constexpr std::string_view to_string(role r) {
  switch (r) {
    case role::activation: return "Y";
    case role::activation_gradient: return "GY";
    case role::weight: return "P";
    case role::weight_gradient: return "GP";
  }
  return "?";
}

/// The two precision levels of a precision-candidate assignment.
enum class precision : std::uint8_t { high, low };

constexpr std::string_view to_string(precision p) { return p == precision::high ? "high" : "low"; }

/// The candidates C(t, hi) and C(t, lo) of one tensor. A level with a block format rounds
/// through quantize_blocks (blocks of consecutive elements of the flattened tensor); its `high`
/// or `low` member then holds the block format's element format.
struct format_pair {
  format high = fp_6_9_0;
  format low = fp_4_3_4;
  std::optional<block_format> high_block{};
  std::optional<block_format> low_block{};
  friend constexpr bool operator==(const format_pair&, const format_pair&) = default;

  /// Both levels block-scaled.
  static constexpr format_pair blocks(const block_format& hi, const block_format& lo) {
    return {hi.element, lo.element, hi, lo};
  }
};

/// Bits per element of a disabled (fp32 pass-through) site.
inline constexpr int fp32_bits = 32;

class site {
 public:
  /// `numel` is the tensor's element count at the training batch size: what the footprint and
  /// the group sizes count. The spans given to apply() may be of any length (chunks, the last
  /// short batch). Starts in high precision, with the role's overflow policy and nearest_even.
  site(std::string name, role kind, std::size_t numel, format_pair formats = {}, std::uint64_t seed = 0)
      : name_(std::move(name)),
        kind_(kind),
        numel_(numel),
        formats_(formats),
        on_overflow_(default_overflow(kind)),
        seed_(seed),
        rounder_(make_rounder()) {}

  const std::string& name() const { return name_; }
  role kind() const { return kind_; }
  std::size_t numel() const { return numel_; }

  const format_pair& formats() const { return formats_; }
  precision level() const { return level_; }
  /// The format in force: formats().high or formats().low.
  const format& current_format() const { return level_ == precision::low ? formats_.low : formats_.high; }
  /// The block format in force, if the current level is block-scaled.
  const std::optional<block_format>& current_block() const {
    return level_ == precision::low ? formats_.low_block : formats_.high_block;
  }
  /// How apply() calls may cut this tensor into chunks: any element (1), whole blocks (the block
  /// size), or not at all (0: NVFP4's per-tensor scale needs the whole tensor).
  std::size_t split_unit() const {
    const auto& b = current_block();
    if (!enabled_ || !b) return 1;
    return b->scaling == block_scaling::e4m3_times_tensor ? 0 : static_cast<std::size_t>(b->block_size);
  }
  bool is_low() const { return enabled_ && level_ == precision::low; }

  void set_formats(const format_pair& f) {
    for (const auto& b : {f.high_block, f.low_block})
      if (b) b->validate();
    formats_ = f;
    rebuild();
  }
  void set_level(precision p) { level_ = p; rebuild(); }

  rounding mode() const { return mode_; }
  void set_mode(rounding m) { mode_ = m; rebuild(); }
  overflow on_overflow() const { return on_overflow_; }
  void set_overflow(overflow o) { on_overflow_ = o; rebuild(); }

  /// Disabled: apply() leaves values untouched and counts nothing, so an fp32 baseline and a
  /// "rounding disabled" overhead measurement run the same trainer code.
  bool enabled() const { return enabled_; }
  void set_enabled(bool on) { enabled_ = on; }

  std::uint64_t seed() const { return seed_; }
  void set_seed(std::uint64_t s) { seed_ = s; rebuild(); }

  /// Starts training step `step`: clears the step's statistics and rekeys stochastic rounding.
  void begin_step(std::uint64_t step) {
    step_ = step;
    stats_ = {};
    block_stats_ = {};
    rebuild();
  }
  std::uint64_t step() const { return step_; }

  /// Stochastic rounding seed of the current step: a keyed hash of (site seed, step) drawn with
  /// the core's counter RNG, so each step and each site gets its own stream and a run replays
  /// bit for bit.
  std::uint64_t step_seed() const { return fold_seed(seed_, step_); }

  /// The core options in force; `offset` is the index of the first element within this step's
  /// tensor (stochastic rounding draws element i from (step_seed(), offset + i)).
  rounding_options options(std::uint64_t offset = 0) const {
    return rounding_options{mode_, on_overflow_, 0, step_seed(), offset};
  }

  /// Rounds `values` in place to the current format and adds the counts to the step's
  /// statistics. A tensor may be applied several times in one step (per chunk or mini-batch
  /// slice): pass each chunk's element offset so stochastic rounding does not reuse draws.
  void apply(std::span<float> values, std::uint64_t offset = 0) {
    if (!enabled_) return;
    if (current_block()) {
      block_stats b;
      quantize_blocks(std::span<const float>(values), values, *current_block(), block_opts(offset), {}, b);
      stats_ += b.elements;
      block_stats_ += b;
      return;
    }
    quantize(std::span<const float>(values), values, rounder_.advanced(offset), stats_);
  }

  /// The same rounding counted into a caller-owned `local` instead (one per thread; merge them
  /// with add_stats()). Const, so threads may share the site.
  void apply(std::span<float> values, std::uint64_t offset, rounding_stats& local) const {
    if (!enabled_) return;
    if (current_block()) {
      block_stats b;
      quantize_blocks(std::span<const float>(values), values, *current_block(), block_opts(offset), {}, b);
      local += b.elements;
      return;
    }
    quantize(std::span<const float>(values), values, rounder_.advanced(offset), local);
  }

  /// Rounds without counting, for passes that must not feed promotion (evaluation).
  void apply_uncounted(std::span<float> values, std::uint64_t offset = 0) const {
    if (!enabled_) return;
    if (current_block()) {
      quantize_blocks(std::span<const float>(values), values, *current_block(), block_opts(offset));
      return;
    }
    quantize(std::span<const float>(values), values, rounder_.advanced(offset));
  }

  void add_stats(const rounding_stats& s) { stats_ += s; }
  /// Everything apply() counted since begin_step().
  const rounding_stats& step_stats() const { return stats_; }
  /// Block counts (blocks, clamped and NaN scales) of this step's apply(values, offset) calls.
  const block_stats& block_step_stats() const { return block_stats_; }
  double overflow_ratio() const { return stats_.overflow_ratio(); }

  /// 1 + E + M of the current format when enabled, 32 (fp32) otherwise.
  int bits_per_element() const { return enabled_ ? current_format().bit_width() : fp32_bits; }
  /// Bits the tensor takes in the current format: numel() × bits_per_element(), plus one 8-bit
  /// scale per block (and NVFP4's fp32 tensor scale) for a block format.
  std::uint64_t storage_bits() const {
    const auto n = static_cast<std::uint64_t>(numel_);
    const std::uint64_t elements = n * static_cast<std::uint64_t>(bits_per_element());
    const auto& b = current_block();
    if (!enabled_ || !b) return elements;
    const auto blocks = (n + static_cast<std::uint64_t>(b->block_size) - 1) / static_cast<std::uint64_t>(b->block_size);
    return elements + blocks * block_format::scale_bits + (b->scaling == block_scaling::e4m3_times_tensor ? 32 : 0);
  }

 private:
  rounder<float> make_rounder() const { return rounder<float>(current_format(), options()); }
  /// Block elements always saturate, as the MX spec's conversion does, whatever the role: the
  /// block scale follows the data, and a NaN or Inf input still makes its block NaN, which loss
  /// scaling sees.
  block_options block_opts(std::uint64_t offset) const {
    return block_options{.mode = mode_, .on_overflow = overflow::saturate, .seed = step_seed(), .index = offset};
  }
  void rebuild() { rounder_ = make_rounder(); }

  std::string name_;
  role kind_;
  std::size_t numel_;
  format_pair formats_;
  precision level_ = precision::high;
  rounding mode_ = rounding::nearest_even;
  overflow on_overflow_;
  bool enabled_ = true;
  std::uint64_t seed_;
  std::uint64_t step_ = 0;
  rounding_stats stats_{};
  block_stats block_stats_{};
  rounder<float> rounder_;  // rebuilt on every change, so apply() never re-validates the format
};

}  // namespace minifloat::training
