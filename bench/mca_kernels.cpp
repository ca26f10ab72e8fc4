// bench/mca_kernels.cpp — the library's hot loops, each reachable from a named extern "C"
// function, for bench/mca_hot_loops.sh: it compiles this file to assembly for one -march, finds
// each function's innermost vector loop and hands it to llvm-mca. Nothing here runs; the functions
// only pin down which template instances the compiler emits (the loops themselves live in the
// backends' float_add_run (backends/float_arithmetic.hpp) and hardware_run
// (backends/hardware_conversion.hpp), bulk.hpp's stochastic_run and split.hpp's tile loops, which
// these calls reach).
#include <cstddef>
#include <cstdint>
#include <span>

#include <minifloat/bulk.hpp>
#include <minifloat/storage/optimizers.hpp>
#include <minifloat/storage/split.hpp>

namespace mf = minifloat;
namespace ms = minifloat::storage;

extern "C" {

// Bulk quantize, float -> float, nearest-even, saturate (bench_quantize's rows).
void mca_quantize_e4m3_rne(const float* in, float* out, std::size_t n) {
  mf::quantize(std::span<const float>(in, n), std::span<float>(out, n), mf::e4m3,
               {mf::rounding::nearest_even, mf::overflow::saturate});
}
void mca_quantize_bf16_rne(const float* in, float* out, std::size_t n) {
  mf::quantize(std::span<const float>(in, n), std::span<float>(out, n), mf::bfloat16,
               {mf::rounding::nearest_even, mf::overflow::saturate});
}
// Stochastic rounding to e4m3 with 32 random bits (the ARS-5 words and the rounding in one loop).
void mca_quantize_e4m3_sr(const float* in, float* out, std::size_t n, std::uint64_t seed) {
  mf::quantize(std::span<const float>(in, n), std::span<float>(out, n), mf::e4m3,
               {mf::rounding::stochastic, mf::overflow::saturate, 0, seed});
}

// The fp32 SGD step (momentum, weight decay) the split steps are compared with.
void mca_sgd_fp32(float* w, const float* g, std::size_t n, ms::sgd_state* s, const ms::sgd_options* o) {
  ms::sgd_step(std::span<float>(w, n), std::span<const float>(g, n), *s, *o);
}
// The split-storage SGD step on a split_tensor of any layout; which layout's loop runs is chosen
// at run time, so each layout's tile loop is emitted here and the script picks it by name.
void mca_sgd_split(ms::split_tensor* w, const float* g, std::size_t n, ms::sgd_state* s, const ms::sgd_options* o) {
  ms::sgd_step(*w, std::span<const float>(g, n), *s, *o);
}

}  // extern "C"
