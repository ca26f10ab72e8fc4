"""Where torch's and ml_dtypes' own low-precision dtypes are minifloat formats.

torch.float8_e4m3fn is e4m3, ml_dtypes.float6_e2m3fn is e2m3, and so on: the same values with the
same bit layout, so data held in those dtypes goes in and out of minifloat as codes, without a
copy (docs/python.md, "Interoperability"). Only the layout is shared: how each library rounds into
its dtype is its own, and the test suite records where that differs from minifloat's modes.

ml_dtypes is optional: its types are recognised when it is installed and never imported otherwise.
"""

import numpy as np
import torch

from ._formats import Format, as_format, parse_format

# name of the format (parse_format) -> torch dtype attribute; absent attributes (older torch
# releases) are skipped.
_TORCH_NAMES = {
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
    "e8m0": "float8_e8m0fnu",
    "bfloat16": "bfloat16",
    "binary16": "float16",
    "binary32": "float32",
    "binary64": "float64",
}

# name of the format -> ml_dtypes type attribute. float6 and float4 values are one per byte there,
# in the byte's low bits.
_ML_DTYPES_NAMES = {
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
    "fnuz(4,3,bias=11)": "float8_e4m3b11fnuz",
    "ieee(4,3,bias=7)": "float8_e4m3",
    "ieee(3,4,bias=3)": "float8_e3m4",
    "e8m0": "float8_e8m0fnu",
    "e2m3": "float6_e2m3fn",
    "e3m2": "float6_e3m2fn",
    "e2m1": "float4_e2m1fn",
    "bfloat16": "bfloat16",
}

#: torch's dtype of two e2m1 codes per byte (first element in the low nibble), when torch has it.
TORCH_FP4_X2 = getattr(torch, "float4_e2m1fn_x2", None)


def _binary64():
    return Format(11, 52)


def _torch_table():
    table = {}
    for name, attr in _TORCH_NAMES.items():
        dtype = getattr(torch, attr, None)
        if dtype is not None:
            table[dtype] = _binary64() if name == "binary64" else parse_format(name)
    return table


def _ml_dtypes():
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes


def _numpy_table():
    table = {np.dtype(np.float16): parse_format("binary16"), np.dtype(np.float32): parse_format("binary32"),
             np.dtype(np.float64): _binary64()}
    ml = _ml_dtypes()
    if ml is not None:
        for name, attr in _ML_DTYPES_NAMES.items():
            t = getattr(ml, attr, None)
            if t is not None:
                table[np.dtype(t)] = parse_format(name)
    return table


_TORCH = _torch_table()
_NUMPY = None  # built on first use, so that importing minifloat never imports ml_dtypes


def _numpy():
    global _NUMPY
    if _NUMPY is None:
        _NUMPY = _numpy_table()
    return _NUMPY


def format_of(dtype):
    """The minifloat format whose values and bit layout a torch or NumPy (ml_dtypes) dtype has,
    or None when it has none (integer dtypes, complex, torch.float4_e2m1fn_x2, which packs two
    e2m1 codes per byte: see `packed_format_of`)."""
    if isinstance(dtype, torch.dtype):
        return _TORCH.get(dtype)
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"minifloat.format_of: {dtype!r} is not a torch or NumPy dtype") from None
    return _numpy().get(d)


def packed_format_of(dtype):
    """(format, codes per byte) for a dtype that packs several codes into a byte: torch's
    float4_e2m1fn_x2 is (e2m1, 2). None for every other dtype."""
    if TORCH_FP4_X2 is not None and dtype == TORCH_FP4_X2:
        return parse_format("e2m1"), 2
    return None


def dtype_of(fmt, library="torch"):
    """The torch dtype (library="torch") or NumPy dtype (library="numpy", ml_dtypes' types where
    installed) that holds fmt's codes as values, or None when that library has none."""
    f = as_format(fmt, "minifloat.dtype_of")
    if library == "torch":
        table = _TORCH
    elif library == "numpy":
        table = _numpy()
    else:
        raise ValueError(f"minifloat.dtype_of: library={library!r} is not 'torch' or 'numpy'")
    for dtype, g in table.items():
        if g == f:
            return dtype
    return None


def is_low_precision(dtype):
    """True for a float dtype minifloat reads as codes (float8, float6, float4, bfloat16, float16
    of torch or ml_dtypes); float32 and float64 are read as values."""
    f = format_of(dtype) if not (TORCH_FP4_X2 is not None and dtype == TORCH_FP4_X2) else parse_format("e2m1")
    return f is not None and f.bit_width <= 16
