"""GPU throughput of minifloat's CUDA quantize against a device-to-device copy of the same size.

Rounds n float32 values (default 256M, 1 GiB) from one device buffer into another and copies
the same buffer with torch (out.copy_(x)) in the same run; reports GB/s counted as bytes read
plus bytes written, and each kernel's ratio to the copy. Targets: >= 0.8x the copy for
round-to-nearest, >= 0.6x for stochastic rounding. Times are CUDA-event medians of --reps runs
after a warm-up, on the current stream.

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

CASES = [  # (label, format, rounding, count statistics, target ratio to the copy)
    ("e4m3 nearest_even", minifloat.e4m3, "nearest_even", False, 0.8),
    ("bfloat16 nearest_even", minifloat.bfloat16, "nearest_even", False, 0.8),
    ("binary16 nearest_even", minifloat.binary16, "nearest_even", False, 0.8),
    ("e4m3 nearest_even + stats", minifloat.e4m3, "nearest_even", True, 0.8),
    ("e4m3 stochastic", minifloat.e4m3, "stochastic", False, 0.6),
    ("bfloat16 stochastic", minifloat.bfloat16, "stochastic", False, 0.6),
]


def median_ms(run, reps):
    run()  # warm-up (and the first launch's set-up)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        run()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1 << 28, help="float32 values (default 256M)")
    parser.add_argument("--reps", type=int, default=10, help="timed runs per case (median reported)")
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
    n = args.n
    bytes_moved = 2 * 4 * n  # read + write
    x = torch.randn(n, device="cuda", dtype=torch.float32) * 100
    out = torch.empty_like(x)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}; {n} float32 values "
          f"({4 * n / 2**30:.2f} GiB in, as much out); median of {args.reps} runs")
    copy_ms = median_ms(lambda: out.copy_(x), args.reps)
    copy_gbs = bytes_moved / copy_ms / 1e6
    print(f"{'device-to-device copy':28s} {copy_ms:8.3f} ms {copy_gbs:8.1f} GB/s")
    met_all = True
    for label, f, mode, stats, target in CASES:
        opts = rounding_options("bench_cuda", mode, "saturate", 42, 0, 0)
        ms = median_ms(lambda: mc.quantize_into(x, out, f._key, opts, stats), args.reps)
        gbs = bytes_moved / ms / 1e6
        ratio = gbs / copy_gbs
        met = ratio >= target
        met_all &= met
        print(f"{label:28s} {ms:8.3f} ms {gbs:8.1f} GB/s {ratio:6.2f}x copy (target >= {target}x: "
              f"{'met' if met else 'NOT met'})")
    print(f"bench_cuda: targets {'all met' if met_all else 'NOT all met'}")
    return 0  # a missed target is a finding, not a failed run


if __name__ == "__main__":
    sys.exit(main())
