// minifloat/decode_accumulate.hpp — sums of values that arrive as codes: decode and add in one
// pass over the sum, as the receiving side of a quantize-exchange-sum all-reduce does (every rank
// holds each rank's codes and adds their values in fp32, in rank order).
//
// Decoding is bulk.hpp's (the one codec); what this header adds is the order of work: the sum is
// cut into chunks small enough to stay in cache while every contribution's chunk is decoded into
// a buffer and added, so the sum is written once instead of once per contribution, and no
// (contributions × n) array of decoded values is ever made. The additions are those of
// `v_0 + v_1 + ... + v_{k-1}` evaluated left to right in S, element by element.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "bulk.hpp"
#include "format.hpp"

namespace minifloat {

/// Elements per chunk of sum_decoded by default: a chunk of the sum and one contribution's chunk
/// (2 × 32 KiB of float) stay in a core's L2 cache.
inline constexpr std::size_t decode_sum_chunk = 8192;

/// out[i] = v_0[i] + v_1[i] + ... + v_{k-1}[i], added in S left to right, where
/// decode_into(r, start, dst) writes the values of contribution r's elements start ..
/// start + dst.size() - 1 into dst; it is called with starts that are multiples of `chunk`
/// (block formats pass a multiple of their block size). k = 0 leaves zeros. out is written once,
/// chunk by chunk.
template <std::floating_point S, class DecodeInto>
void sum_decoded(std::span<S> out, std::size_t contributions, std::size_t chunk, DecodeInto decode_into) {
  if (chunk == 0) throw std::invalid_argument("minifloat::sum_decoded: chunk must be positive");
  if (contributions == 0) {
    std::fill(out.begin(), out.end(), S{0});
    return;
  }
  std::vector<S> buffer(std::min(chunk, out.size()));
  for (std::size_t start = 0; start < out.size(); start += chunk) {
    const std::size_t n = std::min(chunk, out.size() - start);
    const std::span<S> sum = out.subspan(start, n);
    const std::span<S> values(buffer.data(), n);
    decode_into(std::size_t{0}, start, sum);  // the sum starts at v_0, not at 0 + v_0 (which turns -0 into +0)
    for (std::size_t r = 1; r < contributions; ++r) {
      decode_into(r, start, values);
      for (std::size_t i = 0; i < n; ++i) sum[i] += values[i];
    }
  }
}

/// The values in S of the 256 byte codes 0..255 of f (bits above its width ignored), decoded by
/// bulk.hpp's decode: for byte codes a lookup replaces the per-value layout change.
template <std::floating_point S>
std::array<S, 256> byte_code_values(const format& f) {
  std::array<std::uint8_t, 256> codes{};
  for (std::size_t c = 0; c < codes.size(); ++c) codes[c] = static_cast<std::uint8_t>(c);
  std::array<S, 256> values{};
  decode(std::span<const std::uint8_t>(codes), std::span<S>(values), f);
  return values;
}

/// out[i] = the sum, left to right in S, of the values in f of contributions[r][i] for r = 0, 1,
/// ... (every contribution as long as out). Bits above the format's width are ignored, as
/// decode ignores them.
template <std::floating_point S, std::unsigned_integral C>
void decode_sum(std::span<const std::span<const C>> contributions, std::span<S> out, const format& f) {
  for (std::size_t r = 0; r < contributions.size(); ++r)
    if (contributions[r].size() != out.size())
      throw std::invalid_argument("minifloat::decode_sum: contribution " + std::to_string(r) + " has " +
                                  std::to_string(contributions[r].size()) + " codes for " + std::to_string(out.size()) +
                                  " sums");
  if constexpr (sizeof(C) == 1) {
    const std::array<S, 256> values = byte_code_values<S>(f);
    sum_decoded(out, contributions.size(), decode_sum_chunk, [&](std::size_t r, std::size_t start, std::span<S> dst) {
      const C* codes = contributions[r].data() + start;
      for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = values[codes[i]];
    });
  } else {
    sum_decoded(out, contributions.size(), decode_sum_chunk, [&](std::size_t r, std::size_t start, std::span<S> dst) {
      decode(contributions[r].subspan(start, dst.size()), dst, f);
    });
  }
}

}  // namespace minifloat
