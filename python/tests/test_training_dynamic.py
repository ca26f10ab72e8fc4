"""minifloat.training's dynamic containers (QM+QE and BitWave driven through the C++ policies) on
small torch models, and max pooling's bit-packed indices: the bitlength gradient a site's container
sees is the finite difference of Schrödinger's FP over that site's own tensor and gradient (oracle:
plain torch autograd and bit masks), the update is eq. 16's, the schedule freezes by rounding up,
BitWave moves with the loss slope, the quantized tensors hold at most k_m mantissa bits, and packed
saved tensors and pool indices decode bit for bit."""

import copy
import os
import sys

import pytest
import torch
from torch import nn

import minifloat as mf
import minifloat.training as mt
from minifloat.training.pooling import PoolGeometry

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch")
sys.path.insert(0, os.path.abspath(EXAMPLES))
import models  # noqa: E402


def tiny(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))


def step(pm, model, x, y, k, lr=0.0):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    return mt.training_step(pm, opt, mt.LossScaler(enabled=False), nn.functional.cross_entropy, x, y, k)


def low_bits_clear(t, mantissa_bits):
    """Every finite value of t keeps only its top `mantissa_bits` mantissa bits."""
    t = t.detach().contiguous()
    finite = torch.isfinite(t)
    low = (1 << (23 - mantissa_bits)) - 1
    return bool(((t.view(torch.int32) & low) == 0)[finite].all())


def containers_by_name(dyn):
    return {t.name: k for k, t in enumerate(dyn.tensors())}


# -- QM+QE ---------------------------------------------------------------------------------------

def test_qm_qe_mantissa_gradient_is_the_finite_difference_over_the_sites_own_tensor():
    model = tiny()
    plain = copy.deepcopy(model)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    pm = mt.instrument(model, x)
    dyn = pm.enable_dynamic(mt.DynamicOptions(bit_lr=0.0, gamma_mantissa=0.0, gamma_exponent=0.0))
    dyn.begin_epoch(0, 0.1)
    step(pm, model, x, y, 0)
    # Oracle: the fp32 network (at n = 23, 8 the container is the identity), torch autograd for
    # g = dL/dx̂, and k0 = 22: Q_23(x) − Q_22(x) = x with its last mantissa bit cleared, subtracted.
    h = plain[0](x)
    h.retain_grad()
    nn.functional.cross_entropy(plain[2](torch.relu(h)), y).backward()
    dropped = h.detach() - (h.detach().view(torch.int32) & ~1).view(torch.float32)
    expected = float((h.grad.double() * dropped.double()).sum())
    mantissa, exponent = dyn._c.task_gradient(containers_by_name(dyn)["0.Y"])
    scale = float((h.grad.double() * dropped.double()).abs().sum())
    assert scale > 0 and abs(mantissa - expected) <= 1e-5 * scale
    assert exponent == 0.0  # no value of h needs more than 7 exponent bits
    # The weight's container sees dL/dŴ: the same identity for the first layer's weight.
    w = plain[0].weight
    wd = w.detach() - (w.detach().view(torch.int32) & ~1).view(torch.float32)
    expected_w = float((w.grad.double() * wd.double()).sum())
    got_w, _ = dyn._c.task_gradient(containers_by_name(dyn)["0.weight"])
    assert abs(got_w - expected_w) <= 1e-5 * float((w.grad.double() * wd.double()).abs().sum())


def test_qm_qe_update_is_eq_16_with_footprint_weighted_lambda():
    model = tiny()
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    pm = mt.instrument(model, x)
    lr, gm, ge = 0.5, 0.1, 0.2
    dyn = pm.enable_dynamic(mt.DynamicOptions(bit_lr=lr, gamma_mantissa=gm, gamma_exponent=ge))
    dyn.begin_epoch(0, 0.1)
    step(pm, model, x, y, 0)
    tensors = dyn.tensors()
    total = sum(t.numel for t in tensors)  # every tensor at n = 23, 8: λ_t is its share of elements
    for k, t in enumerate(tensors):
        lam = t.numel / total
        gmant, gexp = dyn._c.task_gradient(k)
        assert t.n_mantissa == pytest.approx(min(23.0, 23.0 - lr * (gmant + gm * lam)), abs=1e-12)
        assert t.n_exponent == pytest.approx(min(8.0, 8.0 - lr * (gexp + ge * lam)), abs=1e-12)
    assert any(t.n_mantissa < 23 for t in tensors)


def test_qm_qe_regularizer_lowers_bitlengths_the_freeze_rounds_them_up_and_values_follow():
    model = tiny()
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
    pm = mt.instrument(model, x)
    dyn = pm.enable_dynamic(mt.DynamicOptions(bit_lr=40.0, gamma_mantissa=1.0, gamma_exponent=1.0, learn_epochs=1))
    dyn.begin_epoch(0, 0.1)
    for k in range(6):
        step(pm, model, x, y, k, lr=0.01)
    learned = dyn.tensors()
    assert all(t.n_mantissa < 23 and t.n_exponent < 8 for t in learned)
    # The larger tensors (larger λ) lose more bits: the weights of the first layer (30) vs its bias (5).
    by = {t.name: t for t in learned}
    assert by["0.weight"].n_mantissa < by["0.bias"].n_mantissa
    dyn.end_epoch()
    dyn.begin_epoch(1, 0.1)  # learn_epochs=1: frozen from the second epoch, rounded up
    assert not dyn.learning
    frozen = dyn.tensors()
    for before, after in zip(learned, frozen):
        assert after.n_mantissa == float(-(-before.n_mantissa // 1))
        assert after.n_exponent == float(-(-before.n_exponent // 1))
    # A training step quantizes every Y (input excluded) and P with the frozen integers.
    seen = {}

    def hook(module, inputs, output):
        seen[module.y] = output.detach().clone()

    for name, sub in pm.module.named_children():
        if name.startswith("_minifloat_site_"):
            sub.register_forward_hook(hook)
    step(pm, model, x, y, 100, lr=0.01)
    for site, value in seen.items():
        container = dyn.container_of(site)
        if container is None:
            assert site == pm.find("input.Y")
            continue
        assert low_bits_clear(value, container[0]), pm.site(site).name
    for t in dyn.tensors():  # nothing moved while frozen
        assert t.n_mantissa == float(t.mantissa_bits) and t.n_exponent == float(t.exponent_bits)


def test_dynamic_containers_need_loss_scaling_off():
    model = tiny()
    x, y = torch.randn(4, 6), torch.randint(0, 3, (4,))
    pm = mt.instrument(model, x)
    pm.enable_dynamic()
    with pytest.raises(ValueError, match="loss scaling off"):
        mt.training_step(pm, torch.optim.SGD(model.parameters(), lr=0.1), mt.LossScaler(), nn.functional.cross_entropy,
                         x, y, 0)
    with pytest.raises(ValueError, match="method"):
        mt.DynamicOptions(method="qm").check()


# -- BitWave -------------------------------------------------------------------------------------

def test_bitwave_narrows_on_a_falling_loss_widens_on_a_rising_one_and_quantizes_every_tensor():
    model = tiny()
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    pm = mt.instrument(model, x)
    dyn = pm.enable_dynamic(mt.DynamicOptions(method="bitwave", bw_history=4, bw_threshold=1e-3, bw_fix_epoch=1))
    dyn.begin_epoch(0, 0.1)
    for loss in (4.0, 3.0, 2.0):
        dyn.end_step(loss)
    assert dyn.bitwave[:2] == (23, 0)  # the history is not full yet
    dyn.end_step(1.0)
    assert dyn.bitwave[:2] == (22, 1)  # falling: one mantissa bit less, range narrowed by one each side
    for loss in (0.5, 0.25, 0.125):
        dyn.end_step(loss)
    assert dyn.bitwave[:2] == (19, 4)
    for loss in (1.0, 2.0):
        dyn.end_step(loss)
    assert dyn.bitwave[:2] == (21, 2)  # rising: back towards fp32
    pm.begin_step(0)
    for k in range(len(dyn.tensors())):
        assert dyn._c.tensor(k)[7] == (21, False, -124, 125, 8)
    seen = []
    for name, sub in pm.module.named_children():
        if name.startswith("_minifloat_site_") and sub.y != pm.find("input.Y"):
            sub.register_forward_hook(lambda m, i, o: seen.append(o.detach().clone()))
    pm.module.train()
    pm(x * 1e6).sum().backward()
    assert seen and all(low_bits_clear(v, 21) for v in seen)
    # After bw_fix_epoch epochs: fixed at the average, rounded towards the wider container.
    dyn.end_epoch()
    dyn.begin_epoch(1, 0.1)
    m, narrowing, fixed, _, mean_m, mean_n = dyn.bitwave
    assert fixed and m == -(-mean_m // 1) and narrowing == mean_n // 1


# -- saved tensors of containers and max-pool indices ----------------------------------------------

def pooled_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 3))


def one_step(model, mode, prepare):
    pm = mt.instrument(model, torch.zeros(4, 1, 14, 14))
    prepare(pm)
    store = pm.store_saved_tensors(mode)
    torch.manual_seed(1)
    x = torch.randn(4, 1, 14, 14)
    pm.begin_step(0)
    pm.module.train()
    with store:
        out = pm(x)
    out.square().sum().backward()
    return store, out.detach(), [p.grad.clone() for p in model.parameters()]


def fixed_containers(pm):
    dyn = pm.enable_dynamic(mt.DynamicOptions(learn_epochs=0))
    for k in range(len(dyn.tensors())):
        dyn._c.set_lengths(k, 5.0, 6.0)
    dyn.begin_epoch(0, 0.1)  # learn_epochs=0: frozen at (5, 6)


def test_saved_tensors_of_dynamic_containers_pack_as_fp8_k_codes_and_decode_bit_for_bit():
    packed, out_p, grads_p = one_step(pooled_model(), "packed", fixed_containers)
    plain, out_f, grads_f = one_step(pooled_model(), "fp32", fixed_containers)
    assert torch.equal(out_p, out_f)
    for a, b in zip(grads_p, grads_f):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))
    # Every saved activation but the network input (no container: kept as float32) at 1 + 8 + 5 =
    # 14 bits of 32 (every tensor here fills whole 32-bit words).
    input_bytes = 4 * 1 * 14 * 14 * 4
    assert packed.peak["activation"] == input_bytes + (plain.peak["activation"] - input_bytes) * 14 // 32
    assert packed.packed_count > 0


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", [
    (3, 2, 1, 1, False), (2, 2, 0, 1, False), (3, 1, 1, 2, False), (3, 2, 0, 1, True), ((2, 3), (1, 2), (1, 0), 1, False)])
def test_max_pool_indices_become_window_positions_and_decode_bit_for_bit(kernel, stride, padding, dilation, ceil_mode):
    pool = nn.MaxPool2d(kernel, stride, padding, dilation, ceil_mode=ceil_mode)
    geo = PoolGeometry(pool)
    torch.manual_seed(0)
    for x in (torch.randn(2, 3, 11, 13), torch.randint(-2, 3, (2, 3, 11, 13)).float()):  # with ties
        _, indices = nn.functional.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)
        codes = geo.window_codes(indices, x.shape[-1])
        kh, kw = geo.kernel
        assert int(codes.min()) >= 0 and int(codes.max()) < kh * kw
        words = mf.pack(codes, geo.bits)
        assert words.numel() == (codes.numel() * geo.bits + 31) // 32 * 4
        back = geo.plane_indices(mf.unpack(words, geo.bits, codes.numel()).view(codes.shape), x.shape[-1])
        assert back.dtype == torch.int64 and torch.equal(back, indices)


def test_a_model_with_max_pooling_trains_with_packed_indices_exactly_as_plain_torch():
    model = pooled_model()
    plain = copy.deepcopy(model)
    store, out, grads = one_step(model, "packed", lambda pm: pm.assign("fp32"))
    torch.manual_seed(1)
    ref = plain(torch.randn(4, 1, 14, 14))
    ref.square().sum().backward()
    assert torch.equal(out, ref.detach())
    for a, p in zip(grads, plain.parameters()):
        assert torch.equal(a, p.grad)
    # The indices of both pools were saved as uint8 words: 4 bits (3x3) and 2 bits (2x2) a value.
    fp32_store, _, _ = one_step(pooled_model(), "fp32", lambda pm: pm.assign("fp32"))
    indices_fp32 = 8 * (4 * 4 * 7 * 7 + 4 * 4 * 3 * 3)
    indices_packed = (4 * 4 * 7 * 7 * 4 + 31) // 32 * 4 + (4 * 4 * 3 * 3 * 2 + 31) // 32 * 4
    assert fp32_store.peak["other"] - store.peak["other"] == indices_fp32 - indices_packed


def test_resnet18_saved_other_bytes_shrink_with_packed_max_pool_indices():
    model = models.resnet18(width=0.25)
    pm = mt.instrument(model, torch.zeros(2, 1, 28, 28))
    pm.assign("uniform")
    store = pm.store_saved_tensors("packed")
    pm.begin_step(0)
    with store:
        out = pm(torch.randn(2, 1, 28, 28))
    # The stem's pool: 2 x 16 x 14 x 14 outputs, 4 bits each instead of int64's 64.
    n = 2 * 16 * 14 * 14
    words = [s for s in store._cache.values() if s[1]() is not None and s[1]().category == "other"
             and s[1]().tensor is not None and s[1]().tensor.dtype == torch.uint8]
    assert len(words) == 1 and words[0][1]().nbytes == (n * 4 + 31) // 32 * 4
    out.sum().backward()


# -- one controller and one seed rule for both trainers (training/dynamic_controller.hpp,
#    parameter_seed.hpp). The numbers are the ones tests/training/test_training_dynamic_controller.cpp
#    commits for the C++ functions: the Python trainer's path must give them too. ---------------------

def test_parameter_seed_is_fold_seed_of_the_parameter_index_with_the_committed_cpp_values():
    from minifloat import _core
    assert _core.parameter_seed(1, 0) == 0x630842168870933C
    assert _core.parameter_seed(1, 1) == 0x89FEFD02FB65D1D6
    assert _core.parameter_seed(42, 2) == 0x014DC37469F5F66E
    for seed in (0, 1, 42, 2**64 - 1):
        for i in range(8):
            assert _core.parameter_seed(seed, i) == mf.fold_seed(seed, i)


def test_dynamic_options_defaults_and_names_are_the_cpp_controllers():
    from minifloat import _core
    assert mt.DynamicOptions().fields() == _core.dynamic_defaults()
    assert _core.DynamicController().options() == _core.dynamic_defaults()
    assert mt.dynamic.METHODS == ("qm-qe", "bitwave") and mt.dynamic.GECKO == ("faithful", "improved")
    with pytest.raises(ValueError, match="sign 'never' is not one of omit, always"):
        mt.DynamicOptions(sign="never").check()
    with pytest.raises(ValueError, match="relearn_lr_factor"):
        mt.DynamicOptions(relearn_lr_factor=float("nan")).check()


def test_trainer_path_draws_qm_qe_bitlengths_as_the_cpp_controller_does():
    model = tiny()
    pm = mt.instrument(model, torch.randn(4, 6))
    dyn = pm.enable_dynamic(mt.DynamicOptions(seed=7))
    dyn.begin_epoch(0, 0.1)
    dyn._c.set_lengths(0, 10.5, 4.25)
    dyn._c.set_lengths(1, 3.75, 6.5)
    committed = [(10, 4, 4, 7), (11, 5, 3, 7), (10, 4, 3, 6), (11, 4, 4, 7),
                 (10, 5, 3, 7), (10, 4, 4, 7), (11, 4, 4, 6), (10, 4, 4, 7)]
    for step_index, want in enumerate(committed):
        pm.begin_step(step_index)
        got = dyn._c.tensor(0)[5:7] + dyn._c.tensor(1)[5:7]
        assert got == want, step_index


def test_trainer_path_learns_after_each_tenfold_learning_rate_drop_as_the_cpp_controller_does():
    pm = mt.instrument(tiny(), torch.randn(4, 6))
    dyn = pm.enable_dynamic(mt.DynamicOptions(learn_epochs=2, relearn_epochs=1))
    learning = []
    for epoch, lr in enumerate((0.05, 0.04, 0.004, 0.003, 0.0003)):
        dyn.begin_epoch(epoch, lr)
        learning.append(dyn.learning)
    assert learning == [True, True, True, False, True]


def test_trainer_path_takes_bitwaves_decisions_as_the_cpp_controller_does():
    pm = mt.instrument(tiny(), torch.randn(4, 6))
    dyn = pm.enable_dynamic(mt.DynamicOptions(method="bitwave", bw_history=4, bw_fix_epoch=1))
    committed = [(0, 23, 0), (0, 23, 0), (0, 23, 0), (-1, 22, 1), (-1, 21, 2), (-1, 20, 3),
                 (-1, 19, 4), (-1, 18, 5), (1, 19, 4), (1, 20, 3), (1, 21, 2), (1, 22, 1)]
    dyn.begin_epoch(0, 0.1)
    for k, loss in enumerate((2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.5, 1.5, 1.6, 1.7, 1.8, 1.9)):
        dyn.begin_step(k)
        assert dyn._c.tensor(0)[5] == (committed[k - 1][1] if k else 23)
        decision = dyn.end_step(loss)
        assert (decision, dyn.bitwave[0], dyn.bitwave[1]) == committed[k], k
    assert dyn.learning
    dyn.begin_epoch(1, 0.1)
    assert not dyn.learning and dyn.bitwave[:3] == (21, 2, True)
