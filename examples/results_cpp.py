#!/usr/bin/env python3
"""docs/results.md from the C++ trainer's committed runs under results/cpp/.

    python3 examples/results_cpp.py [--data results/cpp] [--write docs/results.md]
    python3 examples/results_cpp.py --plan     # the planned runs and their estimated time

The runs are those of examples/reproduce.sh, reproduce_no_master.sh and reproduce_dynamic.sh:
results/cpp/PART/CONFIG-sSEED.csv (train --csv) with the run's record CONFIG-sSEED.json
(examples/run_record.py) beside it, and for some parts .mem.csv (--memory-csv), .tensors.csv
(--dc-tensor-csv) or .steps.csv.gz (--step-csv, compressed). A CSV without its record is not
used (the scripts write the record only when the run succeeded). Every number of the document is
computed here from those files and every verdict is examples/torch/verdict.py's one rule, so
rerunning this on the committed data rewrites the document byte for byte (a test checks it).
Where a part has no committed run the document says so and gives the command that runs it.

The plan (which runs, seeds and epochs) is read from the scripts themselves (their -n listing),
and priced at PRICE_PER_EPOCH CPU seconds an epoch.

The papers: Lee, Sharma, Aiken, "Training with Mixed-Precision Floating-Point Assignments", TMLR
2023, arXiv:2301.13464; Lewandowski, Kosson, "Memory Efficient Mixed-Precision Optimizers",
arXiv:2309.12381; Nikolić et al., "Schrödinger's FP: Dynamic Adaptation of Floating-Point
Containers for Deep Learning Training", MLSys 2024, arXiv:2204.13666.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "torch"))

from verdict import CONFIDENCE, KEEP_MARGIN, POWER, paired  # noqa: E402

DIVERGED_BELOW = 20.0   # points of test accuracy (10 classes: chance is 10), as docs/results-torch.md
# CPU seconds per training epoch, start-up and evaluation included: the recorded CPU time of the
# committed runs over their epochs (MLP: tradeoff, order and promotion, 5.4-5.6 s; CNN at width
# 0.25: tradeoff-cnn), two runs at a time on the 2-core machine of docs/results.md.
PRICE_PER_EPOCH = {"mlp": 5.5, "cnn": 13.4}
CORES = 2
SCRIPTS = ("reproduce.sh", "reproduce_no_master.sh", "reproduce_dynamic.sh")
# Rows that carry no claim (fewer seeds in the plan): shown with their paired difference, no verdict.
CONTEXT = ("all-high", "op-variant", "ours-r0-decreasing", "qm-qe+gecko-gamma0.01", "qm-qe+gecko-gamma0.03",
           "qm-qe+gecko-linearised", "bitwave+gecko-improved")

# Each results directory: the script and its parts that fill it.
PARTS = {
    "tradeoff": ("reproduce.sh", "tradeoff"),
    "tradeoff-cnn": ("reproduce.sh", "cnn"),
    "order": ("reproduce.sh", "order"),
    "promotion": ("reproduce.sh", "promotion"),
    "scaling": ("reproduce.sh", "scaling"),
    "no-master/table3": ("reproduce_no_master.sh", "table3"),
    "no-master/fused": ("reproduce_no_master.sh", "fused"),
    "dynamic/mlp": ("reproduce_dynamic.sh", "mlp gamma linearised improved"),
    "dynamic/cnn": ("reproduce_dynamic.sh", "cnn"),
}


# -- the plan -------------------------------------------------------------------------------------

def plan():
    """Every planned run, from the scripts' dry-run listing: dicts of part, config, seed, epochs,
    model and flags."""
    runs = []
    for script in SCRIPTS:
        out = subprocess.run(["bash", os.path.join(HERE, script), "-n"], capture_output=True, text=True,
                             check=True, cwd=ROOT).stdout
        for line in out.splitlines():
            if not line.startswith("plan: "):
                continue
            path, _, command = line[len("plan: "):].partition(": ")
            m = re.match(r"results/cpp/(.+)/([^/]+)-s(\d+)\.csv$", path)
            args = shlex.split(command)[1:]
            flags = dict(zip(args, args[1:]))
            runs.append({"script": script, "part": m.group(1), "config": m.group(2), "seed": int(m.group(3)),
                         "epochs": int(flags["--epochs"]), "model": flags.get("--model", "mlp"), "args": args})
    return runs


def price(run):
    return run["epochs"] * PRICE_PER_EPOCH[run["model"]]


# -- reading --------------------------------------------------------------------------------------

def _float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


class Run:
    """One (configuration, seed): its per-epoch rows, its record and the optional side files."""

    def __init__(self, path):
        with open(path, newline="") as f:
            self.rows = list(csv.DictReader(f))
        self.path = path
        self.seed = int(re.search(r"-s(\d+)\.csv$", path).group(1))
        with open(path[:-4] + ".json") as f:
            self.meta = json.load(f)
        mem = path[:-4] + ".mem.csv"
        self.mem = None
        if os.path.exists(mem):
            with open(mem, newline="") as f:
                self.mem = next(csv.DictReader(f))
        acc = [100 * _float(r["test_acc"]) for r in self.rows]
        self.final, self.best = acc[-1], max(acc)
        bad = [not math.isfinite(_float(r["train_loss"])) or a < DIVERGED_BELOW for r, a in zip(self.rows, acc)]
        self.diverged_final, self.diverged_any = bad[-1], any(bad)
        self.low_ratio = statistics.fmean(_float(r["low_ratio"]) for r in self.rows)
        self.bits = statistics.fmean(_float(r["model_bits"]) for r in self.rows)
        self.promotions = int(self.rows[-1]["promotions_total"])
        start = _float(self.rows[0].get("low_ratio_start"))
        end = _float(self.rows[-1].get("low_ratio_end"))
        # The aggregate's growth from the first step to the last, in units of all-high's: a tensor
        # promoted from 8 to 16 bits adds its n·8 bits, and the ratio counts n·(16-8) over all tensors.
        self.promotion_cost = (start - end) / 2 if math.isfinite(start) and math.isfinite(end) else 0.0
        self.skipped = sum(int(r["skipped_steps"]) for r in self.rows)
        self.epoch_seconds = statistics.fmean(_float(r["epoch_seconds"]) for r in self.rows)

    @property
    def cpu(self):
        return self.meta.get("cpu_user_s", 0) + self.meta.get("cpu_sys_s", 0)

    def last(self, column):
        return _float(self.rows[-1].get(column))


class Row:
    """One configuration: its runs, one per seed."""

    def __init__(self, name, runs):
        self.name = name
        self.runs = sorted(runs, key=lambda r: r.seed)

    @property
    def n(self):
        return len(self.runs)

    def values(self, attr):
        return [getattr(r, attr) for r in self.runs]

    def mean(self, attr):
        return statistics.fmean(self.values(attr))

    def div(self, which):
        return f"{sum(getattr(r, 'diverged_' + which) for r in self.runs)}/{self.n}"


def load(directory):
    """{config: Row} of the runs in `directory` that have their record, and the CSVs without one."""
    by_config, unrecorded = defaultdict(list), []
    if not os.path.isdir(directory):
        return {}, []
    for name in sorted(os.listdir(directory)):
        m = re.match(r"(.+)-s(\d+)\.csv$", name)
        if not m or name.endswith((".steps.csv", ".tensors.csv", ".mem.csv")):
            continue
        path = os.path.join(directory, name)
        if not os.path.exists(path[:-4] + ".json"):
            unrecorded.append(name)
            continue
        by_config[m.group(1)].append(Run(path))
    return {c: Row(c, runs) for c, runs in by_config.items()}, unrecorded


def compare(row, ref, metric="final"):
    """The rule on the per-seed differences row - ref (points), over the seeds both have."""
    theirs = {r.seed: getattr(r, metric) for r in ref.runs}
    return paired(getattr(r, metric) - theirs[r.seed] for r in row.runs if r.seed in theirs)


# -- formatting -----------------------------------------------------------------------------------

def table(header, body):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return lines + [""]


def acc_cells(row, attr="final"):
    v = row.values(attr)
    sd = statistics.stdev(v) if len(v) > 1 else math.nan
    return [f"{statistics.fmean(v):.2f}", "–" if math.isnan(sd) else f"{sd:.2f}", f"{min(v):.2f}–{max(v):.2f}"]


def verdict_cell(name, c):
    if c is None:
        return ""
    return "context (no claim)" if name in CONTEXT else c.verdict


def ci_cell(c):
    if c.n < 2:
        return f"{c.mean:+.2f} (n = {c.n})" if c.n else "–"
    return f"{c.mean:+.2f} [{c.lo:+.2f}, {c.hi:+.2f}], MDE {c.mde:.2f}"


def seeds_text(row):
    s = [r.seed for r in row.runs]
    return f"{s[0]}–{s[-1]}" if s == list(range(s[0], s[-1] + 1)) and len(s) > 2 else ",".join(map(str, s))


def command(part, build="build/repro"):
    script, parts = PARTS[part]
    return f"examples/{script} -b {build} {parts} summary"


def not_run(part):
    return f"Not run at this commit: no run of this part is committed under `results/cpp/{part}/`. `{command(part)}` runs it."


def ratio_row_cells(row, all_high_bits):
    mem = f"{row.mean('bits') / all_high_bits:.3f}" if all_high_bits else "–"
    return [f"{row.mean('low_ratio'):.4f}", mem]


def all_high_bits(rows):
    """The all-high aggregate: every tensor in 16 bits; fp32 runs count 32 bits per element."""
    if "all-high" in rows:
        return rows["all-high"].mean("bits")
    if "fp32" in rows:
        return rows["fp32"].mean("bits") / 2
    return None


# -- sections -------------------------------------------------------------------------------------

def rule_section():
    t = f"t(0.975, n−1)" if CONFIDENCE == 0.95 else f"t({0.5 + CONFIDENCE / 2}, n−1)"
    return ["## The verdict rule (declared before any result)", "",
            "Every claim below is decided by one rule, the one of [results-torch.md](results-torch.md), implemented "
            "once in `examples/torch/verdict.py` and imported by the table script:", "",
            "- Rows are compared **seed by seed**: run *s* of every row of a part shares its initialisation and data "
            "order (`--seed s`), so the comparison uses the per-seed differences *d_s* of the **final epoch's test "
            "accuracy** on all 10 000 test images, in points. (The precision-assignment paper reports the best "
            "accuracy during training; the tables show both.)",
            f"- With *n* paired seeds, mean *d̄* and standard deviation *s_d*, the {CONFIDENCE:.0%} interval is "
            f"*d̄ ± {t}·s_d/√n* (Student's t quantiles from mpmath).".replace("%", " %"),
            f"- **keeps accuracy** when the interval's lower bound is above −{KEEP_MARGIN:g} point; **loses** when "
            "its upper bound is below 0 (both can hold: a real loss smaller than the margin); **inconclusive** "
            "otherwise.",
            f"- The **minimum detectable effect** (MDE) printed with each comparison is the true difference the "
            f"interval excludes 0 for with {POWER:.0%} power: *(t(0.975, n−1) + t({POWER:g}, n−1))·s_d/√n*.".replace(
                "%", " %"),
            f"- **Divergence** is counted under both definitions of results-torch.md: the *final* test accuracy is "
            f"under {DIVERGED_BELOW:g} %, or *any epoch's* is (chance is 10 %); a non-finite training loss counts "
            "under both. The precision-assignment paper uses neither threshold: it calls training diverged when "
            "\"accuracy decreases significantly and remains low after some point\" (§4.2), closer to the final-"
            "accuracy definition.",
            "- Memory claims use the paper's measure (the low-precision ratio and the model aggregate, computed "
            "from the assignment); they are deterministic given the assignment and carry no interval.", ""]


def plan_section(runs, data):
    L = ["## Plan, commands and cost", "",
         "```sh",
         "cmake -S . -B build/repro -DCMAKE_BUILD_TYPE=Release",
         "cmake --build build/repro -j2 --target train",
         "examples/reproduce.sh -b build/repro                # precision assignment: §1–4",
         "examples/reproduce_no_master.sh -b build/repro      # no fp32 master copy: §5",
         "examples/reproduce_dynamic.sh -b build/repro        # dynamic containers: §6",
         "python3 examples/results_cpp.py                     # this page from results/cpp/ only",
         "```", "",
         "Each script writes its runs under `results/cpp/PART/` (per run: the per-epoch CSV, the log, and a "
         "record written by `examples/run_record.py` with the command, the git commit and dirty flag, the train "
         "executable's SHA-256, its build's `CMAKE_BUILD_TYPE`, `CMAKE_CXX_FLAGS` and `MINIFLOAT_NN_GEMM`, the "
         "CPU model and the run's CPU seconds), two runs at a time under `nice`, skips a finished run, and ends "
         "by rewriting this page; `-n` lists its runs without running them. Commit the runs with "
         "`git add -f results/cpp` (the directory is ignored by default).", ""]
    per = defaultdict(lambda: {"runs": 0, "seconds": 0.0, "seeds": set(), "epochs": set(), "model": set()})
    for r in runs:
        p = per[r["part"]]
        p["runs"] += 1
        p["seconds"] += price(r)
        p["seeds"].add(r["seed"])
        p["epochs"].add(r["epochs"])
        p["model"].add(r["model"])
    body = []
    for part, (script, parts) in PARTS.items():
        p = per[part]
        counts = defaultdict(int)
        for r in runs:
            if r["part"] == part:
                counts[r["config"]] += 1
        seeds = sorted(set(counts.values()), reverse=True)
        rows, _ = load(os.path.join(data, part))
        done = sum(row.n for row in rows.values())
        cpu = sum(run.cpu for row in rows.values() for run in row.runs)
        body.append([f"`{part}`", f"`{script} {parts}`", str(p["runs"]), " / ".join(map(str, seeds)),
                     ", ".join(map(str, sorted(p["epochs"]))), ", ".join(sorted(p["model"])),
                     f"{p['seconds'] / 60:.1f}", str(done), f"{cpu / 60:.1f}" if done else "–"])
    total = sum(price(r) for r in runs)
    L += table(["results/cpp/…", "script and parts", "planned runs", "seeds per configuration", "epochs", "model",
                "estimated CPU minutes", "committed runs", "their CPU minutes (recorded)"], body)
    L += [f"**Estimated time of the whole plan: {total / 60:.0f} CPU minutes, about {total / 60 / CORES:.0f} "
          f"minutes on {CORES} idle cores** ({len(runs)} runs). This is an estimate, not a measurement: every "
          f"epoch is priced at {PRICE_PER_EPOCH['mlp']:g} s for the MLP and {PRICE_PER_EPOCH['cnn']:g} s for the "
          "CNN at width 0.25 (the recorded CPU time of the committed MLP and CNN runs over their epochs, start-up "
          "and evaluation included, two runs at a time on this 2-core machine), without the dynamic containers' "
          "extra work; a shared or loaded machine takes longer. Rows that carry a claim have 8 seeds; rows that "
          "are context (the all-high memory reference, op-variant, ours at r = 0 on the CNN, the dynamic "
          "containers' variants, the fused-update runs) have fewer and get no verdict.", ""]
    return L


def settings_section():
    return ["## What the trainer does and measures", "",
            "`examples/train` (docs/training.md) trains an MLP 784-512-512-10 (669 706 parameters) or a CNN at "
            "width 0.25 (conv-bn-relu-pool ×2 + linear, 8/16 channels, 9 122 parameters) on Fashion-MNIST (60 000 "
            "training, 10 000 test images) with every tensor emulated in its assigned format. Settings common to "
            "§1–4: the paper's precision candidates (high fp(6,9,0) everywhere; low fp(4,3,4) for activations and "
            "weights, fp(5,2,0) for activation gradients; weight gradients always high), its rounding "
            "(`--rounding nearest-away`, QPyTorch's \"nearest\"), promotion threshold Θ = 0.01, dynamic loss "
            "scaling (init 2^16, growth every epoch) except for fp32, SGD momentum 0.9, weight decay 5e-4, batch "
            "128, cosine schedule over the run, peak lr 0.05 (MLP) and 0.02 (CNN) unless stated.", "",
            "- **Low-precision ratio**: the share of the tensors' bits in the 8-bit formats, Σ_low n·(16−8) / "
            "Σ_all n·(16−8) over weights, activations, activation gradients and weight gradients at batch 128, "
            "averaged over the epochs (the paper's §5.2). It cannot reach 1 because weight gradients stay high.",
            "- **Memory vs all-high**: the model aggregate (bits of all those tensors) over the all-high one "
            "(= 1 − ratio/2). The trainer holds every activation as an fp32 array, so the bytes it measures do not "
            "depend on the assignment: the memory claims of §1–3 are tested in the paper's measure only.",
            "- **Promotion cost**: the low-precision ratio at the first step minus at the last, over 2: the "
            "aggregate's growth in units of all-high's (the paper's footnote 3 counts end minus start).", "",
            "Runs are deterministic for a given seed, build and CPU. Two things make them depend on the CPU: "
            "OpenBLAS (the default GEMM) picks its kernel per CPU model, and `-march=native` lets the compiler "
            "contract multiplies and adds into FMAs. For runs that compare across machines configure "
            "`-DMINIFLOAT_NN_GEMM=blocked -DCMAKE_CXX_FLAGS=-ffp-contract=off`; each run's record names its "
            "build's settings and CPU.", ""]


def _verdict_line(label, c):
    return f"- {label}: {c.text()}"


def tradeoff_section(data):
    L = ["## 1. Memory–accuracy trade-off (precision-assignment paper §5.3, Figures 3–4)", "",
         "The precision-assignment paper: Lee, Sharma, Aiken, *Training with Mixed-Precision Floating-Point "
         "Assignments*, TMLR 2023, arXiv:2301.13464 (§1–4 of this page). *Claims*: uniform low precision loses "
         "accuracy or diverges; size-ordered demotion (\"ours\") keeps accuracy at more than 2× the memory "
         "reduction of the operator-based assignment (op). fp32, all-high, "
         "uniform, op, op-variant and ours at the ratios that give distinct assignments (the MLP has four tensor "
         "groups, so r = 0.1–0.4 and 0.5–0.8 demote the same groups; ours at r = 0 is all-high and at r = 1 "
         "uniform, bit for bit). MLP 5 epochs; CNN at width 0.25, 2 epochs.", ""]
    for part, label in (("tradeoff", "MLP"), ("tradeoff-cnn", "CNN, width 0.25")):
        rows, unrecorded = load(os.path.join(data, part))
        L += [f"### {label}", ""]
        if "fp32" not in rows:
            L += [not_run(part), ""]
            continue
        fp32, ah = rows["fp32"], all_high_bits(rows)
        order = ["fp32", "all-high", "uniform", "op", "op-variant"] + sorted(c for c in rows if c.startswith("ours"))
        body = []
        for name in order:
            if name not in rows:
                continue
            row = rows[name]
            c = compare(row, fp32) if name != "fp32" else None
            body.append([name, str(row.n), *ratio_row_cells(row, ah), *acc_cells(row), f"{row.mean('best'):.2f}",
                         ci_cell(c) if c else "", verdict_cell(name, c),
                         f"{row.div('final')} / {row.div('any')}", f"{row.mean('promotions'):.1f}"])
        L += table(["configuration", "seeds", "low-precision ratio", "memory vs all-high", "final test acc. % (mean)",
                    "seed SD", "range", "best % (mean)", "Δ vs fp32, paired (95 % CI, MDE)", "verdict vs fp32",
                    "diverged (final / any epoch)", "promotions (mean)"], body)
        if "uniform" in rows:
            c = compare(rows["uniform"], fp32)
            u = rows["uniform"]
            holds = c.loses or any(r.diverged_final for r in u.runs)
            L.append(_verdict_line("*Uniform loses accuracy or diverges*: uniform − fp32", c)
                     + f"; diverged {u.div('final')} (final) / {u.div('any')} (any epoch). The claim "
                     + ("**holds here**." if holds else "**is not shown here**."))
        if "op" in rows:
            op_ratio = rows["op"].mean("low_ratio")
            over = [c for c in order if c.startswith("ours") and c in rows and rows[c].mean("low_ratio") > 2 * op_ratio]
            if not over:
                L.append(f"- *Ours keeps accuracy at more than 2× op's memory reduction*: no ours row reaches twice "
                         f"op's ratio ({op_ratio:.4f}): **untested here**.")
            for name in over:
                row = rows[name]
                vs_op, vs_fp32 = compare(row, rows["op"]), compare(row, fp32)
                L.append(f"- *Ours keeps accuracy at more than 2× op's memory reduction*: {name} (ratio "
                         f"{row.mean('low_ratio'):.4f} = {row.mean('low_ratio') / op_ratio:.1f}× op's). "
                         f"Against op: {vs_op.text()}. Against fp32: {vs_fp32.text()}. The claim "
                         + ("**holds here**." if vs_op.keeps and vs_fp32.keeps else "**is not shown here**."))
            L.append("- In measured bytes: **untested here** (the trainer holds activations as fp32 arrays; see "
                     "above).")
        if unrecorded:
            L.append(f"- Not used: {len(unrecorded)} CSV(s) without a record.")
        L.append("")
    return L


def order_section(data):
    L = ["## 2. Demotion order (precision-assignment paper §5.4, Figure 5)", "",
         "*Claim*: demoting tensor groups in decreasing size beats increasing and random order in the trade-off "
         "plane (a higher low-precision ratio at the same accuracy). Ours at r = 0.25, 0.5, 0.75 in each order; "
         "MLP, 5 epochs; random draws a different order per seed. The group that crosses r is demoted whole, so "
         "the orders reach different ratios at the same r.", ""]
    rows, _ = load(os.path.join(data, "order"))
    if not rows:
        return L + [not_run("order"), ""]
    body = []
    ratios = sorted({re.match(r"ours-r([0-9.]+)-", c).group(1) for c in rows}, key=float)
    for r in ratios:
        dec = rows.get(f"ours-r{r}-decreasing")
        for o in ("decreasing", "increasing", "random"):
            row = rows.get(f"ours-r{r}-{o}")
            if row is None:
                continue
            c = compare(dec, row) if dec and o != "decreasing" else None
            body.append([row.name, str(row.n), f"{row.mean('low_ratio'):.4f}", *acc_cells(row),
                         ci_cell(c) if c else "", c.verdict if c else "", f"{row.div('final')} / {row.div('any')}"])
    L += table(["configuration", "seeds", "low-precision ratio", "final test acc. % (mean)", "seed SD", "range",
                "decreasing − this, paired (95 % CI, MDE)", "verdict (decreasing vs this)", "diverged (final / any epoch)"],
               body)
    for r in ratios:
        dec = rows.get(f"ours-r{r}-decreasing")
        for o in ("increasing", "random"):
            other = rows.get(f"ours-r{r}-{o}")
            if dec is None or other is None:
                continue
            c = compare(dec, other)
            higher = dec.mean("low_ratio") >= other.mean("low_ratio")
            L.append(f"- r = {r}, decreasing vs {o}: ratio {dec.mean('low_ratio'):.4f} vs {other.mean('low_ratio'):.4f}; "
                     f"accuracy decreasing − {o}: {c.text()}. Decreasing "
                     + ("**is at least as good in the plane**" if higher and c.keeps else "**is not shown better**")
                     + " (a ratio at least as high, and accuracy kept by the rule).")
    return L + [""]


def _trajectory(data, rows):
    """The per-step overflow table of the first seed where uniform at lr 0.3 diverges without promotion and
    trains with it (both with --step-csv)."""
    off, on = rows.get("uniform-lr0.3-promo-off"), rows.get("uniform-lr0.3-promo-on")
    if off is None or on is None:
        return []
    trains = {r.seed for r in on.runs if not r.diverged_final}
    seed = next((r.seed for r in off.runs if r.diverged_final and r.seed in trains
                 and os.path.exists(r.path[:-4] + ".steps.csv.gz")), None)
    if seed is None:
        return ["No seed with a per-step CSV diverged without promotion and trained with it, so no trajectory is "
                "shown.", ""]
    L = [f"The overflow trajectory of uniform at lr 0.3, seed {seed} (the first seed that diverges without "
         "promotion and trains with it), from the per-step CSVs: the largest overflow ratio of a forward tensor "
         "(the tensors that overflowed most), the batch loss and the loss scale, at the first steps and at each "
         "epoch's last step.", ""]
    for name, row in (("no promotion", off), ("promotion (Θ = 0.01)", on)):
        run = next(r for r in row.runs if r.seed == seed)
        with gzip.open(run.path[:-4] + ".steps.csv.gz", "rt", newline="") as f:
            steps = list(csv.DictReader(f))
        last_of_epoch = {}
        for s in steps:
            last_of_epoch[s["epoch"]] = int(s["step"])
        wanted = sorted({0, 10, 20, 50, 100, 200, *last_of_epoch.values()})
        chosen = [s for s in steps if int(s["step"]) in wanted]
        cells = {"ratio": [], "loss": [], "scale": [], "skipped": []}
        for s in chosen:
            top = s["top_overflow"].replace(";", ", ")
            cells["ratio"].append("0" if _float(s["max_overflow"]) == 0 else f"{_float(s['max_overflow']):.3g} ({top})")
            cells["loss"].append(f"{_float(s['loss']):.3g}")
            cells["scale"].append(s["loss_scale"])
            cells["skipped"].append("yes" if s["skipped"] == "1" else "no")
        L += [f"uniform, lr 0.3, seed {seed}, {name}:", ""]
        L += table(["step", *[s["step"] for s in chosen]],
                   [["largest overflow ratio (tensors)", *cells["ratio"]], ["batch loss", *cells["loss"]],
                    ["loss scale", *cells["scale"]], ["skipped", *cells["skipped"]]])
    return L


def promotion_section(data):
    L = ["## 3. Promotion (precision-assignment paper §5.4, Figure 6)", "",
         "*Claim*: without promotion low-precision training can diverge, an overflow spike comes first, and "
         "promoting the overflowing tensors to high precision prevents the divergence at less than 3 % extra "
         "memory (end minus start of training, the paper's footnote 3). At the default learning rates no forward "
         "tensor overflows fp(4,3,4), so this part raises the MLP's rate to 0.2, 0.25 and 0.3 (4–6× its default): "
         "uniform and ours r = 0.5 (at 0.3) with and without promotion, and fp32 at each rate; 3 epochs. Whether "
         "fp32 itself trains at these rates is in the table: where it does not, the setting cannot show the "
         "paper's situation (a run fp32 handles and low precision breaks).", ""]
    rows, _ = load(os.path.join(data, "promotion"))
    if not rows:
        return L + [not_run("promotion"), ""]
    body = []
    for name in sorted(rows, key=lambda c: (re.search(r"lr([0-9.]+)", c).group(1), c)):
        row = rows[name]
        off = rows.get(name.replace("promo-on", "promo-off")) if name.endswith("promo-on") else None
        c = compare(row, off) if off else None
        costs = row.values("promotion_cost")
        body.append([name, str(row.n), f"{row.mean('low_ratio'):.4f}", *acc_cells(row),
                     f"{row.div('final')} / {row.div('any')}", f"{row.mean('promotions'):.1f}",
                     f"{100 * statistics.fmean(costs):.2f} (max {100 * max(costs):.2f})",
                     ci_cell(c) if c else "", c.verdict if c else ""])
    L += table(["configuration", "seeds", "low-precision ratio", "final test acc. % (mean)", "seed SD", "range",
                "diverged (final / any epoch)", "promotions (mean)", "promotion cost, % of all-high (mean, max)",
                "on − off, paired (95 % CI, MDE)", "verdict (on vs off)"], body)
    for name in sorted(c for c in rows if c.endswith("promo-on")):
        on, off = rows[name], rows.get(name.replace("promo-on", "promo-off"))
        if off is None:
            continue
        lr = re.search(r"lr([0-9.]+)", name).group(1)
        fp32 = rows.get(f"fp32-lr{lr}")
        base = name[:-len("-promo-on")]
        counts, verdicts = [], []
        for which, label in (("final", "final-accuracy"), ("any", "any-epoch")):
            diverged = [r.seed for r in off.runs if getattr(r, "diverged_" + which)]
            on_runs = {r.seed: r for r in on.runs}
            rescued = [sd for sd in diverged if sd in on_runs and not getattr(on_runs[sd], "diverged_" + which)]
            counts.append(f"{which}: {len(diverged)}/{off.n} diverge without promotion, {len(rescued)} of them "
                          "train with it")
            trained = [r.promotion_cost for r in on.runs if not getattr(r, "diverged_" + which)]
            if not diverged:
                v = "**is untested here** (no run diverged without promotion)"
            elif (trained and not any(getattr(r, "diverged_" + which) for r in on.runs)
                  and max(trained) < 0.03):
                v = "**holds here**"
            else:
                v = "**is not shown here**"
            verdicts.append(f"by the {label} definition {v}")
        trained_costs = [r.promotion_cost for r in on.runs if not r.diverged_final]
        cost = (f"cost in the runs that train: max {100 * max(trained_costs):.2f} % of all-high's aggregate"
                if trained_costs else "no run trains with promotion")
        fp32_text = f"fp32 at this rate diverged {fp32.div('final')} (final)" if fp32 else "no fp32 run at this rate"
        L.append(f"- {base}: {'; '.join(counts)}; {cost}; {fp32_text}. On − off: {compare(on, off).text()}. "
                 "*Promotion prevents divergence at < 3 % extra memory*: " + "; ".join(verdicts) + ".")
    L.append("")
    return L + _trajectory(data, rows)


def scaling_section(data):
    L = ["## 4. Loss scaling for the low-precision backward format fp(5,2,0)", "",
         "Uniform assignment (every activation gradient in fp(5,2,0)) with dynamic loss scaling on (GradScaler's "
         "rules) against off; MLP 5 epochs and CNN width 0.25 2 epochs. *Question*: does the 8-bit gradient format "
         "need loss scaling here?", ""]
    rows, _ = load(os.path.join(data, "scaling"))
    if not rows:
        return L + [not_run("scaling"), ""]
    body = []
    for name in sorted(rows):
        row = rows[name]
        off = rows.get(name.replace("-on", "-off")) if name.endswith("-on") else None
        c = compare(row, off) if off else None
        body.append([name, str(row.n), *acc_cells(row), f"{row.div('final')} / {row.div('any')}",
                     f"{row.mean('skipped'):.1f}", ci_cell(c) if c else "", c.verdict if c else ""])
    L += table(["configuration", "seeds", "final test acc. % (mean)", "seed SD", "range", "diverged (final / any epoch)",
                "skipped steps (mean)", "on − off, paired (95 % CI, MDE)", "verdict (on vs off)"], body)
    for name in sorted(c for c in rows if c.endswith("-on")):
        off = rows.get(name.replace("-on", "-off"))
        if off:
            L.append(_verdict_line(f"{name[:-3]}: scaling on − off", compare(rows[name], off)))
    return L + [""]


NO_MASTER_LABELS = {
    "fp32": "`--assignment fp32`", "fp32-master-amp": "`--format fp16` (fp32 master)",
}
STATE = ["weights", "extra_bits", "compute_copy", "gradients", "optimizer_state", "journal"]


def no_master_section(data, runs):
    L = ["## 5. No fp32 master copy: the extra-mantissa-bits paper's Table 3", "",
         "Lewandowski, Kosson, *Memory Efficient Mixed-Precision Optimizers*, arXiv:2309.12381, §4, Table 3 "
         "(ResNet-18 on CIFAR-10) compares fp32, mixed precision with an fp32 master copy, 16-bit weights alone, "
         "16-bit weights plus k extra mantissa bits, and fp8. *Claims*: the 16-bit rows with extra bits keep "
         "fp32's and mixed precision's accuracy; fp8 weights alone lose it and extra bits recover it. Here: the "
         "CNN at width 0.25, 3 epochs, rounding to nearest even, every low-precision row in `--assignment fixed` "
         "(compute format fp16 for fp8 weights, as the paper emulated fp8 on fp16); the storage rules are in "
         "[no-master-weights.md](no-master-weights.md). Memory is the trainer's measured peak of its own "
         "allocations (identical for every seed); \"model state\" is weights + extra bits + compute copy + "
         "gradients + optimizer state + journal at that peak.", ""]
    rows, _ = load(os.path.join(data, "no-master/table3"))
    if "fp32" not in rows:
        L += [not_run("no-master/table3"), ""]
    else:
        planned = []
        for r in runs:
            if r["part"] == "no-master/table3" and r["config"] not in planned:
                planned.append(r["config"])
        order = [c for c in planned if c in rows] + sorted(c for c in rows if c not in planned)
        fp32, amp = rows["fp32"], rows.get("fp32-master-amp")
        body = []
        for name in order:
            row = rows[name]
            mems = [r.mem for r in row.runs if r.mem]
            peak = statistics.fmean(int(m["peak_total"]) for m in mems) if mems else math.nan
            state = statistics.fmean(sum(int(m[c + "_at_peak"]) for c in STATE) for m in mems) if mems else math.nan
            stored = statistics.fmean(int(m["weights_at_peak"]) + int(m["extra_bits_at_peak"]) for m in mems) if mems else math.nan
            cf = compare(row, fp32) if name != "fp32" else None
            ca = compare(row, amp) if amp and name not in ("fp32", "fp32-master-amp") else None
            body.append([name, str(row.n), *acc_cells(row), ci_cell(cf) if cf else "", cf.verdict if cf else "",
                         ci_cell(ca) if ca else "", ca.verdict if ca else "", f"{peak:,.0f}", f"{state:,.0f}",
                         f"{stored:,.0f}", f"{row.mean('epoch_seconds'):.1f}", f"{row.mean('skipped'):.1f}"])
        L += table(["row", "seeds", "final test acc. % (mean)", "seed SD", "range", "Δ vs fp32 (95 % CI, MDE)",
                    "verdict vs fp32", "Δ vs fp32-master (95 % CI, MDE)", "verdict vs fp32-master", "peak memory (bytes)",
                    "model state (bytes)", "weights + extra bits (bytes)", "s / epoch", "skipped steps (mean)"], body)
        L.append("s / epoch is training time on a machine that ran two runs at a time and may have been shared: "
                 "not a speed measurement.")
        L.append("")
    fused, _ = load(os.path.join(data, "no-master/fused"))
    L += ["### Fused update (context: one seed, no verdict)", ""]
    if not fused:
        return L + [not_run("no-master/fused"), ""]
    body = []
    for name in sorted(fused):
        run = fused[name].runs[0]
        m = run.mem or {}
        body.append([name, str(run.seed), m.get("peak_total", "–"), m.get("gradients_at_peak", "–"),
                     m.get("journal_at_peak", "–"), f"{run.final:.2f}"])
    return L + table(["run", "seed", "peak memory (bytes)", "gradients at peak", "journal at peak",
                      "final test acc. %"], body)


def _mean_last(row, column, scale=1.0):
    v = [r.last(column) * scale for r in row.runs]
    v = [x for x in v if math.isfinite(x)]
    return f"{statistics.fmean(v):.2f}" if v else "–"


def dynamic_section(data):
    L = ["## 6. Dynamic containers: Schrödinger's FP", "",
         "Nikolić et al., *Schrödinger's FP: Dynamic Adaptation of Floating-Point Containers for Deep Learning "
         "Training*, MLSys 2024, arXiv:2204.13666, §3–4, Table 1. *Claims*: Quantum Mantissa + Quantum Exponent "
         "(QM+QE) and BitWave shrink the stored weights and activations without losing accuracy (QM+QE within "
         "0.4 % of FP32), QM+QE more than BitWave; Gecko (+G) compresses the exponents further. Here: the MLP for "
         "8 epochs and the CNN at width 0.25 for 6, the implementation of docs/dynamic-containers.md with its "
         "defaults (γ_m = γ_e = 0.1, the paper's; learn 5 epochs then freeze; BitWave fixed after 5 epochs), "
         "variants on the MLP at γ = 0.01 and 0.03, with the linearised exponent gradient, and with our improved "
         "Gecko (context: 3 seeds, no verdict). Footprint reductions are cumulative over the whole run "
         "(every step's stored weights and activations, the learning epochs included) against FP32.", ""]
    for part, label in (("dynamic/mlp", "MLP"), ("dynamic/cnn", "CNN, width 0.25")):
        rows, _ = load(os.path.join(data, part))
        L += [f"### {label}", ""]
        if "fp32" not in rows:
            L += [not_run(part), ""]
            continue
        fp32 = rows["fp32"]
        body = []
        for name in ["fp32"] + sorted(c for c in rows if c != "fp32"):
            row = rows[name]
            c = compare(row, fp32) if name != "fp32" else None
            red = [_mean_last(row, "red_" + v) + ("×" if name != "fp32" else "")
                   for v in ("qm", "qe", "qe_g", "qm_qe", "qm_qe_g")] if name != "fp32" else [""] * 5
            body.append([name, str(row.n), *acc_cells(row), ci_cell(c) if c else "", verdict_cell(name, c), *red])
        L += table(["run", "seeds", "final test acc. % (mean)", "seed SD", "range", "Δ vs fp32 (95 % CI, MDE)",
                    "verdict vs fp32", "QM / BWM", "QE / BWE", "QE+G / BWE+G", "QM+QE / BWM+BWE",
                    "QM+QE+G / BWM+BWE+G"], body)
        for name in ("qm-qe+gecko", "bitwave+gecko"):
            if name in rows:
                L.append(_verdict_line(f"{name} − fp32", compare(rows[name], fp32)))
        L.append("")
        dyn = [c for c in ("qm-qe+gecko", "bitwave+gecko") if c in rows]
        if dyn:
            L += ["Weights vs activations and the last epoch's bits per value (mean over seeds):", ""]
            body = []
            for name in dyn:
                row = rows[name]
                body.append([name, _mean_last(row, "red_qm_qe_w") + "×", _mean_last(row, "red_qm_qe_a") + "×",
                             f"{_mean_last(row, 'w_mantissa_share', 100)} / {_mean_last(row, 'a_mantissa_share', 100)}",
                             f"{_mean_last(row, 'w_exponent_share', 100)} / {_mean_last(row, 'a_exponent_share', 100)}",
                             f"{_mean_last(row, 'w_gecko_exponent_share')} / {_mean_last(row, 'a_gecko_exponent_share')}",
                             f"{_mean_last(row, 'w_total_mean')} / {_mean_last(row, 'a_total_mean')}"])
            L += table(["run", "M+E weights", "M+E activations", "mantissa % of FP32 (W / A)",
                        "exponent % of FP32 (W / A)", "Gecko exponent ratio (W / A)", "last-epoch bits/value (W / A)"],
                       body)
            L += ["Bitlengths over training (stored bits per value, sign + exponent + mantissa, mean over tensors "
                  "and seeds; W / A):", ""]
            epochs = min(len(r.rows) for c in dyn for r in rows[c].runs)
            body = []
            for name in dyn:
                cells = []
                for e in range(epochs):
                    w = statistics.fmean(_float(r.rows[e]["w_total_mean"]) for r in rows[name].runs)
                    a = statistics.fmean(_float(r.rows[e]["a_total_mean"]) for r in rows[name].runs)
                    cells.append(f"{w:.1f} / {a:.1f}")
                body.append([name, *cells])
            L += table(["run", *[f"epoch {e + 1}" for e in range(epochs)]], body)
            L += _per_tensor(rows, dyn)
    return L


def _per_tensor(rows, configs):
    """Each tensor's stored mantissa / exponent bits in the last epoch, mean over seeds (--dc-tensor-csv)."""
    bits, numel, order = defaultdict(list), {}, []
    for name in configs:
        for run in rows[name].runs:
            path = run.path[:-4] + ".tensors.csv"
            if not os.path.exists(path):
                continue
            with open(path, newline="") as f:
                trows = list(csv.DictReader(f))
            last = max(int(r["epoch"]) for r in trows)
            for r in trows:
                if int(r["epoch"]) != last:
                    continue
                if r["tensor"] not in order:
                    order.append(r["tensor"])
                numel[r["tensor"]] = r["numel"]
                bits[name, r["tensor"]].append((_float(r["mean_mantissa_bits"]), _float(r["mean_exponent_bits"])))
    if not order:
        return []
    body = []
    for t in order:
        cells = []
        for name in configs:
            b = bits.get((name, t))
            cells.append(f"{statistics.fmean(m for m, _ in b):.1f} / {statistics.fmean(e for _, e in b):.1f}" if b else "–")
        body.append([t, numel[t], *cells])
    return (["Each tensor's stored bits in the last epoch (mantissa / exponent, mean over seeds):", ""]
            + table(["tensor", "elements", *configs], body))


def provenance_section(data):
    L = ["## Provenance", "",
         "What every committed run recorded (`examples/run_record.py`): the commits it ran on, whether tracked "
         "files differed from them, the build and the CPU.", ""]
    body = []
    for part in PARTS:
        rows, unrecorded = load(os.path.join(data, part))
        runs = [r for row in rows.values() for r in row.runs]
        if not runs:
            continue
        commits = sorted({(r.meta.get("commit") or "?")[:10] for r in runs})
        dirty = sum(bool(r.meta.get("dirty")) for r in runs)
        builds = sorted({" ".join(f"{k}={v!r}" if v == "" else f"{k}={v}" for k, v in (r.meta.get("build") or {}).items())
                         for r in runs})
        shas = sorted({(r.meta.get("train_sha256") or "?")[:12] for r in runs})
        cpus = sorted({r.meta.get("cpu_model") or "?" for r in runs})
        finished = sorted(r.meta.get("finished", "") for r in runs)
        body.append([f"`{part}`", str(len(runs)), ", ".join(commits), f"{dirty}/{len(runs)}", "; ".join(builds),
                     ", ".join(shas), "; ".join(cpus), f"{finished[0]} – {finished[-1]}",
                     f"{sum(r.cpu for r in runs) / 60:.1f}", str(len(unrecorded))])
    if not body:
        return L + ["No run is committed at this commit.", ""]
    return L + table(["part", "runs", "commits", "dirty", "build", "train SHA-256", "CPU", "finished (UTC)",
                      "CPU minutes", "CSVs without a record (not used)"], body)


def document(data, runs=None):
    runs = plan() if runs is None else runs
    L = ["# Reproduction on Fashion-MNIST with the C++ trainer: precision assignment, no fp32 master copy, dynamic "
         "containers", "",
         "This page is written by `examples/results_cpp.py` from the runs committed under `results/cpp/`; do not "
         "edit it by hand. A test (`python/tests/test_results_cpp.py`) checks that the script rewrites it byte for "
         "byte from that data. Every verdict is the rule below. What the papers claim, tested with the example "
         "trainer `examples/train` (docs/training.md) on small networks; the PyTorch reproduction on a residual "
         "model is [results-torch.md](results-torch.md).", "",
         "The tables this page showed earlier (3–5 seeds, pasted script output and two tables written by hand) are "
         "withdrawn: their raw CSVs were never committed and their runs recorded no commit, so they can be neither "
         "regenerated nor checked.", ""]
    L += rule_section() + plan_section(runs, data) + settings_section()
    L += tradeoff_section(data) + order_section(data) + promotion_section(data) + scaling_section(data)
    L += no_master_section(data, runs) + dynamic_section(data) + provenance_section(data)
    while L and L[-1] == "":
        L.pop()
    return "\n".join(L) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description="docs/results.md from the C++ trainer's committed runs")
    parser.add_argument("--data", default=os.path.join(ROOT, "results", "cpp"), help="the runs (default results/cpp)")
    parser.add_argument("--write", default=os.path.join(ROOT, "docs", "results.md"), help="the document to write")
    parser.add_argument("--plan", action="store_true", help="print the planned runs and the estimate; write nothing")
    args = parser.parse_args(argv)
    runs = plan()
    if args.plan:
        for r in runs:
            print(f"{r['part']}/{r['config']}-s{r['seed']}: {r['epochs']} epochs {r['model']} ~{price(r):.0f} s")
        total = sum(price(r) for r in runs)
        print(f"{len(runs)} runs, estimated {total / 60:.0f} CPU minutes = about {total / 60 / CORES:.0f} minutes "
              f"on {CORES} idle cores")
        return 0
    if not os.path.isdir(args.data):
        print(f"results_cpp.py: no runs under {args.data}: every part of the page says \"not run\"", file=sys.stderr)
    text = document(args.data, runs)
    with open(args.write, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
