#!/usr/bin/python3
"""Speed of minifloat.quantize from Python (docs/performance.md, "Python binding").

Times, interleaved over repetitions on the same 16M-element float32 tensor:
  memcpy   numpy.copyto of the same bytes (single thread), the machine's memory reference;
  C++      the bulk kernel minifloat::quantize called directly in C++ (one thread, no Python);
  Python   minifloat.quantize(x, fmt, out=out) with torch.set_num_threads(1) and (2);
  torch    a straightforward pure-torch emulation of the same rounding (frexp / round / ldexp),
           checked to give the same bits, timed on one thread and on two.
Each repetition runs every item once, in a freshly shuffled order. Prints medians and the ratios
the issue asks for, and the machine's load average before and after each rounding mode (threads
of other processes take cores from the 2-thread rows). Usage:
  PYTHONPATH=build/release/python /usr/bin/python3 bench/bench_python.py [--reps 31] [--n 16777216]
      [--format e4m3] [--rounding nearest_even,stochastic] [--data normal|scaled]

--thread-processes R measures thread scaling the way a training process sees it instead: torch's
thread count fixed for a whole process (changing it between calls rebuilds torch's OpenMP pool,
and later 2-thread calls were then slower than in a process that never changed it). R rounds,
each starting one child process with 1 thread and one with 2, in alternating order; each child
times torch's copy_ (the memory control at the same thread count) and minifloat.quantize,
interleaved, and reports medians; the parent prints the medians over children.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

import minifloat as mf
from minifloat import _core


def torch_emulation(x, fmt):
    """Round-to-nearest-even to fmt with saturation, subnormals on, in plain torch ops."""
    c = fmt.constants()
    a = x.abs()
    _, exponent = torch.frexp(a)  # a = m * 2^exponent, m in [0.5, 1)
    e = torch.clamp(exponent - 1, min=c["emin"])
    scale = torch.ldexp(torch.ones_like(a), e - fmt.mantissa_bits)  # the spacing 2^(e - M) of a's binade
    q = torch.round(a / scale) * scale  # torch.round: half to even
    q = torch.minimum(q, torch.tensor(c["max_finite"], dtype=x.dtype))
    return torch.copysign(q, x)


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def fixed_threads_child(args, fmt, x):
    """One process, torch's thread count fixed: medians of copy_ and quantize, as JSON."""
    torch.set_num_threads(args.child_threads)
    out, copy_out = torch.empty_like(x), torch.empty_like(x)
    result = {}
    for rounding in args.rounding.split(","):
        items = {"copy": lambda: copy_out.copy_(x),
                 "quantize": lambda: mf.quantize(x, fmt, rounding, "saturate", out=out)}
        for f in items.values():
            f()  # untimed: first touch of the output, the pool's first parallel region
        samples = {k: [] for k in items}
        for _ in range(args.reps):
            for key, f in items.items():
                samples[key].append(timed(f))
        result[rounding] = {k: statistics.median(v) for k, v in samples.items()}
    print(json.dumps(result))


def thread_processes(args):
    """Alternating child processes with 1 and 2 threads; medians over children."""
    medians = {}  # (rounding, item, threads) -> [child medians]
    print("load average before: %.2f %.2f %.2f (2-thread rows need two idle cores)" % os.getloadavg())
    for r in range(args.thread_processes):
        for threads in ((1, 2) if r % 2 == 0 else (2, 1)):
            command = [sys.executable, __file__, "--child-threads", str(threads), "--n", str(args.n),
                       "--reps", str(args.reps), "--format", args.format, "--rounding", args.rounding,
                       "--data", args.data]
            child = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
            for rounding, items in child.items():
                for item, seconds in items.items():
                    medians.setdefault((rounding, item, threads), []).append(seconds)
    print("load average after:  %.2f %.2f %.2f" % os.getloadavg())
    print(f"format {args.format}, data {args.data}, n = {args.n} float32; {args.thread_processes} rounds of one "
          f"1-thread and one 2-thread process, {args.reps} interleaved repetitions each; medians over processes:")
    for rounding in args.rounding.split(","):
        m = {(item, t): statistics.median(medians[(rounding, item, t)]) for item in ("copy", "quantize") for t in (1, 2)}
        print(f"  {rounding:13s} torch copy_ 1 thread {m['copy', 1] * 1e3:6.2f} ms, 2 threads {m['copy', 2] * 1e3:6.2f} ms "
              f"({m['copy', 1] / m['copy', 2]:.2f}x);  minifloat.quantize 1 thread {m['quantize', 1] * 1e3:6.2f} ms, "
              f"2 threads {m['quantize', 2] * 1e3:6.2f} ms ({m['quantize', 1] / m['quantize', 2]:.2f}x)")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--reps", type=int, default=31)
    parser.add_argument("--torch-reps", type=int, default=3)
    parser.add_argument("--format", default="e4m3")
    parser.add_argument("--rounding", default="nearest_even,stochastic")
    parser.add_argument("--data", choices=("scaled", "normal"), default="scaled",
                        help="scaled: N(0, 1) * 100 (the default); normal: N(0, 1)")
    parser.add_argument("--thread-processes", type=int, default=0, metavar="R")
    parser.add_argument("--child-threads", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    fmt = mf.parse_format(args.format)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(args.n, dtype=np.float32)
    if args.data == "scaled":
        x_np *= np.float32(100)
    if args.child_threads:
        return fixed_threads_child(args, fmt, torch.from_numpy(x_np))
    if args.thread_processes:
        return thread_processes(args)
    x = torch.from_numpy(x_np)
    out = torch.empty_like(x)
    copy_out = np.empty_like(x_np)

    # Same bits: the emulation against minifloat on the benchmark data and on edge cases.
    edge = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -10, 448.0, 464.0, 465.0,
                         1e30, float("inf"), -float("inf"), 0.1, 1 / 3])
    for data in (x, edge):
        ours = mf.quantize(data, fmt, overflow="saturate")
        theirs = torch_emulation(data, fmt)
        assert torch.equal(ours.view(torch.int32), theirs.view(torch.int32)), "the emulation differs"
    print(f"pure-torch emulation gives minifloat's bits on {args.n} values and {edge.numel()} edge cases")

    before = torch.get_num_threads()
    for rounding in args.rounding.split(","):
        print("load average before: %.2f %.2f %.2f (2-thread rows need two idle cores)" % os.getloadavg())
        measure(args, fmt, rounding, x, x_np, out, copy_out)
        print("load average after:  %.2f %.2f %.2f" % os.getloadavg())
    torch.set_num_threads(before)


def measure(args, fmt, rounding, x, x_np, out, copy_out):
    opts = (mf.ROUNDING.index(rounding), mf.OVERFLOW.index("saturate"), 0, 0, 0)

    def with_threads(k, f):
        # Changing torch's thread count rebuilds its OpenMP pool, which costs milliseconds on the
        # first parallel call after it; one untimed call first, so the timed call sees a settled pool.
        if torch.get_num_threads() != k:
            torch.set_num_threads(k)
            f()
        return timed(f)

    quantize = lambda: mf.quantize(x, fmt, rounding, "saturate", out=out)  # noqa: E731
    items = {
        "memcpy": lambda: timed(lambda: np.copyto(copy_out, x_np)),
        "memcpy2": lambda: with_threads(2, lambda: out.copy_(x)),
        # torch.set_num_threads(1) first, as for the 1-thread Python call: the same state of torch's pool
        "cpp": lambda: (torch.set_num_threads(1), _core.time_bulk_quantize(x.data_ptr(), out.data_ptr(), args.n,
                                                                           fmt._key, opts))[1],
        "py1": lambda: with_threads(1, quantize),
        "py2": lambda: with_threads(2, quantize),
    }
    if rounding == "nearest_even" and args.torch_reps > 0:
        items["torch1"] = lambda: with_threads(1, lambda: torch_emulation(x, fmt))
        items["torch2"] = lambda: with_threads(2, lambda: torch_emulation(x, fmt))
    samples = {k: [] for k in items}
    order = list(items)
    shuffle = np.random.default_rng(1)
    for rep in range(args.reps):
        shuffle.shuffle(order)  # interleaved, in a fresh order each repetition: no item always follows another
        for key in order:
            if key.startswith("torch") and rep >= args.torch_reps:
                continue
            samples[key].append(items[key]())

    med = {k: statistics.median(v) for k, v in samples.items()}
    gb = args.n * 4 / 1e9
    print(f"format {fmt}, {rounding}, saturate; n = {args.n} float32; {args.reps} interleaved repetitions "
          f"({args.torch_reps} for the torch emulation); medians:")
    labels = (("memcpy", "memcpy (numpy.copyto, 1 thread)"), ("memcpy2", "copy (torch copy_, 2 threads)"),
              ("cpp", "C++ bulk kernel, 1 thread"), ("py1", "minifloat.quantize, 1 thread"),
              ("py2", "minifloat.quantize, 2 threads"), ("torch1", "pure-torch emulation, 1 thread"),
              ("torch2", "pure-torch emulation, 2 threads"))
    for key, label in labels:
        if key in med:
            print(f"  {label:34s} {med[key] * 1e3:9.2f} ms  {gb / med[key]:7.2f} GB/s  "
                  f"{med[key] / med['memcpy']:6.2f}x memcpy   (min {min(samples[key]) * 1e3:.2f} ms)")
    print(f"  minifloat.quantize / C++ kernel (1 thread):        {med['py1'] / med['cpp']:.3f}")
    if "torch1" in med:
        print(f"  pure-torch emulation / minifloat.quantize (1 thr): {med['torch1'] / med['py1']:.1f}")
        print(f"  pure-torch emulation / minifloat.quantize (2 thr): {med['torch2'] / med['py2']:.1f}")
    print(f"  minifloat.quantize 1 thread / 2 threads:           {med['py1'] / med['py2']:.2f}")
    # The control: what two threads get from this machine's memory right now. A memory-bound
    # kernel whose one thread runs at memcpy speed cannot gain more from a second thread than a
    # plain copy does; on a shared VM this varied from 1.0x to 2.1x within the same hour.
    print(f"  control: memcpy 1 thread / torch copy_ 2 threads:  {med['memcpy'] / med['memcpy2']:.2f}")


if __name__ == "__main__":
    main()
