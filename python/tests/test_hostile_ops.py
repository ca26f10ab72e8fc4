"""Hostile but plausible calls into the rounding, code and format functions: each gives the right
result or a TypeError/ValueError naming the argument, raised at the call, with every input as it was."""

import numpy as np
import pytest
import torch

import minifloat as mf


def test_big_endian_integer_codes_decode_by_their_values_not_their_bytes():
    codes = np.array([0x3F80, 0xC000], ">u2")
    assert mf.decode(codes, "bf16").tolist() == [1.0, -2.0]
    assert mf.decode(np.array([0x3F800000], ">i4"), "fp32").tolist() == [1.0]
    assert np.array_equal(mf.pack(np.array([1, 2, 3], ">u4"), 2), mf.pack(np.array([1, 2, 3], np.uint32), 2))


def test_big_endian_floats_round_by_their_values_and_in_place_writes_keep_their_byte_order():
    x = np.array([0.1, -3.3, 1e6], ">f4")
    native = x.astype(np.float32)
    assert np.array_equal(mf.quantize(x, "e4m3", overflow="saturate"), mf.quantize(native, "e4m3", overflow="saturate"))
    y = x.copy()
    mf.quantize_(y, "bf16")
    assert y.dtype == np.dtype(">f4")
    assert np.array_equal(y.astype(np.float32), mf.quantize(native, "bf16"))


def test_e8m0_codes_are_8_bits_wide():
    e8m0 = mf.parse_format("e8m0")
    assert e8m0.bit_width == 8
    codes = mf.encode(np.array([1.0, 2.0 ** -127, 2.0 ** 127]), e8m0)
    assert codes.dtype == np.uint8 and codes.tolist() == [127, 0, 254]


def test_rounding_an_inference_tensor_in_place_outside_inference_mode_is_refused_before_any_write():
    with torch.inference_mode():
        t = torch.tensor([0.1, 0.2])
    before = t.clone()
    with pytest.raises(ValueError, match="inference tensor"):
        mf.quantize_(t, "e4m3")
    with pytest.raises(ValueError, match="inference tensor"):
        mf.quantize(torch.tensor([0.3, 0.4]), "e4m3", out=t)
    assert torch.equal(t, before)
    with torch.inference_mode():
        mf.quantize_(t, "e4m3")  # allowed where torch allows it
    assert t.tolist() == [0.1015625, 0.203125]


@pytest.mark.parametrize("call, field", [
    (lambda: mf.format(5, 2 ** 40), "mantissa_bits"),
    (lambda: mf.format(2 ** 40, 2), "exponent_bits"),
    (lambda: mf.format(5, 2, bias=-(2 ** 40)), "bias"),
    (lambda: mf.quantize(torch.ones(2), "e4m3", rounding="stochastic", random_bits=2 ** 40), "random_bits"),
    (lambda: mf.quantize(torch.ones(2), "e4m3", seed=2 ** 64), "seed"),
    (lambda: mf.quantize(torch.ones(2), "e4m3", index=-1), "index"),
])
def test_out_of_range_integers_are_value_errors_naming_the_field(call, field):
    with pytest.raises(ValueError, match=field):
        call()


def test_numpy_integers_are_taken_where_python_ints_are():
    f = mf.format(np.int64(5), np.int32(2), bias=np.int16(15))
    assert f == mf.e5m2
    x = torch.randn(100)
    assert torch.equal(mf.quantize(x, f, rounding="stochastic", seed=np.uint64(7), index=np.int64(3)),
                       mf.quantize(x, f, rounding="stochastic", seed=7, index=3))
    with pytest.raises(TypeError, match="seed"):
        mf.quantize(x, f, seed=7.0)
    with pytest.raises(TypeError, match="exponent_bits"):
        mf.format(np.True_, 2)


def test_the_names_of_NAMED_are_format_names():
    for name, f in mf.NAMED.items():
        assert mf.parse_format(name) == f
        assert mf.parse_format(str(f)) == f
    assert torch.equal(mf.quantize(torch.tensor([1000.0]), "fp_4_3_4", overflow="saturate"), torch.tensor([30.0]))


def test_empty_tensors_of_any_shape_round_to_empty_tensors():
    for shape in [(3, 0), (0,), (0, 5, 2)]:
        x = torch.empty(shape)
        assert mf.quantize(x, "e4m3").shape == shape
        mf.quantize_(x, "e4m3")
        assert mf.quantize(np.empty(shape, np.float32), "bf16").shape == shape
        assert mf.encode(x, "e4m3").shape == shape


def test_in_place_rounding_refuses_overlapping_strides_and_writes_nothing():
    base = torch.arange(10, dtype=torch.float32) / 7
    before = base.clone()
    windows = base.as_strided((4, 3), (2, 1))  # rows overlap: element [0, 2] is element [1, 0]
    with pytest.raises(ValueError, match="share memory"):
        mf.quantize_(windows, "e4m3")
    assert torch.equal(base, before)
    # disjoint strided views are fine
    view = base.as_strided((2, 3), (5, 1))
    mf.quantize_(view, "e4m3")
    assert torch.equal(view, mf.quantize(before.as_strided((2, 3), (5, 1)), "e4m3"))


def test_quantize_ste_checks_the_gradient_arguments_when_called():
    x = torch.randn(4, requires_grad=True)
    with pytest.raises(ValueError, match="grad_rounding"):
        mf.quantize_ste(x, "e4m3", grad_format="e5m2", grad_rounding="sideways")
    with pytest.raises(ValueError):
        mf.quantize_ste(x, "e4m3", grad_format="e5m2", grad_rounding="stochastic", grad_random_bits=40)
    with pytest.raises(TypeError, match="grad_format"):
        mf.quantize_ste(x, "e4m3", grad_format=5)


def test_a_second_derivative_through_a_rounded_gradient_passes_straight_through():
    x = torch.tensor([0.3, -1.7], requires_grad=True)
    y = mf.quantize_ste(x, "e4m3", grad_format="e5m2")
    (g,) = torch.autograd.grad((y ** 3).sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    q = mf.quantize(x.detach(), "e4m3")
    # d/dx of round_e5m2(3 q^2) taken straight through twice: 6 q, its gradient rounded to e5m2 again
    assert torch.equal(g.detach(), mf.quantize(3 * q ** 2, "e5m2"))
    assert torch.equal(gg, mf.quantize(6 * q, "e5m2"))


def test_a_huge_exponent_count_is_a_value_error_before_any_allocation():
    buffer = mf.gecko_compress_exponents(np.ones(16, np.float32))
    with pytest.raises(ValueError, match="cannot hold"):
        mf.gecko_decompress_exponents(buffer, 2 ** 62)


def test_version_is_the_headers_version():
    import re
    import pathlib

    header = pathlib.Path(__file__).parents[2] / "include" / "minifloat" / "version.hpp"
    assert re.search(r'version\[\] = "([^"]+)"', header.read_text()).group(1) == mf.__version__


def test_a_zero_dimensional_array_keeps_its_shape_whatever_its_byte_order():
    for x in (np.array(1.5, ">f4"), np.array(1.5, np.float32), np.array(3, ">u2")):
        if x.dtype.kind == "f":
            assert mf.quantize(x, "e4m3").shape == ()
            assert mf.encode(x, "e4m3").shape == ()
        else:
            assert mf.decode(x, "e4m3").shape == ()


def test_an_out_of_range_extra_bits_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="extra_bits"):
        mf.optim.SplitStorage("bf16", extra_bits=2 ** 40)
    with pytest.raises(TypeError, match="extra_bits"):
        mf.optim.SplitStorage("bf16", extra_bits=8.0)
