"""minifloat.training's policies on real torch models: assignments from C++, rounding at every
site (probed on the tensors the model really computes), overflow promotion at Θ, the C++ loss
scaler, bit-packed saved tensors with measured bytes, and a short training run."""

import os
import sys

import pytest
import torch
from torch import nn

import minifloat as mf
import minifloat.training as mt
from minifloat.training.pooling import MaxPoolSites

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch")
sys.path.insert(0, os.path.abspath(EXAMPLES))
import fashion_mnist  # noqa: E402
import models  # noqa: E402


def small_resnet(seed=0, batch=4):
    torch.manual_seed(seed)
    model = models.ResNet18(num_classes=10)
    return mt.instrument(model, torch.randn(batch, 3, 32, 32)), model


def representable(t, fmt, overflow):
    """Rounding t to fmt changes no bit (NaN compared as NaN)."""
    r = mf.quantize(t.detach().contiguous(), fmt, overflow=overflow)
    same = (r.view(torch.int32) == t.detach().contiguous().view(torch.int32)) | (torch.isnan(r) & torch.isnan(t))
    return bool(same.all())


# -- assignments ------------------------------------------------------------------------------

def low_names(pm):
    return {s.name for s in pm.sites() if s.low}


def test_operator_based_assignment_lowers_the_inputs_of_every_inner_gemm():
    pm, _ = small_resnet()
    pm.assign("op")
    low = low_names(pm)
    # layer1.0.conv1 is an inner GEMM: its input (the max pool's output), its weight and the
    # gradient of its output go low; its own output does not.
    assert {"maxpool.Y", "layer1.0.conv1.weight", "layer1.0.conv1.GY"} <= low
    assert "layer1.0.conv1.Y" not in low
    # The first and last GEMMs keep their inputs high; gradients of weights never go low.
    assert not {"input.Y", "conv1.weight", "fc.weight", "conv1.GY"} & low
    assert not any(n.endswith(".grad") for n in low)
    pm.assign("op-variant")
    assert {"layer1.0.conv1.Y", "maxpool.GY"} <= low_names(pm)


def test_uniform_lowers_every_tensor_but_weight_gradients_and_all_high_none():
    pm, _ = small_resnet()
    pm.assign("uniform")
    for s in pm.sites():
        assert s.low == (s.role != "GP"), s.name
        assert s.format == (s.high if s.role == "GP" else s.low_format)
    assert str(pm.site(pm.find("conv1.Y")).format) == str(mf.fp_4_3_4)
    assert str(pm.site(pm.find("conv1.GY")).format) == str(mf.fp_5_2_0)
    pm.assign("all-high")
    assert not low_names(pm)


def test_size_ordered_demotion_visits_groups_in_the_asked_order_and_reaches_the_ratio():
    pm, _ = small_resnet()
    groups = pm.groups()
    sizes = [g.size for g in groups]
    info = pm.assign("ours", ratio=0.5, order="decreasing")
    assert info["demoted_share"] >= 0.5
    demoted = info["groups_demoted"]
    assert demoted[0] == sizes.index(max(sizes))
    assert [sizes[k] for k in demoted] == sorted((sizes[k] for k in demoted), reverse=True)
    # Every site of a demoted group went low (GP excepted), no site of another group did.
    low = low_names(pm)
    for k, g in enumerate(groups):
        for name in g.sites:
            assert (name in low) == (k in demoted and not name.endswith(".grad")), name
    inc = pm.assign("ours", ratio=0.5, order="increasing")["groups_demoted"]
    assert inc[0] == sizes.index(min(sizes)) and len(inc) > len(demoted)
    r1 = pm.assign("ours", ratio=0.5, order="random", seed=3)["groups_demoted"]
    r2 = pm.assign("ours", ratio=0.5, order="random", seed=3)["groups_demoted"]
    assert r1 == r2
    # The paper-style footprint counts the low bits the C++ way: GP stays high, so below r.
    assert 0 < pm.footprint()["low_ratio"] < 0.5
    with pytest.raises(ValueError, match="order"):
        pm.assign("ours", ratio=0.5, order="sideways")
    with pytest.raises(ValueError, match="outside"):
        pm.assign("ours", ratio=1.5)


# -- rounding at every site (a probe on the real tensors) ----------------------------------------

def test_every_rounded_tensor_is_representable_in_its_sites_format():
    pm, model = small_resnet()
    pm.assign("ours", ratio=0.5)
    assert any(s.low for s in pm.sites()) and any(not s.low for s in pm.sites())
    checked = {"Y": 0, "GY": 0, "P": 0, "GP": 0}
    failures = []

    def check(site, tensor, overflow):
        s = pm.site(site)
        checked[s.role] += 1
        if not representable(tensor, s.format, overflow):
            failures.append(s.name)

    # Y: the outputs of the inserted site modules; GY: the gradient they pass on (the gradient of
    # their input tensor). The probe hooks are on the modules the model really runs.
    def hands_on(module):
        return isinstance(module, MaxPoolSites) or module.inplace

    for name, sub in pm.module.named_children():
        if not name.startswith("_minifloat_site_"):
            continue

        def forward_hook(module, inputs, output):
            check(module.y, output, "saturate")
            if module.gy is not None and inputs[0].requires_grad and not hands_on(module):
                inputs[0].register_hook(lambda g, m=module: check(m.gy, g, "infinity"))

        sub.register_forward_hook(forward_hook)
        if hands_on(sub):
            # Max pooling's backward scatters (and, where windows overlap, sums) the rounded GY
            # into its input's gradient, and a site that rounds its input in place has no separate
            # input tensor to hook: probe the tensor the site hands on to the backward.
            rounded = pm._round_gradient

            def probe_gradient(site, g, kept=None, module=sub, rounded=rounded):
                rounded(site, g, kept)
                if site == module.gy:
                    check(site, g, "infinity")

            pm._round_gradient = probe_gradient
    pm.begin_step(0)
    x = torch.randn(4, 3, 32, 32)
    out = pm(x)
    out.square().sum().backward()
    for m in pm.traced.graph_module.modules():
        if not hasattr(m, "parametrizations"):
            continue
        for pname, plist in m.parametrizations.items():
            sites = plist[0]
            check(sites.p, getattr(m, pname), "saturate")
            check(sites.gp, plist.original.grad, "infinity")
    assert not failures, failures[:5]
    assert checked["Y"] == 69 and checked["GY"] == 68  # every operation but the input has a GY site
    assert checked["P"] == checked["GP"] == 62
    # And the rounding is real: conv1's output at fp(4,3,4) differs from the fp32 model's.
    assert pm.site_stats(pm.find("conv1.Y")).values == 4 * 64 * 16 * 16


def test_a_site_rounds_through_the_core_with_its_own_seeded_stochastic_stream():
    pm, _ = small_resnet(batch=2)
    pm.assign("uniform")
    pm.set_rounding("stochastic")
    x = torch.randn(2, 3, 32, 32)
    pm.begin_step(5)
    a = pm(x)
    pm.begin_step(5)
    b = pm(x)
    pm.begin_step(6)
    c = pm(x)
    assert torch.equal(a, b) and not torch.equal(a, c)


# -- promotion ---------------------------------------------------------------------------------

def promotion_model(overflowing):
    """A 16-weight linear layer whose weight has `overflowing` entries above fp(4,3,4)'s range."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4, bias=False))
    with torch.no_grad():
        model[0].weight.fill_(0.5)
        model[0].weight.view(-1)[:overflowing] = 1e6
    pm = mt.instrument(model, torch.zeros(1, 4))
    pm.assign("uniform")
    return pm


@pytest.mark.parametrize("theta, promoted", [(2 / 16, True), (0.13, False), (0.0, True), (1.0, False)])
def test_promotion_fires_exactly_when_the_overflow_ratio_reaches_theta(theta, promoted):
    pm = promotion_model(2)
    pm.enable_promotion(theta)
    site = pm.find("0.weight")
    pm.begin_step(0)
    pm(torch.zeros(1, 4)).sum().backward()
    assert pm.site_stats(site).overflow_ratio == 2 / 16
    pm.promote(0)
    assert pm.site(site).low == (not promoted)
    logged = [name for _, name, _ in pm.promotion_log()]
    assert ("0.weight" in logged) == promoted
    # Gradients are never promoted, whatever their overflows.
    assert pm.site(pm.find("0.GY")).low


def test_promotion_is_permanent_and_uses_only_the_last_steps_statistics():
    pm = promotion_model(2)
    pm.enable_promotion(0.01)
    site = pm.find("0.weight")
    pm.begin_step(0)
    pm(torch.zeros(1, 4))
    pm.promote(0)
    assert not pm.site(site).low
    pm.begin_step(1)  # a fresh step: no counts, nothing more to promote, the site stays high
    assert pm.site_stats(site).values == 0
    assert pm.promote(1) == 0 and not pm.site(site).low


# -- loss scaling ------------------------------------------------------------------------------

def test_loss_scaler_skips_a_step_whose_low_precision_gradients_overflow_and_backs_off():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    pm = mt.instrument(model, torch.zeros(2, 8))
    pm.assign("uniform")  # GY in fp(5,2,0): max 57344, overflow to Inf
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = mt.LossScaler(init_scale=2.0 ** 24, growth_interval=2)
    loss = lambda out, t: (out - t).square().mean()  # noqa: E731
    x, t = torch.randn(2, 8), torch.zeros(2, 1) + 100.0
    r = mt.training_step(pm, opt, scaler, loss, x, t, 0)
    assert not r.stepped and r.scale == 2.0 ** 24 and scaler.scale == 2.0 ** 23
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    # Backing off until the scaled gradients fit, then growing after growth_interval good steps.
    steps = [mt.training_step(pm, opt, scaler, loss, x, t, k) for k in range(1, 30)]
    first = next(k for k, s in enumerate(steps) if s.stepped)
    assert all(not s.stepped for s in steps[:first])
    assert steps[first].scale == 2.0 ** (23 - first)
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


# -- saved tensors -----------------------------------------------------------------------------

def run_step(mode, assignment, seed=0, ratio=0.5):
    pm, model = small_resnet(seed)
    pm.assign(assignment, ratio=ratio)
    store = pm.store_saved_tensors(mode)
    torch.manual_seed(1)
    x = torch.randn(4, 3, 32, 32)
    pm.begin_step(0)
    with store:
        out = pm(x)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    return store, out.detach(), grads


@pytest.mark.parametrize("mode, assignment", [("packed", "uniform"), ("packed", "ours"), ("packed", "all-high"),
                                              ("gecko", "uniform"), ("gecko", "all-high")])
def test_packed_saved_tensors_give_backward_the_same_bits_as_fp32_ones(mode, assignment):
    packed, out_p, grads_p = run_step(mode, assignment)
    plain, out_f, grads_f = run_step("fp32", assignment)
    assert packed.packed_count > 60
    assert torch.equal(out_p, out_f)
    for a, b in zip(grads_p, grads_f):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_a_packed_tensor_decodes_bit_for_bit():
    store = mt.SavedTensorStore("packed")
    x = mf.quantize(torch.randn(3, 5, 7) * 100, mf.fp_4_3_4, overflow="saturate")
    c = mf.fp_4_3_4.constants()
    x.view(-1)[:6] = torch.tensor([0.0, -0.0, c["max_finite"], -c["max_finite"], c["min_subnormal"],
                                   -c["min_subnormal"]])  # zeros and fp(4,3,4)'s extremes
    with store:
        store.note(x, mf.fp_4_3_4, "activation")
        held = store._pack(x)
    assert held.words.numel() == (3 * 5 * 7 * 8 + 31) // 32 * 4  # 8 bits each, in 32-bit words
    assert store.live["activation"] == held.words.numel()
    back = store._unpack(held)
    assert torch.equal(back.view(torch.int32), x.view(torch.int32))
    del held
    assert store.live["activation"] == 0 and store.peak["activation"] == (3 * 5 * 7 * 8 + 31) // 32 * 4


def test_a_tensor_changed_after_rounding_is_not_packed():
    store = mt.SavedTensorStore("packed")
    x = mf.quantize(torch.randn(64), mf.fp_4_3_4)
    with store:
        store.note(x, mf.fp_4_3_4, "activation")
        x.add_(1e-3)  # no longer representable: the store must keep it as it is
        held = store._pack(x)
    assert held.tensor is x and held.category == "other"
    with store:
        pass
    store.note(x, mf.fp_4_3_4, "activation")  # outside the context (evaluation): not noted
    assert not store._notes


def test_fp_4_3_4_saved_activations_take_at_most_three_tenths_of_the_fp32_bytes():
    packed, _, _ = run_step("packed", "uniform")
    plain, _, _ = run_step("fp32", "uniform")
    ratio = packed.peak["activation"] / plain.peak["activation"]
    assert ratio <= 0.3, ratio
    # The same run's own float32-equivalent count agrees with the fp32 run's measurement.
    assert packed.fp32_peak["activation"] == plain.peak["activation"]
    # With half the tensors demoted, the saving is smaller but still real.
    half, _, _ = run_step("packed", "ours", ratio=0.5)
    assert packed.peak["activation"] < half.peak["activation"] < 0.6 * plain.peak["activation"]


# -- a short training run ----------------------------------------------------------------------

def test_a_short_low_precision_run_on_fashion_mnist_learns():
    torch.manual_seed(0)
    train = fashion_mnist.load("train", limit=2000)
    test = fashion_mnist.load("test", limit=1000)
    model = models.build("resnet20", 0.5)
    pm = mt.instrument(model, torch.zeros(64, 1, 28, 28))
    pm.assign("ours", ratio=0.5)
    pm.enable_promotion(0.01)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    scaler = mt.LossScaler(growth_interval=100)
    store = pm.store_saved_tensors("packed")
    step = 0
    for epoch in range(2):
        for x, y in fashion_mnist.batches(train, 64, torch.Generator().manual_seed(epoch)):
            mt.training_step(pm, opt, scaler, nn.functional.cross_entropy, x, y, step, store)
            step += 1
    pm.module.eval()
    correct = 0
    with torch.no_grad():
        for x, y in fashion_mnist.batches(test, 500):
            correct += int((pm(x).argmax(1) == y).sum())
    accuracy = correct / len(test)
    assert accuracy >= 0.55, accuracy  # chance is 0.1; fp32 reaches about 0.65 on this budget
    assert store.peak["activation"] < 0.6 * store.fp32_peak["activation"]


@pytest.mark.parametrize("mode", ["packed", "gecko"])
def test_every_packed_saved_tensor_is_representable_and_decodes_to_what_autograd_saved(mode):
    pm, _ = small_resnet()
    pm.assign("ours", ratio=0.5)
    store = pm.store_saved_tensors(mode)
    seen = []
    pack = store._pack

    def probe(t):
        held = pack(t)
        seen.append((t.detach().clone(), held))
        return held

    store._hooks = torch.autograd.graph.saved_tensors_hooks(probe, store._unpack)
    pm.begin_step(0)
    with store:
        out = pm(torch.randn(4, 3, 32, 32))
    packed = [(t, h) for t, h in seen if h.fmt is not None]
    assert len(packed) > 60
    formats = set()
    for t, held in packed:
        formats.add(str(held.fmt))
        assert representable(t, held.fmt, "saturate")
        back = store._unpack(held)
        assert torch.equal(back.view(torch.int32), t.view(torch.int32))
    assert formats == {str(mf.fp_4_3_4), str(mf.fp_6_9_0)}  # both levels of ours occur
    out.sum().backward()


def test_weights_can_live_in_a_no_master_optimizer_under_the_sites():
    pm, model = small_resnet()
    pm.assign("ours", ratio=0.5)
    opt = mf.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, storage=mf.optim.LowStorage("bf16"))
    scaler = mt.LossScaler(growth_interval=10)
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    before = [p.detach().clone() for p in model.parameters()]
    r = mt.training_step(pm, opt, scaler, nn.functional.cross_entropy, x, y, 0)
    assert r.stepped
    params = list(model.parameters())
    assert not all(torch.equal(a, b) for a, b in zip(before, params))
    for p in params:  # the compute copies hold exactly the stored bf16 weights
        assert representable(p, mf.bfloat16, "saturate")
    n = sum(p.numel() for p in params)
    assert opt.storage_bytes()["weights"] <= 2 * n + 4 * len(params)  # 16-bit codes in 32-bit words
