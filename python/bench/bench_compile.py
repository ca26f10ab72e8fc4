#!/usr/bin/env python3
"""What torch.compile adds per call of a minifloat operation, against what it adds to a builtin
op of the same size (docs/performance.md, "torch.compile").

For each size, times interleaved over repetitions (each repetition runs every item once, in a
freshly shuffled order):
  eager       minifloat.quantize(x, fmt, overflow="saturate") called as Python;
  compiled    the same function under torch.compile(fullgraph=True) (inductor): one operator node;
  op          the operator called directly, torch.ops.minifloat.quantize (the dispatcher's cost);
  x*2 eager / compiled   torch's own multiply, eager and under torch.compile, for torch's per-call cost.
Bits are checked equal before timing. Prints each item's median CPU time per call (µs), compiled
minus eager for quantize and for x*2, and whether the operators' CPU kernels are the C++ ones
(minifloat/_torch_ops.so) or the Python fallback.
Usage:
  PYTHONPATH=build/release/python python python/bench/bench_compile.py [--reps 9] [--calls 200] [--cold]
"""

import argparse
import random
import statistics
import subprocess
import time

import torch

import minifloat as mf
from minifloat._custom_ops import CPU_KERNELS_IN_CPP, operator_args


def per_call(fn, x, calls, evict):
    """CPU seconds per call (process time: the machine is shared), in µs. With `evict` (a tensor
    larger than the caches), each call is preceded by a pass over it, so every item starts from
    the same cold caches and the differences between items are their own costs."""
    start = time.process_time()
    for _ in range(calls):
        if evict is not None:
            evict.add_(1)
        fn(x)
    return (time.process_time() - start) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sizes", default="1024,65536,1048576")
    parser.add_argument("--format", default="e4m3")
    parser.add_argument("--cold", action="store_true", help="evict the caches before each call (a 4 MiB pass)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True)
    print(f"# {model.stdout.strip()}, torch {torch.__version__}, minifloat {mf.__version__}, 1 thread, "
          f"format {args.format}, CPU kernels {'C++' if CPU_KERNELS_IN_CPP else 'Python'}"
          f"{', caches evicted before each call' if args.cold else ''}; CPU µs per call, medians")

    def eager(x):
        return mf.quantize(x, args.format, overflow="saturate")

    def times_two(x):
        return x * 2

    op_args = operator_args(None, args.format, "nearest_even", "saturate", 0, 0, 0, "bench")[1:]

    def op(x):
        return torch.ops.minifloat.quantize(x, *op_args)

    evict = torch.zeros(1 << 20) if args.cold else None
    items = {"eager": eager, "compiled": torch.compile(eager, fullgraph=True), "op": op,
             "x*2 eager": times_two, "x*2 compiled": torch.compile(times_two, fullgraph=True)}
    print(f"{'values':>9} {'eager µs':>9} {'compiled':>9} {'op':>8} {'x*2 eager':>10} {'x*2 compiled':>13} "
          f"{'added: quantize':>16} {'x*2':>7}")
    for n in (int(s) for s in args.sizes.split(",")):
        x = torch.randn(n) * 100
        want = eager(x)
        for name in ("compiled", "op"):
            if not torch.equal(items[name](x).view(torch.int32), want.view(torch.int32)):
                raise SystemExit(f"bits differ at n = {n} ({name})")
        if not torch.equal(items["x*2 compiled"](x), x * 2):
            raise SystemExit(f"x*2 differs at n = {n}")
        times = {name: [] for name in items}
        calls = max(3, args.calls * 1024 // max(n, 1024))
        for _ in range(args.reps):
            order = list(items.items())
            random.shuffle(order)
            for name, fn in order:
                times[name].append(per_call(fn, x, calls, evict))
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{n:>9} {med['eager']:>9.1f} {med['compiled']:>9.1f} {med['op']:>8.1f} {med['x*2 eager']:>10.1f} "
              f"{med['x*2 compiled']:>13.1f} {med['compiled'] - med['eager']:>16.1f} "
              f"{med['x*2 compiled'] - med['x*2 eager']:>7.1f}")


if __name__ == "__main__":
    main()
