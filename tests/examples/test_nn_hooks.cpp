// The rounding hooks of the example trainer's models: every tensor of eq. (1) (Y, GY, P, GP)
// passes through the hook exactly once per training step, in place, with the element count the
// model description promises; the no-op hook is plain fp32 training.
#include <catch2/catch.hpp>

#include <minifloat/minifloat.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "nn/loss.hpp"
#include "nn/models.hpp"
#include "nn/sgd.hpp"

namespace {

struct call {
  nn::tensor_site site;
  std::size_t size;
  const float* data;
};

class recorder final : public nn::rounding_hooks {
 public:
  void round(const nn::tensor_site& site, std::span<float> values) override {
    calls.push_back({site, values.size(), values.data()});
  }
  std::vector<call> calls;
};

nn::tensor random_batch(nn::shape4 shape, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  nn::tensor x(shape);
  for (float& v : x.values) v = d(rng);
  return x;
}

std::vector<std::int32_t> random_labels(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> y(n);
  for (auto& l : y) l = static_cast<std::int32_t>(rng() % 10);
  return y;
}

void train_step(nn::sequential& net, nn::rounding_hooks& hooks, const nn::tensor& x,
                const std::vector<std::int32_t>& y) {
  nn::softmax_cross_entropy ce;
  (void)ce.forward(net.forward(x, hooks, nn::mode::train), y);
  net.backward(ce.backward(), hooks);
}

std::vector<nn::sequential> small_models() {
  std::vector<nn::sequential> models;
  models.push_back(nn::make_mlp({.width = 0.0625}));   // 32 hidden units
  models.push_back(nn::make_cnn({.width = 0.125}));    // 4 and 8 channels
  return models;
}

}  // namespace

TEST_CASE("one training step rounds every site exactly once, in place, with the described counts", "[nn][hooks]") {
  for (nn::sequential& net : small_models()) {
    for (const std::size_t batch : {8, 5}) {  // 5: a short last batch; its counts are describe(5)'s
      INFO("model with " << net.size() << " modules, batch " << batch);
      const nn::model_description d = net.describe(batch);
      recorder rec;
      train_step(net, rec, random_batch({batch, 1, 28, 28}, batch), random_labels(batch, batch));

      REQUIRE(rec.calls.size() == net.site_count());
      REQUIRE(d.sites.size() == net.site_count());
      std::vector<int> seen(net.site_count(), 0);
      for (const call& c : rec.calls) {
        REQUIRE(c.site.id < seen.size());
        ++seen[c.site.id];
        CHECK(d.sites[c.site.id].site == c.site);
        CHECK(c.size == d.sites[c.site.id].numel);
        // In place: the hook sees the storage the next computation reads.
        const std::size_t k = c.site.module;
        switch (c.site.kind) {
          case nn::tensor_kind::activation: CHECK(c.data == net.activation(k).data()); break;
          case nn::tensor_kind::activation_gradient: CHECK(c.data == net.activation_gradient(k).data()); break;
          case nn::tensor_kind::parameter:
            CHECK(c.data == net.layer(k).parameters()[c.site.parameter].used.data());
            break;
          case nn::tensor_kind::parameter_gradient:
            CHECK(c.data == net.layer(k).parameters()[c.site.parameter].grad.data());
            break;
        }
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));

      // Order: every forward tensor before every backward one; Y(k-1) and P(k) before Y(k);
      // GY(k) before GP(k) and GY(k-1).
      std::map<std::size_t, std::size_t> at;  // site id -> position
      for (std::size_t i = 0; i < rec.calls.size(); ++i) at[rec.calls[i].site.id] = i;
      std::size_t last_forward = 0, first_backward = rec.calls.size();
      for (std::size_t i = 0; i < rec.calls.size(); ++i) {
        if (nn::is_forward(rec.calls[i].site.kind)) last_forward = std::max(last_forward, i);
        else first_backward = std::min(first_backward, i);
      }
      CHECK(last_forward < first_backward);
      CHECK(rec.calls.front().site.id == net.site(0, nn::tensor_kind::activation).id);
      for (std::size_t k = 1; k < net.size(); ++k) {
        const auto y = at[net.site(k, nn::tensor_kind::activation).id];
        const auto gy = at[net.site(k, nn::tensor_kind::activation_gradient).id];
        CHECK(at[net.site(k - 1, nn::tensor_kind::activation).id] < y);
        if (k > 1) CHECK(gy < at[net.site(k - 1, nn::tensor_kind::activation_gradient).id]);
        for (std::size_t p = 0; p < net.layer(k).parameters().size(); ++p) {
          CHECK(at[net.site(k, nn::tensor_kind::parameter, p).id] < y);
          CHECK(gy < at[net.site(k, nn::tensor_kind::parameter_gradient, p).id]);
        }
      }
    }
  }
}

TEST_CASE("an eval-mode forward rounds Y and P once each and allows no backward", "[nn][hooks]") {
  for (nn::sequential& net : small_models()) {
    recorder rec;
    (void)net.forward(random_batch({3, 1, 28, 28}, 1), rec, nn::mode::eval);
    std::multiset<std::size_t> ids;
    for (const call& c : rec.calls) {
      CHECK(nn::is_forward(c.site.kind));
      ids.insert(c.site.id);
    }
    std::size_t forward_sites = 0;
    for (const auto& s : net.describe(3).sites) forward_sites += nn::is_forward(s.site.kind) ? 1 : 0;
    CHECK(ids.size() == forward_sites);
    for (std::size_t id : ids) CHECK(ids.count(id) == 1);
    nn::tensor g(net.activation(net.size() - 1).shape);
    CHECK_THROWS_AS(net.backward(g, rec), std::logic_error);
  }
}

TEST_CASE("the model description: modules in order, who feeds whom, GEMMs, sites", "[nn][hooks]") {
  nn::sequential cnn = nn::make_cnn({.width = 0.5});
  const nn::model_description d = cnn.describe(128);
  const std::vector<std::string> names = {"input", "conv1", "bn1", "relu1", "pool1", "conv2",
                                          "bn2",   "relu2", "pool2", "fc"};
  REQUIRE(d.modules.size() == names.size());
  std::size_t sum = 0;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const nn::module_info& m = d.modules[k];
    CHECK(m.name == names[k]);
    CHECK(m.gemm == (names[k].starts_with("conv") || names[k] == "fc"));
    CHECK(m.input == (k == 0 ? std::nullopt : std::optional<std::size_t>(k - 1)));
    CHECK(m.y_numel == m.y_shape.numel());
    CHECK(m.gy_numel == (k == 0 ? 0 : m.y_numel));
    CHECK(d.sites[m.y_site].name == names[k] + ".Y");
    sum += m.y_numel + m.gy_numel;
    for (const nn::parameter_info& p : m.parameters) {
      CHECK(d.sites[p.p_site].name == names[k] + "." + p.name + ".P");
      CHECK(d.sites[p.gp_site].site.kind == nn::tensor_kind::parameter_gradient);
      sum += 2 * p.numel;
    }
  }
  CHECK(d.modules[1].y_shape == nn::shape4{128, 16, 28, 28});
  CHECK(d.modules[4].y_shape == nn::shape4{128, 16, 14, 14});
  CHECK(d.modules[8].y_shape == nn::shape4{128, 32, 7, 7});
  CHECK(d.modules[9].parameters[0].numel == 10 * 32 * 7 * 7);
  CHECK(d.modules[2].parameters.size() == 2);  // batch norm: weight, bias (running stats are buffers)
  CHECK(d.total_numel() == sum);
  for (std::size_t i = 0; i < d.sites.size(); ++i) CHECK(d.sites[i].site.id == i);
  CHECK_THROWS_AS(cnn.site(0, nn::tensor_kind::activation_gradient), std::out_of_range);
  CHECK_THROWS_AS(cnn.site(3, nn::tensor_kind::parameter), std::out_of_range);  // relu has none
  CHECK(!d.table().empty());
}

TEST_CASE("rounding happens in place and downstream layers see the rounded tensors", "[nn][hooks]") {
  nn::sequential net = nn::make_mlp({.width = 0.0625});
  const nn::tensor x = random_batch({4, 1, 28, 28}, 9);
  const auto y = random_labels(4, 9);

  // Zeroing relu2's output leaves the logits equal to fc3's bias.
  auto zero_relu2 = nn::function_hooks([&](const nn::tensor_site& s, std::span<float> v) {
    if (s.kind == nn::tensor_kind::activation && s.module == 4) std::fill(v.begin(), v.end(), 0.0f);
  });
  const nn::tensor& logits = net.forward(x, zero_relu2, nn::mode::eval);
  const auto& bias = net.layer(5).parameters()[1].used;
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 10; ++j) CHECK(logits.values[i * 10 + j] == bias[j]);

  // Rounding everything to bfloat16: every tensor the step leaves behind is a bfloat16 value,
  // while the fp32 master copies are not.
  auto to_bf16 = nn::function_hooks([](const nn::tensor_site&, std::span<float> v) {
    minifloat::quantize(v, minifloat::bfloat16);
  });
  train_step(net, to_bf16, x, y);
  const auto is_bf16 = [](std::span<const float> v) {
    return std::all_of(v.begin(), v.end(), [](float f) { return minifloat::round(f, minifloat::bfloat16) == f; });
  };
  for (std::size_t k = 0; k < net.size(); ++k) {
    CHECK(is_bf16(net.activation(k).span()));
    if (k > 0) CHECK(is_bf16(net.activation_gradient(k).span()));
  }
  bool master_is_wider = false;
  for (nn::parameter* p : net.parameters()) {
    CHECK(is_bf16(p->used));
    CHECK(is_bf16(p->grad));
    master_is_wider = master_is_wider || !is_bf16(p->value);
  }
  CHECK(master_is_wider);
}

TEST_CASE("the no-op hook is plain fp32 training, bit for bit", "[nn][hooks]") {
  const nn::tensor x = random_batch({6, 1, 28, 28}, 3);
  const auto y = random_labels(6, 3);
  const auto train = [&](nn::rounding_hooks& hooks) {
    nn::sequential net = nn::make_cnn({.width = 0.125, .seed = 5});
    nn::sgd opt({.momentum = 0.9f, .weight_decay = 1e-4f});
    for (int step = 0; step < 3; ++step) {
      train_step(net, hooks, x, y);
      opt.step(net.parameters(), 0.05f);
    }
    std::vector<float> all;
    for (nn::parameter* p : net.parameters()) all.insert(all.end(), p->value.begin(), p->value.end());
    return all;
  };
  nn::no_rounding none;
  auto identity = nn::function_hooks([](const nn::tensor_site&, std::span<float> v) {
    minifloat::quantize(v, minifloat::binary32);  // rounding float to float changes nothing
  });
  auto bf16 = nn::function_hooks([](const nn::tensor_site&, std::span<float> v) {
    minifloat::quantize(v, minifloat::bfloat16);
  });
  const auto reference = train(none);
  CHECK(train(identity) == reference);
  CHECK(train(bf16) != reference);
}
