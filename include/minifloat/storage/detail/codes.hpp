// minifloat/storage/detail/codes.hpp — block-wise float -> code conversion for the storage
// layer: the core's SIMD bulk encode, with errors reported by absolute element index.
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
  const std::size_t bad = try_encode(in, std::span<std::uint32_t>(codes, in.size()), r);
  if (bad < in.size())
    throw std::domain_error("minifloat::storage: element " + std::to_string(first + bad) + " has no code in " +
                            to_string(r.plan().fmt) + " (NaN or an infinity)");
}

}  // namespace minifloat::storage::detail
