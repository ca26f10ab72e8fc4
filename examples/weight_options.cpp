#include "weight_options.hpp"

#include <cstdio>
#include <stdexcept>

#include <minifloat/format_name.hpp>

#include "flag_parsing.hpp"

namespace examples {

namespace ms = minifloat::storage;

const std::string_view weight_help = R"(
weights and update (docs/no-master-weights.md)
  --weights fp32-master|low-only|low+k|low+K
                             fp32-master: fp32 weights, rounded to the compute copy each
                             forward (default); low-only: only the visible low-precision
                             codes, each update rounds to them; low+k: visible codes plus
                             --extra-bits packed extra mantissa bits (low+8 sets k = 8).
                             low-only and low+k hold no fp32 copy of the weights.
  --visible FMT              stored weight format: bf16, fp16, e4m3, e5m2 or fp(e,m,b)
                             (default bf16); with low-only also an OCP MX block format:
                             mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2, mxfp6-e2m3, mxfp4 or
                             mxint8 (blocks of 32 along each weight's rows, whole blocks
                             re-quantized per update; not nvfp4, not low+k)
  --extra-bits K             low+k: extra bits per weight (default 23 - M of the visible
                             format, +1 with --split stochastic: fp32's significand)
  --split truncate|stochastic
                             low+k: truncating split, or stochastic rounding of the visible
                             value with one un-round flag among the k bits; low-only: round
                             each update to nearest even or stochastically (default truncate)
  --optimizer sgd|adamw      SGD with --momentum and L2 --weight-decay, or AdamW (decoupled
                             --weight-decay, default lr 1e-3) (default sgd)
  --betas B1,B2              AdamW moment decays, each in (0, 1) (default 0.9,0.999)
  --fused-update             update each layer inside the backward pass as soon as its
                             gradients are final, then free them
  --on-overflow rollback|partial
                             fused: when a gradient overflows after some layers were updated,
                             rollback restores every updated layer from a journal (the same
                             result as skipping the step; the journal costs memory), partial
                             keeps the updates already made and skips the rest (default rollback)
  --clip-value V             clamp each unscaled gradient element to [-V, V]
  --clip-tensor-norm N       scale each parameter's gradient to L2 norm <= N
  --clip-global-norm N       scale all gradients to a joint L2 norm <= N (not with --fused-update)
  --format FMT               --assignment fixed: the format of every Y, GY, P and GP (default:
                             the visible format when 16 bits or wider, else fp16; fp16 with
                             fp32-master); also a block format: mxfp8-e4m3, mxfp8-e5m2,
                             mxfp6-e3m2, mxfp6-e2m3, mxfp4, mxint8 or nvfp4 (docs/formats.md §8)
  --memory-csv PATH          write the measured peak memory (total and by category) to PATH

)";

namespace {

std::invalid_argument flag_error(std::string_view flag, const std::string& what) {
  return std::invalid_argument(std::string(flag) + " " + what);
}

minifloat::format format_flag(std::string_view flag, std::string_view text) {
  try {
    return minifloat::parse_format(text);
  } catch (const std::invalid_argument& e) {
    throw flag_error(flag, std::string("expects bf16, fp16, e4m3, e5m2, fp32 or fp(e,m,b): ") + e.what());
  }
}

}  // namespace

bool parse_weight_flag(weight_flags& f, std::string_view flag, std::string_view value) {
  weight_config& c = f.config;
  if (flag == "--fused-update") {
    if (!value.empty()) throw flag_error(flag, "takes no value");
    c.fused = true;
  }
  else if (flag == "--weights") {
    if (value == "fp32-master") c.mode = weight_mode::fp32_master;
    else if (value == "low-only") c.mode = weight_mode::low_only;
    else if (value == "low+k") c.mode = weight_mode::low_extra;
    else if (value.starts_with("low+")) {
      c.mode = weight_mode::low_extra;
      const int k = flags::at_least(flag, value.substr(4), 1);
      if (f.extra_given && k != c.extra_bits) throw flag_error(flag, "and --extra-bits disagree");
      c.extra_bits = k;
      f.extra_given = true;
    } else
      throw flag_error(flag, "expects fp32-master, low-only, low+k or low+K, got '" + std::string(value) + "'");
  } else if (flag == "--visible") {
    if (const auto b = minifloat::find_block_format(value)) {
      if (b->scaling != minifloat::block_scaling::e8m0)
        throw flag_error(flag, std::string(value) + ": its per-tensor scale comes from the amax of the whole updated "
                                   "tensor, which the weight store, updating chunk by chunk without an fp32 copy, does "
                                   "not have (docs/no-master-weights.md §7); use an MX format such as mxfp4");
      c.visible_blocks = b;
    } else {
      c.visible = format_flag(flag, value);
      c.visible_blocks.reset();
    }
    f.visible_given = true;
  } else if (flag == "--extra-bits") {
    const int k = flags::at_least(flag, value, 1);
    if (f.extra_given && k != c.extra_bits) throw flag_error(flag, "and --weights low+K disagree");
    c.extra_bits = k;
    f.extra_given = true;
  } else if (flag == "--split") {
    if (value == "truncate") c.split = ms::split_mode::truncate;
    else if (value == "stochastic") c.split = ms::split_mode::stochastic;
    else throw flag_error(flag, "expects truncate or stochastic, got '" + std::string(value) + "'");
    f.split_given = true;
  } else if (flag == "--optimizer") {
    if (value == "sgd") c.optimizer = optimizer_kind::sgd;
    else if (value == "adamw") c.optimizer = optimizer_kind::adamw;
    else throw flag_error(flag, "expects sgd or adamw, got '" + std::string(value) + "'");
  } else if (flag == "--betas") {
    const auto comma = value.find(',');
    if (comma == std::string_view::npos) throw flag_error(flag, "expects B1,B2");
    c.beta1 = flags::positive(flag, value.substr(0, comma));
    c.beta2 = flags::positive(flag, value.substr(comma + 1));
    if (c.beta1 >= 1 || c.beta2 >= 1) throw flag_error(flag, "values must be below 1");
    f.adam_given = true;
  } else if (flag == "--on-overflow") {
    if (value == "rollback") c.on_overflow = overflow_policy::rollback;
    else if (value == "partial") c.on_overflow = overflow_policy::partial;
    else throw flag_error(flag, "expects rollback or partial, got '" + std::string(value) + "'");
    f.policy_given = true;
  } else if (flag == "--clip-value") c.clip.value = static_cast<float>(flags::positive(flag, value));
  else if (flag == "--clip-tensor-norm") c.clip.tensor_norm = static_cast<float>(flags::positive(flag, value));
  else if (flag == "--clip-global-norm") c.clip.global_norm = static_cast<float>(flags::positive(flag, value));
  else if (flag == "--format") {
    // Checked here, before any data loads: the sites round float to this format.
    if (const auto b = minifloat::find_block_format(value)) f.compute_block = b;
    else {
      f.compute = format_flag(flag, value);
      if (const std::string p = minifloat::source_problem<float>(*f.compute); !p.empty()) throw flag_error(flag, p);
    }
  }
  else if (flag == "--memory-csv") f.memory_csv = value;
  else return false;
  return true;
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
