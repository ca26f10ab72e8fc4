"""Optimizers without an fp32 master copy: bit for bit torch.optim with the lossless split
(bf16 + 16), the C++ optimizers' steps for lossy layouts, and what they report holding."""

import numpy as np
import pytest
import torch

import minifloat as mf
from minifloat import _core


def train(make_optimizer, steps=25, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(13, 40), torch.nn.Tanh(), torch.nn.Linear(40, 3))
    optimizer = make_optimizer(model.parameters())
    data, target = torch.randn(50, 13), torch.randn(50, 3)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return [p.detach().clone() for p in model.parameters()], losses, optimizer


def bits_equal(a, b):
    return all(torch.equal(x.view(torch.int32), y.view(torch.int32)) for x, y in zip(a, b))


SGD_SETTINGS = [dict(lr=0.1), dict(lr=0.05, momentum=0.9, weight_decay=1e-3),
                dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4),
                dict(lr=0.02, momentum=0.8, dampening=0.1, maximize=True)]
ADAM_SETTINGS = [dict(lr=1e-2), dict(lr=3e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2),
                 dict(lr=1e-3, betas=(0.3, 0.9), maximize=True)]


@pytest.mark.parametrize("settings", SGD_SETTINGS)
def test_sgd_on_a_lossless_split_equals_torch_optim_sgd_bit_for_bit(settings):
    want, want_losses, _ = train(lambda p: torch.optim.SGD(p, **settings))
    got, losses, _ = train(lambda p: mf.optim.SGD(p, **settings))
    assert bits_equal(got, want) and losses == want_losses


def correctly_rounded_sqrt(t):
    """sqrt through float64: the float64 root of a float32, rounded to float32, is the correctly
    rounded float32 root (53 >= 2 * 24 + 2 bits)."""
    return torch.sqrt(t.double()).to(t.dtype) if t.dtype == torch.float32 else torch.sqrt(t)


@pytest.mark.parametrize("settings", ADAM_SETTINGS)
@pytest.mark.parametrize("ours, theirs", [(mf.optim.Adam, torch.optim.Adam), (mf.optim.AdamW, torch.optim.AdamW)])
def test_adam_and_adamw_on_a_lossless_split_equal_torch_optim_with_a_correctly_rounded_sqrt(ours, theirs, settings,
                                                                                        monkeypatch):
    # The oracle is torch.optim's own default step (single-tensor on CPU), with exp_avg_sq.sqrt()
    # correctly rounded: PyTorch's x86 builds take torch.sqrt through MKL's vector math, which is
    # not correctly rounded for every value (next test), while the C++ step's square root is.
    monkeypatch.setattr(torch.Tensor, "sqrt", correctly_rounded_sqrt)
    want, want_losses, _ = train(lambda p: theirs(p, foreach=False, fused=False, **settings))
    monkeypatch.undo()
    got, losses, _ = train(lambda p: ours(p, **settings))
    assert bits_equal(got, want) and losses == want_losses


def test_adam_differs_from_torchs_default_adam_only_where_torch_sqrt_is_not_correctly_rounded():
    # One Adam step from zero moments on the fp32 C++ step and torch.optim.Adam's default path,
    # with the oracle of a correctly rounded square root (float64 sqrt of a float32 is exact
    # enough to round once): every weight on which they differ is one whose torch.sqrt differs.
    rng = np.random.default_rng(2)
    n = 50_000
    w0, g = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    optimizer = torch.optim.Adam([p], lr=1e-2)
    p.grad = torch.from_numpy(g.copy())
    optimizer.step()
    ours, state = w0.copy(), _core.AdamState()
    _core.adam_step_fp32(ours.ctypes.data, g.ctypes.data, n, state, 1e-2, 0.9, 0.999, 1e-8, 0.0, False, False, 0)
    v = optimizer.state[p]["exp_avg_sq"]
    assert np.array_equal(state.exp_avg_sq().view(np.uint32), v.numpy().view(np.uint32))
    exact_sqrt = np.sqrt(v.numpy().astype(np.float64)).astype(np.float32)
    sqrt_differs = torch.sqrt(v).numpy().view(np.uint32) != exact_sqrt.view(np.uint32)
    weight_differs = p.detach().numpy().view(np.uint32) != ours.view(np.uint32)
    assert not np.any(weight_differs & ~sqrt_differs)


def test_lossy_storage_steps_are_the_cpp_optimizers_steps():
    # binary16 + 8 stochastic: lossy, so this checks the plumbing (seeds, gradients, compute copy)
    # against the C++ split tensor and adam_step driven directly.
    rng = np.random.default_rng(0)
    initial = [rng.standard_normal(n).astype(np.float32) for n in (1000, 77)]
    grads = [[rng.standard_normal(v.size).astype(np.float32) * 1e-2 for v in initial] for _ in range(3)]
    params = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in initial]
    optimizer = mf.optim.AdamW(params, lr=1e-2, storage=mf.optim.SplitStorage(mf.binary16, 8, "stochastic"), seed=3)
    direct = [_core.SplitWeights(v.ctypes.data, v.size, mf.binary16._key, 8, 1, mf.fold_seed(3, i))
              for i, v in enumerate(initial)]
    states = [_core.AdamState() for _ in initial]
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = torch.from_numpy(g)
        optimizer.step()
        for w, s, g, p in zip(direct, states, step_grads, params):
            _core.adam_step(w, g.ctypes.data, g.size, s, 1e-2, 0.9, 0.999, 1e-8, 1e-2, True, False,
                            mf.optim.FIRST_MOMENT.index("lerp"))
            restored = np.empty(g.size, np.float32)
            w.restore(restored.ctypes.data)
            assert np.array_equal(restored.view(np.uint32), p.detach().numpy().view(np.uint32))
            assert np.array_equal(s.exp_avg(), optimizer.state[p]["optimizer"].exp_avg())
    assert not np.array_equal(params[0].detach().numpy(), initial[0])


def test_a_step_is_an_in_place_change_of_the_parameter_for_autograd_as_in_torch_optim():
    # The compute copy is written straight into the parameter's memory; autograd must still see
    # a change of a tensor that a retained graph saved.
    for make in (lambda p: torch.optim.SGD(p, lr=0.1), lambda p: mf.optim.SGD(p, lr=0.1),
                 lambda p: mf.optim.Adam(p, storage=mf.optim.LowStorage(mf.bfloat16))):
        p = torch.nn.Parameter(torch.randn(100))
        optimizer = make([p])
        loss = (p * p).sum()  # saves p
        loss.backward(retain_graph=True)
        version = p._version
        optimizer.step()
        assert p._version > version
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_a_parameter_that_is_not_contiguous_gets_the_same_compute_copy():
    base = torch.randn(64, 48)
    strided = torch.nn.Parameter(base.t())  # a transposed view: not contiguous
    dense = torch.nn.Parameter(base.t().contiguous())
    assert not strided.is_contiguous()
    for p in (strided, dense):
        optimizer = mf.optim.SGD([p], lr=0.1, momentum=0.9, storage=mf.optim.SplitStorage(mf.binary16, 8))
        for step in range(3):
            p.grad = torch.full_like(p, 0.01 * (step + 1))
            optimizer.step()
    assert torch.equal(strided.detach().view(torch.int32), dense.detach().view(torch.int32))


def test_low_storage_holds_only_codes_and_updates_below_half_an_ulp_vanish():
    p = torch.nn.Parameter(torch.full((64,), 1.0))
    optimizer = mf.optim.SGD([p], lr=1.0, storage=mf.optim.LowStorage(mf.bfloat16))
    p.grad = torch.full((64,), 2.0 ** -9)  # a quarter of bf16's spacing at 1.0
    optimizer.step()
    assert torch.equal(p.detach(), torch.ones(64))
    assert optimizer.storage_bytes()["weights"] == 64 * 2
    p.grad = torch.full((64,), 2.0 ** -7)
    optimizer.step()
    assert torch.equal(p.detach(), torch.full((64,), 1.0 - 2.0 ** -7))


def test_storage_bytes_reports_codes_extra_bits_and_state():
    _, _, sgd = train(lambda p: mf.optim.SGD(p, lr=0.1, momentum=0.9, storage=mf.optim.SplitStorage("bf16", 8)), 1)
    n = 13 * 40 + 40 + 40 * 3 + 3
    words = lambda count, bits: 4 * ((count * bits + 31) // 32)  # noqa: E731
    sizes = [13 * 40, 40, 40 * 3, 3]
    held = sgd.storage_bytes()
    assert held["weights"] == sum(words(c, 16) + words(c, 8) for c in sizes)
    assert held["state"] == 4 * n and held["compute_copy"] == 4 * n
    assert held["total"] == held["weights"] + held["state"] + held["compute_copy"]


def test_visible_compute_copy_holds_the_low_precision_values():
    p = torch.nn.Parameter(torch.randn(100))
    mf.optim.SGD([p], lr=0.1, storage=mf.optim.SplitStorage(mf.bfloat16, 16), compute="visible")
    assert torch.equal(p.detach(), mf.quantize(p.detach(), mf.bfloat16, "toward_zero"))


def test_optimizer_errors():
    p = torch.nn.Parameter(torch.randn(10))
    with pytest.raises(ValueError, match="learning rate"):
        mf.optim.SGD([p], lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        mf.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta1"):
        mf.optim.AdamW([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="amsgrad"):
        mf.optim.AdamW([p], amsgrad=True)
    with pytest.raises(TypeError, match="float64"):
        mf.optim.SGD([torch.nn.Parameter(torch.randn(3, dtype=torch.float64))], lr=0.1)
    with pytest.raises(ValueError, match="extra_bits"):
        mf.optim.SGD([p], lr=0.1, storage=mf.optim.SplitStorage(mf.binary16, 20))
    with pytest.raises(TypeError):
        mf.optim.SGD([p], lr=0.1, storage="bf16")
    with pytest.raises(ValueError, match="nearest_even or stochastic"):
        mf.optim.SGD([p], lr=0.1, storage=mf.optim.LowStorage(mf.e4m3, "toward_zero"))


def test_a_failed_construction_or_param_group_leaves_every_parameter_as_it_was():
    a = torch.nn.Parameter(torch.randn(50))
    b = torch.nn.Parameter(torch.randn(50, dtype=torch.float64))
    before = a.detach().clone()
    with pytest.raises(TypeError, match="float64"):
        mf.optim.SGD([a, b], lr=0.1, storage=mf.optim.LowStorage(mf.e4m3))
    assert torch.equal(a.detach(), before)
    optimizer = mf.optim.SGD([torch.nn.Parameter(torch.randn(5))], lr=0.1)
    with pytest.raises(TypeError):
        optimizer.add_param_group({"params": [a, b]})
    assert torch.equal(a.detach(), before) and len(optimizer.param_groups) == 1


@pytest.mark.parametrize("make", [
    lambda p: mf.optim.SGD(p, lr=0.05, momentum=0.9, storage=mf.optim.SplitStorage(mf.binary16, 6, "stochastic"),
                           seed=4),
    lambda p: mf.optim.AdamW(p, lr=1e-2, storage=mf.optim.LowStorage(mf.bfloat16, "stochastic"), seed=5),
    lambda p: mf.optim.Adam(p, lr=1e-2)])
def test_a_checkpoint_restores_the_run_bit_for_bit(make):
    import io

    def model_and_data():
        torch.manual_seed(7)
        return (torch.nn.Sequential(torch.nn.Linear(13, 40), torch.nn.Tanh(), torch.nn.Linear(40, 3)),
                torch.randn(50, 13), torch.randn(50, 3))

    def steps(model, optimizer, data, target, n):
        for _ in range(n):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(data), target).backward()
            optimizer.step()

    model, data, target = model_and_data()
    optimizer = make(model.parameters())
    steps(model, optimizer, data, target, 10)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    steps(model, optimizer, data, target, 10)
    want = [p.detach().clone() for p in model.parameters()]

    resumed, _, _ = model_and_data()
    resumed_optimizer = make(resumed.parameters())
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    steps(resumed, resumed_optimizer, data, target, 10)
    assert bits_equal([p.detach() for p in resumed.parameters()], want)
    assert resumed_optimizer.storage_bytes() == optimizer.storage_bytes()


def test_a_checkpoint_of_another_storage_or_model_is_refused_and_changes_nothing():
    p = torch.nn.Parameter(torch.randn(100))
    saved = mf.optim.SGD([p], lr=0.1).state_dict()
    q = torch.nn.Parameter(torch.randn(100))
    other = mf.optim.SGD([q], lr=0.1, storage=mf.optim.LowStorage(mf.bfloat16))
    before = q.detach().clone()
    with pytest.raises(ValueError, match="storage"):
        other.load_state_dict(saved)
    small = mf.optim.SGD([torch.nn.Parameter(torch.randn(10))], lr=0.1)
    with pytest.raises(ValueError):
        small.load_state_dict(saved)
    assert torch.equal(q.detach(), before)


def test_parameter_i_is_stored_with_the_library_seed_rule_fold_seed_of_the_run_seed_and_i():
    # One rule in both trainers (training/parameter_seed.hpp): parameter i of the model's order
    # draws from fold_seed(run seed, i); a negative run seed is taken modulo 2**64.
    params = [torch.nn.Parameter(torch.randn(5)) for _ in range(3)]
    for run_seed in (11, -2):
        optimizer = mf.optim.SGD(params, lr=0.1, storage=mf.optim.SplitStorage(mf.bfloat16, 8, "stochastic"),
                                 seed=run_seed)
        seeds = [optimizer.state[p]["weights"].parts()[3] for p in params]
        assert seeds == [mf.fold_seed(run_seed % 2**64, i) for i in range(3)]
