"""Shared data for the minifloat Python tests: random and edge-case values for every format."""

import numpy as np
import pytest
import torch

import minifloat as mf


def edge_values(dtype):
    """Zeros, ±Inf, NaN, the source type's extremes and subnormals, and every named format's
    max_finite, overflow threshold, min_normal and min_subnormal with their neighbours and midpoints."""
    info = np.finfo(dtype)
    base = [0.0, -0.0, np.inf, -np.inf, np.nan, float(info.max), float(info.tiny), float(info.smallest_subnormal),
            1.0, 1.5, 0.1, 1 / 3, 65504.0, 65520.0, 448.0, 464.0, 57344.0, 61440.0]
    for f in mf.NAMED.values():
        c = f.constants()
        for key in ("max_finite", "overflow_threshold", "min_normal", "min_subnormal"):
            v = c[key]
            base += [v, v * 1.5, v * 0.5, v * 0.75]
    arr = np.array(base, dtype=np.float64)
    arr = arr[np.isnan(arr) | (np.abs(arr) <= info.max)].astype(dtype)
    with np.errstate(over="ignore"):
        neighbours = np.concatenate([np.nextafter(arr, np.inf, dtype=dtype), np.nextafter(arr, -np.inf, dtype=dtype)])
    values = np.concatenate([arr, neighbours])
    return np.concatenate([values, -values])


def random_values(dtype, n, seed):
    """Values spread over float's whole exponent range, plus normal and uniform data."""
    rng = np.random.default_rng(seed)
    bits = 32 if dtype == np.float32 else 64
    raw = rng.integers(0, 1 << bits, size=n, dtype=np.uint64).astype(np.uint32 if bits == 32 else np.uint64)
    spread = raw.view(dtype)
    normal = rng.standard_normal(n).astype(dtype) * dtype(10.0) ** rng.integers(-8, 8, size=n).astype(dtype)
    return np.concatenate([spread, normal])


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
