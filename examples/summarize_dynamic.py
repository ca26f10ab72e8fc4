#!/usr/bin/env python3
"""summarize_dynamic.py — Markdown tables from the runs of examples/reproduce_dynamic.sh.

    examples/summarize_dynamic.py DIR

DIR holds CONFIG-sSEED.csv (train --csv; the dynamic assignments append the containers'
columns) and CONFIG-sSEED.tensors.csv (train --dc-tensor-csv). Every number is the mean over
seeds with the range (min–max); accuracies are the last epoch's test accuracy; footprint
reductions are cumulative over the whole run (the last epoch's row), weights + activations
unless stated. Tables: 1) Table-1 style, 2) weights vs activations, shares of FP32's mantissa and
exponent footprint, Gecko's exponent ratio, 3) learned bitlengths per tensor at the last epoch.
"""
import csv
import glob
import os
import re
import sys
from collections import defaultdict


def runs(directory):
    by_config = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(directory, "*-s*.csv"))):
        m = re.match(r"(.+)-s(\d+)\.csv$", os.path.basename(path))
        if not m or path.endswith(".tensors.csv"):
            continue
        with open(path) as f:
            rows = list(csv.DictReader(f))
        if rows:
            by_config[m.group(1)].append((int(m.group(2)), rows, path))
    return by_config


def stat(values, fmt="{:.2f}", suffix=""):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    mean = sum(values) / len(values)
    if len(values) == 1:
        return fmt.format(mean) + suffix
    return f"{fmt.format(mean)}{suffix} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def col(rows, name, scale=1.0):
    v = rows[-1].get(name, "")
    return float(v) * scale if v not in ("", None) else None


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: summarize_dynamic.py DIR")
    directory = sys.argv[1]
    configs = runs(directory)
    name = os.path.basename(os.path.normpath(directory))
    fp32 = configs.get("fp32", [])
    seeds = sorted({s for c in configs.values() for s, _, _ in c})
    epochs = max((len(r) for c in configs.values() for _, r, _ in c), default=0)
    print(f"### {name}: {epochs} epochs, seeds {', '.join(map(str, seeds))}\n")
    print("Footprint reduction vs FP32 (weights + activations, cumulative over training); accuracy = "
          "last-epoch test accuracy (%).\n")
    print("| run | FP32 acc | acc | M | E | E+G | M+E | M+E+G | M+E vs BF16 | M+E vs FP8 | M+E+G vs FP8 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    fp32_acc = stat([col(r, "test_acc", 100) for _, r, _ in fp32])
    for config, label in sorted((c, c) for c in configs if c != "fp32"):
        rs = [r for _, r, _ in configs[config]]
        cells = [stat([col(r, f"red_{v}") for r in rs], suffix="×") for v in ("qm", "qe", "qe_g", "qm_qe", "qm_qe_g")]
        extra = [stat([col(r, c) for r in rs], suffix="×") for c in ("red_bf16_qm_qe", "red_fp8_qm_qe", "red_fp8_qm_qe_g")]
        prefix = "BW" if config.startswith("bitwave") else "Q"
        print(f"| {label} (SFP_{prefix}) | {fp32_acc} | {stat([col(r, 'test_acc', 100) for r in rs])} | "
              + " | ".join(cells + extra) + " |")
    print("\nM = QM or BWM (learned mantissa, exponent kept at 8 bits), E = QE or BWE, +G = Gecko "
          "(faithful) on the exponents.\n")

    print("| run | M+E weights | M+E activations | M+E+G weights | M+E+G activations | mantissa % of FP32 (W / A) "
          "| exponent % of FP32 (W / A) | Gecko exponent ratio (W / A) | bits/value W | bits/value A |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for config in sorted(c for c in configs if c != "fp32"):
        rs = [r for _, r, _ in configs[config]]
        pct = lambda c: stat([col(r, c, 100) for r in rs], "{:.1f}", "%")
        print(f"| {config} | {stat([col(r, 'red_qm_qe_w') for r in rs], suffix='×')} | "
              f"{stat([col(r, 'red_qm_qe_a') for r in rs], suffix='×')} | "
              f"{stat([col(r, 'red_qm_qe_g_w') for r in rs], suffix='×')} | "
              f"{stat([col(r, 'red_qm_qe_g_a') for r in rs], suffix='×')} | "
              f"{pct('w_mantissa_share')} / {pct('a_mantissa_share')} | {pct('w_exponent_share')} / {pct('a_exponent_share')} | "
              f"{stat([col(r, 'w_gecko_exponent_share') for r in rs])} / {stat([col(r, 'a_gecko_exponent_share') for r in rs])} | "
              f"{stat([col(r, 'w_total_mean') for r in rs], '{:.1f}')} | {stat([col(r, 'a_total_mean') for r in rs], '{:.1f}')} |")
    print("\nbits/value: mean stored bits (sign + exponent + mantissa) of the last epoch.\n")

    for config in sorted(c for c in configs if c != "fp32"):
        per_tensor = defaultdict(lambda: defaultdict(list))
        order = []
        for _, _, path in configs[config]:
            tpath = path[:-4] + ".tensors.csv"
            if not os.path.exists(tpath):
                continue
            with open(tpath) as f:
                rows = list(csv.DictReader(f))
            last = max(int(r["epoch"]) for r in rows)
            for r in rows:
                if int(r["epoch"]) != last:
                    continue
                if r["tensor"] not in order:
                    order.append(r["tensor"])
                for k in ("mean_mantissa_bits", "mean_exponent_bits", "sign_share", "gecko_exponent_bits"):
                    if r.get(k):
                        per_tensor[r["tensor"]][k].append(float(r[k]))
                per_tensor[r["tensor"]]["numel"] = [int(r["numel"])]
        if not order:
            continue
        print(f"Per-tensor bits in the last epoch, {config} (mean over seeds, range):\n")
        print("| tensor | elements | mantissa bits | exponent bits | sign kept | Gecko exponent bits/value |")
        print("|---|---:|---|---|---|---|")
        for t in order:
            d = per_tensor[t]
            print(f"| {t} | {d['numel'][0]} | {stat(d['mean_mantissa_bits'], '{:.1f}')} | "
                  f"{stat(d['mean_exponent_bits'], '{:.1f}')} | {stat(d['sign_share'], '{:.2f}')} | "
                  f"{stat(d['gecko_exponent_bits'], '{:.2f}')} |")
        print()


if __name__ == "__main__":
    main()
