// minifloat/backends/hardware_conversion.hpp — the hardware-conversion backend: rounding from
// float to binary16 by F16C's vcvtps2ph / vcvtph2ps and to bfloat16 by AVX512-BF16's
// vcvtneps2bf16, a register at a time.
//
// Why it gives the core's bits: these instructions are IEEE 754 conversions with the rounding
// the plan asks for (an embedded mode, whatever MXCSR says), so on the registers where their
// conventions and the core's agree (finite lanes; for bfloat16 also no float subnormals) they
// compute the same correctly rounded value; every other register, and the plan's overflow
// policy, follow the core (details at hardware_form below). tests/test_bulk.cpp compares these
// registers with the scalar core, fall-back lanes included, the exhaustive tests compare every
// float with the instructions themselves, and the suite passes with the reference core forced
// (backend.hpp).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../detail/simd.hpp"
#include "../format.hpp"
#include "../round.hpp"
#include "lane_counts.hpp"
#include "register_paths.hpp"

namespace minifloat::detail {

/// A hardware conversion that rounds a plan's registers to the core's bits, chosen once per
/// kernel call: F16C's vcvtps2ph (embedded nearest-even or toward-zero) and vcvtph2ps for
/// binary16, AVX512-BF16's vcvtneps2bf16 (nearest-even only) for bfloat16. These are the
/// hardware's rounding, not a copy of the core's bit logic, and they serve only the registers
/// where they agree with the core (hardware_misses): for binary16 every finite register
/// (float subnormal inputs round to ±0 whether or not DAZ zeroes them first, the format's
/// subnormal results are exact, and F16C ignores MXCSR's rounding field with an embedded mode);
/// for bfloat16 registers whose lanes are zero or normal floats below Inf (vcvtneps2bf16 flushes
/// float subnormal inputs, whose bfloat16 roundings are subnormals, and ignores MXCSR; a normal
/// input never rounds to a subnormal). NaN lanes take the core (it keeps the whole payload,
/// the hardware truncates it), as do Inf lanes (the core's result depends on the policy). A
/// finite lane that overflows becomes Inf in the hardware and the plan's overflow result in the
/// core: max under saturate (restored by one vrangeps, the minimum of magnitudes with the
/// lane's sign), Inf otherwise; toward zero F16C stops at max as the core does.
/// tests/test_bulk.cpp checks these registers against the scalar core, fall-back lanes
/// included; the exhaustive tests compare every float with F16C / AVX512-BF16 themselves.
enum class hardware_form { none, f16c, bf16 };

/// The conversion that serves plan p on this build and CPU, or none.
inline hardware_form hardware_form_for([[maybe_unused]] const rounding_plan<float>& p) {
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__F16C__) && !defined(__CUDA_ARCH__)
  if ((p.mode == rounding::nearest_even || p.mode == rounding::toward_zero) && p.fmt == binary16)
    return hardware_form::f16c;
#if defined(__AVX512BF16__)
  if (p.mode == rounding::nearest_even && p.fmt == bfloat16) return hardware_form::bf16;
#endif
#endif
  return hardware_form::none;
}

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__F16C__) && !defined(__CUDA_ARCH__)
/// True when the register must take the core rather than the hardware form H: one vfpclassps
/// (NaN and Inf lanes; for bfloat16 also float subnormals). vfpclassps classifies a subnormal
/// as zero when MXCSR.DAZ is set, so for bfloat16 the caller passes Daz (read once per kernel
/// call) and the test is then on the bits: a lane that is neither zero nor in [smallest normal, Inf).
template <hardware_form H, bool Daz = false>
[[gnu::always_inline]] inline bool hardware_misses(simd_t<std::uint32_t> u) {
  __m512i t;
  std::memcpy(&t, &u, 64);
  // vfpclassps categories: 0x01 quiet NaN, 0x08 +Inf, 0x10 -Inf, 0x20 subnormal, 0x80 signalling NaN.
  if constexpr (H == hardware_form::f16c) return _mm512_fpclass_ps_mask(_mm512_castsi512_ps(t), 0x99) != 0;
  if constexpr (!Daz) return _mm512_fpclass_ps_mask(_mm512_castsi512_ps(t), 0xB9) != 0;
  constexpr std::uint32_t inf2 = 0x7f800000U << 1, normal2 = 0x00800000U << 1;
  const __m512i twice = _mm512_maskz_slli_epi32(all_lanes16, t, 1);  // zero-masked: see float_add_rounding
  const __mmask16 nonzero = _mm512_test_epi32_mask(twice, twice);
  return _mm512_mask_cmpge_epu32_mask(nonzero, _mm512_sub_epi32(twice, _mm512_set1_epi32(static_cast<int>(normal2))),
                                      _mm512_set1_epi32(static_cast<int>(inf2 - normal2))) != 0;
}

/// The hardware form's result for a register that hardware_misses let through; `max` is the
/// format's largest value, applied where the plan saturates.
template <rounding Mode, hardware_form H>
[[gnu::always_inline]] inline simd_t<std::uint32_t> hardware_rounding(simd_t<std::uint32_t> u, bool saturates,
                                                                      __m512 max) {
  __m512 x, y;
  std::memcpy(&x, &u, 64);
  if constexpr (H == hardware_form::f16c) {
    constexpr int embedded =
        (Mode == rounding::nearest_even ? _MM_FROUND_TO_NEAREST_INT : _MM_FROUND_TO_ZERO) | _MM_FROUND_NO_EXC;
    // The zero-masked forms with a full mask, for GCC 12 (see float_add_rounding).
    y = _mm512_maskz_cvtph_ps(all_lanes16, _mm512_maskz_cvtps_ph(all_lanes16, x, embedded));
  } else {
#if defined(__AVX512BF16__)
    const __m256bh h = _mm512_cvtneps_pbh(x);
    __m256i narrow;
    std::memcpy(&narrow, &h, sizeof narrow);
    y = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(all_lanes16, _mm512_maskz_cvtepu16_epi32(all_lanes16, narrow), 16));
#else
    static_assert(H != hardware_form::bf16, "vcvtneps2bf16 needs AVX512-BF16");
#endif
  }
  // imm 0b0010: the smaller magnitude, with the sign of the first operand.
  if (Mode != rounding::toward_zero && saturates) y = _mm512_maskz_range_ps(all_lanes16, y, max, 0b0010);
  simd_t<std::uint32_t> result;
  std::memcpy(&result, &y, 64);
  return result;
}

/// The backend's loop for the hardware form H: rounds every whole register of `in` by H where
/// hardware_misses allows it, by the core otherwise; returns the index after the last whole
/// register. Never inlined, with counters of its own (see float_add_run). Daz: MXCSR.DAZ is set
/// (see hardware_misses).
template <rounding Mode, bool Count, hardware_form H, bool Daz>
[[gnu::noinline]] std::size_t hardware_run(const rounding_plan<float>& plan, const float* in, float* out,
                                           std::size_t n, lane_counts<simd_t<std::uint32_t>>& counts) {
  using V = simd_t<std::uint32_t>;
  constexpr std::size_t lanes = simd_lanes<std::uint32_t>;
  const rounding_plan<float> p = plan;  // a local copy: stores to out cannot alias it
  const bool saturates = p.saturates();
  const __m512 max = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(p.max_bits)));
  lane_counts<V> local;
  if constexpr (Count) local.first_nonzero = first_nonzero_magnitude<Mode>(p);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    prefetch_stream(in, out, i, n);
    const V u = load_lanes<V>(in + i);
    if (hardware_misses<H, Daz>(u)) {  // NaN, Inf (bfloat16: also float subnormal) lanes: the core
      store_lanes(out + i, round_lanes<Mode, Count>(p, u, V{}, local, ~V{}));
      continue;
    }
    const V result = hardware_rounding<Mode, H>(u, saturates, max);
    if constexpr (Count && H == hardware_form::bf16) {
      // Every lane is zero or a normal float, which rounds to a nonzero value: nothing underflows.
      __m512i a;
      std::memcpy(&a, &u, 64);
      a = _mm512_and_si512(a, _mm512_set1_epi32(0x7fffffff));
      local.mask_overflows += static_cast<unsigned>(std::popcount(static_cast<unsigned>(
          _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(static_cast<int>(p.threshold_bits))))));
    } else if constexpr (Count) {
      local.template add<true>(p, u, result, ~V{});
    }
    store_lanes(out + i, result);
  }
  if constexpr (Count) counts.merge(local);
  return i;
}
#endif

/// The backend's entry: the whole registers of `in` by the plan's conversion H (hardware_form_for,
/// chosen when the plan was built); returns the index after the last whole register (0 where
/// this build has no conversion for Mode). MXCSR.DAZ is read here once per call: it changes what
/// vfpclassps calls a subnormal (hardware_misses); F16C's test does not look at subnormals.
template <rounding Mode, bool Count>
std::size_t hardware_conversion_run([[maybe_unused]] hardware_form h, [[maybe_unused]] const rounding_plan<float>& p,
                                    [[maybe_unused]] const float* in, [[maybe_unused]] float* out,
                                    [[maybe_unused]] std::size_t n,
                                    [[maybe_unused]] lane_counts<simd_t<std::uint32_t>>& counts) {
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__F16C__) && !defined(__CUDA_ARCH__)
  if constexpr (Mode == rounding::nearest_even || Mode == rounding::toward_zero) {
    if (h == hardware_form::f16c) return hardware_run<Mode, Count, hardware_form::f16c, false>(p, in, out, n, counts);
#if defined(__AVX512BF16__)
    if constexpr (Mode == rounding::nearest_even) {
      if (h == hardware_form::bf16) {
        if ((_mm_getcsr() & 0x40U) != 0) return hardware_run<Mode, Count, hardware_form::bf16, true>(p, in, out, n, counts);
        return hardware_run<Mode, Count, hardware_form::bf16, false>(p, in, out, n, counts);
      }
    }
#endif
  }
#endif
  return 0;
}

}  // namespace minifloat::detail
