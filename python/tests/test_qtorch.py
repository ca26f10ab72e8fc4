"""minifloat.compat.qtorch.float_quantize: QPyTorch's CPU kernel, transcribed here step by step
in NumPy integer arithmetic as the oracle (docs/python.md lists the rules)."""

import math

import numpy as np
import pytest
import torch

from minifloat.compat.qtorch import float_quantize
from conftest import edge_values, random_values


def qpytorch_nearest(x, exp, man):
    """QPyTorch's float_quantize_nearest on float32 x, in uint32 arithmetic (man < 23)."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    mask = np.uint64((1 << (23 - man)) - 1)
    half = np.uint64(1 << (23 - man - 1))

    def round_bits(b):
        return ((b + half) & ~mask) & np.uint64(0xFFFFFFFF)

    min_exp = -((1 << (exp - 1)) - 2)
    max_field = (1 << (exp - 1)) + 127
    target_exp = ((bits >> np.uint64(23)) & np.uint64(0xFF)).astype(np.int64) - 127
    out = np.empty_like(x)
    sub = target_exp < min_exp
    # normal path: round, then clip the exponent field
    q = round_bits(bits[~sub])
    field = (q >> np.uint64(23)) & np.uint64(0xFF)
    max_man = np.uint64(((0xFFFFFFFF << 9 & 0xFFFFFFFF) >> 9) >> (23 - man) << (23 - man))
    clipped = (bits[~sub] & np.uint64(0x80000000)) | np.uint64(max_field << 23) | max_man
    q = np.where((q != 0) & (field > max_field), clipped, q)
    out[~sub] = q.astype(np.uint32).view(np.float32)
    # subnormal path: add ±2^min_exp in float, round the bits, subtract in float
    xs = x[sub]
    shift = np.where(np.signbit(xs), -np.float32(2.0 ** min_exp), np.float32(2.0 ** min_exp)).astype(np.float32)
    v = (xs + shift).astype(np.float32)
    vq = round_bits(v.view(np.uint32).astype(np.uint64)).astype(np.uint32).view(np.float32)
    out[sub] = (vq - shift).astype(np.float32)
    return out


@pytest.mark.parametrize("exp, man", [(5, 2), (4, 3), (5, 10), (8, 7), (8, 0), (3, 1), (6, 9), (2, 5), (8, 22)])
def test_nearest_is_qpytorchs_kernel_bit_for_bit(exp, man):
    x = np.concatenate([edge_values(np.float32), random_values(np.float32, 50000, exp * 31 + man)])
    # NaN payloads: QPyTorch adds half a step to their bits, which for payloads starting with man + 1
    # ones carries through the exponent into the sign (a zero of the other sign comes out); ours treats
    # every NaN alike (docs/python.md). torch's own NaN (0x7fc00000, either sign) is compared here.
    canonical = np.array([0x7FC00000, 0xFFC00000], dtype=np.uint32).view(np.float32)
    x = np.concatenate([x[~np.isnan(x)], canonical if exp < 8 else []]).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        want = qpytorch_nearest(x, exp, man)
    got = float_quantize(torch.from_numpy(x), exp, man, rounding="nearest").numpy()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_nearest_examples_from_the_docs():
    x = torch.tensor([1.125, 1e10, float("nan"), -2.0 ** -18, -0.0, 2.0 ** -17 - 2.0 ** -40])
    assert float_quantize(x, 5, 2, "nearest").tolist() == [1.25, 114688.0, 114688.0, 0.0, 0.0, 2.0 ** -16]
    assert not float_quantize(x, 5, 2, "nearest")[3].signbit()


def test_stochastic_keeps_qpytorchs_distribution_and_is_reproducible():
    n = 100000
    x = torch.full((n,), 1.0 + 0.25 * 0.3)
    q = float_quantize(x, 5, 2, seed=3)  # QPyTorch's default rounding is stochastic
    assert set(q.unique().tolist()) == {1.0, 1.25}
    up = (q == 1.25).sum().item()
    assert abs(up - 0.3 * n) < 5 * math.sqrt(n * 0.21)
    assert torch.equal(float_quantize(x, 5, 2, "stochastic", seed=3), q)
    assert torch.equal(float_quantize(x.reshape(100, 1000).t(), 5, 2, seed=3),
                       float_quantize(x.reshape(100, 1000).t().contiguous(), 5, 2, seed=3))


def test_man_23_keeps_every_float():
    x = torch.from_numpy(random_values(np.float32, 1000, 2))
    x = x[~x.isnan()]
    assert torch.equal(float_quantize(x, 8, 23, "nearest"), x)


def test_errors_name_the_argument():
    x = torch.randn(4)
    with pytest.raises(ValueError, match="exp = 9"):
        float_quantize(x, 9, 2, "nearest")
    with pytest.raises(ValueError, match="man = 24"):
        float_quantize(x, 5, 24)
    with pytest.raises(ValueError, match="rounding='up'"):
        float_quantize(x, 5, 2, "up")
    with pytest.raises(TypeError, match="float64"):
        float_quantize(x.double(), 5, 2)
    with pytest.raises(TypeError):
        float_quantize(x.numpy(), 5, 2)
