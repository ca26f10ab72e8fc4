// Gradient checks of every layer of the example trainer, of the loss and of whole models,
// against central finite differences (tests/examples/grad_check.hpp), in train mode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "examples/grad_check.hpp"
#include "nn/batch_norm.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "nn/models.hpp"
#include "nn/pooling.hpp"
#include "nn/relu.hpp"

namespace {

using grad_check::require_match;

constexpr std::size_t limit = 120;  // checked elements per tensor

void use_values(nn::module& layer) {
  for (nn::parameter& p : layer.parameters()) p.used = p.value;
}

/// Checks dx and every parameter gradient of `layer` at input `x` under the loss Σ r·y.
void check_layer(const std::string& name, nn::module& layer, nn::tensor x, float h, std::mt19937_64& rng,
                 bool check_input = true) {
  nn::tensor y;
  layer.forward(x, y, nn::mode::train);
  nn::tensor r(y.shape);
  grad_check::fill_normal(r.span(), rng);
  const auto loss = [&] {
    nn::tensor out;
    layer.forward(x, out, nn::mode::train);
    return grad_check::project(out, r);
  };
  layer.forward(x, y, nn::mode::train);  // backward belongs to the forward at the unperturbed point
  nn::tensor dx;
  layer.backward(x, r, check_input ? &dx : nullptr);
  std::vector<std::vector<float>> grads;
  for (const nn::parameter& p : layer.parameters()) grads.emplace_back(p.grad.begin(), p.grad.end());
  if (check_input) {
    REQUIRE(dx.shape == x.shape);
    require_match(name + " dx", dx.span(), x.span(), loss, h, limit, rng);
  }
  auto params = layer.parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    require_match(name + " d" + params[i].name, grads[i], params[i].used, loss, h, limit, rng);
}

}  // namespace

TEST_CASE("linear: dx, dW, db against finite differences, 4-D input read as rows", "[nn][gradient]") {
  std::mt19937_64 rng(11);
  for (bool bias : {true, false}) {
    nn::linear layer(12, 7, bias, rng);
    use_values(layer);
    nn::tensor x({5, 3, 2, 2});
    grad_check::fill_normal(x.span(), rng);
    check_layer(bias ? "linear+bias" : "linear", layer, x, 1e-2f, rng);
  }
}

TEST_CASE("conv2d: dx, dW, db against finite differences for padding, stride and bias", "[nn][gradient]") {
  std::mt19937_64 rng(12);
  const nn::conv2d_config configs[] = {
      {.in_channels = 3, .out_channels = 4, .kernel = 3, .stride = 1, .padding = 1, .bias = true},
      {.in_channels = 2, .out_channels = 3, .kernel = 3, .stride = 2, .padding = 0, .bias = false},
      {.in_channels = 2, .out_channels = 2, .kernel = 2, .stride = 2, .padding = 1, .bias = true},
      {.in_channels = 1, .out_channels = 5, .kernel = 1, .stride = 1, .padding = 0, .bias = true},
  };
  for (const auto& cfg : configs) {
    nn::conv2d layer(cfg, rng);
    use_values(layer);
    nn::tensor x({2, cfg.in_channels, 7, 6});
    grad_check::fill_normal(x.span(), rng);
    check_layer("conv k" + std::to_string(cfg.kernel) + " s" + std::to_string(cfg.stride) + " p" +
                    std::to_string(cfg.padding),
                layer, x, 1e-2f, rng);
  }
}

TEST_CASE("batch_norm: dx, dgamma, dbeta against finite differences (train mode, 4-D and 2-D)", "[nn][gradient]") {
  std::mt19937_64 rng(13);
  for (const nn::shape4 shape : {nn::shape4{4, 3, 3, 3}, nn::shape4{8, 5, 1, 1}}) {
    nn::batch_norm layer({.channels = shape.c});
    // γ and β away from their 1 / 0 start, so that a gradient formula missing γ shows.
    for (nn::parameter& p : layer.parameters()) grad_check::fill_normal(p.used, rng);
    nn::tensor x(shape);
    grad_check::fill_normal(x.span(), rng, 2.0f);
    for (float& v : x.values) v += 3.0f;  // a mean far from zero
    check_layer("batch_norm " + std::to_string(shape.h) + "x" + std::to_string(shape.w), layer, x, 1e-2f, rng);
  }
}

TEST_CASE("relu and pooling: dx against finite differences away from kinks and ties", "[nn][gradient]") {
  std::mt19937_64 rng(14);
  nn::tensor x({2, 3, 6, 5});
  grad_check::fill_away_from_zero(x.span(), rng, 0.05f);
  nn::relu r;
  check_layer("relu", r, x, 1e-2f, rng);

  grad_check::fill_distinct(x.span(), rng, 0.05f);
  nn::max_pool mp({.kernel = 2, .stride = 2});
  check_layer("max_pool 2/2", mp, x, 1e-2f, rng);
  nn::max_pool overlapping({.kernel = 3, .stride = 1});
  check_layer("max_pool 3/1", overlapping, x, 1e-2f, rng);
  nn::avg_pool ap({.kernel = 2, .stride = 2});
  check_layer("avg_pool 2/2", ap, x, 1e-2f, rng);
  nn::avg_pool ap3({.kernel = 3, .stride = 2});
  check_layer("avg_pool 3/2", ap3, x, 1e-2f, rng);
}

TEST_CASE("softmax cross-entropy: value and gradient, loss scale", "[nn][gradient]") {
  std::mt19937_64 rng(15);
  nn::tensor z({6, 10, 1, 1});
  grad_check::fill_normal(z.span(), rng, 3.0f);
  const std::vector<std::int32_t> labels = {0, 3, 9, 3, 5, 7};
  nn::softmax_cross_entropy ce;

  // The value, recomputed independently in long double.
  long double expected = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    long double sum = 0;
    for (std::size_t j = 0; j < 10; ++j) sum += std::exp(static_cast<long double>(z.values[i * 10 + j]));
    expected += std::log(sum) - z.values[i * 10 + static_cast<std::size_t>(labels[i])];
  }
  CHECK(ce.forward(z, labels) == Approx(static_cast<double>(expected / 6)).epsilon(1e-12));

  const auto loss = [&] { return ce.forward(z, labels); };
  (void)loss();
  const nn::float_buffer& dz = ce.backward().values;
  const std::vector<float> g(dz.begin(), dz.end());
  require_match("d loss / d logits", g, z.span(), loss, 1e-2f, limit, rng);
  (void)loss();
  const nn::tensor& scaled = ce.backward(1024.0f);
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(scaled.values[i] == g[i] * 1024.0f);  // a power of two: exact

  // Huge logits must not overflow the exponential.
  nn::tensor big({1, 3, 1, 1});
  big.values = {1000.0f, 0.0f, -1000.0f};
  const std::vector<std::int32_t> first = {0};
  CHECK(ce.forward(big, first) == Approx(0.0).margin(1e-12));
  CHECK(ce.correct() == 1);
}

namespace {

// Which side of every ReLU kink each input lies on, and which element wins every 2x2 max-pool
// window: a finite difference is only valid when this does not change between x − h and x + h.
std::vector<std::uint32_t> kink_pattern(const nn::sequential& net) {
  std::vector<std::uint32_t> out;
  for (std::size_t k = 1; k < net.size(); ++k) {
    const nn::tensor& in = net.activation(k - 1);
    if (net.layer(k).kind() == nn::module_kind::relu) {
      for (float v : in.values) out.push_back(v > 0.0f);
    } else if (net.layer(k).kind() == nn::module_kind::max_pool) {
      const nn::tensor& y = net.activation(k);
      for (std::size_t i = 0; i < y.numel(); ++i) {
        const std::size_t plane = i / y.shape.plane(), oy = i % y.shape.plane() / y.shape.w, ox = i % y.shape.w;
        const float* base = in.data() + plane * in.shape.plane() + 2 * oy * in.shape.w + 2 * ox;
        const float cand[4] = {base[0], base[1], base[in.shape.w], base[in.shape.w + 1]};
        out.push_back(static_cast<std::uint32_t>(std::find(cand, cand + 4, y.values[i]) - cand));
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("whole models: parameter gradients through the sequential backward", "[nn][gradient]") {
  std::mt19937_64 rng(16);
  nn::no_rounding fp32;
  const float h = 1e-3f;
  const auto check_model = [&](const std::string& name, nn::sequential net, nn::shape4 batch_shape) {
    nn::tensor x(batch_shape);
    grad_check::fill_normal(x.span(), rng);
    std::vector<std::int32_t> labels(batch_shape.n);
    for (auto& l : labels) l = static_cast<std::int32_t>(rng() % 10);
    nn::softmax_cross_entropy ce;
    const auto loss = [&] { return ce.forward(net.forward(x, fp32, nn::mode::train), labels); };
    (void)loss();
    const auto pattern = kink_pattern(net);
    net.backward(ce.backward(), fp32);
    std::vector<std::vector<float>> grads;
    for (nn::parameter* p : net.parameters()) grads.emplace_back(p->grad.begin(), p->grad.end());
    std::size_t i = 0;
    for (std::size_t k = 1; k < net.size(); ++k)
      for (nn::parameter& p : net.layer(k).parameters()) {
        // Keep the elements whose ±h steps cross no kink (through batch norm, a first-layer
        // weight moves every activation, so few survive there).
        const auto candidates = grad_check::pick(p.numel(), 40, rng);
        std::vector<std::size_t> smooth;
        for (std::size_t j : candidates) {
          const float saved = p.value[j];
          bool same = true;
          for (float step : {h, -h}) {
            p.value[j] = saved + step;
            (void)loss();
            same = same && kink_pattern(net) == pattern;
          }
          p.value[j] = saved;
          if (same) smooth.push_back(j);
        }
        INFO(name << " " << net.module_name(k) << "." << p.name << ": " << smooth.size() << " of "
                  << candidates.size() << " elements cross no kink");
        CHECK(smooth.size() >= std::min<std::size_t>(candidates.size(), 2));
        require_match(name + " " + std::string(net.module_name(k)) + "." + p.name, grads[i++], p.value, loss, h,
                      smooth);
      }
  };
  check_model("mlp", nn::make_mlp({.sample = {1, 1, 4, 4}, .hidden = 12, .seed = 3}), {6, 1, 4, 4});
  check_model("cnn", nn::make_cnn({.sample = {1, 1, 8, 8}, .channels = 3, .seed = 4}), {4, 1, 8, 8});
}

// Finite differences only show that backward matches forward; these pin forward itself to the
// textbook definitions (PyTorch's cross-correlation, window maxima and means).
TEST_CASE("forward passes equal direct loops: conv2d, linear, pooling", "[nn][forward]") {
  std::mt19937_64 rng(17);
  const nn::conv2d_config configs[] = {
      {.in_channels = 3, .out_channels = 4, .kernel = 3, .stride = 1, .padding = 1, .bias = true},
      {.in_channels = 2, .out_channels = 3, .kernel = 3, .stride = 2, .padding = 0, .bias = false},
      {.in_channels = 2, .out_channels = 2, .kernel = 2, .stride = 3, .padding = 2, .bias = true},
  };
  for (const auto& cfg : configs) {
    nn::conv2d layer(cfg, rng);
    use_values(layer);
    nn::tensor x({2, cfg.in_channels, 7, 6}), y;
    grad_check::fill_normal(x.span(), rng);
    layer.forward(x, y, nn::mode::train);
    const auto& w = layer.parameters()[0].used;
    const std::size_t k = cfg.kernel;
    REQUIRE(y.shape == nn::shape4{2, cfg.out_channels, (7 + 2 * cfg.padding - k) / cfg.stride + 1,
                                  (6 + 2 * cfg.padding - k) / cfg.stride + 1});
    for (std::size_t n = 0; n < 2; ++n)
      for (std::size_t o = 0; o < cfg.out_channels; ++o)
        for (std::size_t oy = 0; oy < y.shape.h; ++oy)
          for (std::size_t ox = 0; ox < y.shape.w; ++ox) {
            double ref = cfg.bias ? layer.parameters()[1].used[o] : 0.0;
            for (std::size_t c = 0; c < cfg.in_channels; ++c)
              for (std::size_t ky = 0; ky < k; ++ky)
                for (std::size_t kx = 0; kx < k; ++kx) {
                  const auto iy = static_cast<long>(oy * cfg.stride + ky) - static_cast<long>(cfg.padding);
                  const auto ix = static_cast<long>(ox * cfg.stride + kx) - static_cast<long>(cfg.padding);
                  if (iy < 0 || iy >= 7 || ix < 0 || ix >= 6) continue;
                  ref += static_cast<double>(w[((o * cfg.in_channels + c) * k + ky) * k + kx]) *
                         x.values[((n * cfg.in_channels + c) * 7 + static_cast<std::size_t>(iy)) * 6 +
                                  static_cast<std::size_t>(ix)];
                }
            CHECK(y.values[((n * cfg.out_channels + o) * y.shape.h + oy) * y.shape.w + ox] ==
                  Approx(ref).margin(1e-5));
          }
  }

  nn::linear fc(6, 4, true, rng);
  use_values(fc);
  nn::tensor x({3, 1, 2, 3}), y;
  grad_check::fill_normal(x.span(), rng);
  fc.forward(x, y, nn::mode::train);
  REQUIRE(y.shape == nn::shape4{3, 4, 1, 1});
  for (std::size_t n = 0; n < 3; ++n)
    for (std::size_t o = 0; o < 4; ++o) {
      double ref = fc.parameters()[1].used[o];
      for (std::size_t i = 0; i < 6; ++i) ref += static_cast<double>(fc.parameters()[0].used[o * 6 + i]) * x.values[n * 6 + i];
      CHECK(y.values[n * 4 + o] == Approx(ref).margin(1e-5));
    }

  nn::tensor img({1, 2, 5, 5});
  grad_check::fill_normal(img.span(), rng);
  nn::max_pool mp({.kernel = 2, .stride = 2});
  nn::avg_pool ap({.kernel = 3, .stride = 2});
  nn::tensor m, a;
  mp.forward(img, m, nn::mode::train);
  ap.forward(img, a, nn::mode::train);
  REQUIRE(m.shape == nn::shape4{1, 2, 2, 2});
  REQUIRE(a.shape == nn::shape4{1, 2, 2, 2});
  for (std::size_t c = 0; c < 2; ++c)
    for (std::size_t oy = 0; oy < 2; ++oy)
      for (std::size_t ox = 0; ox < 2; ++ox) {
        float mx = -1e30f;
        double sum = 0;
        for (std::size_t ky = 0; ky < 3; ++ky)
          for (std::size_t kx = 0; kx < 3; ++kx) {
            const float v = img.values[(c * 5 + oy * 2 + ky) * 5 + ox * 2 + kx];
            if (ky < 2 && kx < 2) mx = std::max(mx, v);
            sum += v;
          }
        CHECK(m.values[(c * 2 + oy) * 2 + ox] == mx);
        CHECK(a.values[(c * 2 + oy) * 2 + ox] == Approx(sum / 9).margin(1e-6));
      }
}
