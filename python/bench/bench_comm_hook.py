#!/usr/bin/env python3
"""Time DDP communication hooks on one gradient bucket: minifloat.distributed.compress_hook in
several formats beside torch's fp16_compress_hook and allreduce_hook (fp32), on a gloo group of
--world processes on 127.0.0.1.

A hook's time is from the call until its future's value is ready on this rank: encoding, the
collective and decoding/summing, as DDP waits for it. Each call starts after a barrier; the
repetitions are interleaved (each runs every hook once), and the table gives the median over
--reps repetitions (after one warm-up) of the slower rank, and the bytes each rank handed to the
collective. Every process runs --threads torch threads (0: torch's default).

  PYTHONPATH=build/release/python python3 python/bench/bench_comm_hook.py --mb 25 --reps 10
"""

import argparse
import datetime
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class Bucket:
    """The part of dist.GradBucket a hook reads."""

    def __init__(self, buffer):
        self._buffer = buffer

    def buffer(self):
        return self._buffer

    def index(self):
        return 0

    def is_last(self):
        return True

    def parameters(self):
        return []


def hooks():
    import minifloat.distributed as mfd
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    out = [("torch allreduce_hook (fp32)", None, lambda: (None, default_hooks.allreduce_hook)),
           ("torch fp16_compress_hook", None, lambda: (None, default_hooks.fp16_compress_hook))]
    for label, fmt, kw in [("minifloat bf16", "bf16", {}), ("minifloat fp16", "fp16", {}),
                           ("minifloat e4m3", "e4m3", {}),
                           ("minifloat e4m3 stochastic", "e4m3", {"rounding": "stochastic", "seed": 1}),
                           ("minifloat e4m3 stochastic + error feedback", "e4m3",
                            {"rounding": "stochastic", "seed": 1, "error_feedback": True}),
                           ("minifloat e4m3 round back", "e4m3", {"round_back": True}),
                           ("minifloat e4m3 faithful sum", "e4m3", {"faithful_sum": True}),
                           ("minifloat mxfp8-e4m3", "mxfp8-e4m3", {}), ("minifloat mxfp4", "mxfp4", {})]:
        def make(fmt=fmt, kw=kw):
            h = mfd.compress_hook(fmt, **kw)
            return h.state, h
        out.append((label, fmt, make))
    return out


def worker(rank, world, port, args, queue):
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(minutes=5))
    n = int(args.mb * 1e6) // 4
    source = torch.randn(n, generator=torch.Generator().manual_seed(rank)) * 1e-2
    counted = [0]
    for name in ("all_reduce", "all_gather_single", "all_gather_into_tensor"):
        original = getattr(dist, name, None)
        if original is None:
            continue

        def counting(output, *rest, _original=original, **kw):
            counted[0] += (rest[0] if rest and isinstance(rest[0], torch.Tensor) else output).nbytes
            return _original(output, *rest, **kw)
        setattr(dist, name, counting)
    chosen = [(label, make) for label, fmt, make in hooks()
              if not args.only or any(o in label for o in args.only)]
    made = [make() for _, make in chosen]
    times = [[] for _ in chosen]
    nbytes = [0] * len(chosen)
    # Interleaved: each repetition runs every hook once, in the order listed, so a change in the
    # machine's load during the run falls on every hook alike. Repetition 0 is the warm-up.
    for rep in range(args.reps + 1):
        for k, (state, hook) in enumerate(made):
            buffer = source.clone()
            dist.barrier()
            counted[0] = 0
            t0 = time.perf_counter()
            hook(state, Bucket(buffer)).wait()
            elapsed = time.perf_counter() - t0
            nbytes[k] = counted[0]
            worst = torch.tensor([elapsed], dtype=torch.float64)
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            if rep > 0:
                times[k].append(float(worst))
    rows = [(label, statistics.median(t), min(t), b) for (label, _), t, b in zip(chosen, times, nbytes)]
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=25.0, help="bucket size in MB of fp32 (default 25, DDP's default cap)")
    p.add_argument("--world", type=int, default=2, help="processes (default 2)")
    p.add_argument("--reps", type=int, default=10, help="timed repetitions (default 10)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per process (default 1; 0: torch's default, one per core)")
    p.add_argument("--only", nargs="*", default=None, help="run only hooks whose label contains one of these")
    p.add_argument("--csv", default=None, help="also write the table as CSV here")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=worker, args=(r, args.world, port, args, queue)) for r in range(args.world)]
    for proc in procs:
        proc.start()
    rows = queue.get()
    for proc in procs:
        proc.join()
    fp16 = next((r[1] for r in rows if r[0] == "torch fp16_compress_hook"), None)
    threads = f"{args.threads} thread(s)" if args.threads > 0 else f"torch's default {torch.get_num_threads()} thread(s)"
    print(f"bucket {args.mb} MB fp32 ({int(args.mb * 1e6) // 4} values), {args.world} processes, gloo on 127.0.0.1, "
          f"{threads} each, median of {args.reps} interleaved (slower rank)")
    print("| hook | median ms | min ms | bytes per rank to the collective | vs fp16_compress_hook |")
    print("|---|---|---|---|---|")
    for label, med, low, nbytes in rows:
        ratio = f"{med / fp16:.2f}x" if fp16 else ""
        print(f"| {label} | {med * 1e3:.1f} | {low * 1e3:.1f} | {nbytes} | {ratio} |")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("hook,median_ms,min_ms,bytes_per_rank,vs_fp16_compress_hook\n")
            for label, med, low, nbytes in rows:
                f.write(f"{label},{med * 1e3:.3f},{low * 1e3:.3f},{nbytes},{med / fp16:.3f}\n" if fp16 else
                        f"{label},{med * 1e3:.3f},{low * 1e3:.3f},{nbytes},\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
