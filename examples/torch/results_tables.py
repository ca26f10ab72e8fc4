"""docs/results-torch.md from the reproduction's CSVs (examples/torch/reproduce.py calls document()).

Every number in the document is computed here from the CSVs train.py wrote and the timing files
reproduce.py wrote next to them; nothing is typed in by hand. The claim checks at the top are
sentences built from the same numbers with the criteria stated in the document.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import time

DIVERGED_BELOW = 0.20   # some epoch's test accuracy under this (10 classes: chance is 0.10), or a non-finite loss


# -- reading ------------------------------------------------------------------------------------

class Run:
    """One (configuration, seed): its CSV rows and timing."""

    def __init__(self, path):
        with open(path, newline="") as f:
            self.rows = list(csv.DictReader(f))
        meta = path[:-4] + ".json"
        self.meta = json.load(open(meta)) if os.path.exists(meta) else {}
        last = self.rows[-1]
        self.loss = float(last["train_loss"])
        self.test = float(last["test_accuracy"])
        self.diverged = any(not math.isfinite(float(r["train_loss"])) or float(r["test_accuracy"]) < DIVERGED_BELOW
                            for r in self.rows)
        self.low_ratio = statistics.fmean(float(r["low_ratio"]) for r in self.rows)   # the paper's: mean over epochs
        self.bits = statistics.fmean(float(r["paper_total_bits"]) for r in self.rows)
        self.promotions = sum(int(r["promotions"]) for r in self.rows)
        self.skipped = sum(int(r["skipped_steps"]) for r in self.rows)
        peak = lambda col: max(int(r[col]) for r in self.rows)   # noqa: E731
        self.act = peak("saved_activation_peak_bytes")
        self.act_fp32 = peak("saved_activation_fp32_peak_bytes")
        self.weight = peak("saved_weight_peak_bytes")
        self.other = peak("saved_other_peak_bytes")
        self.opt = peak("optimizer_weight_bytes") + peak("optimizer_state_bytes")
        self.extra = {k: v for k, v in last.items() if k not in _KNOWN}

    @property
    def measured(self):
        """Measured peak bytes: saved activations + saved weight copies + other saved tensors +
        the optimizer's weights and state (each the peak over the run's epochs)."""
        return self.act + self.weight + self.other + self.opt


_KNOWN = {"epoch", "train_loss", "train_accuracy", "test_accuracy", "steps", "skipped_steps", "loss_scale", "promotions",
          "low_ratio", "paper_total_bits", "saved_activation_peak_bytes", "saved_activation_fp32_peak_bytes",
          "saved_weight_peak_bytes", "saved_other_peak_bytes", "optimizer_weight_bytes", "optimizer_state_bytes",
          "seconds"}


class Row:
    """A configuration over its seeds."""

    def __init__(self, cfg, runs):
        self.cfg, self.runs = cfg, runs

    @property
    def n(self):
        return len(self.runs)

    def _mean(self, attr):
        return statistics.fmean(getattr(r, attr) for r in self.runs)

    @property
    def acc(self):
        return self._mean("test")

    @property
    def lo(self):
        return min(r.test for r in self.runs)

    @property
    def hi(self):
        return max(r.test for r in self.runs)

    @property
    def ratio(self):
        return self._mean("low_ratio")

    @property
    def bits(self):
        return self._mean("bits")

    @property
    def act(self):
        return self._mean("act")

    @property
    def diverged(self):
        return sum(r.diverged for r in self.runs)


def load(out, cfgs, seeds):
    rows = {}
    for c in cfgs:
        runs = [Run(c.csv(out, s)) for s in seeds if os.path.exists(c.csv(out, s))]
        rows[(c.part, c.name)] = Row(c, runs) if runs else None
    return rows


# -- formatting ---------------------------------------------------------------------------------

def pct(x, digits=1):
    return f"{100 * x:.{digits}f}"


def acc_cell(row):
    if row is None:
        return "not run", "", ""
    rng = f"{pct(row.lo)}–{pct(row.hi)}" if row.n > 1 else "(1 seed)"
    return pct(row.acc), rng, str(row.n)


def mib(b):
    return f"{b / 2**20:.2f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def assignment_table(rows, keys, fp32, all_high, note_shared=()):
    """Accuracy against low-precision ratio with the measured memory of each row."""
    header = ["assignment", "seeds", "low-precision ratio", "test acc. % (mean)", "range", "Δ vs fp32 (points)",
              "diverged", "saved activations MiB", "× fp32", "saved weights MiB", "other MiB",
              "optimizer MiB", "total measured MiB", "paper aggregate × all-high"]
    body = []
    for part, name in keys:
        row = rows.get((part, name))
        label = (row.cfg.label if row else _label(name)) + (" (§1's runs)" if (part, name) in note_shared else "")
        if row is None:
            body.append([label, 0, "", "not run"] + [""] * (len(header) - 4))
            continue
        a, rng, n = acc_cell(row)
        delta = f"{100 * (row.acc - fp32.acc):+.1f}" if fp32 else ""
        r0 = row.runs[0]
        body.append([
            label, n, f"{row.ratio:.3f}", a, rng, delta, f"{row.diverged}/{row.n}", mib(row.act),
            f"{row.act / r0.act_fp32:.3f}", mib(statistics.fmean(r.weight for r in row.runs)),
            mib(statistics.fmean(r.other for r in row.runs)), mib(statistics.fmean(r.opt for r in row.runs)),
            mib(statistics.fmean(r.measured for r in row.runs)),
            f"{row.bits / all_high.bits:.3f}" if all_high else ""])
    return table(header, body)


def _label(name):
    """A row's label when it has no runs (the Config's label otherwise)."""
    for order in ("increasing", "random"):
        if name.startswith(order + "-"):
            return f"ours[{order}] r={name[len(order) + 1:]}"
    return name.replace("ours-", "ours r=")


def order_table(rows, part_of, ratios):
    header = ["r", "order", "seeds", "low-precision ratio", "test acc. % (mean)", "range", "diverged",
              "saved activations MiB", "total measured MiB"]
    body = []
    for r in ratios:
        for o in ("decreasing", "increasing", "random"):
            key = part_of(r, o)
            row = rows.get(key)
            if row is None:
                body.append([r, o, 0, "", "not run", "", "", "", ""])
                continue
            a, rng, n = acc_cell(row)
            body.append([r, o + (" (paper's)" if o == "decreasing" else ""), n, f"{row.ratio:.3f}", a, rng,
                         f"{row.diverged}/{row.n}", mib(row.act), mib(statistics.fmean(r.measured for r in row.runs))])
    return table(header, body)


def promotion_table(rows, all_high):
    header = ["assignment (lr 0.05)", "seeds", "test acc. % (mean)", "range", "diverged", "skipped steps (mean)",
              "promotions (mean)", "low-precision ratio", "paper aggregate × all-high",
              "extra vs none, % of all-high aggregate", "saved activations MiB", "total measured MiB", "extra vs none, % of all-high's measured total"]
    body = []
    for name in ("fp32", "uniform-none", "uniform-promo", "ours-0.5-none", "ours-0.5-promo", "ours-0.9-none",
                 "ours-0.9-promo"):
        row = rows.get(("promotion", name))
        if row is None:
            body.append([name, 0, "not run"] + [""] * (len(header) - 3))
            continue
        a, rng, n = acc_cell(row)
        extra_bits = extra_meas = ""
        if name.endswith("-promo"):
            base = rows.get(("promotion", name[:-6] + "-none"))
            if base is not None and all_high is not None:
                extra_bits = f"{100 * (row.bits - base.bits) / all_high.bits:+.2f}"
                base_total = statistics.fmean(r.measured for r in base.runs)
                ah_total = statistics.fmean(r.measured for r in all_high.runs)
                extra_meas = f"{100 * (statistics.fmean(r.measured for r in row.runs) - base_total) / ah_total:+.2f}"
        body.append([row.cfg.label, n, a, rng, f"{row.diverged}/{row.n}",
                     f"{statistics.fmean(r.skipped for r in row.runs):.1f}",
                     f"{statistics.fmean(r.promotions for r in row.runs):.1f}", f"{row.ratio:.3f}",
                     f"{row.bits / all_high.bits:.3f}" if all_high else "", extra_bits, mib(row.act),
                     mib(statistics.fmean(r.measured for r in row.runs)), extra_meas])
    return table(header, body)


def _num(run, col):
    v = run.extra.get(col)
    try:
        return float(v) if v not in (None, "") else None
    except ValueError:
        return None


def _spread_cell(row, cls, comp):
    """Stored bits per value of a tensor class, last epoch: the seeds' mean of the per-tensor mean,
    with the smallest and largest tensor over all seeds."""
    means = [_num(r, f"{cls}_{comp}_mean") for r in row.runs]
    lows = [_num(r, f"{cls}_{comp}_min") for r in row.runs]
    highs = [_num(r, f"{cls}_{comp}_max") for r in row.runs]
    if any(v is None for v in means + lows + highs):
        return ""
    return f"{statistics.fmean(means):.1f} [{min(lows):.1f}–{max(highs):.1f}]"


def _mean_cell(row, col, fmt="{:.2f}"):
    vals = [_num(r, col) for r in row.runs]
    vals = [v for v in vals if v is not None]
    return fmt.format(statistics.fmean(vals)) if vals else ""


def dynamic_keys(cfgs):
    return [(c.part, c.name) for c in cfgs if c.part == "dynamic"]


def dynamic_table(rows, keys):
    header = ["method", "seeds", "test acc. % (mean)", "range", "diverged", "learning in last epoch",
              "weights: mantissa bits", "exponent bits", "total bits", "activations: mantissa bits", "exponent bits",
              "total bits", "footprint reduction vs fp32 (all / weights / activations)", "BitWave container mantissa bits "
              "(last / running mean)", "saved activations MiB"]
    body = []
    for k in keys:
        row = rows.get(k)
        if row is None:
            body.append([k[1], 0, "not run"] + [""] * (len(header) - 3))
            continue
        a, rng, n = acc_cell(row)
        learning = sum(_num(r, "dc_learning") == 1 for r in row.runs)
        red = " / ".join(_mean_cell(row, c) + "×" for c in ("red_qm_qe", "red_qm_qe_w", "red_qm_qe_a"))
        bw = ""
        if _num(row.runs[0], "bw_mantissa_bits") is not None:
            bw = _mean_cell(row, "bw_mantissa_bits", "{:.1f}") + " / " + _mean_cell(row, "bw_mean_mantissa", "{:.1f}")
        body.append([row.cfg.label, n, a, rng, f"{row.diverged}/{row.n}", f"{learning}/{row.n}",
                     _spread_cell(row, "w", "mantissa"), _spread_cell(row, "w", "exponent"),
                     _spread_cell(row, "w", "total"), _spread_cell(row, "a", "mantissa"),
                     _spread_cell(row, "a", "exponent"), _spread_cell(row, "a", "total"), red, bw, mib(row.act)])
    return table(header, body)


# -- claims -------------------------------------------------------------------------------------

def _below(row, ref):
    """Loses accuracy: every seed of `row` is below every seed of `ref` (disjoint ranges)."""
    return row.hi < ref.lo


def _verdict(yes):
    return "**reproduces**" if yes else "**does not reproduce**"


def claims(rows, regime_name, part, fp32, all_high, ratios, order_key):
    out = []
    uni = rows.get((part, "uniform"))
    if uni and fp32:
        lost = _below(uni, fp32)
        out.append(f"- *Uniform low precision loses accuracy* ({regime_name}): uniform {pct(uni.acc)} % "
                   f"({pct(uni.lo)}–{pct(uni.hi)}) against fp32 {pct(fp32.acc)} % ({pct(fp32.lo)}–{pct(fp32.hi)}), "
                   f"Δ {100 * (uni.acc - fp32.acc):+.1f} points, {uni.diverged}/{uni.n} runs diverged: "
                   + (_verdict(True) + " (every uniform seed below every fp32 seed)." if lost else
                      _verdict(False) + " by our criterion (the seed ranges overlap)."))
    op = rows.get((part, "op"))
    ours = [(r, rows.get((part, f"ours-{r}"))) for r in ratios]
    ours = [(r, row) for r, row in ours if row is not None]
    if op and fp32 and all_high and ours:
        kept = [(r, row) for r, row in ours if not _below(row, fp32)]
        best = max(kept, key=lambda t: t[1].ratio) if kept else None
        ah_act = all_high.act
        if best:
            r, row = best
            factor = row.ratio / op.ratio if op.ratio > 0 else float("inf")
            red_ours, red_op = ah_act - row.act, ah_act - op.act
            out.append(
                f"- *Size-ordered demotion keeps accuracy at > 2× the memory reduction of op* ({regime_name}): the "
                f"largest r whose seeds are not all below fp32's is r = {r}: {pct(row.acc)} % ({pct(row.lo)}–"
                f"{pct(row.hi)}) at low-precision ratio {row.ratio:.3f}, {factor:.2f}× op's {op.ratio:.3f} "
                f"(op: {pct(op.acc)} %). Measured saved activations: {mib(row.act)} MiB against op's {mib(op.act)} MiB "
                f"and all-high's {mib(ah_act)} MiB, a reduction from all-high {red_ours / red_op:.2f}× op's; "
                f"{row.runs[0].act_fp32 / row.act:.2f}× less than fp32 storage. In the paper's measure (the "
                f"low-precision ratio) the claim " + _verdict(factor > 2) + "; in measured saved-activation bytes "
                "(reduction from all-high against op's) it " + _verdict(red_ours > 2 * red_op) + ".")
        else:
            out.append(f"- *Size-ordered demotion keeps accuracy at > 2× memory reduction* ({regime_name}): every "
                       f"ratio tried lost accuracy against fp32: " + _verdict(False) + ".")
    wins = total = 0
    details = []
    for r in (0.5, 0.7):
        d, i, rnd = (rows.get(order_key(r, o)) for o in ("decreasing", "increasing", "random"))
        if d and i and rnd:
            total += 1
            won = d.acc > i.acc and d.acc > rnd.acc
            wins += won
            details.append(f"r = {r}: decreasing {pct(d.acc)} %, increasing {pct(i.acc)} %, random {pct(rnd.acc)} %")
    if total:
        out.append(f"- *Decreasing order beats increasing and random* ({regime_name}): " + "; ".join(details) +
                   f". Decreasing has the highest mean at {wins} of {total} ratios: "
                   + (_verdict(True) if wins == total else _verdict(False) if wins == 0 else "**partly reproduces**")
                   + ".")
    return out


def promotion_claim(rows, all_high):
    pairs = []
    for a in ("uniform", "ours-0.5", "ours-0.9"):
        none, promo = rows.get(("promotion", f"{a}-none")), rows.get(("promotion", f"{a}-promo"))
        if none and promo:
            pairs.append((a, none, promo))
    if not pairs or all_high is None:
        return []
    parts, rescued, cheap, any_div = [], True, True, False
    for a, none, promo in pairs:
        extra = 100 * (promo.bits - none.bits) / all_high.bits
        ah_total = statistics.fmean(r.measured for r in all_high.runs)
        extra_meas = 100 * (statistics.fmean(r.measured for r in promo.runs)
                            - statistics.fmean(r.measured for r in none.runs)) / ah_total
        parts.append(f"{a.replace('-', ' r=')}: {none.diverged}/{none.n} diverged without promotion, "
                     f"{promo.diverged}/{promo.n} with ({pct(none.acc)} % → {pct(promo.acc)} % final), "
                     f"extra {extra:+.2f} % of the all-high aggregate ({extra_meas:+.2f} % of all-high's measured "
                     f"total)")
        if none.diverged:
            any_div = True
            rescued &= promo.diverged == 0
            cheap &= extra < 3
    fp32 = rows.get(("promotion", "fp32"))
    fp32_note = (f" fp32 at the same rate: {pct(fp32.acc)} %, {fp32.diverged}/{fp32.n} diverged." if fp32 else "")
    verdict = (_verdict(rescued and cheap) if any_div else "**not tested** (nothing diverged without promotion)")
    if any_div and rescued and not cheap:
        verdict = "**partly reproduces** (divergence prevented, but at ≥ 3 % extra)"
    return [f"- *Promotion prevents divergence at < 3 % extra memory* (learning rate 0.05): " + "; ".join(parts) +
            "." + fp32_note + " " + verdict + "."]


# -- timing -------------------------------------------------------------------------------------

def timing(out, rows, cfgs, seeds):
    runs = [r for row in rows.values() if row for r in row.runs if r.meta]
    if not runs:
        return ["- nothing has run yet."]
    cpu_of = lambda r: r.meta["cpu_user_s"] + r.meta["cpu_sys_s"]   # noqa: E731
    cpu = sum(cpu_of(r) for r in runs)
    wall = sum(r.meta["wall_s"] for r in runs)
    lines = [f"- **Measured:** {len(runs)} runs took **{cpu / 60:.1f} CPU-minutes** (user + system of every train.py "
             f"process, from `wait4`), i.e. **{cpu / 120:.1f} minutes of two fully used cores**; their own wall times "
             f"add up to {wall / 60:.1f} minutes (several ran at a time)."]
    by_part = {}
    for row in rows.values():
        if row:
            for r in row.runs:
                if r.meta:
                    by_part.setdefault(row.cfg.part, []).append(cpu_of(r))
    lines.append("- CPU per run, by part: " + ", ".join(
        f"{p} {statistics.fmean(v):.0f} s ({len(v)} runs)" for p, v in by_part.items()) + ".")
    overall = cpu / len(runs)
    planned = [(c, sd) for c in cfgs for sd in seeds]
    estimate = sum(statistics.fmean(by_part[c.part]) if c.part in by_part else overall for c, _ in planned)
    lines.append(f"- **The whole plan** ({len(planned)} runs: every row below with seeds "
                 f"{', '.join(map(str, seeds))}), at each part's measured CPU per run: about **{estimate / 60:.0f} "
                 f"CPU-minutes = {estimate / 120:.0f} minutes on two cores** (an estimate from the measured runs, "
                 "not a measurement of the whole), "
                 + ("within" if estimate / 120 < 60 else "**over**") + " the issue's 60 minutes.")
    import calendar
    ends = [calendar.timegm(time.strptime(r.meta["finished"], "%Y-%m-%dT%H:%M:%SZ")) for r in runs]
    starts = [e - r.meta["wall_s"] for e, r in zip(ends, runs)]
    lines.append(f"- **Wall on this machine:** from the first run's start ({time.strftime('%H:%M', time.gmtime(min(starts)))} "
                 f"UTC) to the last run's end ({time.strftime('%H:%M', time.gmtime(max(ends)))} UTC): "
                 f"**{(max(ends) - min(starts)) / 60:.1f} minutes**, while other engineers' builds and benchmarks "
                 "shared the two cores (load averages below); that is why wall time is far above CPU time / 2. "
                 "Accuracies do not depend on load.")
    ledger = os.path.join(out, "sessions.json")
    sessions = sorted(json.load(open(ledger)) if os.path.exists(ledger) else [], key=lambda x: x["started"])
    for x in sessions:
        lines.append(f"- reproduce.py session from {x['started'][11:16]} UTC ({', '.join(x['parts'])}; seeds "
                     f"{', '.join(map(str, x['seeds']))}; {x['jobs']} at a time"
                     + ("; stopped early by SIGTERM" if x.get("interrupted") else "")
                     + f"): {x['wall_s'] / 60:.1f} minutes wall, {x['cpu_children_s'] / 60:.1f} CPU-minutes; "
                     f"load average (1/5/15 min) {'/'.join(f'{v:.1f}' for v in x['loadavg_start'])} at its start, "
                     f"{'/'.join(f'{v:.1f}' for v in x['loadavg_end'])} at its end.")
    rss = max(r.meta["max_rss_kb"] for r in runs)
    lines.append(f"- Largest resident set of one run: {rss / 1024:.0f} MiB.")
    return lines


def _last_is_best(rows):
    runs = [r for row in rows.values() if row for r in row.runs]
    best = sum(float(r.rows[-1]["test_accuracy"]) >= max(float(x["test_accuracy"]) for x in r.rows) for r in runs)
    return f"the last epoch is also the best in {best} of our {len(runs)} runs"


def _harsh_note(rows, fp32):
    uni = rows.get(("assign", "uniform"))
    done = sum(row.n for k, row in rows.items() if k[0] == "harsh" and row)
    if uni is None or fp32 is None:
        return ""
    if _below(uni, fp32):
        return (f"The paper's formats already cost accuracy here (uniform {pct(uni.acc)} % against fp32 "
                f"{pct(fp32.acc)} %, §1), so the issue does not require this regime; reproduce.py runs it after "
                f"everything else" + (" and none of its runs was done in the time given." if done == 0 else "."))
    return "The paper's formats cost no accuracy by our criterion in §1, so this regime is where the trade-off shows."


def _shape(out, cfgs, seeds):
    """The trainer's own account of the instrumented model, from the first run log there is."""
    for c in cfgs:
        for sd in seeds:
            log = c.csv(out, sd)[:-4] + ".log"
            if os.path.exists(log):
                with open(log) as f:
                    for line in f:
                        if " sites in " in line and " groups" in line:
                            head = line.split(";")[0]
                            return head.split(": ", 1)[1] + " (as train.py reports)"
    return ""


# -- the document -------------------------------------------------------------------------------

def document(out, cfgs, seeds, s):
    rows = load(out, cfgs, seeds)
    fp32 = rows.get(("assign", "fp32"))
    all_high = rows.get(("assign", "all-high"))
    main_keys = [("assign", n) for n in ("fp32", "all-high", "uniform", "op", "op-variant", "ours-0.3", "ours-0.5",
                                          "ours-0.7", "ours-0.9")]
    harsh_keys = [("assign", "fp32"), ("assign", "all-high")] + [("harsh", n) for n in (
        "uniform", "op", "op-variant", "ours-0.3", "ours-0.5", "ours-0.7", "increasing-0.5", "random-0.5")]

    def main_order(r, o):
        return ("assign", f"ours-{r}") if o == "decreasing" else ("order", f"{o}-{r}")

    def harsh_order(r, o):
        return ("harsh", f"ours-{r}" if o == "decreasing" else f"{o}-{r}")

    missing = []
    for c in cfgs:
        gone = [str(sd) for sd in seeds if not os.path.exists(c.csv(out, sd))]
        if gone:
            missing.append(f"{c.part}/{c.name} (seed{'s' if len(gone) > 1 else ''} {', '.join(gone)})")
    shape = _shape(out, cfgs, seeds)
    channels = "/".join(str(max(1, round(b * s["width"]))) for b in (16, 32, 64))
    cmd = "train.py " + " ".join(s["common"])
    L = []
    L += ["# Reproduction on PyTorch models: precision assignment, demotion order, promotion, dynamic bitlengths", ""]
    L += ["This file is written by `examples/torch/reproduce.py` (tables and claim checks by "
          "`examples/torch/results_tables.py`) from the CSVs of the runs it made; do not edit it by hand. "
          "It tests the claims of Lee, Sharma, Aiken, *Training with Mixed-Precision Floating-Point Assignments*, "
          "TMLR 2023, arXiv:2301.13464 (§5.3 Figure 4, §5.4 Figures 5–6) with `minifloat.training` "
          "([torch-training.md](torch-training.md)) on a real residual network.", ""]
    L += ["## Set-up (a short schedule, stated)", ""]
    L += [f"- Model: CIFAR-style **ResNet-20** (three stages of three basic blocks, option-B 1×1 shortcuts) at "
          f"**width {s['width']}** ({channels} channels), `examples/torch/models.py`" + (f"; {shape}." if shape else "."),
          f"- Data: Fashion-MNIST from Debian's `dataset-fashion-mnist` IDX files: the **first {s['train_limit']} "
          f"training images**, **{s['epochs']} epochs**, batch {s['batch']}; accuracy is the **final epoch's** "
          f"test accuracy on the **first {s['test_limit']} test images** (the paper reports the best epoch; "
          + _last_is_best(rows) + ").",
          f"- Optimizer: Adam, learning rate {s['lr']} (fp32 master weights), dynamic loss scaling (GradScaler's "
          f"rules, growth interval one epoch) in every run including fp32, round-to-nearest-even at every site.",
          "- Formats: the paper's §5.2 candidates: high fp(6,9,0) for every tensor; low fp(4,3,4) for activations Y "
          "and weights P, fp(5,2,0) for activation gradients GY (weight gradients GP always high). "
          f"The **harsher regime** (§4) lowers Y and P to `{s['harsh_forward']}` (6 bits, largest finite 7) and GY "
          f"to `{s['harsh_backward']}` (7 bits), high formats unchanged.",
          "- Low-precision ratio: the paper's (share of the saveable bits of Y, GY, P, GP held in low precision, "
          "from `minifloat::training::measure_footprint`), averaged over the run's steps and epochs. "
          "\"paper aggregate × all-high\" is the computed total bit count relative to all-high's.",
          "- Measured memory: saved activations are the peak live bytes of tensors saved for backward, stored "
          "**bit-packed** in their site's format and counted by the `saved_tensors_hooks` (\"× fp32\": against the "
          "same tensors as float32 in the same run); saved weights are the rounded weight copies convolutions "
          "save; other is tensors not produced by a site (batch norm statistics); optimizer is Adam's fp32 weights "
          "and two moments as the optimizer holds them. Each is the peak over the run; total measured is their sum.",
          f"- Seeds: {', '.join(map(str, seeds))} (initialisation, data order, random demotion order). Mean over "
          f"seeds with the range (min–max). A run **diverged** when the test accuracy after some epoch is under "
          f"{pct(DIVERGED_BELOW, 0)} % (chance: 10 %) or its loss is not finite; such a run may recover part of "
          "its accuracy in the next epoch (the loss scaler's scale grows back), so its final accuracy is shown too.",
          f"- Every run: `PYTHONPATH=build/release/python python examples/torch/{cmd} --seed S` plus the "
          "row's flags (`reproduce.py --list` prints each command); CSVs, logs and timings land in "
          "`results/torch/PART/CONFIG-sS.{csv,log,json}`.", ""]
    L += ["To rerun (resumes; runs whose CSV exists are skipped):", "", "```sh",
          "cmake --preset release && cmake --build build/release --target minifloat_python -j2",
          "PYTHONPATH=build/release/python python examples/torch/reproduce.py          # all parts, seeds 0,1,2",
          "PYTHONPATH=build/release/python python examples/torch/reproduce.py --tables-only   # this file only",
          "```", ""]
    L += ["## Time", ""] + timing(out, rows, cfgs, seeds) + [""]
    if missing:
        L += [f"**Not run ({len(missing)}):** " + ", ".join(missing) + ".", ""]
    L += ["## The paper's claims", "",
          "Criteria: a row *loses accuracy* when every one of its seeds is below every fp32 seed (disjoint ranges); "
          "*memory reduction* is the low-precision ratio (the paper's measure; `ours` against `op`) and, measured, "
          "the saved-activation bytes saved relative to all-high.", ""]
    L += claims(rows, "paper's formats", "assign", fp32, all_high, (0.3, 0.5, 0.7, 0.9), main_order)
    L += promotion_claim(rows, all_high)
    L += claims(rows, "harsher regime", "harsh", fp32, all_high, (0.3, 0.5, 0.7), harsh_order)
    L += [""]
    L += ["## 1. Accuracy against low-precision ratio (the paper's formats)", "",
          assignment_table(rows, main_keys, fp32, all_high), ""]
    L += ["## 2. Demotion order (the paper's formats)", "", order_table(rows, main_order, (0.5, 0.7)), "",
          "Random order draws a different order per seed (the paper used three random orders).", ""]
    L += [f"## 3. Promotion against none at learning rate {s['lr_overflow']}", "",
          f"Adam at {s['lr_overflow']} (25× the default), where forward tensors overflow fp(4,3,4)'s largest finite "
          "value 30 (the formats saturate; gradient formats overflow to ±Inf for the loss scaler). Promotion: "
          "after each step every low forward tensor whose overflow ratio reached Θ = 0.01 goes high for good "
          "(Algorithm 2). \"extra\" compares with the same assignment without promotion: the computed aggregate as "
          "a share of the all-high aggregate (the paper's \"< 3 % of the maximum model aggregate\"), and the "
          "measured total (saved tensors + optimizer) as a share of all-high's measured total (§1).", "", promotion_table(rows, all_high), ""]
    L += ["## 4. Harsher regime: narrower low formats (clearly not the paper's)", "",
          f"Low Y and P `{s['harsh_forward']}`, low GY `{s['harsh_backward']}`; fp32 and all-high are §1's runs "
          "(their formats do not change). " + _harsh_note(rows, fp32), "",
          assignment_table(rows, harsh_keys, fp32, all_high, note_shared={("assign", "fp32"), ("assign", "all-high")}),
          "", order_table(rows, harsh_order, (0.5,)), ""]
    L += ["## 5. Dynamic bitlengths: QM+QE and BitWave", "",
          "From \"Schrödinger's FP: Dynamic Adaptation of Floating-Point Containers for Deep Learning Training\". "
          "The same model and schedule, with `train.py --dynamic qm-qe|bitwave` (docs/torch-training.md): dynamic "
          "fp32 containers on every layer output and weight instead of a precision assignment, gradients fp32, "
          "no loss scaling, the trainer's defaults otherwise (γ_m = γ_e = 0.1, bitlength step 0.5, learning in "
          "the first 5 epochs, so in both of ours; BitWave fixes its container after 5 epochs, so never here). "
          "Bits are the stored bits per value in the last epoch: the mean over tensors (averaged over seeds) "
          "and [smallest–largest tensor over all seeds]. Footprint reduction is the run's cumulative QM+QE "
          "footprint against fp32 (the trainer's `red_qm_qe*` columns), counted by the C++ footprint ledger; the "
          "tensors saved for backward stay float32 in these runs (the containers quantize values, they do not "
          "pack what autograd saves), so the measured saved-activation bytes equal fp32's. The γ = "
          f"{s.get('dynamic_strong_gamma', '')} rows are **not the paper's setting**: with the paper's γ a "
          "bitlength moves by about step·γ·λ_t per step, a fraction of a bit over our 188 steps.", "",
          dynamic_table(rows, dynamic_keys(cfgs)), ""]
    return "\n".join(L) + "\n"
