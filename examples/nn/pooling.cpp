#include "nn/pooling.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace nn {

shape4 detail::pooled_shape(const pool_config& cfg, const shape4& in, const char* who) {
  if (in.h < cfg.kernel || in.w < cfg.kernel)
    throw std::invalid_argument(std::string(who) + ": input plane smaller than the window");
  return {in.n, in.c, (in.h - cfg.kernel) / cfg.stride + 1, (in.w - cfg.kernel) / cfg.stride + 1};
}

namespace {
void check(const pool_config& cfg, const char* who) {
  if (cfg.kernel == 0 || cfg.stride == 0) throw std::invalid_argument(std::string(who) + ": kernel and stride must be positive");
}
}  // namespace

max_pool::max_pool(const pool_config& config) : cfg_(config) { check(cfg_, "nn::max_pool"); }
avg_pool::avg_pool(const pool_config& config) : cfg_(config) { check(cfg_, "nn::avg_pool"); }

void max_pool::forward(const tensor& x, tensor& y, mode) {
  const shape4 os = output_shape(x.shape);
  y.resize(os);
  argmax_.resize(os.numel());
  const std::size_t planes = x.shape.n * x.shape.c, k = cfg_.kernel, s = cfg_.stride, w = x.shape.w;
  // Selects rather than branches (which way a window goes is a coin toss); a NaN wins over
  // any number so that it propagates.
  const auto better = [](float v, float best) { return v > best || (v != v && best == best); };
  for (std::size_t pl = 0; pl < planes; ++pl) {
    const float* in = x.data() + pl * x.shape.plane();
    float* out = y.data() + pl * os.plane();
    std::uint32_t* arg = argmax_.data() + pl * os.plane();
    if (k == 2 && s == 2) {  // the models' case, unrolled
      for (std::size_t oy = 0; oy < os.h; ++oy) {
        const float* r0 = in + 2 * oy * w;
        const float* r1 = r0 + w;
        for (std::size_t ox = 0; ox < os.w; ++ox) {
          const std::size_t at = 2 * oy * w + 2 * ox;
          float best = r0[2 * ox];
          std::size_t best_at = at;
          const bool t1 = better(r0[2 * ox + 1], best);
          best = t1 ? r0[2 * ox + 1] : best;
          best_at = t1 ? at + 1 : best_at;
          const bool t2 = better(r1[2 * ox], best);
          best = t2 ? r1[2 * ox] : best;
          best_at = t2 ? at + w : best_at;
          const bool t3 = better(r1[2 * ox + 1], best);
          best = t3 ? r1[2 * ox + 1] : best;
          best_at = t3 ? at + w + 1 : best_at;
          out[oy * os.w + ox] = best;
          arg[oy * os.w + ox] = static_cast<std::uint32_t>(best_at);
        }
      }
      continue;
    }
    for (std::size_t oy = 0; oy < os.h; ++oy)
      for (std::size_t ox = 0; ox < os.w; ++ox) {
        std::size_t best_at = oy * s * w + ox * s;
        float best = in[best_at];
        for (std::size_t ky = 0; ky < k; ++ky)
          for (std::size_t kx = 0; kx < k; ++kx) {
            const std::size_t at = (oy * s + ky) * w + ox * s + kx;
            const float v = in[at];
            const bool take = better(v, best);
            best = take ? v : best;
            best_at = take ? at : best_at;
          }
        out[oy * os.w + ox] = best;
        arg[oy * os.w + ox] = static_cast<std::uint32_t>(best_at);
      }
  }
}

void max_pool::backward(const tensor& x, const tensor& dy, tensor* dx) {
  const shape4 os = output_shape(x.shape);
  if (dy.shape != os || argmax_.size() != os.numel())
    throw std::invalid_argument("nn::max_pool: gradient shape differs from the last forward's output");
  if (dx == nullptr) return;
  dx->resize(x.shape);
  std::fill(dx->values.begin(), dx->values.end(), 0.0f);
  const std::size_t planes = x.shape.n * x.shape.c;
  for (std::size_t pl = 0; pl < planes; ++pl) {
    float* out = dx->data() + pl * x.shape.plane();
    const float* g = dy.data() + pl * os.plane();
    const std::uint32_t* arg = argmax_.data() + pl * os.plane();
    // Overlapping windows (stride < kernel) can pick the same input twice: accumulate.
    for (std::size_t o = 0; o < os.plane(); ++o) out[arg[o]] += g[o];
  }
}

void avg_pool::forward(const tensor& x, tensor& y, mode) {
  const shape4 os = output_shape(x.shape);
  y.resize(os);
  const std::size_t planes = x.shape.n * x.shape.c, k = cfg_.kernel, s = cfg_.stride;
  const float scale = 1.0f / static_cast<float>(k * k);
  for (std::size_t pl = 0; pl < planes; ++pl) {
    const float* in = x.data() + pl * x.shape.plane();
    float* out = y.data() + pl * os.plane();
    for (std::size_t oy = 0; oy < os.h; ++oy)
      for (std::size_t ox = 0; ox < os.w; ++ox) {
        float sum = 0.0f;
        for (std::size_t ky = 0; ky < k; ++ky)
          for (std::size_t kx = 0; kx < k; ++kx) sum += in[(oy * s + ky) * x.shape.w + ox * s + kx];
        out[oy * os.w + ox] = sum * scale;
      }
  }
}

void avg_pool::backward(const tensor& x, const tensor& dy, tensor* dx) {
  const shape4 os = output_shape(x.shape);
  if (dy.shape != os) throw std::invalid_argument("nn::avg_pool: gradient shape differs from output");
  if (dx == nullptr) return;
  dx->resize(x.shape);
  std::fill(dx->values.begin(), dx->values.end(), 0.0f);
  const std::size_t planes = x.shape.n * x.shape.c, k = cfg_.kernel, s = cfg_.stride;
  const float scale = 1.0f / static_cast<float>(k * k);
  for (std::size_t pl = 0; pl < planes; ++pl) {
    float* out = dx->data() + pl * x.shape.plane();
    const float* g = dy.data() + pl * os.plane();
    for (std::size_t oy = 0; oy < os.h; ++oy)
      for (std::size_t ox = 0; ox < os.w; ++ox)
        for (std::size_t ky = 0; ky < k; ++ky)
          for (std::size_t kx = 0; kx < k; ++kx) out[(oy * s + ky) * x.shape.w + ox * s + kx] += g[oy * os.w + ox] * scale;
  }
}

}  // namespace nn
