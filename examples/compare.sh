#!/bin/bash
# compare.sh — the demo: a short comparison of precision assignments on Fashion-MNIST with the
# example trainer, then a table of test accuracy against the low-precision ratio.
#
#   examples/compare.sh [-b BUILD_DIR] [-o OUT_DIR] [-e EPOCHS] [-m mlp|cnn] [-j JOBS] [-s 'SEED ...']
#                       [-x 'EXTRA TRAIN FLAGS']
#
# Runs fp32, uniform, operator-based (op), its variant (op-variant) and the paper's size-ordered
# demotion ("ours") at r = 0.25, 0.5, 0.9 (the MLP has four tensor groups, so 0.75 would
# demote the same groups as 0.5), each with `train --csv`, at most JOBS at a time, and
# prints examples/summarize_runs.sh's table. It prints a line as each run starts and as it ends
# (with its test accuracy and time), so a slow machine shows progress. Defaults: the MLP, 3 epochs, seed 1, 2 jobs — about
# 2 minutes on a 2-core machine (docs/results.md). The CSVs stay in OUT_DIR (default
# ./compare-out); examples/plot_tradeoff.sh OUT_DIR out.png draws them. -x passes flags to every
# run (the ctest smoke test uses -x '--train-limit 512 --test-limit 256').
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=compare-out
epochs=3
model=mlp
jobs=2
seeds="1"
extra=""
# The options and the trainer (BUILD_DIR/examples/train, else the newest build directory under
# the checkout that has one).
# shellcheck source=examples/common_args.sh
. "$here/common_args.sh"
parse_args "b:o:e:m:j:s:x:h" 2,14 "[-b BUILD_DIR] [-o OUT_DIR] [-e EPOCHS] [-m mlp|cnn] [-j JOBS] [-s 'SEED ...'] [-x 'TRAIN FLAGS']" "$@"
mkdir -p "$out"

configs=(
  "fp32|--assignment fp32"
  "uniform|--assignment uniform"
  "op|--assignment op"
  "op-variant|--assignment op-variant"
  "ours-r0.25-decreasing|--assignment ours --ratio 0.25"
  "ours-r0.5-decreasing|--assignment ours --ratio 0.5"
  "ours-r0.9-decreasing|--assignment ours --ratio 0.9"
)

total=$(( ${#configs[@]} * $(echo $seeds | wc -w) ))
echo "compare: $model, $epochs epochs, seeds $seeds, $jobs jobs at a time ($total runs), trainer $train, CSVs in $out"
start=$(date +%s)
running=0
started=0
for seed in $seeds; do
  for entry in "${configs[@]}"; do
    name=${entry%%|*}
    flags=${entry#*|}
    if [ "$running" -ge "$jobs" ]; then
      wait -n
      running=$((running - 1))
    fi
    started=$((started + 1))
    echo "  [$started/$total] $name seed $seed: started ($(( $(date +%s) - start )) s)"
    (
      run_start=$(date +%s)
      # shellcheck disable=SC2086  # flags and extra are lists of words
      nice "$train" --quiet --model "$model" --epochs "$epochs" --seed "$seed" $flags $extra \
        --csv "$out/$name-s$seed.csv" > "$out/$name-s$seed.log" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then
        echo "  $name seed $seed: done in $(( $(date +%s) - run_start )) s, test accuracy $(tail -n 1 "$out/$name-s$seed.csv" | cut -d, -f5)"
      else
        echo "  $name seed $seed: FAILED (exit $rc), see $out/$name-s$seed.log"
      fi
      exit $rc
    ) &
    running=$((running + 1))
  done
done
status=0
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
if [ $status -ne 0 ]; then
  echo "$0: a training run failed; see the .log files in $out" >&2
  exit 1
fi
echo "done in $(( $(date +%s) - start )) s"
echo
"$here/summarize_runs.sh" "$out"
echo
if [ "$(echo $seeds | wc -w)" -lt 3 ]; then
  echo "Note: $(echo $seeds | wc -w) seed(s) per configuration. Seed-to-seed differences of this trainer reach half a point"
  echo "of accuracy and more, so differences of a few tenths here are noise, not a ranking: run -s '1 2 3 4 5'"
  echo "for means with min–max ranges."
fi
echo "low-precision ratio: share of the tensors' bits in the 8-bit formats, averaged over the epochs (higher = less memory);"
echo "memory: model aggregate over the all-high (16-bit) assignment's. Plot: examples/plot_tradeoff.sh $out tradeoff.png"
