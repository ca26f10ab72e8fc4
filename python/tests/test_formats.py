"""Formats: construction, names, immutability, hashing, pickling, repr and errors."""

import pickle

import pytest

import minifloat as mf


def test_ieee_default_bias_and_named_formats_match_the_headers():
    assert mf.format(5, 2) == mf.e5m2
    assert mf.format(5, 10) == mf.binary16
    assert mf.format(8, 7) == mf.bfloat16
    assert mf.format(4, 3, bias=7, specials="nan_only") == mf.e4m3
    assert mf.format(4, 3, bias=11, specials="all_finite") == mf.fp_4_3_4
    assert mf.e4m3.max_finite == 448.0
    assert mf.e5m2.max_finite == 57344.0
    assert mf.binary16.min_subnormal == 2.0 ** -24
    assert mf.bfloat16.bit_width == 16


@pytest.mark.parametrize("name, fmt", [("fp32", mf.binary32), ("binary16", mf.binary16), ("half", mf.binary16),
                                       ("bf16", mf.bfloat16), ("e4m3", mf.e4m3), ("e5m2", mf.e5m2),
                                       ("fp(4,3,4)", mf.fp_4_3_4), ("fp(6,9,0)", mf.fp_6_9_0),
                                       ("fp(5,2,0)", mf.fp_5_2_0)])
def test_parse_format_reads_the_names_of_parse_format(name, fmt):
    assert mf.parse_format(name) == fmt


@pytest.mark.parametrize("fmt", list(mf.NAMED.values()) + [mf.format(3, 1, bias=1, subnormals=False)])
def test_formats_are_hashable_picklable_and_their_repr_round_trips(fmt):
    assert eval(repr(fmt), {"minifloat": mf}) == fmt
    assert pickle.loads(pickle.dumps(fmt)) == fmt
    assert hash(pickle.loads(pickle.dumps(fmt))) == hash(fmt)
    assert len({fmt, eval(repr(fmt), {"minifloat": mf})}) == 1


def test_formats_are_immutable():
    f = mf.format(5, 2)
    with pytest.raises(AttributeError):
        f.mantissa_bits = 3
    with pytest.raises(AttributeError):
        del f.bias
    assert f == mf.e5m2


@pytest.mark.parametrize("args, kwargs, message", [
    ((0, 2), {}, "exponent_bits = 0"),
    ((12, 2), {}, "exponent_bits = 12"),
    ((5, 53), {}, "mantissa_bits = 53"),
    ((5, 0), {}, "mantissa_bits = 0"),
    ((5, 2), {"specials": "ieeee"}, "specials='ieeee'"),
    ((5, 2), {"bias": 5000}, "bias"),
])
def test_invalid_formats_raise_value_error_naming_the_field(args, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        mf.format(*args, **kwargs)


@pytest.mark.parametrize("args, kwargs", [((5.0, 2), {}), ((5, "2"), {}), ((5, 2), {"bias": 1.5}),
                                          ((5, 2), {"subnormals": 1}), ((5, 2), {"specials": 0}), ((True, 2), {})])
def test_wrongly_typed_format_fields_raise_type_error(args, kwargs):
    with pytest.raises(TypeError):
        mf.format(*args, **kwargs)


def test_bad_names_raise_value_error_and_non_strings_type_error():
    with pytest.raises(ValueError, match="fp8"):
        mf.parse_format("fp8")
    with pytest.raises(ValueError):
        mf.parse_format("fp(4,3)")
    with pytest.raises(TypeError):
        mf.parse_format(16)
