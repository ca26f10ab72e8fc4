// minifloat/backends/choice.hpp — which implementation a bulk operation runs: the one predicate
// that picks a backend, asked once when the operation's plan is built.
//
// Every backend gives the reference core's bits (each header says why, and the test suite runs
// once with the backends and once with the reference core forced, backend.hpp), so the choice
// is about speed only: a backend is taken where the build, the CPU, the format and the mode
// allow it and the plan's backend_policy does not force the reference core.
#pragma once

#include <concepts>
#include <cstdint>

#include "../backend.hpp"
#include "../round.hpp"
#include "float_arithmetic.hpp"
#include "hardware_conversion.hpp"
#include "stochastic_float.hpp"

namespace minifloat::detail {

/// The implementations of a bulk rounding.
enum class bulk_backend : std::uint8_t {
  reference_core,    ///< the core's lane kernels (register_paths.hpp without a float form)
  float_arithmetic,  ///< float_arithmetic.hpp: nearest-even, nearest-away, toward-zero from float
  stochastic_float,  ///< stochastic_float.hpp: stochastic rounding from float
  f16c_conversion,   ///< hardware_conversion.hpp: binary16 by F16C
  bf16_conversion,   ///< hardware_conversion.hpp: bfloat16 by AVX512-BF16
};

/// What an operation's loop can run: every backend (bulk quantize, whose loop has the hardware
/// conversions), or the register forms only (encode, the block kernels, split storage: loops of
/// their own that round a register at a time through round_lanes).
enum class backend_offer : std::uint8_t { register_forms, with_conversions };

/// The backend for plan p: the reference core when p's policy forces it (uses_reference_core),
/// else the fastest backend the operation offers that serves p on this build and CPU, else the
/// reference core.
template <std::floating_point S>
bulk_backend choose_bulk_backend(const rounding_plan<S>& p, backend_offer offer = backend_offer::with_conversions) {
  if constexpr (std::same_as<S, float>) {
    if (uses_reference_core(p.policy)) return bulk_backend::reference_core;
    if (offer == backend_offer::with_conversions) {
      switch (hardware_form_for(p)) {
        case hardware_form::f16c: return bulk_backend::f16c_conversion;
        case hardware_form::bf16: return bulk_backend::bf16_conversion;
        case hardware_form::none: break;
      }
    }
#if defined(__AVX512F__) && !defined(__CUDA_ARCH__)
    if (p.mode == rounding::stochastic) {
      if (stochastic_float_applies(p)) return bulk_backend::stochastic_float;
    } else if (p.mode == rounding::nearest_even || p.mode == rounding::nearest_away || p.mode == rounding::toward_zero) {
      if (float_add_applies(p)) return bulk_backend::float_arithmetic;
    }
#endif
  }
  (void)p, (void)offer;
  return bulk_backend::reference_core;
}

/// Whether registers outside a backend's own loop (tails, the stochastic loop, the block
/// kernels) take a float form in round_lanes: for the float backends.
constexpr bool register_float_form(bulk_backend b) {
  return b == bulk_backend::float_arithmetic || b == bulk_backend::stochastic_float;
}

/// For loops of their own (split storage): whether round_lanes takes a float form for plan p.
template <std::floating_point S>
bool use_float_add(const rounding_plan<S>& p) {
  return register_float_form(choose_bulk_backend(p, backend_offer::register_forms));
}

}  // namespace minifloat::detail
