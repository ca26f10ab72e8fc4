#!/bin/bash
# summarize_trajectory.sh — the overflow trajectory before a divergence as a Markdown table, from
# the per-step CSV of `train --step-csv` (docs/results.md §3).
#
#   examples/summarize_trajectory.sh STEPS.csv [STEP ...]
#
# One column per listed step (default 0 10 20 30 60 90 100 110 120 130): the largest overflow
# ratio of a forward tensor in that step with the tensors that overflowed most, the batch loss and
# the loss scale the step used, and whether it was skipped.
set -eu
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 STEPS.csv [STEP ...]   (STEPS.csv: train --step-csv)" >&2
  exit 2
fi
csv=$1
shift
steps=${*:-0 10 20 30 60 90 100 110 120 130}
awk -F, -v steps="$steps" '
  BEGIN { n = split(steps, want, " "); for (i = 1; i <= n; i++) wanted[want[i]] = i }
  NR == 1 { next }
  ($2 in wanted) {
    i = wanted[$2]
    top = $8; gsub(/"/, "", top); gsub(/;/, ", ", top)
    ratio[i] = ($7 == 0 ? "0" : sprintf("%.3g (%s)", $7, top))
    loss[i] = sprintf("%.3g", $3); scale[i] = $4; skipped[i] = ($5 == 1 ? "yes" : "no")
  }
  END {
    row = "| step |"; sep = "|---|"
    for (i = 1; i <= n; i++) { row = row " " want[i] " |"; sep = sep "---|" }
    print row; print sep
    r1 = "| largest overflow ratio (tensors) |"; r2 = "| batch loss |"; r3 = "| loss scale |"; r4 = "| skipped |"
    for (i = 1; i <= n; i++) {
      r1 = r1 " " (i in ratio ? ratio[i] : "–") " |"; r2 = r2 " " (i in loss ? loss[i] : "–") " |"
      r3 = r3 " " (i in scale ? scale[i] : "–") " |"; r4 = r4 " " (i in skipped ? skipped[i] : "–") " |"
    }
    print r1; print r2; print r3; print r4
  }' "$csv"
