// minifloat/training/container_quantize.hpp — the value side of dynamic fp32 containers
// (Schrödinger's FP, §3.1 eqs. 5, 7, 11–14; §3.2 BitWave; §4.3 Quantum Integer): a container
// keeps k_m of fp32's 23 mantissa bits and an exponent range [E_min, E_max]; a value is first
// bounded by the range (eq. 7) and then truncated to k_m mantissa bits (eq. 5).
//
// QM/QE (quantum.hpp) and BitWave (bitwave.hpp) both quantize through these functions; only how
// they pick k_m and the range differs. Rules (docs/dynamic-containers.md has worked examples):
//  - V_max = (2 − 2^−k_m)·2^E_max (eq. 11 with the largest k_m-bit mantissa), V_min = 2^E_min
//    (eq. 12). Eq. 7: |x| ≥ V_max → ±V_max, [V_min/2, V_min) → ±V_min, below V_min/2 → ±0.
//  - QE's range from k_e bits (eqs. 13–14): [−2^(k_e−1), 2^(k_e−1) − 1]; k_e = 0 is the single
//    exponent 0 (no bits, values in ±[1, 2)); k_e = 8 is the fp32 container itself: no bound at
//    all (eqs. 13–14 would give [−128, 127], which cuts fp32's subnormals, so k_e = 8 and k_m = 23
//    together are the identity on every float).
//  - NaN stays NaN (payload kept); ±Inf becomes ±V_max (it is clipped) unless the range is fp32's.
//  - Signed zero keeps its sign.
// The float bit manipulation is branch-free integer work on the fp32 bit pattern, so the span
// loops vectorise (bench/bench_dynamic_containers.cpp measures them).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "../detail/lanes.hpp"

namespace minifloat::training {

inline constexpr int fp32_mantissa_bits = 23;
inline constexpr int fp32_exponent_bits = 8;
/// fp32's normal exponents, the range BitWave narrows (§3.2: "the range of FP32 exponents").
inline constexpr int fp32_emin = -126;
inline constexpr int fp32_emax = 127;
/// The most BitWave may narrow fp32's range on each side: [0, 1] is the narrowest symmetric range.
inline constexpr int max_narrowing = 126;

/// An exponent range [emin, emax]; `full` is the fp32 container (no bound).
struct exponent_range {
  bool full = true;
  int emin = fp32_emin;
  int emax = fp32_emax;

  friend constexpr bool operator==(const exponent_range&, const exponent_range&) = default;

  /// Eqs. 13–14 for k bits, k in [0, 8]; k = 0 → [0, 0]; k = 8 → the full fp32 container.
  static constexpr exponent_range from_bits(int k) {
    if (k < 0 || k > fp32_exponent_bits)
      throw std::invalid_argument("exponent_range::from_bits: k = " + std::to_string(k) + " is outside 0..8");
    if (k == fp32_exponent_bits) return {};
    if (k == 0) return {false, 0, 0};
    const int half = 1 << (k - 1);
    return {false, -half, half - 1};
  }

  /// BitWave: fp32's normal range narrowed by `narrowing` exponents on both sides,
  /// [−126 + s, 127 − s]; s = 0 is the full fp32 container.
  static constexpr exponent_range narrowed(int narrowing) {
    if (narrowing < 0 || narrowing > max_narrowing)
      throw std::invalid_argument("exponent_range::narrowed: narrowing = " + std::to_string(narrowing) +
                                  " is outside 0..126");
    if (narrowing == 0) return {};
    return {false, fp32_emin + narrowing, fp32_emax - narrowing};
  }

  /// Bits that name every exponent of the range: ceil(log2(emax − emin + 1)); 8 for fp32's.
  constexpr int bits() const {
    if (full) return fp32_exponent_bits;
    const unsigned count = static_cast<unsigned>(emax - emin + 1);
    return static_cast<int>(std::bit_width(count - 1));
  }
};

/// k_m mantissa bits and an exponent range: what one tensor is stored in during one step.
struct container {
  int mantissa_bits = fp32_mantissa_bits;
  exponent_range range{};
  friend constexpr bool operator==(const container&, const container&) = default;
  constexpr int exponent_bits() const { return range.bits(); }
};

namespace detail::containers {
inline constexpr std::uint32_t abs_mask = 0x7fffffffu;
inline constexpr std::uint32_t sign_mask = 0x80000000u;
inline constexpr std::uint32_t inf_bits = 0x7f800000u;
inline constexpr std::uint32_t mantissa_field = 0x007fffffu;
inline constexpr std::uint32_t biased(int e) { return static_cast<std::uint32_t>(e + 127) << 23; }
}  // namespace detail::containers

/// Keeps the top k of the 23 mantissa field bits (eq. 5 as a mask).
constexpr std::uint32_t mantissa_keep_mask(int k) {
  if (k < 0 || k > fp32_mantissa_bits)
    throw std::invalid_argument("mantissa_keep_mask: k = " + std::to_string(k) + " is outside 0..23");
  return ~((std::uint32_t{1} << (fp32_mantissa_bits - k)) - 1u);
}

/// A container as the bit-pattern thresholds the kernels compare against (|x| as bits is
/// monotone in |x|). For the full range nothing is ever bounded or clipped.
struct container_bounds {
  std::uint32_t keep = ~0u;                                 ///< mantissa mask (eq. 5)
  std::uint32_t vmax = detail::containers::inf_bits + 1;    ///< |x| ≥ this is clipped to it
  std::uint32_t vmin = 0;                                   ///< smallest kept magnitude
  std::uint32_t half_vmin = 0;                              ///< [half_vmin, vmin) rounds up to vmin

  static constexpr container_bounds of(const container& c) {
    using namespace detail::containers;
    container_bounds b;
    b.keep = mantissa_keep_mask(c.mantissa_bits);
    if (!c.range.full) {
      b.vmax = biased(c.range.emax) | (mantissa_field & b.keep);  // (2 − 2^−k_m)·2^E_max, eq. 11
      b.vmin = biased(c.range.emin);                               // 2^E_min, eq. 12
      b.half_vmin = biased(c.range.emin - 1);
    }
    return b;
  }

  float vmax_value() const { return std::bit_cast<float>(vmax); }
  float vmin_value() const { return std::bit_cast<float>(vmin); }
};

/// Eq. 7 then eq. 5 on one value, as bits; L is std::uint32_t or a SIMD register of them
/// (detail/simd.hpp), so one definition serves the scalar path and the vector kernels.
template <class L>
constexpr L quantize_container_bits(L u, const container_bounds& b) {
  using namespace detail::containers;
  using minifloat::detail::select;
  const L a = u & abs_mask;
  const L sign = u & sign_mask;
  L r = select(a >= b.half_vmin, L{} + b.vmin, L{});  // below V_min: V_min or zero
  r = select(a >= b.vmin, a, r);                      // inside the range: kept
  r = select(a >= b.vmax, L{} + b.vmax, r);           // above: saturated (Inf included)
  r &= b.keep;
  return select(a > inf_bits, u, sign | r);           // NaN passes unchanged
}

inline float quantize_container(float x, const container_bounds& b) {
  return std::bit_cast<float>(quantize_container_bits(std::bit_cast<std::uint32_t>(x), b));
}
inline float quantize_container(float x, const container& c) { return quantize_container(x, container_bounds::of(c)); }

/// Quantizes `in` into `out` (same size; they may alias).
inline void quantize_container(std::span<const float> in, std::span<float> out, const container_bounds& b) {
  if (in.size() != out.size()) throw std::invalid_argument("quantize_container: in and out differ in size");
  const float* src = in.data();
  float* dst = out.data();
  const std::size_t n = in.size();
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = std::bit_cast<float>(quantize_container_bits(std::bit_cast<std::uint32_t>(src[i]), b));
}

/// Quantizes `values` in place and copies the unquantized values to `input` (same size) in the
/// same pass: the forward of a learning step, which keeps its input for the backward.
inline void quantize_keeping_input(std::span<float> values, std::span<float> input, const container_bounds& b) {
  if (values.size() != input.size()) throw std::invalid_argument("quantize_keeping_input: spans differ in size");
  float* v = values.data();
  float* keep = input.data();
  const std::size_t n = values.size();
  for (std::size_t i = 0; i < n; ++i) {
    const auto u = std::bit_cast<std::uint32_t>(v[i]);
    keep[i] = v[i];
    v[i] = std::bit_cast<float>(quantize_container_bits(u, b));
  }
}

/// Eq. 8's clip test: the value gradient is zero where |x| ≥ V_max (NaN is not clipped). A bool
/// for a scalar, a lane mask for a register.
template <class L>
constexpr auto clipped(L u, const container_bounds& b) {
  const L a = u & detail::containers::abs_mask;
  return (a >= b.vmax) & (a <= detail::containers::inf_bits);  // & not &&: no branch in the loops
}

// ---- Quantum Integer (§4.3): a fixed-point container in place of eq. 5 ----------------------------
// Our reading: a per-tensor power-of-two scale S = 2^s, the smallest with |x| < S for every finite
// x of the tensor (s = frexp's exponent of max|x|; an all-zero tensor takes s = 0); k magnitude
// bits plus a sign: x is truncated toward zero to a multiple of S·2^−k, so |q| ≤ S − S·2^−k. k = 0
// stores only zeros. ±Inf saturate to ±(S − S·2^−k) and NaN stays NaN. The scale is found anew
// each step (it costs one max-reduction); it is metadata, not counted per element.

/// s with max|x| < 2^s over the finite values of `values`.
inline int fixed_point_scale_exponent(std::span<const float> values) {
  float largest = 0.0f;
  for (float v : values)
    if (std::isfinite(v)) largest = std::fmax(largest, std::fabs(v));
  if (largest == 0.0f) return 0;
  int s = 0;
  (void)std::frexp(largest, &s);
  return s;
}

inline float quantize_fixed_point(float x, int bits, int scale_exponent) {
  if (std::isnan(x)) return x;
  const double step = std::ldexp(1.0, scale_exponent - bits);
  const double top = std::ldexp(1.0, scale_exponent) - step;
  const double q = std::trunc(static_cast<double>(x) / step) * step;
  return static_cast<float>(std::fmin(std::fmax(q, -top), top));
}

}  // namespace minifloat::training
