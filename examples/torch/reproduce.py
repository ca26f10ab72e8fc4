#!/usr/bin/env python3
"""Reproduce the precision-assignment paper's claims on a residual model; write docs/results-torch.md.

Runs examples/torch/train.py once per (configuration, seed), each as its own process with one torch
thread, --jobs at a time, and keeps every run's CSV, log and timing under --out (default
results/torch). A run whose CSV is already there is skipped, so an interrupted reproduction resumes
where it stopped; a run that fails leaves no CSV and is retried next time. After the runs (or with
--tables-only) examples/torch/results_tables.py turns the CSVs into every table of
docs/results-torch.md, written to a temporary file and renamed over the old one.

The paper: Lee, Sharma, Aiken, "Training with Mixed-Precision Floating-Point Assignments", TMLR 2023,
arXiv:2301.13464 (§5.3 Figures 3-4, §5.4 Figures 5-6). Dynamic bitlengths: "Schrödinger's FP:
Dynamic Adaptation of Floating-Point Containers for Deep Learning Training" (QM+QE and BitWave).

Usage:
  PYTHONPATH=build/release/python python examples/torch/reproduce.py            # everything
  ... reproduce.py --parts assign,promotion --seeds 0       # a subset
  ... reproduce.py --tables-only                            # regenerate the doc from the CSVs
  ... reproduce.py --list                                   # the runs and their state
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

# The schedule every run shares (stated in the doc): a short one that fits the 60-minute budget on
# two cores. ResNet-20 (CIFAR-style, option-B shortcuts) at width 0.5: 8/16/32 channels.
MODEL = "resnet20"
WIDTH = 0.5
EPOCHS = 2
TRAIN_LIMIT = 6000
TEST_LIMIT = 2000
BATCH = 64
LR = 2e-3                  # Adam, the trainer's default
LR_OVERFLOW = 0.05         # Adam at 25x: the rate at which forward tensors overflow fp(4,3,4)
HARSH_FORWARD = "paper_fp(3,2,2)"   # Y, P low candidate of the harsher regime (max finite 7)
HARSH_BACKWARD = "paper_fp(4,2,0)"  # GY, GP low candidate of the harsher regime (max finite 448)
SEEDS = (0, 1, 2)
DYNAMIC_STRONG_GAMMAS = (2.0, 10.0)  # QM+QE regularizer strengths of the further dynamic runs (paper: 0.1)

COMMON = ["--model", MODEL, "--width", str(WIDTH), "--epochs", str(EPOCHS), "--train-limit", str(TRAIN_LIMIT),
          "--test-limit", str(TEST_LIMIT), "--batch-size", str(BATCH), "--optimizer", "adam",
          "--save-activations", "packed", "--threads", "1"]


@dataclass(frozen=True)
class Config:
    part: str      # assign, order, promotion, harsh, dynamic
    name: str      # file stem inside the part
    label: str     # how tables name it
    args: tuple = field(default=())

    def csv(self, out, seed):
        return os.path.join(out, self.part, f"{self.name}-s{seed}.csv")


def _ours(r, order="decreasing"):
    return ("--assignment", "ours", "--ratio", str(r), "--order", order)


def configs() -> list[Config]:
    c = []
    # Accuracy against low-precision ratio, every assignment (paper Figure 4), the paper's formats.
    for a in ("fp32", "all-high", "uniform", "op", "op-variant"):
        c.append(Config("assign", a, a, ("--assignment", a, "--lr", str(LR))))
    for r in (0.3, 0.5, 0.7, 0.9):
        c.append(Config("assign", f"ours-{r}", f"ours r={r}", _ours(r) + ("--lr", str(LR))))
    # Demotion order (paper Figure 5); decreasing is the assign part's ours rows.
    for r in (0.5, 0.7):
        for o in ("increasing", "random"):
            c.append(Config("order", f"{o}-{r}", f"ours[{o}] r={r}", _ours(r, o) + ("--lr", str(LR))))
    # Promotion vs none at a learning rate where forward tensors overflow (paper Figure 6).
    lr = ("--lr", str(LR_OVERFLOW))
    c.append(Config("promotion", "fp32", "fp32", ("--assignment", "fp32") + lr))
    for a, extra in (("uniform", ("--assignment", "uniform")), ("ours-0.5", _ours(0.5)), ("ours-0.9", _ours(0.9))):
        c.append(Config("promotion", f"{a}-none", f"{a.replace('-', ' r=')} no promotion", extra + lr))
        c.append(Config("promotion", f"{a}-promo", f"{a.replace('-', ' r=')} + promotion",
                        extra + lr + ("--promotion", "--theta", "0.01")))
    # The harsher regime: narrower low formats, same high formats (all-high and fp32 are the assign rows).
    harsh = ("--low-forward", HARSH_FORWARD, "--low-backward", HARSH_BACKWARD, "--lr", str(LR))
    for a in ("uniform", "op", "op-variant"):
        c.append(Config("harsh", a, a, ("--assignment", a) + harsh))
    for r in (0.3, 0.5, 0.7):
        c.append(Config("harsh", f"ours-{r}", f"ours r={r}", _ours(r) + harsh))
    for o in ("increasing", "random"):
        c.append(Config("harsh", f"{o}-0.5", f"ours[{o}] r=0.5", _ours(0.5, o) + harsh))
    # Dynamic bitlengths (QM+QE, BitWave) on the same model and schedule.
    for d in ("qm-qe", "bitwave"):
        c.append(Config("dynamic", d, d, ("--assignment", "fp32", "--dynamic", d, "--lr", str(LR))))
    # The paper's gamma = 0.1 moves a bitlength by about bit_lr * gamma * lambda_t per step; with ~40
    # learned tensors (lambda_t ~ 1/40) and 188 steps that is a fraction of a bit, so a second run
    # with a stronger regularizer shows what the bitlengths learn on this short schedule.
    for g in DYNAMIC_STRONG_GAMMAS:
        c.append(Config("dynamic", f"qm-qe-gamma{g:g}", f"qm-qe, γ = {g:g}",
                        ("--assignment", "fp32", "--dynamic", "qm-qe", "--dc-gamma-m", str(g), "--dc-gamma-e", str(g),
                         "--lr", str(LR))))
    return c


PARTS = ("assign", "promotion", "order", "harsh", "dynamic")


def plan(parts, seeds):
    """Runs in the order they are started, so that a reproduction cut short has what matters most:
    the first seed of the paper's-format parts (assign, promotion, order), then their other seeds,
    then the harsher regime (the issue asks for it only where the paper's formats cost no accuracy),
    then the dynamic bitlengths."""
    chosen = [c for c in configs() if c.part in parts]
    main = ("assign", "promotion", "order")
    stages = [(main, seeds[:1]), (main, seeds[1:]), (("harsh",), seeds), (("dynamic",), seeds)]
    out = []
    for stage_parts, stage_seeds in stages:
        for p in stage_parts:
            for s in stage_seeds:
                out += [(c, s) for c in chosen if c.part == p]
    return out


STOP = threading.Event()   # set by SIGTERM / SIGINT: start nothing more, end the runs under way
LIVE: set = set()          # the train.py processes under way


def _stop(signum, frame):
    STOP.set()
    for proc in list(LIVE):
        proc.terminate()


def _run_one(cfg: Config, seed: int, out: str, python: str, env: dict, lock, log):
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
    meta = {"command": cmd[1:], "returncode": proc.returncode, "wall_s": round(wall, 2),
            "cpu_user_s": round(usage.ru_utime, 2), "cpu_sys_s": round(usage.ru_stime, 2),
            "max_rss_kb": usage.ru_maxrss, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "loadavg_at_end": os.getloadavg()}
    ok = proc.returncode == 0 and os.path.exists(partial)
    if ok:
        with open(path[:-4] + ".json.tmp", "w") as f:
            json.dump(meta, f, indent=1)
        os.replace(path[:-4] + ".json.tmp", path[:-4] + ".json")
        os.replace(partial, path)   # the CSV last: its presence means the run is complete
    with lock:
        log(f"{'done' if ok else 'FAILED rc=' + str(proc.returncode)} {cfg.part}/{cfg.name} seed {seed}: "
            f"{wall:.0f} s wall, {usage.ru_utime + usage.ru_stime:.0f} s CPU")
    return ok


def run(todo, out, jobs, python):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "build", "release", "python"),
                                                     env.get("PYTHONPATH")) if p)
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
            _run_one(cfg, seed, out, python, env, lock, log)

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)} (default all)")
    p.add_argument("--configs", default=None,
                   help="comma-separated PART/NAME filter inside --parts (names as --list prints them)")
    p.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time, one torch thread each (default 2)")
    p.add_argument("--out", default=os.path.join(ROOT, "results", "torch"), help="CSV directory (default results/torch)")
    p.add_argument("--doc", default=os.path.join(ROOT, "docs", "results-torch.md"), help="the document to write")
    p.add_argument("--python", default=sys.executable, help="interpreter for train.py (default this one)")
    p.add_argument("--tables-only", action="store_true", help="run nothing; write the doc from the CSVs there are")
    p.add_argument("--list", action="store_true", help="list the runs and whether each is done; run nothing")
    args = p.parse_args(argv)
    parts = [x for x in args.parts.split(",") if x]
    bad = [x for x in parts if x not in PARTS]
    if bad:
        p.error(f"unknown part(s) {', '.join(bad)}; choose from {', '.join(PARTS)}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        p.error(f"--seeds {args.seeds!r} is not a comma-separated list of integers")
    if args.jobs < 1:
        p.error("--jobs must be at least 1")

    chosen = plan(parts, seeds)
    if args.configs:
        wanted = set(args.configs.split(","))
        unknown = wanted - {f"{c.part}/{c.name}" for c in configs()}
        if unknown:
            p.error(f"unknown configuration(s) {', '.join(sorted(unknown))} (see --list)")
        chosen = [(c, s) for c, s in chosen if f"{c.part}/{c.name}" in wanted]
    todo = [(c, s) for c, s in chosen if not os.path.exists(c.csv(args.out, s))]
    if args.list:
        for c, s in chosen:
            print(f"{'done   ' if os.path.exists(c.csv(args.out, s)) else 'pending'} {c.part}/{c.name} seed {s}: "
                  f"train.py {' '.join(COMMON + list(c.args))} --seed {s}")
        return 0
    if not args.tables_only and todo:
        os.makedirs(args.out, exist_ok=True)
        t0, r0 = time.time(), os.times()
        load0 = os.getloadavg()
        print(f"{len(todo)} runs to do ({len(chosen) - len(todo)} already done), {args.jobs} at a time",
              flush=True)
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        run(todo, args.out, args.jobs, args.python)
        r1 = os.times()
        session = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "wall_s": round(time.time() - t0, 1),
                   "cpu_children_s": round(r1.children_user + r1.children_system - r0.children_user - r0.children_system, 1),
                   "runs": len(todo), "jobs": args.jobs, "loadavg_start": load0, "loadavg_end": os.getloadavg(),
                   "parts": parts, "seeds": seeds, "interrupted": STOP.is_set()}
        ledger = os.path.join(args.out, "sessions.json")
        sessions = json.load(open(ledger)) if os.path.exists(ledger) else []
        sessions.append(session)
        with open(ledger + ".tmp", "w") as f:
            json.dump(sessions, f, indent=1)
        os.replace(ledger + ".tmp", ledger)

    import results_tables
    text = results_tables.document(args.out, configs(), SEEDS, {
        "model": MODEL, "width": WIDTH, "epochs": EPOCHS, "train_limit": TRAIN_LIMIT, "test_limit": TEST_LIMIT,
        "batch": BATCH, "lr": LR, "lr_overflow": LR_OVERFLOW, "harsh_forward": HARSH_FORWARD,
        "harsh_backward": HARSH_BACKWARD, "common": COMMON, "dynamic_strong_gamma": " and ".join(f"{g:g}" for g in DYNAMIC_STRONG_GAMMAS)})
    tmp = args.doc + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.doc)
    print(f"wrote {os.path.relpath(args.doc, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
