"""Property-based tests (Hypothesis) of the rounding API: for random formats, shapes, strides,
dtypes, byte orders, aliasing, rounding modes, overflow policies, seeds and indices, quantize,
quantize_ and encode/decode give what the C++ core's scalar path gives element by element
(_core.scalar_quantize: rounder::operator(), not the SIMD kernels), and a call that fails leaves
its input as it was."""

import numpy as np
import pytest
import torch

import minifloat as mf
from minifloat import _core
from minifloat._buffers import address

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def formats(draw):
    e = draw(st.integers(1, 9))
    m = draw(st.integers(0, 12))
    specials = draw(st.sampled_from(mf._formats.SPECIALS))
    default_bias = (1 << (e - 1)) - 1
    bias = draw(st.one_of(st.none(), st.integers(default_bias - 8, default_bias + 8)))
    try:
        return mf.format(e, m, bias=bias, subnormals=draw(st.booleans()), specials=specials)
    except ValueError:
        assume(False)


@st.composite
def arrays(draw):
    """A float32/float64 array of up to 3 dimensions with values of every kind, possibly big-endian,
    possibly a strided or transposed view of a larger one."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=0, max_size=3)))
    n = int(np.prod(shape, dtype=np.int64))
    bits = draw(st.lists(st.integers(0, (1 << (8 * np.dtype(dtype).itemsize)) - 1), min_size=n, max_size=n))
    raw = np.array(bits, dtype=np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    scale = draw(st.sampled_from([None, 1.0, 1e-3, 100.0]))
    if scale is not None:  # ordinary magnitudes besides the whole exponent range
        raw = (np.tanh(np.nan_to_num(raw.astype(np.float64), nan=0.5, posinf=3, neginf=-3)) * scale).astype(dtype)
    x = raw.reshape(shape)
    view = draw(st.sampled_from(["plain", "transposed", "strided", "big-endian"]))
    if view == "transposed" and x.ndim >= 2:
        x = np.ascontiguousarray(x.swapaxes(0, -1)).swapaxes(0, -1)
    elif view == "strided" and x.ndim >= 1:
        wide = np.zeros(shape[:-1] + (2 * shape[-1],), dtype)
        wide[..., ::2] = x
        x = wide[..., ::2]
    elif view == "big-endian":
        x = x.astype(x.dtype.newbyteorder(">"))
    return x


def scalar_core(x, fmt, rounding, overflow, seed, index):
    """The C++ scalar path on x's values in row-major order."""
    src = native(x)
    out = np.empty_like(src)
    opts = mf._ops.rounding_options("test", rounding, overflow, seed, index, 0)
    _core.scalar_quantize(address(src), address(out), src.size, src.dtype == np.float64, fmt._key, opts)
    return out


def native(a):
    """a in C order and native byte order, shape kept (ascontiguousarray alone makes 0-d 1-d)."""
    return np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("=")).reshape(a.shape)


def same(a, b):
    a, b = native(a), native(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


ROUNDINGS = st.sampled_from(mf.ROUNDING)
OVERFLOWS = st.sampled_from(mf.OVERFLOW)
SEEDS = st.integers(0, (1 << 64) - 1)
INDICES = st.integers(0, (1 << 64) - 1)


@SETTINGS
@given(x=arrays(), fmt=formats(), rounding=ROUNDINGS, overflow=OVERFLOWS, seed=SEEDS, index=INDICES,
       as_torch=st.booleans())
def test_quantize_equals_the_scalar_core_or_refuses_without_touching_the_input(x, fmt, rounding, overflow, seed,
                                                                                 index, as_torch):
    before = x.copy()
    operand = torch.from_numpy(native(x)) if as_torch else x
    try:
        got = mf.quantize(operand, fmt, rounding=rounding, overflow=overflow, seed=seed, index=index)
    except ValueError:
        problem = _core.conversion_problem(fmt._key, x.dtype == np.float64)
        assert problem, "refused although the format fits the source type"
        assert same(x, before)
        return
    got = got.numpy() if as_torch else got
    assert same(got, scalar_core(x, fmt, rounding, overflow, seed, index))
    assert same(x, before)


@SETTINGS
@given(x=arrays(), fmt=formats(), rounding=ROUNDINGS, overflow=OVERFLOWS, seed=SEEDS)
def test_rounding_in_place_equals_rounding_a_copy(x, fmt, rounding, overflow, seed):
    assume(not _core.conversion_problem(fmt._key, x.dtype == np.float64))
    want = mf.quantize(x, fmt, rounding=rounding, overflow=overflow, seed=seed)
    y = x.copy()
    mf.quantize_(y, fmt, rounding=rounding, overflow=overflow, seed=seed)
    assert y.dtype == x.dtype and same(y, want)
    z = np.empty_like(x)
    mf.quantize(x, fmt, rounding=rounding, overflow=overflow, seed=seed, out=z)
    assert same(z, want)


@SETTINGS
@given(x=arrays(), fmt=formats(), rounding=ROUNDINGS, overflow=OVERFLOWS, seed=SEEDS, index=INDICES)
def test_codes_decode_to_the_rounded_values(x, fmt, rounding, overflow, seed, index):
    assume(not _core.conversion_problem(fmt._key, x.dtype == np.float64))
    before = x.copy()
    rounded = mf.quantize(x, fmt, rounding=rounding, overflow=overflow, seed=seed, index=index)
    try:
        codes = mf.encode(x, fmt, rounding=rounding, overflow=overflow, seed=seed, index=index)
    except ValueError:  # a value without a code: an emulated ±Inf or a NaN of an all_finite format
        assert fmt.specials == "all_finite" and not np.isfinite(rounded).all()
        assert same(x, before)
        return
    back = mf.decode(codes, fmt, dtype=np.float64 if x.dtype == np.float64 else np.float32)
    values = native(rounded)
    assert np.array_equal(back, values, equal_nan=True)
    assert np.array_equal(np.signbit(back[~np.isnan(back)]), np.signbit(values[~np.isnan(values)]))
    assert same(x, before)


@SETTINGS
@given(n=st.integers(1, 300), cut=st.integers(0, 300), fmt=formats(), seed=SEEDS)
def test_stochastic_rounding_of_two_pieces_equals_rounding_the_whole(n, cut, fmt, seed):
    assume(not _core.conversion_problem(fmt._key, False))
    cut = min(cut, n)
    x = np.random.default_rng(seed % 1000).standard_normal(n).astype(np.float32)
    whole = mf.quantize(x, fmt, rounding="stochastic", seed=seed)
    parts = np.concatenate([mf.quantize(x[:cut], fmt, rounding="stochastic", seed=seed),
                            mf.quantize(x[cut:], fmt, rounding="stochastic", seed=seed, index=cut)])
    assert same(whole, parts)
