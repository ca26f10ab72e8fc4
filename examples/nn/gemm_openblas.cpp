// The OpenBLAS backend: cblas_sgemm, restricted to the calling thread.
#include <cblas.h>

#include <mutex>

#include "nn/gemm.hpp"

namespace nn::detail {

bool have_openblas() { return true; }

void gemm_openblas(const gemm_args& g) {
  // Debian's default libopenblas0 is the pthread build, which would spread each product over
  // every core; the trainer's timings and the machine's other users want one thread.
  static std::once_flag single_thread;
  std::call_once(single_thread, [] { openblas_set_num_threads(1); });
  cblas_sgemm(CblasRowMajor, g.trans_a == transpose::yes ? CblasTrans : CblasNoTrans,
              g.trans_b == transpose::yes ? CblasTrans : CblasNoTrans, static_cast<blasint>(g.m),
              static_cast<blasint>(g.n), static_cast<blasint>(g.k), g.alpha, g.a, static_cast<blasint>(g.lda), g.b,
              static_cast<blasint>(g.ldb), g.beta, g.c, static_cast<blasint>(g.ldc));
}

}  // namespace nn::detail
