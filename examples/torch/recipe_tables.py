#!/usr/bin/env python3
"""The training-recipe study: `run` trains every configuration with every seed through train.py
(one CSV per run under results/recipes/, runs already there are kept), `tables` writes
docs/results-recipes.md's tables from those CSVs.

  PYTHONPATH=build/release/python python examples/torch/recipe_tables.py run --jobs 2
  PYTHONPATH=build/release/python python examples/torch/recipe_tables.py tables

Every run trains examples/torch/models.py's MLP (784-256-256-256-10, all four layers by the recipe)
on the first 10000 Fashion-MNIST training images for one epoch (Adam, lr 2e-3, batch 64, one
thread) and tests on all 10000 test images. Differences are paired by seed (same initialisation
and data order) against bf16; 95 % intervals are Student t; the minimum detectable effect is the
paired difference a two-sided 5 % test detects with 80 % power given the observed spread.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
RESULTS = os.path.join(ROOT, "results", "recipes")
DOC = os.path.join(ROOT, "docs", "results-recipes.md")

SEEDS = (0, 1, 2, 3, 4)
COMMON = ["--model", "mlp", "--train-limit", "10000", "--epochs", "1", "--keep-first-last", "off", "--threads", "1"]
# configuration -> train.py's recipe flags
CONFIGS = {
    "fp32": ["--recipe", "fp32"],
    "bf16": ["--recipe", "bf16"],
    "fp8": ["--recipe", "fp8"],
    "mxfp8": ["--recipe", "mxfp8"],
    "mxfp8_rceil": ["--recipe", "mxfp8_rceil"],
    "nvfp4": ["--recipe", "nvfp4"],
    "nvfp4_no_rht": ["--recipe", "nvfp4", "--rht", "off"],
    "nvfp4_no_sr": ["--recipe", "nvfp4", "--sr", "off"],
    "mxfp4": ["--recipe", "mxfp4"],
    "mxfp4_floor_no_prescale": ["--recipe", "mxfp4", "--prescale", "1"],
    "mxfp4_rceil_no_prescale": ["--recipe", "mxfp4_rceil", "--prescale", "1"],
}
# Emulated accumulation is about 500 times slower than BLAS: 2000 images, 2000 test images, 2 seeds.
ACC_SEEDS = (0, 1)
ACC_COMMON = ["--model", "mlp", "--train-limit", "2000", "--test-limit", "2000", "--epochs", "1",
              "--keep-first-last", "off", "--threads", "1"]
ACC_CONFIGS = {
    "acc_fp8_fp32": ["--recipe", "fp8"],
    "acc_fp8_hopper_promote128": ["--recipe", "fp8", "--accumulation", "hopper-fp8"],
    "acc_fp8_hopper_no_promotion": ["--recipe", "fp8", "--accumulation", "hopper-fp8-no-promotion"],
}

# Student t quantiles by degrees of freedom: two-sided 95 % (0.975) and the 80 % power term (0.8).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
T80 = {1: 1.376, 2: 1.061, 3: 0.978, 4: 0.941, 5: 0.920, 6: 0.906, 7: 0.896, 8: 0.889, 9: 0.883}


def csv_path(config, seed):
    return os.path.join(RESULTS, f"{config}_seed{seed}.csv")


def jobs():
    out = [(c, s, CONFIGS[c] + COMMON) for s in SEEDS for c in CONFIGS]
    out += [(c, s, ACC_CONFIGS[c] + ACC_COMMON) for s in ACC_SEEDS for c in ACC_CONFIGS]
    return out


def run_one(job):
    config, seed, flags = job
    path = csv_path(config, seed)
    if os.path.exists(path):
        return f"{config} seed {seed}: kept"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    log = path[:-4] + ".log"
    with open(log, "w") as f:
        r = subprocess.run([sys.executable, os.path.join(HERE, "train.py"), *flags, "--seed", str(seed), "--csv", path],
                           stdout=f, stderr=subprocess.DEVNULL, env=env)
    return f"{config} seed {seed}: exit {r.returncode}"


def run(args):
    os.makedirs(RESULTS, exist_ok=True)
    selected = [j for j in jobs() if not args.only or j[0] in args.only]
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(run_one, selected):
            print(line, flush=True)


def load(config, seeds):
    rows = {}
    for s in seeds:
        path = csv_path(config, s)
        if os.path.exists(path):
            with open(path) as f:
                rows[s] = list(csv.DictReader(f))[-1]
    return rows


def paired(a, b):
    """Mean of b - a over common seeds, its 95 % t interval half-width, n, and the MDE."""
    seeds = sorted(set(a) & set(b))
    d = [float(b[s]["test_accuracy"]) - float(a[s]["test_accuracy"]) for s in seeds]
    n = len(d)
    if n < 2:
        return (d[0] if d else float("nan")), float("nan"), n, float("nan")
    sd = statistics.stdev(d)
    half = T975[n - 1] * sd / math.sqrt(n)
    mde = (T975[n - 1] + T80[n - 1]) * sd / math.sqrt(n)
    return statistics.mean(d), half, n, mde


def pct(v, digits=2):
    return "n/a" if v != v else f"{100 * v:+.{digits}f}"


def acc_cell(rows):
    accs = [float(r["test_accuracy"]) for r in rows.values()]
    if not accs:
        return "n/a"
    sd = statistics.stdev(accs) if len(accs) > 1 else float("nan")
    return f"{100 * statistics.mean(accs):.2f} ± {100 * sd:.2f}" if sd == sd else f"{100 * accs[0]:.2f}"


def mean_field(rows, field):
    vals = [float(r[field]) for r in rows.values() if r.get(field, "") != ""]
    return statistics.mean(vals) if vals else float("nan")


def verdict(mean, half):
    if mean != mean or half != half:
        return "n/a"
    if mean - half > 0:
        return "better"
    if mean + half < 0:
        return "worse"
    return "no difference detected"


def tables(_args):
    data = {c: load(c, SEEDS) for c in CONFIGS}
    acc = {c: load(c, ACC_SEEDS) for c in ACC_CONFIGS}
    every = [r for d in list(data.values()) + list(acc.values()) for r in d.values()]
    if not every:
        sys.exit(f"recipe_tables.py: no CSVs under {RESULTS}; run `recipe_tables.py run` first")
    commits = sorted({r["git_commit"] for r in every})
    versions = sorted({(r["minifloat_version"], r["torch_version"]) for r in every})
    out = ["# Training recipes on a small model: results",
           "",
           "What a 2-core CPU can say about the recipes of [recipes.md](recipes.md): one small model, one",
           "short schedule, five seeds. Every number below is computed by `examples/torch/recipe_tables.py",
           "tables` from the CSVs in `results/recipes/` (one per run, written by train.py, committed);",
           "`recipe_tables.py run --jobs 2` repeats the runs (an nvfp4 run took 10 s of CPU here).",
           "",
           "**Setting.** examples/torch/models.py's MLP (784-256-256-256-10, ReLU), every one of its four",
           "Linear layers trained by the recipe (`--keep-first-last off`, so the formats are stressed more",
           "than the papers, which keep some layers in high precision), Adam (lr 2e-3), batch 64, one",
           "epoch over the first 10000 Fashion-MNIST training images, tested on all 10000 test images.",
           "Seeds 0-4 set the initialisation, the data order and the rounding seeds; runs with the same",
           "seed start from the same weights and see the same batches, so differences are paired by seed.",
           f"Runs: minifloat {', '.join(v[0] for v in versions)}, torch {', '.join(v[1] for v in versions)}, at the git",
           "commits (the checkout's HEAD as each run started; others committed meanwhile, and `+dirty` marks",
           "their uncommitted edits to other files):",
           *[f"{c}{',' if i + 1 < len(commits) else '.'}" for i, c in enumerate(commits)],
           "",
           "Intervals are 95 % Student t over the per-seed differences (n = 5, 4 degrees of freedom); the",
           "minimum detectable effect (MDE) is the difference a two-sided 5 % paired t test would detect",
           "with 80 % power at the observed spread, (t0.975 + t0.8) · sd / √n.",
           "",
           "## 1. Accuracy of each recipe against bf16 and fp32",
           "",
           "| configuration | test accuracy % (mean ± sd) | vs bf16, points (95 % CI) | MDE vs bf16 | vs fp32, points (95 % CI) | operand bytes / fp32 |",
           "|---|---|---|---|---|---|"]
    for c, rows in data.items():
        m, h, n, mde = paired(data["bf16"], rows)
        m32, h32, _, _ = paired(data["fp32"], rows)
        ratio = mean_field(rows, "operand_bytes") / mean_field(rows, "operand_fp32_bytes")
        vs_bf16 = "—" if c == "bf16" else f"{pct(m)} ± {100 * h:.2f}"
        vs_fp32 = "—" if c == "fp32" else f"{pct(m32)} ± {100 * h32:.2f}"
        out.append(f"| {c} | {acc_cell(rows)} (n={len(rows)}) | {vs_bf16} | "
                   f"{'—' if c == 'bf16' else f'{100 * mde:.2f}'} | {vs_fp32} | {ratio:.3f} |")
    out += ["",
            "Operand bytes: what the quantized GEMM operands of the training steps would take (codes,",
            "one byte per block scale, 4 per tensor scale) over 4 bytes per value; the Hadamard transform's",
            "zero padding is counted.",
            "",
            "## 2. NVFP4: does each ingredient matter here?",
            "",
            "| ablation | accuracy change vs full nvfp4, points (95 % CI) | MDE | verdict |",
            "|---|---|---|---|"]
    for c, label in (("nvfp4_no_rht", "without the Hadamard transform (`--rht off`)"),
                     ("nvfp4_no_sr", "without stochastic rounding of gradients (`--sr off`)")):
        m, h, n, mde = paired(data["nvfp4"], data[c])
        out.append(f"| {label} | {pct(m)} ± {100 * h:.2f} (n={n}) | {100 * mde:.2f} | {verdict(m, h)} |")
    out += ["",
            "| configuration | weight-gradient underflows per run | input-gradient underflows per run |"
            " clamped blocks per run (all roles) |",
            "|---|---|---|---|"]
    for c in ("nvfp4", "nvfp4_no_rht", "nvfp4_no_sr"):
        rows = data[c]
        clamped = sum(mean_field(rows, f"{r}_clamped_blocks") for r in ("forward", "input_grad", "weight_grad"))
        out.append(f"| {c} | {mean_field(rows, 'weight_grad_underflows'):.0f} | "
                   f"{mean_field(rows, 'input_grad_underflows'):.0f} | {clamped:.0f} |")
    out += ["",
            "## 3. MXFP4: floor against RCEIL scales",
            "",
            "The backward GEMMs in MXFP4 (stochastic rounding, 32-wide Hadamard transform), forward in bf16.",
            "A floor scale maps a block's largest magnitude to [4, 8) times the scale, so the largest",
            "element clips to 6 whenever it maps above 6; RCEIL never clips. Without the 3/4 pre-scale",
            "(`--prescale 1`) that clipping reaches the GEMM; with it (Tseng et al.'s recipe) nothing clips.",
            "Saturated elements are counted per element (a block clips its largest element at least once",
            "when it has one; more only when several of its elements map above 6).",
            "",
            "| configuration | test accuracy % | vs bf16, points (95 % CI) | saturated elements per run (input grad / weight grad) | of values quantized |",
            "|---|---|---|---|---|"]
    for c in ("mxfp4_floor_no_prescale", "mxfp4_rceil_no_prescale", "mxfp4"):
        rows = data[c]
        m, h, n, _ = paired(data["bf16"], rows)
        ig, wg = mean_field(rows, "input_grad_overflows"), mean_field(rows, "weight_grad_overflows")
        values = mean_field(rows, "input_grad_values") + mean_field(rows, "weight_grad_values")
        out.append(f"| {c} | {acc_cell(rows)} | {pct(m)} ± {100 * h:.2f} | {ig:.0f} / {wg:.0f} | "
                   f"{(ig + wg) / values:.2e} |")
    m, h, n, mde = paired(data["mxfp4_rceil_no_prescale"], data["mxfp4_floor_no_prescale"])
    out += ["", f"Floor minus RCEIL (no pre-scale), paired: {pct(m)} ± {100 * h:.2f} points (n={n}, MDE "
                f"{100 * mde:.2f}): {verdict(m, h)}.",
            "",
            "## 4. Emulated FP8 accumulation",
            "",
            "The fp8 recipe (per-tensor e4m3 forward, e5m2 gradients) with every GEMM accumulated by",
            "`operands.HOPPER_FP8_MODEL` (products exact, running sums truncated to 14 significant bits)",
            "with and without promotion to fp32 every 128 elements, against fp32 accumulation. The emulated",
            "GEMM is about 500 times slower than BLAS, so these runs train on 2000 images and test on the",
            "first 2000 test images, seeds 0 and 1: too few to test a difference, they show its size.",
            "",
            "| accumulation | test accuracy % per seed | train loss per seed |",
            "|---|---|---|"]
    for c, rows in acc.items():
        accs = ", ".join(f"{100 * float(rows[s]['test_accuracy']):.2f}" for s in sorted(rows))
        losses = ", ".join(f"{float(rows[s]['train_loss']):.4f}" for s in sorted(rows))
        out.append(f"| {c.removeprefix('acc_fp8_')} | {accs or 'n/a'} | {losses or 'n/a'} |")
    out += ["", "## 5. What reproduces, what does not, what this setting cannot tell", "", "SUMMARY", ""]
    text = "\n".join(out) + "\n"
    if os.path.exists(DOC):
        old = open(DOC).read()
        if "## 5. What reproduces" in old and "SUMMARY" in text:
            # the hand-written conclusions below the generated tables are kept
            text = text.split("## 5. What reproduces")[0] + "## 5. What reproduces" + old.split("## 5. What reproduces", 1)[1]
    with open(DOC, "w") as f:
        f.write(text)
    print(f"wrote {DOC}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train the missing runs")
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--only", nargs="*", default=None, help="configurations to run (default all)")
    sub.add_parser("tables", help="write docs/results-recipes.md from results/recipes/*.csv")
    args = p.parse_args()
    run(args) if args.command == "run" else tables(args)


if __name__ == "__main__":
    main()
