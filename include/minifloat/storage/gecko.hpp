// minifloat/storage/gecko.hpp — Gecko: lossless compression of the fp32 exponent fields of a tensor
// (Schrödinger's FP, Nikolić et al., §3.3 "Exponent: Gecko(+G)"; our reading in
// docs/semantics.md §7).
//
// Two variants, chosen by gecko_variant:
//  - faithful: groups of 8 values; each exponent field E is stored as d = E - 127 in the smallest
//    two's-complement width w in [1, 7] that holds every d of the group; a 3-bit header holds
//    w - 1, and header 7 is an escape meaning 8 raw bits per value. Group footprint 3 + 8w bits.
//  - improved (ours): a per-tensor base exponent chosen to minimise the size instead of 127, and
//    a zero bitmap instead of the escape for groups holding E = 0 (ReLU zeros).
// Both are lossless for every input: zero, subnormals, Inf and NaN keep their exponent field.
// docs/gecko.md gives the exact bitstream layouts, the error behaviour and measured sizes.
//
// Errors: encoders throw std::length_error when the caller's buffer is too small (a programming
// error) and std::invalid_argument for an unknown variant; decoders read untrusted bytes and never throw: they return a gecko_errc, read and write
// only inside the spans they are given, and reject truncated, over-long and non-canonically
// padded input. On an error the output's contents are unspecified.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "detail/gecko_kernels.hpp"

namespace minifloat::storage {

enum class gecko_variant : std::uint8_t {
  faithful = 0,  ///< the paper's codec: bias 127, 3-bit width header, escape for E = 0 / 255
  improved = 1,  ///< ours: per-tensor base, 4-bit header with a zero-bitmap flag
};

/// What a decoder found wrong with its input. `ok` is zero, so `if (e != gecko_errc::ok)` or
/// `if (e == gecko_errc{})` both read naturally.
enum class gecko_errc : std::uint8_t {
  ok = 0,
  truncated,          ///< the buffer ends before the encoding it describes
  trailing_bytes,     ///< the buffer continues after the encoding ends
  bad_padding,        ///< padding bits or the padding values of a final partial group are not canonical
  output_too_small,   ///< the output span holds fewer than `count` elements
  output_size_mismatch,  ///< tensor decode: the output span's size differs from the stored count
  bad_magic,          ///< tensor: the buffer does not start with the Gecko tensor magic
  bad_version,        ///< tensor: an unknown format version
  bad_variant,        ///< tensor: an unknown gecko_variant
  bad_mantissa_bits,  ///< tensor: mantissa bits outside 0..23
  bad_reserved,       ///< tensor: a reserved header byte is not zero
  bad_count,          ///< tensor: the stored count cannot fit in the buffer
  bad_checksum,       ///< tensor: the CRC-32 of the buffer differs from the one stored with it
};

constexpr std::string_view gecko_message(gecko_errc e) noexcept {
  switch (e) {
    case gecko_errc::ok: return "ok";
    case gecko_errc::truncated: return "gecko: buffer truncated";
    case gecko_errc::trailing_bytes: return "gecko: bytes after the end of the encoding";
    case gecko_errc::bad_padding: return "gecko: non-canonical padding";
    case gecko_errc::output_too_small: return "gecko: output span smaller than the value count";
    case gecko_errc::output_size_mismatch: return "gecko: output span size differs from the stored count";
    case gecko_errc::bad_magic: return "gecko: not a Gecko tensor (bad magic)";
    case gecko_errc::bad_version: return "gecko: unknown format version";
    case gecko_errc::bad_variant: return "gecko: unknown variant";
    case gecko_errc::bad_mantissa_bits: return "gecko: mantissa bits outside 0..23";
    case gecko_errc::bad_reserved: return "gecko: reserved header bytes are not zero";
    case gecko_errc::bad_count: return "gecko: stored count does not fit the buffer";
    case gecko_errc::bad_checksum: return "gecko: checksum mismatch (the buffer is corrupted)";
  }
  return "gecko: unknown error";
}

/// An encoding's size. `bits` counts the information the format defines (faithful: the paper's
/// sum of 3 + 8w per group; improved: base byte + headers + bitmaps + payload bits); `bytes` is
/// the buffer length, which adds the zero padding that byte-aligns each section.
struct gecko_size {
  std::uint64_t bits = 0;
  std::uint64_t bytes = 0;
  friend constexpr bool operator==(const gecko_size&, const gecko_size&) = default;
};

namespace detail::gecko {

constexpr std::size_t group_count(std::size_t count) { return count / 8 + (count % 8 != 0); }
constexpr std::size_t faithful_header_bytes(std::size_t groups) {
  return groups / 8 * 3 + (3 * (groups % 8) + 7) / 8;
}
constexpr std::size_t improved_header_bytes(std::size_t groups) { return groups / 2 + (groups & 1); }

/// Encoders refuse a variant they do not know rather than fall back to one.
constexpr void check_variant(gecko_variant v) {
  if (v != gecko_variant::faithful && v != gecko_variant::improved)
    throw std::invalid_argument("minifloat::gecko: unknown variant " + std::to_string(static_cast<unsigned>(v)));
}

[[noreturn]] inline void throw_too_small() {
  throw std::length_error("minifloat::gecko: output buffer smaller than the encoding");
}

// ---------------------------------------------------------------------------------------------
// Faithful Gecko
// ---------------------------------------------------------------------------------------------

/// Width code of group g of v (a final partial group is padded with E = 127, i.e. d = 0).
inline unsigned faithful_group_code(std::span<const float> v, std::size_t g, std::uint64_t& exps) noexcept {
  const std::size_t first = 8 * g;
  const std::size_t r = std::min<std::size_t>(8, v.size() - first);
  unsigned magnitude_or;
  if (r == 8) {
    exps = group_exponents(v.data() + first, 127, magnitude_or);
  } else {
    std::array<float, 8> padded;
    padded.fill(1.0F);
    std::memcpy(padded.data(), v.data() + first, r * sizeof(float));
    exps = group_exponents(padded.data(), 127, magnitude_or);
  }
  return width_codes[magnitude_or];
}

inline gecko_size faithful_size(std::span<const float> v) noexcept {
  const std::size_t groups = group_count(v.size());
  std::uint64_t payload = 0;
  std::uint64_t exps;
  for (std::size_t g = 0; g < groups; ++g) payload += faithful_encode_codes[faithful_group_code(v, g, exps)].bytes;
  return {3 * std::uint64_t{groups} + 8 * payload, faithful_header_bytes(groups) + payload};
}

/// Layout: [3-bit headers of all groups, LSB-first, zero-padded to a byte][payload of group 0]
/// [payload of group 1]... where a group's payload is its 8 fields of w bits, field i at bits
/// [i*w, i*w + w) of a w-byte little-endian integer (8 bytes of raw E for the escape).
inline std::size_t faithful_encode(std::span<const float> v, std::span<std::uint8_t> out) {
  const std::size_t groups = group_count(v.size());
  const std::size_t header_bytes = faithful_header_bytes(groups);
  if (out.size() < header_bytes) throw_too_small();
  std::uint8_t* const base = out.data();
  std::uint8_t* q = base + header_bytes;
  const std::uint8_t* const end = base + out.size();
  const float* const src = v.data();

  // Blocks of 8 groups own 3 whole header bytes; while 64 bytes of room remain every group can
  // store a full word without bounds checks.
  const std::size_t blocks = v.size() / 64;
  std::size_t b = 0;
  for (; b < blocks && end - q >= 64; ++b) {
    std::uint32_t header_word = 0;
    for (int j = 0; j < 8; j += 2) {
      u64x2 exps, ors;
      exponent_pair(src + 64 * b + 8 * j, 127, exps, ors);
      for (int k = 0; k < 2; ++k) {
        const unsigned h = width_codes[ors[k]];
        const faithful_encode_code& c = faithful_encode_codes[h];
        store64(q, gather_fields(exps[k] + c.add, static_cast<int>(c.width), c.mask));
        q += c.bytes;
        header_word |= h << (3 * (j + k));
      }
    }
    std::memcpy(base + 3 * b, &header_word, 3);
  }
  if (header_bytes > 3 * b) std::memset(base + 3 * b, 0, header_bytes - 3 * b);
  for (std::size_t g = 8 * b; g < groups; ++g) {
    std::uint64_t exps;
    const unsigned h = faithful_group_code(v, g, exps);
    const faithful_encode_code& c = faithful_encode_codes[h];
    if (static_cast<std::size_t>(end - q) < c.bytes) throw_too_small();
    const std::uint64_t packed = gather_fields(exps + c.add, static_cast<int>(c.width), c.mask);
    std::memcpy(q, &packed, c.bytes);
    q += c.bytes;
    const std::size_t bit = 3 * g;
    base[bit / 8] = static_cast<std::uint8_t>(base[bit / 8] | (h << (bit % 8)));
    if (bit % 8 > 5) base[bit / 8 + 1] = static_cast<std::uint8_t>(base[bit / 8 + 1] | (h >> (8 - bit % 8)));
  }
  return static_cast<std::size_t>(q - base);
}

inline gecko_errc faithful_decode(std::span<const std::uint8_t> buf, std::size_t count,
                                  std::span<std::uint8_t> out) noexcept {
  if (out.size() < count) return gecko_errc::output_too_small;
  const std::size_t groups = group_count(count);
  if (groups > buf.size()) return gecko_errc::truncated;  // every group takes at least one byte
  const std::size_t header_bytes = faithful_header_bytes(groups);
  if (buf.size() < header_bytes) return gecko_errc::truncated;
  const std::uint8_t* const hdr = buf.data();
  if (const unsigned used = (3 * groups) % 8; used != 0 && (hdr[header_bytes - 1] >> used) != 0)
    return gecko_errc::bad_padding;
  const std::uint8_t* p = hdr + header_bytes;
  const std::uint8_t* const end = buf.data() + buf.size();
  std::uint8_t* const o = out.data();

  const std::size_t blocks = count / 64;
  std::size_t b = 0;
  for (; b < blocks && end - p >= 64; ++b) {
    const std::uint8_t* const h3 = hdr + 3 * b;
    const std::uint32_t header_word = h3[0] | (unsigned{h3[1]} << 8) | (unsigned{h3[2]} << 16);
    for (int j = 0; j < 8; ++j) {
      const faithful_decode_code& c = faithful_decode_codes[(header_word >> (3 * j)) & 7];
      store64(o + 64 * b + 8 * j, (spread_fields(load64(p), static_cast<int>(c.bytes), c.mask) ^ c.flip) + c.add);
      p += c.bytes;
    }
  }
  for (std::size_t g = 8 * b; g < groups; ++g) {
    const std::size_t bit = 3 * g;
    unsigned pair = hdr[bit / 8];
    if (bit / 8 + 1 < header_bytes) pair |= static_cast<unsigned>(hdr[bit / 8 + 1]) << 8;
    const faithful_decode_code& c = faithful_decode_codes[(pair >> (bit % 8)) & 7];
    if (static_cast<std::size_t>(end - p) < c.bytes) return gecko_errc::truncated;
    const std::uint64_t e =
        (spread_fields(load_partial(p, c.bytes), static_cast<int>(c.bytes), c.mask) ^ c.flip) + c.add;
    p += c.bytes;
    const std::size_t first = 8 * g;
    const std::size_t r = std::min<std::size_t>(8, count - first);
    if (r < 8 && (e >> (8 * r)) != (byte_ones * 127) >> (8 * r)) return gecko_errc::bad_padding;
    std::memcpy(o + first, &e, r);
  }
  return p == end ? gecko_errc::ok : gecko_errc::trailing_bytes;
}

// ---------------------------------------------------------------------------------------------
// Improved Gecko (ours)
// ---------------------------------------------------------------------------------------------

/// Bitmap of the lanes whose exponent byte is 0 (bit i = value i).
constexpr unsigned zero_bitmap(std::uint64_t exps) {
  // A byte is zero iff its high bit is clear both in it and in it + 0x7F (no carries cross bytes).
  const std::uint64_t nonzero = (((exps & ~byte_highs) + ~byte_highs) | exps) & byte_highs;
  const std::uint64_t zero = (nonzero ^ byte_highs) >> 7;  // 0x01 per zero byte
  // Multiplying gathers byte i's bit into bit 56 + i; the partial products never overlap.
  return static_cast<unsigned>((zero * 0x0102040810204080ULL) >> 56);
}

/// Two consecutive groups (16 values) as the improved encoder's passes see them. Zero exponents
/// are left out of the width and the range; padding values of a final partial group are zeros,
/// which cost only their bitmap bits.
struct improved_pair {
  /// The exponent fields of the 16 values at p, as 32-bit lanes and as bytes, and 0xFF in the
  /// bytes whose exponent is 0 (references: see gecko_kernels.hpp on vectors and the ABI).
  static void exponents(const float* p, u32x16& e, u8x16& bytes, u8x16& zero) noexcept {
    u32x16 u;
    std::memcpy(&u, p, sizeof u);
    e = (u >> 23) & 0xFFU;
    bytes = __builtin_convertvector(e, u8x16);
    zero = std::bit_cast<u8x16>(bytes == 0);
  }
  /// Plan pass: per group the nonzero count and the nonzero exponents' minimum and maximum
  /// (lo > hi for an all-zero group).
  struct range {
    std::array<unsigned, 2> nz, lo, hi;
    static range load(const float* p) noexcept {
      u32x16 e;
      u8x16 bytes, zero;
      exponents(p, e, bytes, zero);
      u8x16 lo = bytes | zero, hi = bytes;
      for (int shift = 32; shift >= 8; shift /= 2) {
        const u8x16 lo2 = std::bit_cast<u8x16>(std::bit_cast<u64x2>(lo) >> shift);
        const u8x16 hi2 = std::bit_cast<u8x16>(std::bit_cast<u64x2>(hi) >> shift);
        lo = lo2 < lo ? lo2 : lo;
        hi = hi2 > hi ? hi2 : hi;
      }
      const u64x2 zeros = std::bit_cast<u64x2>(zero);
      return {{8 - static_cast<unsigned>(std::popcount(zeros[0])) / 8, 8 - static_cast<unsigned>(std::popcount(zeros[1])) / 8},
              {lo[0], lo[8]},
              {hi[0], hi[8]}};
    }
  };
  /// Pack pass: per group the exponent bytes, the zero bitmap and the width code for `base`.
  struct fields {
    std::array<std::uint64_t, 2> exps;
    std::array<unsigned, 2> zeros, width;
    static fields load(const float* p, int base) noexcept {
      u32x16 e;
      u8x16 bytes, zero;
      exponents(p, e, bytes, zero);
      const i32x16 d = __builtin_convertvector(e, i32x16) - base;
      u64x2 m = std::bit_cast<u64x2>(__builtin_convertvector(d ^ (d >> 31), u8x16) & ~zero);
      m |= m >> 32;
      m |= m >> 16;
      m |= m >> 8;
      const u64x2 x = std::bit_cast<u64x2>(bytes);
      return {{x[0], x[1]}, {zero_bitmap(x[0]), zero_bitmap(x[1])}, {width_codes[m[0] & 0xFFU], width_codes[m[1] & 0xFFU]}};
    }
  };
};

/// Pair i of v (values 16i .. 16i + 15, zeros past the end) through Pair::load(p, args...).
/// The encoder loops are written out rather than taking a callback: a lambda capturing their
/// state by reference would keep it in memory, where every byte store may alias it.
template <class Pair, class... Args>
inline Pair load_pair(std::span<const float> v, std::size_t i, Args... args) noexcept {
  if (v.size() - 16 * i >= 16) return Pair::load(v.data() + 16 * i, args...);
  std::array<float, 16> tail{};
  std::memcpy(tail.data(), v.data() + 16 * i, (v.size() - 16 * i) * sizeof(float));
  return Pair::load(tail.data(), args...);
}

/// Everything the improved encoder decides before writing: the base and the exact sizes.
struct improved_plan {
  int base = 127;
  std::size_t groups = 0;
  std::size_t zero_groups = 0;    ///< groups with a bitmap
  std::uint64_t payload_bits = 0;
  constexpr gecko_size size() const {
    const std::uint64_t bits = 8 + 4 * std::uint64_t{groups} + 8 * std::uint64_t{zero_groups} + payload_bits;
    const std::uint64_t bytes = 1 + improved_header_bytes(groups) + zero_groups + (payload_bits + 7) / 8;
    return {bits, bytes};
  }
};

/// Chooses the base B minimising the payload bits, exactly. A group whose nonzero exponents span
/// [lo, hi] fits width w iff B lies in [hi - 2^(w-1) + 1, lo + 2^(w-1)] (empty when hi - lo >=
/// 2^w), and its nz fields cost nz * w bits with w = 8 - #{w <= 7 whose interval holds B}.
/// Summing interval indicators over groups needs only histograms of lo and hi per range class
/// bit_width(hi - lo), turned into one difference array over B.
class base_chooser {
 public:
  /// Adds a group; an all-zero group (lo > hi) and a group no width fits land in class 8.
  void add(unsigned lo, unsigned hi, unsigned nz, int copy) noexcept {
    const unsigned range_class = std::min(static_cast<unsigned>(std::bit_width(hi - lo)), 8U);
    counts_[copy][range_class][lo][0] += nz;
    counts_[copy][range_class][hi][1] += nz;
  }
  /// Moves the counts of bins [lo, hi] into the 64-bit difference array; call at least every
  /// 2^24 groups so that the 32-bit counters cannot overflow.
  void flush(unsigned lo, unsigned hi) noexcept {
    for (auto& by_class : counts_) {
      for (unsigned rc = 0; rc < 8; ++rc) {
        for (unsigned x = lo; x <= hi; ++x) {
          const auto lo_n = static_cast<std::int64_t>(by_class[rc][x][0]);
          const auto hi_n = static_cast<std::int64_t>(by_class[rc][x][1]);
          if ((lo_n | hi_n) == 0) continue;
          for (unsigned w = std::max(rc, 1U); w <= 7; ++w) {
            const int half = 1 << (w - 1);
            diff_[static_cast<std::size_t>(std::max(static_cast<int>(x) - half + 1, 0))] += hi_n;
            diff_[static_cast<std::size_t>(std::min(static_cast<int>(x) + half + 1, 256))] -= lo_n;
          }
        }
      }
      for (auto& c : by_class)
        for (unsigned x = lo; x <= hi; ++x) c[x] = {0, 0};
    }
  }
  /// The base and the payload bits it gives, after the last flush.
  std::pair<int, std::uint64_t> choose(std::uint64_t nonzero) const noexcept {
    int best = 127;
    std::int64_t held = 0, best_held = -1;
    for (int b = 0; b < 256; ++b) {
      held += diff_[static_cast<std::size_t>(b)];
      // Ties go to the base nearest 127, so data the faithful codec suits keeps its base.
      if (held > best_held || (held == best_held && std::abs(b - 127) < std::abs(best - 127))) {
        best_held = held;
        best = b;
      }
    }
    return {best, 8 * nonzero - static_cast<std::uint64_t>(best_held)};
  }

 private:
  // [copy][range class][exponent] -> {nz of groups with that lo, nz of groups with that hi}.
  // Two copies, one per group of a pair: consecutive groups often share a bin, and one copy
  // would chain every increment behind the previous one's store.
  std::array<std::array<std::array<std::array<std::uint32_t, 2>, 256>, 9>, 2> counts_{};
  std::array<std::int64_t, 257> diff_{};
};

inline improved_plan plan_improved(std::span<const float> v) {
  improved_plan plan;
  plan.groups = group_count(v.size());
  base_chooser chooser;
  std::uint64_t nonzero = 0;
  std::size_t zero_groups = 0, pending = 0;
  unsigned seen_lo = 255, seen_hi = 0;
  for (std::size_t g = 0; g < plan.groups; g += 2) {
    const auto pr = load_pair<improved_pair::range>(v, g / 2);
    for (std::size_t k = 0; k < std::min<std::size_t>(2, plan.groups - g); ++k) {
      const unsigned nz = pr.nz[k];
      zero_groups += nz != 8;
      nonzero += nz;
      chooser.add(pr.lo[k], pr.hi[k], nz, static_cast<int>(k));
      seen_lo = std::min(seen_lo, pr.lo[k]);
      seen_hi = std::max(seen_hi, pr.hi[k]);
    }
    if (++pending == (std::size_t{1} << 23)) {  // pairs: 2^24 groups of at most 8 values per bin
      chooser.flush(seen_lo, seen_hi);
      pending = 0;
    }
  }
  chooser.flush(seen_lo, seen_hi);
  const auto [base, bits] = chooser.choose(nonzero);
  plan.base = base;
  plan.payload_bits = bits;
  plan.zero_groups = zero_groups;
  return plan;
}

/// Appends fields of up to 64 bits to a byte buffer, LSB-first. Each put stores 8 bytes at the
/// current byte and moves on by the whole bytes it completed, leaving fewer than 8 bits pending:
/// no data-dependent branch (measured faster than a 64-bit accumulator flushed when full).
/// The caller has sized the buffer exactly; near its end the store is clipped to it.
class bit_writer {
 public:
  bit_writer(std::uint8_t* q, const std::uint8_t* end) noexcept : q_(q), end_(end) {}
  /// Appends the low n <= 64 bits of x; x has no bits above them.
  void put(std::uint64_t x, unsigned n) noexcept {
    if (n > 56) {  // escape groups only: 8 raw bytes
      put56(x & 0xFFFFFFFFU, 32);
      x >>= 32;
      n -= 32;
    }
    put56(x, n);
  }
  /// The end of the written bytes.
  std::uint8_t* finish() noexcept {
    // The pending bits were stored by the last put already; count their byte.
    return q_ + (fill_ != 0);
  }

 private:
  void put56(std::uint64_t x, unsigned n) noexcept {
    const std::uint64_t t = acc_ | (x << fill_);  // fill_ + n <= 63
    if (end_ - q_ >= 8) store64(q_, t);
    else std::memcpy(q_, &t, static_cast<std::size_t>(end_ - q_));
    const unsigned total = fill_ + n;
    q_ += total >> 3;
    acc_ = t >> (8 * (total >> 3));
    fill_ = total & 7;
  }

  std::uint8_t* q_;
  const std::uint8_t* end_;
  std::uint64_t acc_ = 0;
  unsigned fill_ = 0;
};

/// Layout: [base B: 1 byte][4-bit group headers, LSB-first, zero-padded][one zero bitmap byte per
/// group whose header has Z][payload bits, LSB-first, zero-padded]. Header: bits 0-2 code h
/// (h < 7: w = h + 1, field = (E - B) mod 2^w; h = 7: w = 8, field = E), bit 3 Z. A group's
/// payload holds only the fields of its nonzero-exponent values (bitmap bit clear), in order.
inline std::size_t improved_encode(std::span<const float> v, std::span<std::uint8_t> out,
                                   const improved_plan& plan) {
  const std::size_t total = plan.size().bytes;
  if (out.size() < total) throw_too_small();
  const std::size_t header_bytes = improved_header_bytes(plan.groups);
  std::uint8_t* const base = out.data();
  base[0] = static_cast<std::uint8_t>(plan.base);
  std::uint8_t* const hdr = base + 1;
  std::uint8_t* bitmaps = hdr + header_bytes;
  bit_writer payload(bitmaps + plan.zero_groups, base + total);
  const std::uint64_t minus_base = byte_ones * ((256U - static_cast<unsigned>(plan.base)) & 0xFFU);
  for (std::size_t g = 0; g < plan.groups; g += 2) {
    const auto pr = load_pair<improved_pair::fields>(v, g / 2, plan.base);
    unsigned header = 0;  // the pair's two nibbles make one header byte
    for (std::size_t k = 0; k < std::min<std::size_t>(2, plan.groups - g); ++k) {
      const unsigned zeros = pr.zeros[k];
      const unsigned keep = ~zeros & 0xFFU;
      const unsigned nz = static_cast<unsigned>(std::popcount(keep));
      const unsigned h = pr.width[k];
      header |= (h | (zeros != 0 ? 8U : 0U)) << (4 * k);
      if (zeros != 0) *bitmaps++ = static_cast<std::uint8_t>(zeros);
      if (h < 7) {
        const int w = static_cast<int>(h) + 1;
        // (E - B) mod 256 per byte; the gather keeps its low w bits.
        const std::uint64_t fields = add_bytes(pr.exps[k], minus_base);
        payload.put(gather_fields(compress_bytes(fields, keep), w, field_masks[h]), nz * static_cast<unsigned>(w));
      } else {
        payload.put(compress_bytes(pr.exps[k], keep), 8 * nz);
      }
    }
    hdr[g / 2] = static_cast<std::uint8_t>(header);
  }
  return static_cast<std::size_t>(payload.finish() - base);
}

/// Up to 56 bits at bit `pos` of [p, p + size), LSB-first; the caller has checked pos + n <= 8 * size.
inline std::uint64_t read_bits(const std::uint8_t* p, std::size_t size, std::uint64_t pos, unsigned n) noexcept {
  const std::size_t byte = static_cast<std::size_t>(pos >> 3);
  const std::size_t avail = size - byte;
  const std::uint64_t x = (avail >= 8 ? load64(p + byte) : load_partial(p + byte, avail)) >> (pos & 7);
  return x & ((std::uint64_t{1} << n) - 1);
}

inline gecko_errc improved_decode(std::span<const std::uint8_t> buf, std::size_t count,
                                  std::span<std::uint8_t> out) noexcept {
  if (out.size() < count) return gecko_errc::output_too_small;
  if (buf.empty()) return gecko_errc::truncated;
  const std::size_t groups = group_count(count);
  const std::size_t header_bytes = improved_header_bytes(groups);
  if (buf.size() - 1 < header_bytes) return gecko_errc::truncated;
  const unsigned b = buf[0];
  const std::uint8_t* const hdr = buf.data() + 1;
  if ((groups & 1) != 0 && (hdr[header_bytes - 1] >> 4) != 0) return gecko_errc::bad_padding;
  std::size_t zero_groups = 0;
  {
    std::size_t i = 0;
    for (; i + 8 <= header_bytes; i += 8)
      zero_groups += static_cast<std::size_t>(std::popcount(load64(hdr + i) & 0x8888888888888888ULL));
    for (; i < header_bytes; ++i) zero_groups += static_cast<std::size_t>(std::popcount(hdr[i] & 0x88U));
  }
  if (buf.size() - 1 - header_bytes < zero_groups) return gecko_errc::truncated;
  const std::uint8_t* bitmaps = hdr + header_bytes;
  const std::uint8_t* const payload = bitmaps + zero_groups;
  const std::size_t payload_size = static_cast<std::size_t>(buf.data() + buf.size() - payload);
  const std::uint64_t limit = 8 * std::uint64_t{payload_size};

  // E = (field ^ 2^(w-1)) + (B - 2^(w-1)) mod 256, per byte.
  std::array<std::uint64_t, 7> flip{}, add{};
  for (unsigned h = 0; h < 7; ++h) {
    const unsigned m = 1U << h;
    flip[h] = byte_ones * m;
    add[h] = byte_ones * ((b - m) & 0xFFU);
  }
  const auto exponents = [&](unsigned h, std::uint64_t fields) {
    return h < 7 ? add_bytes(spread_fields(fields, static_cast<int>(h) + 1, field_masks[h]) ^ flip[h], add[h])
                 : fields;
  };
  std::uint8_t* const o = out.data();
  std::uint64_t pos = 0;
  std::size_t g = 0;
  // Full groups while 16 payload bytes remain past pos: every read is in bounds (a group takes at
  // most 8 bytes), so only the end needs the checks of the loop below.
  for (const std::size_t full = count / 8; g < full && (pos >> 3) + 16 <= payload_size; ++g) {
    const unsigned nibble = (hdr[g / 2] >> (4 * (g & 1))) & 0xFU;
    const unsigned h = nibble & 7;
    unsigned zeros = 0;
    if ((nibble & 8) != 0) zeros = *bitmaps++;
    const unsigned keep = ~zeros & 0xFFU;
    const unsigned bits = static_cast<unsigned>(std::popcount(keep)) * (h + 1);
    const std::uint8_t* const at = payload + (pos >> 3);
    const unsigned shift = pos & 7;
    std::uint64_t fields;
    if (h < 7) {
      fields = (load64(at) >> shift) & ((std::uint64_t{1} << bits) - 1);  // bits <= 56
    } else {
      fields = (load64(at) >> shift) | ((load64(at + 8) << 1) << (63 - shift));
      if (bits < 64) fields &= (std::uint64_t{1} << bits) - 1;
    }
    pos += bits;
    store64(o + 8 * g, expand_bytes(exponents(h, fields), keep));
  }
  for (; g < groups; ++g) {
    const unsigned nibble = (hdr[g / 2] >> (4 * (g & 1))) & 0xFU;
    const unsigned h = nibble & 7;
    unsigned zeros = 0;
    if ((nibble & 8) != 0) zeros = *bitmaps++;
    const std::size_t first = 8 * g;
    const std::size_t r = std::min<std::size_t>(8, count - first);
    const unsigned padding = 0xFFU & ~((1U << r) - 1);
    if ((zeros & padding) != padding) return gecko_errc::bad_padding;
    const unsigned keep = ~zeros & 0xFFU;
    const unsigned bits = static_cast<unsigned>(std::popcount(keep)) * (h + 1);
    if (bits > limit - pos) return gecko_errc::truncated;
    const unsigned low = std::min(bits, 32U);
    const std::uint64_t fields = read_bits(payload, payload_size, pos, low) |
                                 (read_bits(payload, payload_size, pos + low, bits - low) << 32);
    pos += bits;
    const std::uint64_t values = expand_bytes(exponents(h, fields), keep);
    if (r == 8) store64(o + first, values);
    else std::memcpy(o + first, &values, r);
  }
  const std::uint64_t used = (pos + 7) / 8;
  if (used != payload_size) return gecko_errc::trailing_bytes;  // pos <= limit, so only longer
  if ((pos & 7) != 0 && (payload[used - 1] >> (pos & 7)) != 0) return gecko_errc::bad_padding;
  return gecko_errc::ok;
}

}  // namespace detail::gecko

/// The exact size gecko_encode_exponents will produce for `values`.
inline gecko_size gecko_encoded_size(std::span<const float> values, gecko_variant variant = gecko_variant::faithful) {
  detail::gecko::check_variant(variant);
  if (variant == gecko_variant::improved) return detail::gecko::plan_improved(values).size();
  return detail::gecko::faithful_size(values);
}

/// A buffer size that always suffices for `count` values: lets a caller skip the size pass.
constexpr std::size_t gecko_max_encoded_bytes(std::size_t count, gecko_variant variant = gecko_variant::faithful) {
  detail::gecko::check_variant(variant);
  const std::size_t groups = detail::gecko::group_count(count);
  return variant == gecko_variant::improved ? 1 + detail::gecko::improved_header_bytes(groups) + 8 * groups
                                            : detail::gecko::faithful_header_bytes(groups) + 8 * groups;
}

/// Encodes the exponent fields of `values` into `out`; returns the bytes written (exactly
/// gecko_encoded_size(values, variant).bytes). Throws std::length_error when `out` is smaller,
/// std::invalid_argument for an unknown variant. The stream has no checksum (for speed: the
/// tensor codec, gecko_tensor.hpp, adds one).
inline std::size_t gecko_encode_exponents(std::span<const float> values, std::span<std::uint8_t> out,
                                          gecko_variant variant = gecko_variant::faithful) {
  detail::gecko::check_variant(variant);
  if (variant == gecko_variant::improved)
    return detail::gecko::improved_encode(values, out, detail::gecko::plan_improved(values));
  return detail::gecko::faithful_encode(values, out);
}

inline std::vector<std::uint8_t> gecko_encode_exponents(std::span<const float> values,
                                                        gecko_variant variant = gecko_variant::faithful) {
  detail::gecko::check_variant(variant);
  std::vector<std::uint8_t> out;
  if (variant == gecko_variant::improved) {
    const auto plan = detail::gecko::plan_improved(values);
    out.resize(plan.size().bytes);
    detail::gecko::improved_encode(values, out, plan);
  } else {
    out.resize(gecko_max_encoded_bytes(values.size(), variant));
    out.resize(detail::gecko::faithful_encode(values, out));
  }
  return out;
}

/// Decodes `count` exponent fields from `buffer` (exactly one encoding, nothing after it) into
/// exponents_out[0, count). Never throws; see gecko_errc for what it rejects.
[[nodiscard]] inline gecko_errc gecko_decode_exponents(std::span<const std::uint8_t> buffer, std::size_t count,
                                                       std::span<std::uint8_t> exponents_out,
                                                       gecko_variant variant = gecko_variant::faithful) noexcept {
  if (variant == gecko_variant::improved) return detail::gecko::improved_decode(buffer, count, exponents_out);
  if (variant == gecko_variant::faithful) return detail::gecko::faithful_decode(buffer, count, exponents_out);
  return gecko_errc::bad_variant;
}

}  // namespace minifloat::storage
