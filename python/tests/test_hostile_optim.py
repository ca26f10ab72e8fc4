"""minifloat.optim under hostile use: parameters replaced behind the optimizer, non-finite
gradients, bad checkpoints, copies and pickles, and the MX block weight store. Every refused call
must leave the parameters, the stored weights and the optimizer state exactly as they were."""

import copy
import io
import pickle

import numpy as np
import pytest
import torch

import minifloat as mf
from minifloat import _core


def bits(t):
    return t.detach().clone().contiguous().view(torch.int32)


def snapshot(optimizer):
    """Everything the optimizer holds, as plain tensors and numbers: its checkpoint, and the
    parameters' values."""
    state = optimizer.state_dict()
    flat = {}
    for i, entry in state["state"].items():
        for part, values in entry.items():
            for key, v in values.items():
                flat[(i, part, key)] = v.clone() if isinstance(v, torch.Tensor) else v
    groups = [{k: v for k, v in g.items()} for g in state["param_groups"]]
    params = [bits(p) for g in optimizer.param_groups for p in g["params"]]
    return flat, groups, params


def assert_unchanged(optimizer, before):
    flat, groups, params = snapshot(optimizer)
    assert flat.keys() == before[0].keys()
    for key, v in flat.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, before[0][key]), key
        else:
            assert v == before[0][key], key
    assert groups == before[1]
    assert len(params) == len(before[2]) and all(torch.equal(a, b) for a, b in zip(params, before[2]))


STORAGES = [lambda: mf.optim.SplitStorage(), lambda: mf.optim.SplitStorage(mf.binary16, 8, "stochastic"),
            lambda: mf.optim.LowStorage(mf.bfloat16), lambda: mf.optim.BlockStorage("mxfp8-e4m3")]
MAKERS = [lambda p, s: mf.optim.SGD(p, lr=0.1, momentum=0.9, storage=s),
          lambda p, s: mf.optim.Adam(p, lr=1e-2, storage=s), lambda p, s: mf.optim.AdamW(p, lr=1e-2, storage=s)]


@pytest.mark.parametrize("make_storage", STORAGES)
def test_a_parameter_whose_data_was_replaced_by_a_smaller_tensor_is_refused_at_step(make_storage):
    p = torch.nn.Parameter(torch.randn(1_000_000))
    optimizer = mf.optim.SGD([p], lr=0.1, storage=make_storage())
    before = snapshot(optimizer)
    p.grad = torch.ones(1_000_000)
    p.data = torch.zeros(3)  # pruning, or a careless reassignment: the stored weights hold 1e6
    with pytest.raises(ValueError, match="1000000"):
        optimizer.step()
    assert torch.equal(p.detach(), torch.zeros(3))
    p.data = before[2][0].view(torch.float32).clone()
    assert_unchanged(optimizer, before)


def test_a_parameter_whose_data_became_half_precision_is_refused_at_step_and_at_load_state_dict():
    p = torch.nn.Parameter(torch.randn(1000))
    optimizer = mf.optim.Adam([p], lr=1e-2)
    saved = optimizer.state_dict()
    p.grad = torch.ones(1000)
    optimizer.step()
    before = snapshot(optimizer)
    kept = p.data
    p.data = p.data.half()
    with pytest.raises(TypeError, match="float16"):
        optimizer.step()
    with pytest.raises(TypeError, match="float16"):
        optimizer.load_state_dict(saved)
    p.data = kept
    assert_unchanged(optimizer, before)


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("make_storage", STORAGES[2:])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_gradient_is_refused_by_low_and_block_storage_and_changes_nothing(make, make_storage, bad):
    # A second parameter's bad gradient must not leave the first one stepped (all or nothing), and
    # an infinite gradient must not saturate a weight and leave ±Inf in the optimizer state.
    a, b = torch.nn.Parameter(torch.randn(4, 64)), torch.nn.Parameter(torch.randn(64))
    optimizer = make([a, b], make_storage())
    a.grad, b.grad = torch.full((4, 64), 0.5), torch.full((64,), 0.25)
    optimizer.step()
    before = snapshot(optimizer)
    b.grad[17] = bad
    with pytest.raises(ValueError, match="nothing was changed"):
        optimizer.step()
    assert_unchanged(optimizer, before)
    b.grad[17] = 0.25  # a retry after the fix steps each parameter once
    optimizer.step()
    assert [s["optimizer"].steps for s in optimizer.state.values()] == [2, 2]


def test_a_failing_step_on_split_storage_changes_no_parameter_of_any_group():
    # e2m1 visible + 8 bits: a format without NaN or Inf, so a NaN gradient is refused by the C++
    # storability check; the parameter before it (another group) must not have been stepped.
    a, b = torch.nn.Parameter(torch.randn(100)), torch.nn.Parameter(torch.randn(50))
    storage = mf.optim.SplitStorage(mf.e2m1, 8)
    optimizer = mf.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1, momentum=0.9, storage=storage)
    a.grad, b.grad = torch.ones(100), torch.ones(50)
    b.grad[3] = float("nan")
    before = snapshot(optimizer)
    with pytest.raises(ValueError, match="nothing was changed"):
        optimizer.step()
    assert_unchanged(optimizer, before)
    assert all("optimizer" not in s for s in optimizer.state.values())


@pytest.mark.parametrize("key, value, message", [("lr", -5.0, "learning rate"), ("momentum", -1.0, "momentum"),
                                                 ("weight_decay", float("nan"), "weight_decay"),
                                                 ("nesterov", True, "Nesterov")])
def test_load_state_dict_checks_the_hyperparameters_as_the_constructor_does(key, value, message):
    p = torch.nn.Parameter(torch.randn(10))
    optimizer = mf.optim.SGD([p], lr=0.1)
    state = optimizer.state_dict()
    state["param_groups"][0][key] = value
    before = snapshot(optimizer)
    with pytest.raises(ValueError, match=message):
        optimizer.load_state_dict(state)
    assert_unchanged(optimizer, before)


def test_load_state_dict_checks_adam_betas_and_eps():
    p = torch.nn.Parameter(torch.randn(10))
    optimizer = mf.optim.AdamW([p])
    for key, value in (("betas", (1.5, 0.9)), ("eps", -1.0), ("lr", -5)):
        state = optimizer.state_dict()
        state["param_groups"][0][key] = value
        before = snapshot(optimizer)
        with pytest.raises(ValueError):
            optimizer.load_state_dict(state)
        assert_unchanged(optimizer, before)


def run(model, optimizer, data, target, steps):
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(data), target).backward()
        optimizer.step()
    return [bits(p) for p in model.parameters()]


@pytest.mark.parametrize("make", MAKERS)
@pytest.mark.parametrize("make_storage", STORAGES)
def test_a_deep_copied_or_pickled_optimizer_continues_the_run_bit_for_bit(make, make_storage):
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))
    data, target = torch.randn(16, 8), torch.randn(16, 2)
    optimizer = make(list(model.parameters()), make_storage())
    run(model, optimizer, data, target, 3)
    copied_model, copied = copy.deepcopy((model, optimizer))
    pickled_model, pickled = pickle.loads(pickle.dumps((model, optimizer)))
    assert copied.param_groups[0]["params"][0] is next(copied_model.parameters())
    want = run(model, optimizer, data, target, 3)
    assert all(torch.equal(a, b) for a, b in zip(run(copied_model, copied, data, target, 3), want))
    assert all(torch.equal(a, b) for a, b in zip(run(pickled_model, pickled, data, target, 3), want))
    assert copied.storage_bytes() == optimizer.storage_bytes()


def test_block_storage_steps_are_the_cpp_steps_on_the_same_data():
    rng = np.random.default_rng(1)
    shapes = [(5, 70), (33,)]  # a row shorter than its last block, and a vector
    initial = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    params = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in initial]
    storage = mf.optim.BlockStorage("mxfp4", "stochastic")
    optimizer = mf.optim.AdamW(params, lr=1e-2, storage=storage, seed=9)
    seeds = [mf.fold_seed(9, i) for i in range(len(shapes))]  # the per-parameter seed rule
    direct = [_core.BlockWeights(v.ctypes.data, v.size, "mxfp4", v.shape[0] if v.ndim == 2 else 1,
                                     list(_core.rounding_names).index("stochastic"), s)
              for v, s in zip(initial, seeds)]
    states = [_core.AdamState() for _ in shapes]
    for _ in range(3):
        grads = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        for p, g in zip(params, grads):
            p.grad = torch.from_numpy(g)
        optimizer.step()
        for w, s, g, p in zip(direct, states, grads, params):
            _core.adam_step(w, g.ctypes.data, g.size, s, 1e-2, 0.9, 0.999, 1e-8, 1e-2, True, False, 0)
            restored = np.empty(g.size, np.float32)
            w.restore(restored.ctypes.data)
            assert np.array_equal(restored.view(np.uint32), p.detach().numpy().reshape(-1).view(np.uint32))
            assert np.array_equal(s.exp_avg(), optimizer.state[p]["optimizer"].exp_avg())
    assert optimizer.storage_bytes()["weights"] == sum(w.nbytes for w in direct)


def test_block_storage_checkpoints_restore_the_run_bit_for_bit_and_refuse_damaged_codes():
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(40, 48), torch.nn.Tanh(), torch.nn.Linear(48, 3))
    data, target = torch.randn(20, 40), torch.randn(20, 3)
    make = lambda m: mf.optim.SGD(m.parameters(), lr=0.05, momentum=0.9,  # noqa: E731
                                  storage=mf.optim.BlockStorage("mxfp6-e3m2", "stochastic"), seed=2)
    optimizer = make(model)
    run(model, optimizer, data, target, 4)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    want = run(model, optimizer, data, target, 4)
    resumed = copy.deepcopy(model)
    resumed_optimizer = make(resumed)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    resumed.load_state_dict(checkpoint["model"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    assert all(torch.equal(a, b) for a, b in zip(run(resumed, resumed_optimizer, data, target, 4), want))

    damaged = copy.deepcopy(checkpoint["optimizer"])
    damaged["state"][0]["weights"]["scales"][0] = 255  # E8M0's NaN scale: no update writes it
    before = snapshot(resumed_optimizer)
    with pytest.raises(ValueError):
        resumed_optimizer.load_state_dict(damaged)
    assert_unchanged(resumed_optimizer, before)


def test_block_storage_refuses_nvfp4_and_unknown_names():
    with pytest.raises(ValueError, match="per-tensor scale"):
        mf.optim.BlockStorage("nvfp4")
    with pytest.raises(ValueError, match="mxfp4"):
        mf.optim.BlockStorage("mxfp5")
