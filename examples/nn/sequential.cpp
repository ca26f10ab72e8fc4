#include "nn/sequential.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace nn {

namespace {
// Module k >= 1 owns sites first, first+1 (Y, GY), then (P, GP) per parameter.
constexpr std::size_t sites_of_layer(std::size_t params) { return 2 + 2 * params; }
}  // namespace

std::size_t model_description::total_numel() const {
  std::size_t total = 0;
  for (const site_info& s : sites) total += s.numel;
  return total;
}

std::string model_description::table() const {
  std::string out = "batch " + std::to_string(batch) + ", " + std::to_string(sites.size()) + " rounding sites, " +
                    std::to_string(total_numel()) + " elements\n";
  char line[256];
  for (std::size_t k = 0; k < modules.size(); ++k) {
    const module_info& m = modules[k];
    std::snprintf(line, sizeof line, "%3zu %-8s %-10s %-4s in=%-3s Y=%-9zu GY=%-9zu", k, m.name.c_str(),
                  std::string(name(m.kind)).c_str(), m.gemm ? "GEMM" : "", m.input ? std::to_string(*m.input).c_str() : "-",
                  m.y_numel, m.gy_numel);
    out += line;
    for (const parameter_info& p : m.parameters) out += " " + p.name + "=" + std::to_string(p.numel);
    out += '\n';
  }
  return out;
}

sequential::sequential(shape4 sample) : sample_{1, sample.c, sample.h, sample.w} {
  if (sample_.sample_numel() == 0) throw std::invalid_argument("nn::sequential: empty sample shape");
  names_.emplace_back("input");
  first_site_.push_back(0);
  first_param_.push_back(0);
  activations_.resize(1);
  gradients_.resize(1);
}

shape4 sequential::output_shape(shape4 in) const {
  for (const auto& l : layers_) in = l->output_shape(in);
  return in;
}

module& sequential::add(std::string name, std::unique_ptr<module> layer) {
  if (!layer) throw std::invalid_argument("nn::sequential: null layer");
  if (name.empty() || std::find(names_.begin(), names_.end(), name) != names_.end())
    throw std::invalid_argument("nn::sequential: module name '" + name + "' is empty or taken");
  (void)layer->output_shape(output_shape(sample_));  // throws if the shapes do not chain
  first_site_.push_back(site_count_);
  first_param_.push_back(first_param_.back() + (layers_.empty() ? 0 : layers_.back()->parameters().size()));
  site_count_ += sites_of_layer(layer->parameters().size());
  names_.push_back(std::move(name));
  layers_.push_back(std::move(layer));
  activations_.emplace_back();
  gradients_.emplace_back();
  return *layers_.back();
}

std::vector<parameter*> sequential::parameters() {
  std::vector<parameter*> out;
  for (auto& l : layers_)
    for (parameter& p : l->parameters()) out.push_back(&p);
  return out;
}

std::size_t sequential::parameter_count() const {
  std::size_t total = 0;
  for (const auto& l : layers_)
    for (const parameter& p : std::as_const(*l).parameters()) total += p.numel();
  return total;
}

tensor_site sequential::site(std::size_t module, tensor_kind kind, std::size_t param) const {
  if (module >= size()) throw std::out_of_range("nn::sequential::site: no module " + std::to_string(module));
  const std::size_t base = first_site_[module];
  if (module == 0) {
    if (kind != tensor_kind::activation || param != 0)
      throw std::out_of_range("nn::sequential::site: the input has only a Y site");
    return {base, 0, kind, 0};
  }
  const std::size_t params = layer(module).parameters().size();
  switch (kind) {
    case tensor_kind::activation: return {base, module, kind, 0};
    case tensor_kind::activation_gradient: return {base + 1, module, kind, 0};
    case tensor_kind::parameter:
    case tensor_kind::parameter_gradient:
      if (param >= params)
        throw std::out_of_range("nn::sequential::site: module " + names_[module] + " has no parameter " +
                                std::to_string(param));
      return {base + 2 + 2 * param + (kind == tensor_kind::parameter_gradient ? 1 : 0), module, kind, param};
  }
  throw std::out_of_range("nn::sequential::site: bad kind");
}

model_description sequential::describe(std::size_t batch) const {
  model_description d;
  d.batch = batch;
  d.sites.resize(site_count_);
  shape4 shape = sample_;
  shape.n = batch;
  auto record = [&](tensor_site s, std::string name, std::size_t numel) {
    d.sites.at(s.id) = {s, std::move(name), numel};
    return s.id;
  };
  for (std::size_t k = 0; k < size(); ++k) {
    module_info m;
    m.name = names_[k];
    if (k > 0) {
      const module& l = layer(k);
      shape = l.output_shape(shape);
      m.kind = l.kind();
      m.gemm = is_gemm(m.kind);
      m.input = k - 1;
    }
    m.y_shape = shape;
    m.y_numel = shape.numel();
    m.y_site = record(site(k, tensor_kind::activation), m.name + ".Y", m.y_numel);
    if (k > 0) {
      m.gy_numel = m.y_numel;
      m.gy_site = record(site(k, tensor_kind::activation_gradient), m.name + ".GY", m.gy_numel);
      const auto params = layer(k).parameters();
      for (std::size_t p = 0; p < params.size(); ++p) {
        parameter_info info{params[p].name, params[p].shape, params[p].numel(), 0, 0};
        const std::string stem = m.name + "." + params[p].name;
        info.p_site = record(site(k, tensor_kind::parameter, p), stem + ".P", info.numel);
        info.gp_site = record(site(k, tensor_kind::parameter_gradient, p), stem + ".GP", info.numel);
        m.parameters.push_back(std::move(info));
      }
    }
    d.modules.push_back(std::move(m));
  }
  return d;
}

void sequential::track_memory(minifloat::storage::memory_ledger& ledger) {
  for (auto& l : layers_) l->track_memory(ledger);
  for (tensor& t : activations_) t.track_memory(ledger, minifloat::storage::memory_category::activations);
  for (tensor& t : gradients_) t.track_memory(ledger, minifloat::storage::memory_category::activation_gradients);
}

const tensor& sequential::forward(const tensor& x, rounding_hooks& hooks, mode m, parameter_source* source) {
  if (x.shape.n == 0 || x.shape.c != sample_.c || x.shape.h != sample_.h || x.shape.w != sample_.w ||
      x.values.size() != x.shape.numel())
    throw std::invalid_argument("nn::sequential::forward: input is not a batch of " + std::to_string(sample_.c) +
                                "x" + std::to_string(sample_.h) + "x" + std::to_string(sample_.w) + " samples");
  ready_for_backward_ = false;
  // The caller's batch stays untouched: v̂1 = rnd(x) lives in the model.
  activations_[0] = x;
  hooks.round(site(0, tensor_kind::activation), activations_[0].span());
  for (std::size_t k = 1; k < size(); ++k) {
    module& l = layer(k);
    const auto params = l.parameters();
    for (std::size_t p = 0; p < params.size(); ++p) {
      if (source != nullptr) source->load(first_param_[k] + p, params[p]);
      else std::copy(params[p].value.begin(), params[p].value.end(), params[p].used.begin());
      hooks.round(site(k, tensor_kind::parameter, p), params[p].used);
    }
    l.forward(activations_[k - 1], activations_[k], m);
    hooks.round(site(k, tensor_kind::activation), activations_[k].span());
  }
  ready_for_backward_ = m == mode::train;
  return activations_.back();
}

void sequential::backward(const tensor& grad_output, rounding_hooks& hooks, gradient_sink* sink) {
  if (!ready_for_backward_)
    throw std::logic_error("nn::sequential::backward: needs a train-mode forward (once per forward)");
  const std::size_t last = size() - 1;
  if (last == 0) throw std::logic_error("nn::sequential::backward: the model has no layers");
  if (grad_output.shape != activations_[last].shape)
    throw std::invalid_argument("nn::sequential::backward: gradient shape differs from the output's");
  ready_for_backward_ = false;
  gradients_[last] = grad_output;
  hooks.round(site(last, tensor_kind::activation_gradient), gradients_[last].span());
  for (std::size_t k = last; k >= 1; --k) {
    module& l = layer(k);
    const auto params = l.parameters();
    for (parameter& p : params) p.grad.resize(p.numel());  // after release_gradient
    l.backward(activations_[k - 1], gradients_[k], k > 1 ? &gradients_[k - 1] : nullptr);
    for (std::size_t p = 0; p < params.size(); ++p)
      hooks.round(site(k, tensor_kind::parameter_gradient, p), params[p].grad);
    if (sink != nullptr && !params.empty()) sink->gradients_ready(first_param_[k], params);
    if (k > 1) hooks.round(site(k - 1, tensor_kind::activation_gradient), gradients_[k - 1].span());
  }
}

}  // namespace nn
