// site_wiring.hpp — connects the example layers (examples/nn/, which know nothing of the
// training layer) to minifloat::training: the model description becomes a training graph, and a
// rounding hook sends every tensor through its site. Shared by the trainer (examples/train.cpp)
// and the training-step benchmark (bench/bench_training_step.cpp), so that the benchmark measures
// exactly the trainer's rounding path.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include <minifloat/training/training.hpp>

#include "nn/hooks.hpp"
#include "nn/sequential.hpp"

namespace examples {

namespace mt = minifloat::training;

/// The training layer's graph of the example model, and for each of the model's dense site ids
/// the graph's site.
struct wired_graph {
  mt::graph graph;
  std::vector<mt::site_id> site_of;
};

inline wired_graph describe(const nn::model_description& d) {
  wired_graph w;
  w.site_of.assign(d.sites.size(), mt::no_site);
  for (std::size_t k = 0; k < d.modules.size(); ++k) {
    const nn::module_info& m = d.modules[k];
    const std::size_t idx =
        k == 0 ? w.graph.add_input(m.name, m.y_numel)
               : w.graph.add_module(m.name, m.gemm ? mt::module_kind::gemm : mt::module_kind::other, m.y_numel,
                                    m.gy_site.has_value(), m.input);
    const mt::module& gm = w.graph.module_at(idx);
    w.site_of.at(m.y_site) = gm.y;
    if (m.gy_site) w.site_of.at(*m.gy_site) = gm.gy;
    for (const nn::parameter_info& p : m.parameters) {
      w.site_of.at(p.p_site) = w.graph.add_parameter(idx, p.name, p.numel);
      w.site_of.at(p.gp_site) = w.graph.module_at(idx).param_grads.back();
    }
  }
  if (std::find(w.site_of.begin(), w.site_of.end(), mt::no_site) != w.site_of.end())
    throw std::logic_error("site_wiring: a site of the model has no counterpart in the training graph");
  return w;
}

/// The model's rounding hook: every tensor goes through its site. Training passes count (the
/// overflow ratios promotion reads); evaluation passes do not. Large tensors are cut into one
/// chunk per thread; the site's offsets keep stochastic rounding identical to one call.
class site_hooks final : public nn::rounding_hooks {
 public:
  site_hooks(mt::graph& g, const std::vector<mt::site_id>& site_of, std::size_t threads)
      : g_(g), site_of_(site_of), threads_(threads) {}

  void set_counting(bool on) { counting_ = on; }

  void round(const nn::tensor_site& s, std::span<float> values) override {
    mt::site& t = g_.at(site_of_.at(s.id));
    if (!t.enabled()) return;
    const std::size_t unit = t.split_unit();  // block formats are cut only between whole blocks
    if (threads_ < 2 || values.size() < parallel_threshold || unit == 0) {
      if (counting_) t.apply(values);
      else t.apply_uncounted(values);
      return;
    }
    const std::size_t chunk = ((values.size() + threads_ - 1) / threads_ + unit - 1) / unit * unit;
    std::vector<minifloat::rounding_stats> local(threads_);
    auto work = [&](std::size_t c) {
      const std::size_t begin = c * chunk;
      if (begin >= values.size()) return;
      const auto part = values.subspan(begin, std::min(chunk, values.size() - begin));
      if (counting_) t.apply(part, begin, local[c]);
      else t.apply_uncounted(part, begin);
    };
    {
      std::vector<std::jthread> helpers;
      for (std::size_t c = 1; c < threads_; ++c) helpers.emplace_back(work, c);
      work(0);
    }  // joined here
    if (counting_)
      for (const auto& st : local) t.add_stats(st);
  }

 private:
  // Below this a thread costs more than the rounding it would share.
  static constexpr std::size_t parallel_threshold = std::size_t{1} << 16;
  mt::graph& g_;
  const std::vector<mt::site_id>& site_of_;
  std::size_t threads_;
  bool counting_ = true;
};

}  // namespace examples
