// minifloat/training/container_footprint.hpp — what dynamic containers store, counted per tensor
// per step, and the footprint reductions of Schrödinger's FP Table 1 and §4.1–4.2.
//
// Rules (docs/dynamic-containers.md):
//  - A tensor stored in one step costs numel·(sign + exponent + mantissa) bits. The sign bit is
//    omitted when no value of the stored tensor is negative (§3: "when V is limited to only
//    positive numbers, it can be omitted"; −0 and NaN do not count as negative) — or always kept
//    (sign_rule::always).
//  - With Gecko (+G, §3.3) the fixed exponent field is replaced by the exact size of the
//    Gecko-encoded exponents of the stored values (storage/gecko.hpp; faithful variant by default).
//  - Totals are cumulative: sums over tensors and steps. Reduction vs FP32 = 32·elements / bits
//    (Table 1); vs BFloat16 = 16·elements / bits and vs FP8 = 8·elements / bits (§4.2: those
//    formats cut FP32's footprint by 2× and 4×).
//  - One run gives every column of Table 1: the variants count the learned mantissa only (QM,
//    BWM: exponent kept at 8 bits), the learned exponent only (QE, BWE: mantissa kept at 23), that
//    with Gecko, both, and both with Gecko.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../storage/gecko.hpp"
#include "container_quantize.hpp"
#include "quantum.hpp"

namespace minifloat::training {

enum class sign_rule : std::uint8_t { omit_when_nonnegative, always };

/// True when a stored tensor needs its sign bit under `rule`.
inline bool needs_sign_bit(std::span<const float> values, sign_rule rule) {
  if (rule == sign_rule::always) return true;
  // Stops at the first negative value: most signed tensors are decided within a few elements.
  return std::any_of(values.begin(), values.end(), [](float v) { return v < 0.0f; });  // false for −0, NaN
}

/// One tensor as stored in one step.
struct stored_tensor {
  std::uint64_t elements = 0;
  bool sign = true;
  int mantissa_bits = fp32_mantissa_bits;
  int exponent_bits = fp32_exponent_bits;
  std::optional<std::uint64_t> gecko_exponent_bits;  ///< Σ bits of the Gecko-encoded exponents
};

/// Describes the stored (already quantized) `values`; with `gecko` their exponents are encoded.
inline stored_tensor describe_stored(std::span<const float> values, int mantissa_bits, int exponent_bits, sign_rule rule,
                                     std::optional<storage::gecko_variant> gecko = std::nullopt) {
  stored_tensor s{values.size(), needs_sign_bit(values, rule), mantissa_bits, exponent_bits, std::nullopt};
  if (gecko) s.gecko_exponent_bits = storage::gecko_encoded_size(values, *gecko).bits;
  return s;
}

/// Which of the paper's columns a footprint is counted for.
enum class footprint_variant : std::uint8_t {
  fp32,            ///< 32 bits per element
  mantissa,        ///< QM / BWM: sign + 8 + learned mantissa
  exponent,        ///< QE / BWE: sign + learned exponent + 23
  exponent_gecko,  ///< QE+G / BWE+G: sign + Gecko exponent + 23
  both,            ///< QM+QE / BWM+BWE: sign + learned exponent + learned mantissa
  both_gecko,      ///< QM+QE+G / BWM+BWE+G: sign + Gecko exponent + learned mantissa
};

/// Cumulative bit counts of some tensors over some steps.
struct footprint_totals {
  std::uint64_t elements = 0;
  std::uint64_t sign_bits = 0;
  std::uint64_t mantissa_bits = 0;
  std::uint64_t exponent_bits = 0;
  std::uint64_t gecko_bits = 0;
  std::uint64_t gecko_elements = 0;  ///< elements whose exponents were Gecko-encoded

  void add(const stored_tensor& s) {
    elements += s.elements;
    sign_bits += s.sign ? s.elements : 0;
    mantissa_bits += s.elements * static_cast<std::uint64_t>(s.mantissa_bits);
    exponent_bits += s.elements * static_cast<std::uint64_t>(s.exponent_bits);
    if (s.gecko_exponent_bits) {
      gecko_bits += *s.gecko_exponent_bits;
      gecko_elements += s.elements;
    }
  }
  footprint_totals& operator+=(const footprint_totals& o) {
    elements += o.elements;
    sign_bits += o.sign_bits;
    mantissa_bits += o.mantissa_bits;
    exponent_bits += o.exponent_bits;
    gecko_bits += o.gecko_bits;
    gecko_elements += o.gecko_elements;
    return *this;
  }

  /// Every element's exponents were Gecko-encoded (the +G variants need it).
  bool has_gecko() const { return gecko_elements == elements; }

  std::uint64_t bits(footprint_variant v) const {
    const std::uint64_t full_mantissa = elements * fp32_mantissa_bits, full_exponent = elements * fp32_exponent_bits;
    if ((v == footprint_variant::exponent_gecko || v == footprint_variant::both_gecko) && !has_gecko())
      throw std::logic_error("footprint_totals::bits: a +G variant of a tally without Gecko sizes");
    switch (v) {
      case footprint_variant::fp32: return elements * 32;
      case footprint_variant::mantissa: return sign_bits + full_exponent + mantissa_bits;
      case footprint_variant::exponent: return sign_bits + exponent_bits + full_mantissa;
      case footprint_variant::exponent_gecko: return sign_bits + gecko_bits + full_mantissa;
      case footprint_variant::both: return sign_bits + exponent_bits + mantissa_bits;
      case footprint_variant::both_gecko: return sign_bits + gecko_bits + mantissa_bits;
    }
    return 0;
  }
  /// Footprint reduction vs a baseline of `baseline_bits` per element (32 FP32, 16 BF16, 8 FP8).
  double reduction(footprint_variant v, int baseline_bits = 32) const {
    const auto b = static_cast<double>(bits(v));
    return b == 0 ? 0.0 : static_cast<double>(elements) * baseline_bits / b;
  }
  /// Mean bits per element of the variant.
  double bits_per_element(footprint_variant v) const {
    return elements == 0 ? 0.0 : static_cast<double>(bits(v)) / static_cast<double>(elements);
  }
  /// The learned mantissa (exponent, Gecko exponent) footprint as a share of FP32's 23 (8) bits.
  double mantissa_share() const { return share(mantissa_bits, fp32_mantissa_bits); }
  double exponent_share() const { return share(exponent_bits, fp32_exponent_bits); }
  double gecko_exponent_share() const { return share(gecko_bits, fp32_exponent_bits); }

 private:
  double share(std::uint64_t bits_used, int full) const {
    return elements == 0 ? 0.0 : static_cast<double>(bits_used) / (static_cast<double>(elements) * full);
  }
};

/// Per-tensor tallies of what was stored, for the reports: by tensor, by class, in total.
class container_ledger {
 public:
  explicit container_ledger(std::vector<tensor_class> classes) : classes_(std::move(classes)), tallies_(classes_.size()) {}

  std::size_t size() const { return tallies_.size(); }
  void record(std::size_t tensor, const stored_tensor& s) { tallies_.at(tensor).add(s); }
  const footprint_totals& tensor(std::size_t t) const { return tallies_.at(t); }
  tensor_class cls(std::size_t t) const { return classes_.at(t); }

  /// Sums over the tensors of one class, or all of them.
  footprint_totals totals(std::optional<tensor_class> only = std::nullopt) const {
    footprint_totals sum;
    for (std::size_t t = 0; t < tallies_.size(); ++t)
      if (!only || classes_[t] == *only) sum += tallies_[t];
    return sum;
  }

  container_ledger& operator+=(const container_ledger& o) {
    if (o.classes_ != classes_) throw std::invalid_argument("container_ledger: adding a ledger of other tensors");
    for (std::size_t t = 0; t < tallies_.size(); ++t) tallies_[t] += o.tallies_[t];
    return *this;
  }
  void clear() { tallies_.assign(tallies_.size(), {}); }

 private:
  std::vector<tensor_class> classes_;
  std::vector<footprint_totals> tallies_;
};

}  // namespace minifloat::training
