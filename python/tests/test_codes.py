"""encode / decode, pack / unpack and the Gecko codecs: round trips bit for bit, the code
dtypes, and the oracle of torch's own bit views."""

import numpy as np
import pytest
import torch

import minifloat as mf
from conftest import edge_values, random_values


def finite_for(fmt, x):
    """x without the values that have no code in an all_finite format (NaN, Inf)."""
    return x[np.isfinite(x)] if fmt.specials == "all_finite" else x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(mf.NAMED))
def test_decode_of_encode_is_quantize_for_every_named_format(name, dtype):
    fmt = mf.NAMED[name]
    x = finite_for(fmt, np.concatenate([edge_values(dtype), random_values(dtype, 5000, 1)]))
    for rounding in mf.ROUNDING:
        codes = mf.encode(x, fmt, rounding, "saturate", seed=4)
        assert codes.dtype.itemsize * 8 >= fmt.bit_width and codes.dtype.kind == "u"
        values = mf.decode(codes, fmt, dtype=dtype)
        want = mf.quantize(x, fmt, rounding, "saturate", seed=4)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(values), nan)
        assert np.array_equal(values[~nan].view(np.uint32 if dtype == np.float32 else np.uint64),
                              want[~nan].view(np.uint32 if dtype == np.float32 else np.uint64))
        assert np.array_equal(mf.encode(values[~nan], fmt), codes[~nan])  # decoded values encode to their codes


def test_torch_codes_are_the_bit_pattern_in_uint8_int16_int32():
    x = torch.randn(1000)
    assert mf.encode(x, mf.e4m3).dtype == torch.uint8
    assert mf.encode(x, mf.bfloat16).dtype == torch.int16
    assert mf.encode(x, mf.format(8, 20)).dtype == torch.int32
    assert mf.encode(x.double(), mf.format(11, 40)).dtype == torch.int64
    assert torch.equal(mf.encode(x, mf.binary32).view(torch.float32), x)


def test_decode_takes_any_integer_dtype_and_ignores_bits_above_the_width():
    codes = torch.tensor([0x3c, 0x13c, -0xc4], dtype=torch.int32)  # 0x13c: bit 8 set; -0xc4 = ...ff3c
    assert mf.decode(codes, mf.e4m3).tolist() == [1.5, 1.5, 1.5]
    assert mf.decode(np.array([0xbc], dtype=np.uint8), mf.e4m3, dtype=np.float64).tolist() == [-1.5]
    assert mf.decode(torch.tensor([0xbc], dtype=torch.uint8), "e4m3", dtype=torch.float64).dtype == torch.float64


def test_encode_refuses_values_without_a_code(restore_threads):
    with pytest.raises(ValueError, match="flat index 2"):
        mf.encode(torch.tensor([1.0, 2.0, float("inf")]), mf.fp_4_3_4)
    x = torch.ones(300000)
    x[290000] = float("nan")
    x[250000] = float("inf")
    torch.set_num_threads(3)  # the two values lie in different ranges: the first one is named
    with pytest.raises(ValueError, match="flat index 250000 "):
        mf.encode(x, mf.fp_4_3_4)


@pytest.mark.parametrize("bits", range(1, 33))
def test_pack_unpack_round_trips_every_field_width(bits):
    rng = np.random.default_rng(bits)
    for n in (0, 1, 31, 32, 33, 1000, 4097):
        values = rng.integers(0, 1 << bits, size=n, dtype=np.uint64).astype(np.uint32)
        packed = mf.pack(values, bits)
        assert packed.dtype == np.uint8 and packed.size == 4 * ((n * bits + 31) // 32)
        assert np.array_equal(mf.unpack(packed, bits, n), values)
        t = mf.pack(torch.from_numpy(values.astype(np.int64)), bits)
        assert isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), packed)
        assert np.array_equal(mf.unpack(t, bits, n).numpy().astype(np.uint64), values.astype(np.uint64))


def test_pack_layout_is_little_endian_fields_from_bit_zero():
    packed = mf.pack(np.array([1, 2, 3, 4], dtype=np.uint8), 3)  # 001 010 011 100 -> 0b100_011_010_001
    assert packed.tolist() == [0b11010001, 0b1000, 0, 0]
    codes = mf.encode(torch.tensor([1.0, -2.0]), mf.bfloat16)  # int16 codes: packed as their 16-bit patterns
    assert mf.unpack(mf.pack(codes, 16), 16, 2).tolist() == [0x3f80, 0xc000]


@pytest.mark.parametrize("variant", mf.GECKO_VARIANTS)
def test_gecko_exponent_codec_round_trips_the_exponent_fields(variant):
    x = np.concatenate([edge_values(np.float32), random_values(np.float32, 10001, 5),
                        np.zeros(100, np.float32), np.maximum(random_values(np.float32, 999, 6), 0)])
    buffer = mf.gecko_compress_exponents(x, variant)
    assert buffer.dtype == np.uint8 and buffer.size == mf.gecko_size(x, variant)[1]
    exponents = mf.gecko_decompress_exponents(buffer, x.size, variant)
    assert np.array_equal(exponents, ((x.view(np.uint32) >> 23) & 0xff).astype(np.uint8))
    t = mf.gecko_compress_exponents(torch.from_numpy(x), variant)
    assert isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), buffer)


@pytest.mark.parametrize("variant", mf.GECKO_VARIANTS)
def test_gecko_tensor_codec_is_lossless_at_23_bits_and_truncates_below(variant):
    x = torch.from_numpy(np.concatenate([edge_values(np.float32), random_values(np.float32, 5000, 8)])).reshape(-1, 2)
    buffer = mf.gecko_compress(x, variant=variant)
    assert torch.equal(mf.gecko_decompress(buffer, x.shape).view(torch.int32), x.view(torch.int32))
    finite = x[x.isfinite()]
    cut = mf.gecko_decompress(mf.gecko_compress(finite, mantissa_bits=7, variant=variant))
    assert torch.equal(cut, mf.quantize(finite, mf.format(8, 7), "toward_zero"))
    rounded = mf.gecko_decompress(mf.gecko_compress(finite, 7, variant, rounding="nearest_even"))
    assert torch.equal(rounded, mf.quantize(finite, mf.bfloat16))


def test_gecko_decoders_reject_damaged_buffers_with_value_error():
    x = torch.randn(100)
    buffer = mf.gecko_compress(x)
    with pytest.raises(ValueError, match="checksum"):  # the trailer no longer matches
        mf.gecko_decompress(buffer[:-3])
    with pytest.raises(ValueError, match="truncated"):
        mf.gecko_decompress(mf.gecko_compress(x, checksum=False)[:-3])
    with pytest.raises(ValueError, match="magic"):
        mf.gecko_decompress(torch.zeros(40, dtype=torch.uint8))
    exps = mf.gecko_compress_exponents(x)
    with pytest.raises(ValueError, match="gecko"):
        mf.gecko_decompress_exponents(exps, 200)
    with pytest.raises(ValueError, match="shape"):
        mf.gecko_decompress(buffer, (3, 3))


def test_gecko_tensor_checksum_catches_every_single_bit_flip():
    x = torch.randn(37) * torch.tensor(2.0) ** torch.randint(-20, 20, (37,))
    buffer = mf.gecko_compress(x)
    assert torch.equal(mf.gecko_decompress(buffer).view(torch.int32), x.view(torch.int32))
    for bit in range(buffer.numel() * 8):
        damaged = buffer.clone()
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(ValueError):
            mf.gecko_decompress(damaged)
    unchecked = mf.gecko_compress(x, checksum=False)
    assert unchecked.numel() == buffer.numel() - 4
    assert torch.equal(mf.gecko_decompress(unchecked).view(torch.int32), x.view(torch.int32))


@pytest.mark.parametrize("rounding", mf.ROUNDING)
def test_e8m0_from_float32_gives_the_float64_paths_bits(rounding):
    # E8M0's smallest value 2^-127 is a float subnormal: float32 data rounds through the core's
    # double path, so quantize, encode and decode must agree with float64 data bit for bit.
    fmt = mf.parse_format("e8m0")
    x = np.concatenate([edge_values(np.float32), random_values(np.float32, 4000, 7),
                        np.ldexp(np.float32(1.5), np.arange(-149, 128)).astype(np.float32)])
    with np.errstate(invalid="ignore"):  # the random bit patterns include signalling NaNs
        wide = x.astype(np.float64)
    q32 = mf.quantize(x, fmt, rounding, "saturate", seed=9)
    q64 = mf.quantize(wide, fmt, rounding, "saturate", seed=9)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(q32.astype(np.float64), q64, equal_nan=True)
    codes = mf.encode(x, fmt, rounding, "saturate", seed=9)
    assert np.array_equal(codes, mf.encode(wide, fmt, rounding, "saturate", seed=9))
    assert np.array_equal(mf.decode(codes, fmt), q32, equal_nan=True)
    assert mf.decode(np.array([0, 127, 254, 255], dtype=np.uint8), fmt).tolist()[:3] == [2.0 ** -127, 1.0, 2.0 ** 127]
