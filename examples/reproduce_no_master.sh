#!/bin/bash
# reproduce_no_master.sh — the extra-mantissa-bits paper's Table 3 rows on the example CNN
# (docs/results.md, "No fp32 master copy"; docs/no-master-weights.md), then its table.
#
#   examples/reproduce_no_master.sh [-b BUILD_DIR] [-o OUT_DIR] [-e EPOCHS] [-s "SEEDS"] [-x "EXTRA FLAGS"] [PART ...]
#
# PARTs (default: table3 fused summary):
#   table3   CNN width 0.25, EPOCHS (default 3) epochs, SEEDS (default "1 2 3"), SGD momentum:
#            fp32, fp32-master mixed precision (compute fp16), fp16, fp16+8, fp16+13 stochastic,
#            bf16, bf16+8, bf16+16, fp8 e5m2, fp8 e4m3, fp8+4 and fp8+8 (e5m2 visible); every
#            low-precision row computes in --assignment fixed with its default format
#   fused    the same CNN, seed 1: fp16+8, bf16+16 and fp32-master mixed precision with
#            --fused-update (rollback and partial); and the MLP (width 1, 1 epoch, seed 1),
#            where the weights rather than the activations dominate memory: fp32, fp16,
#            fp16+8, fp8+8, bf16+16 and mixed precision, the last two also fused
#   summary  OUT/table3.md and OUT/fused.md from the CSVs
# Each run writes NAME-sSEED.csv (per epoch), NAME-sSEED.mem.csv (measured peak memory) and
# .log; a run whose memory CSV exists is skipped, so an interrupted reproduction resumes. Runs
# go one at a time under nice (the machine is shared).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=results-no-master
epochs=3
seeds="1 2 3"
extra=""
# shellcheck source=examples/common_args.sh
. "$here/common_args.sh"
parse_args "b:o:e:s:x:h" 2,20 "[-b BUILD_DIR] [-o OUT_DIR] [-e EPOCHS] [-s SEEDS] [-x FLAGS] [table3|fused|summary ...]" "$@"
shift "$args_parsed"
parts=${*:-table3 fused summary}
mkdir -p "$out"

# NAME|FLAGS
table3_rows=(
  "fp32|--assignment fp32"
  "fp32-master-amp|--assignment fixed --format fp16"
  "fp16|--assignment fixed --weights low-only --visible fp16"
  "fp16+8|--assignment fixed --weights low+8 --visible fp16"
  "fp16+13-stochastic|--assignment fixed --weights low+13 --visible fp16 --split stochastic"
  "bf16|--assignment fixed --weights low-only --visible bf16"
  "bf16+8|--assignment fixed --weights low+8 --visible bf16"
  "bf16+16|--assignment fixed --weights low+16 --visible bf16"
  "fp8-e5m2|--assignment fixed --weights low-only --visible e5m2"
  "fp8-e4m3|--assignment fixed --weights low-only --visible e4m3"
  "fp8+4|--assignment fixed --weights low+4 --visible e5m2"
  "fp8+8|--assignment fixed --weights low+8 --visible e5m2"
)
fused_rows=(
  "fp32-master-amp-fused|--assignment fixed --format fp16 --fused-update"
  "fp16+8-fused|--assignment fixed --weights low+8 --visible fp16 --fused-update"
  "fp16+8-fused-partial|--assignment fixed --weights low+8 --visible fp16 --fused-update --on-overflow partial"
  "bf16+16-fused|--assignment fixed --weights low+16 --visible bf16 --fused-update"
  "bf16+16-fused-partial|--assignment fixed --weights low+16 --visible bf16 --fused-update --on-overflow partial"
)
mlp_rows=(
  "mlp-fp32|--assignment fp32"
  "mlp-fp16|--assignment fixed --weights low-only --visible fp16"
  "mlp-fp16+8|--assignment fixed --weights low+8 --visible fp16"
  "mlp-fp8+8|--assignment fixed --weights low+8 --visible e5m2"
  "mlp-bf16+16|--assignment fixed --weights low+16 --visible bf16"
  "mlp-bf16+16-fused|--assignment fixed --weights low+16 --visible bf16 --fused-update"
  "mlp-bf16+16-fused-partial|--assignment fixed --weights low+16 --visible bf16 --fused-update --on-overflow partial"
  "mlp-fp32-master-amp|--assignment fixed --format fp16"
  "mlp-fp32-master-amp-fused|--assignment fixed --format fp16 --fused-update"
)

run() {  # DIR NAME SEED MODEL_FLAGS FLAGS
  local stem=$1/$2-s$3
  [ -s "$stem.mem.csv" ] && return 0
  # shellcheck disable=SC2086  # flag lists split on purpose
  nice "$train" $4 --seed "$3" --csv "$stem.csv" --memory-csv "$stem.mem.csv" $5 $extra >"$stem.log" 2>&1 ||
    { echo "$0: $2 seed $3 failed, see $stem.log" >&2; return 1; }
}

for part in $parts; do
  case $part in
    table3)
      mkdir -p "$out/table3"
      for seed in $seeds; do
        for row in "${table3_rows[@]}"; do
          run "$out/table3" "${row%%|*}" "$seed" "--model cnn --width 0.25 --epochs $epochs" "${row#*|}"
        done
      done ;;
    fused)
      mkdir -p "$out/fused"
      for row in "${fused_rows[@]}"; do
        run "$out/fused" "${row%%|*}" 1 "--model cnn --width 0.25 --epochs $epochs" "${row#*|}"
      done
      for row in "${mlp_rows[@]}"; do
        run "$out/fused" "${row%%|*}" 1 "--model mlp --epochs 1" "${row#*|}"
      done ;;
    summary)
      python3 "$here/summarize_no_master.py" "$out/table3" >"$out/table3.md"
      python3 "$here/summarize_no_master.py" "$out/fused" >"$out/fused.md"
      cat "$out/table3.md" "$out/fused.md" ;;
    *) echo "$0: unknown part '$part'" >&2; exit 2 ;;
  esac
done
