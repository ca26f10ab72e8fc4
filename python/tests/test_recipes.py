"""minifloat.recipes and minifloat.layers: every operand each GEMM multiplies is what quantizing it
by the recipe's rule gives (computed here by direct calls of the operand functions, or by torch's
own casts), gradients pass straight through, the Hadamard sign vector survives a state-dict round
trip, and a short run with every built-in recipe learns."""

import csv
import dataclasses
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import minifloat as mf
from minifloat import layers, operands as ops, recipes
from minifloat.recipes import GemmRule, OperandRule, Recipe

ROLE_INDEX = {r: i for i, r in enumerate(recipes.ROLES)}


def expected_operand(m, rule, side, transposed, seed):
    """Direct calls of the operand functions (or torch's casts) for one operand matrix."""
    fmt = rule.format
    if fmt is None:
        return m
    if isinstance(fmt, mf.BlockFormat):
        common = dict(rounding=rule.rounding, overflow=rule.overflow, seed=seed)
        if rule.tile:
            return ops.quantize_tiles(m, fmt, tile=rule.tile, scale_rule=rule.scale_rule, **common)
        if rule.prescale != 1:
            # the E8M0 scale of the unscaled block by the floor or rceil rule, computed here from the amax
            axis = ops.reduction_axis(side, transposed)
            blocks = m.movedim(axis, -1)
            shape = blocks.shape
            amax = blocks.reshape(*shape[:-1], -1, fmt.block_size).abs().amax(-1)
            emax = 2  # e2m1
            if rule.scale_rule == "floor":
                exp = torch.floor(torch.log2(amax)) - emax
            else:
                exp = torch.ceil(torch.log2(amax / 6.0))
            exp = torch.where(amax == 0, torch.zeros_like(exp), exp)  # an all-zero block stays zero
            scale = torch.exp2(exp).repeat_interleave(fmt.block_size, dim=-1).movedim(-1, axis)
            return mf.quantize(m * rule.prescale / scale, fmt.element, rule.rounding, overflow=rule.overflow,
                               seed=seed) * scale
        return ops.quantize_operand(m, fmt, side=side, transposed=transposed, scale_rule=rule.scale_rule, **common)
    if rule.scaling == "tensor":  # torch's own float8 casts (nearest-even), saturated by a clamp
        dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[str(fmt)]
        top = float(fmt.max_finite)
        s = torch.tensor(top, dtype=torch.float32) / m.abs().max()
        return (m * s).clamp(-top, top).to(dtype).float() / s
    assert str(fmt) in ("bfloat16", "bf16") and rule.rounding == "nearest_even"
    return m.to(torch.bfloat16).float()


def transformed(m, layer, role, axis):
    width = layer.recipe.gemm(role).hadamard
    if not width:
        return m
    signs = ops.hadamard_signs(mf.fold_seed(layer.seed, layers.HADAMARD_KEY, ROLE_INDEX[role]), width)
    short = -m.shape[axis] % width
    if short:
        m = torch.cat([m, m.new_zeros((short, m.shape[1]) if axis == 0 else (m.shape[0], short))], axis)
    return ops.hadamard_transform(m.contiguous(), signs, axis=axis)


def check_probe(layer, stored, step=0):
    """stored: role -> (a, b) as the GEMM stores them, before any transform."""
    seen = {(p["role"], p["index"]): p for p in layer.probe}
    assert len(seen) == len(layer.probe) == 6
    for role in recipes.ROLES:
        g = layer.recipe.gemm(role)
        for i in (0, 1):
            side, transposed = recipes.LAYOUTS[(role, i)]
            seed = mf.fold_seed(layer.seed, step, ROLE_INDEX[role], i)
            m = transformed(stored[role][i], layer, role, ops.reduction_axis(side, transposed))
            want = expected_operand(m, g.operand(i), side, transposed, seed)
            got = seen[(role, i)]["value"]
            assert got.shape == want.shape, (role, i)
            assert torch.equal(got, want), f"{layer.recipe.name} {role} operand {i}: differs at " \
                f"{(got != want).nonzero()[:3].tolist()}"


def inputs(m=40, k=48, n=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=g), torch.randn(n, k, generator=g) * 0.2,
            torch.randn(m, n, generator=g) * 1e-3)


@pytest.mark.parametrize("name", list(recipes.RECIPES))
def test_every_linear_gemm_operand_is_the_recipe_quantization_of_it(name):
    x, w, g = inputs()
    layer = layers.Linear(48, 32, bias=False, recipe=name, seed=7)
    with torch.no_grad():
        layer.weight.copy_(w)
    layer.probe = []
    xr = x.clone().requires_grad_()
    (layer(xr) * g).sum().backward()
    check_probe(layer, {"forward": (x, w), "input_grad": (g, w), "weight_grad": (g, x)})
    assert int(layer.step) == 1


@pytest.mark.parametrize("name, shape, stride", [("nvfp4", (2, 16, 7, 7), 1), ("nvfp4", (2, 16, 8, 8), 2),
                                                 ("mxfp8", (2, 32, 5, 5), 1), ("fp8", (2, 16, 6, 6), 2),
                                                 ("mxfp4", (1, 16, 6, 6), 1), ("bf16", (2, 3, 5, 5), 1)])
def test_every_conv_gemm_operand_is_the_recipe_quantization_of_its_im2col_matrix(name, shape, stride):
    n, c, h, w_ = shape
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(shape, generator=gen)
    layer = layers.Conv2d(c, 24, 3, stride=stride, padding=1, bias=False, recipe=name, seed=11)
    weight = layer.weight.detach().clone()
    layer.probe = []
    y = layer(x.clone().requires_grad_())
    g = torch.randn(y.shape, generator=gen) * 1e-2
    (y * g).sum().backward()
    cols = F.unfold(x, 3, padding=1, stride=stride)  # N x (C*9) x L, columns (c, kh, kw)
    cols = cols.view(n, c, 9, -1).permute(0, 3, 2, 1).reshape(-1, 9 * c)  # rows (n, ho, wo), columns (kh, kw, c)
    w2 = weight.permute(0, 2, 3, 1).reshape(24, 9 * c)
    g2 = g.permute(0, 2, 3, 1).reshape(-1, 24)
    check_probe(layer, {"forward": (cols, w2), "input_grad": (g2, w2), "weight_grad": (g2, cols)})


def test_the_pixel_path_is_taken_only_where_it_equals_the_im2col_path():
    x = torch.randn(2, 16, 8, 8)
    assert layers.Conv2d(16, 8, 3, padding=1, recipe="nvfp4")._pixel_path(x)
    assert not layers.Conv2d(16, 8, 1, stride=2, recipe="nvfp4")._pixel_path(x)  # skips pixels: tensor amax differs
    assert layers.Conv2d(16, 8, 1, stride=2, recipe="mxfp8")._pixel_path(x.repeat(1, 2, 1, 1))  # MX: no tensor scale
    assert not layers.Conv2d(8, 8, 3, padding=1, recipe="nvfp4")._pixel_path(x[:, :8])  # blocks would span pixels
    assert not layers.Conv2d(16, 8, 3, padding=1, recipe=RECIPES_SR_FORWARD)._pixel_path(x)


RECIPES_SR_FORWARD = Recipe("sr_forward", forward=GemmRule(OperandRule("nvfp4", rounding="stochastic"),
                                                            OperandRule("nvfp4")))


def test_outputs_and_gradients_are_the_gemms_of_the_probed_operands_straight_through():
    x, w, g = inputs(m=33)
    layer = layers.Linear(48, 32, bias=False, recipe="mxfp4", seed=2)
    with torch.no_grad():
        layer.weight.copy_(w)
    layer.probe = []
    xr = x.clone().requires_grad_()
    y = layer(xr)
    (y * g).sum().backward()
    q = {(p["role"], p["index"]): p["value"] for p in layer.probe}
    p = 0.75 * 0.75
    torch.testing.assert_close(y, q[("forward", 0)] @ q[("forward", 1)].T, rtol=1e-6, atol=0)
    torch.testing.assert_close(xr.grad, q[("input_grad", 0)] @ q[("input_grad", 1)] / p, rtol=1e-5, atol=1e-9)
    torch.testing.assert_close(layer.weight.grad, q[("weight_grad", 0)].T @ q[("weight_grad", 1)] / p, rtol=1e-5,
                               atol=1e-9)
    # fp32: the layer is nn.Linear / nn.Conv2d
    lin = layers.Linear(48, 32, recipe="fp32")
    ref = torch.nn.Linear(48, 32)
    ref.load_state_dict({k: v for k, v in lin.state_dict().items() if k in ("weight", "bias")})
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    (lin(xa) * g).sum().backward()
    (ref(xb) * g).sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad)
    torch.testing.assert_close(lin.weight.grad, ref.weight.grad)
    conv = layers.Conv2d(4, 6, 3, stride=2, padding=1, recipe="fp32")
    xc = torch.randn(2, 4, 9, 9)
    xa, xb = xc.clone().requires_grad_(), xc.clone().requires_grad_()
    conv(xa).square().sum().backward()
    F.conv2d(xb, conv.weight, conv.bias, stride=2, padding=1).square().sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad)


def test_emulated_accumulation_runs_each_gemm_through_emulated_gemm():
    acc = dict(ops.HOPPER_FP8_MODEL)
    rec = recipes.RECIPES["fp8"].variant(accumulation=acc)
    x, w, g = inputs(m=8, k=256, n=4)
    layer = layers.Linear(256, 4, bias=False, recipe=rec)
    with torch.no_grad():
        layer.weight.copy_(w)
    layer.probe = []
    y = layer(x)
    q = {(p["role"], p["index"]): p["value"] for p in layer.probe}
    assert torch.equal(y, ops.emulated_gemm(q[("forward", 0)], q[("forward", 1)].T, **acc))
    no_promotion = layers.Linear(256, 4, bias=False, recipe=rec.variant(accumulation=dict(acc, promote_every=0)))
    with torch.no_grad():
        no_promotion.weight.copy_(w)
    assert not torch.equal(no_promotion(x), y)  # 256 truncated sums lose more than two chunks of 128


def test_stochastic_draws_are_fresh_per_step_and_reproducible_per_seed():
    x, w, g = inputs()

    def run(seed, steps):
        layer = layers.Linear(48, 32, bias=False, recipe="nvfp4", seed=seed)
        with torch.no_grad():
            layer.weight.copy_(w)
        grads = []
        for _ in range(steps):
            xr = x.clone().requires_grad_()
            (layer(xr) * g).sum().backward()
            grads.append(xr.grad)
        return grads

    a, b, c = run(5, 2), run(5, 2), run(6, 1)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], a[1]) and not torch.equal(a[0], c[0])


def small_model():
    return torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(16 * 36, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def test_the_hadamard_sign_vector_and_step_survive_a_state_dict_round_trip():
    model = small_model()
    layers.convert(model, "nvfp4", seed=1, keep_first_last=False)
    x = torch.randn(4, 1, 6, 6)
    model(x).sum().backward()
    state = model.state_dict()
    assert "2.hadamard.weight_grad.signs" in state and int(state["2.step"]) == 1
    other = small_model()
    layers.convert(other, "nvfp4", seed=99, keep_first_last=False)
    assert not torch.equal(other[2].hadamard["weight_grad"].signs, model[2].hadamard["weight_grad"].signs)
    other.load_state_dict(state)
    other[2].seed = model[2].seed  # the rounding seed is the conversion's, not state
    for a, b in ((model, other),):
        assert torch.equal(a[2].hadamard["weight_grad"].signs, b[2].hadamard["weight_grad"].signs)
    a_layer, b_layer = model[2], other[2]
    a_layer.probe, b_layer.probe = [], []
    h = torch.randn(4, 16, 6, 6)
    for layer in (a_layer, b_layer):
        layer(h.clone().requires_grad_()).sum().backward()
    for p, q in zip(a_layer.probe, b_layer.probe):
        assert p["step"] == q["step"] == 1 and torch.equal(p["value"], q["value"])


def test_convert_replaces_layers_in_place_and_keeps_the_first_and_last():
    model = torch.nn.Sequential(small_model(), torch.nn.Conv2d(4, 4, 1, groups=2))
    params = {id(p) for p in model.parameters()}
    done = layers.convert(model, "mxfp8", seed=3)
    assert done == layers.Conversion(["0.2", "0.5", "0.7"], ["0.0", "1"], [])  # the last one is kept, grouped or not
    assert isinstance(model[0][2], layers.Conv2d) and isinstance(model[0][5], layers.Linear)
    assert type(model[0][0]) is torch.nn.Conv2d
    assert {id(p) for p in model.parameters()} == params
    all_in = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Conv2d(2, 2, 1, groups=2))
    done = layers.convert(all_in, "bf16", keep_first_last=False)
    assert done.converted == ["0", "1"] and done.unsupported == ["2"]
    with pytest.raises(ValueError, match="keep names"):
        layers.convert(small_model(), "bf16", keep=["nope"])


def test_counters_count_overflows_and_the_bytes_of_the_quantized_operands():
    layer = layers.Linear(64, 16, bias=False, recipe="nvfp4")
    layer(torch.randn(32, 64)).sum().backward()
    c = layers.counters(torch.nn.Sequential(layer))
    # forward: X 32x64 in 1x16 blocks (128 blocks) and W 16x64 in 16x16 tiles (4): half a byte a
    # value, a byte a block scale, 4 bytes per tensor scale
    assert c["forward"]["values"] == 32 * 64 + 16 * 64
    assert c["forward"]["blocks"] == 128 + 4
    assert c["forward"]["bytes"] == (32 * 64 + 16 * 64) // 2 + 132 + 8
    mx = layers.Linear(64, 16, bias=False, recipe="mxfp4")
    mx(torch.randn(64, 64, requires_grad=True)).sum().backward()
    # backward operands of 64 rows: dY (64 x 16, padded to 32 columns by the 32-wide transform), W (16 -> 32 rows
    # x 64); 4.25 bits a value; the weight gradient's dY and X (64 rows, no padding)
    assert mx.counters["input_grad"]["values"] == 64 * 32 + 32 * 64
    assert mx.counters["input_grad"]["bytes"] == (64 * 32 + 32 * 64) // 2 + (64 * 32 + 32 * 64) // 32
    assert mx.counters["weight_grad"]["values"] == 64 * 16 + 64 * 64
    assert mx.counters["forward"]["bytes"] == 2 * (64 * 64 + 16 * 64)  # bf16
    layers.reset_counters(torch.nn.Sequential(mx))
    assert mx.counters["forward"]["values"] == 0


def test_floor_scales_clip_what_rceil_scales_do_not():
    rule = OperandRule("mxfp4", scale_rule="floor")
    x = torch.full((1, 32), 0.5)
    x[0, 0] = 7.5  # floor: X = 2^(2 - 2) = 1, 7.5 saturates to 6; rceil: X = 2, 7.5 / 2 = 3.75 -> 4
    counts = dict.fromkeys(recipes.COUNTER_FIELDS, 0)
    q = recipes.quantize_by_rule(x, rule, side="left", transposed=False, seed=0, counters=counts)
    assert q[0, 0] == 6 and counts["overflows"] == 1
    counts = dict.fromkeys(recipes.COUNTER_FIELDS, 0)
    q = recipes.quantize_by_rule(x, dataclasses.replace(rule, scale_rule="rceil"), side="left", transposed=False,
                                 seed=0, counters=counts)
    assert q[0, 0] == 8 and counts["overflows"] == 0


def test_the_prescaled_path_with_prescale_one_is_quantize_operand_bit_for_bit():
    x = torch.randn(48, 96) * torch.rand(48, 1) * 10
    for scale_rule in ("floor", "rceil"):
        rule = OperandRule("mxfp4", rounding="stochastic", scale_rule=scale_rule)
        for axis, (side, transposed) in ((1, ("left", False)), (0, ("left", True))):
            got, _ = recipes._prescaled_blocks(x, rule, axis, 1234)
            want = ops.quantize_operand(x, "mxfp4", side=side, transposed=transposed, rounding="stochastic",
                                        scale_rule=scale_rule, seed=1234)
            assert torch.equal(got, want)


@pytest.mark.parametrize("make, message", [
    (lambda: OperandRule("e9m9"), "neither a format nor a block format"),
    (lambda: OperandRule("nvfp4", scale_rule="rceil"), "E8M0"),
    (lambda: OperandRule("e4m3", tile=(16, 16)), "tile is for block formats"),
    (lambda: OperandRule("nvfp4", tile=(0, 16)), "pair of ints"),
    (lambda: OperandRule("mxfp4", scaling="tensor"), "scalar formats"),
    (lambda: OperandRule("e4m3", rounding="sideways"), "rounding"),
    (lambda: OperandRule("nvfp4", prescale=0.75), "prescale"),
    (lambda: GemmRule(hadamard=12), "power of two"),
    (lambda: GemmRule(OperandRule("nvfp4"), OperandRule("nvfp4", tile=(16, 16)), hadamard=16), "2-D tiles"),
    (lambda: GemmRule(accumulation={"promote": 1}), "unknown options"),
    (lambda: Recipe("x", weight_grad=GemmRule(b=OperandRule("nvfp4", tile=(16, 16)))), "weight operand"),
    (lambda: recipes.recipe("nvfp5"), "not one of"),
    (lambda: recipes.RECIPES["bf16"].variant(scale_rule="rceil"), "no E8M0"),
])
def test_bad_recipes_are_refused_naming_the_field(make, message):
    with pytest.raises((TypeError, ValueError), match=message):
        make()


def test_variants_change_one_ingredient():
    base = recipes.RECIPES["nvfp4"]
    assert base.variant(rht=False).weight_grad.hadamard == 0
    assert base.variant(sr=False).input_grad.a.rounding == "nearest_even"
    assert base.variant(rht=False, sr=False).forward == base.forward
    assert recipes.RECIPES["mxfp8"].variant(scale_rule="rceil").forward == recipes.RECIPES["mxfp8_rceil"].forward
    assert recipes.RECIPES["bf16"].variant(rht=True).weight_grad.hadamard == 16


def blobs(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(4, 1, 6, 6, generator=torch.Generator().manual_seed(100)) * 1.5
    y = torch.randint(0, 4, (n,), generator=g)
    return centers[y] + torch.randn(n, 1, 6, 6, generator=g), y


@pytest.mark.parametrize("name", list(recipes.RECIPES))
def test_a_short_run_with_each_builtin_recipe_learns(name):
    torch.manual_seed(0)
    model = small_model()
    layers.convert(model, name, seed=0, keep_first_last=False)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x, y = blobs(512, 1)
    for step in range(40):
        i = slice((step % 8) * 64, (step % 8 + 1) * 64)
        loss = F.cross_entropy(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    xt, yt = blobs(256, 2)
    model.eval()
    with torch.no_grad():
        accuracy = (model(xt).argmax(1) == yt).float().mean().item()
    assert accuracy > 0.9, accuracy


TRAIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch", "train.py"))


def test_train_py_with_a_recipe_writes_per_role_counts_and_refuses_assignment_flags(tmp_path):
    out = tmp_path / "out.csv"
    cmd = [sys.executable, TRAIN, "--model", "mlp", "--width", "0.25", "--recipe", "nvfp4", "--rht", "off",
           "--train-limit", "128", "--test-limit", "64", "--threads", "1", "--csv", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "weight_grad overflows" in r.stdout and "RHT" not in r.stdout
    row = list(csv.DictReader(out.open()))[0]
    assert row["recipe"] == "nvfp4_no_rht" and int(row["steps"]) == 2
    assert 0 < int(row["operand_bytes"]) < 0.2 * int(row["operand_fp32_bytes"])
    assert int(row["forward_blocks"]) > 0 and row["git_commit"] and row["torch_version"] == torch.__version__
    bad = subprocess.run(cmd[:-2] + ["--assignment", "uniform"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "--recipe replaces it" in bad.stderr
