// minifloat/storage/split.hpp — fp32 weights kept as a visible low-precision value h plus k
// extra bits, instead of an fp32 master copy (extra-mantissa-bits paper §3.1; our reading in
// docs/semantics.md §8). h is a code of any format float rounds to (bfloat16,
// binary16, e4m3, e5m2, the paper formats fp(e,m,b)), bit-packed at its width; the extra bits
// are bit-packed at k bits per weight (bitpack.hpp).
//
// Let n = k (truncating split) or k - 1 (stochastic split) and R = fp(E, M + n, bias), the
// visible format with n more mantissa bits (split_layout::restored()). Then
//  - truncating split: t = x rounded toward zero to R; h = t's leading bits (= x rounded toward
//    zero to h's format) and the extra field = the next n bits: code_R(t) = code_h << n | extra.
//  - stochastic split: h = x stochastically rounded (seeded, counter-based: element i draws
//    from (seed, index + i) as in the core); the extra field is flag << n | next n bits, where
//    flag says h was rounded away from zero, so the truncated value is recovered first.
//  - reconstruct returns t, x rounded toward zero to R: lossless exactly when x is a value of R
//    — finite, not beyond h's largest binade, and with no significand bit below the kept ones
//    (bf16 + 16 = binary32 itself: every fp32 but NaN payloads; fp16 + 13: every fp32 in fp16's
//    normal range; below it the significand runs out, as in fp16's subnormals).
// Special values: ±Inf stays ±Inf when h's format has it (extra 0), a finite x beyond the largest
// pair value saturates to it (h = ±max, extra all ones), NaN stays a quiet NaN of its sign (the
// payload is not kept), -0 stays -0. NaN and ±Inf into an all_finite format (e4m3's Inf: NaN, as
// the core encodes it) throw std::domain_error.
//
// Each operation reads as: check the layout and the arrays, plan (split_plan: the rounders and
// the pair form, chosen once by pair_form_for), loop a block or a tile at a time. The pair forms
// (pair_forms/: float_prefix, rebiased, hardware_binary16, scaled_binary16) are backends that
// compute the core's bits a register at a time; split_options::backend, or the environment
// variable MINIFLOAT_REFERENCE_CORE (backend.hpp), forces the core's lane kernels instead.
//
// The register-level members here and in pair_forms/ are forced inline only when the compiler
// optimises (`#if defined(__OPTIMIZE__)`): an optimised build gets the same code as with the
// attribute always on, while at -O0 (debug and sanitizer builds) forcing them into each of the
// twelve layout kinds' tile loops made a program that steps every layout about 3x slower to
// compile (tests/storage/test_optimizers.cpp under ASan + UBSan) and ran no faster.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend.hpp"
#include "../bulk.hpp"
#include "../encode.hpp"
#include "../format.hpp"
#include "../random.hpp"
#include "../round.hpp"
#include "bitpack.hpp"
#include "detail/codes.hpp"
#include "packed_minifloat.hpp"
#include "pair_forms/binary16.hpp"
#include "pair_forms/float_prefix.hpp"
#include "pair_forms/lanes.hpp"
#include "pair_forms/rebiased.hpp"
#include "pair_forms/scaled_binary16.hpp"
#include "split_layout.hpp"

namespace minifloat::storage {

/// Where the stochastic draws of one split come from (element i uses (seed, index + i)), and
/// which implementations it may take.
struct split_options {
  std::uint64_t seed = 0;
  std::uint64_t index = 0;
  /// reference_core (or MINIFLOAT_REFERENCE_CORE under from_environment) forces pair_form::core
  /// and the core's rounding: the same bits, for tests that show it.
  backend_policy backend = backend_policy::from_environment;
};

namespace detail {

inline split_layout validated(const split_layout& l) {
  l.validate();
  return l;
}

/// The pair form a layout's registers take (pair_forms/lanes.hpp), under `policy`: the one
/// predicate that chooses among the backends.
inline pair_form pair_form_for(const split_layout& l, backend_policy policy = backend_policy::fastest) {
  if (uses_reference_core(policy)) return pair_form::core;
  if (l.visible == bfloat16) return pair_form::float_prefix;
#if defined(__AVX512F__)
  if (rebiased_floats(l)) {
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
    if (binary16_byte_layout(l)) return pair_form::hardware_binary16;
    if (scaled_binary16_layout(l)) return pair_form::scaled_binary16;
#endif
    return pair_form::rebiased;
  }
#endif
  return pair_form::core;
}

/// What a layout needs at run time, computed once per call.
struct split_plan {
  split_layout layout;
  int kept = 0;
  std::uint32_t kept_mask = 0;
  rounder<float> truncate;    ///< to restored(), toward zero; ±Inf stays ±Inf
  rounder<float> stochastic;  ///< to visible, stochastic, saturating
  bool clamp = false;         ///< nan_only: above the largest pair value R has codes that are not pairs
  float limit = 0;            ///< the largest pair value
  bool reference = false;     ///< the core's lane kernels only (split_options::backend)
  pair_form form = pair_form::core;

  split_plan(const split_layout& l, const split_options& o)
      : layout(validated(l)),
        kept(l.kept_bits()),
        kept_mask(low_bits(l.kept_bits())),
        truncate(l.restored(), {rounding::toward_zero, overflow::infinity}),
        stochastic(l.visible, {rounding::stochastic, overflow::saturate, 0, o.seed, o.index}),
        clamp(l.visible.encoding == specials::nan_only),
        limit(largest_pair_value(l)),
        reference(uses_reference_core(o.backend)),
        form(pair_form_for(l, o.backend)) {}
};

/// Splits x (at most block_values values, element `first` of the whole array) into visible codes
/// and extra fields.
inline void split_block(const split_plan& p, std::span<const float> x, std::size_t first, std::uint32_t* visible,
                        std::uint32_t* extra) {
  float clamped[block_values];
  std::span<const float> source = x;
  if (p.clamp) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float v = x[i];
      clamped[i] = std::isfinite(v) && std::fabs(v) > p.limit ? std::copysign(p.limit, v) : v;
    }
    source = std::span<const float>(clamped, x.size());
  }
  std::uint32_t wide[block_values];
  encode_block(source, wide, p.truncate, first);
  if (p.layout.mode == split_mode::truncate) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      visible[i] = wide[i] >> p.kept;
      extra[i] = wide[i] & p.kept_mask;
    }
    return;
  }
  encode_block(x, visible, p.stochastic.advanced(first), first);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t truncated = wide[i] >> p.kept;
    if (!std::isfinite(x[i])) visible[i] = truncated;  // NaN and Inf are not rounded (saturation would)
    const std::uint32_t flag = visible[i] != truncated;
    extra[i] = (flag << p.kept) | (wide[i] & p.kept_mask);
  }
}

/// out = the restored values of the pairs (visible[i], extra[i]); visible is overwritten.
inline void reconstruct_block(const split_layout& l, std::uint32_t* visible, const std::uint32_t* extra,
                              std::span<float> out) {
  const int kept = l.kept_bits();
  const std::uint32_t kept_mask = low_bits(kept);
  if (l.mode == split_mode::truncate) {
    for (std::size_t i = 0; i < out.size(); ++i) visible[i] = (visible[i] << kept) | extra[i];
  } else {
    // A set flag means h is one step away from zero from the truncated value: its code's
    // predecessor (codes of one sign are consecutive across binades).
    for (std::size_t i = 0; i < out.size(); ++i)
      visible[i] = ((visible[i] - (extra[i] >> kept)) << kept) | (extra[i] & kept_mask);
  }
  decode(std::span<const std::uint32_t>(visible, out.size()), out, l.restored());
}

/// The layouts whose visible codes and extra fields are each 8 or 16 bits wide (fp16 + 8,
/// e4m3 + 8, bf16 + 8 stochastic, ...), on a little-endian machine: their packed words are plain
/// uint8_t / uint16_t arrays (bitpack.hpp), so split_into and reconstruct read and write the
/// fields directly and take split_block's and reconstruct_block's steps one SIMD register at a
/// time, through the plan's pair form (pair_forms/) or the core's own lane kernels (round_lanes,
/// code_lanes, value_lanes, lane_random, called as encode_lanes and decode_lanes call them): no
/// 32-bit code arrays, no bit-packing pass. tests/storage/test_split.cpp checks them against the
/// scalar core and the packing path.
inline bool byte_field_layout(const split_layout& l) {
  const auto byte_wide = [](int bits) { return bits == 8 || bits == 16; };
  return std::endian::native == std::endian::little && byte_wide(l.visible_bits()) && byte_wide(l.extra_bits) &&
         !rounds_through_double<float>(l.visible) && !rounds_through_double<float>(l.restored());
}

#if !defined(__CUDA_ARCH__)  // host-only SIMD (pair_forms/lanes.hpp)
/// reconstruct_block's steps on one register of pairs: R's values (as float bits) of the visible
/// codes h and extra fields e, by the pair_form Form (the plan's form), whose registers that it
/// leaves take the rebiased form or the core's lane kernels.
template <pair_form Form>
class pair_restorer {
 public:
  explicit pair_restorer(const split_layout& l)
      : codec_(minifloat::detail::make_codec_plan<float>(l.restored())),
        kept_(l.kept_bits()),
        kept_mask_(low_bits(l.kept_bits())),
        stochastic_(l.mode == split_mode::stochastic),
        prefix_(l)
#if defined(__AVX512F__)
        ,
        rebiased_(l)
#endif
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
        ,
        binary16_(l),
        scaled_(l)
#endif
  {
  }
  /// R's values of the `count` (at most field_lane_count) pairs whose fields start at vbytes and
  /// ebytes, stored at out.
  template <class Visible, class Extra>
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void restore_fields(const unsigned char* vbytes, const unsigned char* ebytes,
                      std::size_t count, float* out) const {
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
    if constexpr (Form == pair_form::hardware_binary16) {
      if (count == field_lane_count && binary16_.restore(vbytes, ebytes, out)) return;
    }
    if constexpr (Form == pair_form::scaled_binary16) {
      if (count == field_lane_count && scaled_.restore(vbytes, ebytes, out)) return;
    }
#endif
    const field_lanes h = load_fields<Visible>(vbytes, count);
    if constexpr (Form == pair_form::float_prefix) {
      // A stochastic field sign-extended from its width (float_prefix.hpp).
      prefix_.restore(h, stochastic_ ? load_fields<Extra, true>(ebytes, count) : load_fields<Extra>(ebytes, count),
                      count, out);
    } else {
      minifloat::detail::store_lanes(out, codes_to_values(h, load_fields<Extra>(ebytes, count)), count);
    }
  }

 private:
  /// R's values (float bits) of the visible codes h and zero-extended extra fields e, for the
  /// rebiased-based and core forms.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  field_lanes codes_to_values(field_lanes h, field_lanes e) const {
    // As reconstruct_block: a set flag means h is its truncated code's successor.
    if (stochastic_) {
      h -= e >> kept_;
      e &= kept_mask_;
    }
#if defined(__AVX512F__)
    if constexpr (rebiased_based(Form)) {
      if (field_lanes v; rebiased_.restore((h << kept_) | e, v)) return v;
    }
#endif
    return minifloat::detail::value_lanes(codec_, (h << kept_) | e,
                                          [](field_lanes v) { return minifloat::detail::integer_to_float_bits(v); });
  }

  minifloat::detail::codec_plan<float> codec_;
  int kept_;
  std::uint32_t kept_mask_;
  bool stochastic_;
  float_prefix_pairs prefix_;
#if defined(__AVX512F__)
  rebiased_pairs rebiased_;
#endif
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  binary16_pairs binary16_;
  scaled_binary16_pairs scaled_;
#endif
};

/// split_block's steps on one register of floats, through the core's lane kernels (round_lanes,
/// code_lanes, lane_random) called as encode_lanes calls them, or the pair_form Form (the
/// plan's form) that gives their bits. Every form of a stochastic split takes its one decision,
/// where h rounds away from zero, from rounds_away. Under the reference core (split_plan) the
/// decision and the rounding take the core's lane kernels only: no float-arithmetic forms.
template <pair_form Form>
class pair_splitter {
 public:
  /// `first_draw`: the element index whose draw a call's first lane at offset 0 takes.
  explicit pair_splitter(const split_plan& sp, std::uint64_t first_draw = 0)
      : truncate_(sp.truncate.plan()),
        round_(sp.stochastic.plan()),
        truncate_codec_(minifloat::detail::make_codec_plan<float>(truncate_.fmt)),
        round_codec_(minifloat::detail::make_codec_plan<float>(round_.fmt)),
        truncate_float_add_(!sp.reference && minifloat::detail::use_float_add(truncate_)),
        round_float_add_(!sp.reference && minifloat::detail::use_float_add(round_)),
        stochastic_(sp.layout.mode == split_mode::stochastic),
        clamp_(sp.clamp),
        finite_only_(truncate_.fmt.encoding == specials::all_finite),
        // Where the visible format's normal range reaches down to 2^-14 (binary16, bfloat16, ...),
        // a register of weights is almost always plain and the test predictable; above that
        // (e4m3: 2^-6) N(0, 0.02) weights mix in most registers and the test would mispredict.
        plain_first_(sp.layout.visible.emin() <= -14),
        successor_codes_(round_.keeps_signed_grid()),
        plain_carries_(!sp.reference && plain_first_ && round_.plain_path),
        normal2_(round_.smallest_normal_bits() << 1),
        below_top_span2_(((round_.max_bits & 0x7F800000U) << 1) - normal2_),
        top_binade_bits_(round_.max_bits & 0x7F800000U),
        kept_(sp.kept),
        kept_mask_(sp.kept_mask),
        limit_bits_(std::bit_cast<std::uint32_t>(sp.limit)),
        first_draw_(sp.stochastic.first_index() + first_draw),
        draw_(sp.stochastic.rng()),
        prefix_(sp.layout)
#if defined(__AVX512F__)
        ,
        rebiased_(sp.layout),
        plain_fraction_shift_(_mm512_set1_epi32(32 - static_cast<int>(round_.d_normal))),
        field_flag_lanes_(_mm512_set1_epi32(1 << sp.kept))
#endif
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
        ,
        binary16_(sp.layout),
        scaled_(sp.layout)
#endif
  {
  }

  /// The floats an optimizer step restores, updates and splits again at a time (its tile).
  static constexpr std::size_t tile_values = 128;

  /// Splits the `count` floats at `values` (element `at` of the split's numbering first) into
  /// the fields at vbytes and ebytes, a register at a time in one loop that draws each
  /// register's words (a stochastic split: whole ARS blocks in order where the draw index is a
  /// multiple of the register's lanes), decides and splits it: the generator's round keys and the
  /// rounding's constants stay in registers, and nothing is stored to be read back. False where
  /// a float has no code in R (NaN or Inf into an all_finite format): that register's fields are
  /// not written, the others' are.
  template <class Visible, class Extra>
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  bool split_run(std::uint64_t at, const float* values, std::size_t count,
                 unsigned char* vbytes, unsigned char* ebytes) {
    bool coded = true;
    // Whole registers with the constant count (single-instruction loads and stores), then the tail.
    const auto whole_register = [&](std::size_t r, field_lanes random)
#if defined(__OPTIMIZE__)
        __attribute__((always_inline))
#endif
    {
      const std::size_t j = r * field_lane_count;
      const field_lanes u = minifloat::detail::load_lanes<field_lanes>(values + j, field_lane_count);
      coded = split_register<Visible, Extra>(u, random, field_lane_count, vbytes + j * sizeof(Visible),
                                             ebytes + j * sizeof(Extra)) &&
              coded;
    };
    const std::size_t whole = count / field_lane_count, rest = count % field_lane_count;
    const std::uint64_t first = first_draw_ + at;
    if (!stochastic_) {
      for (std::size_t r = 0; r < whole; ++r) whole_register(r, field_lanes{});
    } else if (first % field_lane_count == 0) {
      draw_.aligned_run(first, whole, whole_register);
    } else {
      for (std::size_t r = 0; r < whole; ++r) whole_register(r, draw_(first + r * field_lane_count));
    }
    if (rest != 0) {
      const std::size_t j = whole * field_lane_count;
      const field_lanes u = minifloat::detail::load_lanes<field_lanes>(values + j, rest);
      const field_lanes random = stochastic_ ? draw_(first + j) : field_lanes{};
      coded = split_register<Visible, Extra>(u, random, rest, vbytes + j * sizeof(Visible), ebytes + j * sizeof(Extra)) &&
              coded;
    }
    return coded;
  }

 private:
#if defined(__AVX512F__)
  /// Lanes as a mask register: the AVX-512 forms add a stochastic split's flags under a mask.
  using lane_mask = __mmask16;
#else
  /// Lanes as all ones (set) or zero.
  using lane_mask = field_lanes;
#endif

  /// The lanes where a > b, as unsigned words.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  static lane_mask lanes_above(field_lanes a, field_lanes b) {
#if defined(__AVX512F__)
    return _mm512_cmpgt_epu32_mask(std::bit_cast<__m512i>(a), std::bit_cast<__m512i>(b));
#else
    return minifloat::detail::select(a > b, ~field_lanes{}, field_lanes{});
#endif
  }

  /// Splits `count` (at most field_lane_count) floats u with their words `random` into the fields
  /// at vbytes and ebytes: a whole register by the form's processor conversions where it takes
  /// the register (hardware_binary16, scaled_binary16), else by fields(). False, storing nothing,
  /// where a float has no code in R.
  template <class Visible, class Extra>
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  bool split_register(field_lanes u, field_lanes random, std::size_t count,
                      unsigned char* vbytes, unsigned char* ebytes) {
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
    if constexpr (Form == pair_form::hardware_binary16) {
      if (count == field_lane_count && in_plain_range(u)) {
        binary16_.split(u, stochastic_ ? rounds_away(u, random) : 0, vbytes, ebytes);
        return true;
      }
    }
    if constexpr (Form == pair_form::scaled_binary16) {
      const __m512 x = std::bit_cast<__m512>(u);
      // vfpclassps categories: 0x01 quiet NaN, 0x08 +Inf, 0x10 -Inf, 0x80 signalling NaN.
      if (count == field_lane_count && _mm512_fpclass_ps_mask(x, 0x99) == 0) {
        scaled_.split(x, stochastic_ ? rounds_away(u, random) : 0, vbytes, ebytes);
        return true;
      }
    }
#endif
    field_lanes h, e;
    if (!fields(u, random, h, e)) return false;
    store_fields<Visible>(vbytes, h, count);
    store_fields<Extra>(ebytes, e, count);
    return true;
  }

  /// The fields (h, e) of the floats whose bits are u, with their words `random` (read by a
  /// stochastic split only); false when one has no code in the restored format (then h and e
  /// are not set).
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  bool fields(field_lanes u, field_lanes random, field_lanes& h, field_lanes& e) {
    namespace core = minifloat::detail;
    using src = source_layout<float>;
#if defined(__AVX512F__)
    if constexpr (rebiased_based(Form)) {
      if (!core::any_lane_at_least(u << 1, src::inf_bits << 1)) {
        const field_lanes wide = rebiased_.codes(u);
        h = wide >> kept_;
        e = wide & kept_mask_;
        // The rebiased forms' formats (subnormals, ieee, nan_only or all_finite) have successor codes.
        if (stochastic_) take_rounded_up(rounds_away(u, random), h, e);
        return true;
      }
    }
#endif
#if defined(__AVX512DQ__)
    if constexpr (Form == pair_form::float_prefix) {
      if (prefix_.finite_fields(u, h, e)) {
        // bfloat16 has successor codes.
        if (stochastic_) take_rounded_up(rounds_away(u, random), h, e);
        return true;
      }
    }
#endif
    field_lanes wide;
    if constexpr (Form == pair_form::float_prefix) {
      wide = prefix_.codes(u);
    } else {
      field_lanes source = u;
      if (clamp_) {  // split_block's clamp: finite beyond the largest pair value -> that value
        const field_lanes a = u & src::abs_mask;
        source = core::select((a > limit_bits_) & (a < src::inf_bits), (u & src::sign_mask) | limit_bits_, u);
      }
      const field_lanes rounded = core::round_lanes<rounding::toward_zero, false>(
          truncate_, source, field_lanes{}, unused_, ~field_lanes{}, truncate_float_add_);
      if (finite_only_ && core::any_lane((rounded << 1) >= (src::inf_bits << 1))) return false;
      wide = core::code_lanes(truncate_codec_, rounded);
    }
    const field_lanes truncated = wide >> kept_;
    h = truncated;
    e = wide & kept_mask_;
    if (!stochastic_) return true;
    // NaN and Inf are not rounded (saturation would).
    const field_lanes magnitude = u & src::abs_mask;
    if (successor_codes_) {
      const lane_mask finite = lanes_above(field_lanes{} + src::inf_bits, magnitude);
      take_rounded_up(rounds_away(u, random) & finite, h, e);
      return true;
    }
    // Formats whose stochastic code is not always the truncated code or its successor (fnuz,
    // flushing formats): the core's stochastic code itself, its flag where it differs from h.
    const field_lanes rounded = this->rounded(u, random);
    field_lanes drawn;
    if constexpr (Form == pair_form::float_prefix) drawn = rounded >> 16;  // a bfloat16 value's code: its top half
    else drawn = core::code_lanes(round_codec_, rounded);
    drawn = core::select(magnitude >= src::inf_bits, truncated, drawn);
    e |= core::select(drawn != h, field_lanes{} + (std::uint32_t{1} << kept_), field_lanes{});
    h = drawn;
    return true;
  }

  /// The stochastic split's fields from the truncating split's (h, e) and the lanes that round
  /// away from zero: there h is the truncated code's successor (codes of one sign are
  /// consecutive across binades: reconstruct_block's rule) and the field's flag is set.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void take_rounded_up(lane_mask up, field_lanes& h, field_lanes& e) const {
#if defined(__AVX512F__)
    const __m512i hv = std::bit_cast<__m512i>(h), ev = std::bit_cast<__m512i>(e);
    h = std::bit_cast<field_lanes>(_mm512_mask_sub_epi32(hv, up, hv, _mm512_set1_epi32(-1)));
    e = std::bit_cast<field_lanes>(_mm512_mask_or_epi32(ev, up, ev, field_flag_lanes_));
#else
    h -= up;
    e |= up & (std::uint32_t{1} << kept_);
#endif
  }

  /// The one stochastic decision: the lanes where stochastic rounding of the floats u with the
  /// words `random` (the core's rounding to the visible format, saturating) lies farther from
  /// zero than u, for a format with successor codes (where that rounding gives the truncated
  /// value or the next one away from zero, whose code is the truncated code plus one). What a
  /// NaN or Inf lane gets is unspecified (the callers leave those lanes out).
  ///  - A register whose lanes are all zero or in the visible format's normal binades below its
  ///    top one (in_plain_range) asks whether the core's plain rounding carries
  ///    (plain_stochastic_carries) without rounding: no rounding there reaches the saturation,
  ///    and the carry is what rounds away from zero. On AVX-512 its fraction, the d dropped bits
  ///    moved to the top, is one shift by a vector of counts (d >= 1: the visible format keeps
  ///    fewer than float's 23 mantissa bits), compared with the core's threshold
  ///    (stochastic_threshold) straight into a mask register.
  ///  - Below the top binade, on AVX-512, the stochastic float form's decision without its result
  ///    (registers that mix the visible format's subnormals and normals, as e4m3's weights do).
  ///  - Elsewhere the core's rounded value compared with u: rounding keeps the sign (or makes -0
  ///    +0, which never lies farther), so the unsigned order of the bits is the order of the
  ///    magnitudes.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  lane_mask rounds_away(field_lanes u, field_lanes random) {
    namespace core = minifloat::detail;
    if (in_plain_range(u)) {
#if defined(__AVX512F__)
      const __m512i fraction =
          _mm512_maskz_sllv_epi32(core::all_lanes16, std::bit_cast<__m512i>(u), plain_fraction_shift_);
      return _mm512_cmplt_epu32_mask(std::bit_cast<__m512i>(core::stochastic_threshold(round_, random)), fraction);
#else
      return core::select(core::plain_stochastic_carries(round_, u, random), ~field_lanes{}, field_lanes{});
#endif
    }
#if defined(__AVX512F__)
    if (round_float_add_) {
      const field_lanes a = u & source_layout<float>::abs_mask;
      if (!core::any_lane_at_least(a, top_binade_bits_)) return core::stochastic_float_decide(round_, a, random).up;
    }
#endif
    return lanes_above(rounded(u, random), u);
  }

  /// With plain_carries_, whether every lane of u is zero or in the visible format's normal
  /// binades below its top one (else false).
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  bool in_plain_range(field_lanes u) const {
    return plain_carries_ && minifloat::detail::zero_or_within(u << 1, normal2_, below_top_span2_);
  }

  /// u rounded stochastically to the visible format (saturating) with the words `random`, the
  /// core's bits: round_lanes, except that with plain_first_ a register whose lanes are all zero
  /// or in the format's normal range takes round_bits' single-binade form directly, which costs
  /// fewer instructions than round_lanes' stochastic float form.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  field_lanes rounded(field_lanes u, field_lanes random) {
    namespace core = minifloat::detail;
    if (plain_first_ && core::plain_register(round_, u << 1))
      return core::round_bits<rounding::stochastic, core::lane_path::plain>(round_, u, random);
    return core::round_lanes<rounding::stochastic, false>(round_, u, random, unused_, ~field_lanes{}, round_float_add_);
  }


  rounding_plan<float> truncate_, round_;
  minifloat::detail::codec_plan<float> truncate_codec_, round_codec_;
  bool truncate_float_add_, round_float_add_, stochastic_, clamp_, finite_only_, plain_first_, successor_codes_,
      plain_carries_;
  std::uint32_t normal2_, below_top_span2_;  ///< in_plain_range's bounds, as float bits shifted left once
  std::uint32_t top_binade_bits_;            ///< the visible format's top binade's first value
  int kept_;
  std::uint32_t kept_mask_, limit_bits_;
  std::uint64_t first_draw_;
  minifloat::detail::lane_random<field_lanes> draw_;
  minifloat::detail::lane_counts<field_lanes> unused_;
  float_prefix_pairs prefix_;
#if defined(__AVX512F__)
  rebiased_pairs rebiased_;
  // Constants as registers made once: GCC rebuilt them every register (a move and a broadcast,
  // or a compare) where they were written in the loop.
  __m512i plain_fraction_shift_;  ///< 32 - d: rounds_away's plain fraction
  __m512i field_flag_lanes_;      ///< 1 << kept_: a stochastic field's flag
#endif
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  binary16_pairs binary16_;
  scaled_binary16_pairs scaled_;
#endif
};

/// Throws encode_block's std::domain_error for the first of `in` without a code in r's format
/// (element `first` + its index): the rare path of the byte-wide kernels, kept out of line. r is
/// taken by value: a reference would let the address of the caller's object escape, and GCC
/// would then assume that the field stores through byte pointers may change its constants.
[[gnu::noinline, noreturn]] inline void throw_uncoded(std::span<const float> in, const rounder<float> r,
                                                      std::size_t first) {
  std::uint32_t codes[block_values];
  encode_block(in, codes, r, first);
  throw std::logic_error("minifloat::storage: a value without a code was not found again");
}

/// split_block for a byte_field_layout, for any number of values: x (element `first` of the
/// whole array onwards) into the fields at vbytes and ebytes (which start at that element).
/// Each block of block_values values is split into local arrays and copied out whole, so a value
/// without a code (NaN or Inf into an all_finite format) throws, as encode_block does, before
/// any field of its block is written.
template <class Visible, class Extra, pair_form Form>
[[gnu::flatten]] void split_fields(const split_plan& sp, std::span<const float> x, std::size_t first,
                                   unsigned char* vbytes, unsigned char* ebytes) {
  pair_splitter<Form> split(sp, first);
  unsigned char visible[block_values * sizeof(Visible)], extra[block_values * sizeof(Extra)];
  for (std::size_t start = 0; start < x.size(); start += block_values) {
    const std::size_t m = std::min(block_values, x.size() - start);
    if (!split.template split_run<Visible, Extra>(start, x.data() + start, m, visible, extra))
      throw_uncoded(x.subspan(start, m), sp.truncate, first + start);
    std::memcpy(vbytes + start * sizeof(Visible), visible, m * sizeof(Visible));
    std::memcpy(ebytes + start * sizeof(Extra), extra, m * sizeof(Extra));
  }
}

/// reconstruct_block for a byte_field_layout: the restored values of the pairs whose fields
/// start at vbytes and ebytes.
template <class Visible, class Extra, pair_form Form>
[[gnu::flatten]] void reconstruct_fields(const split_layout& l, const unsigned char* vbytes,
                                         const unsigned char* ebytes, std::span<float> out) {
  const pair_restorer<Form> restore(l);
  const auto restore_at = [&](std::size_t i, std::size_t count) {
    restore.template restore_fields<Visible, Extra>(vbytes + i * sizeof(Visible), ebytes + i * sizeof(Extra), count,
                                                    out.data() + i);
  };
  // Whole registers with the constant count, so the field loads and the store are single
  // instructions (with the count a variable they are calls to memcpy), then the tail.
  const std::size_t whole = out.size() / field_lane_count * field_lane_count;
  for (std::size_t i = 0; i < whole; i += field_lane_count) restore_at(i, field_lane_count);
  if (whole < out.size()) restore_at(whole, out.size() - whole);
}

/// The weights of a byte_field_layout seen a tile at a time in place: load_tile(i, count, out)
/// is reconstruct's values of pairs [i, i + count), store_tile(i, count, in) stores values as
/// split_into does. An optimizer's loop reads and writes the fields through it a small tile at a
/// time (no chunk passes over separate arrays).
template <class Visible, class Extra, pair_form Form>
class byte_field_weights {
 public:
  byte_field_weights(const split_plan& sp, std::span<std::uint32_t> visible_words,
                     std::span<std::uint32_t> extra_words, std::size_t n)
      : restore_(sp.layout),
        split_(sp),
        truncate_(sp.truncate),
        visible_(reinterpret_cast<unsigned char*>(visible_words.data())),
        extra_(reinterpret_cast<unsigned char*>(extra_words.data())),
        size_(n) {}
  static constexpr std::size_t lanes = field_lane_count;  ///< the most values one load or store takes
  static constexpr pair_form form = Form;                  ///< the backend the plan chose
  std::size_t size() const { return size_; }
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void load(std::size_t i, std::size_t count, float* out) const {
    restore_.template restore_fields<Visible, Extra>(visible_ + i * sizeof(Visible), extra_ + i * sizeof(Extra), count,
                                                     out);
  }
  /// The most weights one load_tile or store_tile takes (an optimizer's tile).
  static constexpr std::size_t tile_values = pair_splitter<Form>::tile_values;
  /// Requests the fields of the tile_values weights from i (those below size()) for writing
  /// (prefetchw): a step reads them and rewrites them in place.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void prefetch_tile(std::size_t i) const {
    minifloat::detail::prefetch_range<true>(visible_, i * sizeof(Visible), tile_values * sizeof(Visible),
                                            size_ * sizeof(Visible));
    minifloat::detail::prefetch_range<true>(extra_, i * sizeof(Extra), tile_values * sizeof(Extra),
                                            size_ * sizeof(Extra));
  }
  /// The restored weights [i, i + count), count <= tile_values (i a multiple of it), into out,
  /// and in stored over them as split_into does (pair_splitter::split_run). Inlined into one tile
  /// loop per layout kind (storage::detail::step_tiles), which holds the object as a local so
  /// that GCC knows the field stores through byte pointers leave its constants alone.
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void load_tile(std::size_t i, std::size_t count, float* out) const {
    if (count == tile_values) {  // whole tiles: full registers, a constant trip count
      for (std::size_t j = 0; j < tile_values; j += lanes) load(i + j, lanes, out + j);
      return;
    }
    for (std::size_t j = 0; j < count; j += lanes) load(i + j, std::min(lanes, count - j), out + j);
  }
  /// Throws std::domain_error, naming the element, for a value without a code (NaN or Inf into
  /// an all_finite format: a step checks that first).
#if defined(__OPTIMIZE__)
  [[gnu::always_inline]]
#endif
  void store_tile(std::size_t i, std::size_t count, const float* in) {
    if (!split_.template split_run<Visible, Extra>(i, in, count, visible_ + i * sizeof(Visible),
                                                   extra_ + i * sizeof(Extra)))
      throw_uncoded(std::span<const float>(in, count), truncate_, i);
  }

 private:
  pair_restorer<Form> restore_;
  pair_splitter<Form> split_;
  rounder<float> truncate_;
  unsigned char* visible_;
  unsigned char* extra_;
  std::size_t size_;
};
#endif  // !defined(__CUDA_ARCH__)

/// split_into by split_block and pack, for any layout (the path byte-wide layouts leave).
inline void split_packed(const split_plan& p, std::span<const float> x, std::size_t first,
                         std::span<std::uint32_t> visible_words, std::span<std::uint32_t> extra_words) {
  const split_layout& l = p.layout;
  const auto vb = static_cast<std::size_t>(l.visible_bits());
  const auto eb = static_cast<std::size_t>(l.extra_bits);
  std::uint32_t visible[block_values], extra[block_values];
  for (std::size_t start = 0; start < x.size(); start += block_values) {
    const std::size_t m = std::min(block_values, x.size() - start);
    split_block(p, x.subspan(start, m), first + start, visible, extra);
    pack(std::span<const std::uint32_t>(visible, m), l.visible_bits(), visible_words.subspan(start / 32 * vb));
    pack(std::span<const std::uint32_t>(extra, m), l.extra_bits, extra_words.subspan(start / 32 * eb));
  }
}

/// reconstruct by unpack and reconstruct_block, for any layout (the path byte-wide layouts leave).
inline void reconstruct_packed(std::span<const std::uint32_t> visible_words, std::span<const std::uint32_t> extra_words,
                               const split_layout& l, std::span<float> out) {
  const auto vb = static_cast<std::size_t>(l.visible_bits());
  const auto eb = static_cast<std::size_t>(l.extra_bits);
  std::uint32_t visible[block_values], extra[block_values];
  for (std::size_t start = 0; start < out.size(); start += block_values) {
    const std::size_t m = std::min(block_values, out.size() - start);
    unpack(visible_words.subspan(start / 32 * vb), l.visible_bits(), m, std::span<std::uint32_t>(visible, m));
    unpack(extra_words.subspan(start / 32 * eb), l.extra_bits, m, std::span<std::uint32_t>(extra, m));
    reconstruct_block(l, visible, extra, out.subspan(start, m));
  }
}

#if !defined(__CUDA_ARCH__)  // host-only SIMD (pair_forms/lanes.hpp)
/// Calls f(Visible{}, Extra{}, form) with the field types of a byte_field_layout and its pair
/// form as a std::integral_constant: each form's loops are compiled apart (one loop testing the
/// form per register made SGD e4m3 + 8 15-23 % slower, measured).
template <class F>
void with_field_types(const split_layout& l, pair_form form, F f) {
  const auto with_extra = [&](auto visible, auto form_constant) {
    if (l.extra_bits == 8) f(visible, std::uint8_t{}, form_constant);
    else f(visible, std::uint16_t{}, form_constant);
  };
  constexpr std::integral_constant<pair_form, pair_form::core> core_form;
#if defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
  if (form == pair_form::hardware_binary16) {
    f(std::uint16_t{}, std::uint8_t{}, std::integral_constant<pair_form, pair_form::hardware_binary16>{});
    return;
  }
  if (form == pair_form::scaled_binary16) {
    f(std::uint8_t{}, std::uint8_t{}, std::integral_constant<pair_form, pair_form::scaled_binary16>{});
    return;
  }
#endif
#if defined(__AVX512F__)
  if (form == pair_form::rebiased) {
    constexpr std::integral_constant<pair_form, pair_form::rebiased> rebiased_form;
    if (l.visible_bits() == 8) with_extra(std::uint8_t{}, rebiased_form);
    else with_extra(std::uint16_t{}, rebiased_form);
    return;
  }
#endif
  if (l.visible_bits() == 8) with_extra(std::uint8_t{}, core_form);
  else if (form == pair_form::float_prefix)
    with_extra(std::uint16_t{}, std::integral_constant<pair_form, pair_form::float_prefix>{});
  else with_extra(std::uint16_t{}, core_form);
}
#endif

/// split() with a prepared plan; x is element `first` onwards of the array (first % 32 == 0) and
/// the word spans start at that element.
inline void split_into(const split_plan& p, std::span<const float> x, std::size_t first,
                       std::span<std::uint32_t> visible_words, std::span<std::uint32_t> extra_words) {
  const split_layout& l = p.layout;
  check_words(visible_words.size(), x.size(), l.visible_bits(), "minifloat::storage::split");
  check_words(extra_words.size(), x.size(), l.extra_bits, "minifloat::storage::split");
#if !defined(__CUDA_ARCH__)  // host-only SIMD (pair_forms/lanes.hpp)
  if (byte_field_layout(l)) {
    auto* const vbytes = reinterpret_cast<unsigned char*>(visible_words.data());
    auto* const ebytes = reinterpret_cast<unsigned char*>(extra_words.data());
    with_field_types(l, p.form, [&](auto visible, auto extra, auto form) {
      using Visible = decltype(visible);
      using Extra = decltype(extra);
      split_fields<Visible, Extra, decltype(form)::value>(p, x, first, vbytes, ebytes);
      clear_padding<Visible, Extra>(vbytes, ebytes, x.size());
    });
    return;
  }
#endif
  split_packed(p, x, first, visible_words, extra_words);
}

}  // namespace detail

/// Splits x: visible_words get packed_words(n, l.visible_bits()) words of codes, extra_words
/// packed_words(n, l.extra_bits) words of extra fields (n = x.size()).
inline void split(std::span<const float> x, const split_layout& l, std::span<std::uint32_t> visible_words,
                  std::span<std::uint32_t> extra_words, const split_options& o = {}) {
  detail::split_into(detail::split_plan(l, o), x, 0, visible_words, extra_words);
}

/// out[i] = the restored value of pair i: x rounded toward zero to l.restored() for out.size()
/// pairs. `backend` as split_options::backend.
inline void reconstruct(std::span<const std::uint32_t> visible_words, std::span<const std::uint32_t> extra_words,
                        const split_layout& l, std::span<float> out,
                        backend_policy backend = backend_policy::from_environment) {
  l.validate();
  detail::check_words(visible_words.size(), out.size(), l.visible_bits(), "minifloat::storage::reconstruct");
  detail::check_words(extra_words.size(), out.size(), l.extra_bits, "minifloat::storage::reconstruct");
  const detail::pair_form form = detail::pair_form_for(l, backend);
#if !defined(__CUDA_ARCH__)  // host-only SIMD (pair_forms/lanes.hpp)
  if (detail::byte_field_layout(l)) {
    detail::with_field_types(l, form, [&](auto visible, auto extra, auto form_constant) {
      detail::reconstruct_fields<decltype(visible), decltype(extra), decltype(form_constant)::value>(
          l, reinterpret_cast<const unsigned char*>(visible_words.data()),
          reinterpret_cast<const unsigned char*>(extra_words.data()), out);
    });
    return;
  }
#endif
  detail::reconstruct_packed(visible_words, extra_words, l, out);
}

/// A tensor in split storage: size() weights as packed visible codes plus packed extra fields.
/// Each rewrite (assign, or an optimizer step) is a new generation: stochastic draws come from
/// (seed, generation, element index), so results do not depend on how the work is chunked.
/// `backend` chooses the implementations of every split and restore of this tensor
/// (split_options::backend); every choice stores the same bits.
class split_tensor {
 public:
  split_tensor(std::span<const float> x, const split_layout& l, std::uint64_t seed = 0,
               backend_policy backend = backend_policy::from_environment)
      : layout_(detail::validated(l)),
        seed_(seed),
        backend_(backend),
        plan_(l, draws(seed, 0, backend)),
        visible_(x.size(), l.visible_bits()),
        extra_(x.size(), l.extra_bits) {
    store(0, x);
  }

  /// The tensor whose parts these are — what layout(), seed(), generation(), visible() and
  /// extra() return — so a checkpoint restores it exactly, later stochastic draws included.
  /// Throws std::invalid_argument when the arrays' field widths differ from the layout's or
  /// their sizes differ from each other.
  static split_tensor from_parts(const split_layout& l, std::uint64_t seed, std::uint64_t generation,
                                 packed_array visible, packed_array extra,
                                 backend_policy backend = backend_policy::from_environment) {
    split_tensor t(std::span<const float>{}, l, seed, backend);
    if (visible.bits() != l.visible_bits() || extra.bits() != l.extra_bits || visible.size() != extra.size())
      throw std::invalid_argument("minifloat::storage::split_tensor::from_parts: " + std::to_string(visible.size()) +
                                  " codes of " + std::to_string(visible.bits()) + " bits and " +
                                  std::to_string(extra.size()) + " extra fields of " + std::to_string(extra.bits()) +
                                  " bits for a layout of " + std::to_string(l.visible_bits()) + " + " +
                                  std::to_string(l.extra_bits) + " bits");
    t.visible_ = std::move(visible);
    t.extra_ = std::move(extra);
    t.generation_ = generation;
    t.plan_ = detail::split_plan(l, draws(seed, generation, backend));
    return t;
  }

  std::size_t size() const { return visible_.size(); }
  const split_layout& layout() const { return layout_; }
  std::uint64_t seed() const { return seed_; }
  std::uint64_t generation() const { return generation_; }
  backend_policy backend() const { return backend_; }
  /// The visible codes (for 8- and 16-bit formats, on a little-endian machine, the words are a
  /// plain uint8_t / uint16_t array of codes).
  const packed_array& visible() const { return visible_; }
  const packed_array& extra() const { return extra_; }

  /// Splits x (x.size() must equal size()) as a new generation.
  void assign(std::span<const float> x) {
    if (x.size() != size())
      throw std::invalid_argument("minifloat::storage::split_tensor::assign: " + std::to_string(x.size()) +
                                  " values for " + std::to_string(size()) + " weights");
    next_generation();
    store(0, x);
  }
  /// out = the restored weights.
  void reconstruct(std::span<float> out) const { load(0, out); }
  std::vector<float> reconstruct() const {
    std::vector<float> out(size());
    load(0, out);
    return out;
  }
  /// out = the visible values h (what the forward pass uses).
  void visible_values(std::span<float> out) const {
    if (out.size() != size())
      throw std::invalid_argument("minifloat::storage::split_tensor::visible_values: output of " +
                                  std::to_string(out.size()) + " for " + std::to_string(size()) + " weights");
    decode_packed(visible_.words(), out, layout_.visible);
  }

  // Chunked access for in-place updates: `start` must be a multiple of 32.
  /// out = restored weights [start, start + out.size()).
  void load(std::size_t start, std::span<float> out) const {
    check_range(start, out.size(), "load");
    storage::reconstruct(visible_.words_of(start, out.size()), extra_.words_of(start, out.size()), layout_, out,
                         backend_);
  }
  /// Splits x into weights [start, start + x.size()) in the current generation.
  void store(std::size_t start, std::span<const float> x) {
    check_store_range(start, x.size());
    detail::split_into(plan_, x, start, visible_.words_from(start), extra_.words_from(start));
  }
  /// Whether store() accepts every float: false for an all_finite visible format, where NaN and
  /// ±Inf have no code (store() throws std::domain_error for them).
  bool stores_every_float() const { return layout_.visible.encoding != specials::all_finite; }
  /// The index of the first value of x that store() would reject, or x.size().
  std::size_t first_rejected(std::span<const float> x) const {
    if (stores_every_float()) return x.size();
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!std::isfinite(x[i])) return i;
    return x.size();
  }
  /// The visible format (what the messages of a rejected store name).
  const format& stored_format() const { return layout_.visible; }
  /// For a layout whose fields are 8 or 16 bits wide (detail::byte_field_layout: fp16 + 8,
  /// e4m3 + 8, bf16 + 8 stochastic, ...), starts a new generation and calls
  /// f(detail::byte_field_weights<Visible, Extra>) to rewrite the weights in place, a register at
  /// a time; returns false, calling nothing, for other layouts. f must store every weight it
  /// loads, each once, what store() would store for it.
  template <class F>
  bool rewrite_byte_fields(F f) {
#if !defined(__CUDA_ARCH__)  // host-only SIMD (see above detail::split_fields)
    if (!detail::byte_field_layout(layout_)) return false;
    next_generation();
    detail::with_field_types(layout_, plan_.form, [&](auto visible, auto extra, auto form) {
      f(detail::byte_field_weights<decltype(visible), decltype(extra), decltype(form)::value>(plan_, visible_.words(),
                                                                                             extra_.words(), size()));
    });
    return true;
#else
    (void)f;
    return false;
#endif
  }
  /// Starts a new generation (fresh stochastic draws for the next stores).
  void next_generation() {
    ++generation_;
    plan_ = detail::split_plan(layout_, draws(seed_, generation_, backend_));
  }

 private:
  static split_options draws(std::uint64_t seed, std::uint64_t generation, backend_policy backend) {
    return {generation_seed(seed, generation), 0, backend};
  }
  void check_range(std::size_t start, std::size_t n, const char* who) const {
    if (start % 32 != 0 || start > size() || n > size() - start)
      throw std::out_of_range(std::string("minifloat::storage::split_tensor::") + who + ": range [" +
                              std::to_string(start) + ", +" + std::to_string(n) + ") of " + std::to_string(size()) +
                              " weights (the start must be a multiple of 32)");
  }
  void check_store_range(std::size_t start, std::size_t n) const {
    check_range(start, n, "store");
    // Packing rewrites whole words, so a range ending inside a word would clear the start of the
    // next range: only the final range may.
    if (n % 32 != 0 && start + n != size())
      throw std::out_of_range("minifloat::storage::split_tensor::store: a range that does not end at the last "
                              "weight must hold a multiple of 32 weights");
  }

  split_layout layout_;
  std::uint64_t seed_;
  backend_policy backend_;
  std::uint64_t generation_ = 0;
  detail::split_plan plan_;
  packed_array visible_;
  packed_array extra_;
};

}  // namespace minifloat::storage
