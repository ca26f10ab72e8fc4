#!/usr/bin/env python3
"""summarize_no_master.py DIR — the Markdown table of reproduce_no_master.sh's runs in DIR.

One row per configuration (NAME-sSEED.csv / .mem.csv, seeds pooled): test accuracy of the last
epoch (mean ± sample standard deviation over seeds, and the seed count), the measured peak
memory (total, and the model state at that peak: weights + extra bits + compute copy + gradients
+ optimizer state + journal; activations are the rest), training seconds per epoch (mean over
epochs and seeds) and the steps skipped by loss scaling (mean per run).
"""
import csv
import glob
import os
import re
import statistics
import sys

STATE = ["weights", "extra_bits", "compute_copy", "gradients", "optimizer_state", "journal"]


def main(directory):
    runs = {}
    for path in sorted(glob.glob(os.path.join(directory, "*-s*.mem.csv"))):
        m = re.match(r"(.*)-s(\d+)\.mem\.csv$", os.path.basename(path))
        name = m.group(1)
        with open(path) as f:
            mem = next(csv.DictReader(f))
        with open(path.replace(".mem.csv", ".csv")) as f:
            epochs = list(csv.DictReader(f))
        runs.setdefault(name, []).append((mem, epochs))
    order = []
    for path in sorted(glob.glob(os.path.join(directory, "*.log")), key=os.path.getmtime):
        name = re.match(r"(.*)-s\d+\.log$", os.path.basename(path)).group(1)
        if name in runs and name not in order:
            order.append(name)
    print("| config | test acc (%) | seeds | peak memory (bytes) | model state at peak (bytes) | "
          "weights + extra bits (bytes) | gradients at peak (bytes) | s / epoch | skipped steps |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in order:
        rs = runs[name]
        acc = [100 * float(e[-1]["test_acc"]) for _, e in rs]
        sd = statistics.stdev(acc) if len(acc) > 1 else 0.0
        peak = statistics.mean(int(m["peak_total"]) for m, _ in rs)
        state = statistics.mean(sum(int(m[c + "_at_peak"]) for c in STATE) for m, _ in rs)
        stored = statistics.mean(int(m["weights_at_peak"]) + int(m["extra_bits_at_peak"]) for m, _ in rs)
        grads = statistics.mean(int(m["gradients_at_peak"]) for m, _ in rs)
        secs = statistics.mean(float(row["epoch_seconds"]) for _, e in rs for row in e)
        skipped = statistics.mean(sum(int(row["skipped_steps"]) for row in e) for _, e in rs)
        print(f"| {name} | {statistics.mean(acc):.2f} ± {sd:.2f} | {len(rs)} | {peak:,.0f} | {state:,.0f} | "
              f"{stored:,.0f} | {grads:,.0f} | {secs:.1f} | {skipped:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1])
