#!/usr/bin/env python3
"""One training step (forward, backward, Adam step) of the example trainer's ResNet-18 on a batch
of 1x28x28 images: a recipe's layers (minifloat.layers.convert, first and last layers kept in fp32
as the trainer does) against the plain fp32 model, steps interleaved so that both see the same
machine load. Prints per-repetition medians and the ratio; --profile adds torch's profiler table
of one recipe step.

  PYTHONPATH=build/release/python python python/bench/bench_recipe_step.py --recipe nvfp4 --threads 1
"""

import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))

import minifloat as mf  # noqa: E402
from minifloat import layers  # noqa: E402
import models  # noqa: E402


def step_fn(model, x, y):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", default="nvfp4")
    p.add_argument("--model", default="resnet18", choices=list(models.MODELS))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default torch's)")
    p.add_argument("--keep-first-last", choices=["on", "off"], default="on")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))
    plain = models.build(args.model)
    recipe_model = models.build(args.model)
    recipe_model.load_state_dict(plain.state_dict())
    layers.convert(recipe_model, args.recipe, keep_first_last=args.keep_first_last == "on")
    steps = {"fp32": step_fn(plain, x, y), args.recipe: step_fn(recipe_model, x, y)}
    for f in steps.values():  # warm-up: allocator, Adam state
        f()
    # wall time, and the process's CPU time (all its threads), which a loaded machine inflates less
    times = {(k, clock): [] for k in steps for clock in ("wall", "cpu")}
    for _ in range(args.repeats):
        for name, f in steps.items():
            w0, c0 = time.perf_counter(), time.process_time()
            f()
            times[(name, "cpu")].append(time.process_time() - c0)
            times[(name, "wall")].append(time.perf_counter() - w0)
    print(f"{args.model} batch {args.batch}, {torch.get_num_threads()} thread(s), {args.repeats} interleaved repetitions, "
          f"torch {torch.__version__}, minifloat {mf.__version__}, load average {os.getloadavg()[0]:.1f}")
    for clock in ("wall", "cpu"):
        for name in steps:
            t = times[(name, clock)]
            print(f"  {clock:4s} {name:8s} step median {statistics.median(t) * 1e3:8.1f} ms  (min {min(t) * 1e3:.1f}, "
                  f"max {max(t) * 1e3:.1f})")
        ratios = [r / p for r, p in zip(times[(args.recipe, clock)], times[("fp32", clock)])]
        print(f"  {clock:4s} ratio {args.recipe}/fp32: median of paired ratios {statistics.median(ratios):.2f} "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
    if args.profile:
        with torch.profiler.profile() as prof:
            steps[args.recipe]()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))


if __name__ == "__main__":
    main()
