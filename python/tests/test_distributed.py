"""minifloat.distributed: DDP communication hooks on a real 2-process gloo group (127.0.0.1).

Each rank (distributed_worker.py) runs the hooks and saves what it saw; the tests here redo the
same arithmetic in this one process with minifloat.quantize (the value path: no codes, no
packing, no exchange) and compare bit for bit. The worker pair runs under a timeout, so a hang
fails the test instead of blocking.
"""

import os
import socket
import subprocess
import sys

import pytest
import torch

dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available in this torch build", allow_module_level=True)

import minifloat as mf  # noqa: E402
import minifloat.distributed as mfd  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import distributed_worker as worker  # noqa: E402

WORLD = 2
TIMEOUT_S = 240


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(out_dir, scenarios):
    """Both ranks of the worker; their results, or a failure with their output."""
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore::FutureWarning")
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "distributed_worker.py"), str(r), str(WORLD),
                               str(port), str(out_dir), scenarios], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env=env) for r in range(WORLD)]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=TIMEOUT_S)[0].decode(errors="replace"))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"the {WORLD} ranks did not finish within {TIMEOUT_S} s (a hang)")
    for p, text in zip(procs, outputs):
        assert p.returncode == 0, f"rank exited with {p.returncode}:\n{text[-4000:]}"
    return [torch.load(out_dir / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """One 2-process group runs every scenario (each process start costs seconds)."""
    return launch(tmp_path_factory.mktemp("run"), "direct,nan,ddp,checkpoint")


def bits(t):
    return t.contiguous().view(torch.int32)


def same_bits(a, b):
    return torch.equal(bits(a), bits(b))


def comm_format(name):
    return mf.NAMED_BLOCKS.get(name) or mf.parse_format(name)


def reference(case):
    """The hook's arithmetic for direct case `case`, in one process: each rank's bucket / W (plus its
    residual), rounded with the seed (seed, step, rank, bucket 0); the fp32 sum in rank order; then
    round back (seed key W in the rank position) or the faithful ring (W = 2: one hop, key W + 1)."""
    name, fmt_name, options = worker.DIRECT_CASES[case]
    fmt = comm_format(fmt_name)
    rounding, seed = options.get("rounding", "nearest_even"), options.get("seed", 0)
    residual = [torch.zeros(worker.N) for _ in range(WORLD)]
    results, stats = [], []
    for step in range(worker.STEPS):
        rounded, step_stats = [], []
        for r in range(WORLD):
            x = worker.bucket_values(case, r, step) / WORLD
            if options.get("error_feedback"):
                x = x + residual[r]
            q, st = mf.quantize(x, fmt, rounding, "saturate", seed=mf.fold_seed(seed, step, r, 0), stats=True)
            residual[r] = torch.nan_to_num(x - q, nan=0.0, posinf=0.0, neginf=0.0)
            rounded.append(q)
            step_stats.append(st)
        total = rounded[0] + rounded[1]
        if options.get("faithful_sum"):
            total = mf.quantize(total, fmt, rounding, "saturate", seed=mf.fold_seed(seed, step, WORLD + 1, 0))
        elif options.get("round_back"):
            total = mf.quantize(total, fmt, rounding, "saturate", seed=mf.fold_seed(seed, step, WORLD, 0))
        results.append(total)
        stats.append(step_stats)
    return results, stats


CASES = [c[0] for c in worker.DIRECT_CASES]


@pytest.mark.parametrize("case", range(len(CASES)), ids=CASES)
def test_averaged_gradient_equals_single_process_arithmetic_bit_for_bit(ranks, case):
    name = CASES[case]
    expected, _ = reference(case)
    for r in range(WORLD):
        got = ranks[r]["direct"][name]["results"]
        for step in range(worker.STEPS):
            assert same_bits(got[step], expected[step]), f"rank {r} step {step}"
    assert not same_bits(expected[0], worker.bucket_values(case, 0, 0) / WORLD
                         + worker.bucket_values(case, 1, 0) / WORLD)  # the format did round something


@pytest.mark.parametrize("case", range(len(CASES)), ids=CASES)
def test_overflow_and_underflow_counts_are_the_formats_own_per_bucket(ranks, case):
    _, expected = reference(case)
    for r in range(WORLD):
        for step in range(worker.STEPS):
            got, want = ranks[r]["direct"][CASES[case]]["stats"][step], expected[step][r]
            elements = want.elements if isinstance(want, mf.BlockStats) else want
            assert (got["values"], got["overflows"], got["underflows"], got["nans"]) == (
                elements.values, elements.overflows, elements.underflows, elements.nans)
            if isinstance(want, mf.BlockStats):
                assert (got["nan_blocks"], got["scale_clamped"]) == (want.nan_blocks, want.scale_clamped)


def test_e4m3_test_buckets_do_overflow_and_underflow(ranks):
    stats = ranks[0]["direct"]["e4m3_nearest"]["stats"]
    assert sum(s["overflows"] for s in stats) > 0 and sum(s["underflows"] for s in stats) > 0


def expected_payload_bytes(fmt):
    n = worker.N
    if isinstance(fmt, mf.BlockFormat):
        width = fmt.element.bit_width
        elements = (n + 1) // 2 if width == 4 else n if width == 8 else 4 * -(-(n * width) // 32)
        return elements + -(-n // fmt.block_size) + (4 if fmt.scaling != "e8m0" else 0)
    codes = n * fmt.bit_width // 8 if fmt.bit_width in (8, 16, 32) else 4 * -(-(n * fmt.bit_width) // 32)
    return codes + (0 if fmt.has_nan else 1)


def test_wire_bytes_are_minifloat_pack_of_the_codes(ranks):
    case = CASES.index("e4m3_nearest")
    for r in range(WORLD):
        x = worker.bucket_values(case, r, 0) / WORLD
        codes = mf.encode(x, mf.e4m3, overflow="saturate")
        sent = ranks[r]["direct"]["e4m3_nearest"]["payloads"][0]
        assert torch.equal(sent, mf.pack(codes, 8)[:worker.N])


@pytest.mark.parametrize("case", range(len(CASES)), ids=CASES)
def test_bytes_counted_equal_bytes_handed_to_the_process_group(ranks, case):
    name, fmt_name, _ = worker.DIRECT_CASES[case]
    for r in range(WORLD):
        seen = ranks[r]["direct"][name]
        acc = seen["accounting"]
        assert acc["bytes_sent_total"] == seen["counted_bytes"] == worker.STEPS * expected_payload_bytes(
            comm_format(fmt_name))
        assert acc["bytes_sent_step"] * worker.STEPS == acc["bytes_sent_total"]
        assert acc["fp32_bytes_total"] == worker.STEPS * 4 * worker.N
        assert acc["step"] == worker.STEPS


def test_bytes_counted_under_ddp_equal_bytes_through_the_collective(ranks):
    for r in range(WORLD):
        ddp = ranks[r]["ddp"]
        acc = ddp["e4m3_sr_ef_accounting"]
        assert acc["bytes_sent_total"] == ddp["e4m3_sr_ef_counted_bytes"] > 0
        params = sum(p.numel() for p in ddp["plain"])
        assert acc["fp32_bytes_total"] == 4 * params * acc["step"]
        assert acc["bytes_sent_total"] < acc["fp32_bytes_total"] / 3  # 8-bit codes, a few padding bytes


def test_stochastic_draws_differ_between_ranks_and_between_steps(ranks):
    payloads = [ranks[r]["direct"]["same_input_payloads"] for r in range(WORLD)]
    assert torch.equal(payloads[0][0], payloads[0][0].clone())
    assert not torch.equal(payloads[0][0], payloads[1][0])  # same values, step and seed; other rank
    assert not torch.equal(payloads[0][0], payloads[0][1])  # same values, rank and seed; next step


def test_same_seed_run_again_gives_identical_weights(ranks):
    for r in range(WORLD):
        a, b = ranks[r]["ddp"]["e4m3_sr_ef"], ranks[r]["ddp"]["e4m3_sr_ef_again"]
        assert all(same_bits(x, y) for x, y in zip(a, b))
        other_seed = ranks[r]["ddp"]["e4m3_sr_ef_seed8"]
        assert not all(same_bits(x, y) for x, y in zip(a, other_seed))
    assert all(same_bits(x, y) for x, y in zip(ranks[0]["ddp"]["e4m3_sr_ef"], ranks[1]["ddp"]["e4m3_sr_ef"]))


@pytest.mark.parametrize("name", ["e5m2", "mxfp4"])
def test_hook_restored_from_state_dict_continues_bit_for_bit(ranks, name):
    for r in range(WORLD):
        seen = ranks[r]["checkpoint"][name]
        assert all(same_bits(a, b) for a, b in zip(seen["straight"][1:], seen["resumed"]))
        assert seen["straight_accounting"] == seen["resumed_accounting"]
    assert not same_bits(ranks[0]["checkpoint"][name]["straight"][1], ranks[0]["checkpoint"][name]["straight"][2])


def test_ddp_run_checkpointed_midway_ends_with_identical_weights(ranks):
    for r in range(WORLD):
        ddp = ranks[r]["ddp"]
        assert all(same_bits(x, y) for x, y in zip(ddp["e4m3_sr_ef"], ddp["e4m3_sr_ef_resumed"]))
        assert ddp["e4m3_sr_ef_resumed_accounting"] == ddp["e4m3_sr_ef_accounting"]


def test_state_dict_refuses_a_checkpoint_of_other_options():
    saved = mfd.compress_hook("e4m3", "stochastic", seed=1, error_feedback=True).state.state_dict()
    with pytest.raises(ValueError, match="format"):
        mfd.compress_hook("e5m2", "stochastic", error_feedback=True).state.load_state_dict(saved)
    with pytest.raises(ValueError, match="error_feedback"):
        mfd.compress_hook("e4m3", "stochastic").state.load_state_dict(saved)
    with pytest.raises(ValueError, match="residuals"):
        mfd.compress_hook("e4m3", "stochastic", error_feedback=True).state.load_state_dict(
            {k: v for k, v in saved.items() if k != "residuals"})


def test_fp32_codes_equal_plain_ddp_bit_for_bit(ranks):
    for r in range(WORLD):
        ddp = ranks[r]["ddp"]
        assert all(same_bits(x, y) for x, y in zip(ddp["plain"], ddp["fp32_codes"]))
        assert all(same_bits(x, y) for x, y in zip(ddp["plain"], ddp["wrapped_fp32"]))
        assert not all(same_bits(x, y) for x, y in zip(ddp["plain"], ddp["wrapped_bf16"]))


def test_wrapper_rounds_before_and_after_the_wrapped_hook(ranks):
    expected = []
    for step in range(worker.STEPS):
        rounded = [mf.quantize(worker.bucket_values(worker.WRAPPER_CASE, r, step), mf.bfloat16, "stochastic",
                               "saturate", seed=mf.fold_seed(6, step, r, 0)) for r in range(WORLD)]
        total = rounded[0] / WORLD + rounded[1] / WORLD  # allreduce_hook: divide, then sum
        expected.append(mf.quantize(total, mf.bfloat16, "stochastic", "saturate", seed=mf.fold_seed(6, step, WORLD, 0)))
    for r in range(WORLD):
        got = ranks[r]["direct"]["wrapper_bf16_stochastic"]["results"]
        assert all(same_bits(g, e) for g, e in zip(got, expected))


def nan_reference(fmt_name, step):
    fmt = comm_format(fmt_name)
    rounded = [mf.quantize(worker.bucket_values(0, r, step) / WORLD, fmt, overflow="saturate") for r in range(WORLD)]
    return rounded[0] + rounded[1]


@pytest.mark.parametrize("name, fmt_name", worker.NAN_CASES, ids=[c[0] for c in worker.NAN_CASES])
def test_nan_in_a_bucket_follows_the_formats_nan_rule_is_counted_and_the_group_goes_on(ranks, name, fmt_name):
    fmt = comm_format(fmt_name)
    expected = nan_reference(fmt_name, 0)
    if isinstance(fmt, mf.BlockFormat):  # the NaN's block decodes to NaN
        nan_at = torch.zeros(worker.N, dtype=torch.bool)
        block = worker.NAN_POSITION // fmt.block_size
        nan_at[block * fmt.block_size:(block + 1) * fmt.block_size] = True
    elif fmt.has_nan:  # the NaN code, at its position
        nan_at = torch.arange(worker.N) == worker.NAN_POSITION
    else:  # no NaN code: the rank's whole contribution reads as NaN
        nan_at = torch.ones(worker.N, dtype=torch.bool)
    for r in range(WORLD):
        seen = ranks[r]["nan"][name]
        assert torch.equal(seen["result"].isnan(), nan_at)
        assert same_bits(seen["result"][~nan_at], expected[~nan_at])
        assert same_bits(seen["after"], nan_reference(fmt_name, 1))
        assert seen["stats"]["nans"] == (1 if r == 1 else 0)
        if isinstance(fmt, mf.BlockFormat):
            assert seen["stats"]["nan_blocks"] == (1 if r == 1 else 0)


@pytest.mark.parametrize("kwargs, error, words", [
    ({"fmt": 3}, TypeError, "fmt"),
    ({"fmt": "e9m9"}, ValueError, "e9m9"),
    ({"fmt": "e8m0"}, ValueError, "sign"),
    ({"fmt": "e4m3", "rounding": "sideways"}, ValueError, "rounding"),
    ({"fmt": "e4m3", "overflow": "wrap"}, ValueError, "overflow"),
    ({"fmt": "e4m3", "seed": -1}, ValueError, "seed"),
    ({"fmt": "e4m3", "seed": 1.5}, TypeError, "seed"),
    ({"fmt": "e4m3", "error_feedback": 1}, TypeError, "error_feedback"),
    ({"fmt": "e4m3", "scale_rule": "rceil"}, ValueError, "scale_rule"),
    ({"fmt": "mxfp4", "scale_rule": "up"}, ValueError, "scale_rule"),
    ({"fmt": "e4m3", "faithful_sum": True, "round_back": True}, ValueError, "round_back"),
    ({"fmt": "mxfp4", "overflow": "infinity"}, ValueError, "overflow"),
])
def test_bad_arguments_raise_naming_the_argument(kwargs, error, words):
    kwargs = dict(kwargs)
    fmt = kwargs.pop("fmt")
    with pytest.raises(error, match=words):
        mfd.compress_hook(fmt, **kwargs)


def test_wrapper_refuses_a_hook_that_is_not_callable():
    with pytest.raises(TypeError, match="hook"):
        mfd.compress_wrapper("e4m3", "allreduce")


TRAIN = os.path.abspath(os.path.join(HERE, "..", "..", "examples", "torch", "train.py"))


@pytest.fixture(scope="module")
def trainer():
    """examples/torch/train.py as a module: its refusals run in this process (a process each
    cost seconds of imports)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("minifloat_example_train", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("args, message", [
    (["--comm-round-back"], "--comm-format only"),
    (["--comm-rounding", "stochastic"], "--comm-format only"),
    (["--comm-format", "e9m9"], "--comm-format"),
    (["--comm-format", "e4m3", "--comm-rounding", "sideways"], "--comm-rounding"),
    (["--comm-format", "e4m3", "--promotion"], "replicas would diverge"),
])
def test_trainer_refuses_bad_communication_flags_with_a_message(trainer, capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        trainer.main(args)
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert message in err, err


def test_trainer_under_torchrun_writes_bytes_on_the_wire(tmp_path):
    out = tmp_path / "out.csv"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore::FutureWarning")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), TRAIN, "--model", "resnet20", "--width", "0.25", "--epochs", "1",
           "--train-limit", "128", "--test-limit", "64", "--batch-size", "32", "--comm-format", "e4m3",
           "--comm-rounding", "stochastic", "--threads", "1", "--csv", str(out)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"torchrun did not finish within {TIMEOUT_S} s")
    assert r.returncode == 0, r.stderr[-4000:]
    import csv
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1 and rows[0]["world_size"] == "2" and rows[0]["comm_format"] == "e4m3"
    sent, fp32 = int(rows[0]["comm_bytes_per_rank"]), int(rows[0]["comm_fp32_bytes_per_rank"])
    assert fp32 > 0 and sent == fp32 // 4  # one byte a gradient element, against four
    assert 0.0 <= float(rows[0]["test_accuracy"]) <= 1.0
    assert "gradients on the wire" in r.stdout
