// minifloat/backend.hpp — whether a bulk operation may take a fast backend or must run the
// reference core.
//
// Every bulk operation (bulk.hpp's quantize/encode/decode, block.hpp's block kernels, split
// storage's split and restore) has one reference implementation: the core's lane kernels
// (round.hpp's round_bits on SIMD registers). Beside it sit named backends: the same operation
// by float arithmetic, by the processor's conversion instructions, by a stochastic float form,
// by a split pair form. Each is chosen once, when the operation's plan is built, and each is
// tested bit-identical to the reference. This switch forces the reference for every path, so
// that the test suite can run once with the backends and once without them and show the same
// bits (docs/performance.md, "Backends").
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace minifloat {

/// Which implementations a plan may choose.
enum class backend_policy : std::uint8_t {
  from_environment,  ///< fastest, unless the environment variable MINIFLOAT_REFERENCE_CORE is set
                     ///< to anything but "" or "0" (then reference_core)
  fastest,           ///< every backend the build, the format and the data allow
  reference_core,    ///< the core's lane kernels on every path
};

/// Whether MINIFLOAT_REFERENCE_CORE asks for the reference core. Read once per process: the
/// variable is a switch for test runs, set before the program starts, not a knob to turn while
/// it runs.
inline bool reference_core_from_environment() {
  static const bool forced = [] {
    const char* value = std::getenv("MINIFLOAT_REFERENCE_CORE");
    return value != nullptr && std::string_view(value) != "" && std::string_view(value) != "0";
  }();
  return forced;
}

/// Whether a plan built under `policy` must run the reference core.
inline bool uses_reference_core(backend_policy policy) {
  return policy == backend_policy::reference_core ||
         (policy == backend_policy::from_environment && reference_core_from_environment());
}

}  // namespace minifloat
