"""minifloat.blocks: block formats, fake quantization along any axis, codes and their round trip.

The numbers are block.hpp's; these tests pin down what the Python layer adds: the mapping of an
N-d tensor and an axis onto block.hpp's layouts, the flat element index of stochastic rounding,
the code layouts, statistics and the thread split. The oracle for the values is the extension's
own one-row call on the data moved so the axis is last (block.hpp's row layout, the layout its C++
tests check against a scalar reference), and torchao elsewhere (test_blocks_torchao.py).
"""

import pickle

import numpy as np
import pytest
import torch

import minifloat
from minifloat import blocks

MX_NAMES = [n for n in blocks.NAMED_BLOCKS if n != "nvfp4"]


def data(shape, seed=0, spread=8):
    """Normal values times a random power of two per value (2^-spread..2^spread), float32."""
    g = np.random.default_rng(seed)
    x = g.standard_normal(shape) * np.exp2(g.integers(-spread, spread + 1, shape))
    return x.astype(np.float32)


def along_last(x, fmt, axis, **options):
    """The reference: the axis moved last (a copy), every line quantized by one call, moved back."""
    moved = np.ascontiguousarray(np.moveaxis(x, axis, -1))
    lines = moved.reshape(-1, moved.shape[-1])
    out = np.stack([blocks.quantize_blocks(line, fmt, **options) for line in lines]) if lines.shape[0] else lines
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def test_named_block_formats_are_block_hpps_with_their_parameters():
    assert list(blocks.NAMED_BLOCKS) == ["mxfp8-e4m3", "mxfp8-e5m2", "mxfp6-e3m2", "mxfp6-e2m3", "mxfp4", "mxint8",
                                         "nvfp4"]
    assert blocks.mxfp4.element == minifloat.e2m1 and blocks.mxfp4.block_size == 32
    assert blocks.mxfp4.scaling == "e8m0" and blocks.mxfp4.bits_per_value == 4.25
    assert blocks.nvfp4.block_size == 16 and blocks.nvfp4.scaling == "e4m3_times_tensor"
    assert blocks.mxint8.integer_elements and blocks.mxint8.element == minifloat.int8_mx
    assert blocks.mxfp8_e5m2.element == minifloat.e5m2 and blocks.mxfp6_e3m2.element == minifloat.e3m2
    assert str(blocks.mxfp6_e2m3) == "mxfp6-e2m3"


def test_block_format_is_an_immutable_hashable_picklable_value():
    custom = blocks.block_format(minifloat.e4m3, 16)
    assert custom == blocks.block_format("e4m3", block_size=16) and hash(custom) == hash(blocks.block_format("e4m3", 16))
    assert custom != blocks.mxfp8_e4m3 and blocks.block_format(minifloat.e4m3) == blocks.mxfp8_e4m3
    assert pickle.loads(pickle.dumps(custom)) == custom
    assert eval(repr(custom), {"minifloat": minifloat}) == custom
    assert str(custom).startswith("blocks(")
    with pytest.raises(AttributeError):
        custom.block_size = 32
    assert blocks.block_format(minifloat.int8_mx) == blocks.mxint8  # integer codes by default for int8_mx


def test_as_block_format_takes_names_with_dashes_or_underscores():
    assert blocks.as_block_format("mxfp8_e4m3", "t") is blocks.mxfp8_e4m3
    assert blocks.as_block_format("mxfp8-e4m3", "t") is blocks.mxfp8_e4m3


@pytest.mark.parametrize("name", list(blocks.NAMED_BLOCKS))
@pytest.mark.parametrize("shape,axis", [((7, 45), -1), ((7, 45), 0), ((3, 40, 5), 1), ((2, 3, 33), 2),
                                        ((37, 2, 3), 0), ((100,), 0), ((4, 1, 6), 1)])
def test_every_axis_quantizes_like_the_axis_moved_last(name, shape, axis):
    x = data(shape, seed=len(shape) * 10 + axis)
    t = 0.0078125 if name == "nvfp4" else None  # NVFP4's computed S_t depends on the whole tensor
    got = blocks.quantize_blocks(x, name, axis=axis, tensor_scale=t)
    want = along_last(x, name, axis, tensor_scale=t)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_stochastic_rounding_draws_each_value_from_its_row_major_flat_index():
    # Along axis 0 the blocks are columns, yet value i of the flattened tensor draws (seed, index + i):
    # a 1-column tensor gives the same bits as the same values in one row.
    x = data((96, 1), seed=3)
    column = blocks.quantize_blocks(x, "mxfp4", axis=0, rounding="stochastic", seed=11, index=5)
    row = blocks.quantize_blocks(x.reshape(1, 96), "mxfp4", rounding="stochastic", seed=11, index=5)
    np.testing.assert_array_equal(column.reshape(-1), row.reshape(-1))
    # a part of a tensor quantized alone, with its first flat index, gives the same bits
    y = data((8, 64), seed=4)
    whole = blocks.quantize_blocks(y, "mxfp6_e2m3", rounding="stochastic", seed=2)
    part = blocks.quantize_blocks(y[5:], "mxfp6_e2m3", rounding="stochastic", seed=2, index=5 * 64)
    np.testing.assert_array_equal(whole[5:], part)
    other_seed = blocks.quantize_blocks(y, "mxfp6_e2m3", rounding="stochastic", seed=3)
    assert not np.array_equal(whole, other_seed)


@pytest.mark.parametrize("rounding", minifloat.ROUNDING)
def test_every_rounding_mode_of_the_core_is_taken(rounding):
    x = data((4, 64), seed=5)
    got = blocks.quantize_blocks(x, "mxfp8_e4m3", rounding=rounding, seed=1)
    # the element values are the core's rounding of V / X: check through minifloat.quantize on x / X
    codes = blocks.encode_blocks(x, "mxfp8_e4m3")
    scale = np.exp2(codes.scales.astype(np.float64) - 127).astype(np.float32)
    scaled = x / np.repeat(scale, 32, axis=1)
    elements = minifloat.quantize(scaled, minifloat.e4m3, rounding=rounding, overflow="saturate", seed=1)
    np.testing.assert_array_equal(got, elements * np.repeat(scale, 32, axis=1))


def test_results_do_not_depend_on_the_thread_count():
    x = data((300, 1000), seed=6)  # several pieces of the thread split
    before = torch.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            q, st = blocks.quantize_blocks(x, "mxfp4", axis=0, rounding="stochastic", stats=True)
            c = blocks.encode_blocks(x, "mxfp4", rounding="stochastic")
            results.append((q, st, c.elements, c.scales))
    finally:
        torch.set_num_threads(before)
    for q, st, e, s in results[1:]:
        np.testing.assert_array_equal(q, results[0][0])
        assert st == results[0][1]
        np.testing.assert_array_equal(e, results[0][2])
        np.testing.assert_array_equal(s, results[0][3])


@pytest.mark.parametrize("name", list(blocks.NAMED_BLOCKS))
@pytest.mark.parametrize("shape,axis", [((6, 64), -1), ((6, 64), 0), ((5, 33), -1), ((3, 17, 4), 1), ((7,), 0)])
def test_decoding_the_codes_gives_the_quantized_values(name, shape, axis):
    x = data(shape, seed=7)
    x.reshape(-1)[3] = np.nan if x.size > 40 else x.reshape(-1)[3]
    codes = blocks.encode_blocks(x, name, axis=axis)
    back = blocks.decode_blocks(codes, name, axis=axis, shape=shape)
    want = blocks.quantize_blocks(x, name, axis=axis, tensor_scale=codes.tensor_scale if name == "nvfp4" else None)
    np.testing.assert_array_equal(back.view(np.uint32), want.view(np.uint32))


def test_code_layouts_fp4_two_per_byte_scales_with_the_axis_replaced_by_its_blocks():
    x = data((3, 64, 5), seed=8)
    codes = blocks.encode_blocks(x, "mxfp4", axis=1)
    assert codes.elements.dtype == np.uint8 and codes.elements.shape == (480,)  # an odd last dimension: flat
    assert codes.scales.shape == (3, 2, 5) and codes.tensor_scale == 1.0
    one = blocks.encode_blocks(np.float32([[1.0, -6.0] * 16]), "mxfp4")
    assert one.elements.shape == (1, 16) and one.scales.tolist() == [[127]]
    assert one.elements[0, 0] == 0x2 | 0xF << 4  # value 0 (e2m1 1.0 = 0x2) low nibble, value 1 (-6 = 0xF) high
    assert blocks.encode_blocks(np.ones(5, np.float32), "mxfp4").elements.shape == (3,)  # ceil(n / 2) bytes
    assert blocks.encode_blocks(np.ones((3, 6), np.float32), "mxfp4").elements.shape == (3, 3)


def test_mxint8_codes_are_twos_complement_bytes():
    x = np.float32([[1.0, -1.0, 0.5, -0.015625] + [0.0] * 28])
    codes = blocks.encode_blocks(x, "mxint8")
    assert codes.scales.tolist() == [[127]]
    assert codes.elements[0, :4].view(np.int8).tolist() == [64, -64, 32, -1]


def test_nvfp4_uses_the_given_or_computed_tensor_scale():
    x = data((4, 32), seed=9)
    computed = blocks.encode_blocks(x, "nvfp4")
    assert computed.tensor_scale == pytest.approx(float(np.abs(x).max()) / 2688, rel=1e-6)
    given = blocks.encode_blocks(x, "nvfp4", tensor_scale=0.125)
    assert given.tensor_scale == 0.125
    np.testing.assert_array_equal(blocks.decode_blocks(given, "nvfp4"),
                                  blocks.quantize_blocks(x, "nvfp4", tensor_scale=0.125))
    assert not np.array_equal(computed.scales, given.scales)
    np.testing.assert_array_equal(blocks.quantize_blocks(x, "nvfp4", tensor_scale=torch.tensor(0.125)),
                                  blocks.quantize_blocks(x, "nvfp4", tensor_scale=0.125))


def test_statistics_count_blocks_nan_blocks_clamped_scales_and_saturations():
    x = np.zeros((2, 64), np.float32)
    x[0, :32] = 7.5  # floor rule: amax 7.5 -> X = 1, 7.5 saturates to 6 in e2m1
    x[0, 40] = np.inf
    x[1, :32] = 1e-45  # a float subnormal: scale clamped at 2^-127
    out, st = blocks.quantize_blocks(x, "mxfp4", stats=True)
    assert isinstance(st, blocks.BlockStats) and isinstance(st.elements, minifloat.RoundingStats)
    assert st.blocks == 4 and st.nan_blocks == 1 and st.scale_clamped == 1
    assert st.elements.overflows >= 32 and st.elements.infinities == 1
    assert np.isnan(out[0, 32:]).all() and (out[0, :32] == 6).all()
    _, rceil = blocks.quantize_blocks(x[:1, :32], "mxfp4", scale_rule=blocks.SCALE_RULES[1], stats=True)
    assert rceil.elements.overflows == 0


def test_torch_in_torch_out_numpy_in_numpy_out_and_out_argument():
    x = torch.from_numpy(data((4, 64), seed=10))
    got = blocks.quantize_blocks(x, blocks.mxfp8_e5m2)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    out = torch.empty_like(x)
    assert blocks.quantize_blocks(x, "mxfp8_e5m2", out=out) is out
    assert torch.equal(out, got)
    y = x.clone()
    blocks.quantize_blocks(y, "mxfp8_e5m2", out=y)  # in place
    assert torch.equal(y, got)
    t = x.t()  # a non-contiguous input
    np.testing.assert_array_equal(blocks.quantize_blocks(t, "mxfp4", axis=0).numpy(),
                                  blocks.quantize_blocks(t.contiguous(), "mxfp4", axis=0).numpy())
    codes = blocks.encode_blocks(x, "mxfp4")
    assert isinstance(codes.elements, torch.Tensor) and codes.elements.dtype == torch.uint8
    assert isinstance(blocks.decode_blocks(codes, "mxfp4"), torch.Tensor)


def test_empty_tensors_give_empty_results():
    x = np.zeros((0, 32), np.float32)
    assert blocks.quantize_blocks(x, "mxfp4").shape == (0, 32)
    codes = blocks.encode_blocks(x, "mxfp4")
    assert codes.elements.shape == (0, 16) and codes.scales.shape == (0, 1)
    assert blocks.decode_blocks(codes, "mxfp4").shape == (0, 32)
