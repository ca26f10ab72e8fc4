// train — trains the example MLP or CNN on Fashion-MNIST with a precision assignment of the
// precision-assignment paper (fp32, all-high, uniform, operator-based and its variant, or the
// paper's size-ordered demotion with overflow-driven promotion), dynamic loss scaling and FP32
// master weights — or, with --weights low-only|low+k, no fp32 copy at all and optionally the
// update fused into the backward pass (weight_storage.hpp, docs/no-master-weights.md). The layers (examples/nn/) call a rounding hook per tensor; this program wires
// that hook to minifloat::training sites. Every flag is declared once with CLI11 (add_flags and
// the blocks it calls); `train --help` explains every flag; docs/training.md the rules.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <minifloat/training/training.hpp>

#include "data/batches.hpp"
#include "data/fashion_mnist.hpp"
#include "nn/gemm.hpp"
#include "nn/hooks.hpp"
#include "nn/loss.hpp"
#include "nn/models.hpp"
#include "nn/schedule.hpp"
#include "site_wiring.hpp"
#include "dynamic_containers.hpp"
#include "flag_parsing.hpp"
#include "output_file.hpp"
#include "weight_options.hpp"

namespace mt = minifloat::training;

namespace {

constexpr const char* description = R"(Trains an example network on Fashion-MNIST with a low-precision assignment of the
precision-assignment paper, emulated by minifloat (docs/training.md has the rules).
Each flag takes its value as --flag VALUE or --flag=VALUE, at most once.)";

constexpr const char* footer = R"(
Every output file is created before the data loads (a bad path fails at once), each row is
written whole and flushed, and a failed write or close ends the run with exit status 1.
SIGINT or SIGTERM stops the run at the next step boundary: the CSVs keep their header and
every completed row (the interrupted epoch has no --csv row), and the exit status is 130 or
143. A bad value or a flag given twice is a usage error (exit status 2).

Each epoch prints: train loss and accuracy, test accuracy, the low-precision ratio (bits,
averaged over the epoch's steps), promotions (this epoch / total), the loss scale and the
steps it skipped, the three largest overflow ratios of forward tensors (maximum over the
epoch's steps), and the time.)";

enum class assignment_kind { fp32, all_high, uniform, op, op_variant, ours, fixed, qm_qe, qm_qe_gecko, bitwave, bitwave_gecko };

constexpr bool is_dynamic(assignment_kind a) { return a >= assignment_kind::qm_qe; }

constexpr examples::flags::choices<assignment_kind> assignments[] = {
    {"fp32", assignment_kind::fp32},       {"all-high", assignment_kind::all_high},
    {"uniform", assignment_kind::uniform}, {"op", assignment_kind::op},
    {"op-variant", assignment_kind::op_variant}, {"ours", assignment_kind::ours},
    {"fixed", assignment_kind::fixed},     {"qm-qe", assignment_kind::qm_qe},
    {"qm-qe+gecko", assignment_kind::qm_qe_gecko}, {"bitwave", assignment_kind::bitwave},
    {"bitwave+gecko", assignment_kind::bitwave_gecko}};
constexpr examples::flags::choices<mt::demotion_order> demotion_orders[] = {
    {"decreasing", mt::demotion_order::decreasing},
    {"increasing", mt::demotion_order::increasing},
    {"random", mt::demotion_order::random}};
constexpr examples::flags::choices<minifloat::rounding> rounding_modes[] = {
    {"nearest-even", minifloat::rounding::nearest_even},
    {"nearest-away", minifloat::rounding::nearest_away},
    {"stochastic", minifloat::rounding::stochastic}};
constexpr examples::flags::choices<bool> switches[] = {{"on", true}, {"off", false}};
constexpr examples::flags::choices<std::optional<bool>> loss_scaling_switches[] = {{"on", true}, {"off", false}};
constexpr examples::flags::choices<std::string_view> models[] = {{"mlp", "mlp"}, {"cnn", "cnn"}};

std::string_view name_of(assignment_kind a) { return examples::flags::name_of(assignments, a); }
std::string_view name_of(mt::demotion_order o) { return examples::flags::name_of(demotion_orders, o); }
std::string_view name_of(minifloat::rounding r) { return examples::flags::name_of(rounding_modes, r); }

struct config {
  std::string_view model = "mlp";
  double width = 1.0;
  std::string data_dir{data::fashion_mnist_dir};
  std::size_t train_limit = 0, test_limit = 0;
  assignment_kind assignment = assignment_kind::ours;
  double ratio = 0.5;
  mt::demotion_order order = mt::demotion_order::decreasing;
  minifloat::rounding mode = minifloat::rounding::nearest_even;
  bool promotion = true;
  double theta = 0.01;
  std::optional<bool> loss_scaling;  // unset: on except for fp32
  float init_scale = 65536.0f;
  std::size_t growth_interval = 0;  // 0: one epoch
  std::size_t epochs = 10, batch_size = 128;
  std::optional<double> lr;  // unset: 0.05 for the MLP, 0.02 for the CNN
  double momentum = 0.9, weight_decay = 5e-4;
  std::uint64_t seed = 1;
  std::size_t threads = 1;
  std::string csv, step_csv;
  bool quiet = false;
  examples::weight_flags weights;  // --weights, --visible, --optimizer, --fused-update, ... (weight_options.hpp)
  examples::dynamic_options dynamic;  // --assignment qm-qe / bitwave (+gecko) and the --dc-* flags
};

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Declares every flag of the trainer on `app`: its own here, the weight-storage block's
/// (weight_options.hpp) and the dynamic containers' (dynamic_containers.hpp). Each flag's name,
/// help, default and check are in its one declaration.
void add_flags(CLI::App& app, config& c) {
  namespace flags = examples::flags;
  app.set_help_flag("--help,-h", "print this help and exit");
  app.get_formatter()->column_width(29);
  app.footer(std::string(footer) + "\n" + std::string(examples::dynamic_help));
  app.allow_extras();  // unknown flags and stray arguments are reported by check_extras, in our words

  const std::string data_group = "model and data";
  flags::add_choice(app, "--model", c.model, models,
                    "network: MLP 784-512-512-10, or CNN conv-bn-relu-pool x2 +\n"
                    "linear (examples/nn/models.hpp)")->group(data_group);
  // Parameters grow with width²: at 8 the MLP has 20 M (at 1e6 the allocation would fail).
  app.add_option("--width", c.width, "width multiplier in (0, 8]: narrower models are harder to\ntrain in low precision")
      ->type_name("W")->check(flags::positive(8))->capture_default_str()->group(data_group);
  app.add_option("--data-dir", c.data_dir, "Fashion-MNIST IDX files")->type_name("PATH")->capture_default_str()->group(data_group);
  app.add_option("--train-limit", c.train_limit, "use only the first N training images (0: all 60000)")
      ->type_name("N")->check(flags::whole(0, std::size_t{1} << 40))->capture_default_str()->group(data_group);
  app.add_option("--test-limit", c.test_limit, "use only the first N test images (0: all 10000)")
      ->type_name("N")->check(flags::whole(0, std::size_t{1} << 40))->capture_default_str()->group(data_group);

  const std::string precision_group = "precision";
  flags::add_choice(app, "--assignment", c.assignment, assignments,
                    "fp32       every tensor fp32 (rounding off)\n"
                    "all-high   every tensor in the high format fp(6,9,0)\n"
                    "uniform    every tensor low except weight gradients\n"
                    "op         operator-based: inputs of every GEMM but the first\n"
                    "           and last low (input activation, weights, output gradient)\n"
                    "op-variant op plus those GEMMs' outputs and input gradients\n"
                    "ours       size-ordered demotion to ratio r\n"
                    "fixed      every tensor in --format (see weights and update)\n"
                    "low formats: fp(4,3,4) for activations and weights, fp(5,2,0)\n"
                    "for activation gradients; weight gradients stay high\n"
                    "qm-qe, qm-qe+gecko, bitwave, bitwave+gecko: dynamic containers\n"
                    "(Schrödinger's FP; the --dc-* flags)")
      ->type_name("NAME")->group(precision_group);
  app.add_option("--ratio", c.ratio, "ours: demote tensor groups until the demoted share of all\nelements reaches R, in [0, 1]")
      ->type_name("R")->check(flags::in_range(0, 1))->capture_default_str()->group(precision_group);
  flags::add_choice(app, "--order", c.order, demotion_orders,
                    "ours: demotion order of the groups (decreasing is the paper's;\n"
                    "random draws the order from --seed)")->group(precision_group);
  flags::add_choice(app, "--rounding", c.mode, rounding_modes,
                    "rounding mode of every tensor (nearest-away reproduces the\n"
                    "paper's reference code)")->group(precision_group);
  flags::add_choice(app, "--promotion", c.promotion, switches,
                    "promote a low activation or weight to high precision for good\n"
                    "once its overflow ratio in a step reaches theta")->group(precision_group);
  app.add_option("--theta", c.theta, "promotion threshold in [0, 1]")
      ->type_name("T")->check(flags::in_range(0, 1))->capture_default_str()->group(precision_group);

  const std::string optimisation_group = "optimisation";
  flags::add_choice(app, "--loss-scaling", c.loss_scaling, loss_scaling_switches,
                    "dynamic loss scaling with GradScaler's rules (default on, off\nfor fp32)")->group(optimisation_group);
  app.add_option("--init-scale", c.init_scale, "initial loss scale")
      ->type_name("S")->check(flags::positive(std::numeric_limits<float>::max()))->capture_default_str()->group(optimisation_group);
  app.add_option("--growth-interval", c.growth_interval, "successful steps between scale growths (default one epoch)")
      ->type_name("N")->check(flags::whole(1, std::size_t{1} << 40))->group(optimisation_group);
  app.add_option("--epochs", c.epochs, "1 to 10000")->type_name("N")->check(flags::whole(1, 10000))->capture_default_str()->group(optimisation_group);
  app.add_option("--batch-size", c.batch_size, "1 to 60000")
      ->type_name("N")->check(flags::whole(1, 60000))->capture_default_str()->group(optimisation_group);
  app.add_option_function<double>("--lr", [&c](double v) { c.lr = v; },
                                  "peak learning rate of the cosine schedule (default 0.05 for\n"
                                  "the MLP, 0.02 for the CNN, whose head is sharper: at 0.05 it\n"
                                  "learns more slowly, docs/examples.md §7; 1e-3 with AdamW)")
      ->type_name("LR")->check(flags::positive())->group(optimisation_group);
  app.add_option("--momentum", c.momentum, "SGD momentum, in [0, 1]")
      ->type_name("M")->check(flags::in_range(0, 1))->capture_default_str()->group(optimisation_group);
  app.add_option("--weight-decay", c.weight_decay, "in [0, 1]")
      ->type_name("WD")->check(flags::in_range(0, 1))->capture_default_str()->group(optimisation_group);
  app.add_option("--seed", c.seed, "initialisation, data order, stochastic rounding and random\ndemotion order")
      ->type_name("N")->check(flags::whole(0, ~0ULL))->capture_default_str()->group(optimisation_group);
  app.add_option("--threads", c.threads, "threads that share the rounding of large tensors, 1 to 256\n(the layers' GEMMs run on the calling thread)")
      ->type_name("N")->check(flags::whole(1, 256))->capture_default_str()->group(optimisation_group);

  const std::string output_group = "output";
  app.add_option("--csv", c.csv, "write one row per epoch to PATH")->type_name("PATH")->group(output_group);
  app.add_option("--step-csv", c.step_csv,
                 "write one row per training step to PATH: batch loss, loss scale,\n"
                 "skipped or not, low-precision ratio, and the largest overflow\n"
                 "ratios of forward tensors in that step (the trajectory before a\n"
                 "divergence)")
      ->type_name("PATH")->group(output_group);
  app.add_flag("--quiet", c.quiet, "only the per-epoch lines")
      ->disable_flag_override()->multi_option_policy(CLI::MultiOptionPolicy::Throw)->group(output_group);

  examples::add_weight_flags(app, c.weights);
  examples::add_dynamic_flags(app, c.dynamic);
}

/// Unknown flags and stray arguments, which CLI11 leaves over.
void check_extras(const CLI::App& app) {
  for (const std::string& extra : app.remaining()) {
    if (extra.starts_with("-")) throw usage_error("unknown flag '" + extra.substr(0, extra.find('=')) + "'");
    throw usage_error("unexpected argument '" + extra + "'");
  }
}

/// The checks across flags, once all are read.
void finish_flags(const CLI::App& app, config& c) {
  check_extras(app);
  examples::finish_weight_flags(c.weights);
  const auto given = [&](const char* flag) { return app.get_option(flag)->count() > 0; };
  if ((c.weights.compute || c.weights.compute_block) && c.assignment != assignment_kind::fixed)
    throw usage_error("--format applies to --assignment fixed only");
  if (examples::dynamic_flag_given(app) && !is_dynamic(c.assignment))
    throw usage_error("--dc-* flags apply to --assignment qm-qe, qm-qe+gecko, bitwave and bitwave+gecko only");
  if (is_dynamic(c.assignment)) {
    if (c.loss_scaling.value_or(false)) throw usage_error("dynamic containers train with loss scaling off");
    c.loss_scaling = false;
    mt::dynamic_options& d = c.dynamic.controller;
    d.method = c.assignment <= assignment_kind::qm_qe_gecko ? mt::dynamic_method::quantum : mt::dynamic_method::bitwave;
    if (c.assignment == assignment_kind::qm_qe_gecko || c.assignment == assignment_kind::bitwave_gecko)
      d.gecko = c.dynamic.gecko_variant;
    d.quantum.seed = c.seed;
  }
  if ((given("--ratio") || given("--order")) && c.assignment != assignment_kind::ours)
    throw usage_error("--ratio and --order apply to --assignment ours only");
  if (given("--theta") && !c.promotion) throw usage_error("--theta has no effect with --promotion off");
}

using examples::site_hooks;
using examples::wired_graph;

data::image_dataset limited(data::image_dataset d, std::size_t limit) {
  if (limit == 0 || limit >= d.size()) return d;
  d.labels.resize(limit);
  d.pixels.resize(limit * d.image_numel());
  return d;
}

struct eval_result {
  double loss = 0, accuracy = 0;
};

template <class Hooks>  // site_hooks or examples::dynamic_container_hooks
eval_result evaluate(nn::sequential& net, const data::image_dataset& set, Hooks& hooks, std::size_t batch,
                     nn::parameter_source* weights) {
  hooks.set_counting(false);
  // The training batch size, so evaluation allocates no larger activations than training does.
  data::batch_loader loader(set, {.batch_size = batch, .shuffle = false});
  loader.start_epoch(0);
  nn::tensor x;
  std::vector<std::int32_t> y;
  nn::softmax_cross_entropy loss;
  double sum = 0;
  std::size_t correct = 0;
  for (std::size_t b = 0; b < loader.batches(); ++b) {
    loader.gather(b, x, y);
    sum += loss.forward(net.forward(x, hooks, nn::mode::eval, weights), y) * static_cast<double>(y.size());
    correct += loss.correct();
  }
  hooks.set_counting(true);
  const double n = static_cast<double>(set.size());
  return {sum / n, static_cast<double>(correct) / n};
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string csv_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

/// One row of --step-csv: the step's loss and scale (the scale the step's backward used), and the
/// three largest overflow ratios of enabled forward tensors in this step, largest first.
std::string step_row(const mt::graph& g, std::size_t epoch, std::uint64_t step, double batch_loss,
                    float scale, bool skipped) {
  std::vector<std::size_t> top;
  for (std::size_t s = 0; s < g.sites().size(); ++s)
    if (mt::is_forward(g.sites()[s].kind()) && g.sites()[s].enabled() && g.sites()[s].overflow_ratio() > 0) top.push_back(s);
  const auto ratio = [&](std::size_t s) { return g.sites()[s].overflow_ratio(); };
  const std::size_t n = std::min<std::size_t>(top.size(), 3);
  std::partial_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(n), top.end(),
                    [&](std::size_t a, std::size_t b) { return ratio(a) > ratio(b); });
  std::string top_text;
  for (std::size_t k = 0; k < n; ++k) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s=%.3g", g.sites()[top[k]].name().c_str(), ratio(top[k]));
    (top_text += k ? ";" : "") += buf;  // not `(k ? ";" : "") + std::string(buf)`: a GCC 12 -Wrestrict false positive
  }
  char row[256];
  std::snprintf(row, sizeof row, "%zu,%llu,%.6g,%g,%d,%.6f,%.6g,", epoch, static_cast<unsigned long long>(step), batch_loss,
                static_cast<double>(scale), skipped ? 1 : 0, mt::measure_footprint(g.sites()).low_ratio(),
                n ? ratio(top[0]) : 0.0);
  return row + csv_quote(top_text) + '\n';
}

/// The signal that asked the run to stop (SIGINT or SIGTERM), 0 while none did. A signal handler
/// can only set a flag of this type; the training loop reads it between steps.
volatile std::sig_atomic_t stop_signal = 0;
extern "C" void request_stop(int signal) { stop_signal = signal; }

/// The outputs, each created (with its header) before the data loads.
struct outputs {
  examples::output_file csv, step_csv, memory_csv, tensor_csv;
};

outputs open_outputs(const config& c) {
  outputs o;
  if (!c.csv.empty())
    o.csv = examples::output_file(
        c.csv, std::string("epoch,train_loss,train_acc,test_loss,test_acc,low_ratio,model_bits,promotions,promotions_total,"
                           "loss_scale,skipped_steps,lr,top_overflow,epoch_seconds,eval_seconds,low_ratio_start,low_ratio_end") +
                   (is_dynamic(c.assignment) ? examples::dynamic_container_hooks::csv_header() : "") + '\n');
  if (!c.step_csv.empty())
    o.step_csv = examples::output_file(c.step_csv, "epoch,step,loss,loss_scale,skipped,low_ratio,max_overflow,top_overflow\n");
  if (!c.weights.memory_csv.empty()) o.memory_csv = examples::output_file(c.weights.memory_csv, examples::memory_csv_header());
  if (!c.dynamic.tensor_csv.empty())
    o.tensor_csv = examples::output_file(c.dynamic.tensor_csv, examples::dynamic_container_hooks::tensor_csv_header());
  return o;
}

int run(const config& c) {
  const auto t_start = std::chrono::steady_clock::now();
  outputs out = open_outputs(c);
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  const data::image_dataset train_set = limited(data::load_fashion_mnist(data::split::train, c.data_dir), c.train_limit);
  const data::image_dataset test_set = limited(data::load_fashion_mnist(data::split::test, c.data_dir), c.test_limit);
  minifloat::storage::memory_ledger ledger;  // before every container it counts, so it outlives them

  nn::sequential net = c.model == "mlp" ? nn::make_mlp({.width = c.width, .seed = c.seed})
                                        : nn::make_cnn({.width = c.width, .seed = c.seed});
  net.track_memory(ledger);
  const nn::model_description desc = net.describe(c.batch_size);
  wired_graph wired = examples::describe(desc);
  mt::graph& g = wired.graph;
  const auto groups = mt::group_tensors(g);

  std::vector<std::size_t> demoted;
  switch (c.assignment) {
    case assignment_kind::fp32: mt::disable_rounding(g); break;
    case assignment_kind::all_high: mt::apply(g, mt::all_high(g)); break;
    case assignment_kind::uniform: mt::apply(g, mt::uniform(g)); break;
    case assignment_kind::op: mt::apply(g, mt::operator_based(g)); break;
    case assignment_kind::op_variant: mt::apply(g, mt::operator_based_variant(g)); break;
    case assignment_kind::qm_qe:
    case assignment_kind::qm_qe_gecko:
    case assignment_kind::bitwave:
    case assignment_kind::bitwave_gecko: mt::disable_rounding(g); break;  // the containers round instead
    case assignment_kind::ours: {
      const auto res = mt::demote_by_size(g, groups, c.ratio, c.order, c.seed);
      mt::apply(g, res.levels);
      demoted = res.groups_demoted;
      break;
    }
    case assignment_kind::fixed: {
      const mt::format_pair f = examples::fixed_formats(c.weights);
      for (mt::site& s : g.sites()) {
        s.set_formats(f);
        s.set_level(mt::precision::high);
      }
      break;
    }
  }
  for (mt::site& s : g.sites()) s.set_mode(c.mode);
  g.seed_sites(c.seed);

  data::batch_loader loader(train_set, {.batch_size = c.batch_size, .seed = c.seed});
  const std::size_t steps_per_epoch = loader.batches();
  const bool scaling = c.loss_scaling.value_or(c.assignment != assignment_kind::fp32);
  mt::loss_scaler scaler({c.init_scale, 2.0f, 0.5f,
                          static_cast<std::int64_t>(c.growth_interval ? c.growth_interval : steps_per_epoch), scaling});
  mt::overflow_promotion promo(c.theta);
  examples::weight_config wc = c.weights.config;
  wc.momentum = c.momentum;
  wc.weight_decay = c.weight_decay;
  wc.seed = c.seed;
  examples::weight_store weights(net, wc, scaler, &ledger);
  // Peaks count from here: the fp32 initialisation a low-only / low+k store has just replaced is
  // set-up, not training.
  ledger.reset_peaks();
  const double base_lr =
      c.lr.value_or(wc.optimizer == examples::optimizer_kind::adamw ? 1e-3 : c.model == "cnn" ? 0.02 : 0.05);
  const nn::cosine_schedule schedule{.base_lr = base_lr, .total = c.epochs * steps_per_epoch};
  site_hooks hooks(g, wired.site_of, c.threads);
  std::unique_ptr<examples::dynamic_container_hooks> dynamic;
  if (is_dynamic(c.assignment))
    dynamic = std::make_unique<examples::dynamic_container_hooks>(desc, c.dynamic.controller, std::move(out.tensor_csv));
  nn::rounding_hooks& active_hooks = dynamic ? static_cast<nn::rounding_hooks&>(*dynamic) : hooks;

  if (!c.quiet) {
    std::printf("train: %s width %g (%zu parameters), Fashion-MNIST %zu train / %zu test, batch %zu, %zu epochs, lr %g, GEMM %s\n",
                std::string(c.model).c_str(), c.width, net.parameter_count(), train_set.size(), test_set.size(), c.batch_size, c.epochs,
                base_lr, std::string(nn::name(nn::default_gemm_backend())).c_str());
    std::printf("assignment %s", std::string(name_of(c.assignment)).c_str());
    if (c.assignment == assignment_kind::ours)
      std::printf(" r=%g order=%s", c.ratio, std::string(name_of(c.order)).c_str());
    std::printf(", rounding %s, promotion %s", std::string(name_of(c.mode)).c_str(),
                c.promotion ? ("theta=" + format_number(c.theta)).c_str() : "off");
    std::printf(", loss scaling %s (init %g, growth interval %lld)\n", scaling ? "on" : "off",
                static_cast<double>(c.init_scale), static_cast<long long>(scaler.options().growth_interval));
    const auto total = mt::total_size(groups);
    std::printf("tensor groups (%zu elements at batch %zu):\n", static_cast<std::size_t>(total), c.batch_size);
    for (std::size_t k = 0; k < groups.size(); ++k) {
      const bool low = std::find(demoted.begin(), demoted.end(), k) != demoted.end();
      std::printf("  G%-2zu %-8s %10llu elements (%5.1f%%) %zu sites%s\n", k, groups[k].name.c_str(),
                  static_cast<unsigned long long>(groups[k].size), 100.0 * static_cast<double>(groups[k].size) / static_cast<double>(total),
                  groups[k].sites.size(), low ? "  demoted" : "");
    }
    std::string low_names;
    for (const mt::site& s : g.sites())
      if (s.is_low()) low_names += " " + s.name();
    std::printf("low tensors:%s\n", low_names.empty() ? " none" : low_names.c_str());
    std::printf("initial low-precision ratio %.4f\n", mt::measure_footprint(g.sites()).low_ratio());
    std::printf("weights %s\n", examples::describe(wc).c_str());
    if (dynamic) std::printf("dynamic containers: %s\n", dynamic->describe().c_str());
  }

  nn::softmax_cross_entropy loss;
  loss.track_memory(ledger);
  nn::tensor x;
  x.track_memory(ledger, minifloat::storage::memory_category::activations);
  std::vector<std::int32_t> y;
  std::uint64_t step = 0;
  for (std::size_t epoch = 0; epoch < c.epochs && stop_signal == 0; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    loader.start_epoch(epoch);
    mt::footprint_accumulator footprint;
    std::vector<double> max_overflow(g.sites().size(), 0.0);
    const std::size_t promotions_before = promo.log().size();
    // Low-precision ratio before the epoch's first step (epoch 1: the assignment as chosen) and
    // after its last: their difference is what promotion cost in memory during the epoch.
    const double low_ratio_start = mt::measure_footprint(g.sites()).low_ratio();
    if (dynamic) dynamic->begin_epoch(epoch, schedule(step));
    std::size_t skipped = 0, correct = 0, seen = 0;
    double loss_sum = 0;
    double lr = 0;
    for (std::size_t b = 0; b < steps_per_epoch; ++b, ++step) {
      if (stop_signal != 0) break;  // at a step boundary: every row written so far is whole
      loader.gather(b, x, y);
      g.begin_step(step);
      lr = schedule(step);
      weights.begin_step(lr);
      if (dynamic) dynamic->begin_step(step);
      // Forward: the weight store fills each `used` (master copy or decoded visible codes), the
      // model rounds it (P), then every output (Y); backward rounds every GY and GP and, fused,
      // hands each layer's gradients to the store. Loss scaling multiplies dLoss/dlogits. With
      // dynamic containers their hooks quantize P and Y instead and learn the bitlengths.
      const double batch_loss = loss.forward(net.forward(x, active_hooks, nn::mode::train, &weights), y);
      loss_sum += batch_loss * static_cast<double>(y.size());
      correct += loss.correct();
      seen += y.size();
      const float scale_used = scaler.scale();
      bool stepped = false;
      try {
        net.backward(loss.backward(scale_used), active_hooks, weights.sink());
        if (dynamic) dynamic->end_step(batch_loss);
        // Unscale, check, clip, update (unfused: all at once here; fused: ends the step).
        stepped = !weights.finish_step().overflow;
      } catch (const examples::unstorable_update& e) {
        throw std::runtime_error("step " + std::to_string(step) + " (epoch " + std::to_string(epoch + 1) + "), --visible " +
                                 examples::visible_name(c.weights.config) + ", " + e.what());
      }
      if (!stepped) ++skipped;
      scaler.update();
      if (c.promotion) promo.promote(g.sites(), step);
      footprint.add(mt::measure_footprint(g.sites()));
      for (std::size_t s = 0; s < g.sites().size(); ++s)
        max_overflow[s] = std::max(max_overflow[s], g.sites()[s].overflow_ratio());
      if (out.step_csv) out.step_csv.write(step_row(g, epoch + 1, step, batch_loss, scale_used, !stepped));
    }
    if (stop_signal != 0) break;  // the interrupted epoch gets no row: its steps are incomplete
    const double low_ratio_end = mt::measure_footprint(g.sites()).low_ratio();
    const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto t1 = std::chrono::steady_clock::now();
    if (dynamic) dynamic->end_epoch();
    const eval_result test = dynamic ? evaluate(net, test_set, *dynamic, c.batch_size, &weights)
                                     : evaluate(net, test_set, hooks, c.batch_size, &weights);
    const double eval_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();

    std::vector<std::size_t> top;
    for (std::size_t s = 0; s < g.sites().size(); ++s)
      if (mt::is_forward(g.sites()[s].kind()) && g.sites()[s].enabled() && max_overflow[s] > 0) top.push_back(s);
    std::sort(top.begin(), top.end(), [&](std::size_t a, std::size_t b) { return max_overflow[a] > max_overflow[b]; });
    std::string top_text, top_csv;
    for (std::size_t k = 0; k < std::min<std::size_t>(top.size(), 5); ++k) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s=%.3g", g.sites()[top[k]].name().c_str(), max_overflow[top[k]]);
      if (k < 3) (top_text += k ? " " : "") += buf;
      (top_csv += k ? ";" : "") += buf;
    }
    const double train_loss = loss_sum / static_cast<double>(seen);
    const double train_acc = static_cast<double>(correct) / static_cast<double>(seen);
    const std::size_t promoted = promo.log().size() - promotions_before;
    std::printf("epoch %3zu  loss %.4f  train %.4f  test %.4f  lowp %.4f  promoted %zu/%zu  scale %g skipped %zu  "
                "overflow [%s]  %.1fs+%.1fs\n",
                epoch + 1, train_loss, train_acc, test.accuracy, footprint.mean_low_ratio(), promoted, promo.log().size(),
                static_cast<double>(scaler.scale()), skipped, top_text.empty() ? "none" : top_text.c_str(), train_seconds,
                eval_seconds);
    if (dynamic) {
      std::printf("%s\n", dynamic->epoch_line().c_str());
      dynamic->write_tensor_rows(epoch + 1);
    }
    if (!c.quiet)
      for (std::size_t k = promotions_before; k < promo.log().size(); ++k)
        std::printf("  promoted %s at step %llu (overflow ratio %.4g)\n", promo.log()[k].site.c_str(),
                    static_cast<unsigned long long>(promo.log()[k].step), promo.log()[k].overflow_ratio);
    std::fflush(stdout);
    if (out.csv) {
      char row[512];
      std::snprintf(row, sizeof row, "%zu,%.6f,%.6f,%.6f,%.6f,%.6f,%.0f,%zu,%zu,%g,%zu,%.6g,", epoch + 1, train_loss,
                    train_acc, test.loss, test.accuracy, footprint.mean_low_ratio(), footprint.mean_total_bits(), promoted,
                    promo.log().size(), static_cast<double>(scaler.scale()), skipped, lr);
      out.csv.write(row + csv_quote(top_csv) + ',' + format_number(train_seconds) + ',' + format_number(eval_seconds) + ',' +
                    format_number(low_ratio_start) + ',' + format_number(low_ratio_end) +
                    (dynamic ? dynamic->csv_columns() : "") + '\n');
    }
  }
  std::fputs(examples::memory_table(ledger).c_str(), stdout);
  if (out.memory_csv)
    out.memory_csv.write(examples::memory_csv_row(std::string(name_of(c.assignment)) + ", " + examples::describe(wc), ledger));
  out.csv.close();
  out.step_csv.close();
  out.memory_csv.close();
  if (dynamic) dynamic->close_outputs();
  if (stop_signal != 0) {
    std::fprintf(stderr, "train: stopped by %s before step %llu; the CSVs hold every completed epoch and step\n",
                 stop_signal == SIGINT ? "SIGINT" : "SIGTERM", static_cast<unsigned long long>(step));
    return 128 + stop_signal;
  }
  if (!c.quiet)
    std::printf("done in %.1f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  config c;
  CLI::App app(description, "train");
  try {
    add_flags(app, c);
    app.parse(argc, argv);
    finish_flags(app, c);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // the help, on stdout, exit status 0
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "train: %s (see train --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {  // finish_weight_flags' checks across flags
    std::fprintf(stderr, "train: %s (see train --help)\n", e.what());
    return 2;
  } catch (const usage_error& e) {
    std::fprintf(stderr, "train: %s (see train --help)\n", e.what());
    return 2;
  }
  try {
    return run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train: %s\n", e.what());
    return 1;
  }
}
