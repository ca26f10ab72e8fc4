"""docs/results-torch.md from the committed runs (examples/torch/reproduce.py calls document()).

Every number in the document is computed here from the CSVs train.py wrote and the metadata
reproduce.py wrote next to them (results/torch/PART/CONFIG-sSEED.{csv,json,log}); nothing is typed
in by hand, and nothing depends on when or where it runs, so rerunning it on the committed data
rewrites the document byte for byte. Every verdict is verdict.py's one rule.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import statistics

from verdict import CONFIDENCE, KEEP_MARGIN, POWER, mde_for, paired, t_quantile

DIVERGED_BELOW = 0.20   # test accuracy under this (10 classes: chance is 0.10), or a non-finite loss


# -- reading ------------------------------------------------------------------------------------

class Run:
    """One (configuration, seed): its CSV rows (one per epoch) and metadata."""

    def __init__(self, path):
        with open(path, newline="") as f:
            self.rows = list(csv.DictReader(f))
        self.seed = int(re.search(r"-s(\d+)\.csv$", path).group(1))
        meta = path[:-4] + ".json"
        self.meta = json.load(open(meta)) if os.path.exists(meta) else {}
        first, last = self.rows[0], self.rows[-1]
        self.test = float(last["test_accuracy"])
        bad = [not math.isfinite(float(r["train_loss"])) or float(r["test_accuracy"]) < DIVERGED_BELOW for r in self.rows]
        self.diverged_final, self.diverged_any = bad[-1], any(bad)
        self.low_ratio = statistics.fmean(float(r["low_ratio"]) for r in self.rows)   # the paper's: mean over epochs
        self.bits = statistics.fmean(float(r["paper_total_bits"]) for r in self.rows)
        self.bits_first, self.bits_last = float(first["paper_total_bits"]), float(last["paper_total_bits"])
        self.promotions = sum(int(r["promotions"]) for r in self.rows)
        self.promotions_last = int(last["promotions"])
        self.skipped = sum(int(r["skipped_steps"]) for r in self.rows)
        peak = lambda col: max(int(r[col]) for r in self.rows)   # noqa: E731
        self.act = peak("saved_activation_peak_bytes")
        self.act_last = int(last["saved_activation_peak_bytes"])
        self.act_fp32 = peak("saved_activation_fp32_peak_bytes")
        self.weight = peak("saved_weight_peak_bytes")
        self.other = peak("saved_other_peak_bytes")
        self.opt = peak("optimizer_weight_bytes") + peak("optimizer_state_bytes")
        # train.py's overflow log (--promotion / --log-overflows); runs made without it lack the columns.
        self.logged = "promotion_events" in first
        if self.logged:
            self.bits_start_run = float(first["paper_total_bits_start"])
            self.bits_end_run = float(last["paper_total_bits_end"])
            self.saved_first = int(first["saved_bytes_first_step"])
            full = [int(r["saved_bytes_last_full_step"]) for r in self.rows if r["saved_bytes_last_full_step"]]
            self.saved_last = full[-1] if full else None
            self.events = [[_event(e) for e in r["promotion_events"].split("; ") if e] for r in self.rows]
            self.top = [[_top(t) for t in r["top_overflow_ratios"].split("; ") if t] for r in self.rows]

    @property
    def measured(self):
        """Saved activations + saved weight copies + other saved tensors + the optimizer's weights
        and state, each the peak over the run's epochs."""
        return self.act + self.weight + self.other + self.opt

    @property
    def cpu(self):
        return self.meta["cpu_user_s"] + self.meta["cpu_sys_s"] if self.meta else None


def _event(text):
    """(step, site, ratio, "low->high") of one promotion_events entry."""
    step, site, ratio, formats = text.split(" ")
    return int(step), site, float(ratio), formats


def _top(text):
    """(site, largest one-step ratio, epoch ratio) of one top_overflow_ratios entry."""
    site, largest, epoch = text.split(" ")
    return site, float(largest), float(epoch)


class Row:
    """A configuration over the seeds it has runs for."""

    def __init__(self, cfg, runs):
        self.cfg, self.by_seed = cfg, {r.seed: r for r in runs}
        self.runs = [self.by_seed[s] for s in sorted(self.by_seed)]

    @property
    def n(self):
        return len(self.runs)

    def mean(self, attr):
        return statistics.fmean(getattr(r, attr) for r in self.runs)

    def div(self, which):
        return f"{sum(getattr(r, 'diverged_' + which) for r in self.runs)}/{self.n}"


def load(out, cfgs):
    rows = {}
    for c in cfgs:
        runs = [Run(c.csv(out, s)) for s in c.seeds if os.path.exists(c.csv(out, s))]
        rows[(c.part, c.name)] = Row(c, runs) if runs else None
    return rows


def compare(row, ref, metric=lambda r: 100 * r.test):
    """The rule on row - ref over their common seeds (points of test accuracy by default)."""
    seeds = sorted(set(row.by_seed) & set(ref.by_seed))
    return paired(metric(row.by_seed[s]) - metric(ref.by_seed[s]) for s in seeds)


# -- formatting ---------------------------------------------------------------------------------

def pct(x, digits=1):
    return f"{100 * x:.{digits}f}"


def mib(b):
    return f"{b / 2**20:.2f}"


def table(header, body):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(out + ["| " + " | ".join(str(c) for c in r) + " |" for r in body])


def acc_cells(row):
    accs = [100 * r.test for r in row.runs]
    sd = f"{statistics.stdev(accs):.2f}" if len(accs) > 1 else ""
    return [f"{statistics.fmean(accs):.2f}", sd, f"{min(accs):.1f}–{max(accs):.1f}"]


def not_run(part, s):
    return f"not run yet (`reproduce.py --run --parts {part}`)"


# -- tables -------------------------------------------------------------------------------------

def assignment_table(rows, keys, fp32, all_high):
    header = ["assignment", "seeds", "low-precision ratio", "test acc. % (mean)", "seed SD", "range",
              "Δ vs fp32, paired (95 % CI)", "diverged (final / any epoch)", "saved activations MiB", "× fp32",
              "total measured MiB", "paper aggregate × all-high"]
    body = []
    for key in keys:
        row = rows.get(key)
        if row is None:
            continue
        delta = ""
        if fp32 is not None and row is not fp32:
            c = compare(row, fp32)
            delta = f"{c.mean:+.2f} [{c.lo:+.2f}, {c.hi:+.2f}]" if c.n > 1 else f"{c.mean:+.2f}"
        body.append([row.cfg.label, row.n, f"{row.mean('low_ratio'):.3f}", *acc_cells(row), delta,
                     f"{row.div('final')} / {row.div('any')}", mib(row.mean("act")),
                     f"{row.mean('act') / row.runs[0].act_fp32:.3f}", mib(row.mean("measured")),
                     f"{row.mean('bits') / all_high.mean('bits'):.3f}" if all_high else ""])
    return table(header, body) if body else ""


def end_minus_start(row, all_high):
    """The paper's footnote 3 within each run, as % of all-high's: (the aggregate after the last
    step - before the first) over all-high's aggregate, and (the saved bytes at the last full-batch
    step's peak - at the first step's) over all-high's saved bytes (the peak of activations, weight
    copies and other saved tensors). Means over seeds; None when a run has no overflow log (a run
    that promoted nothing has both at 0: its assignment never changed)."""
    if all_high is None:
        return None, None
    if not all(r.logged for r in row.runs):
        return (0.0, 0.0) if all(r.promotions == 0 for r in row.runs) else (None, None)
    ah_bits = all_high.mean("bits")
    ah_saved = statistics.fmean(r.act + r.weight + r.other for r in all_high.runs)
    bits = statistics.fmean(100 * (r.bits_end_run - r.bits_start_run) / ah_bits for r in row.runs)
    saved = [100 * (r.saved_last - r.saved_first) / ah_saved for r in row.runs if r.saved_last is not None]
    return bits, statistics.fmean(saved) if saved else None


def _promotion_steps(row):
    steps = [e[0] for r in row.runs if r.logged for epoch in r.events for e in epoch]
    return f"{min(steps)}–{max(steps)}" if steps else ("none" if all(r.logged for r in row.runs) else "")


def promotion_table(rows, pairs, all_high):
    header = ["assignment", "seeds", "test acc. % (mean)", "seed SD", "range", "diverged (final / any epoch)",
              "skipped steps (mean)", "promotions (mean)", "steps of the promotions (over seeds)",
              "low-precision ratio", "paper aggregate × all-high", "aggregate end − start, % of all-high's",
              "saved bytes last − first step, % of all-high's", "saved activations MiB", "total measured MiB"]
    body = []
    for none, promo in pairs:
        for row in (none, promo):
            if row is not None:
                bits, saved = end_minus_start(row, all_high)
                body.append([row.cfg.label, row.n, *acc_cells(row), f"{row.div('final')} / {row.div('any')}",
                             f"{row.mean('skipped'):.1f}", f"{row.mean('promotions'):.1f}", _promotion_steps(row),
                             f"{row.mean('low_ratio'):.3f}",
                             f"{row.mean('bits') / all_high.mean('bits'):.3f}" if all_high else "",
                             "" if bits is None else f"{bits:+.2f}", "" if saved is None else f"{saved:+.2f}",
                             mib(row.mean("act")), mib(row.mean("measured"))])
    return table(header, body) if body else ""


def overflow_table(rows, keys):
    """Per row and epoch, from train.py's overflow log: promotion events, the largest one-step
    overflow ratio of a low forward site (over seeds), and the lowest seed's top sites (the paper's
    Figure 6(b) shows the top-5 of one run)."""
    header = ["assignment", "epoch", "seeds logged", "promotion events (mean)",
              "largest one-step overflow ratio: mean [min–max] over seeds", "top sites of seed S: largest one-step ratio"]
    body = []
    for k in keys:
        row = rows.get(k)
        runs = [r for r in row.runs if r.logged] if row else []
        if not runs:
            continue
        for e in range(max(len(r.rows) for r in runs)):
            here = [r for r in runs if e < len(r.rows)]
            largest = [r.top[e][0][1] if r.top[e] else 0.0 for r in here]
            first = here[0]
            sites = ", ".join(f"{site} {m:.4f}" for site, m, _ in first.top[e]) or "no overflow"
            body.append([row.cfg.label, e + 1, len(here), f"{statistics.fmean(len(r.events[e]) for r in here):.1f}",
                         f"{statistics.fmean(largest):.4f} [{min(largest):.4f}–{max(largest):.4f}]",
                         f"S = {first.seed}: {sites}"])
    return table(header, body) if body else ""


def _col(run, col, epoch=-1):
    v = run.rows[epoch].get(col)
    try:
        return float(v) if v not in (None, "") else None
    except ValueError:
        return None


def dynamic_table(rows, keys):
    """Per epoch, means over seeds: stored bits per value of weights and activations, the
    footprint reduction so far, and the bytes the packed saved activations held at the epoch's peak."""
    header = ["method", "epoch", "seeds", "learning", "weights: total bits", "activations: total bits",
              "footprint reduction vs fp32 (cumulative)", "saved activations MiB (epoch peak)", "test acc. %"]
    body = []
    for k in keys:
        row = rows.get(k)
        if row is None:
            continue
        for e in range(len(row.runs[0].rows)):
            def mean(col):
                vals = [_col(r, col, e) for r in row.runs if e < len(r.rows)]
                vals = [v for v in vals if v is not None]
                return statistics.fmean(vals) if vals else None
            learn = sum(_col(r, "dc_learning", e) == 1 for r in row.runs if e < len(r.rows))
            cells = [mean("w_total_mean"), mean("a_total_mean"), mean("red_qm_qe"),
                     mean("saved_activation_peak_bytes"), mean("test_accuracy")]
            body.append([row.cfg.label, e + 1, row.n, f"{learn}/{row.n}",
                         *("" if v is None else f"{v:.1f}" for v in cells[:2]),
                         "" if cells[2] is None else f"{cells[2]:.2f}×", mib(cells[3]), pct(cells[4])])
    return table(header, body) if body else ""


# -- the document -------------------------------------------------------------------------------

def _schedule_text(s):
    sch = s["schedule"]
    steps_per_epoch = -(-sch["train_limit"] // sch["batch"])
    test = f"the first {sch['test_limit']}" if sch["test_limit"] else "all 10000"
    return sch, steps_per_epoch, test


def rule_section(s):
    return [
        "## The verdict rule (declared before any result)", "",
        "Every claim below is decided by one rule, implemented once in `examples/torch/verdict.py`:", "",
        "- Rows are compared **seed by seed**: run *s* of every row shares its initialisation and data order "
        "(the seed), so the comparison uses the per-seed differences *d_s* (points of final test accuracy).",
        f"- With *n* paired seeds, mean *d̄* and standard deviation *s_d*, the {round(100 * CONFIDENCE)} % interval "
        f"is *d̄ ± t({0.5 + CONFIDENCE / 2:g}, n−1)·s_d/√n* (Student's t quantiles from mpmath).",
        f"- **keeps accuracy** when the interval's lower bound is above −{KEEP_MARGIN:g} point; **loses** when its "
        "upper bound is below 0 (both can hold: a real loss smaller than the margin); **inconclusive** otherwise.",
        f"- The **minimum detectable effect** (MDE) printed with each comparison is the true difference the interval "
        f"excludes 0 for with {round(100 * POWER)} % power at two-sided α = {1 - CONFIDENCE:.2f}: "
        f"*(t({0.5 + CONFIDENCE / 2:g}, n−1) + t({POWER:g}, n−1))·s_d/√n* (the central-t approximation).",
        f"- **Divergence** is reported under both definitions used so far: the *final* test accuracy is under "
        f"{pct(DIVERGED_BELOW, 0)} %, and *any epoch's* test accuracy is under {pct(DIVERGED_BELOW, 0)} % (chance is "
        "10 %); a non-finite training loss counts under both. The paper uses neither threshold: it calls training "
        "diverged when \"accuracy decreases significantly and remains low after some point\" (§4.2), which is "
        "closer to the final-accuracy definition.",
        "- Memory claims use the paper's measure (the low-precision ratio and the model aggregate, computed from "
        "the assignment) and, separately, the bytes the hooks measured; both are deterministic given the "
        "assignment, so they carry no interval.", ""]


def design_section(s, rows):
    sch, spe, test = _schedule_text(s)
    plan = s["plan"]
    powered = sum(plan[p] for p in s["powered"])
    return [
        "## Design", "",
        f"- Model: CIFAR-style **ResNet-20** (option-B 1×1 shortcuts) at width {sch['width']} "
        f"({'/'.join(str(max(1, round(b * sch['width']))) for b in (16, 32, 64))} channels), `examples/torch/models.py`. "
        "The paper reports ResNet-18 as the least sensitive of its models to the assignment: the demotion "
        "orders differ less there (Appendix C.2, Figure 16) and ResNet-18 on CIFAR-10 does not diverge even "
        "without promotion (Figure 17); it chose models with few weights because they are harder to train in "
        "low precision (§5.2). Effects on a residual model may therefore be smaller than the paper's headline ones.",
        f"- Data: Fashion-MNIST (Debian's `dataset-fashion-mnist`): the first {sch['train_limit']} training images, "
        f"{sch['epochs']} epochs of {spe} steps (batch {sch['batch']}); accuracy is the final epoch's on "
        f"{test} test images.",
        f"- Optimizer: the paper's CIFAR recipe (Appendix B): SGD, momentum {sch['momentum']}, weight decay "
        f"{sch['weight_decay']:g}, learning rate {sch['lr']:g} decayed to 0 by a cosine over all "
        f"{sch['epochs'] * spe} steps, fp32 master weights; dynamic loss scaling in every run. Shortened from the "
        "paper's 200 epochs to fit the budget.",
        f"- Formats: high fp(6,9,0) (the paper's) for every tensor. Low: the paper's §5.2 candidates are "
        f"`{s['paper_low']['forward']}` (activations Y, weights P) and `{s['paper_low']['backward']}` (activation "
        f"gradients GY); the powered design uses `{s['low']['forward']}` and `{s['low']['backward']}`, narrower "
        "than the paper's: the pilot below checks that uniform low precision loses accuracy with them, so that "
        "the assignments have something to save.",
        f"- Seeds: {len(s['seeds'])} on every row that carries a claim, {len(s['promotion_seeds'])} on the rows with "
        f"promotion (paired with the same seeds without), {len(s['context_seeds'])} on all-high and op-variant (the "
        f"memory reference and context, no claim); promotion (Θ = {s['theta']:g}) at the schedule's own learning "
        "rate, the one fp32 trains at in the pilot; the dynamic bitlength runs learn for all but the last "
        "epoch and BitWave fixes its container before it (the trainer's defaults are 5 and 5 epochs), so the last "
        "epoch trains with the bitlengths they chose, and they take " + _tuning_text(s) + " (the trainer's "
        "defaults move the bitlengths too little in this schedule: the dynamic pilot below); whether they moved "
        "is read from the per-epoch table.",
        f"- Plan: the pilot ({plan['pilot']} runs) and the powered design ({powered} runs: "
        + ", ".join(f"{p} {plan[p]}" for p in s["powered"]) + "); `reproduce.py --list` prints each run's command: "
        f"`train.py {' '.join(s['common'])}` plus the row's flags and `--seed S`.", "",
        "```sh",
        "cmake --preset release && cmake --build build/release --target minifloat_python -j2",
        "PYTHONPATH=build/release/python python examples/torch/reproduce.py --run --parts pilot   # the pilot",
        "PYTHONPATH=build/release/python python examples/torch/reproduce.py --run                 # the powered design",
        "PYTHONPATH=build/release/python python examples/torch/reproduce.py                       # this file only",
        "```", ""] + _estimate(s, rows, powered)


def _estimate(s, rows, powered):
    """The powered design's time as reproduce.py prices it from the pilot (fp32 runs at the pilot's
    fp32 cost, runs that quantize at its uniform cost)."""
    fp32, quantized = rows.get(("pilot", "fp32")), rows.get(("pilot", "uniform-narrow"))
    if s["powered_cpu"] is None:
        return ["No timed pilot run of both rows is committed, so the powered design's time is not estimated.", ""]
    plain = s["powered_plain_fp32"]
    minutes = s["powered_cpu"] / 60 / s["jobs"]
    return [f"Time: the pilot's fp32 runs took **{fp32.mean('cpu'):.0f} CPU-seconds** each (mean of {fp32.n}) and "
            f"its uniform runs **{quantized.mean('cpu'):.0f}** (mean of {quantized.n}; user + system from `wait4`, "
            f"one torch thread). At those costs ({plain} fp32 runs, {powered - plain} that quantize) the powered "
            f"design takes about **{minutes:.0f} minutes on {s['jobs']} idle cores** (an estimate from the pilot, "
            "not a measurement of the design), " + ("within" if minutes <= s["budget_minutes"] else "**over**")
            + f" the {s['budget_minutes']}-minute budget.", ""]


def pilot_section(rows, s):
    fp32, uni = rows.get(("pilot", "fp32")), rows.get(("pilot", "uniform-narrow"))
    L = ["## Pilot: does uniform low precision lose accuracy here?", ""]
    if fp32 is None or uni is None:
        return L + ["Not run yet (`reproduce.py --run --parts pilot`).", ""]
    c = compare(uni, fp32)
    L += [f"fp32 against uniform with the narrow formats (`{s['narrow_low']['forward']}` / "
          f"`{s['narrow_low']['backward']}`), the design's schedule, {c.n} paired seeds:", "",
          assignment_table(rows, [("pilot", "fp32"), ("pilot", "uniform-narrow")], fp32, None), ""]
    if c.n < 2:
        return L + ["Fewer than two paired seeds: no spread to size the design from.", ""]
    diffs = [100 * (uni.by_seed[k].test - fp32.by_seed[k].test) for k in sorted(set(uni.by_seed) & set(fp32.by_seed))]
    L += [f"- Uniform − fp32: {c.text()}. Per seed: " + ", ".join(f"{d:+.1f}" for d in diffs) + " points.",
          f"- Uniform " + ("lost at least 5 points on every seed" if max(diffs) <= -5 else
                           "did **not** lose 5 points on every seed") + " of the pilot.",
          f"- Spread: seed SD {statistics.stdev([100 * r.test for r in fp32.runs]):.2f} points (fp32), "
          f"{statistics.stdev([100 * r.test for r in uni.runs]):.2f} (uniform); SD of the paired differences "
          f"{c.sd:.2f}. If a comparison's differences spread as much, {len(s['seeds'])} seeds detect "
          f"{mde_for(c.sd, len(s['seeds'])):.1f} points "
          f"and 16 seeds {mde_for(c.sd, 16):.1f} (MDE at {round(100 * POWER)} % power).",
          _unpaired_bound(fp32, len(s["seeds"])), ""]
    return L + dynamic_pilot(rows, s)


def _tuning_text(s):
    return " and ".join(f"`{' '.join(args)}` ({d})" for d, args in s["dynamic_tuning"].items())


def _mean_bits(row, epoch=-1):
    """Stored bits per value, weights and activations averaged, over the row's runs at an epoch (None
    when its CSVs have no bitlength columns)."""
    vals = [v for r in row.runs for v in (_col(r, "w_total_mean", epoch), _col(r, "a_total_mean", epoch)) if v is not None]
    return statistics.fmean(vals) if vals else None


def dynamic_pilot(rows, s):
    """The dynamic bitlength methods at the trainer's defaults: do the bitlengths move in this schedule?"""
    keys = [("pilot", f"{d}-defaults") for d in s["dynamic_tuning"]]
    found = [(k, rows[k]) for k in keys if k in rows]
    L = ["### Dynamic bitlengths at the trainer's defaults", ""]
    if not found:
        return L + ["Not run yet (`reproduce.py --run --parts pilot`).", ""]
    found = [(k, row) for k, row in found if _mean_bits(row) is not None]
    if not found:
        return L + ["The pilot's dynamic runs recorded no bitlengths.", ""]
    parts = [f"{row.cfg.label}: mean stored bits {_mean_bits(row):.1f} of 32 in the last epoch (seed "
             + ", ".join(str(k) for k in sorted(row.by_seed)) + ")" for _, row in found]
    still = [row.cfg.label for _, row in found if 32 - _mean_bits(row) < 1]
    verdict = (f"{' and '.join(still)} moved less than one bit, which leaves nothing to test; the powered rows take "
               if still else "The powered rows take ")
    return L + ["; ".join(parts) + ". " + verdict + _tuning_text(s) + ".", "",
                dynamic_table(rows, [k for k, _ in found]), ""]


def _unpaired_bound(fp32, n):
    """What n seeds can decide if pairing removed nothing: differences spread by √2 × fp32's seed SD."""
    sd = math.sqrt(2) * statistics.stdev([100 * r.test for r in fp32.runs])
    t = mde_for(1.0, n)   # the MDE per point of SD
    keep_sd = KEEP_MARGIN * math.sqrt(n) / t_quantile(0.5 + CONFIDENCE / 2, n - 1)
    return (f"- Without any benefit from pairing (the seeds of two rows independent), differences would spread by "
            f"√2 × fp32's seed SD = {sd:.2f} points, and {n} seeds would detect {t * sd:.1f} points. "
            f"\"Keeps accuracy\" at a true difference of 0 needs the paired differences' SD below about "
            f"{keep_sd:.2f} points with {n} seeds (lower bound −t·SD/√n above −{KEEP_MARGIN:g}); how far pairing "
            "brings a row's differences below the unpaired spread is what the powered runs measure.")


def claims_section(rows, s):
    L = ["## The paper's claims", "",
         "Lee, Sharma, Aiken, *Training with Mixed-Precision Floating-Point Assignments*, TMLR 2023, "
         "arXiv:2301.13464. Each verdict is the rule above; Δ is the paired difference in points.", ""]
    get = lambda part, name: rows.get((part, name))   # noqa: E731
    fp32, all_high, uni, op = get("assign", "fp32"), get("assign", "all-high"), get("assign", "uniform"), get("assign", "op")

    # 1. Uniform loses accuracy or diverges.
    if fp32 and uni:
        c = compare(uni, fp32)
        L.append(f"1. *Uniform low precision loses accuracy or diverges* (§5.3): uniform − fp32 {c.text()}; "
                 f"diverged {uni.div('final')} (final) / {uni.div('any')} (any epoch). The claim "
                 + ("**holds here**." if c.loses or any(r.diverged_final for r in uni.runs) else
                    "**does not hold here**." if c.keeps else "is **undecided here**."))
    else:
        L.append("1. *Uniform low precision loses accuracy or diverges*: " + not_run("assign", s) + ".")

    # 2. Ours keeps accuracy at > 2x op's memory reduction.
    ours = [(r, get("assign", f"ours-{r}")) for r in s["ratios"]]
    ours = [(r, row) for r, row in ours if row]
    if fp32 and op and all_high and ours:
        parts, best = [], None
        for r, row in ours:
            c = compare(row, fp32)
            parts.append(f"r = {r}: {c.text()}")
            if c.keeps:
                best = (r, row)
        L.append("2. *Size-ordered demotion keeps accuracy at more than 2× op's memory reduction* (§5.3): ours − fp32 "
                 + "; ".join(parts) + ".")
        if best:
            r, row = best
            ratio = row.mean("low_ratio") / op.mean("low_ratio")
            ah = all_high.mean("act")
            bytes_ratio = (ah - row.mean("act")) / (ah - op.mean("act"))
            c_op = compare(row, op)
            L.append(f"   The largest r that keeps accuracy is {r}: low-precision ratio {row.mean('low_ratio'):.3f}, "
                     f"{ratio:.2f}× op's {op.mean('low_ratio'):.3f} (the paper's measure: claim "
                     + ("**holds**" if ratio > 2 else "**does not hold**")
                     + f"); saved-activation bytes below all-high's: {bytes_ratio:.2f}× op's (measured bytes: claim "
                     + ("**holds**" if bytes_ratio > 2 else "**does not hold**")
                     + f"). Against op's accuracy: ours r = {r} − op {c_op.text()}.")
        else:
            L.append("   No ratio keeps accuracy by the rule: the claim is **not shown here**.")
    else:
        L.append("2. *Size-ordered demotion keeps accuracy at more than 2× op's memory reduction*: "
                 + not_run("assign", s) + ".")

    # 3. Decreasing order beats increasing and random in the trade-off plane.
    r0 = s["order_ratio"]
    dec = get("assign", f"ours-{r0}")
    others = [(o, get("order", f"{o}-{r0}")) for o in ("increasing", "random")]
    if dec and all(row for _, row in others):
        parts, outcomes = [], []
        for o, row in others:
            c = compare(dec, row)
            ratio_dec, ratio_o = dec.mean("low_ratio"), row.mean("low_ratio")
            beats = (c.lo > 0 and ratio_dec >= ratio_o) or (c.keeps and ratio_dec > ratio_o)
            worse = c.loses and ratio_dec <= ratio_o
            outcomes.append("beats" if beats else "loses" if worse else "undecided")
            parts.append(f"decreasing − {o} {c.text()}; low-precision ratio {dec.mean('low_ratio'):.3f} against "
                         f"{row.mean('low_ratio'):.3f}")
        L.append(f"3. *Decreasing-size demotion beats increasing and random order in the trade-off plane* (§5.4), "
                 f"r = {r0}: " + "; ".join(parts) + ". Decreasing beats an order when its accuracy interval lies above "
                 "0 at no smaller low-precision ratio, or keeps accuracy at a larger one; it is beaten when it loses accuracy "
                 "at no larger ratio. The claim "
                 + ("**holds here**." if outcomes == ["beats", "beats"] else
                    "**does not hold here**." if "loses" in outcomes else "is **undecided here**."))
    else:
        L.append("3. *Decreasing-size demotion beats increasing and random order*: " + not_run("order", s) + ".")

    # 4. Promotion prevents divergence at < 3 % extra memory.
    pairs = [(uni, get("promotion", "uniform-promo")), (get("assign", "ours-0.9"), get("promotion", "ours-0.9-promo"))]
    done = [(a, b) for a, b in pairs if a and b]
    if done and all_high:
        parts, outcome = [], {}
        for none, promo in done:
            c = compare(promo, none)
            start = none.mean("bits")   # the same assignment before any promotion (promotion only raises it)
            end = promo.mean("bits_last")
            exact = all(r.promotions_last == 0 for r in promo.runs)
            extra = 100 * (end - start) / all_high.mean("bits")
            logged_bits, logged_saved = end_minus_start(promo, all_high)
            for which in ("final", "any"):
                if any(getattr(r, "diverged_" + which) for r in none.runs):
                    ok = not any(getattr(r, "diverged_" + which) for r in promo.runs) and extra < 3
                    outcome[which] = outcome.get(which, True) and ok
            if promo.runs and all(r.logged for r in promo.runs):
                extra = logged_bits
                memory = (f"aggregate after the last step minus before the first, within each run, {extra:+.2f} % "
                          "of all-high's" + ("" if logged_saved is None else
                                             f"; saved bytes at the last full-batch step minus at the first "
                                             f"{logged_saved:+.2f} % of all-high's saved bytes (measured by the hooks)"))
            else:
                memory = (f"aggregate at the end minus at the start {extra:+.2f} % of all-high's"
                          + ("" if exact else " (the last epoch's mean: promotions in the last epoch make the end "
                                              "higher)"))
            parts.append(f"{promo.cfg.label}: diverged {none.div('final')} → {promo.div('final')} (final), "
                         f"{none.div('any')} → {promo.div('any')} (any epoch); with − without {c.text()}; {memory}"
                         + f"; measured total {100 * (promo.mean('measured') - none.mean('measured')) / all_high.mean('measured'):+.2f} "
                         "% of all-high's")
        L.append("4. *Promotion prevents divergence at less than 3 % extra memory* (§4.2, footnote 3: the aggregate at "
                 "the end minus at the start, as a share of the all-high aggregate): " + "; ".join(parts) + ". "
                 + ("The start and end are read within each run from train.py's overflow log. "
                    if all(r.logged for _, p in done for r in p.runs) else
                    "The start is the same assignment without promotion; the end is the last epoch's mean aggregate "
                    "(train.py records the aggregate per epoch). ") + " ".join(
                     f"By the {label} definition the claim " + ("**is untested here** (no run diverged without "
                                                                "promotion)" if which not in outcome else
                                                                "**holds here**" if outcome[which] else
                                                                "**does not hold here**") + "."
                     for which, label in (("final", "final-accuracy"), ("any", "any-epoch"))))
    else:
        L.append("4. *Promotion prevents divergence at less than 3 % extra memory*: " + not_run("promotion", s) + ".")

    # Schrödinger's FP.
    dyn = [(d, get("dynamic", d)) for d in ("qm-qe", "bitwave")]
    if fp32 and all(row for _, row in dyn):
        parts = []
        for d, row in dyn:
            bits = _mean_bits(row)
            moved = 32 - bits >= 1
            parts.append(f"{d}: mean stored bits in the last epoch {bits:.1f} of 32; {d} − fp32 "
                         f"{compare(row, fp32).text()}" + ("" if moved else
                         " — **untested here**: the bitlengths moved less than one bit in this schedule"))
        L.append("5. *QM+QE and BitWave shrink the stored bitlengths without losing accuracy* (\"Schrödinger's FP: "
                 "Dynamic Adaptation of Floating-Point Containers for Deep Learning Training\"; here with "
                 + _tuning_text(s) + "): " + "; ".join(parts)
                 + ". The bitlength trajectory is in the dynamic table below.")
    else:
        L.append("5. *QM+QE and BitWave shrink the stored bitlengths without losing accuracy* (Schrödinger's FP): "
                 + not_run("dynamic", s) + ".")
    return L + [""]


def tables_section(rows, s):
    keys = [("assign", n) for n in ("fp32", "all-high", "uniform", "op", "op-variant")] + \
           [("assign", f"ours-{r}") for r in s["ratios"]] + \
           [("order", f"{o}-{s['order_ratio']}") for o in ("increasing", "random")]
    fp32, all_high = rows.get(("assign", "fp32")), rows.get(("assign", "all-high"))
    L = ["## Tables of the powered design", ""]
    t = assignment_table(rows, keys, fp32, all_high)
    L += ["Accuracy against the low-precision ratio and the demotion orders. Saved activations are the peak live "
          "bytes of tensors saved for backward, bit-packed in their site's format and counted by the "
          "`saved_tensors_hooks` (× fp32: against the same tensors as float32); total measured adds saved weight "
          "copies, other saved tensors and the optimizer's weights and state. \"paper aggregate × all-high\" is the "
          "model aggregate relative to all-high's.", "", t or "No run of this part is committed.", ""]
    pairs = [(rows.get(("assign", "uniform")), rows.get(("promotion", "uniform-promo"))),
             (rows.get(("assign", "ours-0.9")), rows.get(("promotion", "ours-0.9-promo")))]
    t = promotion_table(rows, [p for p in pairs if p[1]], all_high)
    L += [f"Promotion (Θ = {s['theta']:g}; the rows without it are the assignment table's). The end-minus-start "
          "columns are the paper's footnote 3 within each run (train.py's overflow log): the aggregate after the last "
          "step minus before the first, and the saved bytes the hooks held at the peak of the last full-batch step "
          "minus the first step's, each as a share of all-high's; a row that promoted nothing has both at 0:", "",
          t or "No run of this part is committed.", ""]
    t = overflow_table(rows, [("assign", "uniform"), ("promotion", "uniform-promo"), ("assign", "ours-0.9"),
                              ("promotion", "ours-0.9-promo")])
    if t:
        L += ["Overflows and promotions per epoch (train.py's overflow log; the paper's Figure 6(b) plots the top-5 "
              "tensors' overflow ratios of one run). A ratio is a forward site's overflows over its values in one "
              "step while the site is low; promotion compares it with Θ.", "", t, ""]
    t = dynamic_table(rows, [("dynamic", d) for d in ("qm-qe", "bitwave")])
    L += ["Dynamic bitlengths (QM+QE, BitWave) on fp32 containers, per epoch (means over seeds). The saved activations "
          "are packed in each tensor's current container (fp(8, k_m): sign, 8 exponent bits, k_m mantissa bits), "
          "so they are reported per epoch: the maximum over the run is set by the first epoch, before the "
          "bitlengths shrink.", "", t or "No run of this part is committed.", ""]
    return L


CROSSCHECK = "memory-crosscheck.json"


def crosscheck_section(out):
    """examples/torch/memory_crosscheck.py's committed output: the hooks' saving against the allocators'."""
    L = ["## Memory cross-check: the hooks against the allocators", ""]
    path = os.path.join(out, CROSSCHECK)
    command = f"PYTHONPATH=build/release/python python examples/torch/memory_crosscheck.py --out results/torch/{CROSSCHECK}"
    if not os.path.exists(path):
        return L + [f"Not run yet (`{command}`).", ""]
    with open(path) as f:
        c = json.load(f)
    prov = c.get("provenance", {})
    L += [f"`{command}` runs one training forward pass of {c['model']} at width {c['width']:g}, batch {c['batch']}, "
          f"low formats `{c['low_forward']}` / `{c['low_backward']}`, with the tensors saved for backward kept as "
          "float32 and then bit-packed, after a warm-up step, and measures the bytes allocated during the forward "
          "and still live at its end twice: as the saved-tensor hooks count them, and from the allocators (torch's "
          "allocations from `torch.profiler`'s memory profiling, NumPy's — the packed codes are NumPy buffers — from "
          "`tracemalloc`'s NumPy domain). The allocators also see the forward's output and loss and free tensors "
          "made before it; those are the same in both modes, so the check is on the difference (what packing saves), "
          f"within {100 * c['tolerance']:g} % of the hooks' difference.", ""]
    body = []
    for name, a in c["assignments"].items():
        body.append([name, mib(a["fp32"]["hooks_total_bytes"]), mib(a["packed"]["hooks_total_bytes"]),
                     mib(a["hooks_saving_bytes"]), mib(a["fp32"]["allocator_bytes"]), mib(a["packed"]["allocator_bytes"]),
                     mib(a["allocator_saving_bytes"]), f"{a['hooks_saving_bytes']} / {a['allocator_saving_bytes']}",
                     f"{a['relative_error']:+.1e}", "yes" if a["passed"] else "**no**"])
    L += [table(["assignment", "hooks: fp32 MiB", "hooks: packed MiB", "hooks: saving MiB", "allocators: fp32 MiB",
                 "allocators: packed MiB", "allocators: saving MiB", "saving in bytes: hooks / allocators",
                 "relative difference", "within tolerance"], body), ""]
    L += ["The hooks' accounting of saved bytes " + ("agrees with the allocators within the tolerance for every "
                                                     "assignment checked" if c["passed"] else
                                                     "**disagrees** with the allocators beyond the tolerance")
          + f" (commit {str(prov.get('commit'))[:12]}, "
          + {True: "tracked files differed from it", False: "clean tree"}.get(prov.get("dirty"), "tree state not recorded")
          + f", torch {prov.get('torch')}, minifloat {prov.get('minifloat')}).", ""]
    return L


def provenance_section(rows):
    runs = [r for row in rows.values() if row for r in row.runs]
    L = ["## Provenance", ""]
    if not runs:
        return L + ["No run is committed.", ""]
    groups = {}
    for r in runs:
        m = r.meta
        key = (m.get("commit"), m.get("dirty"), m.get("torch"), m.get("minifloat"), m.get("extension_sha256"))
        groups.setdefault(key, []).append(r)
    L += ["Each run's `.json` beside its CSV records the command, CPU time, git commit, whether tracked files "
          "differed from it (and which), and the torch, minifloat and extension versions (`examples/torch/"
          "provenance.py`). The committed runs:", ""]
    body = [[str(k[0])[:12] if k[0] else "not recorded", {True: "yes", False: "no"}.get(k[1], "not recorded"),
             k[2] or "", k[3] or "", (k[4] or "")[:12], len(v)] for k, v in sorted(groups.items(), key=str)]
    L += [table(["commit", "dirty", "torch", "minifloat", "extension SHA-256", "runs"], body), ""]
    dirty = sorted({p for r in runs for p in r.meta.get("dirty_paths", [])})
    if dirty:
        L += ["Files that differed from the commit in some run: " + ", ".join(f"`{p}`" for p in dirty) + ".", ""]
    return L


def document(out, cfgs, s):
    rows = load(out, cfgs)
    L = ["# Reproduction on PyTorch models: precision assignment, demotion order, promotion, dynamic bitlengths", ""]
    L += ["This file is written by `examples/torch/reproduce.py` (tables and verdicts by "
          "`examples/torch/results_tables.py` and `examples/torch/verdict.py`) from the runs committed under "
          "`results/torch/`; do not edit it by hand. A test (`python/tests/test_results_tables.py`) checks that "
          "the script rewrites it byte for byte from that data.", "",
          "The tables this page showed earlier (Adam, 3 seeds, 2000 test images) are withdrawn: their raw CSVs were "
          "never committed and no longer exist, so they can be neither regenerated nor checked.", ""]
    L += rule_section(s) + design_section(s, rows) + pilot_section(rows, s) + claims_section(rows, s)
    L += tables_section(rows, s) + crosscheck_section(out) + provenance_section(rows)
    return "\n".join(L).rstrip("\n") + "\n"
