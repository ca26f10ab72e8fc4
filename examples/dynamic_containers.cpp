#include "dynamic_containers.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "flag_parsing.hpp"

namespace examples {

namespace {

std::vector<mt::tensor_class> classes_of(const mt::quantum_containers& c) {
  std::vector<mt::tensor_class> out;
  for (const mt::quantum_tensor& t : c.tensors()) out.push_back(t.cls());
  return out;
}

mt::quantum_containers build(const nn::model_description& d, const dynamic_options& o, std::vector<std::size_t>& fwd,
                             std::vector<std::size_t>& bwd) {
  mt::quantum_containers c(o.quantum);
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
dynamic containers (--assignment qm-qe, qm-qe+gecko, bitwave, bitwave+gecko;
docs/dynamic-containers.md): weights and layer outputs are stored in fp32 containers of learned
width, gradients stay fp32, loss scaling is off; +gecko also counts the Gecko-encoded exponents
  --dc-gamma-m G             QM+QE: regularizer strength of the mantissa bitlengths (default 0.1)
  --dc-gamma-e G             QM+QE: regularizer strength of the exponent bitlengths (default 0.1)
  --dc-bit-lr LR             QM+QE: SGD step of the bitlengths (default 0.5)
  --dc-lambda footprint|elements
                             QM+QE: lambda_t = the tensor's share of the footprint (default) or
                             of the elements
  --dc-exponent-gradient exact|linearised
                             QM+QE: the exponent bitlength's gradient as the exact finite
                             difference of the two neighbouring ranges (default) or eqs. 9-10
                             linearised
  --dc-learn-epochs N        QM+QE: bitlengths learn in the first N epochs (default 5), then are
                             rounded up and frozen
  --dc-relearn-epochs M      QM+QE: and for M epochs after a learning-rate change (default 5)
  --dc-relearn-lr-factor F   an epoch starting at <= F times the rate of the last learning period
                             counts as a learning-rate change (default 0.1)
  --dc-bw-history H          BitWave: losses in the regression, 2 to 1e6 (default 100)
  --dc-bw-threshold T        BitWave: slope threshold, normalised by the mean loss (default 1e-3)
  --dc-bw-cadence C          BitWave: batches between decisions (default 1)
  --dc-bw-fix-epoch F        BitWave: fix the container at its average after F epochs (default 5;
                             0 never)
  --dc-gecko faithful|improved
                             Gecko variant for +gecko (default faithful, the paper's)
  --dc-sign omit|always      omit the sign bit of tensors without negative values (default omit)
  --dc-tensor-csv PATH       per epoch and tensor: learned and mean bitlengths
Each epoch prints an extra line: mean [min-max over tensors] of the mantissa, exponent and total
bits of weights (W) and activations (A) and the cumulative footprint reduction vs FP32; --csv
gets the same as extra columns.
)";

bool parse_dynamic_flag(std::string_view flag, std::string_view value, dynamic_options& o) {
  if (flag == "--dc-gamma-m") o.quantum.gamma_mantissa = flags::non_negative(flag, value);
  else if (flag == "--dc-gamma-e") o.quantum.gamma_exponent = flags::non_negative(flag, value);
  else if (flag == "--dc-bit-lr") o.quantum.learning_rate = flags::non_negative(flag, value);
  else if (flag == "--dc-lambda") {
    if (value == "footprint") o.quantum.weighting = mt::lambda_rule::footprint_share;
    else if (value == "elements") o.quantum.weighting = mt::lambda_rule::element_share;
    else throw std::invalid_argument("--dc-lambda expects footprint or elements");
  } else if (flag == "--dc-exponent-gradient") {
    if (value == "exact") o.quantum.exponent_rule = mt::exponent_gradient::finite_difference;
    else if (value == "linearised") o.quantum.exponent_rule = mt::exponent_gradient::linearised;
    else throw std::invalid_argument("--dc-exponent-gradient expects exact or linearised");
  } else if (flag == "--dc-learn-epochs") o.learn_epochs = flags::between<std::size_t>(flag, value, 0, 10000);
  else if (flag == "--dc-relearn-epochs") o.relearn_epochs = flags::between<std::size_t>(flag, value, 0, 10000);
  else if (flag == "--dc-relearn-lr-factor") o.relearn_lr_factor = flags::non_negative(flag, value);
  else if (flag == "--dc-bw-history") o.bitwave.history = flags::between<std::size_t>(flag, value, 2, 1000000);
  else if (flag == "--dc-bw-threshold") o.bitwave.threshold = flags::non_negative(flag, value);
  else if (flag == "--dc-bw-cadence") o.bitwave.cadence = flags::between<std::size_t>(flag, value, 1, 1000000);
  else if (flag == "--dc-bw-fix-epoch") o.bitwave_fix_epochs = flags::between<std::size_t>(flag, value, 0, 10000);
  else if (flag == "--dc-gecko") {
    if (value == "faithful") o.gecko_variant = minifloat::storage::gecko_variant::faithful;
    else if (value == "improved") o.gecko_variant = minifloat::storage::gecko_variant::improved;
    else throw std::invalid_argument("--dc-gecko expects faithful or improved");
  } else if (flag == "--dc-sign") {
    if (value == "omit") o.sign = mt::sign_rule::omit_when_nonnegative;
    else if (value == "always") o.sign = mt::sign_rule::always;
    else throw std::invalid_argument("--dc-sign expects omit or always");
  } else if (flag == "--dc-tensor-csv") o.tensor_csv = value;
  else return false;
  return true;
}

dynamic_container_hooks::dynamic_container_hooks(const nn::model_description& d, const dynamic_options& o,
                                                 output_file tensor_csv)
    : options_(o),
      forward_of_(),
      backward_of_(),
      containers_(build(d, o, forward_of_, backward_of_)),
      schedule_(o.learn_epochs, o.relearn_epochs),
      bitwave_(o.bitwave),
      epoch_(classes_of(containers_)),
      run_(classes_of(containers_)),
      tensor_csv_(std::move(tensor_csv)) {
  // BitWave imposes its container and learns from the loss alone: no bitlength gradients.
  if (options_.method == dynamic_method::bitwave) containers_.set_learning(false);
}

std::string dynamic_container_hooks::tensor_csv_header() {
  return "epoch,tensor,class,numel,learning,n_mantissa,n_exponent,mean_mantissa_bits,mean_exponent_bits,"
         "sign_share,mean_total_bits,gecko_exponent_bits\n";
}

void dynamic_container_hooks::close_outputs() { tensor_csv_.close(); }

void dynamic_container_hooks::set_counting(bool training) {
  training_ = training;
  if (training) return;
  if (options_.method == dynamic_method::quantum) containers_.begin_evaluation();
  else
    for (mt::quantum_tensor& t : containers_.tensors()) t.impose(bitwave_.current());
}

bool dynamic_container_hooks::learning() const {
  return options_.method == dynamic_method::quantum ? containers_.learning() : !bitwave_.fixed();
}

void dynamic_container_hooks::begin_epoch(std::size_t epoch, double lr) {
  epoch_index_ = epoch;
  epoch_.clear();
  if (options_.method == dynamic_method::bitwave) {
    if (options_.bitwave_fix_epochs != 0 && epoch == options_.bitwave_fix_epochs && !bitwave_.fixed())
      bitwave_.fix_at_average();
    return;
  }
  if (epoch == 0) period_lr_ = lr;
  else if (lr <= options_.relearn_lr_factor * period_lr_) {
    schedule_.learning_rate_changed(epoch);
    period_lr_ = lr;
  }
  containers_.set_learning(schedule_.learning_in(epoch));
}

void dynamic_container_hooks::begin_step(std::uint64_t step) {
  if (options_.method == dynamic_method::quantum) containers_.begin_step(step);
  else
    for (mt::quantum_tensor& t : containers_.tensors()) t.impose(bitwave_.current());
}

void dynamic_container_hooks::end_step(double batch_loss) {
  if (options_.method == dynamic_method::quantum) containers_.end_step();
  else (void)bitwave_.observe(batch_loss);
}

void dynamic_container_hooks::end_epoch() { run_ += epoch_; }

void dynamic_container_hooks::round(const nn::tensor_site& site, std::span<float> values) {
  if (const std::size_t t = forward_of_.at(site.id); t != none) {
    containers_.forward(t, values, training_);
    if (!training_) return;
    const mt::quantum_tensor& q = containers_.tensors()[t];
    epoch_.record(t, mt::describe_stored(values, q.mantissa_bits(), q.exponent_bits(), options_.sign,
                                         options_.gecko ? std::optional(options_.gecko_variant) : std::nullopt));
  } else if (const std::size_t b = backward_of_.at(site.id); b != none && training_) {
    containers_.backward(b, values);
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
  std::string out = options_.method == dynamic_method::quantum ? "QM+QE" : "BitWave";
  if (options_.gecko)
    out += options_.gecko_variant == minifloat::storage::gecko_variant::faithful ? " +Gecko (faithful)" : " +Gecko (improved)";
  const mt::quantum_options& q = options_.quantum;
  if (options_.method == dynamic_method::quantum)
    out += ": gamma_m " + fixed(q.gamma_mantissa, 3) + ", gamma_e " + fixed(q.gamma_exponent, 3) + ", bitlength lr " +
           fixed(q.learning_rate, 3) + ", lambda " + (q.weighting == mt::lambda_rule::footprint_share ? "footprint" : "elements") +
           ", exponent gradient " + (q.exponent_rule == mt::exponent_gradient::linearised ? "linearised" : "exact") +
           ", learn " + std::to_string(options_.learn_epochs) + " epochs, relearn " + std::to_string(options_.relearn_epochs) +
           " epochs at lr <= " + fixed(options_.relearn_lr_factor, 3) + "x";
  else
    out += ": history " + std::to_string(options_.bitwave.history) + ", threshold " + fixed(options_.bitwave.threshold, 5) +
           ", cadence " + std::to_string(options_.bitwave.cadence) + ", fix after epoch " +
           std::to_string(options_.bitwave_fix_epochs);
  out += "; " + std::to_string(containers_.tensors().size()) + " tensors (input batch excluded), sign " +
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
  if (options_.method == dynamic_method::bitwave) out += "  slope " + fixed(bitwave_.last_slope() * 1e3, 3) + "e-3";
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
  if (options_.method == dynamic_method::bitwave) row += num(bitwave_.mean_mantissa_bits()) + num(bitwave_.mean_narrowing());
  else row += ",,";
  return row;
}

void dynamic_container_hooks::write_tensor_rows(std::size_t epoch) {
  if (!tensor_csv_) return;
  std::string rows;
  for (std::size_t t = 0; t < epoch_.size(); ++t) {
    const mt::quantum_tensor& q = containers_.tensors()[t];
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
