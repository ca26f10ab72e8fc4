#!/usr/bin/env python3
"""Turns Google Benchmark JSON from bench_quantize into the tables of docs/performance.md.

Usage: bench/summarize.py results.json   (ratios are to bm_memcpy of the same size, same run)
With --benchmark_repetitions the median of the repetitions is used.
"""
import json
import sys


def main(path):
    everything = json.load(open(path))["benchmarks"]
    medians = [b for b in everything if b.get("aggregate_name") == "median"]
    runs = medians if medians else [b for b in everything if b.get("run_type") != "aggregate"]
    for b in runs:
        b["name"] = b["name"].removesuffix("_median")
    memcpy = {}
    for b in runs:
        if b["name"].startswith("bm_memcpy/"):
            memcpy[int(b["name"].split("/")[1])] = b["values_per_ns"]
    print("| size | data | format | mode | values/ns | × memcpy | counting values/ns | counting cost |")
    print("|---|---|---|---|---|---|---|---|")
    rows = {}
    for b in runs:
        if not b["name"].startswith("bm_quantize/"):
            continue
        size, data, fmt, mode, counting = map(int, b["name"].split("/")[1:6])
        rows[(size, data, fmt, mode, counting)] = b
    for (size, data, fmt, mode, counting), b in sorted(rows.items()):
        if counting:
            continue
        c = rows.get((size, data, fmt, mode, 1))
        label = b["label"].split()
        rate = b["values_per_ns"]
        crate = c["values_per_ns"] if c else float("nan")
        print(f"| {'64K' if size == 1 << 16 else '16M'} | {label[2]} | {label[0]} | {label[1]} | {rate:.2f} | "
              f"{rate / memcpy[size]:.2f} | {crate:.2f} | {100 * (rate / crate - 1):+.1f}% |")
    print()
    for b in runs:
        if b["name"].startswith("bm_memcpy/") or b["name"].startswith("bm_f16c"):
            print(f"- {b['name']}: {b['values_per_ns']:.2f} values/ns")


if __name__ == "__main__":
    main(sys.argv[1])
