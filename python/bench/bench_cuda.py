"""GPU throughput of minifloat's CUDA quantize against a device-to-device copy of the same size.

Rounds n float32 values (default 256M, 1 GiB) from one device buffer into another and copies
the same buffer with torch (out.copy_(x)) in the same run; reports GB/s counted as bytes read
plus bytes written, and each kernel's ratio to the copy. Targets: >= 0.8x the copy for
round-to-nearest, >= 0.6x for stochastic rounding. Block formats (MX, NVFP4 with a given
tensor scale, blocks of 1024-value rows) and random bit patterns are reported without a target.
Times are CUDA-event medians of --reps rounds after a warm-up, each round timing every case once
(interleaved), on the current stream.

  PYTHONPATH=<build>/python python3 python/bench/bench_cuda.py [--n 268435456] [--reps 10]
  ... --dry-run   checks the arguments and that the CUDA build imports, without a GPU
"""

import argparse
import statistics
import sys

import torch

import minifloat
import minifloat._cuda as mc
from minifloat._ops import rounding_options

CASES = [  # (label, format, rounding, count statistics, data, target ratio to the copy or None)
    ("e4m3 nearest_even", minifloat.e4m3, "nearest_even", False, "randn", 0.8),
    ("bfloat16 nearest_even", minifloat.bfloat16, "nearest_even", False, "randn", 0.8),
    ("binary16 nearest_even", minifloat.binary16, "nearest_even", False, "randn", 0.8),
    ("e4m3 nearest_even + stats", minifloat.e4m3, "nearest_even", True, "randn", 0.8),
    ("e4m3 stochastic", minifloat.e4m3, "stochastic", False, "randn", 0.6),
    ("bfloat16 stochastic", minifloat.bfloat16, "stochastic", False, "randn", 0.6),
    ("e4m3 nearest_even, bit noise", minifloat.e4m3, "nearest_even", False, "bits", None),
    ("mxfp8-e4m3 nearest_even", "mxfp8-e4m3", "nearest_even", False, "randn", None),
    ("mxfp4 nearest_even", "mxfp4", "nearest_even", False, "randn", None),
    ("mxfp4 stochastic", "mxfp4", "stochastic", False, "randn", None),
    ("nvfp4 nearest_even", "nvfp4", "nearest_even", False, "randn", None),
]


def timed_ms(run):
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    run()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1 << 28, help="float32 values (default 256M)")
    parser.add_argument("--reps", type=int, default=10, help="timed rounds (median reported)")
    parser.add_argument("--dry-run", action="store_true", help="no GPU: check arguments and the import only")
    args = parser.parse_args()
    if args.n < 1 or args.reps < 1:
        parser.error("--n and --reps must be positive")
    if args.dry_run:
        print(f"bench_cuda --dry-run: CUDA kernels built: {mc.is_built()}; can run here: "
              f"{mc.is_available() or mc.problem()}; {len(CASES)} cases of {args.n} float32 values would run")
        return 0 if mc.is_built() else 1
    if not mc.is_available():
        print("bench_cuda: the CUDA kernels cannot run here:", mc.problem())
        return 1
    n = args.n - args.n % 1024  # whole blocks of every block format, rows of 1024
    bytes_moved = 2 * 4 * n  # read + write
    data = {"randn": torch.randn(n, device="cuda", dtype=torch.float32) * 100,
            "bits": torch.randint(-2**31, 2**31, (n,), device="cuda", dtype=torch.int32).view(torch.float32)}
    out = torch.empty_like(data["randn"])
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; {n} float32 values "
          f"({4 * n / 2**30:.2f} GiB in, as much out); median of {args.reps} interleaved rounds; data: randn * 100 "
          "(bit noise: uniformly random bit patterns, NaN and Inf included)")
    runs = {"device-to-device copy": lambda: out.copy_(data["randn"])}
    for label, f, mode, stats, source, _ in CASES:
        x = data[source]
        if isinstance(f, str):
            block = minifloat.blocks.NAMED_BLOCKS[f]
            opts = minifloat.blocks._options("bench_cuda", block, mode, "floor", "saturate", 42, 0, 0,
                                             None if block.scaling == "e8m0" else 0.01)
            runs[label] = (lambda x=x, block=block, opts=opts:
                           mc.quantize_blocks_into(x, out, (n // 1024, 1024, 1), block._key, opts, False))
        else:
            opts = rounding_options("bench_cuda", mode, "saturate", 42, 0, 0)
            runs[label] = lambda x=x, f=f, opts=opts, stats=stats: mc.quantize_into(x, out, f._key, opts, stats)
    for run in runs.values():  # warm-up (and each first launch's set-up)
        run()
    torch.cuda.synchronize()
    times = {label: [] for label in runs}
    for _ in range(args.reps):  # interleaved: every case once per round
        for label, run in runs.items():
            times[label].append(timed_ms(run))
    copy_ms = statistics.median(times["device-to-device copy"])
    copy_gbs = bytes_moved / copy_ms / 1e6
    print(f"{'device-to-device copy':30s} {copy_ms:8.3f} ms {copy_gbs:8.1f} GB/s")
    met_all = True
    for label, _, _, _, _, target in CASES:
        ms = statistics.median(times[label])
        gbs = bytes_moved / ms / 1e6
        ratio = gbs / copy_gbs
        verdict = ""
        if target is not None:
            met = ratio >= target
            met_all &= met
            verdict = f" (target >= {target}x: {'met' if met else 'NOT met'})"
        print(f"{label:30s} {ms:8.3f} ms {gbs:8.1f} GB/s {ratio:6.2f}x copy{verdict}")
    print(f"bench_cuda: targets {'all met' if met_all else 'NOT all met'}")
    return 0  # a missed target is a finding, not a failed run


if __name__ == "__main__":
    sys.exit(main())
