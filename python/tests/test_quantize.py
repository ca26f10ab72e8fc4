"""quantize / quantize_: bit for bit the C++ core (its scalar entry, and torch's and NumPy's own
casts where they exist), for every named format, mode, overflow policy and source type; the
paths users take (torch and NumPy, strides, out=, in place, threads); stochastic reproducibility."""

import math
import os
import threading

import numpy as np
import pytest
import torch

import minifloat as mf
from minifloat import _core
from conftest import edge_values, random_values

MODES = list(mf.ROUNDING)
OVERFLOWS = list(mf.OVERFLOW)
DTYPES = [np.float32, np.float64]


def scalar_reference(x, fmt, rounding, overflow, seed=0, index=0, random_bits=0):
    """The core's scalar rounding of each element (index + flat position), and its counts."""
    src = np.ascontiguousarray(x)
    out = np.empty_like(src)
    opts = (mf.ROUNDING.index(rounding), mf.OVERFLOW.index(overflow), random_bits, seed, index)
    counts = _core.scalar_quantize(src.ctypes.data, out.ctypes.data, src.size, src.dtype == np.float64, fmt._key, opts)
    return out, mf.RoundingStats(*counts)


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    view = np.uint32 if a.dtype == np.float32 else np.uint64
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(view), b.view(view))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("overflow", OVERFLOWS)
@pytest.mark.parametrize("rounding", MODES)
@pytest.mark.parametrize("name", list(mf.NAMED))
def test_quantize_is_the_cores_scalar_rounding_bit_for_bit(name, rounding, overflow, dtype):
    fmt = mf.NAMED[name]
    x = np.concatenate([edge_values(dtype), random_values(dtype, 20000, seed=len(name))])
    got, stats = mf.quantize(x, fmt, rounding, overflow, seed=11, index=5, stats=True)
    want, want_stats = scalar_reference(x, fmt, rounding, overflow, seed=11, index=5)
    assert same_bits(got, want)
    assert stats == want_stats
    t, t_stats = mf.quantize(torch.from_numpy(x.copy()), fmt, rounding, overflow, seed=11, index=5, stats=True)
    assert isinstance(t, torch.Tensor) and same_bits(t.numpy(), want) and t_stats == want_stats


def test_nearest_even_matches_torchs_and_numpys_own_bfloat16_and_float16_casts():
    x = torch.from_numpy(np.concatenate([edge_values(np.float32), random_values(np.float32, 100000, 3)]))
    x = x[~x.isnan()]  # NaN payloads: torch's cast makes its own NaN; ours keeps the payload (quiet bit set)
    assert torch.equal(mf.quantize(x, mf.bfloat16).view(torch.int32), x.to(torch.bfloat16).float().view(torch.int32))
    assert torch.equal(mf.encode(x, mf.bfloat16), x.to(torch.bfloat16).view(torch.int16))
    assert torch.equal(mf.encode(x, mf.binary16), x.to(torch.float16).view(torch.int16))
    y = x.numpy()
    with np.errstate(over="ignore"):
        assert same_bits(mf.quantize(y, mf.binary16), y.astype(np.float16).astype(np.float32))
    assert mf.quantize(torch.tensor([float("nan")]), mf.bfloat16).isnan().all()


def test_numpy_in_numpy_out_and_torch_in_torch_out_same_shape_and_dtype():
    a = np.linspace(-3, 3, 24, dtype=np.float64).reshape(2, 3, 4)
    r = mf.quantize(a, "e4m3")
    assert isinstance(r, np.ndarray) and r.shape == a.shape and r.dtype == np.float64
    t = torch.linspace(-3, 3, 24).reshape(4, 6)
    q = mf.quantize(t, mf.e4m3)
    assert isinstance(q, torch.Tensor) and q.shape == t.shape and q.dtype == torch.float32
    assert mf.quantize(torch.tensor(0.3), mf.bfloat16).shape == ()
    assert mf.quantize(torch.empty(0, 3), mf.bfloat16).shape == (0, 3)


def test_any_strides_give_the_bits_of_the_row_major_flattened_tensor():
    base = torch.randn(64, 80, dtype=torch.float64)
    for view in (base.t(), base[::3, 1::2], base.unsqueeze(0).expand(2, 64, 80), base.flip(0)):
        want = mf.quantize(view.contiguous(), mf.e5m2, "stochastic", seed=9, index=100)
        assert torch.equal(mf.quantize(view, mf.e5m2, "stochastic", seed=9, index=100), want)
    arr = np.asfortranarray(base.numpy())
    assert same_bits(mf.quantize(arr, mf.e5m2, "stochastic", seed=9),
                     mf.quantize(np.ascontiguousarray(arr), mf.e5m2, "stochastic", seed=9))


def test_stochastic_bits_depend_only_on_seed_index_and_flat_position_whatever_the_shape():
    x = torch.randn(6000)
    flat = mf.quantize(x, mf.e4m3, "stochastic", seed=1, index=7)
    assert torch.equal(mf.quantize(x.reshape(20, 300), mf.e4m3, "stochastic", seed=1, index=7).reshape(-1), flat)
    # Index moves the draws: the second half quantized alone with index 7 + 3000 equals the whole's second half.
    assert torch.equal(mf.quantize(x[3000:], mf.e4m3, "stochastic", seed=1, index=3007), flat[3000:])
    assert not torch.equal(mf.quantize(x, mf.e4m3, "stochastic", seed=2, index=7), flat)


@pytest.mark.parametrize("rounding", MODES)
def test_results_and_stats_are_bit_identical_for_any_thread_count(rounding, restore_threads):
    x = torch.from_numpy(random_values(np.float32, 300001, seed=4))
    torch.set_num_threads(1)
    one, one_stats = mf.quantize(x, mf.e4m3, rounding, "saturate", seed=3, stats=True)
    for threads in (2, 3, 7):
        torch.set_num_threads(threads)
        many, many_stats = mf.quantize(x, mf.e4m3, rounding, "saturate", seed=3, stats=True)
        assert same_bits(many.numpy(), one.numpy()) and many_stats == one_stats


PIECE = 65536  # elements per piece of the thread split (python/src/binding.hpp)


def live_thread_ids():
    return {int(t) for t in os.listdir("/proc/self/task")}


def test_large_calls_run_on_the_threads_torch_already_runs_its_parallel_ops_on(restore_threads):
    torch.set_num_threads(2)
    x = torch.randn(1 << 20)
    (x * 2).sum()  # a torch op large enough for its intra-op threads: torch's OpenMP pool is up
    before = live_thread_ids()
    owners = _core.piece_threads(4 * PIECE, 2, -1)
    after = live_thread_ids()
    assert len(owners) == 4 and all(owners)  # every piece was taken
    assert len(set(owners)) == 2 and threading.get_native_id() in owners  # the caller and one more
    # Both existed before the call and still do: no thread is started or ended for it.
    assert set(owners) <= before & after


def test_an_exception_in_one_piece_reaches_python_and_the_threads_keep_working(restore_threads):
    torch.set_num_threads(2)
    with pytest.raises(ValueError, match="piece 5 failed"):
        _core.piece_threads(8 * PIECE, 2, 5)
    assert all(_core.piece_threads(8 * PIECE, 2, -1))
    x = torch.from_numpy(random_values(np.float32, 5 * PIECE, seed=9))
    torch.set_num_threads(1)
    one = mf.quantize(x, mf.e5m2, "stochastic", seed=4)
    torch.set_num_threads(2)
    assert same_bits(mf.quantize(x, mf.e5m2, "stochastic", seed=4).numpy(), one.numpy())


def test_a_call_from_another_python_thread_gives_the_same_bits_and_counts(restore_threads):
    x = torch.from_numpy(random_values(np.float32, 300001, seed=5))
    torch.set_num_threads(1)
    want = mf.quantize(x, mf.e4m3, "stochastic", "infinity", seed=8, stats=True)
    got = []

    def worker():
        torch.set_num_threads(2)  # this thread's own OpenMP pool
        got.append(mf.quantize(x, mf.e4m3, "stochastic", "infinity", seed=8, stats=True))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert same_bits(got[0][0].numpy(), want[0].numpy()) and got[0][1] == want[1]


def test_stochastic_rounding_is_unbiased_within_a_binomial_bound():
    n = 200000
    step = 2.0 ** -3  # e4m3's spacing in [1, 2)
    for fraction in (0.1, 0.5, 0.9):
        x = torch.full((n,), 1.0 + fraction * step)
        up = (mf.quantize(x, mf.e4m3, "stochastic", seed=123) > 1.0).sum().item()
        assert abs(up - fraction * n) < 5 * math.sqrt(n * fraction * (1 - fraction))


def test_out_receives_the_result_and_quantize_in_place_overwrites_x():
    x = torch.randn(100, 7)
    want = mf.quantize(x, mf.bfloat16)
    out = torch.empty(100, 7)
    assert mf.quantize(x, mf.bfloat16, out=out) is out and torch.equal(out, want)
    strided_out = torch.empty(7, 100).t()
    mf.quantize(x, mf.bfloat16, out=strided_out)
    assert torch.equal(strided_out, want)
    y = x.clone()
    assert mf.quantize_(y, mf.bfloat16) is y and torch.equal(y, want)
    z = x.clone().t()
    mf.quantize_(z, mf.bfloat16)
    assert torch.equal(z, want.t())
    a = x.numpy().copy()
    r, stats = mf.quantize_(a, mf.bfloat16, stats=True)
    assert r is a and same_bits(a, want.numpy()) and stats.values == a.size
    same = x.clone()
    mf.quantize(same, mf.bfloat16, out=same)
    assert torch.equal(same, want)


def test_stats_count_overflows_underflows_nans_and_infinities():
    x = torch.tensor([1e6, -1e6, 1e-30, float("nan"), float("inf"), 1.0, 0.0])
    _, s = mf.quantize(x, mf.e4m3, overflow="saturate", stats=True)
    assert s == mf.RoundingStats(values=7, overflows=4, underflows=1, nans=1, infinities=1)
    assert s.overflow_ratio == 4 / 7


def test_writes_reach_a_negative_view():
    base = torch.randn(100)
    view = torch._neg_view(base)
    want = mf.quantize(view.clone(), mf.bfloat16)
    mf.quantize_(view, mf.bfloat16)
    assert torch.equal(view.clone(), want) and torch.equal(base, -want)
    out_view = torch._neg_view(torch.zeros(100))
    mf.quantize(base, mf.e4m3, out=out_view)
    assert torch.equal(out_view, mf.quantize(base, mf.e4m3))


def test_in_place_rounding_moves_the_version_counter_and_refuses_tensors_autograd_tracks():
    w = torch.nn.Parameter(torch.randn(10))
    with pytest.raises(ValueError, match="requires grad"):
        mf.quantize_(w, mf.bfloat16)
    with torch.no_grad():
        version = w._version
        mf.quantize_(w, mf.bfloat16)
    assert w._version > version and torch.equal(w.detach(), mf.quantize(w.detach(), mf.bfloat16))
    # A graph that saved the tensor notices the change, as after any in-place op.
    x = torch.randn(10, requires_grad=True)
    y = x.exp()
    with torch.no_grad():
        mf.quantize_(y, mf.e4m3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_fold_seed_is_the_cpp_rule_and_rejects_keys_outside_uint64():
    # fold_seed(s, k) is the 64-bit draw k of the stream `s`; site step seeds use the same rule.
    s = 20261128
    one = mf.fold_seed(s, 7)
    assert mf.fold_seed(s) == s
    assert mf.fold_seed(s, 3, 1, 9) == mf.fold_seed(mf.fold_seed(mf.fold_seed(s, 3), 1), 9)
    assert mf.fold_seed(s, 1, 2) != mf.fold_seed(s, 2, 1)
    assert one != s and 0 <= one < 2**64
    with pytest.raises(ValueError, match="keys\\[0\\]"):
        mf.fold_seed(s, -1)
    with pytest.raises(ValueError, match="seed"):
        mf.fold_seed(2**64)
    with pytest.raises(TypeError, match="keys\\[1\\]"):
        mf.fold_seed(s, 1, 2.0)
