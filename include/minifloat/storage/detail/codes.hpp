// minifloat/storage/detail/codes.hpp — block-wise float -> code conversion for the storage
// layer, through the core only: the core's SIMD quantize rounds a block, then
// minifloat::detail::code_of_rounded gives each rounded value's code. The result is the core's
// bulk encode's, bit for bit; it is about 5x faster today because bulk encode still rounds one
// value at a time (reported to the lead: once it shares quantize's kernel this becomes a call).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "../../bulk.hpp"
#include "../../encode.hpp"
#include "../../round.hpp"

namespace minifloat::storage::detail {

/// Values per block of the storage kernels: a multiple of 32, so that every block starts on a
/// word boundary of a packed array of any width.
inline constexpr std::size_t block_values = 512;

/// codes[i] = code of in[i] rounded by r (element index r.first_index() + i), for in.size() <=
/// block_values. Throws std::domain_error naming element `first + i` when a value has no code.
inline void encode_block(std::span<const float> in, std::uint32_t* codes, const rounder<float>& r, std::size_t first) {
  float rounded[block_values];
  const std::span<float> out(rounded, in.size());
  quantize(in, out, r);
  const format& f = r.plan().fmt;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const code_result c = minifloat::detail::code_of_rounded<float>(f, std::bit_cast<std::uint32_t>(rounded[i]));
    if (!c.representable)
      throw std::domain_error("minifloat::storage: element " + std::to_string(first + i) + " has no code in " +
                              to_string(f) + " (NaN or an infinity)");
    codes[i] = static_cast<std::uint32_t>(c.code);
  }
}

}  // namespace minifloat::storage::detail
