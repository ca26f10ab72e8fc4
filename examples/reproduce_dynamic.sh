#!/bin/bash
# reproduce_dynamic.sh — the training runs behind docs/results.md §"Dynamic containers".
#
#   examples/reproduce_dynamic.sh [-b BUILD_DIR] [-o OUT_DIR] [-j JOBS] [-n] [PART ...]
#
# PARTs (default: all). Seeds 1–8 where a row carries a claim (mlp, cnn), 1–3 for the variants:
#   mlp      MLP 784-512-512-10, 8 epochs: fp32, qm-qe+gecko, bitwave+gecko   → OUT/dynamic/mlp/
#   cnn      CNN width 0.25 (8/16 channels), 6 epochs: the same three         → OUT/dynamic/cnn/
#   gamma    MLP, 8 epochs, seeds 1–3: qm-qe+gecko with gamma_m = gamma_e = 0.01 and 0.03
#   linearised  MLP, 8 epochs, seeds 1–3: qm-qe+gecko with the linearised exponent gradient
#            (eqs. 9–10)
#   improved MLP, 8 epochs, seeds 1–3: bitwave+gecko counting our improved Gecko variant
#            (training identical to bitwave+gecko; only the +G sizes differ)
#   summary  docs/results.md from every run under OUT (examples/results_cpp.py; OUT/results.md
#            when OUT is not the checkout's results/cpp) and the bitlength plots
#            OUT/bitlengths-*.png
# Every run writes CONFIG-sSEED.csv (per epoch, with the containers' columns), .log, .json (its
# record: examples/run_record.py) and, for the dynamic runs, CONFIG-sSEED.tensors.csv (per tensor
# per epoch). A finished run with its record is skipped. JOBS (default 2) run at a time, under
# nice; -n lists the runs without running them. One qm-qe+gecko run yields every QM/QE column of
# Table 1 and one bitwave+gecko run every BW column (training is the same with or without +gecko:
# Gecko is lossless and only counted).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=results/cpp
jobs=2
# shellcheck source=examples/common_args.sh
. "$here/common_args.sh"
parse_args "b:o:j:nh" 2,22 "[-b BUILD_DIR] [-o OUT_DIR] [-j JOBS] [-n] [mlp|cnn|gamma|linearised|improved|summary ...]" "$@"
shift "$args_parsed"
parts=${*:-mlp cnn gamma linearised improved summary}

# shellcheck source=examples/job_queue.sh
. "$here/job_queue.sh"
# Claims are decided on paired per-seed differences (docs/results.md): 8 seeds; the variants
# (gamma, linearised, improved) are context.
seeds="1 2 3 4 5 6 7 8"
context_seeds="1 2 3"

# run DIR NAME SEED EPOCHS FLAGS...: one training run in the background (job_queue.sh's launch).
run() {
  local dir=$1 name=$2 seed=$3 epochs=$4
  shift 4
  local base=$out/dynamic/$dir/$name-s$seed
  local extra=()
  case $name in fp32*) ;; *) extra=(--dc-tensor-csv "$base.tensors.csv") ;; esac
  launch "$base" "$epochs" --quiet --epochs "$epochs" --seed "$seed" "$@" "${extra[@]}" --csv "$base.csv"
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
      for seed in $context_seeds; do
        for gamma in 0.01 0.03; do
          run mlp "qm-qe+gecko-gamma$gamma" "$seed" 8 --model mlp --assignment qm-qe+gecko --dc-gamma-m "$gamma" \
            --dc-gamma-e "$gamma"
        done
      done ;;
    improved)
      for seed in $context_seeds; do
        run mlp bitwave+gecko-improved "$seed" 8 --model mlp --assignment bitwave+gecko --dc-gecko improved
      done ;;
    linearised)
      for seed in $context_seeds; do
        run mlp qm-qe+gecko-linearised "$seed" 8 --model mlp --assignment qm-qe+gecko --dc-exponent-gradient linearised
      done ;;
    summary)
      [ "$dry_run" = 1 ] && continue
      queue_finish
      doc=$out/results.md
      if [ "$(cd "$out" 2>/dev/null && pwd)" = "$(cd "$here/.." && pwd)/results/cpp" ]; then doc=$here/../docs/results.md; fi
      python3 "$here/results_cpp.py" --data "$out" --write "$doc"
      echo "wrote $doc"
      for d in mlp cnn; do
        for m in qm-qe+gecko bitwave+gecko; do
          if [ -f "$out/dynamic/$d/$m-s1.csv" ]; then
            "$here/plot_bitlengths.sh" "$out/dynamic/$d/$m-s1.csv" "$out/bitlengths-$d-${m%+gecko}.png" \
              "$m, $d, seed 1: bitlengths per epoch (mean, min–max over tensors)" ||
              echo "$0: no plot of $d $m (the tables are written)" >&2
          fi
        done
      done ;;
    *) echo "$0: unknown part '$part'" >&2; exit 2 ;;
  esac
  if [ "$part" != summary ] && [ "$dry_run" = 0 ]; then
    queue_finish
    echo "   $part: $(( $(date +%s) - part_start )) s"
  fi
done
[ "$dry_run" = 1 ] || echo "reproduce_dynamic: done in $(( $(date +%s) - start )) s"
