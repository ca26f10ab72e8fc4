#!/usr/bin/env python3
"""What torch.compile adds per call of a minifloat operation, against what it adds to a builtin
op of the same size (docs/performance.md, "torch.compile").

For each size and each operation (quantize, encode, decode, quantize_ste and the MX block
quantize, all to e4m3 / mxfp8-e4m3, saturating), times interleaved over repetitions (each
repetition runs every item once, in a freshly shuffled order):
  eager       the function called as Python;
  compiled    the same function under torch.compile(fullgraph=True) (inductor): one operator node;
and for quantize also the operator called directly, torch.ops.minifloat.quantize (the
dispatcher's cost), and torch's own multiply x*2, eager and compiled, for torch's per-call cost.
Bits are checked equal before timing. Prints each item's median CPU time per call (µs) and
compiled minus eager, and whether the operators' CPU kernels are the C++ ones
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

    fmt, block = args.format, "mxfp8-" + args.format
    operations = {
        "quantize": lambda x: mf.quantize(x, fmt, overflow="saturate"),
        "encode": lambda x: mf.encode(x, fmt, overflow="saturate"),
        "decode": lambda codes: mf.decode(codes, fmt),
        "quantize_ste": lambda x: mf.quantize_ste(x, fmt, overflow="saturate"),
        block: lambda x: mf.quantize(x, block),
        "x*2": lambda x: x * 2,
    }
    op_args = operator_args(None, fmt, "nearest_even", "saturate", 0, 0, 0, "bench")[1:]

    def op(x):
        return torch.ops.minifloat.quantize(x, *op_args)

    evict = torch.zeros(1 << 20) if args.cold else None
    items = {"quantize operator": (op, "quantize")}
    for name, fn in operations.items():
        items[f"{name} eager"] = (fn, name)
        items[f"{name} compiled"] = (torch.compile(fn, fullgraph=True), name)
    print(f"{'values':>9} {'operation':>17} {'eager µs':>9} {'compiled':>9} {'compile adds':>13}")
    for n in (int(s) for s in args.sizes.split(",")):
        x = torch.randn(n) * 100
        inputs = {name: x for name in operations}
        inputs["decode"] = mf.encode(x, fmt, overflow="saturate")
        for name, (fn, operation) in items.items():
            want = operations[operation](inputs[operation])
            if not torch.equal(fn(inputs[operation]).view(torch.uint8), want.view(torch.uint8)):
                raise SystemExit(f"bits differ at n = {n} ({name})")
        times = {name: [] for name in items}
        calls = max(3, args.calls * 1024 // max(n, 1024))
        for _ in range(args.reps):
            order = list(items.items())
            random.shuffle(order)
            for name, (fn, operation) in order:
                times[name].append(per_call(fn, inputs[operation], calls, evict))
        med = {k: statistics.median(v) for k, v in times.items()}
        for name in operations:
            eager, compiled = med[f"{name} eager"], med[f"{name} compiled"]
            print(f"{n:>9} {name:>17} {eager:>9.1f} {compiled:>9.1f} {compiled - eager:>13.1f}")
        print(f"{n:>9} {'quantize operator':>17} {med['quantize operator']:>9.1f}")

if __name__ == "__main__":
    main()
