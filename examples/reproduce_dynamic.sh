#!/bin/bash
# reproduce_dynamic.sh — the training runs behind docs/results.md §"Dynamic containers", then its
# tables (OUT/dynamic.md) and the bitlength plots (OUT/bitlengths-*.png).
#
#   examples/reproduce_dynamic.sh [-b BUILD_DIR] [-o OUT_DIR] [-j JOBS] [PART ...]
#
# PARTs (default: mlp cnn summary):
#   mlp      MLP 784-512-512-10, 8 epochs, seeds 1–3: fp32, qm-qe+gecko, bitwave+gecko  → OUT/mlp/
#   cnn      CNN width 0.25 (8/16 channels), 6 epochs, seeds 1–3: the same three        → OUT/cnn/
#   gamma    MLP, 8 epochs, seeds 1–3: qm-qe+gecko with gamma_m = gamma_e = 0.01 and 0.03 → OUT/mlp/
#   linearised  MLP, 8 epochs, seeds 1–3: qm-qe+gecko with the linearised exponent gradient
#            (eqs. 9–10)                                                                → OUT/mlp/
#   improved MLP, 8 epochs, seeds 1–3: bitwave+gecko counting our improved Gecko variant
#            (training identical to bitwave+gecko; only the +G sizes differ)            → OUT/mlp/
#   summary  the Table-1-style tables, per-tensor bitlengths and the plots
# Every run writes CONFIG-sSEED.csv (per epoch, with the containers' columns), CONFIG-sSEED.log
# and, for the dynamic runs, CONFIG-sSEED.tensors.csv (per tensor per epoch). A run whose CSV
# already has all its epochs is skipped. JOBS (default 2) run at a time, under nice.
# One qm-qe+gecko run yields every QM/QE column of Table 1 and one bitwave+gecko run every BW
# column (training is the same with or without +gecko: Gecko is lossless and only counted).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=results-dynamic
jobs=2
# shellcheck source=examples/common_args.sh
. "$here/common_args.sh"
parse_args "b:o:j:h" 2,22 "[-b BUILD_DIR] [-o OUT_DIR] [-j JOBS] [mlp|cnn|gamma|linearised|improved|summary ...]" "$@"
shift "$args_parsed"
parts=${*:-mlp cnn summary}

# shellcheck source=examples/job_queue.sh
. "$here/job_queue.sh"
seeds="1 2 3"

# run DIR NAME SEED EPOCHS FLAGS...: one training run in the background, at most $jobs at a time.
run() {
  local dir=$1 name=$2 seed=$3 epochs=$4
  shift 4
  mkdir -p "$out/$dir"
  local base=$out/$dir/$name-s$seed
  if run_finished "$base.csv" "$epochs"; then return 0; fi
  queue_slot
  local extra=()
  case $name in fp32*) ;; *) extra=(--dc-tensor-csv "$base.tensors.csv") ;; esac
  echo "  $dir/$name seed $seed: train $* --epochs $epochs --seed $seed"
  nice "$train" --quiet --epochs "$epochs" --seed "$seed" "$@" "${extra[@]}" --csv "$base.csv" > "$base.log" 2>&1 &
  queue_started
}

start=$(date +%s)
for part in $parts; do
  part_start=$(date +%s)
  echo "== $part"
  case $part in
    mlp | cnn)
      if [ "$part" = mlp ]; then model=(--model mlp); epochs=8; else model=(--model cnn --width 0.25); epochs=6; fi
      for seed in $seeds; do
        for a in fp32 qm-qe+gecko bitwave+gecko; do run "$part" "$a" "$seed" "$epochs" "${model[@]}" --assignment "$a"; done
      done ;;
    gamma)
      for seed in $seeds; do
        for gamma in 0.01 0.03; do
          run mlp "qm-qe+gecko-gamma$gamma" "$seed" 8 --model mlp --assignment qm-qe+gecko --dc-gamma-m "$gamma" \
            --dc-gamma-e "$gamma"
        done
      done ;;
    improved)
      for seed in $seeds; do
        run mlp bitwave+gecko-improved "$seed" 8 --model mlp --assignment bitwave+gecko --dc-gecko improved
      done ;;
    linearised)
      for seed in $seeds; do
        run mlp qm-qe+gecko-linearised "$seed" 8 --model mlp --assignment qm-qe+gecko --dc-exponent-gradient linearised
      done ;;
    summary)
      queue_finish
      : > "$out/dynamic.md"
      for d in mlp cnn; do
        [ -d "$out/$d" ] || continue
        python3 "$here/summarize_dynamic.py" "$out/$d" | tee -a "$out/dynamic.md"
        for m in qm-qe+gecko bitwave+gecko; do
          [ -f "$out/$d/$m-s1.csv" ] && "$here/plot_bitlengths.sh" "$out/$d/$m-s1.csv" "$out/bitlengths-$d-${m%+gecko}.png" \
            "$m, $d, seed 1: bitlengths per epoch (mean, min–max over tensors)"
        done
      done ;;
    *) echo "$0: unknown part '$part'" >&2; exit 2 ;;
  esac
  if [ "$part" != summary ]; then
    queue_finish
    echo "   $part: $(( $(date +%s) - part_start )) s"
  fi
done
echo "reproduce_dynamic: done in $(( $(date +%s) - start )) s"
