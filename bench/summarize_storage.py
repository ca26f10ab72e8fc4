#!/usr/bin/env python3
"""Turns Google Benchmark JSON from bench_bitpack and bench_split_optimizers into the tables of
docs/perf/storage-bitpack.md.

Usage: bench/summarize_storage.py bitpack.json split_optimizers.json
Ratios are to the memcpy timed in the same run; with --benchmark_repetitions the median is used.
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
    base = {}
    for b in rows:
        if b["name"] in ("bm_sgd_fp32", "bm_adam_fp32"):
            base[b["name"].split("_")[1]] = b["params_per_ns"]
    print("| optimizer | weights | bytes/weight | params/ns | × fp32 step | GB/s moved |")
    print("|---|---|---|---|---|---|")
    for b in rows:
        name = b["name"]
        if name.startswith("bm_memcpy"):
            continue
        opt = name.split("_")[1]
        weights = b.get("label", "") or "fp32"
        width = {"fp32": 4, "bf16+16": 4, "fp16+13": 29 / 8, "bf16+8": 3, "bf16+9_stochastic": 25 / 8}[weights]
        rate = b["params_per_ns"]
        print(f"| {opt} | {weights} | {width:g} | {rate:.3f} | {rate / base[opt]:.2f} | {b['bytes_per_second'] / 1e9:.1f} |")
    for b in rows:
        if b["name"].startswith("bm_memcpy"):
            print(f"\nmemcpy of the fp32 weights: {b['bytes_per_second'] / 1e9:.1f} GB/s moved")
    print()


if __name__ == "__main__":
    bitpack(sys.argv[1])
    optimizers(sys.argv[2])
