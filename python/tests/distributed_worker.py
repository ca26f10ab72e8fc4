"""One rank of test_distributed.py's process groups (gloo on 127.0.0.1).

Run as: python distributed_worker.py RANK WORLD_SIZE PORT OUT_DIR [SCENARIOS]. It runs the scenarios
and saves what it saw to OUT_DIR/rank{RANK}.pt; test_distributed.py recomputes the same
arithmetic in one process and compares. The buffers each rank feeds are made from seeds the test
knows (bucket_values), so the test can rebuild every rank's input.
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist

import minifloat.distributed as mfd

N = 1003  # not a multiple of a block, of 4 codes a word or of 2 nibbles a byte
STEPS = 3

# (name, format, options); the test's references mirror this list.
DIRECT_CASES = [
    ("e4m3_nearest", "e4m3", {}),
    ("e4m3_stochastic", "e4m3", {"rounding": "stochastic", "seed": 11}),
    ("bf16_stochastic_round_back", "bf16", {"rounding": "stochastic", "seed": 5, "round_back": True}),
    ("paper_fp434_nearest", "paper_fp(4,3,4)", {}),
    ("e5m2_error_feedback", "e5m2", {"rounding": "stochastic", "seed": 3, "error_feedback": True}),
    ("e4m3_faithful_stochastic", "e4m3", {"rounding": "stochastic", "seed": 9, "faithful_sum": True}),
    ("mxfp8_nearest", "mxfp8-e4m3", {}),
    ("mxfp4_stochastic", "mxfp4", {"rounding": "stochastic", "seed": 2}),
    ("mxfp6_e3m2_round_back", "mxfp6-e3m2", {"round_back": True}),
    ("nvfp4_nearest", "nvfp4", {}),
    ("mxfp8_faithful", "mxfp8-e4m3", {"faithful_sum": True}),
]
WRAPPER_CASE = 99
NAN_CASES = [("e4m3", "e4m3"), ("paper_fp434", "paper_fp(4,3,4)"), ("mxfp8", "mxfp8-e4m3")]
NAN_POSITION = 77


def bucket_values(case, rank, step, n=N):
    """Rank `rank`'s bucket at `step` of direct case number `case`: normal values times 2^k, k
    uniform in [-24, 10], so that e4m3 overflows and underflows now and then."""
    g = torch.Generator().manual_seed(100_000 * case + 1000 * step + rank)
    return torch.randn(n, generator=g) * torch.pow(2.0, torch.randint(-24, 11, (n,), generator=g).float())


class FakeBucket:
    """The part of dist.GradBucket a hook reads."""

    def __init__(self, buffer, index, is_last):
        self._buffer, self._index, self._is_last = buffer, index, is_last

    def buffer(self):
        return self._buffer

    def index(self):
        return self._index

    def is_last(self):
        return self._is_last

    def parameters(self):
        return []


class CountingCollective:
    """dist.all_gather_single with every input's bytes counted (what this rank handed to the group)."""

    def __init__(self):
        self.original = dist.all_gather_single
        self.bytes = 0
        self.inputs = []

    def __call__(self, output, input, group=None, async_op=False):
        self.bytes += input.numel() * input.element_size()
        self.inputs.append(input.clone())
        return self.original(output, input, group=group, async_op=async_op)


def run_direct(rank, counter):
    out = {}
    for case, (name, fmt, options) in enumerate(DIRECT_CASES):
        hook = mfd.compress_hook(fmt, **options)
        counter.bytes, counter.inputs = 0, []
        results, stats = [], []
        for step in range(STEPS):
            buffer = bucket_values(case, rank, step)
            fut = hook(hook.state, FakeBucket(buffer, 0, True))
            results.append(fut.wait().clone())
            stats.append(dict(hook.state.bucket_stats[0]))
        out[name] = {"results": results, "stats": stats, "counted_bytes": counter.bytes,
                     "accounting": hook.state.accounting(), "payloads": counter.inputs}
    # the same bucket on every rank and step: stochastic draws must still differ by rank and step
    hook = mfd.compress_hook("e4m3", "stochastic", seed=4)
    counter.inputs = []
    same = torch.linspace(-3, 3, N)
    for step in range(2):
        hook(hook.state, FakeBucket(same.clone(), 0, True)).wait()
    out["same_input_payloads"] = counter.inputs
    # compress_wrapper around a plain all-reduce (sum of buffer / world_size), on bf16 with stochastic draws
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    hook = mfd.compress_wrapper("bf16", allreduce_hook, "stochastic", seed=6)
    wrapped = []
    for step in range(STEPS):
        wrapped.append(hook(None, FakeBucket(bucket_values(WRAPPER_CASE, rank, step), 0, True)).wait().clone())
    out["wrapper_bf16_stochastic"] = {"results": wrapped, "stats": hook.state.total_stats}
    return out


def run_nan(rank):
    out = {}
    for name, fmt in NAN_CASES:
        hook = mfd.compress_hook(fmt)
        buffer = bucket_values(0, rank, 0)
        if rank == 1:
            buffer[NAN_POSITION] = float("nan")
        result = hook(hook.state, FakeBucket(buffer, 0, True)).wait().clone()
        after = hook(hook.state, FakeBucket(bucket_values(0, rank, 1), 0, True)).wait().clone()  # the group still works
        out[name] = {"result": result, "after": after, "stats": hook.state.total_stats}
    return out


def model_and_data(rank):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    g = torch.Generator().manual_seed(50 + rank)
    data = [(torch.randn(8, 12, generator=g), torch.randint(0, 4, (8,), generator=g)) for _ in range(4)]
    return model, data


def train(rank, hook_factory, bucket_cap_mb=0.002):
    """Four SGD steps of a small model under DDP (several buckets), with the hook from hook_factory
    (None: plain DDP). Returns the weights and the hook's accounting."""
    model, data = model_and_data(rank)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
    hook = None
    if hook_factory is not None:
        hook = hook_factory()
        ddp.register_comm_hook(hook.state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for x, y in data:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    weights = [p.detach().clone() for p in model.parameters()]
    return weights, (hook.state.accounting() if hook else None)


def run_checkpoint(rank):
    """Hooks with error feedback and stochastic rounding (a scalar and a block format) run STEPS
    steps straight, and again with a checkpoint after step 1: state_dict() through torch.save,
    loaded into a fresh hook (made with another seed, which the checkpoint replaces) that runs the
    remaining steps. test_distributed.py compares the two runs bit for bit."""
    import io
    out = {}
    for name, fmt in (("e5m2", "e5m2"), ("mxfp4", "mxfp4")):
        make = lambda seed=3: mfd.compress_hook(fmt, "stochastic", seed=seed, error_feedback=True)  # noqa: E731
        straight = make()
        whole = [straight(straight.state, FakeBucket(bucket_values(40, rank, step), 0, True)).wait().clone()
                 for step in range(STEPS)]
        first = make()
        first(first.state, FakeBucket(bucket_values(40, rank, 0), 0, True)).wait()
        saved = io.BytesIO()
        torch.save(first.state.state_dict(), saved)
        resumed = make(seed=99)
        saved.seek(0)
        resumed.state.load_state_dict(torch.load(saved, weights_only=True))
        rest = [resumed(resumed.state, FakeBucket(bucket_values(40, rank, step), 0, True)).wait().clone()
                for step in range(1, STEPS)]
        out[name] = {"straight": whole, "resumed": rest, "straight_accounting": straight.state.accounting(),
                     "resumed_accounting": resumed.state.accounting()}
    return out


def train_resumed(rank, hook_factory, split=2, bucket_cap_mb=0.002):
    """train(), checkpointed after `split` steps: the model, optimizer and hook states saved, then
    loaded into a fresh model, DDP, optimizer and hook that run the remaining steps (after one
    backward of a zero loss, as docs/distributed.md says, so that DDP has rebuilt its buckets)."""
    import io
    model, data = model_and_data(rank)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
    hook = hook_factory()
    ddp.register_comm_hook(hook.state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    saved = io.BytesIO()
    for step, (x, y) in enumerate(data):
        if step == split:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "hook": hook.state.state_dict()}, saved)
            saved.seek(0)
            checkpoint = torch.load(saved, weights_only=True)
            model, _ = model_and_data(rank)
            model.load_state_dict(checkpoint["model"])
            ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
            hook = hook_factory()
            ddp.register_comm_hook(hook.state, hook)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
            opt.load_state_dict(checkpoint["opt"])
            # DDP's first backward uses buckets in parameter order and rebuilds them afterwards:
            # one backward of a zero loss first, so the resumed steps see the buckets of the run
            # that never stopped; then the hook's state (which that backward changed) is loaded
            (0.0 * torch.nn.functional.cross_entropy(ddp(x), y)).backward()
            opt.zero_grad()
            hook.state.load_state_dict(checkpoint["hook"])
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()], hook.state.accounting()


def run_ddp(rank, counter):
    out = {}
    out["plain"], _ = train(rank, None)
    out["fp32_codes"], _ = train(rank, lambda: mfd.compress_hook("binary32"))
    counter.bytes = 0
    out["e4m3_sr_ef"], out["e4m3_sr_ef_accounting"] = train(
        rank, lambda: mfd.compress_hook("e4m3", "stochastic", seed=7, error_feedback=True))
    out["e4m3_sr_ef_counted_bytes"] = counter.bytes
    # the same run again in these processes (a fresh model, DDP and hook), and checkpointed midway
    out["e4m3_sr_ef_again"], _ = train(rank, lambda: mfd.compress_hook("e4m3", "stochastic", seed=7,
                                                                         error_feedback=True))
    out["e4m3_sr_ef_resumed"], out["e4m3_sr_ef_resumed_accounting"] = train_resumed(
        rank, lambda: mfd.compress_hook("e4m3", "stochastic", seed=7, error_feedback=True))
    out["e4m3_sr_ef_seed8"], _ = train(rank, lambda: mfd.compress_hook("e4m3", "stochastic", seed=8,
                                                                         error_feedback=True))
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    out["wrapped_fp32"], _ = train(rank, lambda: _wrapped("binary32", allreduce_hook))
    out["wrapped_bf16"], _ = train(rank, lambda: _wrapped("bf16", allreduce_hook))
    return out


def _wrapped(fmt, inner):
    hook = mfd.compress_wrapper(fmt, inner)
    # allreduce_hook takes the process group as its state; the wrapper's own state rides along
    wrapped = lambda _state, bucket: hook(None, bucket)  # noqa: E731
    wrapped.state = hook.state
    return wrapped


def main():
    rank, world_size, port, out_dir = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    scenarios = sys.argv[5].split(",") if len(sys.argv) > 5 else ["direct", "nan", "ddp", "checkpoint"]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=60))
    counter = CountingCollective()
    dist.all_gather_single = counter
    try:
        runs = {"direct": lambda: run_direct(rank, counter), "nan": lambda: run_nan(rank),
                "ddp": lambda: run_ddp(rank, counter), "checkpoint": lambda: run_checkpoint(rank)}
        result = {name: runs[name]() for name in scenarios}
    finally:
        dist.all_gather_single = counter.original
    torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
