#!/usr/bin/env python3
"""The table of docs/distributed.md from run_training.sh's CSVs: per configuration, test accuracy
(mean and range over the seeds present), bytes per rank on the wire and against fp32, the
encoding's overflow/underflow counts, skipped steps and the mean step time (rank 0)."""

import csv
import glob
import os
import re
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ["fp32", "bf16", "e4m3", "e4m3-sr", "e4m3-ef", "e4m3-sr-ef", "mxfp8", "mxfp4"]
LABELS = {"fp32": "fp32 all-reduce", "bf16": "bf16", "e4m3": "e4m3 nearest", "e4m3-sr": "e4m3 stochastic",
          "e4m3-ef": "e4m3 nearest + error feedback", "e4m3-sr-ef": "e4m3 stochastic + error feedback",
          "mxfp8": "mxfp8-e4m3", "mxfp4": "mxfp4"}
runs = {}
for path in glob.glob(os.path.join(HERE, "train_*_seed*.csv")):
    name, seed = re.match(r"train_(.+)_seed(\d+)\.csv", os.path.basename(path)).groups()
    rows = list(csv.DictReader(open(path)))
    if rows:
        runs.setdefault(name, {})[int(seed)] = rows[-1]
print("| gradients sent as | seeds | test accuracy mean [min, max] | bytes per rank | vs fp32 | overflows | "
      "underflows | skipped steps | s per step |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ORDER:
    if name not in runs:
        continue
    rows = [runs[name][s] for s in sorted(runs[name])]
    acc = [float(r["test_accuracy"]) for r in rows]
    mean = lambda key, conv=float: statistics.mean(conv(r[key]) for r in rows)  # noqa: E731
    print(f"| {LABELS[name]} | {','.join(map(str, sorted(runs[name])))} | {statistics.mean(acc):.4f} "
          f"[{min(acc):.4f}, {max(acc):.4f}] | {int(mean('comm_bytes_per_rank'))} | {mean('comm_ratio'):.4f} | "
          f"{mean('comm_overflows'):.0f} | {mean('comm_underflows'):.0f} | {mean('skipped_steps'):.1f} | "
          f"{mean('step_seconds'):.3f} |")
