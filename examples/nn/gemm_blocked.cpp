// The hand-written backend: Goto-style blocking (packed panels of A in L2, of B in L1) around a
// 6 x 32 register-tile micro-kernel written with the GCC vector extension, so the compiler
// emits AVX-512, AVX2 or SSE code from the same source.
#include <algorithm>
#include <cstring>
#include <vector>

#include "nn/gemm.hpp"

namespace nn::detail {
namespace {

using vec = float __attribute__((vector_size(64)));
constexpr std::size_t lanes = sizeof(vec) / sizeof(float);
constexpr std::size_t mr = 6;            // rows of the register tile
constexpr std::size_t nr = 2 * lanes;    // columns of the register tile
constexpr std::size_t kc = 256;          // depth of a packed panel: kc * nr floats of B stay in L1
constexpr std::size_t mc = 96;           // rows of A packed at once (L2)
constexpr std::size_t nc = 1024;         // columns of B packed at once

struct view {
  const float* p;
  std::size_t ld;
  bool trans;
  float at(std::size_t row, std::size_t col) const { return trans ? p[col * ld + row] : p[row * ld + col]; }
};

// Packs rows [i0, i0+rows) x depth [p0, p0+depth) of op(A) into mr-row slivers, zero-padded.
void pack_a(const view& a, std::size_t i0, std::size_t rows, std::size_t p0, std::size_t depth, float* out) {
  for (std::size_t ir = 0; ir < rows; ir += mr) {
    for (std::size_t p = 0; p < depth; ++p)
      for (std::size_t i = 0; i < mr; ++i) *out++ = ir + i < rows ? a.at(i0 + ir + i, p0 + p) : 0.0f;
  }
}

// Packs depth [p0, p0+depth) x columns [j0, j0+cols) of op(B) into nr-column slivers, zero-padded.
void pack_b(const view& b, std::size_t p0, std::size_t depth, std::size_t j0, std::size_t cols, float* out) {
  for (std::size_t jr = 0; jr < cols; jr += nr) {
    const std::size_t w = std::min(nr, cols - jr);
    for (std::size_t p = 0; p < depth; ++p) {
      if (!b.trans) {
        std::memcpy(out, b.p + (p0 + p) * b.ld + j0 + jr, w * sizeof(float));
        std::fill(out + w, out + nr, 0.0f);
      } else {
        for (std::size_t j = 0; j < nr; ++j) out[j] = j < w ? b.at(p0 + p, j0 + jr + j) : 0.0f;
      }
      out += nr;
    }
  }
}

// C[rows x cols] += alpha * (packed sliver of A) * (packed sliver of B).
[[gnu::always_inline]] inline void micro_kernel(std::size_t depth, const float* a, const float* b, float alpha,
                                                float* c, std::size_t ldc, std::size_t rows, std::size_t cols) {
  vec acc[mr][2] = {};
  for (std::size_t p = 0; p < depth; ++p) {
    vec b0, b1;
    std::memcpy(&b0, b + p * nr, sizeof(vec));
    std::memcpy(&b1, b + p * nr + lanes, sizeof(vec));
    for (std::size_t i = 0; i < mr; ++i) {
      const float ai = a[p * mr + i];
      acc[i][0] += ai * b0;
      acc[i][1] += ai * b1;
    }
  }
  if (rows == mr && cols == nr) {
    for (std::size_t i = 0; i < mr; ++i) {
      vec c0, c1;
      std::memcpy(&c0, c + i * ldc, sizeof(vec));
      std::memcpy(&c1, c + i * ldc + lanes, sizeof(vec));
      c0 += alpha * acc[i][0];
      c1 += alpha * acc[i][1];
      std::memcpy(c + i * ldc, &c0, sizeof(vec));
      std::memcpy(c + i * ldc + lanes, &c1, sizeof(vec));
    }
    return;
  }
  float tile[mr][nr];
  std::memcpy(tile, acc, sizeof(tile));
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) c[i * ldc + j] += alpha * tile[i][j];
}

}  // namespace

void gemm_blocked(const gemm_args& g) {
  for (std::size_t i = 0; i < g.m; ++i) {
    float* row = g.c + i * g.ldc;
    if (g.beta == 0.0f) std::fill(row, row + g.n, 0.0f);
    else if (g.beta != 1.0f)
      for (std::size_t j = 0; j < g.n; ++j) row[j] *= g.beta;
  }
  const view a{g.a, g.lda, g.trans_a == transpose::yes};
  const view b{g.b, g.ldb, g.trans_b == transpose::yes};
  std::vector<float> packed_a(mc * kc);
  std::vector<float> packed_b(kc * ((std::min(nc, g.n) + nr - 1) / nr * nr));
  for (std::size_t j0 = 0; j0 < g.n; j0 += nc) {
    const std::size_t cols = std::min(nc, g.n - j0);
    for (std::size_t p0 = 0; p0 < g.k; p0 += kc) {
      const std::size_t depth = std::min(kc, g.k - p0);
      pack_b(b, p0, depth, j0, cols, packed_b.data());
      for (std::size_t i0 = 0; i0 < g.m; i0 += mc) {
        const std::size_t rows = std::min(mc, g.m - i0);
        pack_a(a, i0, rows, p0, depth, packed_a.data());
        for (std::size_t jr = 0; jr < cols; jr += nr)
          for (std::size_t ir = 0; ir < rows; ir += mr)
            micro_kernel(depth, packed_a.data() + ir * depth, packed_b.data() + jr * depth, g.alpha,
                         g.c + (i0 + ir) * g.ldc + j0 + jr, g.ldc, std::min(mr, rows - ir), std::min(nr, cols - jr));
      }
    }
  }
}

}  // namespace nn::detail
