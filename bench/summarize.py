#!/usr/bin/env python3
"""Turns Google Benchmark JSON from bench_quantize into the tables of docs/performance.md.

Usage: /usr/bin/python3 bench/summarize.py results.json
Every row's "x memcpy" is the kernel's own x_memcpy counter: memcpy of the same bytes timed in the
same iterations (see bench_quantize.cpp). With --benchmark_repetitions the median is used.
"""
import json
import sys


def main(path):
    everything = json.load(open(path))["benchmarks"]
    medians = [b for b in everything if b.get("aggregate_name") == "median"]
    runs = medians if medians else [b for b in everything if b.get("run_type") != "aggregate"]
    for b in runs:
        b["name"] = b["name"].removesuffix("_median").removesuffix("/manual_time")
    size_name = {1 << 16: "64K", 1 << 24: "16M"}
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
        print(f"| {size_name[size]} | {label[2]} | {label[0]} | {label[1]} | {rate:.2f} | "
              f"{b['x_memcpy']:.2f} | {crate:.2f} | {100 * (rate / crate - 1):+.1f}% |")
    print()
    print("| reference | size | values/ns | × memcpy | memcpy values/ns |")
    print("|---|---|---|---|---|")
    for b in runs:
        if b["name"].startswith(("bm_f16c", "bm_bf16", "bm_scalar_loop")):
            size = int(b["name"].split("/")[1])
            print(f"| {b['label']} | {size_name[size]} | {b['values_per_ns']:.2f} | {b['x_memcpy']:.2f} | "
                  f"{b['memcpy_values_per_ns']:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
