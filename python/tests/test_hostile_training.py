"""minifloat.training under hostile use: views sharing memory and in-place changes of saved
tensors under the saved-tensor store, a diverging forward with packed saved tensors, a model
instrumented twice or taking two inputs, and gradient accumulation with dynamic containers."""

import contextlib
import copy

import pytest
import torch
from torch import nn

import minifloat as mf
import minifloat.training as mt

MODES = ("fp32", "packed", "gecko")


def tiny(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))


@pytest.mark.parametrize("mode", MODES)
def test_a_saved_square_tensor_and_its_transpose_are_kept_apart(mode):
    torch.manual_seed(0)
    h = torch.randn(8, 8, requires_grad=True)
    w = torch.randn(8, 8, requires_grad=True)

    def gradients(store):
        a = h * 1  # not a leaf: the two matmuls save a and a.t(), one memory, two layouts
        with store if store is not None else contextlib.nullcontext():
            out = (a @ w).sum() + (a.t() @ w).sum()
        return torch.autograd.grad(out, (h, w))

    want = gradients(None)
    got = gradients(mt.SavedTensorStore(mode))
    assert all(torch.equal(g.view(torch.int32), e.view(torch.int32)) for g, e in zip(got, want))


@pytest.mark.parametrize("mode", MODES)
def test_a_saved_tensor_changed_in_place_before_backward_is_refused_as_torch_refuses_it(mode):
    torch.manual_seed(0)
    w = torch.randn(64, requires_grad=True)
    x = mf.quantize(torch.randn(64), mf.fp_4_3_4)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out = (x * w).sum()  # plain torch: mul saves x for w's gradient
        x.add_(1.0)
        out.backward()
    x = mf.quantize(torch.randn(64), mf.fp_4_3_4)
    store = mt.SavedTensorStore(mode)
    with store:
        store.note(x, mf.fp_4_3_4, "activation")
        out = (x * w).sum()
    assert store.packed_count == (0 if mode == "fp32" else 1)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


@pytest.mark.parametrize("mode", MODES)
def test_an_unchanged_saved_tensor_still_unpacks(mode):
    torch.manual_seed(0)
    w = torch.randn(64, requires_grad=True)
    x = mf.quantize(torch.randn(64), mf.fp_4_3_4)
    store = mt.SavedTensorStore(mode)
    with store:
        store.note(x, mf.fp_4_3_4, "activation")
        out = (x * w).sum()
    out.backward()
    assert torch.equal(w.grad, x)


def test_a_non_finite_value_noted_in_a_format_without_it_is_kept_as_float32_not_an_error():
    assert mf.fp_4_3_4.specials != "ieee"
    w = torch.randn(64, requires_grad=True)
    x = mf.quantize(torch.randn(64), mf.fp_4_3_4)
    x[5] = float("nan")
    store = mt.SavedTensorStore("packed")
    with store:
        store.note(x, mf.fp_4_3_4, "activation")
        out = (x * w).sum()
    out.backward()
    assert store.packed_count == 0 and torch.equal(w.grad.view(torch.int32), x.view(torch.int32))


@pytest.mark.parametrize("mode", MODES)
def test_a_diverging_forward_is_a_skipped_step_in_every_store_mode(mode):
    model = tiny()
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    pm = mt.instrument(model, x)
    pm.assign("uniform")
    before = [p.detach().clone() for p in model.parameters()]
    x[3, 2] = float("nan")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    result = mt.training_step(pm, optimizer, mt.LossScaler(), nn.functional.cross_entropy, x, y, 0,
                              pm.store_saved_tensors(mode))
    assert not result.stepped
    assert all(torch.equal(p.detach(), b) for p, b in zip(model.parameters(), before))


def test_instrumenting_an_instrumented_model_is_refused():
    model = tiny()
    x = torch.randn(4, 6)
    pm = mt.instrument(model, x)
    for again in (model, pm.module):
        with pytest.raises(ValueError, match="already instrumented"):
            mt.instrument(again, x)
    assert len([s for s in pm.sites() if s.role == "P"]) == 4  # the first one is intact


def test_a_failed_instrumentation_leaves_in_place_activations_as_they_were():
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = nn.ReLU(inplace=True)

        def forward(self, x):
            return self.act(x).view(7, -1)  # fails on the example's shape

    model = Bad()
    with pytest.raises(mt.TraceError):
        mt.instrument(model, torch.randn(4, 6))
    assert model.act.inplace is True


def test_a_two_input_model_gets_the_documented_trace_error():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, a, b):
            return self.fc(a) + self.fc(b)

    with pytest.raises(mt.TraceError, match="takes 2 inputs; the network needs exactly one"):
        mt.instrument(Two(), torch.randn(4, 6))


def test_two_forwards_before_one_backward_give_each_its_own_bitlength_gradient():
    # Gradient accumulation: two micro-batches forward, one backward of the summed loss. Oracle:
    # the same micro-batches each forward and backward on their own (the gradients add up).
    model = tiny()
    x1, x2 = torch.randn(8, 6), torch.randn(8, 6) * 3
    y1, y2 = torch.randint(0, 3, (8,)), torch.randint(0, 3, (8,))
    options = mt.DynamicOptions(bit_lr=0.0, gamma_mantissa=0.0, gamma_exponent=0.0)

    def gradients(together):
        m = copy.deepcopy(model)
        pm = mt.instrument(m, x1)
        dyn = pm.enable_dynamic(options)
        dyn.begin_epoch(0, 0.1)
        pm.module.train()
        pm.begin_step(0)
        if together:
            loss = nn.functional.cross_entropy(pm(x1), y1) + nn.functional.cross_entropy(pm(x2), y2)
            loss.backward()
        else:
            nn.functional.cross_entropy(pm(x1), y1).backward()
            nn.functional.cross_entropy(pm(x2), y2).backward()
        return [dyn._c.task_gradient(k) for k in range(dyn._c.size())]

    together, apart = gradients(True), gradients(False)
    assert any(g != (0.0, 0.0) for g in apart)
    for (m1, e1), (m2, e2) in zip(together, apart):
        assert m1 == pytest.approx(m2, rel=1e-9, abs=1e-12) and e1 == pytest.approx(e2, rel=1e-9, abs=1e-12)
