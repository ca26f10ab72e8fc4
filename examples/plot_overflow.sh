#!/bin/bash
# plot_overflow.sh — the largest overflow ratio of a forward tensor at every step (from
# `train --step-csv`), one line per run, with the promotion threshold Θ: the trajectory before a
# divergence, in the style of the paper's Figure 6(b). Below it, the batch loss of each run.
#
#   examples/plot_overflow.sh OUT.png THETA LABEL=STEPS.csv [LABEL=STEPS.csv ...]
set -eu

if [ $# -lt 3 ]; then
  echo "usage: $0 OUT.png THETA LABEL=STEPS.csv [LABEL=STEPS.csv ...]" >&2
  exit 2
fi
png=$1
theta=$2
shift 2
command -v gnuplot > /dev/null || { echo "$0: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }

colors=("#d62728" "#1f3b73" "#2ca02c" "#ff7f0e")
over=()
loss=()
i=0
for arg in "$@"; do
  label=${arg%=*}  # split at the last =: labels may contain one, paths here do not
  file=${arg##*=}
  [ -f "$file" ] || { echo "$0: no such file $file" >&2; exit 1; }
  c=${colors[$((i % ${#colors[@]}))]}
  # zero ratios cannot be drawn on the log axis: they are left out (gnuplot skips them).
  over+=("'$file' using 2:(\$7 > 0 ? \$7 : 1/0) every ::1 with lines lc rgb '$c' lw 1.2 title '$label'")
  loss+=("'$file' using 2:3 every ::1 with lines lc rgb '$c' lw 1.2 title '$label'")
  i=$((i + 1))
done
over+=("$theta with lines dt 2 lc rgb '#555555' lw 1.5 title 'Θ = $theta'")
over_plot=$(IFS=,; echo "${over[*]}")
loss_plot=$(IFS=,; echo "${loss[*]}")

gnuplot <<EOF
set terminal pngcairo size 720,560 font 'DejaVu Sans,10'
set output '$png'
set datafile separator ','
set multiplot layout 2,1
set grid lc rgb '#dddddd'
set key inside right center opaque box
set logscale y
set yrange [1e-5:1.5]
set format y '10^{%L}'
set ylabel 'max overflow ratio (forward)'
unset xlabel
plot $over_plot
unset logscale y
set yrange [0:*]
set key inside right top opaque box
set format y '%g'
set ylabel 'batch loss'
set xlabel 'training step'
plot $loss_plot
unset multiplot
EOF
echo "wrote $png"
