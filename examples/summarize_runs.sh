#!/bin/bash
# summarize_runs.sh — one line per configuration from the per-epoch CSVs of `train --csv`, seeds
# pooled: the mean and the range (min–max) over seeds, as the paper reports its four runs.
#
#   examples/summarize_runs.sh [--data] DIR
#
# DIR holds CSVs named CONFIG-sSEED.csv (e.g. ours-r0.5-decreasing-s2.csv, op-s1.csv); every file
# whose name differs only in the seed is one configuration. Per run:
#   lowp    the low-precision ratio averaged over all epochs (the paper's §5.2 definition)
#   best    the best test accuracy over the epochs (the paper's Figures 3–4), final the last one
#   memory  the epoch-mean model aggregate (bits of P, Y, GY, GP at the training batch size)
#           over that of the all-high assignment (16 bits everywhere) — 1 - lowp/2 when high is
#           16 bits and low 8
#   promo   tensors promoted by the end of training; d_lowp the low-precision ratio lost to
#           promotion (first epoch's start minus last epoch's end)
#   per seed  each seed's best accuracy; when it promoted, "(promotions; Δ d_lowp)"; "NaN" when its
#           training loss became NaN (which runs train and which diverge, not only the mean)
# Without --data it prints a Markdown table; with --data, whitespace-separated columns for
# gnuplot: config lowp_mean lowp_min lowp_max best_mean best_min best_max n.
set -eu

data=0
if [ "${1:-}" = "--data" ]; then data=1; shift; fi
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 [--data] DIR   (DIR: CSVs of train --csv named CONFIG-sSEED.csv)" >&2
  exit 2
fi
dir=$1

shopt -s nullglob
files=("$dir"/*-s*.csv)
if [ ${#files[@]} -eq 0 ]; then
  echo "$0: no CONFIG-sSEED.csv files in $dir" >&2
  exit 1
fi

# One line per run: config seed lowp best final bits epochs promo d_lowp seconds nan
for f in "${files[@]}"; do
  case $f in *.steps.csv) continue ;; esac  # train --step-csv files
  base=$(basename "$f" .csv)
  config=${base%-s*}
  seed=${base##*-s}
  awk -F, -v config="$config" -v seed="$seed" '
    NR == 1 { next }
    {
      n++; lowp += $6; bits += $7; secs += $14 + $15
      acc = $5 + 0; if (n == 1 || acc > best) best = acc
      final = acc; promo = $9
      if (n == 1) start = ($16 == "" ? $6 : $16)
      end = ($17 == "" ? $6 : $17)
      if ($2 !~ /^[-+]?[0-9.eE+-]+$/) nan = 1
    }
    END {
      if (n == 0) exit
      printf "%s %s %.6f %.6f %.6f %.0f %d %d %.6f %.1f %d\n", config, seed, lowp / n, best, final,
             bits / n, n, promo, start - end, secs, nan
    }' "$f"
done | sort -k1,1 -k2,2n | awk -v data="$data" '
  function key_order(c,   r) {
    # fp32 and the fixed baselines first, then ours by order and ratio
    if (c == "fp32") return "0"
    if (c == "all-high") return "1"
    if (c == "uniform") return "2"
    if (c == "op") return "3"
    if (c == "op-variant") return "4"
    return "5 " c
  }
  {
    c = $1
    if (!(c in n)) { order[++nc] = c; n[c] = 0 }
    k = ++n[c]
    lowp[c, k] = $3; best[c, k] = $4; final[c, k] = $5; bits[c, k] = $6; epochs[c] = $7
    promo[c, k] = $8; dl[c, k] = $9; secs[c, k] = $10; nan[c] += $11
    seeds[c] = seeds[c] (k > 1 ? "," : "") $2
    per[c] = per[c] (k > 1 ? "; " : "") sprintf("%s: %.2f", $2, 100 * $4) ($8 > 0 ? sprintf(" (%d; Δ %.4f)", $8, $9) : "") ($11 ? " NaN" : "")
  }
  function stat(arr, c, what,   i, s, lo, hi) {
    s = 0; lo = arr[c, 1]; hi = arr[c, 1]
    for (i = 1; i <= n[c]; i++) { s += arr[c, i]; if (arr[c, i] < lo) lo = arr[c, i]; if (arr[c, i] > hi) hi = arr[c, i] }
    if (what == "mean") return s / n[c]
    if (what == "min") return lo
    return hi
  }
  END {
    # all-high aggregate: the same model with every tensor in 16 bits; fp32 runs report 32 bits
    # per element, so 16-bit all-high = fp32 bits / 2.
    ref = 0
    for (i = 1; i <= nc; i++) if (order[i] == "fp32") ref = stat(bits, "fp32", "mean") / 2
    # sort configurations: baselines first, then ours
    for (i = 1; i <= nc; i++) for (j = i + 1; j <= nc; j++)
      if (key_order(order[j]) < key_order(order[i])) { t = order[i]; order[i] = order[j]; order[j] = t }
    if (!data) {
      print "| configuration | seeds | epochs | low-precision ratio | memory vs all-high | best test acc % (min–max) | final test acc % (min–max) | promoted | Δ lowp from promotion | time/run s | per seed: best % (promoted; Δ lowp) |"
      print "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    }
    for (i = 1; i <= nc; i++) {
      c = order[i]
      if (data) {
        printf "%s %.4f %.4f %.4f %.3f %.3f %.3f %d\n", c, stat(lowp, c, "mean"), stat(lowp, c, "min"), stat(lowp, c, "max"),
               100 * stat(best, c, "mean"), 100 * stat(best, c, "min"), 100 * stat(best, c, "max"), n[c]
        continue
      }
      mem = ref > 0 ? sprintf("%.3f", stat(bits, c, "mean") / ref) : "–"
      printf "| %s | %s | %d | %.4f | %s | %.2f (%.2f–%.2f) | %.2f (%.2f–%.2f) | %.1f | %.4f | %.0f | %s |\n", c, seeds[c], epochs[c],
             stat(lowp, c, "mean"), mem,
             100 * stat(best, c, "mean"), 100 * stat(best, c, "min"), 100 * stat(best, c, "max"),
             100 * stat(final, c, "mean"), 100 * stat(final, c, "min"), 100 * stat(final, c, "max"),
             stat(promo, c, "mean"), stat(dl, c, "mean"), stat(secs, c, "mean"), per[c]
    }
  }'
