"""minifloat.blocks under hostile input: each bad argument is a TypeError/ValueError naming it,
raised before anything is written (inputs and outputs unchanged), or the documented result."""

import numpy as np
import pytest
import torch

import minifloat
from minifloat import blocks

WHO_Q = "minifloat.blocks.quantize_blocks"
WHO_E = "minifloat.blocks.encode_blocks"
WHO_D = "minifloat.blocks.decode_blocks"


def data(shape=(4, 64), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def unchanged(*arrays):
    """A context that checks the arrays' bytes are the same afterwards."""
    class Check:
        def __enter__(self):
            self.before = [np.array(a.numpy() if isinstance(a, torch.Tensor) else a, copy=True) for a in arrays]

        def __exit__(self, *exc):
            for a, b in zip(arrays, self.before):
                now = a.numpy() if isinstance(a, torch.Tensor) else a
                np.testing.assert_array_equal(now.view(np.uint8), b.view(np.uint8))
            return False
    return Check()


@pytest.mark.parametrize("axis,error", [(2, ValueError), (-3, ValueError), (1.0, TypeError), (True, TypeError),
                                        ("0", TypeError)])
def test_bad_axes_are_named(axis, error):
    x = data()
    with unchanged(x), pytest.raises(error, match="axis"):
        blocks.quantize_blocks(x, "mxfp4", axis=axis)
    with pytest.raises(error, match="axis"):
        blocks.encode_blocks(x, "mxfp4", axis=axis)


@pytest.mark.parametrize("kwargs,error,name", [
    ({"rounding": "nearest"}, ValueError, "rounding"), ({"rounding": 0}, TypeError, "rounding"),
    ({"scale_rule": "round"}, ValueError, "scale_rule"), ({"overflow": "wrap"}, ValueError, "overflow"),
    ({"seed": -1}, ValueError, "seed"), ({"index": 2 ** 64}, ValueError, "index"), ({"seed": 1.5}, TypeError, "seed"),
    ({"random_bits": 40, "rounding": "stochastic"}, ValueError, "random_bits"),
    ({"tensor_scale": 2.0}, ValueError, "tensor_scale"), ({"stats": 1}, TypeError, "stats"),
])
def test_bad_options_are_named_and_nothing_is_written(kwargs, error, name):
    x = data()
    out = np.full_like(x, 7.0)
    with unchanged(x, out), pytest.raises(error, match=name):
        blocks.quantize_blocks(x, "mxfp4", out=out, **kwargs)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf"), 1e39, 1e-50, "1", torch.ones(2)])
def test_bad_nvfp4_tensor_scales_are_named(scale):
    x = data()
    with unchanged(x), pytest.raises((ValueError, TypeError), match="tensor_scale"):
        blocks.quantize_blocks(x, "nvfp4", tensor_scale=scale)


def test_nvfp4_rejects_an_mx_scale_rule_and_decoding_needs_its_tensor_scale():
    x = data()
    with pytest.raises(ValueError, match="scale_rule"):
        blocks.quantize_blocks(x, "nvfp4", scale_rule=blocks.SCALE_RULES[1])
    codes = blocks.encode_blocks(x, "nvfp4")
    with pytest.raises(ValueError, match="tensor_scale"):
        blocks.decode_blocks(codes[:2], "nvfp4")


@pytest.mark.parametrize("fmt,error", [("mxfp5", ValueError), (minifloat.e4m3, TypeError), (None, TypeError)])
def test_bad_block_formats_are_named(fmt, error):
    with pytest.raises(error, match="fmt"):
        blocks.quantize_blocks(data(), fmt)


@pytest.mark.parametrize("args,error,name", [
    ((minifloat.binary16, 32), ValueError, "element"), ((minifloat.e4m3, 0), ValueError, "block_size"),
    ((minifloat.e4m3, 2000), ValueError, "block_size"), ((minifloat.e4m3, 2 ** 70), ValueError, "block_size"),
    ((minifloat.e4m3, 32.0), TypeError, "block_size"), ((minifloat.e4m3, 32, "e9m0"), ValueError, "scaling"),
    ((minifloat.e4m3, 16, "e4m3_times_tensor"), ValueError, "NaN"),
])
def test_bad_custom_block_formats_are_named(args, error, name):
    with pytest.raises(error, match=name):
        blocks.block_format(*args)


@pytest.mark.parametrize("x", [np.zeros((2, 32), np.float64), np.zeros((2, 32), np.int32),
                               torch.zeros(2, 32, dtype=torch.bfloat16), torch.zeros(2, 32, dtype=torch.float16),
                               [1.0, 2.0]])
def test_wrong_input_types_are_type_errors(x):
    with pytest.raises(TypeError, match="x"):
        blocks.quantize_blocks(x, "mxfp4")
    with pytest.raises(TypeError, match="x"):
        blocks.encode_blocks(x, "mxfp4")


def test_meta_tensors_are_refused_by_name():
    with pytest.raises(TypeError, match="meta"):
        blocks.quantize_blocks(torch.zeros(2, 32, device="meta"), "mxfp4")
    with pytest.raises(TypeError, match="meta"):
        blocks.decode_blocks((torch.zeros(2, 16, dtype=torch.uint8, device="meta"),
                              torch.zeros(2, 1, dtype=torch.uint8)), "mxfp4")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_are_refused_by_name():
    with pytest.raises(TypeError, match="cuda"):
        blocks.quantize_blocks(torch.zeros(2, 32, device="cuda"), "mxfp4")


@pytest.mark.parametrize("out,error,what", [
    (np.zeros((4, 63), np.float32), ValueError, "shape"), (np.zeros((4, 64), np.float64), TypeError, "dtype"),
    (torch.zeros(4, 64), TypeError, "torch"),
])
def test_wrong_outputs_are_named_and_untouched(out, error, what):
    x = data()
    with unchanged(x, out), pytest.raises(error, match=what):
        blocks.quantize_blocks(x, "mxfp4", out=out)


def test_read_only_and_self_overlapping_outputs_are_refused():
    x = data()
    ro = np.zeros_like(x)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        blocks.quantize_blocks(x, "mxfp4", out=ro)
    expanded = torch.zeros(1, 64).expand(4, 64)
    with pytest.raises(ValueError, match="share memory"):
        blocks.quantize_blocks(torch.from_numpy(x), "mxfp4", out=expanded)
    grad = torch.zeros(4, 64, requires_grad=True)
    with pytest.raises(ValueError, match="requires grad"):
        blocks.quantize_blocks(torch.from_numpy(x), "mxfp4", out=grad)


def test_non_contiguous_and_partly_overlapping_outputs_get_the_right_result():
    x = data((8, 64))
    want = blocks.quantize_blocks(x, "mxfp6_e3m2", axis=0)
    wide = np.zeros((8, 128), np.float32)
    blocks.quantize_blocks(x, "mxfp6_e3m2", axis=0, out=wide[:, ::2])
    np.testing.assert_array_equal(wide[:, ::2], want)
    assert (wide[:, 1::2] == 0).all()
    buffer = np.zeros(8 * 64 + 32, np.float32)  # x and out share part of one buffer
    buffer[:512] = x.reshape(-1)
    source = buffer[:512].reshape(8, 64)
    target = buffer[32:].reshape(8, 64)
    blocks.quantize_blocks(source, "mxfp6_e3m2", axis=0, out=target)
    np.testing.assert_array_equal(target, want)
    t = torch.from_numpy(x)
    neg = torch.zeros(8, 64)._neg_view()
    blocks.quantize_blocks(t, "mxfp6_e3m2", axis=0, out=neg)
    np.testing.assert_array_equal(neg.resolve_neg().numpy(), want)


def test_nan_and_inf_inputs_make_their_blocks_nan_and_leave_others_alone():
    x = data((2, 64))
    x[0, 0] = np.nan
    x[1, 63] = -np.inf
    with unchanged(x):
        got = blocks.quantize_blocks(x, "mxfp8_e4m3")
    assert np.isnan(got[0, :32]).all() and np.isnan(got[1, 32:]).all()
    clean = x.copy()
    clean[0, :32] = 0
    clean[1, 32:] = 0
    np.testing.assert_array_equal(got[0, 32:], blocks.quantize_blocks(clean, "mxfp8_e4m3")[0, 32:])
    codes = blocks.encode_blocks(x, "nvfp4")  # the computed S_t skips the NaN and Inf
    assert np.isfinite(codes.tensor_scale)
    assert codes.scales[0, 0] == 0x7F and np.isnan(blocks.decode_blocks(codes, "nvfp4")[0, :16]).all()


def test_overflow_infinity_without_infinity_codes_is_refused_when_encoding():
    with pytest.raises(ValueError, match="infinity"):
        blocks.encode_blocks(data(), "mxfp4", overflow="infinity")


def test_truncated_and_over_long_codes_are_named():
    codes = blocks.encode_blocks(data(), "mxfp4")
    with pytest.raises(ValueError, match="elements"):
        blocks.decode_blocks((codes.elements[:, :-1], codes.scales), "mxfp4", shape=(4, 64))
    with pytest.raises(ValueError, match="elements"):
        blocks.decode_blocks((codes.elements.reshape(-1)[:-1], codes.scales), "mxfp4", shape=(4, 64))
    with pytest.raises(ValueError, match="scales"):
        blocks.decode_blocks((codes.elements, codes.scales[:3, :1]), "mxfp4")
    with pytest.raises(ValueError, match="scales"):
        blocks.decode_blocks(codes, "mxfp4", axis=0)  # blocks of the other axis
    with pytest.raises(ValueError, match="elements"):
        blocks.decode_blocks((np.zeros(10, np.uint8), np.zeros(1, np.uint8)), "mxfp8_e4m3", shape=(11,))


def test_element_codes_above_the_element_width_are_named():
    codes = blocks.encode_blocks(data(), "mxfp6_e2m3")
    bad = codes.elements.copy()
    bad[2, 5] = 0x40
    with unchanged(bad), pytest.raises(ValueError, match="flat index 133"):
        blocks.decode_blocks((bad, codes.scales), "mxfp6_e2m3")


def test_corrupted_scale_codes_decode_to_what_they_say():
    codes = blocks.encode_blocks(data(), "mxfp8_e4m3")
    scales = codes.scales.copy()
    scales[0, 0] = 0xFF  # E8M0 NaN
    scales[0, 1] = 0  # 2^-127
    got = blocks.decode_blocks((codes.elements, scales), "mxfp8_e4m3")
    assert np.isnan(got[0, :32]).all()
    assert np.abs(got[0, 32:64]).max() <= 448 * 2.0 ** -127


@pytest.mark.parametrize("elements", [np.zeros((4, 64), np.float32), np.zeros((4, 64), np.uint16),
                                      torch.zeros(4, 64, dtype=torch.int32)])
def test_wrong_code_dtypes_are_type_errors(elements):
    with pytest.raises(TypeError, match="elements"):
        blocks.decode_blocks((elements, np.zeros((4, 2), np.uint8)), "mxfp8_e4m3")


def test_mixed_torch_and_numpy_codes_are_a_type_error():
    codes = blocks.encode_blocks(data(), "mxfp8_e4m3")
    with pytest.raises(TypeError, match="both"):
        blocks.decode_blocks((torch.from_numpy(codes.elements), codes.scales), "mxfp8_e4m3")


def test_codes_that_are_not_a_pair_or_triple_are_a_type_error():
    codes = blocks.encode_blocks(data(), "mxfp8_e4m3")
    with pytest.raises(TypeError, match="codes"):
        blocks.decode_blocks(codes.elements, "mxfp8_e4m3")
    with pytest.raises(TypeError, match="codes"):
        blocks.decode_blocks(tuple(codes) + (1.0,), "mxfp8_e4m3")


def test_bad_shapes_for_decoding_are_named():
    codes = blocks.encode_blocks(data(), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="negative"):
        blocks.decode_blocks(codes, "mxfp8_e4m3", shape=(-4, -64))
    with pytest.raises(TypeError, match="shape"):
        blocks.decode_blocks(codes, "mxfp8_e4m3", shape=5)


def test_requires_grad_input_gives_a_plain_result_and_keeps_the_input():
    x = torch.from_numpy(data()).requires_grad_()
    got = blocks.quantize_blocks(x, "mxfp4")
    assert not got.requires_grad and x.grad is None
