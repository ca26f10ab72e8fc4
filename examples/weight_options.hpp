// weight_options.hpp — the example trainer's command-line block for weight storage, optimizer,
// fused update, gradient clipping, the compute format of `--assignment fixed` and the memory
// report (extra-mantissa-bits paper §3.1, §3.2, §4.1; docs/no-master-weights.md). Kept apart
// from train.cpp, which only hands its CLI11 app to add_weight_flags.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>
#include <minifloat/block.hpp>
#include <minifloat/format.hpp>
#include <minifloat/training/site.hpp>
#include <minifloat/storage/memory_ledger.hpp>

#include "weight_storage.hpp"

namespace examples {

struct weight_flags {
  weight_config config;
  std::optional<minifloat::format> compute;  ///< --format (only with --assignment fixed)
  std::optional<minifloat::block_format> compute_block;  ///< --format given a block format (mxfp4, nvfp4, …)
  std::string memory_csv;
  // Which flags were given, for the checks across flags.
  bool visible_given = false, extra_given = false, split_given = false, policy_given = false;
  bool adam_given = false;
};

/// The help group of these flags.
inline constexpr std::string_view weight_group = "weights and update (docs/no-master-weights.md)";
/// Declares these flags on `app`, each writing its part of `f`; a bad value is a CLI11 error
/// naming the flag.
void add_weight_flags(CLI::App& app, weight_flags& f);
/// The checks across flags, after all are read (throws std::invalid_argument).
void finish_weight_flags(weight_flags& f);

/// The compute format of `--assignment fixed` when --format is not given: the visible format
/// when it is 16 bits or wider, else binary16 (the paper emulated fp8 on fp16); binary16 with
/// an fp32 master copy (mixed precision).
minifloat::format default_compute_format(const weight_config& c);

/// The formats every site gets under `--assignment fixed`: --format's block format or format,
/// else default_compute_format.
minifloat::training::format_pair fixed_formats(const weight_flags& f);

/// The stored weight format's short name: bf16, fp16, e4m3, e5m2, mxfp4, ..., or its full name.
std::string visible_name(const weight_config& c);

/// E.g. "low+8 fp16 truncate sgd fused(rollback)".
std::string describe(const weight_config& c);

/// The memory report: the peak total and the breakdown at that peak, one line per category.
std::string memory_table(const minifloat::storage::memory_ledger& ledger);
/// --memory-csv: a header and one row.
std::string memory_csv_header();
std::string memory_csv_row(const std::string& run, const minifloat::storage::memory_ledger& ledger);

}  // namespace examples
