// python/src/training.cpp — the training layer (include/minifloat/training/) for
// minifloat.training: the graph and its rounding sites, Algorithm 1's grouping, the precision
// assignments, overflow promotion, the loss scaler, the paper-style footprint, the dynamic
// containers' controller with its defaults and option names, and the per-parameter seed rule.
// Every policy, default and rounding is the headers'; this file only moves indices, names and
// buffers across.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include <minifloat/training/assignment.hpp>
#include <minifloat/training/dynamic_controller.hpp>
#include <minifloat/training/footprint.hpp>
#include <minifloat/training/graph.hpp>
#include <minifloat/training/grouping.hpp>
#include <minifloat/training/loss_scale.hpp>
#include <minifloat/training/parameter_seed.hpp>
#include <minifloat/training/promotion.hpp>

#include "binding.hpp"

namespace minifloat::python {

namespace {

namespace mt = minifloat::training;

format_tuple tuple_of(const format& f) {
  return {f.exponent_bits, f.mantissa_bits, f.exponent_bias, f.subnormals, static_cast<int>(f.encoding)};
}

mt::format_pair pair_of(const std::pair<format_tuple, format_tuple>& p) {
  const format high = to_format(p.first);
  const format low = to_format(p.second);
  high.validate();
  low.validate();
  return {high, low};
}

std::vector<int> levels_of(const mt::assignment& a) {
  std::vector<int> out(a.level.size());
  for (std::size_t s = 0; s < a.level.size(); ++s) out[s] = a.level[s] == mt::precision::low ? 1 : 0;
  return out;
}

mt::assignment assignment_of(const std::vector<int>& levels) {
  mt::assignment a;
  a.level.reserve(levels.size());
  for (int l : levels) a.level.push_back(l != 0 ? mt::precision::low : mt::precision::high);
  return a;
}

const std::vector<std::string> order_names{"decreasing", "increasing", "random"};

/// Rounds n floats at `address` in place at site s; counted into the site's step statistics
/// unless `counted` is false (evaluation passes must not feed promotion).
void apply_site(mt::graph& g, mt::site_id s, std::uintptr_t address, std::size_t n, bool counted, int threads) {
  const mt::site& site = g.at(s);
  if (!site.enabled()) return;
  if (site.split_unit() != 1) {
    // A block-scaled level may not be cut at arbitrary elements (NVFP4 not at all): one call.
    const auto values = span_at<float>(address, n);
    py::gil_scoped_release unlocked;
    if (counted) g.at(s).apply(values, 0);
    else site.apply_uncounted(values, 0);
    return;
  }
  std::vector<rounding_stats> stats(worker_count(n, threads));
  {
    py::gil_scoped_release unlocked;
    for_ranges(n, threads, [&](std::size_t worker, std::size_t start, std::size_t count) {
      const auto piece = span_at<float>(address, n).subspan(start, count);
      if (counted) site.apply(piece, start, stats[worker]);
      else site.apply_uncounted(piece, start);
    });
  }
  if (!counted) return;
  rounding_stats total;
  for (const auto& st : stats) total += st;
  g.at(s).add_stats(total);
}

/// The names of a table, in its order.
template <class E, std::size_t N>
std::vector<std::string> names_of(const mt::named<E> (&table)[N]) {
  std::vector<std::string> out;
  for (const auto& [name, value] : table) out.emplace_back(name);
  return out;
}

/// The enumerator called `name` in `table`; ValueError naming the option and the choices.
template <class E, std::size_t N>
E named_value(const mt::named<E> (&table)[N], const std::string& name, const char* option) {
  if (const auto value = mt::find_named(table, name)) return *value;
  std::string choices;
  for (const auto& [n, v] : table) choices += (choices.empty() ? "" : ", ") + std::string(n);
  throw py::value_error(std::string("minifloat.training.DynamicOptions: ") + option + " " + py::repr(py::str(name)).cast<std::string>() +
                        " is not one of " + choices);
}

/// dynamic_options as minifloat.training.DynamicOptions names its fields (the C++ trainer's
/// --dc-* flags without the prefix, bw_ for BitWave's).
py::dict dynamic_fields(const mt::dynamic_options& o) {
  py::dict d;
  d["method"] = std::string(mt::name_in(mt::named_dynamic_methods, o.method));
  d["gamma_mantissa"] = o.quantum.gamma_mantissa;
  d["gamma_exponent"] = o.quantum.gamma_exponent;
  d["bit_lr"] = o.quantum.learning_rate;
  d["lambda_rule"] = std::string(mt::name_in(mt::named_lambda_rules, o.quantum.weighting));
  d["exponent_gradient"] = std::string(mt::name_in(mt::named_exponent_gradients, o.quantum.exponent_rule));
  d["learn_epochs"] = o.learn_epochs;
  d["relearn_epochs"] = o.relearn_epochs;
  d["relearn_lr_factor"] = o.relearn_lr_factor;
  d["bw_history"] = o.bitwave.history;
  d["bw_threshold"] = o.bitwave.threshold;
  d["bw_cadence"] = o.bitwave.cadence;
  d["bw_fix_epoch"] = o.bitwave_fix_epochs;
  d["gecko"] = o.gecko ? py::object(py::str(std::string(mt::name_in(mt::named_gecko_variants, *o.gecko)))) : py::object(py::none());
  d["sign"] = std::string(mt::name_in(mt::named_sign_rules, o.sign));
  d["seed"] = o.quantum.seed;
  return d;
}

/// The inverse of dynamic_fields for every field given (the others keep the C++ defaults);
/// validated, so a bad value is a ValueError naming the field.
mt::dynamic_options dynamic_options_of(const py::kwargs& fields) {
  mt::dynamic_options o;
  for (const auto& [key, value] : fields) {
    const std::string k = key.cast<std::string>();
    if (k == "method") o.method = named_value(mt::named_dynamic_methods, value.cast<std::string>(), "method");
    else if (k == "gamma_mantissa") o.quantum.gamma_mantissa = value.cast<double>();
    else if (k == "gamma_exponent") o.quantum.gamma_exponent = value.cast<double>();
    else if (k == "bit_lr") o.quantum.learning_rate = value.cast<double>();
    else if (k == "lambda_rule") o.quantum.weighting = named_value(mt::named_lambda_rules, value.cast<std::string>(), "lambda_rule");
    else if (k == "exponent_gradient")
      o.quantum.exponent_rule = named_value(mt::named_exponent_gradients, value.cast<std::string>(), "exponent_gradient");
    else if (k == "learn_epochs") o.learn_epochs = value.cast<std::size_t>();
    else if (k == "relearn_epochs") o.relearn_epochs = value.cast<std::size_t>();
    else if (k == "relearn_lr_factor") o.relearn_lr_factor = value.cast<double>();
    else if (k == "bw_history") o.bitwave.history = value.cast<std::size_t>();
    else if (k == "bw_threshold") o.bitwave.threshold = value.cast<double>();
    else if (k == "bw_cadence") o.bitwave.cadence = value.cast<std::size_t>();
    else if (k == "bw_fix_epoch") o.bitwave_fix_epochs = value.cast<std::size_t>();
    else if (k == "gecko") {
      if (value.is_none()) o.gecko.reset();
      else o.gecko = named_value(mt::named_gecko_variants, value.cast<std::string>(), "gecko");
    } else if (k == "sign") o.sign = named_value(mt::named_sign_rules, value.cast<std::string>(), "sign");
    else if (k == "seed") o.quantum.seed = value.cast<std::uint64_t>();
    else throw py::type_error("minifloat.training.DynamicOptions: no option " + k);
  }
  try {
    o.validate();
  } catch (const std::invalid_argument& e) {
    throw py::value_error(std::string("minifloat.training.DynamicOptions: ") + e.what());
  }
  return o;
}

}  // namespace

void bind_training(py::module_& m) {
  // The per-parameter seed rule both trainers use (training/parameter_seed.hpp).
  m.def("parameter_seed", &mt::parameter_seed, py::arg("seed"), py::arg("index"));

  // The dynamic containers' option names and defaults, and their controller
  // (training/dynamic_controller.hpp): DynamicOptions reads its defaults from dynamic_defaults().
  m.attr("dynamic_method_names") = names_of(mt::named_dynamic_methods);
  m.attr("lambda_rule_names") = names_of(mt::named_lambda_rules);
  m.attr("exponent_gradient_names") = names_of(mt::named_exponent_gradients);
  m.attr("sign_rule_names") = names_of(mt::named_sign_rules);
  m.attr("gecko_variant_names") = names_of(mt::named_gecko_variants);
  m.def("dynamic_defaults", [] { return dynamic_fields(mt::dynamic_options{}); });
  m.def("check_dynamic_options", [](const py::kwargs& fields) { return dynamic_fields(dynamic_options_of(fields)); });

  py::class_<mt::dynamic_controller>(m, "DynamicController")
      .def(py::init([](const py::kwargs& fields) { return mt::dynamic_controller(dynamic_options_of(fields)); }))
      .def("options", [](const mt::dynamic_controller& c) { return dynamic_fields(c.options()); })
      .def("add", [](mt::dynamic_controller& c, const std::string& name, bool is_weight, std::size_t numel) {
        return c.add(name, is_weight ? mt::tensor_class::weight : mt::tensor_class::activation, numel);
      })
      // The containers (QuantumContainers) and BitWave's state (BitWave), owned by the controller.
      .def_property_readonly("containers", py::overload_cast<>(&mt::dynamic_controller::containers),
                             py::return_value_policy::reference_internal)
      .def_property_readonly("bitwave", &mt::dynamic_controller::bitwave_state, py::return_value_policy::reference_internal)
      .def_property_readonly("learning", &mt::dynamic_controller::learning)
      .def("begin_epoch", &mt::dynamic_controller::begin_epoch)
      .def("begin_step", &mt::dynamic_controller::begin_step)
      // BitWave's decision: -1 narrower, 0 hold (always for QM+QE), 1 wider.
      .def("end_step", [](mt::dynamic_controller& c, double loss) { return static_cast<int>(c.end_step(loss)); })
      .def("begin_evaluation", &mt::dynamic_controller::begin_evaluation);

  m.attr("demotion_order_names") = order_names;

  py::class_<mt::graph>(m, "TrainingGraph")
      .def(py::init([](const std::pair<format_tuple, format_tuple>& y, const std::pair<format_tuple, format_tuple>& gy,
                       const std::pair<format_tuple, format_tuple>& p, const std::pair<format_tuple, format_tuple>& gp,
                       bool gp_stays_high) {
        return mt::graph(mt::precision_candidates{pair_of(y), pair_of(gy), pair_of(p), pair_of(gp), gp_stays_high});
      }))
      .def("add_module",
           [](mt::graph& g, const std::string& name, bool is_gemm, std::size_t numel, bool output_gradient,
              std::optional<std::size_t> input) {
             return g.add_module(name, is_gemm ? mt::module_kind::gemm : mt::module_kind::other, numel, output_gradient,
                                 input);
           })
      .def("add_input", [](mt::graph& g, const std::string& name, std::size_t numel) { return g.add_input(name, numel); })
      .def("add_parameter", &mt::graph::add_parameter)
      .def("module_count", [](const mt::graph& g) { return g.modules().size(); })
      // (name, is_gemm, input or None, y, gy, params, param_grads); absent sites are None.
      .def("module", [](const mt::graph& g, std::size_t i) {
        const mt::module& mod = g.module_at(i);
        const auto site_or_none = [](mt::site_id s) -> py::object {
          return s == mt::no_site ? py::object(py::none()) : py::object(py::int_(s));
        };
        return py::make_tuple(mod.name, mod.is_gemm, mod.input ? py::object(py::int_(*mod.input)) : py::object(py::none()),
                              site_or_none(mod.y), site_or_none(mod.gy), mod.params, mod.param_grads);
      })
      .def("site_count", [](const mt::graph& g) { return g.sites().size(); })
      // (name, role, numel, level 0/1, enabled, current format, high format, low format, bits)
      .def("site", [](const mt::graph& g, mt::site_id s) {
        const mt::site& t = g.at(s);
        return py::make_tuple(t.name(), std::string(mt::to_string(t.kind())), t.numel(),
                              t.level() == mt::precision::low ? 1 : 0, t.enabled(), tuple_of(t.current_format()),
                              tuple_of(t.formats().high), tuple_of(t.formats().low), t.bits_per_element());
      })
      .def("site_stats", [](const mt::graph& g, mt::site_id s) {
        const rounding_stats& st = g.at(s).step_stats();
        return py::make_tuple(st.values, st.overflows, st.underflows, st.nans, st.infinities);
      })
      .def("find", [](const mt::graph& g, const std::string& name) -> py::object {
        const mt::site_id s = g.find(name);
        return s == mt::no_site ? py::object(py::none()) : py::object(py::int_(s));
      })
      .def("seed_sites", &mt::graph::seed_sites)
      .def("begin_step", &mt::graph::begin_step)
      .def("set_rounding", [](mt::graph& g, int mode) {
        const rounding r = enumerator<rounding>(mode, rounding_names, "rounding");
        for (mt::site& t : g.sites()) t.set_mode(r);
      })
      .def("set_level", [](mt::graph& g, mt::site_id s, int level) {
        g.at(s).set_level(level != 0 ? mt::precision::low : mt::precision::high);
      })
      .def("apply_site", [](mt::graph& g, mt::site_id s, std::uintptr_t address, std::size_t n, bool counted,
                            int threads) { apply_site(g, s, address, n, counted, threads); })
      .def("footprint", [](const mt::graph& g) {
        const mt::footprint f = mt::measure_footprint(g.sites());
        return py::make_tuple(f.total_bits, f.all_high_bits, f.saved_bits, f.saveable_bits, f.low_ratio());
      });

  // (name, first_module, modules, sites, size) per group, in order of their starting module.
  m.def("group_tensors", [](const mt::graph& g) {
    py::list out;
    for (const mt::tensor_group& grp : mt::group_tensors(g))
      out.append(py::make_tuple(grp.name, grp.first_module, grp.modules, grp.sites, grp.size));
    return out;
  });

  m.def("assign_all_high", [](const mt::graph& g) { return levels_of(mt::all_high(g)); });
  m.def("assign_uniform", [](const mt::graph& g) { return levels_of(mt::uniform(g)); });
  m.def("assign_operator_based", [](const mt::graph& g) { return levels_of(mt::operator_based(g)); });
  m.def("assign_operator_based_variant", [](const mt::graph& g) { return levels_of(mt::operator_based_variant(g)); });
  m.def("assign_demote_by_size", [](const mt::graph& g, double r, int order, std::uint64_t seed) {
    const mt::demotion_result res =
        mt::demote_by_size(g, r, enumerator<mt::demotion_order>(order, order_names, "demotion order"), seed);
    return py::make_tuple(levels_of(res.levels), res.groups_demoted, res.demoted_share);
  });
  m.def("apply_assignment", [](mt::graph& g, const std::vector<int>& levels) { mt::apply(g, assignment_of(levels)); });
  m.def("disable_rounding", [](mt::graph& g) { mt::disable_rounding(g); });

  py::class_<mt::overflow_promotion>(m, "OverflowPromotion")
      .def(py::init<double>())
      .def_property_readonly("theta", &mt::overflow_promotion::theta)
      .def("qualifies", [](const mt::overflow_promotion& p, const mt::graph& g, mt::site_id s) { return p.qualifies(g.at(s)); })
      .def("promote", [](mt::overflow_promotion& p, mt::graph& g, std::uint64_t step) { return p.promote(g.sites(), step); })
      .def("log", [](const mt::overflow_promotion& p) {
        py::list out;
        for (const mt::promotion_event& e : p.log()) out.append(py::make_tuple(e.step, e.site, e.overflow_ratio));
        return out;
      });

  py::class_<mt::loss_scaler>(m, "LossScaler")
      .def(py::init([](float init_scale, float growth_factor, float backoff_factor, std::int64_t growth_interval,
                       bool enabled) {
        return mt::loss_scaler(mt::loss_scaler_options{init_scale, growth_factor, backoff_factor, growth_interval, enabled});
      }))
      .def_property_readonly("scale", &mt::loss_scaler::scale)
      .def_property_readonly("enabled", &mt::loss_scaler::enabled)
      .def_property_readonly("growth_tracker", &mt::loss_scaler::growth_tracker)
      .def_property_readonly("found_inf", &mt::loss_scaler::found_inf)
      .def("unscale", [](mt::loss_scaler& s, std::uintptr_t address, std::size_t n) {
        return s.unscale(span_at<float>(address, n));
      })
      .def("should_step", &mt::loss_scaler::should_step)
      .def("update", [](mt::loss_scaler& s) { s.update(); });
}

}  // namespace minifloat::python
