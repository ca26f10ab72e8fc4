#include "weight_options.hpp"

#include <charconv>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include <minifloat/format_name.hpp>

#include "flag_parsing.hpp"

namespace examples {

namespace ms = minifloat::storage;

namespace {

CLI::ValidationError flag_error(std::string_view flag, const std::string& what) {
  return CLI::ValidationError(std::string(flag), what);
}

minifloat::format format_flag(std::string_view flag, std::string_view text) {
  try {
    return minifloat::parse_format(text);
  } catch (const std::invalid_argument& e) {
    throw flag_error(flag, std::string("expects bf16, fp16, e4m3, e5m2, fp32 or fp(e,m,b): ") + e.what());
  }
}

/// K of low+K or --extra-bits: a whole number >= 1; it and the other must agree.
void set_extra_bits(weight_flags& f, std::string_view flag, std::string_view text, std::string_view other) {
  int k = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), k);
  if (ec != std::errc{} || end != text.data() + text.size() || k < 1)
    throw flag_error(flag, "expects a whole number of extra bits >= 1, got '" + std::string(text) + "'");
  if (f.extra_given && k != f.config.extra_bits) throw flag_error(flag, "and " + std::string(other) + " disagree");
  f.config.extra_bits = k;
  f.extra_given = true;
}

constexpr flags::choices<ms::split_mode> split_modes[] = {{"truncate", ms::split_mode::truncate},
                                                           {"stochastic", ms::split_mode::stochastic}};
constexpr flags::choices<optimizer_kind> optimizers[] = {{"sgd", optimizer_kind::sgd}, {"adamw", optimizer_kind::adamw}};
constexpr flags::choices<overflow_policy> overflow_policies[] = {{"rollback", overflow_policy::rollback},
                                                                  {"partial", overflow_policy::partial}};

}  // namespace

void add_weight_flags(CLI::App& app, weight_flags& f) {
  weight_config& c = f.config;
  const std::string group(weight_group);
  app.add_option_function<std::string>(
         "--weights",
         [&f](const std::string& value) {
           weight_config& w = f.config;
           if (value == "fp32-master") w.mode = weight_mode::fp32_master;
           else if (value == "low-only") w.mode = weight_mode::low_only;
           else if (value == "low+k") w.mode = weight_mode::low_extra;
           else if (value.starts_with("low+")) {
             w.mode = weight_mode::low_extra;
             set_extra_bits(f, "--weights", std::string_view(value).substr(4), "--extra-bits");
           } else
             throw flag_error("--weights", "expects fp32-master, low-only, low+k or low+K, got '" + value + "'");
         },
         "fp32-master: fp32 weights, rounded to the compute copy each\n"
         "forward; low-only: only the visible low-precision codes, each\n"
         "update rounds to them; low+k: visible codes plus --extra-bits\n"
         "packed extra mantissa bits (low+8 sets k = 8). low-only and\n"
         "low+k hold no fp32 copy of the weights")
      ->type_name("fp32-master|low-only|low+k|low+K")->default_str("fp32-master")->group(group);
  app.add_option_function<std::string>(
         "--visible",
         [&f](const std::string& value) {
           weight_config& w = f.config;
           if (const auto b = minifloat::find_block_format(value)) {
             if (b->scaling != minifloat::block_scaling::e8m0)
               throw flag_error("--visible", value + ": its per-tensor scale comes from the amax of the whole updated "
                                "tensor, which the weight store, updating chunk by chunk without an fp32 copy, does "
                                "not have (docs/no-master-weights.md §7); use an MX format such as mxfp4");
             w.visible_blocks = b;
           } else {
             w.visible = format_flag("--visible", value);
             w.visible_blocks.reset();
           }
           f.visible_given = true;
         },
         "stored weight format: bf16, fp16, e4m3, e5m2 or fp(e,m,b); with\n"
         "low-only also an OCP MX block format: mxfp8-e4m3, mxfp8-e5m2,\n"
         "mxfp6-e3m2, mxfp6-e2m3, mxfp4 or mxint8 (blocks of 32 along each\n"
         "weight's rows, whole blocks re-quantized per update; not nvfp4,\n"
         "not low+k)")
      ->type_name("FMT")->default_str(visible_name(c))->group(group);
  app.add_option_function<std::string>(
         "--extra-bits", [&f](const std::string& value) { set_extra_bits(f, "--extra-bits", value, "--weights low+K"); },
         "low+k: extra bits per weight (default 23 - M of the visible\n"
         "format, +1 with --split stochastic: fp32's significand)")
      ->type_name("K")->group(group);
  flags::add_choice(app, "--split", c.split, split_modes,
                    "low+k: truncating split, or stochastic rounding of the visible\n"
                    "value with one un-round flag among the k bits; low-only: round\n"
                    "each update to nearest even or stochastically")
      ->group(group);
  flags::add_choice(app, "--optimizer", c.optimizer, optimizers,
                    "SGD with --momentum and L2 --weight-decay, or AdamW (decoupled\n"
                    "--weight-decay, default lr 1e-3)")
      ->group(group);
  app.add_option_function<std::string>(
         "--betas",
         [&c](const std::string& value) {
           const auto comma = value.find(',');
           double b[2] = {0, 0};
           const auto [end1, ec1] = std::from_chars(value.data(), value.data() + (comma == std::string::npos ? 0 : comma), b[0]);
           const auto [end2, ec2] =
               comma == std::string::npos ? std::from_chars_result{nullptr, std::errc::invalid_argument}
                                          : std::from_chars(value.data() + comma + 1, value.data() + value.size(), b[1]);
           if (ec1 != std::errc{} || ec2 != std::errc{} || end1 != value.data() + comma || end2 != value.data() + value.size())
             throw flag_error("--betas", "expects B1,B2, got '" + value + "'");
           if (!(b[0] > 0 && b[0] < 1 && b[1] > 0 && b[1] < 1))
             throw flag_error("--betas", "values must be in (0, 1), got " + value);
           c.beta1 = b[0];
           c.beta2 = b[1];
         },
         "AdamW moment decays, each in (0, 1)")
      ->type_name("B1,B2")->default_str(flags::detail::number_text(c.beta1) + "," + flags::detail::number_text(c.beta2))
      ->group(group);
  app.add_flag("--fused-update", c.fused,
               "update each layer inside the backward pass as soon as its\n"
               "gradients are final, then free them")
      ->disable_flag_override()->multi_option_policy(CLI::MultiOptionPolicy::Throw)->group(group);
  flags::add_choice(app, "--on-overflow", c.on_overflow, overflow_policies,
                    "fused: when a gradient overflows after some layers were updated,\n"
                    "rollback restores every updated layer from a journal (the same\n"
                    "result as skipping the step; the journal costs memory), partial\n"
                    "keeps the updates already made and skips the rest")
      ->group(group);
  const auto clip = [&](const char* flag, std::optional<float>& target, const char* help) {
    app.add_option_function<double>(flag, [&target](double v) { target = static_cast<float>(v); }, help)
        ->type_name("V")->check(flags::positive(std::numeric_limits<float>::max()))->group(group);
  };
  clip("--clip-value", c.clip.value, "clamp each unscaled gradient element to [-V, V]");
  clip("--clip-tensor-norm", c.clip.tensor_norm, "scale each parameter's gradient to L2 norm <= V");
  clip("--clip-global-norm", c.clip.global_norm, "scale all gradients to a joint L2 norm <= V (not with\n--fused-update)");
  app.add_option_function<std::string>(
         "--format",
         [&f](const std::string& value) {
           // Checked here, before any data loads: the sites round float to this format.
           if (const auto b = minifloat::find_block_format(value)) f.compute_block = b;
           else {
             f.compute = format_flag("--format", value);
             if (const std::string p = minifloat::source_problem<float>(*f.compute); !p.empty()) throw flag_error("--format", p);
           }
         },
         "--assignment fixed: the format of every Y, GY, P and GP (default:\n"
         "the visible format when 16 bits or wider, else fp16; fp16 with\n"
         "fp32-master); also a block format: mxfp8-e4m3, mxfp8-e5m2,\n"
         "mxfp6-e3m2, mxfp6-e2m3, mxfp4, mxint8 or nvfp4 (docs/formats.md §8)")
      ->type_name("FMT")->group(group);
  app.add_option("--memory-csv", f.memory_csv, "write the measured peak memory (total and by category) to PATH")
      ->type_name("PATH")->group(group);
  // Which flags were given, for finish_weight_flags' checks across flags.
  app.get_option("--split")->each([&f](const std::string&) { f.split_given = true; });
  app.get_option("--on-overflow")->each([&f](const std::string&) { f.policy_given = true; });
  app.get_option("--betas")->each([&f](const std::string&) { f.adam_given = true; });
}

void finish_weight_flags(weight_flags& f) {
  weight_config& c = f.config;
  if (c.mode == weight_mode::fp32_master && (f.visible_given || f.split_given))
    throw std::invalid_argument("--visible and --split apply to --weights low-only and low+k only");
  if (c.mode == weight_mode::low_extra && c.visible_blocks)
    throw std::invalid_argument("--weights low+k cannot take a block format as --visible (" + minifloat::to_string(*c.visible_blocks) +
                                "): the extra bits are the remainder below a fixed per-element grid, and a block's "
                                "grid moves whenever its scale does (docs/no-master-weights.md §7); use --weights low-only");
  if (c.mode != weight_mode::low_extra && f.extra_given)
    throw std::invalid_argument("--extra-bits applies to --weights low+k only");
  if (c.mode == weight_mode::low_extra && !f.extra_given)
    c.extra_bits = 23 - c.visible.mantissa_bits + (c.split == ms::split_mode::stochastic ? 1 : 0);
  if (f.policy_given && !c.fused) throw std::invalid_argument("--on-overflow applies to --fused-update only");
  if (c.fused && c.clip.global_norm)
    throw std::invalid_argument("--clip-global-norm needs every gradient at once, which --fused-update never holds; "
                                "use --clip-value or --clip-tensor-norm");
  if (f.adam_given && c.optimizer != optimizer_kind::adamw) throw std::invalid_argument("--betas applies to --optimizer adamw only");
  c.validate();
}

minifloat::training::format_pair fixed_formats(const weight_flags& f) {
  if (f.compute_block) return minifloat::training::format_pair::blocks(*f.compute_block, *f.compute_block);
  const minifloat::format g = f.compute.value_or(default_compute_format(f.config));
  return {g, g};
}

minifloat::format default_compute_format(const weight_config& c) {
  if (c.mode != weight_mode::fp32_master && !c.visible_blocks && c.visible.bit_width() >= 16) return c.visible;
  return minifloat::binary16;
}

std::string visible_name(const weight_config& c) {
  if (c.visible_blocks) return minifloat::to_string(*c.visible_blocks);
  const minifloat::format& f = c.visible;
  if (f == minifloat::bfloat16) return "bf16";
  if (f == minifloat::binary16) return "fp16";
  if (f == minifloat::e4m3) return "e4m3";
  if (f == minifloat::e5m2) return "e5m2";
  if (f == minifloat::binary32) return "fp32";
  return minifloat::to_string(f);
}

std::string describe(const weight_config& c) {
  std::string s;
  switch (c.mode) {
    case weight_mode::fp32_master: s = "fp32-master"; break;
    case weight_mode::low_only: s = "low-only " + visible_name(c); break;
    case weight_mode::low_extra: s = "low+" + std::to_string(c.extra_bits) + " " + visible_name(c); break;
  }
  if (c.mode != weight_mode::fp32_master) s += c.split == ms::split_mode::stochastic ? " stochastic" : " truncate";
  s += c.optimizer == optimizer_kind::sgd ? ", sgd" : ", adamw";
  if (c.fused) s += c.on_overflow == overflow_policy::rollback ? ", fused (rollback)" : ", fused (partial)";
  return s;
}

std::string memory_table(const ms::memory_ledger& ledger) {
  std::string out = "peak memory " + std::to_string(ledger.peak_total()) + " bytes; at that peak:\n";
  char line[160];
  for (std::size_t i = 0; i < ms::memory_category_count; ++i) {
    const auto cat = static_cast<ms::memory_category>(i);
    std::snprintf(line, sizeof line, "  %-21s %12zu bytes (own peak %zu)\n", std::string(ms::name(cat)).c_str(),
                  ledger.breakdown_at_peak()[i], ledger.peak(cat));
    out += line;
  }
  return out;
}

namespace {
std::string category_columns(std::string_view suffix) {
  std::string out;
  for (std::size_t i = 0; i < ms::memory_category_count; ++i) {
    out += ',';
    out += ms::name(static_cast<ms::memory_category>(i));
    out += suffix;
  }
  return out;
}
}  // namespace

std::string memory_csv_header() { return "run,peak_total" + category_columns("_at_peak") + category_columns("_peak") + "\n"; }

std::string memory_csv_row(const std::string& run, const ms::memory_ledger& ledger) {
  std::string r = "\"" + run + "\"," + std::to_string(ledger.peak_total());
  for (std::size_t i = 0; i < ms::memory_category_count; ++i) {
    r += ',';
    r += std::to_string(ledger.breakdown_at_peak()[i]);
  }
  for (std::size_t i = 0; i < ms::memory_category_count; ++i) {
    r += ',';
    r += std::to_string(ledger.peak(static_cast<ms::memory_category>(i)));
  }
  return r + "\n";
}

}  // namespace examples
