#!/bin/bash
# plot_tradeoff.sh — the memory–accuracy trade-off plot in the style of the paper's Figure 4,
# drawn with gnuplot (Debian: gnuplot-nox) from the per-epoch CSVs of `train --csv`.
#
#   examples/plot_tradeoff.sh RESULTS_DIR OUT.png [TITLE]
#
# RESULTS_DIR holds CONFIG-sSEED.csv files (examples/compare.sh and examples/reproduce.sh name
# them so). x: the low-precision ratio (averaged over the epochs; more = less memory), y: the best
# test accuracy over the epochs, the mean over seeds with the min–max range as an error bar (the
# paper's shaded band), and the y label says over how many seeds (with one seed there is no
# range to draw, and the label says so). Ours (ours-rR-decreasing) is one connected series, darker
# for smaller r, each point labelled with its r; fp32 is a dashed line (it has no low-precision
# ratio); all-high, uniform, op and op-variant are separate markers. Top-right is better.
set -eu

if [ $# -lt 2 ] || [ $# -gt 3 ] || [ ! -d "$1" ]; then
  echo "usage: $0 RESULTS_DIR OUT.png [TITLE]" >&2
  exit 2
fi
dir=$1
png=$2
title=${3:-"Memory–accuracy trade-off"}
command -v gnuplot > /dev/null || { echo "$0: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$here/summarize_runs.sh" --data "$dir" > "$tmp/all.dat"

# ours: ratio r from the name, sorted by r; the rest one file per baseline (may be empty).
awk '$1 ~ /^ours-r[0-9.]+-decreasing$/ { r = $1; sub(/^ours-r/, "", r); sub(/-decreasing$/, "", r); print r, $0 }' "$tmp/all.dat" |
  sort -g > "$tmp/ours.dat"
for b in all-high uniform op op-variant; do
  awk -v b="$b" '$1 == b' "$tmp/all.dat" > "$tmp/$b.dat"
done
fp32=$(awk '$1 == "fp32" { print $5 }' "$tmp/all.dat")
if [ ! -s "$tmp/ours.dat" ] && [ -z "$fp32" ]; then
  echo "$0: no ours-rR-decreasing or fp32 runs in $dir" >&2
  exit 1
fi

# Seeds per configuration (the last column): the y label states them.
seeds_min=$(awk 'NR == 1 || $NF < m { m = $NF } END { print m + 0 }' "$tmp/all.dat")
seeds_max=$(awk '$NF > m { m = $NF } END { print m + 0 }' "$tmp/all.dat")
if [ "$seeds_max" -le 1 ]; then
  ylabel="best test accuracy (%), 1 seed: no error bars (run more seeds)"
elif [ "$seeds_min" -eq "$seeds_max" ]; then
  ylabel="best test accuracy (%), mean; bars: min–max over $seeds_max seeds"
else
  ylabel="best test accuracy (%), mean; bars: min–max over $seeds_min–$seeds_max seeds"
fi

# Only series with data are plotted (gnuplot refuses empty files).
plots=()
[ -s "$tmp/ours.dat" ] && plots+=(
  "'$tmp/ours.dat' using 3:6:7:8 with yerrorbars lc rgb '#1f3b73' pt 7 ps 1.1 lw 1.2 notitle"
  "'' using 3:6:1 with linespoints lc palette pt 7 ps 1.3 lw 1.5 title 'ours (darker = smaller r)'"
  "'' using 3:6:(sprintf('r=%s', strcol(1))) with labels left offset 0.8,0.6 font ',9' tc rgb '#1f3b73' notitle")
[ -s "$tmp/all-high.dat" ] && plots+=("'$tmp/all-high.dat' using 2:5:6:7 with yerrorbars lc rgb '#555555' pt 4 ps 1.6 lw 1.5 title 'all-high'")
[ -s "$tmp/uniform.dat" ] && plots+=("'$tmp/uniform.dat' using 2:5:6:7 with yerrorbars lc rgb '#d62728' pt 3 ps 2 lw 1.5 title 'uniform'")
[ -s "$tmp/op.dat" ] && plots+=("'$tmp/op.dat' using 2:5:6:7 with yerrorbars lc rgb '#2ca02c' pt 5 ps 1.6 lw 1.5 title 'op'")
[ -s "$tmp/op-variant.dat" ] && plots+=("'$tmp/op-variant.dat' using 2:5:6:7 with yerrorbars lc rgb '#ff7f0e' pt 9 ps 2 lw 1.5 title 'op-variant'")
[ -n "$fp32" ] && plots+=("$fp32 with lines dt 2 lc rgb '#d62728' lw 1.5 title sprintf('fp32 (%.2f%%)', $fp32)")
joined=$(IFS=,; echo "${plots[*]}")

gnuplot <<EOF
set terminal pngcairo size 860,480 font 'DejaVu Sans,11'
set output '$png'
set title "$title"
set xlabel 'low-precision ratio (share of tensor bits in 8-bit formats, epoch mean)'
set ylabel '$ylabel'
set xrange [-0.03:1.03]
set grid lc rgb '#dddddd'
set key outside right top box
set palette defined (0 '#1f3b73', 0.5 '#3b8fb8', 1 '#e6c619')
set cbrange [0:1]
unset colorbox
plot $joined
EOF
echo "wrote $png"
