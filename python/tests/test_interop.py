"""torch's and ml_dtypes' low-precision dtypes as minifloat formats, checked against those
libraries' own conversions: every code decodes as they decode it, and float32/float64 values
(random, every code's value, every midpoint between neighbours and its float neighbours, the
specials) encode as they convert them wherever their rounding and overflow rule is one of ours.
Where a library's rule is none of ours, the test pins down the difference docs/python.md states."""

import numpy as np
import pytest
import torch

import minifloat as mf

ml_dtypes = pytest.importorskip("ml_dtypes")

# ml_dtypes type -> (our format name, the overflow policy whose results equal ml_dtypes' astype)
ML_DTYPES = {
    "float8_e4m3fn": ("e4m3", "infinity"),        # overflow and ±Inf -> NaN
    "float8_e5m2": ("e5m2", "infinity"),          # -> ±Inf
    "float8_e4m3fnuz": ("e4m3fnuz", "infinity"),  # -> NaN (the -0 code)
    "float8_e5m2fnuz": ("e5m2fnuz", "infinity"),
    "float8_e4m3b11fnuz": ("fnuz(4,3,bias=11)", "infinity"),
    "float8_e4m3": ("ieee(4,3,bias=7)", "infinity"),
    "float8_e3m4": ("ieee(3,4,bias=3)", "infinity"),
    "float6_e2m3fn": ("e2m3", "saturate"),        # no Inf, no NaN: ml_dtypes saturates
    "float6_e3m2fn": ("e3m2", "saturate"),
    "float4_e2m1fn": ("e2m1", "saturate"),
    "bfloat16": ("bfloat16", "infinity"),
}


def codes_of(dtype):
    bits = mf.format_of(dtype).bit_width
    return np.arange(1 << bits, dtype=np.uint16 if bits > 8 else np.uint8)


def conversion_inputs(dtype, source):
    """Random values, every value of the format, every midpoint of neighbours with its two float
    neighbours, beyond-max values and the specials, in `source` (float32 or float64)."""
    fmt = mf.format_of(dtype)
    every = np.unique(mf.decode(codes_of(dtype), fmt, dtype=np.float64))
    every = every[np.isfinite(every)]
    mids = (every[:-1] + every[1:]) / 2
    mids = mids.astype(source)
    with np.errstate(over="ignore"):
        near = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
        big = np.array([fmt.max_finite * 1.5, fmt.max_finite * 4, 1e30, np.finfo(source).max], np.float64)
    rng = np.random.default_rng(7)
    scale = float(fmt.max_finite)
    random = (rng.standard_normal(20000) * scale / 4).astype(source)
    tiny = (rng.standard_normal(4000) * float(fmt.min_positive) * 4).astype(source)
    specials = np.array([0.0, -0.0, np.inf, -np.inf], source)
    out = np.concatenate([every.astype(source), near, big.astype(source), random, tiny, specials])
    return np.concatenate([out, -out])


@pytest.mark.parametrize("name", sorted(ML_DTYPES))
def test_every_code_decodes_as_ml_dtypes_decodes_it(name):
    dtype = np.dtype(getattr(ml_dtypes, name))
    fmt = mf.parse_format(ML_DTYPES[name][0])
    assert mf.format_of(dtype) == fmt and mf.dtype_of(fmt, "numpy") == dtype
    codes = codes_of(dtype)
    typed = codes.view(dtype) if dtype.itemsize == codes.itemsize else codes.astype(np.uint8).view(dtype)
    for target in (np.float32, np.float64):
        if fmt.min_positive < np.finfo(target).smallest_subnormal:
            continue
        ours = mf.decode(typed, dtype=target)            # the dtype's own format, read from the array
        theirs = typed.astype(target)
        assert np.array_equal(ours, theirs, equal_nan=True)
        assert np.array_equal(np.signbit(ours[~np.isnan(ours)]), np.signbit(theirs[~np.isnan(theirs)]))


def assert_same_codes(ours, theirs, x):
    bits = np.uint8 if ours.dtype.itemsize == 1 else np.uint16
    same = ours.view(bits) == theirs.view(bits)
    both_nan = np.isnan(ours.astype(np.float32)) & np.isnan(theirs.astype(np.float32))
    bad = ~(same | both_nan)
    assert not bad.any(), f"first difference at {x[bad][:5]!r}: ours {ours[bad][:5]}, theirs {theirs[bad][:5]}"


@pytest.mark.parametrize("name", sorted(ML_DTYPES))
def test_encoding_float32_equals_ml_dtypes_astype_under_the_matching_overflow_rule(name):
    dtype = np.dtype(getattr(ml_dtypes, name))
    fmt_name, overflow = ML_DTYPES[name]
    fmt = mf.parse_format(fmt_name)
    x = conversion_inputs(dtype, np.float32)
    if overflow == "saturate":   # ml_dtypes saturates ±Inf too; formats without Inf or NaN get no NaN here
        x = x[~np.isnan(x)]
    ours = mf.encode(x, fmt, overflow=overflow, dtype=dtype)
    assert ours.dtype == dtype
    assert_same_codes(ours, x.astype(dtype), x)


@pytest.mark.parametrize("name", sorted(ML_DTYPES))
def test_float64_rounds_once_where_ml_dtypes_rounds_through_float32_first(name):
    # ml_dtypes converts float64 by way of float32, so a float64 value that float32 cannot hold is
    # rounded twice there; minifloat rounds it once. Where float32 holds the value the two agree,
    # and elsewhere ml_dtypes' result is minifloat's rounding of the float32 value.
    dtype = np.dtype(getattr(ml_dtypes, name))
    fmt_name, overflow = ML_DTYPES[name]
    fmt = mf.parse_format(fmt_name)
    x = conversion_inputs(dtype, np.float64)
    x = x[np.abs(x) < np.finfo(np.float32).max]
    if overflow == "saturate":
        x = x[~np.isnan(x)]
    theirs = x.astype(dtype)
    exact = x.astype(np.float32).astype(np.float64) == x
    assert_same_codes(mf.encode(x[exact], fmt, overflow=overflow, dtype=dtype), theirs[exact], x[exact])
    via_float32 = mf.encode(x[~exact].astype(np.float32), fmt, overflow=overflow, dtype=dtype)
    assert_same_codes(via_float32, theirs[~exact], x[~exact])
    once = mf.encode(x[~exact], fmt, overflow=overflow, dtype=dtype)
    if fmt.mantissa_bits < 23:  # the midpoints' neighbours: double rounding goes wrong on some of them
        assert (once.view(np.uint8 if dtype.itemsize == 1 else np.uint16)
                != via_float32.view(np.uint8 if dtype.itemsize == 1 else np.uint16)).any()


@pytest.mark.parametrize("name", ["float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"])
def test_nan_into_a_format_without_nan_is_refused_where_ml_dtypes_returns_a_number(name):
    # The documented difference: ml_dtypes gives some code for NaN; minifloat has none to give.
    dtype = np.dtype(getattr(ml_dtypes, name))
    fmt = mf.format_of(dtype)
    x = np.array([1.0, np.nan], np.float32)
    assert not np.isnan(x.astype(dtype).astype(np.float32)).any()
    with pytest.raises(ValueError, match="flat index 1"):
        mf.encode(x, fmt, overflow="saturate", dtype=dtype)
    assert np.isnan(mf.quantize(x, fmt, overflow="saturate")[1])  # the emulated value stays NaN


def test_e8m0_encodes_normal_float32_values_as_ml_dtypes_does_ties_included():
    # E8M0's significand is 1 or 2, so a tie 1.5 * 2^k goes up to 2^(k+1) (docs/formats.md): both agree.
    dtype = np.dtype(ml_dtypes.float8_e8m0fnu)
    fmt = mf.format_of(dtype)
    assert fmt == mf.parse_format("e8m0")
    powers = np.exp2(np.arange(-126, 127, dtype=np.float64))
    x = np.concatenate([powers, powers * 1.25, powers * 1.5, powers * 1.75])
    x = np.concatenate([x, np.nextafter(x, 0), np.nextafter(x, np.inf)]).astype(np.float32)
    x = x[(x >= np.finfo(np.float32).tiny) & (x < np.float32(2.0 ** 127))]
    assert_same_codes(mf.encode(x, fmt, dtype=dtype), x.astype(dtype), x)
    assert mf.encode(np.array([3.0], np.float32), fmt).tolist() == [129]
    assert np.array([3.0], np.float32).astype(dtype).view(np.uint8).tolist() == [129]


def test_e8m0_below_float_normals_rounds_to_the_nearest_power_where_ml_dtypes_does_not():
    dtype = np.dtype(ml_dtypes.float8_e8m0fnu)
    fmt = mf.format_of(dtype)
    # 1.25 * 2^-127, a float32 subnormal: nearest is 2^-127 (code 0); ml_dtypes gives 2^-126
    tiny = np.array([1.25 * 2.0 ** -127], np.float32)
    assert mf.encode(tiny, fmt).tolist() == [0]
    assert tiny.astype(dtype).view(np.uint8).tolist() == [1]
    # no sign and no zero: both give NaN
    x = np.array([-1.0, 0.0, -0.0], np.float32)
    assert mf.encode(x, fmt).tolist() == [255, 255, 255]
    assert x.astype(dtype).view(np.uint8).tolist() == [255, 255, 255]


def test_bfloat16_and_float16_arrays_round_trip_without_a_copy_of_the_codes():
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    codes = mf.encode(x, "bfloat16", dtype=ml_dtypes.bfloat16)
    assert codes.dtype == ml_dtypes.bfloat16
    assert np.array_equal(codes.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    assert np.array_equal(mf.decode(codes), codes.astype(np.float32))
    half = x.astype(np.float16)
    assert np.array_equal(mf.decode(half), half.astype(np.float32))
    assert np.array_equal(mf.encode(x, "binary16", dtype=np.float16), x.astype(np.float16))


# ---- torch's own dtypes ----------------------------------------------------------------------

# torch dtype -> (format, the overflow policy whose results equal torch's .to(dtype))
TORCH = {
    torch.float8_e4m3fn: ("e4m3", "saturate"),     # torch saturates finite overflow and ±Inf to ±448
    torch.float8_e5m2: ("e5m2", "infinity"),
    torch.float8_e4m3fnuz: ("e4m3fnuz", "infinity"),
    torch.float8_e5m2fnuz: ("e5m2fnuz", "infinity"),
    torch.bfloat16: ("bfloat16", "infinity"),
    torch.float16: ("binary16", "infinity"),
}


def torch_inputs(dtype, source):
    like = {torch.bfloat16: ml_dtypes.bfloat16, torch.float16: np.float16}.get(dtype) or getattr(ml_dtypes, str(dtype)[6:])
    x = torch.from_numpy(conversion_inputs(like, np.float32 if source == torch.float32 else np.float64))
    return torch.cat([x, torch.tensor([float("nan")], dtype=source)])


def assert_same_torch_codes(ours, theirs, x):
    bits = torch.uint8 if ours.dtype.itemsize == 1 else torch.int16
    same = ours.view(bits) == theirs.view(bits)
    both_nan = torch.isnan(ours.float()) & torch.isnan(theirs.float())
    bad = ~(same | both_nan)
    assert not bool(bad.any()), f"first differences at {x[bad][:5].tolist()}"


@pytest.mark.parametrize("dtype", list(TORCH), ids=str)
def test_encoding_float32_equals_torchs_own_cast_under_the_matching_overflow_rule(dtype):
    fmt_name, overflow = TORCH[dtype]
    fmt = mf.parse_format(fmt_name)
    assert mf.format_of(dtype) == fmt and mf.dtype_of(fmt) == dtype
    x = torch_inputs(dtype, torch.float32)
    ours = mf.encode(x, fmt, overflow=overflow, dtype=dtype)
    assert ours.dtype == dtype
    assert_same_torch_codes(ours, x.to(dtype), x)
    # and every code decodes as torch decodes it
    codes = torch.arange(256 if dtype.itemsize == 1 else 65536, dtype=torch.int32).to(
        torch.uint8 if dtype.itemsize == 1 else torch.int16).view(dtype)
    assert torch.equal(torch.nan_to_num(mf.decode(codes), nan=7.0), torch.nan_to_num(codes.float(), nan=7.0))


@pytest.mark.parametrize("dtype", [d for d in TORCH if d.itemsize == 1], ids=str)
def test_float64_rounds_once_where_torchs_float8_cast_rounds_through_float32_first(dtype):
    fmt_name, overflow = TORCH[dtype]
    fmt = mf.parse_format(fmt_name)
    x = torch_inputs(dtype, torch.float64)
    x = x[~(x.abs() >= torch.finfo(torch.float32).max)]
    theirs = x.to(dtype)
    exact = x.float().double() == x
    exact |= torch.isnan(x)
    assert_same_torch_codes(mf.encode(x[exact], fmt, overflow=overflow, dtype=dtype), theirs[exact], x[exact])
    assert_same_torch_codes(mf.encode(x[~exact].float(), fmt, overflow=overflow, dtype=dtype), theirs[~exact],
                            x[~exact])


def test_torch_e8m0_decodes_every_code_as_torch_does():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e8m0fnu)
    ours = mf.decode(codes, dtype=torch.float64)
    assert torch.equal(torch.nan_to_num(ours, nan=-1.0), torch.nan_to_num(codes.double(), nan=-1.0))


def test_float8_tensors_are_read_and_written_without_copying_the_codes():
    x = torch.randn(64, 32)
    codes = mf.encode(x, mf.e4m3, overflow="saturate", dtype=torch.float8_e4m3fn)
    assert torch.equal(codes.view(torch.uint8), x.to(torch.float8_e4m3fn).view(torch.uint8))
    native = mf.encode(x, mf.e5m2, dtype="native")
    assert native.dtype == torch.float8_e5m2
    # decode reads the tensor's own memory (a NumPy view of it), and quantize takes float8 input
    assert torch.equal(mf.decode(codes), codes.float())
    assert torch.equal(mf.quantize(codes, mf.e2m1, overflow="saturate"),
                       mf.quantize(codes.float(), mf.e2m1, overflow="saturate"))


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="this torch release has no float4_e2m1fn_x2")
def test_fp4_x2_packs_two_codes_a_byte_low_nibble_first():
    x = torch.tensor([[0.5, 6.0, -1.0, 3.0]])
    packed = mf.encode(x, mf.e2m1, overflow="saturate", dtype=torch.float4_e2m1fn_x2)
    assert packed.dtype == torch.float4_e2m1fn_x2 and packed.shape == (1, 2)
    codes = mf.encode(x, mf.e2m1, overflow="saturate")
    assert packed.view(torch.uint8).tolist() == [[int(codes[0, 0]) | int(codes[0, 1]) << 4,
                                                  int(codes[0, 2]) | int(codes[0, 3]) << 4]]
    assert torch.equal(mf.decode(packed), x)
    with pytest.raises(ValueError, match="even"):
        mf.encode(torch.ones(3), mf.e2m1, dtype=torch.float4_e2m1fn_x2)


def test_format_of_and_dtype_of_say_none_where_there_is_no_such_dtype():
    assert mf.format_of(torch.int8) is None and mf.format_of(np.int32) is None
    assert mf.dtype_of(mf.fp_4_3_4) is None and mf.dtype_of(mf.fp_4_3_4, "numpy") is None
    with pytest.raises(ValueError, match="library"):
        mf.dtype_of(mf.e4m3, "jax")
    with pytest.raises(ValueError, match="holds codes of"):
        mf.encode(torch.ones(2), mf.e5m2, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="has no dtype"):
        mf.encode(torch.ones(2), mf.fp_4_3_4, dtype="native")
    with pytest.raises(ValueError, match="not of"):
        mf.decode(torch.zeros(2, dtype=torch.float8_e4m3fn), mf.e5m2)
