#!/usr/bin/env python3
"""Turns Google Benchmark JSON from bench_bitpack and bench_split_optimizers into the tables of
docs/performance.md.

Usage: bench/summarize_storage.py bitpack.json split_optimizers.json
Bit-packing ratios are to the memcpy timed in the same run, optimizer ratios to the reference
step timed in the same iterations; with --benchmark_repetitions the median is used.
"""
import json
import sys


def runs(path):
    everything = json.load(open(path))["benchmarks"]
    medians = [b for b in everything if b.get("aggregate_name") == "median"]
    chosen = medians if medians else [b for b in everything if b.get("run_type") != "aggregate"]
    for b in chosen:
        b["name"] = b["name"].removesuffix("_median")
    return chosen


def bitpack(path):
    rows = runs(path)
    memcpy = {int(b["name"].split("/")[1]): b["values_per_ns"] for b in rows if b["name"].startswith("bm_memcpy/")}
    table = {}
    for b in rows:
        kind = b["name"].split("/")[0]
        if kind not in ("bm_pack", "bm_unpack"):
            continue
        fields = dict(part.split(":") for part in b["name"].split("/")[1:])
        table[(int(fields["n"]), int(fields["k"]), kind)] = b["values_per_ns"]
    print("| values | k | pack values/ns | pack × memcpy | unpack values/ns | unpack × memcpy |")
    print("|---|---|---|---|---|---|")
    for n, k in sorted({(n, k) for n, k, _ in table}):
        p, u = table[(n, k, "bm_pack")], table[(n, k, "bm_unpack")]
        size = "64K" if n == 1 << 16 else "16M"
        print(f"| {size} | {k} | {p:.2f} | {p / memcpy[n]:.2f} | {u:.2f} | {u / memcpy[n]:.2f} |")
    for n, rate in sorted(memcpy.items()):
        print(f"\nmemcpy of {'64K' if n == 1 << 16 else '16M'} values (4 bytes each): {rate:.2f} values/ns", end="")
    print("\n")


def optimizers(path):
    rows = runs(path)
    print("| optimizer | weights | bytes/weight | params/ns | × reference (same iterations) | reference | GB/s moved |")
    print("|---|---|---|---|---|---|---|")
    for b in rows:
        name = b["name"]
        if name.startswith("bm_memcpy"):
            continue
        opt = name.split("_")[1]
        label = b.get("label", "")
        fp32 = name.startswith(("bm_sgd_fp32", "bm_adam_fp32"))
        weights = "fp32" if fp32 else ("low " + label if name.startswith("bm_sgd_low") else label)
        reference = "plain loop" if fp32 else "library fp32 step"
        if fp32:
            width = 4
        elif name.startswith("bm_sgd_low"):
            width = 2
        else:
            visible, extra = label.split("_")[0].split("+")
            width = ({"bf16": 16, "fp16": 16, "e4m3": 8, "fp(6,9,0)": 16}[visible] + int(extra)) / 8
        rate = b["params_per_ns"]
        print(f"| {opt} | {weights} | {width:g} | {rate:.3f} | {b['x_ref']:.2f} | {reference} | "
              f"{b['bytes_per_second'] / 1e9:.1f} |")
    for b in rows:
        if b["name"].startswith("bm_memcpy"):
            print(f"\nmemcpy of the fp32 weights: {b['params_per_ns']:.2f} params/ns, "
                  f"{b['bytes_per_second'] / 1e9:.1f} GB/s moved")
    print()


if __name__ == "__main__":
    bitpack(sys.argv[1])
    optimizers(sys.argv[2])
