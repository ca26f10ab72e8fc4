"""Property-based tests (Hypothesis) of minifloat.optim: over random shapes, storages, optimizers,
hyperparameters and seeds, every step equals the C++ single-tensor step on the same data bit for
bit, and a hostile step (a non-finite gradient, a replaced parameter, a bad gradient) raises and
leaves every parameter, stored weight and optimizer state as it was. Example counts are small:
the suite runs on two shared cores."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minifloat as mf

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple)
storages = st.one_of(
    st.builds(mf.optim.SplitStorage, st.sampled_from(["bfloat16", "binary16", "e4m3"]), st.integers(1, 13),
              st.sampled_from(["truncate", "stochastic"])),
    st.builds(mf.optim.LowStorage, st.sampled_from(["bfloat16", "binary16", "e4m3", "e5m2"]),
              st.sampled_from(["nearest_even", "stochastic"])),
    st.builds(mf.optim.BlockStorage, st.sampled_from(list(mf._core.block_storage_names)),
              st.sampled_from(["nearest_even", "stochastic"])))


@st.composite
def optimizers(draw):
    kind = draw(st.sampled_from(["sgd", "adam", "adamw"]))
    lr = draw(st.floats(1e-4, 0.5))
    if kind == "sgd":
        momentum = draw(st.sampled_from([0.0, 0.5, 0.9]))
        nesterov = momentum > 0 and draw(st.booleans())
        hyper = dict(lr=lr, momentum=momentum, nesterov=nesterov, dampening=0.0 if nesterov else draw(
            st.sampled_from([0.0, 0.1])), weight_decay=draw(st.sampled_from([0.0, 1e-3])), maximize=draw(st.booleans()))
        return mf.optim.SGD, hyper
    hyper = dict(lr=lr, betas=(draw(st.sampled_from([0.0, 0.5, 0.9])), draw(st.sampled_from([0.9, 0.999]))),
                 eps=draw(st.sampled_from([1e-8, 1e-3])), weight_decay=draw(st.sampled_from([0.0, 1e-2])),
                 maximize=draw(st.booleans()))
    return (mf.optim.Adam if kind == "adam" else mf.optim.AdamW), hyper


def held(optimizer):
    """Bit images of every parameter, stored tensor and state of the optimizer."""
    out = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            out.append(p.detach().contiguous().view(torch.int32).clone())
    for i, entry in sorted(optimizer.state_dict()["state"].items()):
        for part in entry.values():
            for key, v in sorted(part.items()):
                out.append(v.clone() if isinstance(v, torch.Tensor) else v)
    return out


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))


def direct_step(cls, hyper, weights, state, grad):
    core = mf._core
    if cls is mf.optim.SGD:
        core.sgd_step(weights, grad.ctypes.data, grad.size, state, hyper["lr"], hyper["momentum"],
                      hyper["dampening"], hyper["weight_decay"], hyper["nesterov"], hyper["maximize"])
    else:
        core.adam_step(weights, grad.ctypes.data, grad.size, state, hyper["lr"], hyper["betas"][0],
                       hyper["betas"][1], hyper["eps"], hyper["weight_decay"], cls is mf.optim.AdamW,
                       hyper["maximize"], 0)


@SETTINGS
@given(st.lists(shapes, min_size=1, max_size=3), storages, optimizers(), st.integers(0, 2**32 - 1),
       st.integers(1, 3))
def test_every_step_is_the_cpp_single_tensor_step_on_the_same_data(shape_list, storage, optimizer, seed, steps):
    cls, hyper = optimizer
    rng = np.random.default_rng(seed)
    initial = [rng.standard_normal(s).astype(np.float32) for s in shape_list]
    params = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in initial]
    opt = cls(params, storage=storage, seed=seed, **hyper)
    direct = []
    for i, (v, p) in enumerate(zip(initial, params)):
        s = mf.fold_seed(seed, i)  # the per-parameter seed rule (training/parameter_seed.hpp)
        flat = np.ascontiguousarray(v.reshape(-1))
        w = storage.make(flat, s, mf.optim.BlockStorage._rows(p)) if isinstance(storage, mf.optim.BlockStorage) \
            else storage.make(flat, s)
        direct.append((w, mf._core.SgdState() if cls is mf.optim.SGD else mf._core.AdamState()))
    for _ in range(steps):
        grads = [(rng.standard_normal(s) * 0.1).astype(np.float32) for s in shape_list]
        for p, g in zip(params, grads):
            p.grad = torch.from_numpy(g)
        opt.step()
        for (w, state), g, p in zip(direct, grads, params):
            direct_step(cls, hyper, w, state, np.ascontiguousarray(g.reshape(-1)))
            restored = np.empty(w.size, np.float32)
            (w.restore if opt._compute == 0 else w.visible)(restored.ctypes.data)
            assert np.array_equal(restored.view(np.uint32), p.detach().numpy().reshape(-1).view(np.uint32))
            assert opt.state[p]["optimizer"].steps == state.steps


@SETTINGS
@given(st.lists(shapes, min_size=2, max_size=3), storages, optimizers(), st.integers(0, 2**32 - 1),
       st.sampled_from(["nan", "inf", "-inf", "smaller", "half", "double_grad", "grad_size", "bad_lr"]),
       st.data())
def test_a_hostile_step_raises_and_changes_nothing(shape_list, storage, optimizer, seed, attack, data):
    cls, hyper = optimizer
    rng = np.random.default_rng(seed)
    params = [torch.nn.Parameter(torch.from_numpy(rng.standard_normal(s).astype(np.float32))) for s in shape_list]
    opt = cls(params, storage=storage, seed=seed, **hyper)
    for p in params:
        p.grad = torch.from_numpy((rng.standard_normal(p.shape) * 0.1).astype(np.float32))
    opt.step()
    for p in params:
        p.grad = torch.from_numpy((rng.standard_normal(p.shape) * 0.1).astype(np.float32))
    victim = data.draw(st.integers(0, len(params) - 1))
    p = params[victim]
    kept_data, kept_grad = p.data, p.grad.detach().clone()
    if attack in ("nan", "inf", "-inf"):
        if isinstance(storage, mf.optim.SplitStorage):
            return  # split storage follows torch.optim: a format with NaN stores the NaN (docs/python.md)
        p.grad = p.grad.clone()
        p.grad.view(-1)[data.draw(st.integers(0, p.numel() - 1))] = float(attack)
    before = held(opt)
    if attack == "smaller":
        p.data = torch.zeros(max(p.numel() - 1, 1) if p.numel() > 1 else 2)
    elif attack == "half":
        p.data = p.data.half()
    elif attack in ("double_grad", "grad_size"):
        try:  # torch refuses such a p.grad itself; a gradient's .data can still be replaced
            p.grad.data = p.grad.data.double() if attack == "double_grad" else torch.zeros(p.numel() + 1)
        except RuntimeError:
            return
    elif attack == "bad_lr":
        opt.param_groups[-1]["lr"] = -1.0
    try:
        opt.step()
    except (ValueError, TypeError):
        pass
    else:
        pytest.fail(f"{attack} was accepted")
    p.data, p.grad = kept_data, kept_grad
    if attack == "bad_lr":
        opt.param_groups[-1]["lr"] = hyper["lr"]
    assert same(held(opt), before)
