#!/bin/bash
# plot_bitlengths.sh — bitlengths over training in the style of Schrödinger's FP Figures 1 and 4,
# drawn with gnuplot (Debian: gnuplot-nox) from the per-epoch CSV of a dynamic-container run
# (`train --assignment qm-qe|bitwave[+gecko] --csv`).
#
#   examples/plot_bitlengths.sh RUN.csv OUT.png [TITLE]
#
# Three panels (mantissa, exponent, total bits per value) with weights and activations each: the
# element-weighted mean over tensors of the bits stored during the epoch, and the min–max over
# tensors as error bars (the paper's spread). BitWave has one width for every tensor, so its
# spread is only the sign bit's (in the total).
set -eu

if [ $# -lt 2 ] || [ $# -gt 3 ] || [ ! -f "$1" ]; then
  echo "usage: $0 RUN.csv OUT.png [TITLE]" >&2
  exit 2
fi
csv=$1
png=$2
title=${3:-"Bitlengths over training"}
command -v gnuplot > /dev/null || { echo "$0: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# epoch, then mean/min/max of w_mantissa, a_mantissa, w_exponent, a_exponent, w_total, a_total.
awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) c[$i] = i
                   split("w_mantissa a_mantissa w_exponent a_exponent w_total a_total", names, " ")
                   if (!("w_mantissa_mean" in c)) { print "no container columns in " FILENAME > "/dev/stderr"; exit 1 }
                   next }
         { line = $c["epoch"]
           for (k = 1; k <= 6; ++k) line = line " " $c[names[k] "_mean"] " " $c[names[k] "_min"] " " $c[names[k] "_max"]
           print line }' "$csv" > "$tmp/bits.dat"

gnuplot <<EOF2
set terminal pngcairo size 1200,420 font 'DejaVu Sans,10'
set output '$png'
set multiplot layout 1,3 title "$title"
set xlabel 'epoch'
set grid lc rgb '#dddddd'
set key top right
set offsets 0.3, 0.3, 0, 0
set ylabel 'mantissa bits'
set yrange [-0.5:24]
plot '$tmp/bits.dat' using (\$1-0.06):2:3:4 with yerrorlines lc rgb '#1f3b73' pt 7 title 'weights', \
     '' using (\$1+0.06):5:6:7 with yerrorlines lc rgb '#d62728' pt 5 title 'activations'
set ylabel 'exponent bits'
set yrange [-0.3:8.5]
plot '$tmp/bits.dat' using (\$1-0.06):8:9:10 with yerrorlines lc rgb '#1f3b73' pt 7 title 'weights', \
     '' using (\$1+0.06):11:12:13 with yerrorlines lc rgb '#d62728' pt 5 title 'activations'
set ylabel 'total bits per value (sign + exponent + mantissa)'
set yrange [-0.5:33]
plot '$tmp/bits.dat' using (\$1-0.06):14:15:16 with yerrorlines lc rgb '#1f3b73' pt 7 title 'weights', \
     '' using (\$1+0.06):17:18:19 with yerrorlines lc rgb '#d62728' pt 5 title 'activations'
unset multiplot
EOF2
echo "wrote $png"
