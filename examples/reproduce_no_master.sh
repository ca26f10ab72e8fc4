#!/bin/bash
# reproduce_no_master.sh — the extra-mantissa-bits paper's Table 3 rows on the example CNN
# (docs/results.md, "No fp32 master copy"; docs/no-master-weights.md).
#
#   examples/reproduce_no_master.sh [-b BUILD_DIR] [-o OUT_DIR] [-j JOBS] [-e EPOCHS] [-s "SEEDS"] [-x "EXTRA FLAGS"] [-n] [PART ...]
#
# PARTs (default: table3 fused summary):
#   table3   CNN width 0.25, EPOCHS (default 3) epochs, SEEDS (default 1–8), SGD momentum:
#            fp32, fp32-master mixed precision (compute fp16), fp16, fp16+8, fp16+13 stochastic,
#            bf16, bf16+8, bf16+16, fp8 e5m2, fp8 e4m3, fp8+4 and fp8+8 (e5m2 visible); every
#            low-precision row computes in --assignment fixed with its default format
#                                                                → OUT/no-master/table3/
#   fused    the same CNN, seed 1: fp16+8, bf16+16 and fp32-master mixed precision with
#            --fused-update (rollback and partial); and the MLP (width 1, 1 epoch, seed 1),
#            where the weights rather than the activations dominate memory: fp32, fp16,
#            fp16+8, fp8+8, bf16+16 and mixed precision, the last two also fused
#                                                                → OUT/no-master/fused/
#   summary  docs/results.md from every run under OUT (examples/results_cpp.py; OUT/results.md
#            when OUT is not the checkout's results/cpp)
# Each run writes NAME-sSEED.csv (per epoch), NAME-sSEED.mem.csv (measured peak memory), .log and
# .json (its record: examples/run_record.py); a finished run with its record is skipped, so an
# interrupted reproduction resumes. JOBS (default 2) run at a time, under nice: the memory is
# the trainer's own ledger, not the process's, so parallel runs do not change it (their seconds
# per epoch are a shared machine's). -n lists the runs without running them.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=results/cpp
jobs=2
epochs=3
# Claims are decided on paired per-seed differences (docs/results.md): 8 seeds.
seeds="1 2 3 4 5 6 7 8"
extra=""
# shellcheck source=examples/common_args.sh
. "$here/common_args.sh"
parse_args "b:o:j:e:s:x:nh" 2,24 "[-b BUILD_DIR] [-o OUT_DIR] [-j JOBS] [-e EPOCHS] [-s SEEDS] [-x FLAGS] [-n] [table3|fused|summary ...]" "$@"
shift "$args_parsed"
parts=${*:-table3 fused summary}
# shellcheck source=examples/job_queue.sh
. "$here/job_queue.sh"

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

run() {  # DIR NAME SEED EPOCHS MODEL_FLAGS FLAGS
  local stem=$1/$2-s$3
  # shellcheck disable=SC2086  # flag lists split on purpose
  launch "$stem" "$4" $5 --epochs "$4" --seed "$3" --csv "$stem.csv" --memory-csv "$stem.mem.csv" $6 $extra
}

for part in $parts; do
  case $part in
    table3)
      for seed in $seeds; do
        for row in "${table3_rows[@]}"; do
          run "$out/no-master/table3" "${row%%|*}" "$seed" "$epochs" "--model cnn --width 0.25" "${row#*|}"
        done
      done ;;
    fused)
      for row in "${fused_rows[@]}"; do
        run "$out/no-master/fused" "${row%%|*}" 1 "$epochs" "--model cnn --width 0.25" "${row#*|}"
      done
      for row in "${mlp_rows[@]}"; do
        run "$out/no-master/fused" "${row%%|*}" 1 1 "--model mlp" "${row#*|}"
      done ;;
    summary)
      [ "$dry_run" = 1 ] && continue
      queue_finish
      doc=$out/results.md
      if [ "$(cd "$out" 2>/dev/null && pwd)" = "$(cd "$here/.." && pwd)/results/cpp" ]; then doc=$here/../docs/results.md; fi
      python3 "$here/results_cpp.py" --data "$out" --write "$doc"
      echo "wrote $doc" ;;
    *) echo "$0: unknown part '$part'" >&2; exit 2 ;;
  esac
done
[ "$dry_run" = 1 ] || queue_finish
