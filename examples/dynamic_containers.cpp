#include "dynamic_containers.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "flag_parsing.hpp"

namespace examples {

namespace {

std::vector<mt::tensor_class> classes_of(const mt::dynamic_controller& c) {
  std::vector<mt::tensor_class> out;
  for (const mt::quantum_tensor& t : c.containers().tensors()) out.push_back(t.cls());
  return out;
}

mt::dynamic_controller build(const nn::model_description& d, const mt::dynamic_options& o, std::vector<std::size_t>& fwd,
                             std::vector<std::size_t>& bwd) {
  mt::dynamic_controller c(o);
  fwd.assign(d.sites.size(), static_cast<std::size_t>(-1));
  bwd = fwd;
  for (std::size_t k = 1; k < d.modules.size(); ++k) {  // module 0, the input batch, is left out
    const nn::module_info& m = d.modules[k];
    const std::size_t y = c.add(m.name + ".Y", mt::tensor_class::activation, m.y_numel);
    fwd.at(m.y_site) = y;
    if (m.gy_site) bwd.at(*m.gy_site) = y;
    for (const nn::parameter_info& p : m.parameters) {
      const std::size_t w = c.add(m.name + "." + p.name, mt::tensor_class::weight, p.numel);
      fwd.at(p.p_site) = w;
      bwd.at(p.gp_site) = w;
    }
  }
  return c;
}

std::string fixed(double v, int digits = 2) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

const std::string_view dynamic_help = R"(
Dynamic containers (docs/dynamic-containers.md): weights and layer outputs are stored in fp32
containers of learned width, gradients stay fp32, loss scaling is off; +gecko also counts the
Gecko-encoded exponents. Each epoch prints an extra line: mean [min-max over tensors] of the
mantissa, exponent and total bits of weights (W) and activations (A) and the cumulative footprint
reduction vs FP32; --csv gets the same as extra columns.
)";

void add_dynamic_flags(CLI::App& app, dynamic_options& o) {
  mt::dynamic_options& c = o.controller;
  const std::string group(dynamic_group);
  app.add_option("--dc-gamma-m", c.quantum.gamma_mantissa, "QM+QE: regularizer strength of the mantissa bitlengths")
      ->type_name("G")->check(flags::non_negative())->capture_default_str()->group(group);
  app.add_option("--dc-gamma-e", c.quantum.gamma_exponent, "QM+QE: regularizer strength of the exponent bitlengths")
      ->type_name("G")->check(flags::non_negative())->capture_default_str()->group(group);
  app.add_option("--dc-bit-lr", c.quantum.learning_rate, "QM+QE: SGD step of the bitlengths")
      ->type_name("LR")->check(flags::non_negative())->capture_default_str()->group(group);
  flags::add_choice(app, "--dc-lambda", c.quantum.weighting, mt::named_lambda_rules,
                    "QM+QE: lambda_t = the tensor's share of the footprint or of the elements")->group(group);
  flags::add_choice(app, "--dc-exponent-gradient", c.quantum.exponent_rule, mt::named_exponent_gradients,
                    "QM+QE: the exponent bitlength's gradient as the exact finite\n"
                    "difference of the two neighbouring ranges or eqs. 9-10 linearised")->group(group);
  app.add_option("--dc-learn-epochs", c.learn_epochs, "QM+QE: bitlengths learn in the first N epochs, then are\nrounded up and frozen")
      ->type_name("N")->check(flags::whole(0, 10000))->capture_default_str()->group(group);
  app.add_option("--dc-relearn-epochs", c.relearn_epochs, "QM+QE: and for M epochs after a learning-rate change")
      ->type_name("M")->check(flags::whole(0, 10000))->capture_default_str()->group(group);
  app.add_option("--dc-relearn-lr-factor", c.relearn_lr_factor,
                 "an epoch starting at <= F times the rate of the last learning\nperiod counts as a learning-rate change")
      ->type_name("F")->check(flags::non_negative())->capture_default_str()->group(group);
  app.add_option("--dc-bw-history", c.bitwave.history, "BitWave: losses in the regression")
      ->type_name("H")->check(flags::whole(2, 1000000))->capture_default_str()->group(group);
  app.add_option("--dc-bw-threshold", c.bitwave.threshold, "BitWave: slope threshold, normalised by the mean loss")
      ->type_name("T")->check(flags::non_negative())->capture_default_str()->group(group);
  app.add_option("--dc-bw-cadence", c.bitwave.cadence, "BitWave: batches between decisions")
      ->type_name("C")->check(flags::whole(1, 1000000))->capture_default_str()->group(group);
  app.add_option("--dc-bw-fix-epoch", c.bitwave_fix_epochs, "BitWave: fix the container at its average after F epochs\n(0: never)")
      ->type_name("F")->check(flags::whole(0, 10000))->capture_default_str()->group(group);
  flags::add_choice(app, "--dc-gecko", o.gecko_variant, mt::named_gecko_variants,
                    "Gecko variant for +gecko (faithful: the paper's)")->group(group);
  flags::add_choice(app, "--dc-sign", c.sign, mt::named_sign_rules,
                    "omit the sign bit of tensors without negative values, or always\ncount it")->group(group);
  app.add_option("--dc-tensor-csv", o.tensor_csv, "per epoch and tensor: learned and mean bitlengths")
      ->type_name("PATH")->group(group);
}

bool dynamic_flag_given(const CLI::App& app) {
  return !app.get_options([](const CLI::Option* o) { return o->get_group() == dynamic_group && o->count() > 0; }).empty();
}

dynamic_container_hooks::dynamic_container_hooks(const nn::model_description& d, const mt::dynamic_options& o,
                                                 output_file tensor_csv)
    : options_(o),
      forward_of_(),
      backward_of_(),
      control_(build(d, o, forward_of_, backward_of_)),
      epoch_(classes_of(control_)),
      run_(classes_of(control_)),
      tensor_csv_(std::move(tensor_csv)) {}

std::string dynamic_container_hooks::tensor_csv_header() {
  return "epoch,tensor,class,numel,learning,n_mantissa,n_exponent,mean_mantissa_bits,mean_exponent_bits,"
         "sign_share,mean_total_bits,gecko_exponent_bits\n";
}

void dynamic_container_hooks::close_outputs() { tensor_csv_.close(); }

void dynamic_container_hooks::set_counting(bool training) {
  training_ = training;
  if (!training) control_.begin_evaluation();
}

void dynamic_container_hooks::begin_epoch(std::size_t epoch, double lr) {
  epoch_.clear();
  control_.begin_epoch(epoch, lr);
}

void dynamic_container_hooks::begin_step(std::uint64_t step) { control_.begin_step(step); }

void dynamic_container_hooks::end_step(double batch_loss) { (void)control_.end_step(batch_loss); }

void dynamic_container_hooks::end_epoch() { run_ += epoch_; }

void dynamic_container_hooks::round(const nn::tensor_site& site, std::span<float> values) {
  if (const std::size_t t = forward_of_.at(site.id); t != none) {
    control_.containers().forward(t, values, training_);
    if (!training_) return;
    const mt::quantum_tensor& q = control_.containers().tensors()[t];
    epoch_.record(t, mt::describe_stored(values, q.mantissa_bits(), q.exponent_bits(), options_.sign, options_.gecko));
  } else if (const std::size_t b = backward_of_.at(site.id); b != none && training_) {
    control_.containers().backward(b, values);
  }
}

bitlength_spread dynamic_container_hooks::spread(mt::tensor_class cls, bit_component component) const {
  bitlength_spread s{0, 1e9, -1e9};
  double weighted = 0, elements = 0;
  for (std::size_t t = 0; t < epoch_.size(); ++t) {
    const mt::footprint_totals& f = epoch_.tensor(t);
    if (epoch_.cls(t) != cls || f.elements == 0) continue;
    const double n = static_cast<double>(f.elements);
    const double bits = component == bit_component::mantissa   ? static_cast<double>(f.mantissa_bits)
                        : component == bit_component::exponent ? static_cast<double>(f.exponent_bits)
                                                               : static_cast<double>(f.bits(mt::footprint_variant::both));
    s.min = std::min(s.min, bits / n);
    s.max = std::max(s.max, bits / n);
    weighted += bits;
    elements += n;
  }
  if (elements == 0) return {};
  s.mean = weighted / elements;
  return s;
}

std::string dynamic_container_hooks::describe() const {
  std::string out = options_.method == mt::dynamic_method::quantum ? "QM+QE" : "BitWave";
  if (options_.gecko) out += " +Gecko (" + std::string(mt::name_in(mt::named_gecko_variants, *options_.gecko)) + ")";
  const mt::quantum_options& q = options_.quantum;
  if (options_.method == mt::dynamic_method::quantum)
    out += ": gamma_m " + fixed(q.gamma_mantissa, 3) + ", gamma_e " + fixed(q.gamma_exponent, 3) + ", bitlength lr " +
           fixed(q.learning_rate, 3) + ", lambda " + (q.weighting == mt::lambda_rule::footprint_share ? "footprint" : "elements") +
           ", exponent gradient " + (q.exponent_rule == mt::exponent_gradient::linearised ? "linearised" : "exact") +
           ", learn " + std::to_string(options_.learn_epochs) + " epochs, relearn " + std::to_string(options_.relearn_epochs) +
           " epochs at lr <= " + fixed(options_.relearn_lr_factor, 3) + "x";
  else
    out += ": history " + std::to_string(options_.bitwave.history) + ", threshold " + fixed(options_.bitwave.threshold, 5) +
           ", cadence " + std::to_string(options_.bitwave.cadence) + ", fix after epoch " +
           std::to_string(options_.bitwave_fix_epochs);
  out += "; " + std::to_string(control_.containers().tensors().size()) + " tensors (input batch excluded), sign " +
         (options_.sign == mt::sign_rule::always ? "always" : "omitted when non-negative");
  return out;
}

std::string dynamic_container_hooks::epoch_line() const {
  std::string out = "  containers";
  for (const auto cls : {mt::tensor_class::weight, mt::tensor_class::activation}) {
    out += cls == mt::tensor_class::weight ? "  W" : "  A";
    for (const auto& [c, label] : {std::pair{bit_component::mantissa, " m "}, std::pair{bit_component::exponent, " e "},
                                  std::pair{bit_component::total, " total "}}) {
      const bitlength_spread s = spread(cls, c);
      out += label + fixed(s.mean, 1) + " [" + fixed(s.min, 1) + "-" + fixed(s.max, 1) + "]";
    }
  }
  const mt::footprint_totals all = run_.totals();
  out += "  reduction vs fp32 " + fixed(all.reduction(mt::footprint_variant::both)) + "x";
  if (options_.gecko) out += " (+G " + fixed(all.reduction(mt::footprint_variant::both_gecko)) + "x)";
  if (options_.method == mt::dynamic_method::bitwave) out += "  slope " + fixed(control_.bitwave_state().last_slope() * 1e3, 3) + "e-3";
  out += learning() ? "  learning" : "  frozen";
  return out;
}

std::string dynamic_container_hooks::csv_header() {
  std::string h = ",dc_learning";
  for (const char* cls : {"w", "a"})
    for (const char* comp : {"mantissa", "exponent", "total"})
      for (const char* stat : {"mean", "min", "max"}) h += std::string(",") + cls + "_" + comp + "_" + stat;
  for (const char* scope : {"", "_w", "_a"})
    for (const char* v : {"qm", "qe", "qe_g", "qm_qe", "qm_qe_g"}) h += std::string(",red_") + v + scope;
  h += ",red_bf16_qm_qe,red_fp8_qm_qe,red_bf16_qm_qe_g,red_fp8_qm_qe_g";
  for (const char* cls : {"w", "a"})
    for (const char* share : {"mantissa_share", "exponent_share", "gecko_exponent_share"}) h += std::string(",") + cls + "_" + share;
  return h + ",bw_mean_mantissa,bw_mean_narrowing";
}

std::string dynamic_container_hooks::csv_columns() const {
  char buf[64];
  const auto num = [&](double v) {
    std::snprintf(buf, sizeof buf, ",%.6g", v);
    return std::string(buf);
  };
  std::string row = learning() ? ",1" : ",0";
  for (const auto cls : {mt::tensor_class::weight, mt::tensor_class::activation})
    for (const bit_component c : {bit_component::mantissa, bit_component::exponent, bit_component::total}) {
      const bitlength_spread s = spread(cls, c);
      row += num(s.mean) + num(s.min) + num(s.max);
    }
  using fv = mt::footprint_variant;
  const mt::footprint_totals scopes[] = {run_.totals(), run_.totals(mt::tensor_class::weight),
                                         run_.totals(mt::tensor_class::activation)};
  const auto reduction = [&](const mt::footprint_totals& t, fv v, int baseline = 32) {
    const bool gecko = v == fv::exponent_gecko || v == fv::both_gecko;
    return gecko && !t.has_gecko() ? std::string(",") : num(t.reduction(v, baseline));
  };
  for (const mt::footprint_totals& t : scopes)
    for (fv v : {fv::mantissa, fv::exponent, fv::exponent_gecko, fv::both, fv::both_gecko}) row += reduction(t, v);
  row += reduction(scopes[0], fv::both, 16) + reduction(scopes[0], fv::both, 8) + reduction(scopes[0], fv::both_gecko, 16) +
         reduction(scopes[0], fv::both_gecko, 8);
  for (const mt::footprint_totals& t : {scopes[1], scopes[2]})
    row += num(t.mantissa_share()) + num(t.exponent_share()) + (t.has_gecko() ? num(t.gecko_exponent_share()) : ",");
  if (options_.method == mt::dynamic_method::bitwave) row += num(control_.bitwave_state().mean_mantissa_bits()) + num(control_.bitwave_state().mean_narrowing());
  else row += ",,";
  return row;
}

void dynamic_container_hooks::write_tensor_rows(std::size_t epoch) {
  if (!tensor_csv_) return;
  std::string rows;
  for (std::size_t t = 0; t < epoch_.size(); ++t) {
    const mt::quantum_tensor& q = control_.containers().tensors()[t];
    const mt::footprint_totals& f = epoch_.tensor(t);
    const double n = f.elements ? static_cast<double>(f.elements) : 1.0;
    char row[512];
    std::snprintf(row, sizeof row, "%zu,%s,%s,%zu,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,", epoch, q.name().c_str(),
                  q.cls() == mt::tensor_class::weight ? "weight" : "activation", q.numel(), learning() ? 1 : 0,
                  q.mantissa_length(), q.exponent_length(), static_cast<double>(f.mantissa_bits) / n,
                  static_cast<double>(f.exponent_bits) / n, static_cast<double>(f.sign_bits) / n,
                  static_cast<double>(f.bits(mt::footprint_variant::both)) / n);
    std::string line = row;
    if (f.has_gecko() && f.elements) {
      char gecko[32];
      std::snprintf(gecko, sizeof gecko, "%g", static_cast<double>(f.gecko_bits) / n);  // as ostream << double
      line += gecko;
    }
    rows += line + '\n';
  }
  tensor_csv_.write(rows);  // the epoch's rows at once
}

}  // namespace examples
