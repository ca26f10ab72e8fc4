#!/usr/bin/env python3
"""Test the precision-assignment paper's claims on a residual model; write docs/results-torch.md.

Without --run it reruns nothing: examples/torch/results_tables.py turns the committed runs under
results/torch/ into every table and verdict of docs/results-torch.md (a test checks that this
rewrites the committed document byte for byte). With --run it first trains every planned run of
the chosen parts that has no CSV yet: examples/torch/train.py once per (configuration, seed), each
its own process with one torch thread, --jobs at a time, keeping the run's CSV, log and metadata
(command, CPU time, git commit, dirty flag, torch and extension versions: provenance.py) under
--out. It prints the estimated time before it starts and the measured time when it ends. A run that
fails leaves no CSV and is retried next time, so an interrupted reproduction resumes.

The paper: Lee, Sharma, Aiken, "Training with Mixed-Precision Floating-Point Assignments", TMLR 2023,
arXiv:2301.13464 (§5.3 Figures 3-4, §5.4 Figures 5-6). Dynamic bitlengths: "Schrödinger's FP:
Dynamic Adaptation of Floating-Point Containers for Deep Learning Training" (QM+QE and BitWave).

Usage:
  PYTHONPATH=build/release/python python examples/torch/reproduce.py                 # the doc from committed runs
  ... reproduce.py --list                                  # every planned run and whether it is done
  ... reproduce.py --run --parts pilot                     # the pilot
  ... reproduce.py --run                                   # the powered design (every part)
  ... memory_crosscheck.py --out results/torch/memory-crosscheck.json   # the hooks' bytes against the allocators'
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import provenance  # noqa: E402

# The schedule every run shares: the paper's CIFAR recipe (§C: SGD without Nesterov, momentum 0.9,
# weight decay 5e-4, learning rate 0.1 decayed to 0 by a cosine, batch 128), shortened to fit the
# budget, on Fashion-MNIST; accuracy on the whole 10 000-image test set.
SCHEDULE = {
    "model": "resnet20", "width": 0.5, "epochs": 2, "train_limit": 10000, "test_limit": None, "batch": 128,
    "optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 5e-4, "lr_schedule": "cosine",
}
# The paper's §5.2 low candidates, and the narrower ones the pilot tests (where uniform must lose).
PAPER_LOW = {"forward": "paper_fp(4,3,4)", "backward": "paper_fp(5,2,0)"}
NARROW_LOW = {"forward": "paper_fp(3,2,2)", "backward": "paper_fp(4,2,0)"}
LOW = NARROW_LOW          # the powered design's low formats (chosen by the pilot; docs/results-torch.md says why)
THETA = 0.01              # promotion threshold Θ (the paper's)
# train.py's overflow log (top-K overflow ratios per epoch, promotion events, the aggregate and
# saved bytes at each epoch's start and end) on the promotion part's rows and the rows they pair with.
OVERFLOW_LOG = ("--log-overflows", "5")
SEEDS = tuple(range(8))   # every row that carries a claim
CONTEXT_SEEDS = (0,)      # rows that carry no claim (all-high: the memory reference; op-variant: context)
PROMOTION_SEEDS = tuple(range(5))   # paired with the same seeds of the rows without promotion
PILOT_SEEDS = (0, 1, 2)
DYNAMIC_PILOT_SEEDS = (0,)
# Dynamic bitlengths: at the trainer's defaults (QM+QE's bitlength step 0.5; BitWave's regression
# over 100 batches, more than this schedule's epoch) the dynamic pilot's bitlengths hardly move in
# the learning epoch, so the powered rows take a larger step and a shorter history (the paper's
# models train for many more steps); results-torch.md reports both.
DYNAMIC_TUNING = {"qm-qe": ("--dc-bit-lr", "200"), "bitwave": ("--dc-bw-history", "20")}
BUDGET_MINUTES = 90       # on two cores
JOBS = 2


def common_args(s=SCHEDULE):
    a = ["--model", s["model"], "--width", str(s["width"]), "--epochs", str(s["epochs"]),
         "--train-limit", str(s["train_limit"])]
    if s["test_limit"]:
        a += ["--test-limit", str(s["test_limit"])]
    return a + ["--batch-size", str(s["batch"]), "--optimizer", s["optimizer"], "--lr", str(s["lr"]),
                "--weight-decay", str(s["weight_decay"]), "--lr-schedule", s["lr_schedule"],
                "--save-activations", "packed", "--threads", "1"]


COMMON = common_args()


@dataclass(frozen=True)
class Config:
    part: str      # pilot, assign, order, promotion, dynamic
    name: str      # file stem inside the part
    label: str     # how tables name it
    args: tuple = field(default=())
    seeds: tuple = SEEDS

    def csv(self, out, seed):
        return os.path.join(out, self.part, f"{self.name}-s{seed}.csv")


def _low(formats):
    return ("--low-forward", formats["forward"], "--low-backward", formats["backward"])


def _ours(r, order="decreasing"):
    return ("--assignment", "ours", "--ratio", str(r), "--order", order) + _low(LOW)


RATIOS = (0.5, 0.9)       # ours r: a moderate ratio and the paper's largest but one
ORDER_RATIO = 0.5


def configs() -> list[Config]:
    # Dynamic bitlengths on fp32 containers; learning and BitWave's fixing shortened to the
    # schedule's epochs (the trainer's defaults are 5 and 5), so the last epoch trains with what they chose.
    settle = ("--dc-learn-epochs", str(max(1, SCHEDULE["epochs"] - 1)), "--dc-bw-fix-epoch",
              str(max(1, SCHEDULE["epochs"] - 1)))
    c = [Config("pilot", "fp32", "fp32", ("--assignment", "fp32"), PILOT_SEEDS),
         Config("pilot", "uniform-narrow", "uniform (narrow formats)", ("--assignment", "uniform") + _low(NARROW_LOW),
                PILOT_SEEDS)]
    for d in DYNAMIC_TUNING:
        c.append(Config("pilot", f"{d}-defaults", f"{d} (trainer defaults)", ("--assignment", "fp32", "--dynamic", d)
                        + settle, DYNAMIC_PILOT_SEEDS))
    # Accuracy against low-precision ratio (paper Figure 4).
    c.append(Config("assign", "fp32", "fp32", ("--assignment", "fp32")))
    c.append(Config("assign", "all-high", "all-high", ("--assignment", "all-high") + _low(LOW), CONTEXT_SEEDS))
    c.append(Config("assign", "uniform", "uniform", ("--assignment", "uniform") + _low(LOW) + OVERFLOW_LOG))
    c.append(Config("assign", "op", "op", ("--assignment", "op") + _low(LOW)))
    c.append(Config("assign", "op-variant", "op-variant", ("--assignment", "op-variant") + _low(LOW), CONTEXT_SEEDS))
    for r in RATIOS:
        c.append(Config("assign", f"ours-{r}", f"ours r={r}", _ours(r) + (OVERFLOW_LOG if r == 0.9 else ())))
    # Demotion order (paper Figure 5); decreasing is the assign part's row.
    for o in ("increasing", "random"):
        c.append(Config("order", f"{o}-{ORDER_RATIO}", f"ours[{o}] r={ORDER_RATIO}", _ours(ORDER_RATIO, o)))
    # Promotion (paper Figure 6) at the schedule's own learning rate, where fp32 trains well; the
    # rows without promotion are the assign part's uniform and ours r=0.9.
    c.append(Config("promotion", "uniform-promo", "uniform + promotion",
                    ("--assignment", "uniform") + _low(LOW) + ("--promotion", "--theta", str(THETA)) + OVERFLOW_LOG,
                    PROMOTION_SEEDS))
    c.append(Config("promotion", "ours-0.9-promo", "ours r=0.9 + promotion",
                    _ours(0.9) + ("--promotion", "--theta", str(THETA)) + OVERFLOW_LOG, PROMOTION_SEEDS))
    for d, tuning in DYNAMIC_TUNING.items():
        c.append(Config("dynamic", d, d, ("--assignment", "fp32", "--dynamic", d) + settle + tuning))
    return c


PARTS = ("pilot", "assign", "order", "promotion", "dynamic")
POWERED = ("assign", "order", "promotion", "dynamic")


def plan(parts):
    """Runs in the order they are started: seed by seed, so that a reproduction cut short has every
    row at the seeds it reached (the paired comparisons need the same seeds in both rows)."""
    chosen = [c for c in configs() if c.part in parts]
    seeds = sorted({s for c in chosen for s in c.seeds})
    return [(c, s) for s in seeds for c in chosen if s in c.seeds]


def _is_plain_fp32(cfg):
    return "fp32" in cfg.args and "--dynamic" not in cfg.args


def estimate_cpu(todo, out):
    """CPU seconds of `todo` priced at the pilot's measured costs: plain fp32 runs at the pilot's fp32
    row's mean, every run that quantizes at its uniform row's; None without both."""
    cost = {}
    for c in configs():
        if c.part == "pilot":
            cpu = []
            for s in c.seeds:
                meta = c.csv(out, s)[:-4] + ".json"
                if os.path.exists(meta) and os.path.exists(c.csv(out, s)):
                    m = json.load(open(meta))
                    cpu.append(m["cpu_user_s"] + m["cpu_sys_s"])
            if cpu:
                cost[_is_plain_fp32(c)] = statistics.fmean(cpu)
    if len(cost) < 2:
        return None
    return sum(cost[_is_plain_fp32(c)] for c, _ in todo)


STOP = threading.Event()   # set by SIGTERM / SIGINT: start nothing more, end the runs under way
LIVE: set = set()          # the train.py processes under way


def _stop(signum, frame):
    STOP.set()
    for proc in list(LIVE):
        proc.terminate()


def _run_one(cfg: Config, seed: int, out: str, python: str, env: dict, origin: dict, lock, log):
    path = cfg.csv(out, seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = path[:-4] + ".partial.csv"
    cmd = [python, os.path.join(HERE, "train.py"), *COMMON, *cfg.args, "--seed", str(seed), "--csv", partial]
    started = time.time()
    with open(path[:-4] + ".log", "w") as logf:
        logf.write(" ".join(cmd) + "\n")
        logf.flush()
        with lock:
            if STOP.is_set():
                return False
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
            LIVE.add(proc)
        _, status, usage = os.wait4(proc.pid, 0)
        with lock:
            LIVE.discard(proc)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.time() - started
    meta = {"command": [os.path.relpath(a, ROOT) if os.path.isabs(a) else a for a in cmd[1:]],
            "returncode": proc.returncode, "wall_s": round(wall, 2),
            "cpu_user_s": round(usage.ru_utime, 2), "cpu_sys_s": round(usage.ru_stime, 2),
            "max_rss_kb": usage.ru_maxrss, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "loadavg_at_end": os.getloadavg(), **origin, **provenance.git_state(ROOT)}
    ok = proc.returncode == 0 and os.path.exists(partial)
    if ok:
        with open(path[:-4] + ".json.tmp", "w") as f:
            json.dump(meta, f, indent=1)
        os.replace(path[:-4] + ".json.tmp", path[:-4] + ".json")
        os.replace(partial, path)   # the CSV last: its presence means the run is complete
        with open(path[:-4] + ".log") as f:   # the progress bar's carriage returns make the log large
            text = "".join(line for line in f.read().replace("\r", "\n").splitlines(True) if "img/s" not in line)
        with open(path[:-4] + ".log", "w") as f:
            f.write(text)
    with lock:
        log(f"{'done' if ok else 'FAILED rc=' + str(proc.returncode)} {cfg.part}/{cfg.name} seed {seed}: "
            f"{wall:.0f} s wall, {usage.ru_utime + usage.ru_stime:.0f} s CPU")
    return ok


def train_env():
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "build", "release", "python"),
                                                     env.get("PYTHONPATH")) if p)
    return env


def run(todo, out, jobs, python):
    env = train_env()
    origin = provenance.record(ROOT, python, env)
    if origin.get("dirty"):
        print("warning: the checkout differs from its commit; each run records which files: "
              + ", ".join(origin["dirty_paths"]), flush=True)
    lock = threading.Lock()
    queue = list(todo)

    def log(msg):
        print(time.strftime("%H:%M:%S ") + msg, flush=True)

    def worker():
        while True:
            with lock:
                if not queue or STOP.is_set():
                    return
                cfg, seed = queue.pop(0)
                if os.path.exists(cfg.csv(out, seed)):   # finished meanwhile (another reproduce.py)
                    continue
                log(f"start {cfg.part}/{cfg.name} seed {seed} ({len(queue)} queued)")
            _run_one(cfg, seed, out, python, env, origin, lock, log)

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def document(out):
    import results_tables
    return results_tables.document(out, configs(), {
        "schedule": SCHEDULE, "common": COMMON, "paper_low": PAPER_LOW, "narrow_low": NARROW_LOW, "low": LOW,
        "theta": THETA, "seeds": SEEDS, "context_seeds": CONTEXT_SEEDS, "promotion_seeds": PROMOTION_SEEDS, "ratios": RATIOS, "order_ratio": ORDER_RATIO, "parts": PARTS, "powered": POWERED,
        "budget_minutes": BUDGET_MINUTES, "dynamic_tuning": DYNAMIC_TUNING, "powered_cpu": estimate_cpu(plan(POWERED), out),
        "powered_plain_fp32": sum(_is_plain_fp32(c) for c, _ in plan(POWERED)), "jobs": JOBS, "plan": {p: len(plan((p,))) for p in PARTS}})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="store_true", help="train the planned runs that have no CSV yet, then write the doc")
    p.add_argument("--parts", default=",".join(POWERED),
                   help=f"with --run/--list: comma-separated subset of {','.join(PARTS)} (default {','.join(POWERED)})")
    p.add_argument("--configs", default=None,
                   help="comma-separated PART/NAME filter inside --parts (names as --list prints them)")
    p.add_argument("--jobs", type=int, default=JOBS, help=f"runs at a time, one torch thread each (default {JOBS})")
    p.add_argument("--out", default=os.path.join(ROOT, "results", "torch"), help="run directory (default results/torch)")
    p.add_argument("--doc", default=os.path.join(ROOT, "docs", "results-torch.md"), help="the document to write")
    p.add_argument("--python", default=sys.executable, help="interpreter for train.py (default this one)")
    p.add_argument("--list", action="store_true", help="list the planned runs and whether each is done; run nothing")
    args = p.parse_args(argv)
    parts = [x for x in args.parts.split(",") if x]
    bad = [x for x in parts if x not in PARTS]
    if bad:
        p.error(f"--parts: unknown part(s) {', '.join(bad)}; choose from {', '.join(PARTS)}")
    if args.jobs < 1:
        p.error("--jobs must be at least 1")

    chosen = plan(parts)
    if args.configs:
        wanted = set(args.configs.split(","))
        unknown = wanted - {f"{c.part}/{c.name}" for c in configs()}
        if unknown:
            p.error(f"--configs: unknown configuration(s) {', '.join(sorted(unknown))} (see --list)")
        chosen = [(c, s) for c, s in chosen if f"{c.part}/{c.name}" in wanted]
    todo = [(c, s) for c, s in chosen if not os.path.exists(c.csv(args.out, s))]
    if args.list:
        for c, s in chosen:
            print(f"{'done   ' if os.path.exists(c.csv(args.out, s)) else 'pending'} {c.part}/{c.name} seed {s}: "
                  f"train.py {' '.join(COMMON + list(c.args))} --seed {s}")
        return 0
    if args.run and todo:
        cpu = estimate_cpu(todo, args.out)
        estimate = (f"about {cpu / 60 / args.jobs:.0f} minutes at {args.jobs} at a time on idle cores (priced at "
                    "the pilot's CPU per run)" if cpu else "no timed pilot to estimate from")
        print(f"{len(todo)} runs to do ({len(chosen) - len(todo)} already done), {args.jobs} at a time: {estimate}",
              flush=True)
        os.makedirs(args.out, exist_ok=True)
        t0, r0 = time.time(), os.times()
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        run(todo, args.out, args.jobs, args.python)
        r1 = os.times()
        cpu = r1.children_user + r1.children_system - r0.children_user - r0.children_system
        print(f"measured: {(time.time() - t0) / 60:.1f} minutes wall, {cpu / 60:.1f} CPU-minutes"
              + (" (stopped early)" if STOP.is_set() else ""), flush=True)

    text = document(args.out)
    tmp = args.doc + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.doc)
    print(f"wrote {os.path.relpath(args.doc, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
