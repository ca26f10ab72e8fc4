#!/usr/bin/python3
"""Overhead of minifloat.training on one training step of ResNet-18 (docs/performance.md,
"PyTorch training step overhead"; target <= 1.5x plain PyTorch).

The model is examples/torch/models.py's torchvision ResNet-18 adapted to 1x28x28 input; one step is
forward, cross-entropy, backward and an Adam step on one fixed batch. Variants, all from the same
initial weights:
  plain      the model in plain PyTorch (float32, no instrumentation);
  sites      minifloat.training.instrument()ed, assignment 'ours' r=0.5 (every Y, GY, P, GP site
             rounds, to fp(6,9,0) or its low format), loss scaling on: mt.training_step;
  sites+packed  the same with tensors saved for backward stored as bit-packed codes (the trainer's
             default, --save-activations packed);
  machinery  instrumented with every site disabled (assignment 'fp32'): the cost of the traced
             graph, the autograd functions and the parametrizations without any rounding.
Each repetition runs every variant once, in a freshly shuffled order, after untimed warm-up steps;
prints each variant's median, min and max wall-clock step time and its ratio to plain's median, and
the same for the process's CPU time per step (all threads; on a shared machine it is far less
disturbed by other processes than wall-clock time, which is what the target is about).
The weights move between repetitions (each variant trains its own copy), which changes no shape.
Usage:
  PYTHONPATH=build/release/python /usr/bin/python3 bench/bench_torch_step.py [--batch 64] [--reps 11]
      [--threads 2] [--variants plain,sites,sites+packed,machinery]
"""

import argparse
import copy
import os
import random
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "torch"))

import minifloat.training as mt  # noqa: E402
import models  # noqa: E402

VARIANTS = ("plain", "sites", "sites+packed", "machinery")


def plain_step(model, opt, x, y):
    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def instrumented_step(model, x, y, assignment, store_mode):
    pm = mt.instrument(model, torch.zeros_like(x))
    pm.assign(assignment, ratio=0.5)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = mt.LossScaler(growth_interval=10 ** 9, enabled=assignment != "fp32")
    store = pm.store_saved_tensors(store_mode) if store_mode else None
    counter = [0]

    def step():
        mt.training_step(pm, opt, scaler, torch.nn.functional.cross_entropy, x, y, counter[0], store)
        counter[0] += 1
    return step


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--reps", type=int, default=11)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (the sites use as many)")
    p.add_argument("--width", type=float, default=1.0)
    p.add_argument("--variants", default=",".join(VARIANTS))
    args = p.parse_args()
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    base = models.resnet18(width=args.width)
    x = torch.randn(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))
    steps = {}
    for v in variants:
        model = copy.deepcopy(base)
        if v == "plain":
            steps[v] = plain_step(model, torch.optim.Adam(model.parameters(), lr=1e-3), x, y)
        elif v == "sites":
            steps[v] = instrumented_step(model, x, y, "ours", None)
        elif v == "sites+packed":
            steps[v] = instrumented_step(model, x, y, "ours", "packed")
        else:
            steps[v] = instrumented_step(model, x, y, "fp32", None)
    for v in variants:
        for _ in range(args.warmup):
            steps[v]()
    times = {v: [] for v in variants}
    cpu = {v: [] for v in variants}
    order = list(variants)
    rng = random.Random(0)
    for _ in range(args.reps):
        rng.shuffle(order)
        for v in order:
            c0, t0 = time.process_time(), time.perf_counter()
            steps[v]()
            times[v].append(time.perf_counter() - t0)
            cpu[v].append(time.process_time() - c0)
    print(f"ResNet-18 (1x28x28, width {args.width}), batch {args.batch}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} torch threads, {args.reps} interleaved repetitions "
          f"(after {args.warmup} warm-up steps each)")
    for label, table in (("wall-clock", times), ("CPU time", cpu)):
        reference = statistics.median(table["plain"]) if "plain" in table else None
        print(f"{label + ' s':<14}{'median':>10}{'min':>10}{'max':>10}{'x plain':>10}")
        for v in variants:
            med = statistics.median(table[v])
            ratio = f"{med / reference:.2f}" if reference else "-"
            print(f"{v:<14}{med:>10.4f}{min(table[v]):>10.4f}{max(table[v]):>10.4f}{ratio:>10}")


if __name__ == "__main__":
    main()
