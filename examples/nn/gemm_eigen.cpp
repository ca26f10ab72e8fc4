// The Eigen backend: row-major maps of the operands, one lazily-evaluated product.
#include <Eigen/Core>

#include "nn/gemm.hpp"

namespace nn::detail {

bool have_eigen() { return true; }

void gemm_eigen(const gemm_args& g) {
  using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using stride = Eigen::OuterStride<>;
  using const_map = Eigen::Map<const matrix, Eigen::Unaligned, stride>;
  const auto idx = [](std::size_t v) { return static_cast<Eigen::Index>(v); };
  const bool ta = g.trans_a == transpose::yes, tb = g.trans_b == transpose::yes;
  const const_map a(g.a, idx(ta ? g.k : g.m), idx(ta ? g.m : g.k), stride(idx(g.lda)));
  const const_map b(g.b, idx(tb ? g.n : g.k), idx(tb ? g.k : g.n), stride(idx(g.ldb)));
  Eigen::Map<matrix, Eigen::Unaligned, stride> c(g.c, idx(g.m), idx(g.n), stride(idx(g.ldc)));
  // beta == 0 must not read C; noalias() keeps Eigen from allocating a temporary for the product.
  if (g.beta == 0.0f) c.setZero();
  else if (g.beta != 1.0f) c *= g.beta;
  if (ta && tb) c.noalias() += g.alpha * (a.transpose() * b.transpose());
  else if (ta) c.noalias() += g.alpha * (a.transpose() * b);
  else if (tb) c.noalias() += g.alpha * (a * b.transpose());
  else c.noalias() += g.alpha * (a * b);
}

}  // namespace nn::detail
