// minifloat/storage/gecko_tensor.hpp — a whole fp32 tensor in one buffer: per value the sign, the
// top n mantissa bits, and the exponent field compressed with Gecko (Schrödinger's FP §3.3; the
// mantissa cut to n bits as its QM / BitWave containers do, §3.1-3.2 and §4; our reading in
// docs/semantics.md §7).
//
// Buffer layout (docs/gecko.md has the diagram):
//   [16-byte header: "GECK", version 1, variant, n, flags, count as uint64 little-endian]
//   [count fields of n + 1 bits: sign << n | top n mantissa bits, LSB-first, zero-padded to a byte]
//   [the Gecko exponent stream of the variant (gecko.hpp)]
//   [flags bit 0 set (the default): CRC-32 (zlib's crc32) of every byte before it, 4 bytes LE]
// The checksum makes corruption an error: without it most bit flips in the body decode to wrong
// values of the right size. Every single-bit (indeed every burst up to 32 bits) error is caught.
// The dropped mantissa bits are truncated (default), or the tensor is first rounded to fp(8, n)
// with the core's minifloat::round under any rounding_options. n = 23 with truncation is
// bit-exact for every float, NaN payloads included.
//
// Errors follow gecko.hpp: encoders throw (std::invalid_argument for bad options,
// std::length_error for a short output buffer, std::domain_error for a NaN when n = 0), decoders
// return a gecko_errc and never read or write outside their spans.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <zlib.h>

#include "../format.hpp"
#include "../round.hpp"
#include "gecko.hpp"

namespace minifloat::storage {

struct gecko_tensor_options {
  gecko_variant variant = gecko_variant::faithful;
  int mantissa_bits = 23;  ///< n, the mantissa bits kept: 0..23
  /// How the dropped mantissa bits go. toward_zero truncates the bits directly; any other mode
  /// rounds each value to fp(8, n) (ieee_format(8, n), so n >= 1) with minifloat::round first,
  /// which may carry into the exponent.
  rounding_options mantissa_rounding{rounding::toward_zero};
  /// Appends a CRC-32 of the buffer, which the decoder checks (gecko_errc::bad_checksum).
  bool checksum = true;
};

/// What a tensor buffer's header says.
struct gecko_tensor_header {
  gecko_variant variant = gecko_variant::faithful;
  int mantissa_bits = 23;
  std::uint64_t count = 0;
  bool checksum = false;  ///< the buffer ends with a CRC-32 of everything before it
};

/// A decoded tensor, or the reason there is none (values then empty).
struct gecko_tensor_decoded {
  gecko_errc status = gecko_errc::ok;
  std::vector<float> values;
};

namespace detail::gecko {

inline constexpr std::array<std::uint8_t, 4> tensor_magic{'G', 'E', 'C', 'K'};
inline constexpr std::uint8_t tensor_version = 1;
inline constexpr std::size_t tensor_header_bytes = 16;
inline constexpr std::uint8_t tensor_flag_checksum = 1;  ///< header byte 7
inline constexpr std::size_t checksum_bytes = 4;

/// zlib's CRC-32 of bytes (any length: crc32_z takes a size_t).
inline std::uint32_t crc32_of(std::span<const std::uint8_t> bytes) noexcept {
  return static_cast<std::uint32_t>(::crc32_z(::crc32_z(0L, Z_NULL, 0), bytes.data(), bytes.size()));
}

/// Bytes of the sign/mantissa section: count fields of n + 1 bits. Callers bound count first.
constexpr std::uint64_t mantissa_section_bytes(std::uint64_t count, int n) {
  const auto k = static_cast<std::uint64_t>(n + 1);
  return count / 8 * k + ((count % 8) * k + 7) / 8;
}

inline void check_options(const gecko_tensor_options& o) {
  if (o.variant != gecko_variant::faithful && o.variant != gecko_variant::improved)
    throw std::invalid_argument("minifloat::gecko_tensor_options: unknown variant");
  if (o.mantissa_bits < 0 || o.mantissa_bits > 23)
    throw std::invalid_argument("minifloat::gecko_tensor_options: mantissa_bits = " +
                                std::to_string(o.mantissa_bits) + " is outside 0..23");
  if (o.mantissa_rounding.mode != rounding::toward_zero && o.mantissa_bits == 0)
    throw std::invalid_argument(
        "minifloat::gecko_tensor_options: rounding to 0 mantissa bits is only supported as truncation "
        "(fp(8, 0) has no IEEE encoding)");
}

/// The tensor rounded to fp(8, n) by the core, for the modes other than truncation (truncation
/// works on the input directly: it keeps every exponent).
inline std::vector<float> rounded_copy(std::span<const float> values, const gecko_tensor_options& o) {
  const rounder<float> r(ieee_format(8, o.mantissa_bits), o.mantissa_rounding);
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = r(values[i], o.mantissa_rounding.index + i);
  return out;
}

/// With no mantissa bits a NaN has no code: throws std::domain_error naming the first one.
inline void check_no_nan(std::span<const float> values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if ((std::bit_cast<std::uint32_t>(values[i]) & 0x7FFFFFFFU) > 0x7F800000U)
      throw std::domain_error("minifloat::gecko_encode_tensor: element " + std::to_string(i) +
                              " is a NaN, which has no code with 0 mantissa bits");
}

inline void put_u64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t{p[i]} << (8 * i);
  return v;
}

/// Field of n + 1 bits for the fp32 bits u: sign << n | top n mantissa bits. A NaN whose kept
/// bits are all zero gets the top one set, so that it stays a NaN (n >= 1; check_no_nan guards
/// n = 0). The exponent field is unchanged, so the exponent stream is that of the input.
constexpr std::uint64_t mantissa_field(std::uint32_t u, int n) {
  const std::uint32_t kept = n == 0 ? 0 : (u >> (23 - n)) & ((std::uint32_t{1} << n) - 1);
  const bool lost_nan = (u & 0x7FFFFFFFU) > 0x7F800000U && kept == 0 && n > 0;
  return (std::uint64_t{u >> 31} << n) | kept | (lost_nan ? std::uint64_t{1} << (n - 1) : 0);
}

/// Encodes values whose dropped bits are to be truncated (the input, or its rounded copy).
inline std::size_t encode_values(std::span<const float> values, std::span<std::uint8_t> out,
                                 const gecko_tensor_options& o) {
  const int n = o.mantissa_bits;
  const std::uint64_t section = mantissa_section_bytes(values.size(), n);
  if (out.size() < tensor_header_bytes + section) throw_too_small();
  std::uint8_t* const base = out.data();
  std::memcpy(base, tensor_magic.data(), 4);
  base[4] = tensor_version;
  base[5] = static_cast<std::uint8_t>(o.variant);
  base[6] = static_cast<std::uint8_t>(n);
  base[7] = o.checksum ? tensor_flag_checksum : 0;
  put_u64(base + 8, values.size());
  const auto k = static_cast<unsigned>(n + 1);
  const auto field = [&](std::size_t i) { return mantissa_field(std::bit_cast<std::uint32_t>(values[i]), n); };
  std::uint8_t* const mantissas = base + tensor_header_bytes;
  bit_writer writer(mantissas, mantissas + section);
  std::size_t i = 0;
  for (; i + 2 <= values.size(); i += 2) writer.put(field(i) | (field(i + 1) << k), 2 * k);  // 2k <= 48 bits
  if (i < values.size()) writer.put(field(i), k);
  writer.finish();
  const std::size_t head = tensor_header_bytes + static_cast<std::size_t>(section);
  const std::size_t end = head + gecko_encode_exponents(values, out.subspan(head), o.variant);
  if (!o.checksum) return end;
  if (out.size() - end < checksum_bytes) throw_too_small();
  const std::uint32_t crc = crc32_of(out.first(end));
  for (std::size_t b = 0; b < checksum_bytes; ++b) out[end + b] = static_cast<std::uint8_t>(crc >> (8 * b));
  return end + checksum_bytes;
}

}  // namespace detail::gecko

/// The exact size gecko_encode_tensor produces. `bits`: 128 header bits + count * (n + 1) +
/// the exponent stream's bits; `bytes`: the buffer length.
inline gecko_size gecko_tensor_encoded_size(std::span<const float> values, const gecko_tensor_options& o = {}) {
  namespace gk = detail::gecko;
  gk::check_options(o);
  gecko_size e;
  if (o.mantissa_rounding.mode == rounding::toward_zero) {
    if (o.mantissa_bits == 0) gk::check_no_nan(values);
    e = gecko_encoded_size(values, o.variant);
  } else {
    e = gecko_encoded_size(gk::rounded_copy(values, o), o.variant);
  }
  const auto k = static_cast<std::uint64_t>(o.mantissa_bits + 1);
  const std::uint64_t trailer = o.checksum ? gk::checksum_bytes : 0;
  return {8 * (gk::tensor_header_bytes + trailer) + values.size() * k + e.bits,
          gk::tensor_header_bytes + gk::mantissa_section_bytes(values.size(), o.mantissa_bits) + e.bytes + trailer};
}

/// Encodes `values` into `out`, returns the bytes written. Throws std::length_error when `out`
/// is smaller than gecko_tensor_encoded_size(values, o).bytes.
inline std::size_t gecko_encode_tensor(std::span<const float> values, std::span<std::uint8_t> out,
                                       const gecko_tensor_options& o = {}) {
  namespace gk = detail::gecko;
  gk::check_options(o);
  if (o.mantissa_rounding.mode != rounding::toward_zero) return gk::encode_values(gk::rounded_copy(values, o), out, o);
  if (o.mantissa_bits == 0) gk::check_no_nan(values);
  return gk::encode_values(values, out, o);
}

inline std::vector<std::uint8_t> gecko_encode_tensor(std::span<const float> values, const gecko_tensor_options& o = {}) {
  namespace gk = detail::gecko;
  gk::check_options(o);
  const auto encode = [&](std::span<const float> v) {
    std::vector<std::uint8_t> out(gk::tensor_header_bytes + gk::mantissa_section_bytes(v.size(), o.mantissa_bits) +
                                  gecko_encoded_size(v, o.variant).bytes + (o.checksum ? gk::checksum_bytes : 0));
    gk::encode_values(v, out, o);
    return out;
  };
  if (o.mantissa_rounding.mode != rounding::toward_zero) return encode(gk::rounded_copy(values, o));
  if (o.mantissa_bits == 0) gk::check_no_nan(values);
  return encode(values);
}

/// Validates the header and the sizes it implies (not the sections' contents).
[[nodiscard]] inline gecko_errc gecko_read_tensor_header(std::span<const std::uint8_t> buffer,
                                                         gecko_tensor_header& header) noexcept {
  namespace gk = detail::gecko;
  if (buffer.size() < gk::tensor_header_bytes) {
    // A prefix of a valid header is truncated; anything else is not a Gecko tensor.
    for (std::size_t i = 0; i < std::min<std::size_t>(buffer.size(), 4); ++i)
      if (buffer[i] != gk::tensor_magic[i]) return gecko_errc::bad_magic;
    return gecko_errc::truncated;
  }
  const std::uint8_t* const p = buffer.data();
  if (std::memcmp(p, gk::tensor_magic.data(), 4) != 0) return gecko_errc::bad_magic;
  if (p[4] != gk::tensor_version) return gecko_errc::bad_version;
  if (p[5] > 1) return gecko_errc::bad_variant;
  if (p[6] > 23) return gecko_errc::bad_mantissa_bits;
  if ((p[7] & ~gk::tensor_flag_checksum) != 0) return gecko_errc::bad_reserved;
  const bool checksum = (p[7] & gk::tensor_flag_checksum) != 0;
  const std::size_t trailer = checksum ? gk::checksum_bytes : 0;
  if (buffer.size() < gk::tensor_header_bytes + trailer) return gecko_errc::truncated;
  const std::uint64_t count = gk::get_u64(p + 8);
  const int n = p[6];
  // Each value takes n + 1 bits of the mantissa section: a larger count cannot be in the buffer.
  if (count > (buffer.size() - gk::tensor_header_bytes - trailer) * std::uint64_t{8} / static_cast<std::uint64_t>(n + 1))
    return gecko_errc::truncated;
  header = {static_cast<gecko_variant>(p[5]), n, count, checksum};
  return gecko_errc::ok;
}

/// Decodes a tensor buffer into `out`, whose size must equal the stored count
/// (gecko_read_tensor_header gives it). Never throws.
[[nodiscard]] inline gecko_errc gecko_decode_tensor(std::span<const std::uint8_t> buffer, std::span<float> out) noexcept {
  namespace gk = detail::gecko;
  gecko_tensor_header h;
  if (const gecko_errc e = gecko_read_tensor_header(buffer, h); e != gecko_errc::ok) return e;
  if (out.size() != h.count) return gecko_errc::output_size_mismatch;
  if (h.checksum) {  // checked before any section is read: a corrupted body is refused whole
    const std::size_t end = buffer.size() - gk::checksum_bytes;
    std::uint32_t stored = 0;
    for (std::size_t b = 0; b < gk::checksum_bytes; ++b) stored |= std::uint32_t{buffer[end + b]} << (8 * b);
    if (gk::crc32_of(buffer.first(end)) != stored) return gecko_errc::bad_checksum;
    buffer = buffer.first(end);
  }
  const std::size_t count = out.size();
  const int n = h.mantissa_bits;
  const auto k = static_cast<unsigned>(n + 1);
  const auto section = static_cast<std::size_t>(gk::mantissa_section_bytes(count, n));
  const std::uint8_t* const mantissas = buffer.data() + gk::tensor_header_bytes;
  // Exponents first, into the output's storage: byte i sits at or below float i's bytes, so
  // widening from the end never overwrites a byte not yet read.
  const std::span<std::uint8_t> exps(reinterpret_cast<std::uint8_t*>(out.data()), count);
  if (const gecko_errc e =
          gecko_decode_exponents(buffer.subspan(gk::tensor_header_bytes + section), count, exps, h.variant);
      e != gecko_errc::ok)
    return e;
  const std::uint64_t used_bits = std::uint64_t{count} * k;
  if (used_bits % 8 != 0 && (mantissas[section - 1] >> (used_bits % 8)) != 0) return gecko_errc::bad_padding;
  const std::uint64_t field_mask = (std::uint64_t{1} << k) - 1;
  const auto value_bits = [&](std::uint64_t f, std::uint32_t exponent) {
    return static_cast<std::uint32_t>(((f >> n) << 31) | (std::uint64_t{exponent} << 23) |
                                      ((f & (field_mask >> 1)) << (23 - n)));
  };
  // Groups of 8 values own k whole bytes, so field j of a group sits at the same byte and bit
  // offset in every group. Backwards, as the exponents share the output's storage.
  std::array<unsigned, 8> at{}, shift{};
  for (unsigned j = 0; j < 8; ++j) {
    at[j] = j * k / 8;
    shift[j] = j * k % 8;
  }
  std::size_t i = count;
  // The final partial group and any group within 8 bytes of the section's end: checked reads.
  while (i > 0 && (i % 8 != 0 || (i / 8 - 1) * k + at[7] + 8 > section)) {
    --i;
    const std::uint64_t f = gk::read_bits(mantissas, section, std::uint64_t{i} * k, k);
    const std::uint32_t bits = value_bits(f, exps[i]);
    std::memcpy(out.data() + i, &bits, sizeof bits);
  }
  for (std::size_t g = i / 8; g-- > 0;) {
    const std::uint8_t* const fields = mantissas + g * k;
    const std::uint64_t e = gk::load64(exps.data() + 8 * g);  // read before the stores below cover it
    std::array<std::uint32_t, 8> bits;
    for (unsigned j = 0; j < 8; ++j)
      bits[j] = value_bits((gk::load64(fields + at[j]) >> shift[j]) & field_mask, static_cast<std::uint8_t>(e >> (8 * j)));
    std::memcpy(out.data() + 8 * g, bits.data(), sizeof bits);
  }
  return gecko_errc::ok;
}

inline gecko_tensor_decoded gecko_decode_tensor(std::span<const std::uint8_t> buffer) {
  gecko_tensor_decoded r;
  gecko_tensor_header h;
  if ((r.status = gecko_read_tensor_header(buffer, h)) != gecko_errc::ok) return r;
  r.values.resize(static_cast<std::size_t>(h.count));
  if ((r.status = gecko_decode_tensor(buffer, r.values)) != gecko_errc::ok) r.values.clear();
  return r;
}

}  // namespace minifloat::storage
