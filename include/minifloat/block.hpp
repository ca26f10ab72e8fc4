// minifloat/block.hpp — block scaling: blocks of elements that share one scale, as in the OCP
// Microscaling Formats (MX) Specification v1.0 (MXFP8, MXFP6, MXFP4, MXINT8; §5 and §6.3) and
// NVIDIA's NVFP4 (16 E2M1 elements, an E4M3 block scale and an fp32 per-tensor scale).
//
// MX (docs/formats.md §8 states every rule with examples): a block of `block_size` (32)
// consecutive elements V_i shares the E8M0 scale X = 2^s,
//     s = floor(log2(max_i |V_i|)) − emax_elem   (scale_rule::floor, the spec's rule),
// or one more by the rules rceil (the smallest power of two X with max|V|/X ≤ max_elem),
// torchao_ceil and torchao_even (torchao's RCEIL, CEIL and EVEN), clamped to E8M0's range
// −127..127; each element is the element format's rounding of V_i / X (any mode of
// the core, saturating by default as the spec's conversion does). A NaN or ±Inf in a block makes
// its scale NaN (so every element decodes to NaN); an all-zero block gets s = −127 and stays
// zero. MXINT8 is the element format int8_mx (k · 2^−6, |k| ≤ 127, emax_elem 0) with
// two's-complement codes.
// NVFP4: S_t = per-tensor fp32 decode scale (given, or amax of the tensor's finite values / (6 ·
// 448)); each block of 16 gets the E4M3 scale D = e4m3(amax_block / 6 / S_t) (nearest-even,
// saturating); elements are e2m1(V_i / (D · S_t)), the division and product in fp32.
//
// Every element goes through the one rounding core (round.hpp, via bulk.hpp's register path);
// this header only finds scales and moves values. Stochastic rounding draws element i (row-major
// position in the tensor, plus options.index) from (seed, i): results do not depend on how a
// tensor is cut into calls, as long as each call covers whole blocks and passes its offset.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "backend.hpp"
#include "bulk.hpp"
#include "encode.hpp"
#include "format.hpp"
#include "round.hpp"
#include "stats.hpp"

namespace minifloat {

/// How a block's scale is stored.
enum class block_scaling : std::uint8_t {
  e8m0,               ///< OCP MX: a power of two, E8M0 code s + 127
  e4m3_times_tensor,  ///< NVFP4: an E4M3 value times the per-tensor fp32 scale
};

/// How the MX scale exponent follows from the block's largest magnitude amax (docs/formats.md
/// §8). Each is one more than `floor` or equal to it; they differ in when they add the one.
enum class scale_rule : std::uint8_t {
  floor,         ///< OCP MX v1.0: floor(log2(amax)) − emax_elem; the largest elements may saturate
  rceil,         ///< the smallest power of two that maps amax to at most the element max (torchao RCEIL)
  torchao_ceil,  ///< ceil(log2(amax)) − emax_elem (torchao CEIL)
  torchao_even,  ///< floor(log2(amax rounded to the element's mantissa width, ties up)) − emax_elem (torchao EVEN)
};

/// The scale rules by torchao's ScaleCalculationMode values.
inline constexpr std::pair<std::string_view, scale_rule> named_scale_rules[] = {
    {"floor", scale_rule::floor},
    {"rceil", scale_rule::rceil},
    {"ceil", scale_rule::torchao_ceil},
    {"even", scale_rule::torchao_even},
};
/// The scale rule of that name, or nothing when `name` is not one.
constexpr std::optional<scale_rule> find_scale_rule(std::string_view name) {
  for (const auto& [n, r] : named_scale_rules)
    if (n == name) return r;
  return std::nullopt;
}
/// Its name in named_scale_rules.
inline std::string to_string(scale_rule rule) {
  for (const auto& [n, r] : named_scale_rules)
    if (r == rule) return std::string(n);
  return "scale_rule(" + std::to_string(static_cast<int>(rule)) + ")";
}

/// A block-scaled format: the element format, the block size and how scales are stored.
struct block_format {
  format element = e4m3;
  int block_size = 32;
  block_scaling scaling = block_scaling::e8m0;
  bool integer_elements = false;  ///< MXINT8: element codes are two's-complement k of k · 2^-6

  friend constexpr bool operator==(const block_format&, const block_format&) = default;

  static constexpr int scale_bits = 8;
  /// Storage per value, scales included: element bits + 8 / block_size (MXFP4: 4.25).
  constexpr double bits_per_value() const { return element.bit_width() + static_cast<double>(scale_bits) / block_size; }
  /// The format a scale code is a code of.
  constexpr format scale_format() const { return scaling == block_scaling::e8m0 ? e8m0 : e4m3; }

  std::string problem() const {
    if (block_size < 1 || block_size > 1024) return "block_size = " + std::to_string(block_size) + " is outside 1..1024";
    if (auto p = source_problem<float>(element); !p.empty()) return "element: " + p;
    if (element.bit_width() > 8) return "element: " + to_string(element) + " is wider than 8 bits";
    if (integer_elements && element != int8_mx) return "integer_elements needs the element format int8_mx";
    if (scaling == block_scaling::e4m3_times_tensor && element.has_nan())
      return "scaling = e4m3_times_tensor needs an element format without NaN (NVFP4: e2m1)";
    return {};
  }
  void validate() const {
    if (auto p = problem(); !p.empty()) throw std::invalid_argument("minifloat::block_format: " + p);
  }
};

inline constexpr block_format mxfp8_e4m3{e4m3};
inline constexpr block_format mxfp8_e5m2{e5m2};
inline constexpr block_format mxfp6_e3m2{e3m2};
inline constexpr block_format mxfp6_e2m3{e2m3};
inline constexpr block_format mxfp4{e2m1};
inline constexpr block_format mxint8{int8_mx, 32, block_scaling::e8m0, true};
inline constexpr block_format nvfp4{e2m1, 16, block_scaling::e4m3_times_tensor};

/// The block formats by name, for command lines: mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2, mxfp6-e2m3,
/// mxfp4, mxint8 (OCP MX v1.0, blocks of 32) and nvfp4.
inline constexpr std::pair<std::string_view, block_format> named_block_formats[] = {
    {"mxfp8-e4m3", mxfp8_e4m3}, {"mxfp8-e5m2", mxfp8_e5m2}, {"mxfp6-e3m2", mxfp6_e3m2}, {"mxfp6-e2m3", mxfp6_e2m3},
    {"mxfp4", mxfp4},           {"mxint8", mxint8},         {"nvfp4", nvfp4},
};
/// The named block format, or nothing when `name` is not one.
inline std::optional<block_format> find_block_format(std::string_view name) {
  for (const auto& [n, f] : named_block_formats)
    if (n == name) return f;
  return std::nullopt;
}
/// Its name when it has one, else "blocks(<element>,<block size>,<scaling>)".
inline std::string to_string(const block_format& f) {
  for (const auto& [n, g] : named_block_formats)
    if (g == f) return std::string(n);
  return "blocks(" + to_string(f.element) + "," + std::to_string(f.block_size) + "," +
         (f.scaling == block_scaling::e8m0 ? "e8m0" : "e4m3*fp32") + (f.integer_elements ? ",int" : "") + ")";
}

/// Per-call options of the block kernels.
struct block_options {
  rounding mode = rounding::nearest_even;  ///< element rounding (every mode of the core)
  scale_rule rule = scale_rule::floor;     ///< MX only
  overflow on_overflow = overflow::saturate;  ///< element overflow (the MX spec saturates)
  int random_bits = 0;                     ///< stochastic: as rounding_options::random_bits
  std::uint64_t seed = 0;
  std::uint64_t index = 0;                 ///< element index of the first value of the call
  float tensor_scale = 0;                  ///< NVFP4's S_t; 0 = computed from the tensor's amax
  backend_policy backend = backend_policy::from_environment;  ///< as rounding_options::backend
};

/// Where the blocks lie. Values are a row-major rows × cols matrix (cols = 0: one row of all
/// values); axis 1 = blocks of consecutive elements along a row, axis 0 = down a column. A
/// row's (column's) last block is shorter when block_size does not divide it.
struct block_layout {
  std::size_t rows = 1;
  std::size_t cols = 0;
  int axis = 1;
  friend constexpr bool operator==(const block_layout&, const block_layout&) = default;
};

/// What one call saw. `elements` counts the scaled values V/X: overflows are the elements that
/// saturated (or became Inf), underflows the nonzero ones that became zero.
struct block_stats {
  rounding_stats elements{};
  std::uint64_t blocks = 0;
  std::uint64_t scale_clamped = 0;  ///< blocks whose scale hit the scale format's range (or NVFP4's rounded to 0)
  std::uint64_t nan_blocks = 0;     ///< blocks whose scale is NaN (a NaN or Inf inside)

  constexpr block_stats& operator+=(const block_stats& o) {
    elements += o.elements;
    blocks += o.blocks;
    scale_clamped += o.scale_clamped;
    nan_blocks += o.nan_blocks;
    return *this;
  }
  friend constexpr bool operator==(const block_stats&, const block_stats&) = default;
};

inline constexpr std::uint8_t e8m0_nan_code = 0xFF;
inline constexpr int e8m0_min_exponent = -127, e8m0_max_exponent = 127;

namespace detail {
/// Every rule's exponent is floor(log2(amax)) − emax_elem, plus one when amax's 23-bit float
/// mantissa (amax = 2^k · (1 + mantissa · 2^−23)) lies above this bound:
///   floor: never; rceil: above the element max's mantissa (amax / 2^(k − emax) would exceed
///   the max); torchao_ceil: above 0 (amax is not a power of two); torchao_even: where adding
///   half a unit of the element's last mantissa bit carries into the exponent (torchao adds
///   1 << (22 − mantissa_bits) to amax's bits and keeps the exponent).
constexpr std::uint32_t mx_mantissa_bound(const format& element, scale_rule rule) {
  constexpr std::uint32_t float_mantissa = 0x7fffffu;
  const int shift = 23 - element.mantissa_bits;
  switch (rule) {
    case scale_rule::floor: break;
    case scale_rule::rceil: return static_cast<std::uint32_t>(element.max_mantissa_field()) << shift;
    case scale_rule::torchao_ceil: return 0;
    case scale_rule::torchao_even: return float_mantissa - (std::uint32_t{1} << (shift - 1));
  }
  return float_mantissa;
}
/// The one derivation of the MX scale exponent, for one block (U = std::uint32_t) or a register
/// of blocks: `field` is amax's biased float exponent (k + 127; below 1 for a normalised
/// subnormal, wrapping as unsigned), `mantissa` its 23 mantissa bits. Wraps like `field`.
template <class U>
constexpr U mx_exponent(U field, U mantissa, std::uint32_t emax_plus_bias, std::uint32_t mantissa_bound) {
  return field - emax_plus_bias + select(mantissa > mantissa_bound, U{} + 1u, U{});
}
}  // namespace detail

/// The MX scale exponent s of a block whose largest magnitude is `amax` (finite, >= 0), and
/// whether it was clamped to −127..127.
struct mx_scale {
  int exponent = e8m0_min_exponent;
  bool clamped = false;
};
MINIFLOAT_HD constexpr mx_scale mx_scale_for(float amax, const format& element, scale_rule rule) {
  if (!(amax > 0)) return {};
  const auto bits = std::bit_cast<std::uint32_t>(amax);
  std::uint32_t field = bits >> 23, mantissa = bits & 0x7fffffu;
  if (field == 0) {  // a subnormal: normalise, so that field − 127 = floor(log2(amax)) (wrapping)
    const int width = std::bit_width(bits);
    field = static_cast<std::uint32_t>(width - 23);
    mantissa = (bits << (24 - width)) & 0x7fffffu;
  }
  const int s = static_cast<int>(detail::mx_exponent(field, mantissa, static_cast<std::uint32_t>(element.emax() + 127),
                                                     detail::mx_mantissa_bound(element, rule)));
  if (s < e8m0_min_exponent) return {e8m0_min_exponent, true};
  if (s > e8m0_max_exponent) return {e8m0_max_exponent, true};
  return {s, false};
}

namespace detail {
/// `l` with cols = 0 replaced by n, after checking the axis and that rows × cols is n (compared
/// without wrapping: rows > n / cols, not rows * cols != n, which a layout can wrap to n).
inline block_layout resolved_layout(std::size_t n, const block_layout& l, const std::string& who) {
  if (l.axis != 0 && l.axis != 1) throw std::invalid_argument(who + ": axis = " + std::to_string(l.axis) + " is not 0 or 1");
  block_layout r = l;
  if (r.cols == 0) r.cols = n;
  const bool holds = r.cols == 0 ? n == 0 : r.rows == n / r.cols && n % r.cols == 0;
  if (!holds)
    throw std::invalid_argument(who + ": layout " + std::to_string(r.rows) + " x " + std::to_string(r.cols) +
                                " does not hold " + std::to_string(n) + " values");
  return r;
}
/// Blocks of n values in a layout that holds them, blocks of b.
inline std::size_t block_count_of(std::size_t n, const block_layout& l, std::size_t b) {
  const std::size_t cols = l.cols == 0 ? n : l.cols;
  return l.axis == 1 ? l.rows * ((cols + b - 1) / b) : ((l.rows + b - 1) / b) * cols;
}
}  // namespace detail

/// Blocks of a tensor of n values in `layout`. Throws std::invalid_argument for a bad format or
/// a layout that does not hold n values.
inline std::size_t block_count(std::size_t n, const block_format& f, const block_layout& layout) {
  f.validate();
  return detail::block_count_of(n, detail::resolved_layout(n, layout, "minifloat::block_count"),
                                static_cast<std::size_t>(f.block_size));
}

/// NVFP4's per-tensor decode scale from the largest finite magnitude: amax / (6 · 448), or 1 when
/// that is not positive (every value zero or not finite).
MINIFLOAT_HD constexpr float nvfp4_tensor_scale_of_amax(float amax) {
  const float s = amax / (6.0f * 448.0f);
  return s > 0 ? s : 1.0f;
}

/// NVFP4's default per-tensor decode scale: nvfp4_tensor_scale_of_amax of the finite values.
inline float nvfp4_tensor_scale(std::span<const float> values) {
  float amax = 0;
  for (const float v : values)
    if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
  return nvfp4_tensor_scale_of_amax(amax);
}

namespace detail {

inline void check_layout(std::size_t n, const block_format& f, const block_layout& l, const char* who) {
  f.validate();
  (void)resolved_layout(n, l, who);
}

/// n values (in `values_name`), as many element codes, and one scale code per block.
inline void check_codes(std::size_t n, const char* values_name, std::size_t elements, std::size_t scales,
                        const block_format& f, const block_layout& l, const char* who) {
  if (elements != n)
    throw std::invalid_argument(std::string(who) + ": elements has " + std::to_string(elements) + " codes for the " +
                                std::to_string(n) + " values of " + values_name);
  check_layout(n, f, l, who);
  const std::size_t blocks = block_count_of(n, l, static_cast<std::size_t>(f.block_size));
  if (scales != blocks)
    throw std::invalid_argument(std::string(who) + ": scales has " + std::to_string(scales) + " codes for " +
                                std::to_string(blocks) + " blocks");
}

/// quantize_blocks' spans: as long as each other, and the same memory or apart (a partial
/// overlap would read values the call has already overwritten).
inline void check_in_out(std::span<const float> in, std::span<float> out, const char* who) {
  if (in.size() != out.size())
    throw std::invalid_argument(std::string(who) + ": in has " + std::to_string(in.size()) + " values, out " +
                                std::to_string(out.size()));
  const auto a = reinterpret_cast<std::uintptr_t>(in.data()), b = reinterpret_cast<std::uintptr_t>(out.data());
  const std::uintptr_t bytes = in.size() * sizeof(float);
  if (a != b && a < b + bytes && b < a + bytes)
    throw std::invalid_argument(std::string(who) + ": in and out overlap without being the same span (in place is allowed)");
}

/// The block's scale as the kernels use it: multiply by `to_element` (MX) or divide by
/// `from_element` (NVFP4) to get element values, multiply by `from_element` to get back.
struct block_scale {
  float to_element = 1, from_element = 1;
  std::uint8_t code = 0;
  bool nan = false, clamped = false, zero = false;
};

/// The float bit pattern of 2^e for e in −126..127 (a normal power of two), for one exponent
/// (std::uint32_t holding e modulo 2^32) or a register of them: the one place the scale's
/// exponent becomes a float.
template <class U>
MINIFLOAT_HD constexpr U normal_power_of_two_bits(U e) {
  return (e + 127u) << 23;
}

/// 2^e as a float for e in −127..127 (2^−127 is a float subnormal).
MINIFLOAT_HD constexpr float exp2_float(int e) {
  return e >= -126 ? std::bit_cast<float>(normal_power_of_two_bits(static_cast<std::uint32_t>(e)))
                   : std::bit_cast<float>(0x00400000u);
}

struct scale_finder {
  block_format f;
  scale_rule rule;
  float tensor_scale;          // NVFP4
  rounder<float> to_e4m3{e4m3, {rounding::nearest_even, overflow::saturate}};

  /// `amax_bits` = largest |value| bit pattern of the block (> Inf bits: a NaN inside).
  MINIFLOAT_HD block_scale operator()(std::uint32_t amax_bits) const {
    block_scale b;
    if (amax_bits >= 0x7f800000u) {
      b.nan = true;
      b.code = f.scaling == block_scaling::e8m0 ? e8m0_nan_code : 0x7F;
      return b;
    }
    const float amax = std::bit_cast<float>(amax_bits);
    if (f.scaling == block_scaling::e8m0) {
      const mx_scale s = mx_scale_for(amax, f.element, rule);
      b.to_element = exp2_float(-s.exponent);
      b.from_element = exp2_float(s.exponent);
      b.code = static_cast<std::uint8_t>(s.exponent + 127);
      b.clamped = s.clamped;
      return b;
    }
    const float wanted = amax / static_cast<float>(f.element.max_finite()) / tensor_scale;
    const float d = to_e4m3(wanted);
    b.code = static_cast<std::uint8_t>(detail::code_of_rounded<float>(to_e4m3.plan().fmt, std::bit_cast<std::uint32_t>(d)).code);
    b.from_element = d * tensor_scale;
    b.zero = !(b.from_element > 0);
    b.clamped = (amax > 0 && b.zero) || wanted > 448.0f;
    return b;
  }
};

/// V / X below float's range comes out of the float product (or division) as ±0. The smallest
/// float of V's sign stands in for it: a sticky bit far below every element format's smallest
/// subnormal, which the core then rounds as it would round V / X itself, in every mode (the
/// directed modes and to_odd give the element's smallest value on their side, not 0) and
/// counts as an underflow. `y_bits` are V / X's bits, `v_bits` V's; one value (host or device)
/// or a register of them.
template <class U>
constexpr U sticky_underflow(U y_bits, U v_bits) {
  const auto flushed = ((y_bits & 0x7fffffffu) == 0u) & ((v_bits & 0x7fffffffu) != 0u);
  return select(flushed, (v_bits & 0x80000000u) | 1u, y_bits);
}
/// Whether sticky_underflow can change a result: nearest and toward-zero results do not change,
/// so without counts they skip it.
template <rounding Mode, bool Count>
inline constexpr bool sticky_matters = Count || Mode == rounding::toward_positive ||
                                       Mode == rounding::toward_negative || Mode == rounding::to_odd;
/// MXINT8's elements are two's complement, which has no −0: a rounded −0 becomes +0.
template <class U>
constexpr U integer_element(U rounded) {
  return select(rounded == 0x80000000u, U{}, rounded);
}

/// Element codes of a register of rounded element values (two's complement for MXINT8).
template <class V>
inline V element_codes(const codec_plan<float>& c, V rounded, bool integer) {
  V codes = code_lanes(c, rounded);
  if (integer) codes = select((codes & 0x80u) != 0, (0u - (codes & 0x7fu)) & 0xffu, codes);
  return codes;
}

/// The largest lane of a register of unsigned lanes, by halving (a reduction tree, not a lane loop).
template <class V>
[[gnu::always_inline]] inline std::uint32_t max_lane(V v) {
  if constexpr (sizeof(V) == sizeof(std::uint32_t)) {
    return static_cast<std::uint32_t>(v[0]);
  } else {
    using H = typename vector_of<std::uint32_t, sizeof(V) / 2>::type;
    H lo, hi;
    std::memcpy(&lo, &v, sizeof(H));
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof(H), sizeof(H));
    return max_lane(lane_max(lo, hi));
  }
}

/// Lane b of the result = `op` over the lanes of v[b], for 16 registers of 16 lanes: four levels
/// of pairwise shuffles and `op` (15 shuffle pairs instead of 16 separate reductions).
template <class V, class Op>
[[gnu::always_inline]] inline V transposed16(const V (&v)[16], Op op) {
  if constexpr (sizeof(V) / sizeof(std::uint32_t) != 16) {
    (void)op;
    return V{};  // only called with 16 lanes
  } else {
    V l1[8], l2[4], l3[2];
    for (int i = 0; i < 8; ++i)  // [x partials (8) | y partials (8)]
      l1[i] = op(__builtin_shufflevector(v[2 * i], v[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                 __builtin_shufflevector(v[2 * i], v[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
    for (int i = 0; i < 4; ++i)  // four registers' partials, 4 lanes each
      l2[i] = op(__builtin_shufflevector(l1[2 * i], l1[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27),
                 __builtin_shufflevector(l1[2 * i], l1[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31));
    for (int i = 0; i < 2; ++i)  // eight registers' partials, 2 lanes each
      l3[i] = op(__builtin_shufflevector(l2[2 * i], l2[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29),
                 __builtin_shufflevector(l2[2 * i], l2[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31));
    return op(__builtin_shufflevector(l3[0], l3[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
              __builtin_shufflevector(l3[0], l3[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31));
  }
}

/// The core's path for every register of a block in a group (block_kernel), chosen from the
/// block's largest and smallest magnitudes, which show that every lane meets what the path
/// assumes. Blocks on their own let round_lanes (bulk.hpp) choose per register instead.
enum class block_path : std::uint8_t { plain, finite };

// GCC inlines the lambdas below marked [[gnu::always_inline]] (measured: without it the code
// differs); clang applies the attribute in that position to the lambda's type and warns that it
// ignores it, which would break a user's -Werror build.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wignored-attributes"
#endif
/// One kernel for all block operations. For each block: gather its values (strided for axis 0),
/// find the scale, round every element with the core, and hand the rounded register to `sink`
/// (which writes dequantized values or codes).
/// Not [[gnu::flatten]]: with 28 instantiations per sink, flattening made one test file take
/// 210 s of CPU to compile under ASan (24 s without) and bench_block 93 s at -O3 (12 s without),
/// for 2-7 % of in-cache speed; the hot lambdas below are always_inline instead.
template <rounding Mode, bool Count, bool Divide, class Sink>
void block_kernel(std::span<const float> in, const block_format& f, const block_options& o,
                  const block_layout& layout, const scale_finder& scales, Sink sink,
                  block_stats* st) {
#if !defined(__CUDA_ARCH__)  // host-only SIMD: see the note above quantize_lanes in bulk.hpp
  // `sink` is a copy (a few pointers): its output pointers then stay in registers, where a
  // reference would be reloaded after every store that might alias it.
  using V = simd_t<std::uint32_t>;
  using FV = typename vector_of<float, sizeof(V)>::type;
  constexpr std::size_t lanes = simd_lanes<std::uint32_t>;
  const rounder<float> r(f.element,
                         {Mode, o.on_overflow, o.random_bits, o.seed, o.index, flush_mode::after_rounding, o.backend});
  const rounding_plan<float> p = r.plan();
  lane_random<V> draw(r.rng());
  lane_counts<V> counts;
  const std::size_t n = in.size();
  const std::size_t rows = layout.rows, cols = layout.cols == 0 ? n : layout.cols;
  const auto B = static_cast<std::size_t>(f.block_size);
  const bool along_rows = layout.axis == 1;
  const std::size_t blocks_per_line = along_rows ? (cols + B - 1) / B : (rows + B - 1) / B;
  const std::size_t lines = along_rows ? rows : cols;
  const bool integer = f.integer_elements;
  const auto emax_plus_bias = static_cast<std::uint32_t>(f.element.emax() + 127);
  const std::uint32_t mantissa_bound = mx_mantissa_bound(f.element, scales.rule);
  // The backend, chosen once: finite registers off the single-binade shortcut take a float form
  // where the plan allows one (backends/choice.hpp): MXFP4's scaled values lie mostly in e2m1's
  // subnormal range, where the core's finite path costs about twice as much.
  const bool float_add = register_float_form(choose_bulk_backend(p, backend_offer::register_forms));
  alignas(64) float gathered[1024 + 64];
  std::uint64_t clamped = 0, nan_blocks = 0, blocks = 0;

  // V / X that underflows float: sticky_underflow.
  constexpr bool sticky = sticky_matters<Mode, Count>;
  const auto with_sticky = [](V y_bits, FV v) [[gnu::always_inline]] {
    V v_bits;
    std::memcpy(&v_bits, &v, sizeof v);
    return sticky_underflow(y_bits, v_bits);
  };

  // Rounds the m values of one block (at `values`, tensor positions first + j * stride) with
  // scale s and hands each register to the sink.
  const auto round_block = [&](const float* values, std::size_t first, std::size_t stride, std::size_t m,
                               std::size_t block_index, const block_scale& s) [[gnu::always_inline]] {
    const FV to = FV{} + s.to_element;
    const FV from = FV{} + s.from_element;
    // One register of the block; `Full` (a full register) makes loads and stores constant-size.
    const auto one_register = [&]<bool Full>(std::size_t j, std::size_t c) [[gnu::always_inline]] {
      const FV v = Full ? load_lanes<FV>(values + j) : load_lanes<FV>(values + j, c);
      FV y;
      if constexpr (Divide) y = s.zero ? v * 0.0f : v / from;  // a scale that rounded to 0: signed zeros
      else y = v * to;
      V random{};
      if constexpr (Mode == rounding::stochastic) {
        if (stride == 1) random = draw(o.index + first + j);
        else
          for (std::size_t l = 0; l < c; ++l) random[l] = r.rng().bits32(o.index + first + (j + l) * stride);
      }
      V valid = ~V{};
      if constexpr (!Full) valid = select(lane_indices<V>() < static_cast<std::uint32_t>(c), ~V{}, V{});
      V y_bits;
      std::memcpy(&y_bits, &y, sizeof y);
      if constexpr (Count && Divide)
        if (s.zero) counts.underflows -= ((load_lanes<V>(values + j, c) & 0x7fffffffu) != 0) & valid;
      if constexpr (sticky)
        if (!s.zero) y_bits = with_sticky(y_bits, v);
      V rounded = round_lanes<Mode, Count>(p, y_bits, random, counts, valid, float_add);
      if (integer) rounded = integer_element(rounded);
      sink.put(first + j * stride, stride, Full ? lanes : c, rounded, from);
    };
    std::size_t j = 0;
    for (; j + lanes <= m; j += lanes) one_register.template operator()<true>(j, lanes);
    if (j < m) one_register.template operator()<false>(j, m - j);
    sink.end_block(block_index, s.code);
  };

  // The group path's own copies of the plan and the sink, and its float-arithmetic constants: the
  // one-block lambdas above are not always inlined, so what they capture counts as escaped, and
  // the byte stores of packed codes (storage/packed_block.hpp) then forced a reload of every
  // constant after each register.
  const rounding_plan<float> group_plan = p;
  const float_add_plan<V> group_float_add = float_add ? float_add_plan<V>(p) : float_add_plan<V>{};
  const float_add_plan<V>* const group_fa = float_add ? &group_float_add : nullptr;
  Sink group_sink = sink;

  // One full register of a block of a group (below): contiguous, scaled by a power of two, on
  // the path its block's extremes allow.
  const auto group_register = [&]<block_path How>(const float* values, std::size_t first, FV to,
                                                  FV from) [[gnu::always_inline]] {
    const FV v = load_lanes<FV>(values);
    const FV y = v * to;
    V random{};
    if constexpr (Mode == rounding::stochastic) random = draw(o.index + first);
    V y_bits;
    std::memcpy(&y_bits, &y, sizeof y);
    if constexpr (sticky && How != block_path::plain) y_bits = with_sticky(y_bits, v);
    V rounded;
    if constexpr (How == block_path::plain) {
      rounded = round_bits<Mode, lane_path::plain>(group_plan, y_bits, random);  // nothing to count there
    } else {
      rounded = round_finite_lanes<Mode, Count>(group_plan, group_fa, y_bits, random, counts, ~V{});
    }
    if (integer) rounded = integer_element(rounded);
    group_sink.put(first, 1, lanes, rounded, from);
  };

  // Block k of a line (row for axis 1, column for axis 0), on its own.
  const auto one_block = [&](std::size_t line, std::size_t k) [[gnu::always_inline]] {
    const std::size_t begin = k * B;
    const std::size_t m = std::min(B, (along_rows ? cols : rows) - begin);
    // position of element j of this block in the tensor: first + j * stride
    const std::size_t first = along_rows ? line * cols + begin : begin * cols + line;
    const std::size_t stride = along_rows ? 1 : cols;
    const float* values = in.data() + first;
    if (stride != 1) {
      for (std::size_t j = 0; j < m; ++j) gathered[j] = in[first + j * stride];
      values = gathered;
    }
    const std::size_t block_index = along_rows ? line * blocks_per_line + k : k * cols + line;
    // amax as bits: |v| orders like its bit pattern, and NaN patterns lie above Inf's
    V amax{};
    std::size_t i = 0;
    for (; i + lanes <= m; i += lanes) amax = lane_max(amax, load_lanes<V>(values + i) & 0x7fffffffu);
    if (i < m) amax = lane_max(amax, load_lanes<V>(values + i, m - i) & 0x7fffffffu);
    const std::uint32_t amax_bits = max_lane(amax);
    block_scale s;
    const std::uint32_t field = amax_bits >> 23;
    if (const int e = static_cast<int>(mx_exponent(field, amax_bits & 0x7fffffu, emax_plus_bias, mantissa_bound));
        !Divide && field > 0 && field < 255 && e >= -126 && e <= 126) {
      // the common MX case inline: a normal amax, no clamping, 2^±s normal
      s.to_element = exp2_float(-e);
      s.from_element = exp2_float(e);
      s.code = static_cast<std::uint8_t>(e + 127);
    } else {
      s = scales(amax_bits);
    }
    ++blocks;
    clamped += s.clamped;
    if (s.nan) {
      ++nan_blocks;
      if constexpr (Count) {
        rounding_stats& e = st->elements;
        for (std::size_t j = 0; j < m; ++j) {
          const auto a = std::bit_cast<std::uint32_t>(values[j]) & 0x7fffffffu;
          e.nans += a > 0x7f800000u;
          e.infinities += a == 0x7f800000u;
          e.overflows += a >= 0x7f800000u;
        }
      }
      sink.nan_block(block_index, first, stride, m, s);
      return;
    }
    round_block(values, first, stride, m, block_index, s);
  };

  unsigned groups_without_look = 0;
  for (std::size_t line = 0; line < lines; ++line) {
    std::size_t k = 0;
    if constexpr (!Divide && lanes == 16) {
      // Groups of 16 full, contiguous MX blocks: their 16 largest magnitudes (and 16 smallest
      // nonzero ones) land in one register each by a transposed halving tree, and the 16 scales
      // follow in vector arithmetic. The extremes also tell, per block, which path of the core
      // fits all of its elements: the one-binade shortcut when every scaled magnitude is zero or
      // between the element format's smallest normal and its overflow threshold, else the
      // general finite path (no NaN or Inf can be inside: amax is finite). A group with an
      // unusual block (zero, NaN/Inf, float-subnormal amax, a clamped scale) takes the
      // one-block path below, block by block.
      // Looking for plain blocks costs the smallest magnitudes; after a group without one
      // (MXFP4: its scaled values mostly lie below e2m1's smallest normal) the next 8 groups
      // skip the look and round every block on the finite path: the same bits either way.
      const std::size_t full_blocks = along_rows && B % lanes == 0 ? cols / B : 0;
      for (; k + 16 <= full_blocks; k += 16) {
        const float* base = in.data() + line * cols + k * B;
        const bool look = p.plain_path && groups_without_look == 0;
        V largest[16], smallest[16];
        if (look) {
          for (std::size_t b = 0; b < 16; ++b) {
            V hi{}, lo = ~V{};
            for (std::size_t j = 0; j < B; j += lanes) {
              const V a = load_lanes<V>(base + b * B + j) & 0x7fffffffu;
              hi = lane_max(hi, a);
              lo = lane_min(lo, a - 1u);  // zero wraps to the top: the smallest nonzero, minus one
            }
            largest[b] = hi;
            smallest[b] = lo;
          }
        } else {
          for (std::size_t b = 0; b < 16; ++b) {
            V hi{};
            for (std::size_t j = 0; j < B; j += lanes) hi = lane_max(hi, load_lanes<V>(base + b * B + j) & 0x7fffffffu);
            largest[b] = hi;
          }
        }
        const V amax = transposed16(largest, [](V a, V b) { return lane_max(a, b); });
        const V field = amax >> 23;
        const V e = mx_exponent(field, amax & 0x7fffffu, emax_plus_bias, mantissa_bound);  // wrapping
        // fast when every field is 1..254 and every exponent in -126..126 (so 2^±e are normal)
        if (any_lane(select(field - 1u > 253u, ~V{}, V{}) | select(e + 126u > 252u, ~V{}, V{}))) {
          for (std::size_t b = 0; b < 16; ++b) one_block(line, k + b);
          continue;
        }
        V plain{};
        if (look) {
          const V min_field = (transposed16(smallest, [](V a, V b) { return lane_min(a, b); }) + 1u) >> 23;
          plain = select(amax - (e << 23) < p.threshold_bits, ~V{}, V{}) & select(min_field != 0u, ~V{}, V{}) &
                  select(min_field + 1024u - e >= p.emin_field + 1024u, ~V{}, V{});
          groups_without_look = any_lane(plain) ? 0 : 8;
        } else {
          groups_without_look -= groups_without_look != 0;
        }
        alignas(64) std::uint32_t to_bits[16], from_bits[16], plain_block[16];
        store_lanes(to_bits, normal_power_of_two_bits(V{} - e));
        store_lanes(from_bits, normal_power_of_two_bits(e));
        store_lanes(plain_block, plain);
        for (std::size_t b = 0; b < 16; ++b) {
          const auto to = std::bit_cast<FV>(V{} + to_bits[b]);  // broadcasts (0.0f + x would be an add)
          const auto from = std::bit_cast<FV>(V{} + from_bits[b]);
          const float* values = base + b * B;
          const std::size_t first = line * cols + (k + b) * B;
          if (plain_block[b] != 0)
            for (std::size_t j = 0; j < B; j += lanes)
              group_register.template operator()<block_path::plain>(values + j, first + j, to, from);
          else
            for (std::size_t j = 0; j < B; j += lanes)
              group_register.template operator()<block_path::finite>(values + j, first + j, to, from);
          group_sink.end_block(line * blocks_per_line + k + b, static_cast<std::uint8_t>(e[b] + 127u));
        }
        blocks += 16;
      }
    }
    for (; k < blocks_per_line; ++k) one_block(line, k);
  }
  if constexpr (Count) {
    counts.flush(st->elements, n);
    st->blocks += blocks;
    st->scale_clamped += clamped;
    st->nan_blocks += nan_blocks;
  } else {
    (void)clamped;
    (void)nan_blocks;
  }
#else
  (void)in, (void)f, (void)o, (void)layout, (void)scales, (void)sink, (void)st;
#endif
}
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

template <class Sink>
void run_block_kernel(std::span<const float> in, const block_format& f, const block_options& o,
                      const block_layout& layout, const scale_finder& scales, Sink& sink, block_stats* st) {
  if (in.empty()) return;  // no blocks, however many empty rows the layout has
  const auto go = [&]<rounding Mode>() {
    if (f.scaling == block_scaling::e4m3_times_tensor) {
      if (st != nullptr) block_kernel<Mode, true, true>(in, f, o, layout, scales, sink, st);
      else block_kernel<Mode, false, true>(in, f, o, layout, scales, sink, st);
    } else {
      if (st != nullptr) block_kernel<Mode, true, false>(in, f, o, layout, scales, sink, st);
      else block_kernel<Mode, false, false>(in, f, o, layout, scales, sink, st);
    }
  };
  with_rounding_mode(o.mode, go);
}

/// Dequantized values: element value × the block's decode scale.
struct dequantize_sink {
  float* out;
  template <class V, class FV>
  void put(std::size_t at, std::size_t stride, std::size_t count, V rounded, FV from) {
    FV value;
    std::memcpy(&value, &rounded, sizeof value);
    value *= from;
    if (stride == 1 && count == sizeof(V) / sizeof(float)) store_lanes(out + at, value);
    else if (stride == 1) store_lanes(out + at, value, count);
    else
      for (std::size_t l = 0; l < count; ++l) out[at + l * stride] = value[l];
  }
  void nan_block(std::size_t, std::size_t first, std::size_t stride, std::size_t m, const block_scale&) {
    for (std::size_t j = 0; j < m; ++j) out[first + j * stride] = std::numeric_limits<float>::quiet_NaN();
  }
  void end_block(std::size_t, std::uint8_t) {}
};

/// Writes element codes into an array of C, one per value.
template <class C>
struct code_array {
  C* elements;
  /// Lanes 0..count-1 of `codes` are the codes of tensor positions at + l * stride.
  template <class V>
  void store(std::size_t at, std::size_t stride, std::size_t count, const V& codes) {
    if (stride == 1 && count == sizeof(V) / sizeof(std::uint32_t)) store_codes(elements + at, codes, sizeof(V) / sizeof(std::uint32_t));
    else if (stride == 1) store_codes(elements + at, codes, count);
    else
      for (std::size_t l = 0; l < count; ++l) elements[at + l * stride] = static_cast<C>(codes[l]);
  }
  void fill(std::size_t first, std::size_t stride, std::size_t m, std::uint32_t code) {
    for (std::size_t j = 0; j < m; ++j) elements[first + j * stride] = static_cast<C>(code);
  }
};

/// Element codes (through `Elements`: code_array, or storage's packed words) and scale codes.
template <class Elements>
struct code_sink {
  Elements elements;
  std::uint8_t* scales;
  codec_plan<float> codec;
  bool integer;
  std::uint8_t nan_element;  // the element code of a NaN block
  template <class V, class FV>
  void put(std::size_t at, std::size_t stride, std::size_t count, V rounded, FV) {
    elements.store(at, stride, count, element_codes(codec, rounded, integer));
  }
  void nan_block(std::size_t b, std::size_t first, std::size_t stride, std::size_t m, const block_scale& s) {
    elements.fill(first, stride, m, nan_element);
    scales[b] = s.code;
  }
  void end_block(std::size_t b, std::uint8_t code) { scales[b] = code; }
};

/// The scale finder of a call; NVFP4 takes o.tensor_scale, or `default_tensor_scale` (the
/// tensor's nvfp4_tensor_scale, which the caller finds where the data lies) when that is 0.
inline scale_finder make_scale_finder(const block_format& f, const block_options& o, float default_tensor_scale) {
  float t = 1;
  if (f.scaling == block_scaling::e4m3_times_tensor) {
    t = o.tensor_scale != 0 ? o.tensor_scale : default_tensor_scale;
    if (!(t > 0) || !std::isfinite(t))
      throw std::invalid_argument("minifloat::block: tensor_scale = " + std::to_string(t) + " is not a positive finite float");
  }
  return scale_finder{f, o.rule, t};
}
inline scale_finder make_scale_finder(std::span<const float> in, const block_format& f, const block_options& o) {
  const bool needs_default = f.scaling == block_scaling::e4m3_times_tensor && o.tensor_scale == 0;
  return make_scale_finder(f, o, needs_default ? nvfp4_tensor_scale(in) : 1.0f);
}

}  // namespace detail

/// out = the block-scaled values of `in` (quantize, then dequantize, in one pass over blocks).
/// In place is allowed. Throws std::invalid_argument for a bad format, layout or size.
inline void quantize_blocks(std::span<const float> in, std::span<float> out, const block_format& f,
                            const block_options& o = {}, const block_layout& layout = {}) {
  detail::check_in_out(in, out, "minifloat::quantize_blocks");
  detail::check_layout(in.size(), f, layout, "minifloat::quantize_blocks");
  detail::dequantize_sink sink{out.data()};
  detail::run_block_kernel(in, f, o, layout, detail::make_scale_finder(in, f, o), sink, nullptr);
}
inline void quantize_blocks(std::span<const float> in, std::span<float> out, const block_format& f,
                            const block_options& o, const block_layout& layout, block_stats& st) {
  detail::check_in_out(in, out, "minifloat::quantize_blocks");
  detail::check_layout(in.size(), f, layout, "minifloat::quantize_blocks");
  detail::dequantize_sink sink{out.data()};
  detail::run_block_kernel(in, f, o, layout, detail::make_scale_finder(in, f, o), sink, &st);
}

/// `quantize(x, mxfp4)`: the bulk API's spelling of quantize_blocks, in place, one row of blocks.
inline void quantize(std::span<float> values, const block_format& f, const block_options& o = {}) {
  quantize_blocks(values, values, f, o);
}
inline void quantize(std::span<float> values, const block_format& f, const block_options& o, block_stats& st) {
  quantize_blocks(values, values, f, o, {}, st);
}

namespace detail {
/// encode_blocks after its size checks, with the element codes going to `elements` (code_array,
/// or storage/packed_block.hpp's writer of packed words, which checks its own sizes).
template <class Elements>
float encode_blocks_into(std::span<const float> in, Elements elements, std::span<std::uint8_t> scales,
                         const block_format& f, const block_options& o, const block_layout& layout, block_stats* st,
                         const char* who) {
  if (o.on_overflow != overflow::saturate && !f.element.has_infinity() && !f.element.has_nan())
    throw std::invalid_argument(std::string(who) + ": on_overflow = infinity gives values without a code in " +
                                to_string(f.element));
  const scale_finder finder = make_scale_finder(in, f, o);
  const std::uint8_t nan_element = f.element.has_nan() ? static_cast<std::uint8_t>(nan_code(f.element)) : 0;
  code_sink<Elements> sink{elements, scales.data(), make_codec_plan<float>(f.element), f.integer_elements, nan_element};
  run_block_kernel(in, f, o, layout, finder, sink, st);
  return finder.tensor_scale;
}
}  // namespace detail

/// Codes of a block-scaled tensor: one element code per value (its low bit_width() bits; MXINT8:
/// the two's-complement byte) and one scale code per block (E8M0, or NVFP4's E4M3).
/// Returns the per-tensor scale used (NVFP4), 1 for MX. A NaN block's elements get the element
/// format's NaN code, or 0 where it has none; its scale code is NaN.
template <std::unsigned_integral C>
float encode_blocks(std::span<const float> in, std::span<C> elements, std::span<std::uint8_t> scales,
                    const block_format& f, const block_options& o = {}, const block_layout& layout = {},
                    block_stats* st = nullptr) {
  constexpr const char* who = "minifloat::encode_blocks";
  detail::check_codes(in.size(), "in", elements.size(), scales.size(), f, layout, who);
  return detail::encode_blocks_into(in, detail::code_array<C>{elements.data()}, scales, f, o, layout, st, who);
}

/// The values codes stand for: element value × decoded scale (NaN where the scale is NaN).
/// Element codes are read modulo 256. NVFP4 scale codes are E4M3 codes, sign included: the
/// encoder writes only non-negative ones, and one with the sign bit set (0xB8: −1) negates its
/// block.
template <std::unsigned_integral C>
void decode_blocks(std::span<const C> elements, std::span<const std::uint8_t> scales, std::span<float> out,
                   const block_format& f, const block_layout& layout = {}, float tensor_scale = 1) {
  constexpr const char* who = "minifloat::decode_blocks";
  detail::check_codes(out.size(), "out", elements.size(), scales.size(), f, layout, who);
  if (out.empty()) return;
  // value of every element code, once
  float table[256];
  for (std::uint32_t c = 0; c < 256; ++c) {
    std::uint32_t code = c;
    if (f.integer_elements) code = (c & 0x80u) ? 0x80u | ((0u - c) & 0x7fu) : c;
    table[c] = std::bit_cast<float>(detail::bits_of_code<float>(f.element, code));  // f validated above
  }
  if (f.integer_elements) table[0x80] = -2.0f;  // k = −128: a valid code the kernels never produce
  const std::size_t n = out.size(), rows = layout.rows, cols = layout.cols == 0 ? n : layout.cols;
  const auto B = static_cast<std::size_t>(f.block_size);
  const auto scale_of = [&](std::uint8_t sc) {
    if (f.scaling == block_scaling::e8m0)
      return sc == e8m0_nan_code ? std::numeric_limits<float>::quiet_NaN() : detail::exp2_float(sc - 127);
    return std::bit_cast<float>(detail::bits_of_code<float>(e4m3, sc)) * tensor_scale;  // signed, as E4M3 is
  };
  if (layout.axis == 1) {
    const std::size_t per_row = (cols + B - 1) / B;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t k = 0; k < per_row; ++k) {
        const float scale = scale_of(scales[r * per_row + k]);
        const std::size_t begin = r * cols + k * B, end = r * cols + std::min(cols, (k + 1) * B);
        for (std::size_t i = begin; i < end; ++i) out[i] = table[elements[i] & 0xffu] * scale;
      }
  } else {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        out[r * cols + c] = table[elements[r * cols + c] & 0xffu] * scale_of(scales[(r / B) * cols + c]);
  }
}

/// The byte-code forms (what containers of std::uint8_t convert to).
inline float encode_blocks(std::span<const float> in, std::span<std::uint8_t> elements, std::span<std::uint8_t> scales,
                           const block_format& f, const block_options& o = {}, const block_layout& layout = {},
                           block_stats* st = nullptr) {
  return encode_blocks<std::uint8_t>(in, elements, scales, f, o, layout, st);
}
inline void decode_blocks(std::span<const std::uint8_t> elements, std::span<const std::uint8_t> scales,
                          std::span<float> out, const block_format& f, const block_layout& layout = {},
                          float tensor_scale = 1) {
  decode_blocks<std::uint8_t>(elements, scales, out, f, layout, tensor_scale);
}

}  // namespace minifloat
