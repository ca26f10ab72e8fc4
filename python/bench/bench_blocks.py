#!/usr/bin/python3
"""Speed of MX fake quantization from Python (docs/performance.md, "Python block formats").

Times, interleaved over repetitions on the same float32 tensor of --n values (16M by default),
rows of --cols values with blocks along the last axis, scale rule FLOOR, nearest-even elements:
  binding  the extension's raw call minifloat._core.quantize_blocks on the same buffers, with the
           same thread count as the Python API (no argument checks, no result allocation);
  Python   minifloat.blocks.quantize_blocks(x, fmt, out=out): every check, the same buffers;
  new      minifloat.blocks.quantize_blocks(x, fmt): a new tensor (its pages first touched here);
  Python1 / C++1  the same on one thread, against block.hpp's quantize_blocks timed inside the
           extension (one call over the whole tensor, no Python in between);
  torchao  torchao's CPU emulation: to_mx then to_dtype (torchao.prototype.mx_formats), the same
           format and rule;
  ml_dtypes  the same scales computed in NumPy, x / X cast with ml_dtypes' astype to the element
           type (after the clamp to ±max the MX conversion does) and back, times X.
Every method's bits are checked equal to the Python API's before timing. Each repetition runs
every item once, in a freshly shuffled order. Prints medians (and minima) and the ratios.
Usage:
  PYTHONPATH=build/h4/python python python/bench/bench_blocks.py [--reps 7] [--n 16777216]
      [--formats mxfp4,mxfp8-e4m3] [--threads N]
"""

import argparse
import random
import statistics
import subprocess
import time

import numpy as np
import torch

from minifloat import _core, blocks
from minifloat._buffers import address

TORCHAO = {"mxfp4": "float4_e2m1fn_x2", "mxfp8-e4m3": "float8_e4m3fn", "mxfp8-e5m2": "float8_e5m2",
           "mxfp6-e2m3": "fp6_e2m3", "mxfp6-e3m2": "fp6_e3m2"}
ML_DTYPES = {"mxfp4": "float4_e2m1fn", "mxfp8-e4m3": "float8_e4m3fn", "mxfp8-e5m2": "float8_e5m2",
             "mxfp6-e2m3": "float6_e2m3fn", "mxfp6-e3m2": "float6_e3m2fn"}


def torchao_method(name, x):
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
    elem = getattr(torch, TORCHAO[name], TORCHAO[name])

    def run():
        scale, data = to_mx(x, elem, 32, ScaleCalculationMode.FLOOR)
        return to_dtype(data, scale, elem, 32, torch.float32).reshape(x.shape)
    return run


def ml_dtypes_method(name, x):
    import ml_dtypes
    f = blocks.as_block_format(name, "bench")
    element_type = getattr(ml_dtypes, ML_DTYPES[name])
    top = np.float32(f.element.max_finite)
    emax = f.element.emax
    a = x.numpy()

    def run():
        b = a.reshape(-1, 32)
        amax = np.abs(b).max(axis=1, keepdims=True)
        field = (amax.view(np.uint32) >> 23).astype(np.int32)  # floor(log2 amax) + 127 for normal amax
        e = np.clip(field - 127 - emax, -127, 127)
        scale = np.where(e >= -126, (e + 127).astype(np.uint32) << 23, np.uint32(0x00400000)).view(np.float32)
        y = np.clip(b / scale, -top, top).astype(element_type).astype(np.float32) * scale
        return torch.from_numpy(y.reshape(a.shape))
    return run


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--n", type=int, default=1 << 24)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--formats", default="mxfp4,mxfp8-e4m3")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--skip", default="", help="comma-separated methods not to time (torchao, ml_dtypes)")
    args = p.parse_args()
    model = subprocess.run(["sh", "-c", "lscpu | sed -n 's/^Model name: *//p'"], capture_output=True, text=True).stdout
    print(f"machine: {model.strip()}; torch threads {args.threads}; n = {args.n}, rows of {args.cols}")
    g = np.random.default_rng(0)
    x = torch.from_numpy((g.standard_normal(args.n) * np.exp2(g.integers(-8, 9, args.n))).astype(np.float32)
                         .reshape(-1, args.cols))
    out = torch.empty_like(x)
    skip = set(filter(None, args.skip.split(",")))
    rows = []
    for name in args.formats.split(","):
        f = blocks.as_block_format(name, "bench")
        opts = (0, 0, 0, 0, 0, 0, 1.0)  # nearest_even, saturate, floor
        before, length = x.shape

        def binding(threads):
            return lambda: _core.quantize_blocks(address(x.numpy()), address(out.numpy()), before, length, 1, f._key,
                                                 opts, threads, False)

        def python_api(threads, into=None):
            def run():
                torch.set_num_threads(threads)
                return blocks.quantize_blocks(x, f, out=into)
            return run

        cpp_seconds = []

        def cpp_one_thread():
            cpp_seconds.append(_core.time_quantize_blocks(address(x.numpy()), address(out.numpy()), x.numel(), f._key,
                                                          opts))

        methods = {"binding": binding(args.threads), "Python": python_api(args.threads, out),
                   "new": python_api(args.threads), "Python1": python_api(1, out), "C++1": cpp_one_thread}
        if "torchao" not in skip:
            methods["torchao"] = torchao_method(name, x)
        if "ml_dtypes" not in skip and name in ML_DTYPES:
            methods["ml_dtypes"] = ml_dtypes_method(name, x)
        # same bits before timing
        want = blocks.quantize_blocks(x, f).numpy().view(np.uint32)
        for m, run in methods.items():
            if m == "C++1":
                run()
                got = out.numpy()
            elif m == "binding":
                run()
                got = out.numpy()
            else:
                got = run().numpy().copy()
            torch.set_num_threads(args.threads)
            if not np.array_equal(got.view(np.uint32), want):
                raise SystemExit(f"{name}: {m} differs from minifloat.blocks.quantize_blocks "
                                 f"({np.count_nonzero(got.view(np.uint32) != want)} values)")
        times = {m: [] for m in methods}
        for _ in range(args.reps):
            order = list(methods)
            random.shuffle(order)
            for m in order:
                if m == "C++1":
                    methods[m]()
                    times[m].append(cpp_seconds[-1])
                else:
                    t0 = time.perf_counter()
                    methods[m]()
                    times[m].append(time.perf_counter() - t0)
                torch.set_num_threads(args.threads)
        med = {m: statistics.median(t) for m, t in times.items()}
        for m in methods:
            rows.append((name, m, med[m], min(times[m])))
        print(f"\n{name}: median (min) ms over {args.reps} interleaved repetitions, bits checked equal")
        for m in methods:
            print(f"  {m:10s} {1e3 * med[m]:9.1f} ({1e3 * min(times[m]):9.1f})")
        print(f"  Python / binding          {med['Python'] / med['binding']:.3f}x   (target <= 1.15x)")
        print(f"  new / binding             {med['new'] / med['binding']:.3f}x")
        print(f"  Python1 / C++1            {med['Python1'] / med['C++1']:.3f}x")
        for m in ("torchao", "ml_dtypes"):
            if m in med:
                print(f"  {m} / new {'':13s}{med[m] / med['new']:.1f}x   (target >= 10x; both make a new tensor)")


if __name__ == "__main__":
    main()
