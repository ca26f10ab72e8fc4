// minifloat/storage/pair_forms/float_prefix.hpp — pair_form::float_prefix: split storage's
// pairs with a bfloat16 visible code (extra-mantissa-bits paper §3.1), computed on float bits.
//
// Why it gives the core's bits: R = fp(8, 7 + n, 127) has float's binades and specials, so R's
// code of a float x rounded toward zero is canonical_nan_bits(x) shifted right by 16 - n, and
// R's value of a code is the code shifted back (the core encodes NaN as R's quiet NaN of its
// sign and decodes it as float's; the payload is not kept). A stochastic h, a bfloat16 value, is
// its float bits' top half. A stochastic field sign-extended from its width (n + 1 bits) counts
// -2^n steps of R with its flag, one step of h, so (h << 16) + (e << (16 - n)) is the restored
// value's bits in both modes. Tests: every special, subnormals, NaN payloads and arbitrary
// codes against the core (tests/storage/test_split.cpp).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "../../round.hpp"
#include "../detail/codes.hpp"
#include "../split_layout.hpp"
#include "lanes.hpp"

namespace minifloat::storage::detail {

/// The float bits whose prefix a pair with a bfloat16 visible format keeps (for one value or a
/// register of them): NaN made the quiet NaN of its sign (what the core's R encodes and decodes
/// NaN to), every other float unchanged.
template <class L>
constexpr L canonical_nan_bits(L bits) {
  constexpr std::uint32_t quiet_nan = 0x7FC00000U;  // float's exponent field all ones and its quiet bit
  return minifloat::detail::select((bits & 0x7FFFFFFFU) > 0x7F800000U, (bits & 0x80000000U) | quiet_nan, bits);
}

#if !defined(__CUDA_ARCH__)  // host-only SIMD (lanes.hpp)
/// The float_prefix form on a register of pairs, n = kept bits.
class float_prefix_pairs {
 public:
  explicit float_prefix_pairs(const split_layout& l)
      : kept_(l.kept_bits())
#if defined(__AVX512DQ__)
        ,
        prefix_shift_(_mm512_set1_epi32(16 - l.kept_bits())),
        kept_mask_lanes_(_mm512_set1_epi32(static_cast<int>(low_bits(l.kept_bits()))))
#endif
  {
  }

  /// R's codes, toward zero, of the floats whose bits are u, any floats.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  field_lanes codes(field_lanes u) const { return canonical_nan_bits(u) >> (16 - kept_); }

#if defined(__AVX512DQ__)
  /// The truncated fields of the floats whose bits are u, false (h and e not set) where a lane is
  /// NaN or Inf (one vfpclassps: 0x01 quiet NaN, 0x08 +Inf, 0x10 -Inf, 0x80 signalling NaN):
  /// without them no NaN is made canonical; h is the float's top half and the field the next n
  /// bits, shifted by a vector of counts (one micro-op each where codes() takes two shifts by
  /// scalar counts, two each, and seven for the NaN and Inf lanes).
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  bool finite_fields(field_lanes u, field_lanes& h, field_lanes& e) const {
    const __m512i x = std::bit_cast<__m512i>(u);
    if (_mm512_fpclass_ps_mask(_mm512_castsi512_ps(x), 0x99) != 0) return false;
    // The zero-masked forms with a full mask: GCC 12's unmasked ones start from
    // _mm512_undefined_epi32() (-Wmaybe-uninitialized).
    const __mmask16 all = minifloat::detail::all_lanes16;
    h = std::bit_cast<field_lanes>(_mm512_maskz_srli_epi32(all, x, 16));
    e = std::bit_cast<field_lanes>(_mm512_and_si512(_mm512_maskz_srlv_epi32(all, x, prefix_shift_), kept_mask_lanes_));
    return true;
  }
#endif

  /// Stores R's values of `count` pairs: visible codes h and extra fields e, e sign-extended from
  /// its width for a stochastic layout, zero-extended for a truncating one.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void restore(field_lanes h, field_lanes e, std::size_t count, float* out) const {
#if defined(__AVX512DQ__)
    if (count == field_lane_count) {
      // The field shifted by a vector of counts (one micro-op; two for a scalar count), and NaN
      // made canonical only in a register that has one (one vfpclassps, not four operations).
      const __m512i bits = _mm512_add_epi32(std::bit_cast<__m512i>(h << 16),
                                            _mm512_maskz_sllv_epi32(minifloat::detail::all_lanes16,
                                                                    std::bit_cast<__m512i>(e), prefix_shift_));
      const field_lanes value = std::bit_cast<field_lanes>(bits);
      // vfpclassps categories 0x01 quiet NaN, 0x80 signalling NaN.
      minifloat::detail::store_lanes(
          out, _mm512_fpclass_ps_mask(_mm512_castsi512_ps(bits), 0x81) == 0 ? value : canonical_nan_bits(value));
      return;
    }
#endif
    minifloat::detail::store_lanes(out, canonical_nan_bits((h << 16) + (e << (16 - kept_))), count);
  }

 private:
  int kept_;
#if defined(__AVX512DQ__)
  // Constants as registers made once: GCC rebuilt them every register where they were written in the loop.
  __m512i prefix_shift_;     ///< 16 - n in every lane: the extra field's shift
  __m512i kept_mask_lanes_;  ///< the low n bits
#endif
};
#endif  // !defined(__CUDA_ARCH__)

}  // namespace minifloat::storage::detail
