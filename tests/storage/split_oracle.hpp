// The scalar core's split of one value (the oracle of the byte-wide split kernels and of the
// optimizers' one-pass path over them) and values that reach every branch of a split.
#pragma once

#include <minifloat/minifloat.hpp>
#include <minifloat/storage/split.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace split_oracle {

namespace ms = minifloat::storage;
using minifloat::format;

/// The fields one value takes in a split, from the scalar core alone (encode of x rounded toward
/// zero to the restored format, and of x rounded stochastically with element index `index`):
/// the oracle of the byte-wide kernels.
inline std::pair<std::uint64_t, std::uint64_t> scalar_fields(const ms::split_layout& l, float x, std::uint64_t seed,
                                                             std::uint64_t index) {
  const format restored = l.restored();
  const int kept = l.kept_bits();
  const std::uint64_t kept_mask = (std::uint64_t{1} << kept) - 1;
  float source = x;
  if (l.visible.encoding == minifloat::specials::nan_only && std::isfinite(x)) {
    // beyond the largest pair value: that value (R's codes above it are not pairs)
    const format& f = l.visible;
    const std::uint64_t max_pair = (((static_cast<std::uint64_t>(f.max_exponent_field()) << f.mantissa_bits) | f.max_mantissa_field())
                                    << kept) | kept_mask;
    const float limit = minifloat::decode(max_pair, restored);
    if (std::fabs(x) > limit) source = std::copysign(limit, x);
  }
  const std::uint64_t code =
      minifloat::encode(source, restored, {minifloat::rounding::toward_zero, minifloat::overflow::infinity});
  const std::uint64_t truncated = code >> kept;
  if (l.mode == ms::split_mode::truncate) return {truncated, code & kept_mask};
  const std::uint64_t h = std::isfinite(x) ? minifloat::encode(x, l.visible, {minifloat::rounding::stochastic,
                                                                              minifloat::overflow::saturate, 0, seed,
                                                                              index})
                                           : truncated;
  return {h, (std::uint64_t{h != truncated} << kept) | (code & kept_mask)};
}

/// Values that reach every branch of a split: signed zeros, float and format subnormals, each
/// format's extremes and the values just beyond, NaN and Inf (when the format stores them), then
/// random bit patterns and normal values, n in all.
inline std::vector<float> split_specials(const ms::split_layout& l, std::size_t n, std::mt19937& gen) {
  const format& f = l.visible;
  const format restored = l.restored();
  std::vector<float> x{0.0f, -0.0f, 1e-45f, -1e-45f, std::numeric_limits<float>::min(), -1.0f, 1.0f};
  const float visible_min_sub = static_cast<float>(std::ldexp(1.0, f.emin() - f.mantissa_bits));
  const float restored_min_sub = static_cast<float>(std::ldexp(1.0, restored.emin() - restored.mantissa_bits));
  const float visible_min_normal = static_cast<float>(std::ldexp(1.0, f.emin()));
  const auto max_visible = static_cast<float>(f.max_finite());
  for (const float v : {visible_min_sub, restored_min_sub, visible_min_normal, max_visible,
                        static_cast<float>(restored.max_finite())})
    for (const float scale : {0.25f, 0.5f, 0.75f, 1.0f, 1.5f, 1.9999f, 2.0f, 3.0f})
      for (const float sign : {1.0f, -1.0f}) x.push_back(sign * v * scale);
  x.push_back(std::numeric_limits<float>::max());
  x.push_back(-std::numeric_limits<float>::max());
  if (f.encoding != minifloat::specials::all_finite) {
    for (const std::uint32_t b : {0x7f800000U, 0xff800000U, 0x7fc00000U, 0xffc00000U, 0x7f800001U, 0xffc12345U})
      x.push_back(std::bit_cast<float>(b));
  }
  std::uniform_int_distribution<std::uint32_t> bits;
  std::normal_distribution<float> normal(0.0f, 0.05f);
  while (x.size() < n) {
    const float r = x.size() % 2 == 0 ? std::bit_cast<float>(bits(gen)) : normal(gen);
    if (f.encoding == minifloat::specials::all_finite && !std::isfinite(r)) continue;
    x.push_back(r);
  }
  std::shuffle(x.begin() + 32, x.end(), gen);  // some specials at odd positions and in the tail
  return x;
}

}  // namespace split_oracle
