"""Bad input: a TypeError or ValueError with a clear message, never a crash, input unchanged."""

import numpy as np
import pytest
import torch

import minifloat as mf


def fresh():
    return torch.linspace(-3, 3, 50).reshape(5, 10)


CASES = [
    # (call, exception, message)
    (lambda x: mf.quantize_(x.to(torch.float16), mf.e4m3), TypeError, "float16"),
    (lambda x: mf.quantize(x.to(torch.int32), mf.e4m3), TypeError, "int32"),
    (lambda x: mf.quantize_(x.to(torch.bfloat16), mf.e4m3), TypeError, "bfloat16"),
    (lambda x: mf.quantize(x.to(torch.complex64), mf.e4m3), TypeError, "complex64"),
    (lambda x: mf.quantize(x.tolist(), mf.e4m3), TypeError, "list"),
    (lambda x: mf.quantize(x, "fp8"), ValueError, "fp8"),
    (lambda x: mf.quantize(x, 8), TypeError, "fmt"),
    (lambda x: mf.quantize(x, mf.e4m3, rounding="nearest"), ValueError, "rounding='nearest'"),
    (lambda x: mf.quantize(x, mf.e4m3, overflow="clip"), ValueError, "overflow='clip'"),
    (lambda x: mf.quantize(x, mf.e4m3, seed=-1), ValueError, "seed"),
    (lambda x: mf.quantize(x, mf.e4m3, seed=1.5), TypeError, "seed"),
    (lambda x: mf.quantize(x, mf.e4m3, "stochastic", random_bits=40), ValueError, "random_bits"),
    (lambda x: mf.quantize(x, mf.format(8, 30)), ValueError, "mantissa_bits = 30"),
    (lambda x: mf.quantize(x, mf.e4m3, out=torch.empty(10, 5)), ValueError, "shape"),
    (lambda x: mf.quantize(x, mf.e4m3, out=torch.empty(5, 10, dtype=torch.float64)), TypeError, "dtype"),
    (lambda x: mf.quantize(x, mf.e4m3, out=np.empty((5, 10), np.float32)), TypeError, "out"),
    (lambda x: mf.quantize_(x, "e4m3", rounding="up"), ValueError, "rounding"),
    (lambda x: mf.quantize_(x, mf.format(11, 10)), ValueError, "exponent_bias"),
    (lambda x: mf.encode(x, mf.format(8, 40)), ValueError, "mantissa_bits = 40"),
    (lambda x: mf.encode(x * float("inf"), mf.fp_5_2_0), ValueError, "has no code"),
    (lambda x: mf.decode(x, mf.e4m3), TypeError, "integer"),
    (lambda x: mf.decode(x.to(torch.int32), mf.e4m3, dtype=torch.int32), TypeError, "dtype"),
    (lambda x: mf.pack(x.to(torch.int64), -3), ValueError, "bits = -3"),
    (lambda x: mf.pack(x.to(torch.int64), 0), ValueError, "bits = 0"),
    (lambda x: mf.pack(x.to(torch.int64), 33), ValueError, "bits = 33"),
    (lambda x: mf.pack(x.to(torch.int64) + 4, 2), ValueError, "does not fit in 2 bits"),
    (lambda x: mf.pack(x, 4), TypeError, "integer"),
    (lambda x: mf.unpack(torch.zeros(4, dtype=torch.uint8), 5, 100), ValueError, "need"),
    (lambda x: mf.unpack(torch.zeros(4, dtype=torch.int8), 5, 1), TypeError, "uint8"),
    (lambda x: mf.gecko_compress(x.double()), TypeError, "float32"),
    (lambda x: mf.gecko_compress(x, mantissa_bits=24), ValueError, "mantissa"),
    (lambda x: mf.gecko_compress(x, variant="better"), ValueError, "variant='better'"),
    (lambda x: mf.quantize_ste(x, mf.e4m3, grad_rounding="up", grad_format=mf.e5m2), ValueError, "rounding"),
    (lambda x: mf.quantize_ste(x.numpy(), mf.e4m3), TypeError, "torch.Tensor"),
]


@pytest.mark.parametrize("call, error, message", CASES)
def test_bad_input_raises_a_clear_error_and_leaves_the_input_unchanged(call, error, message):
    x = fresh()
    before = x.clone()
    with pytest.raises(error, match=message.replace("(", r"\(").replace("*", r"\*")):
        call(x)
    assert torch.equal(x, before)


def test_a_cuda_tensor_is_refused_with_a_type_error():
    class FakeCuda(torch.Tensor):
        @property
        def device(self):
            return torch.device("cuda", 0)

    x = fresh().as_subclass(FakeCuda)
    with pytest.raises(TypeError, match="cuda tensor"):
        mf.quantize(x, mf.e4m3)
    if torch.cuda.is_available():
        with pytest.raises(TypeError, match="cuda tensor"):
            mf.quantize(torch.ones(3, device="cuda"), mf.e4m3)


def test_read_only_arrays_are_refused_for_in_place_rounding():
    a = np.ones(8, np.float32)
    a.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        mf.quantize_(a, mf.e4m3)
    assert mf.quantize(a, mf.e4m3).tolist() == [1.0] * 8  # reading is fine


def test_a_failed_in_place_call_on_a_strided_view_writes_nothing():
    base = torch.randn(20, 20)
    before = base.clone()
    with pytest.raises(ValueError):
        mf.quantize_(base.t(), mf.e4m3, "stochastic", random_bits=99)
    assert torch.equal(base, before)


def test_writing_into_an_expanded_tensor_is_refused():
    base = torch.randn(1, 10)
    wide = base.expand(4, 10)
    with pytest.raises(ValueError, match="share memory"):
        mf.quantize_(wide, mf.e4m3, "stochastic")
    with pytest.raises(ValueError, match="share memory"):
        mf.quantize(torch.randn(4, 10), mf.e4m3, out=torch.zeros(1, 10).expand(4, 10))
    assert mf.quantize(wide, mf.e4m3).shape == (4, 10)  # reading one is fine


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float8_e5m2])
def test_low_precision_input_is_read_exactly_and_rounded_to_a_float32_result(dtype):
    x = fresh().to(dtype)
    before = x.clone()
    y = mf.quantize(x, mf.e4m3)
    assert y.dtype == torch.float32 and torch.equal(y, mf.quantize(x.float(), mf.e4m3))
    assert torch.equal(x.view(torch.uint8), before.view(torch.uint8))
