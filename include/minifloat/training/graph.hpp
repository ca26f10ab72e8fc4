// minifloat/training/graph.hpp — a network described as modules in execution order, each with
// the rounding sites of its tensors: the model and loss network (f_1, ..., f_m) of the
// precision-assignment paper §3.1, with TS = {v_i, dv_i, θ_j, dθ_j} as sites.
//
// This is a description only (names, which modules are GEMMs, element counts at the training
// batch size, who feeds whom); it computes nothing. Grouping (grouping.hpp) and the precision
// assignments (assignment.hpp) read it; a trainer calls the sites from its own layers.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "candidates.hpp"
#include "site.hpp"

namespace minifloat::training {

/// Index of a site in graph::sites(); `no_site` where a module has no such tensor.
using site_id = std::size_t;
inline constexpr site_id no_site = std::numeric_limits<site_id>::max();

/// One module f_i: its output activation Y (v_{i+1}), the output's gradient GY (dv_{i+1}), its
/// parameters P (θ_i) with their gradients GP (dθ_i), and the module its input comes from.
struct module {
  std::string name;
  bool is_gemm = false;                ///< convolution or linear layer: a GEMM operator (§4.1)
  std::optional<std::size_t> input;    ///< feeding module; empty for the first module (the network input)
  site_id y = no_site;
  site_id gy = no_site;
  std::vector<site_id> params;         ///< P, one site per parameter tensor
  std::vector<site_id> param_grads;    ///< GP, parallel to params
};

enum class module_kind : bool { other = false, gemm = true };

class graph {
 public:
  /// Every site starts in high precision with its role's candidates from `candidates`.
  explicit graph(const precision_candidates& candidates = {}) : candidates_(candidates) {}

  const precision_candidates& candidates() const { return candidates_; }

  /// Appends a module whose output has `output_numel` elements at the training batch size.
  /// Its input is the previously added module unless `input` names another (a branch); the
  /// first module has none. `output_gradient = false` omits GY (e.g. the network input, whose
  /// gradient no trainer computes). Returns the module's index.
  std::size_t add_module(std::string name, module_kind kind, std::size_t output_numel,
                         bool output_gradient = true, std::optional<std::size_t> input = std::nullopt) {
    auto m = module{};  // not "module m;": a line opening with `module` is a C++20 module declaration to nvcc
    m.name = std::move(name);
    m.is_gemm = kind == module_kind::gemm;
    if (input) {
      if (*input >= modules_.size())
        throw std::invalid_argument("minifloat::training::graph: module '" + m.name + "' takes its input from module " +
                                    std::to_string(*input) + ", which does not exist yet");
      m.input = input;
    } else if (!modules_.empty()) {
      m.input = modules_.size() - 1;
    }
    m.y = add_site(m.name + ".Y", role::activation, output_numel);
    if (output_gradient) m.gy = add_site(m.name + ".GY", role::activation_gradient, output_numel);
    modules_.push_back(std::move(m));
    return modules_.size() - 1;
  }

  /// The network input x = v_1 as a (non-GEMM) module of its own: grouping starts its first
  /// group here. Its gradient is omitted unless asked for.
  std::size_t add_input(std::string name, std::size_t numel, bool with_gradient = false) {
    return add_module(std::move(name), module_kind::other, numel, with_gradient);
  }

  /// Adds a parameter tensor θ (role weight) and its gradient dθ (role weight_gradient) to
  /// module `m`; returns the parameter's site (the gradient's is params.size()-parallel in
  /// param_grads).
  site_id add_parameter(std::size_t m, const std::string& name, std::size_t numel) {
    auto& mod = modules_.at(m);
    const site_id p = add_site(mod.name + "." + name, role::weight, numel);
    const site_id g = add_site(mod.name + "." + name + ".grad", role::weight_gradient, numel);
    mod.params.push_back(p);
    mod.param_grads.push_back(g);
    return p;
  }

  std::span<const module> modules() const { return modules_; }
  const module& module_at(std::size_t i) const { return modules_.at(i); }
  std::span<site> sites() { return sites_; }
  std::span<const site> sites() const { return sites_; }
  site& at(site_id s) { return sites_.at(s); }
  const site& at(site_id s) const { return sites_.at(s); }

  /// The site named `name`, or no_site.
  site_id find(std::string_view name) const {
    for (std::size_t i = 0; i < sites_.size(); ++i)
      if (sites_[i].name() == name) return i;
    return no_site;
  }

  /// Gives site i the stochastic-rounding seed counter_rng{run_seed}.bits64(i): one run seed
  /// picks independent streams for all tensors.
  void seed_sites(std::uint64_t run_seed) {
    const counter_rng rng{run_seed};
    for (std::size_t i = 0; i < sites_.size(); ++i) sites_[i].set_seed(rng.bits64(i));
  }

  /// Every site's begin_step(step): call once at the start of each training step.
  void begin_step(std::uint64_t step) {
    for (site& s : sites_) s.begin_step(step);
  }

 private:
  site_id add_site(std::string name, role kind, std::size_t numel) {
    // Distinct seeds per site keep stochastic rounding streams independent across tensors.
    sites_.emplace_back(std::move(name), kind, numel, candidates_[kind], static_cast<std::uint64_t>(sites_.size()));
    return sites_.size() - 1;
  }

  precision_candidates candidates_;
  std::vector<module> modules_;
  std::vector<site> sites_;
};

}  // namespace minifloat::training
