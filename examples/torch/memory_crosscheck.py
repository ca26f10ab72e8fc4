#!/usr/bin/env python3
"""Check the hooks' saved-bytes accounting against the allocators: fp32 against packed storage.

The saved-tensor hooks (minifloat.training.SavedTensorStore) count the bytes they hold for
backward themselves. This script measures the same thing from the allocators, for one model and
batch and each given assignment: one training forward pass with tensors saved as float32 (mode
fp32), one with them bit-packed (mode packed), each measured as the bytes allocated during the
forward and still live at its end (what the forward leaves for the backward):

- torch's allocations from torch.profiler's memory profiling (profile_memory=True: every c10
  allocation and free inside the forward, summed), and
- NumPy's (the packed codes are NumPy buffers wrapped as tensors) from tracemalloc's NumPy domain.

The hooks' difference between the two modes (what packing saves) must match the allocators'
difference within --tolerance (a share of the hooks' difference). A warm-up step runs first, so
lazily built state is not counted. Prints a table; writes a JSON with every number and the
provenance (commit, dirty flag, versions: provenance.py). Exit status 1 when a check fails.

  PYTHONPATH=build/release/python python examples/torch/memory_crosscheck.py --out results/torch/memory-crosscheck.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import reproduce  # noqa: E402  (the powered design's model, batch and low formats are the defaults)

TOLERANCE = 0.01


def parser():
    s, low = reproduce.SCHEDULE, reproduce.LOW
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=s["model"], help=f"model of examples/torch/models.py (default {s['model']})")
    p.add_argument("--width", type=float, default=s["width"], help=f"width multiplier (default {s['width']})")
    p.add_argument("--batch-size", type=int, default=s["batch"], help=f"batch (default {s['batch']})")
    p.add_argument("--assignments", default="uniform,op,ours-0.9",
                   help="comma-separated assignments: all-high, uniform, op, op-variant, ours-R (default "
                        "uniform,op,ours-0.9)")
    p.add_argument("--low-forward", default=low["forward"], help=f"low format of Y and P (default {low['forward']})")
    p.add_argument("--low-backward", default=low["backward"], help=f"low format of GY and GP (default {low['backward']})")
    p.add_argument("--tolerance", type=float, default=TOLERANCE,
                   help=f"allowed |allocators - hooks| / hooks on the fp32 - packed difference (default {TOLERANCE})")
    p.add_argument("--seed", type=int, default=0, help="seed of the model, batch and rounding (default 0)")
    p.add_argument("--out", default=None, help="write the JSON here (default: print only)")
    return p


def _assignment(text):
    """("ours", r) for ours-R, else (text, 0.0); ValueError naming --assignments otherwise."""
    import minifloat.training as mt
    if text.startswith("ours-"):
        try:
            r = float(text[5:])
        except ValueError:
            r = -1.0
        if 0.0 <= r <= 1.0:
            return "ours", r
    elif text in mt.ASSIGNMENTS and text not in ("ours", "fp32"):
        return text, 0.0
    raise ValueError(f"--assignments: {text!r} is not all-high, uniform, op, op-variant or ours-R with R in [0, 1]")


def _numpy_live_bytes():
    import numpy as np
    traces = tracemalloc.take_snapshot().filter_traces([tracemalloc.DomainFilter(True, np.lib.tracemalloc_domain)])
    return sum(t.size for t in traces.traces)


def measure(args, assignment, mode):
    """One configuration: hooks' live saved bytes per category and the allocators' live bytes at
    the end of a training forward pass."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    import minifloat.training as mt
    import models

    torch.manual_seed(args.seed)
    model = models.build(args.model, args.width)
    high = mt.Candidates().Y[0]
    candidates = mt.Candidates(Y=(high, args.low_forward), GY=(high, args.low_backward), P=(high, args.low_forward),
                               GP=(high, args.low_backward))
    x = torch.randn(args.batch_size, 1, 28, 28, generator=torch.Generator().manual_seed(args.seed))
    y = torch.randint(0, 10, (args.batch_size,), generator=torch.Generator().manual_seed(args.seed + 1))
    pm = mt.instrument(model, torch.zeros_like(x), candidates=candidates, seed=args.seed)
    name, ratio = _assignment(assignment)
    pm.assign(name, ratio=ratio)
    store = pm.store_saved_tensors(mode)
    pm.module.train()
    loss_fn = torch.nn.functional.cross_entropy

    pm.begin_step(0)   # warm-up: anything built on the first call is not counted below
    with store:
        loss = loss_fn(pm(x), y)
    loss.backward()
    del loss
    gc.collect()

    pm.begin_step(1)
    tracemalloc.start()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with store:
            loss = loss_fn(pm(x), y)
        numpy_bytes = _numpy_live_bytes()   # inside the profiler: its own bookkeeping comes after
    tracemalloc.stop()
    hooks = dict(store.live)
    hooks_fp32 = dict(store.fp32_live)
    loss.backward()
    torch_bytes = sum(e.self_cpu_memory_usage for e in prof.events())
    return {"hooks_live_bytes": hooks, "hooks_total_bytes": sum(hooks.values()),
            "hooks_as_fp32_bytes": sum(hooks_fp32.values()), "torch_allocator_bytes": torch_bytes,
            "numpy_allocator_bytes": numpy_bytes, "allocator_bytes": torch_bytes + numpy_bytes}


def run(args):
    out = {"model": args.model, "width": args.width, "batch": args.batch_size, "low_forward": args.low_forward,
           "low_backward": args.low_backward, "seed": args.seed, "tolerance": args.tolerance, "assignments": {}}
    ok = True
    for a in [a for a in args.assignments.split(",") if a]:
        fp32, packed = measure(args, a, "fp32"), measure(args, a, "packed")
        hooks_saving = fp32["hooks_total_bytes"] - packed["hooks_total_bytes"]
        alloc_saving = fp32["allocator_bytes"] - packed["allocator_bytes"]
        error = (alloc_saving - hooks_saving) / hooks_saving if hooks_saving else float("inf")
        passed = abs(error) <= args.tolerance
        ok &= passed
        out["assignments"][a] = {"fp32": fp32, "packed": packed, "hooks_saving_bytes": hooks_saving,
                                 "allocator_saving_bytes": alloc_saving, "relative_error": error, "passed": passed}
        print(f"{a:10s} hooks: fp32 {fp32['hooks_total_bytes']} B, packed {packed['hooks_total_bytes']} B, saving "
              f"{hooks_saving} B | allocators: fp32 {fp32['allocator_bytes']} B, packed {packed['allocator_bytes']} B "
              f"(torch {packed['torch_allocator_bytes']} + numpy {packed['numpy_allocator_bytes']}), saving "
              f"{alloc_saving} B | relative error {error:+.2e} {'ok' if passed else 'FAILED'} "
              f"(tolerance {args.tolerance:g})", flush=True)
    out["passed"] = ok
    return out


def main(argv=None):
    args = parser().parse_args(argv)
    if args.batch_size < 1 or not 0 <= args.tolerance < 1:
        parser().error("--batch-size must be positive and --tolerance in [0, 1)")
    try:
        for a in args.assignments.split(","):
            _assignment(a)
    except ValueError as e:
        parser().error(str(e))
    import torch
    torch.set_num_threads(1)
    result = run(args)
    if args.out:
        import provenance
        result["provenance"] = provenance.record(ROOT, sys.executable, dict(os.environ))
        result["command"] = ["examples/torch/memory_crosscheck.py"] + list(argv if argv is not None else sys.argv[1:])
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.out)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
