"""minifloat.blocks against torchao's CPU emulation of MX and NVFP4 (torchao.prototype.mx_formats).

torchao is the oracle: its to_mx (MXTensor's quantization) for every ScaleCalculationMode and
element type it has (MXFP8 e4m3/e5m2, MXFP6 e2m3/e3m2, MXFP4; it has no MXINT8), and its
nvfp4_quantize (NVFP4Tensor.to_nvfp4's CPU path). Element codes, scale codes and dequantized
values are compared bit for bit on random blocks and on edge blocks. Where torchao's emulation
departs from the rule it implements, the departure is pinned by its own test below (what torchao
gives, what we give and why), and only those blocks are left out of the bit-for-bit comparison:
- scale code 0 (a block whose amax lies below about 2^-127 · the element max): FLOOR/CEIL/EVEN
  divide by 2^-126 (torchao clamps the scale to float's smallest normal for Triton's sake) and
  RCEIL multiplies by 1, while the code stands for 2^-127, which is what we divide by;
- a block holding NaN or Inf: both give scale 0xFF for NaN, but torchao's element codes are the
  block's values divided by +Inf (0, or NaN for a NaN) where ours are all the NaN code; the values
  decode to NaN either way. RCEIL gives an Inf block scale 0xFE and finite elements; ours is NaN;
- NVFP4: torchao multiplies by the reciprocal (1 / S_t) / D where block.hpp divides by D · S_t
  (TransformerEngine's reference recipe), and clamps D to at least E4M3's smallest normal 2^-6
  (torch.finfo(torch.float8_e4m3fn).tiny) where block.hpp keeps subnormal scales (and a D that
  rounds to 0 makes the block zeros).
"""

import math

import numpy as np
import pytest
import torch

import minifloat
from minifloat import blocks

torchao = pytest.importorskip("torchao")
mx_tensor = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
nvfp4_tensor = pytest.importorskip("torchao.prototype.mx_formats.nvfp4_tensor")
from torchao.prototype.mx_formats.config import ScaleCalculationMode  # noqa: E402
from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2  # noqa: E402

ELEMENTS = {  # our block format name -> torchao's element dtype
    "mxfp8-e4m3": torch.float8_e4m3fn,
    "mxfp8-e5m2": torch.float8_e5m2,
    "mxfp6-e2m3": DTYPE_FP6_E2M3,
    "mxfp6-e3m2": DTYPE_FP6_E3M2,
    "mxfp4": torch.float4_e2m1fn_x2,
}

# block.hpp names its scale rules by torchao's ScaleCalculationMode values.
RULES = {mode: mode.value for mode in ScaleCalculationMode if mode.value in blocks.SCALE_RULES}
MODES = [pytest.param(mode, id=mode.value, marks=() if mode in RULES else pytest.mark.skip(
    reason=f"block.hpp has no scale rule matching torchao's {mode.name} yet (rules: {', '.join(blocks.SCALE_RULES)})"))
    for mode in ScaleCalculationMode]


def torchao_mx(x, name, mode):
    """torchao's (scale codes, element codes, dequantized values) of 2-D float32 x, blocks along rows."""
    elem = ELEMENTS[name]
    scale, qdata = mx_tensor.to_mx(torch.from_numpy(x), elem, 32, mode)
    values = mx_tensor.to_dtype(qdata, scale, elem, 32, torch.float32).reshape(x.shape)
    if qdata.dtype != torch.uint8:
        qdata = qdata.view(torch.uint8)
    return scale.view(torch.uint8).numpy(), qdata.numpy(), values.numpy()


def random_blocks(rows, seed):
    """Rows of 64 values; each block of 32 normal values times its own power of two (2^-40..2^40),
    some blocks with values spread over many binades (float-subnormal-free)."""
    g = np.random.default_rng(seed)
    x = g.standard_normal((rows, 64)) * np.exp2(g.integers(-40, 41, (rows, 2, 1))).repeat(32, 2).reshape(rows, 64)
    spread = g.integers(0, 2, (rows, 1)).astype(bool)
    x = np.where(spread, x * np.exp2(g.integers(-12, 13, (rows, 64))), x)
    return x.astype(np.float32)


def edge_blocks(name):
    """Blocks of 32 at the edges of the scale rules and of the element format: amax at, just below
    and just above a power of two and the element max times one; ties of the element format;
    zeros; tiny and huge magnitudes. One block per row; the rest of each row random and small."""
    element = blocks.as_block_format(name, "test").element
    top = element.max_finite
    rows = []
    for k in (-100, -20, -3, 0, 1, 7, 40, 100):
        p = math.ldexp(1.0, k)
        for amax in (p, np.nextafter(np.float32(p), np.float32(0)), np.nextafter(np.float32(p), np.float32(np.inf)),
                     top * p / 2 ** element.emax, np.nextafter(np.float32(top * p / 2 ** element.emax), np.float32(0)),
                     np.nextafter(np.float32(top * p / 2 ** element.emax), np.float32(np.inf)),
                     (top + element.epsilon * 2 ** element.emax / 2) * p / 2 ** element.emax):
            row = np.linspace(-1, 1, 32, dtype=np.float32) * np.float32(amax) * np.float32(0.75)
            row[5] = amax
            row[9] = -amax
            rows.append(row)
    # values at every tie of the element format between its codes, for a block scale of 1
    codes = np.arange(1 << (element.bit_width - 1), dtype=np.uint32)
    values = minifloat.decode(codes, element).astype(np.float64)
    values = np.sort(values[np.isfinite(values)])
    ties = ((values[1:] + values[:-1]) / 2).astype(np.float32)
    for start in range(0, len(ties), 30):
        row = np.zeros(32, np.float32)
        part = ties[start:start + 30]
        row[:len(part)] = part
        row[30] = -part[0]
        row[31] = top  # scale 1 under every rule
        rows.append(row)
    rows.append(np.zeros(32, np.float32))
    rows.append(-np.zeros(32, np.float32))
    rows.append(np.full(32, 3.0e38, np.float32))
    rows.append(np.linspace(-3.4e38, 3.4e38, 32, dtype=np.float32))
    rows.append(np.linspace(-1e-30, 1e-30, 32, dtype=np.float32))
    return np.stack(rows)


def rceil_log2_rounds_down(x, name):
    """The blocks whose descale amax / max_elem (fp32) lies just above a power of two 2^k, within
    float32's rounding of log2 near k: torchao's eager RCEIL (ceil(log2(descale)) in float32) gives
    k there, where the rule (and the cvt.rp.satfinite.ue8m0 instruction torchao uses on Blackwell)
    gives k + 1, as block.hpp's rceil does."""
    amax = np.abs(x.reshape(x.shape[0], -1, 32)).max(axis=2)
    descale = (amax / np.float32(blocks.as_block_format(name, "test").element.max_finite)).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mantissa = descale / np.exp2(np.floor(np.log2(descale)))
    return (mantissa > 1) & (mantissa - 1 < 2.0 ** -14)


def compare_mx(x, name, mode):
    """Asserts our codes and values equal torchao's outside the blocks the module docstring lists;
    returns the number of blocks compared."""
    rule = RULES[mode]
    t_scales, t_elements, t_values = torchao_mx(x, name, mode)
    codes = blocks.encode_blocks(x, name, scale_rule=rule)
    ours = blocks.quantize_blocks(x, name, scale_rule=rule)
    decoded = blocks.decode_blocks(codes, name)
    np.testing.assert_array_equal(decoded.view(np.uint32), ours.view(np.uint32))
    special = ~np.isfinite(x.reshape(x.shape[0], -1, 32)).all(axis=2)
    np.testing.assert_array_equal(codes.scales[special & (t_scales == 255)], 255)
    nan_scale = (codes.scales == 255)
    keep = ~special & (t_scales != 0)  # the blocks compared element by element
    if mode != ScaleCalculationMode.RCEIL:
        np.testing.assert_array_equal(codes.scales, t_scales)
    else:
        log2_rounded = rceil_log2_rounds_down(x, name) & ~special
        np.testing.assert_array_equal(codes.scales[~special & ~log2_rounded], t_scales[~special & ~log2_rounded])
        assert set((codes.scales[log2_rounded].astype(int) - t_scales[log2_rounded]).tolist()) <= {0, 1}
        keep &= ~log2_rounded
    np.testing.assert_array_equal(ours.reshape(keep.shape + (32,))[keep].view(np.uint32),
                                  t_values.reshape(keep.shape + (32,))[keep].view(np.uint32))
    if blocks.as_block_format(name, "test").packed:
        ours_e = codes.elements.reshape(keep.shape + (16,))[keep]
        theirs_e = t_elements.reshape(keep.shape + (16,))[keep]
    else:
        ours_e = codes.elements.reshape(keep.shape + (32,))[keep]
        theirs_e = t_elements.reshape(keep.shape + (32,))[keep]
    np.testing.assert_array_equal(ours_e, theirs_e)
    assert np.isnan(ours.reshape(keep.shape + (32,))[nan_scale]).all()
    return int(keep.sum())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(ELEMENTS))
def test_mx_codes_and_values_equal_torchaos_on_random_blocks(name, mode):
    assert compare_mx(random_blocks(256, seed=sum(name.encode())), name, mode) >= 500  # of 512 blocks


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(ELEMENTS))
def test_mx_codes_and_values_equal_torchaos_on_edge_blocks(name, mode):
    x = edge_blocks(name)
    g = np.random.default_rng(1)
    x = np.concatenate([x, (g.standard_normal(x.shape) * 1e-3).astype(np.float32)], axis=1)  # rows of 2 blocks
    assert compare_mx(x, name, mode) >= x.shape[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(ELEMENTS))
def test_nan_and_inf_blocks_decode_to_nan_in_both(name, mode):
    x = random_blocks(3, seed=2)
    x[0, 3] = np.nan
    x[1, 40] = np.inf
    x[2, 0] = -np.inf
    t_scales, _, t_values = torchao_mx(x, name, mode)
    ours = blocks.quantize_blocks(x, name, scale_rule=RULES[mode])
    codes = blocks.encode_blocks(x, name, scale_rule=RULES[mode])
    nan_blocks = [(0, 0), (1, 1), (2, 0)]
    for r, b in nan_blocks:
        assert codes.scales[r, b] == 255
        assert np.isnan(ours[r, 32 * b:32 * b + 32]).all()
    assert t_scales[0, 0] == 255 and np.isnan(t_values[0, :32]).all()
    # torchao gives an Inf block a finite scale: RCEIL 0xFE; FLOOR/CEIL/EVEN 127 + 128 - emax_elem
    # (the exponent of Inf's bits less emax, clamped only after); its values are then not all NaN
    emax = blocks.as_block_format(name, "test").element.emax
    assert t_scales[1, 1] == (254 if mode == ScaleCalculationMode.RCEIL else 255 - emax)
    assert not np.isnan(t_values[1, 32:]).all()


def test_rceil_is_exact_where_torchaos_eager_log2_rounds_down():
    # amax = 448 (1 + 2^-23) 2^-100 in e4m3: the smallest power of two X with amax / X <= 448 is
    # 2^-99 (code 28); torchao's eager ceil(log2(amax / 448)) rounds log2 to -100 (code 27), and
    # the value 448 (1 + 2^-23) then saturates.
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = np.float32(448 * (1 + 2.0 ** -23) * 2.0 ** -100)
    t_scales, _, _ = torchao_mx(x, "mxfp8-e4m3", ScaleCalculationMode.RCEIL)
    codes, st = blocks.encode_blocks(x, "mxfp8-e4m3", scale_rule="rceil", stats=True)
    assert codes.scales[0, 0] == 127 - 99 and t_scales[0, 0] == 127 - 100
    assert st.elements.overflows == 0
    assert rceil_log2_rounds_down(x, "mxfp8-e4m3")[0, 0]


@pytest.mark.parametrize("mode", MODES)
def test_scale_code_zero_blocks_differ_from_torchao_by_its_clamped_divisor(mode):
    # amax 2^-130 in e4m3: X = 2^-138 clamps to 2^-127 (code 0). We divide by 2^-127, as the code
    # says; torchao's FLOOR/CEIL/EVEN divide by 2^-126 and RCEIL by 1, then decode with 2^-127.
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 2.0 ** -130
    x[0, 1] = 2.0 ** -133
    t_scales, _, t_values = torchao_mx(x, "mxfp8-e4m3", mode)
    ours, st = blocks.quantize_blocks(x, "mxfp8-e4m3", scale_rule=RULES[mode], stats=True)
    assert t_scales[0, 0] == 0 and blocks.encode_blocks(x, "mxfp8-e4m3", scale_rule=RULES[mode]).scales[0, 0] == 0
    np.testing.assert_array_equal(ours, x)  # 2^-3 and 2^-6 are e4m3 values: exact
    assert st.scale_clamped == 1
    assert not np.array_equal(t_values, x)


@pytest.mark.parametrize("name", list(ELEMENTS))
def test_torchao_published_fp4_ties_and_fp6_cases_hold(name):
    # torchao test/prototype/mx_formats/test_kernels.py: e2m1 ties to even and e3m2 cases, at scale 1
    cases = {"mxfp4": ([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]),
             "mxfp6-e3m2": ([29.0, 26.0, 0.1251, 0.0314, 0.03], [28.0, 24.0, 0.125, 0.0625, 0.0])}
    if name not in cases:
        pytest.skip("no published element vectors for this format")
    given, want = cases[name]
    element = blocks.as_block_format(name, "test").element
    x = np.zeros(32, np.float32)
    x[:len(given)] = given
    x[31] = element.max_finite  # scale 2^0 under every rule
    got = blocks.quantize_blocks(x, name)
    np.testing.assert_array_equal(got[:len(want)], np.float32(want))


def test_fp4_nibble_order_is_torchaos():
    x = np.float32([[1.0, 6.0, -0.5, 3.0] + [0.0] * 28])
    ours = blocks.encode_blocks(x, "mxfp4").elements
    theirs = mx_tensor.to_mx(torch.from_numpy(x), torch.float4_e2m1fn_x2, 32)[1].view(torch.uint8).numpy()
    np.testing.assert_array_equal(ours, theirs)
    assert ours[0, 0] == 0x2 | 0x7 << 4  # value 0 (1.0) low nibble, value 1 (6.0) high nibble


def test_decode_takes_torchaos_qdata_and_scale_dtypes():
    x = random_blocks(4, seed=3)
    for name in ("mxfp4", "mxfp8-e4m3"):
        mx = mx_tensor.MXTensor.to_mx(torch.from_numpy(x), ELEMENTS[name], 32)
        got = blocks.decode_blocks((mx.qdata, mx.scale), name)
        np.testing.assert_array_equal(got.numpy(), mx.dequantize(torch.float32).numpy())


# NVFP4 ---------------------------------------------------------------------------------------


def torchao_nvfp4(x, tensor_scale):
    scales, qdata = nvfp4_tensor.nvfp4_quantize(torch.from_numpy(x), 16, torch.tensor(tensor_scale, dtype=torch.float32))
    t = nvfp4_tensor.NVFP4Tensor.to_nvfp4(torch.from_numpy(x), per_tensor_scale=torch.tensor(tensor_scale))
    return scales.view(torch.uint8).numpy(), qdata.numpy(), t.dequantize(torch.float32).numpy()


def test_nvfp4_computed_tensor_scale_is_torchaos():
    x = random_blocks(8, seed=4)
    ours = blocks.encode_blocks(x, "nvfp4").tensor_scale
    theirs = nvfp4_tensor.per_tensor_amax_to_scale(torch.from_numpy(x).abs().max()).item()
    assert ours == theirs


def nvfp4_difference(x, tensor_scale):
    """(ours, torchao's) codes and values, and the mask of values where the two recipes' scaled
    values V / (D · S_t) and V · ((1 / S_t) / D) fall on different sides of an e2m1 rounding point."""
    t_scales, t_elements, t_values = torchao_nvfp4(x, tensor_scale)
    codes = blocks.encode_blocks(x, "nvfp4", tensor_scale=tensor_scale)
    ours = blocks.quantize_blocks(x, "nvfp4", tensor_scale=tensor_scale)
    d = minifloat.decode(t_scales.astype(np.uint32), minifloat.e4m3).astype(np.float32)
    s = np.float32(tensor_scale)
    ours_scaled = x.reshape(x.shape[0], -1, 16) / (d * s)[..., None]
    theirs_scaled = x.reshape(x.shape[0], -1, 16) * ((np.float32(1) / s) / d)[..., None]
    e2m1 = lambda v: minifloat.quantize(np.clip(v, -6, 6).astype(np.float32), minifloat.e2m1, overflow="saturate")
    differ = (e2m1(ours_scaled) != e2m1(theirs_scaled)).reshape(x.shape)
    return codes, ours, (t_scales, t_elements, t_values), differ


@pytest.mark.parametrize("tensor_scale", [None, 1.0, 2.0 ** -20, 0.37])
def test_nvfp4_codes_and_values_equal_torchaos_on_random_blocks(tensor_scale):
    x = random_blocks(128, seed=5) * np.float32(1e-8)
    s = float(np.abs(x).max()) / 2688 if tensor_scale is None else tensor_scale
    s = float(np.float32(s))
    codes, ours, (t_scales, t_elements, t_values), differ = nvfp4_difference(x, s)
    wanted = x.reshape(x.shape[0], -1, 16)
    amax = np.abs(wanted).max(axis=2)
    rounded_up = amax / np.float32(6) / np.float32(s) < 2.0 ** -6  # below E4M3's smallest normal: torchao clamps D up
    np.testing.assert_array_equal(codes.scales[~rounded_up], t_scales[~rounded_up])
    eligible = ~np.repeat(rounded_up, 16, axis=1)
    same = ~differ & eligible
    np.testing.assert_array_equal(ours[same].view(np.uint32), t_values[same].view(np.uint32))
    assert eligible.sum() >= 1000 and same.sum() > 0.99 * eligible.sum()  # the recipes part on a few rounding points


def test_nvfp4_edge_blocks_equal_torchaos_where_the_recipes_agree():
    x = edge_blocks("nvfp4")
    x = x[np.isfinite(x).all(axis=1)].reshape(-1, 16)
    s = float(np.float32(np.abs(x).max() / 2688))
    codes, ours, (t_scales, _, t_values), differ = nvfp4_difference(x, s)
    amax = np.abs(x).max(axis=1, keepdims=True)
    small = (amax / np.float32(6) / np.float32(s) < 2.0 ** -6).reshape(-1)
    np.testing.assert_array_equal(codes.scales[~small], t_scales[~small])
    same = ~differ & ~small[:, None]
    np.testing.assert_array_equal(ours[same].view(np.uint32), t_values[same].view(np.uint32))


def test_nvfp4_subnormal_block_scales_are_kept_where_torchao_clamps_them_to_the_smallest_normal():
    x = np.zeros((1, 16), np.float32)
    x[0, 0] = 6 * 2.0 ** -9  # D = amax / 6 / S_t = 2^-9, E4M3's smallest subnormal (code 1)
    x[0, 1] = 2.0 ** -10  # 0.5 · D
    t_scales, _, t_values = torchao_nvfp4(x, 1.0)
    codes = blocks.encode_blocks(x, "nvfp4", tensor_scale=1.0)
    assert codes.scales[0, 0] == 1 and t_scales[0, 0] == 8
    np.testing.assert_array_equal(blocks.quantize_blocks(x, "nvfp4", tensor_scale=1.0), x)  # 6 and 0.5 times 2^-9
    # torchao: 6 · 2^-9 / 2^-6 = 0.75 ties to 1 (even), 2^-10 / 2^-6 = 1/16 rounds to 0
    assert t_values[0, 0] == 2.0 ** -6 and t_values[0, 1] == 0


def test_nvfp4_tie_is_decided_by_the_division_where_torchao_multiplies_by_a_reciprocal():
    # D = e4m3(1.5 / 6 / 1) = 0.25; 0.75 * 0.25 / 0.25 is exactly the tie 0.75 -> 1.0 (even code 0x2);
    # torchao's 0.1875 * (1 / 0.25) is the same here; with D = 0.3125 (5/16) the reciprocal is inexact.
    d = np.float32(0.3125)
    v = np.float32(0.75) * d  # exactly representable: 0.234375
    x = np.zeros((1, 16), np.float32)
    x[0, 0] = v
    x[0, 1] = d * 6  # amax: D = 0.3125 with S_t = 1
    codes, ours, (t_scales, _, t_values), differ = nvfp4_difference(x, 1.0)
    assert codes.scales[0, 0] == t_scales[0, 0]
    assert ours[0, 0] == np.float32(1.0) * d  # the tie at 0.75 rounds to even: 1.0
    assert differ[0, 0] == (t_values[0, 0] != ours[0, 0])
