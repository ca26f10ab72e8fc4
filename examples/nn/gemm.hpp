// nn/gemm.hpp — the one matrix product behind every GEMM layer (linear, conv2d).
//
// Row-major C = alpha * op(A) * op(B) + beta * C with BLAS-style transposes. Three backends are
// built when available: a hand-written blocked kernel (always), OpenBLAS and Eigen; the layers
// call the default one, chosen when minifloat_nn was configured (docs/examples.md has the
// measurements behind that choice). Every backend runs on the calling thread only.
#pragma once

#include <cstddef>
#include <string_view>

namespace nn {

enum class transpose : bool { no, yes };

/// Arguments of one product. op(A) is m x k, op(B) is k x n, C is m x n; lda/ldb/ldc are the
/// row strides of A, B and C as stored (before the transpose). beta == 0 overwrites C without
/// reading it, so C may start uninitialised.
struct gemm_args {
  transpose trans_a = transpose::no;
  transpose trans_b = transpose::no;
  std::size_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const float* a = nullptr;
  std::size_t lda = 0;
  const float* b = nullptr;
  std::size_t ldb = 0;
  float beta = 0.0f;
  float* c = nullptr;
  std::size_t ldc = 0;
};

enum class gemm_backend { blocked, openblas, eigen };

[[nodiscard]] constexpr std::string_view name(gemm_backend b) {
  switch (b) {
    case gemm_backend::blocked: return "blocked";
    case gemm_backend::openblas: return "openblas";
    case gemm_backend::eigen: return "eigen";
  }
  return "?";
}

/// Whether this build of minifloat_nn contains the backend.
[[nodiscard]] bool gemm_available(gemm_backend b);
/// The backend the layers use.
[[nodiscard]] gemm_backend default_gemm_backend();

/// Throws std::invalid_argument for inconsistent leading dimensions, std::logic_error for a
/// backend this build lacks.
void gemm(gemm_backend backend, const gemm_args& g);
inline void gemm(const gemm_args& g) { gemm(default_gemm_backend(), g); }

namespace detail {
void gemm_blocked(const gemm_args& g);
void gemm_openblas(const gemm_args& g);
void gemm_eigen(const gemm_args& g);
bool have_openblas();
bool have_eigen();
}  // namespace detail

}  // namespace nn
