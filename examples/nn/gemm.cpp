// Backend dispatch and argument checks shared by every GEMM backend.
#include "nn/gemm.hpp"

#include <stdexcept>
#include <string>

namespace nn {
namespace {

void check_operand(const char* what, transpose t, std::size_t rows, std::size_t cols, std::size_t ld,
                   const float* p) {
  // As stored, a transposed operand has its rows and columns swapped.
  const std::size_t stored_cols = t == transpose::no ? cols : rows;
  const std::size_t stored_rows = t == transpose::no ? rows : cols;
  if (stored_rows == 0 || stored_cols == 0) return;
  if (ld < stored_cols)
    throw std::invalid_argument(std::string("nn::gemm: leading dimension of ") + what + " is smaller than its row");
  if (p == nullptr) throw std::invalid_argument(std::string("nn::gemm: ") + what + " is null");
}

// The product is empty: C = beta * C, where beta == 0 must not read C (it may hold NaN garbage).
void scale_only(const gemm_args& g) {
  for (std::size_t i = 0; i < g.m; ++i) {
    float* row = g.c + i * g.ldc;
    for (std::size_t j = 0; j < g.n; ++j) row[j] = g.beta == 0.0f ? 0.0f : g.beta * row[j];
  }
}

}  // namespace

bool gemm_available(gemm_backend b) {
  switch (b) {
    case gemm_backend::blocked: return true;
    case gemm_backend::openblas: return detail::have_openblas();
    case gemm_backend::eigen: return detail::have_eigen();
  }
  return false;
}

void gemm(gemm_backend backend, const gemm_args& g) {
  check_operand("A", g.trans_a, g.m, g.k, g.lda, g.a);
  check_operand("B", g.trans_b, g.k, g.n, g.ldb, g.b);
  check_operand("C", transpose::no, g.m, g.n, g.ldc, g.c);
  if (!gemm_available(backend))
    throw std::logic_error(std::string("nn::gemm: this build has no ") + std::string(name(backend)) + " backend");
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0 || g.alpha == 0.0f) {
    scale_only(g);
    return;
  }
  switch (backend) {
    case gemm_backend::blocked: detail::gemm_blocked(g); break;
    case gemm_backend::openblas: detail::gemm_openblas(g); break;
    case gemm_backend::eigen: detail::gemm_eigen(g); break;
  }
}

}  // namespace nn
