"""minifloat._cuda without a GPU: importing needs no driver, and arguments are checked with errors
that name them before anything reaches CUDA. The kernels themselves are checked on a GPU by
tests/gpu/run.sh (docs/cuda.md)."""

import sys

import pytest
import torch

import minifloat
import minifloat._cuda as mc
from minifloat._ops import rounding_options

OPTS = rounding_options("test", "nearest_even", "infinity", 0, 0, 0)


def test_import_minifloat_does_not_load_the_cuda_extension():
    assert "minifloat._cuda_kernels" not in sys.modules or mc.is_built()


def test_problem_says_why_when_kernels_cannot_run():
    assert mc.is_available() == (mc.problem() == "")
    if not mc.is_built():
        assert "without its CUDA kernels" in mc.problem()
        with pytest.raises(ImportError, match="without its CUDA kernels"):
            mc.raw_kernels()


@pytest.mark.parametrize("call", [
    lambda x: mc.quantize_into(x, x, minifloat.e4m3._key, OPTS),
    lambda x: mc.encode_into(x, torch.zeros(4, dtype=torch.uint8), minifloat.e4m3._key, OPTS),
    lambda x: mc.decode_into(torch.zeros(4, dtype=torch.uint8), x, minifloat.e4m3._key),
    lambda x: mc.quantize_blocks_into(x, x, (1, 4, 1), minifloat.blocks.NAMED_BLOCKS["mxfp4"]._key,
                                      (0, 0, 0, 0, 0, 0, 1.0)),
])
def test_cpu_tensors_are_refused_by_name(call):
    with pytest.raises(TypeError, match="is a cpu tensor; expected a CUDA tensor"):
        call(torch.zeros(4))


def test_non_tensors_are_refused_by_name():
    with pytest.raises(TypeError, match="minifloat.quantize: x must be a torch.Tensor"):
        mc.quantize_into([1.0], None, minifloat.e4m3._key, OPTS)


@pytest.mark.skipif(not mc.is_built(), reason="minifloat was built without its CUDA kernels")
def test_extension_checks_formats_before_cuda():
    kernels = mc.raw_kernels()
    with pytest.raises(ValueError, match="mantissa_bits = 30"):
        kernels.quantize(0, 0, 16, False, (4, 30, 7, True, 1), OPTS, False, 0)
    with pytest.raises(ValueError, match="do not fit 8-bit integers"):
        kernels.encode(0, 0, 16, False, 1, minifloat.binary16._key, OPTS, 0)
    assert kernels.quantize(0, 0, 0, False, minifloat.e4m3._key, OPTS, True, 0) == (0, 0, 0, 0, 0)


@pytest.mark.skipif(not mc.is_built() or mc.is_available(), reason="needs the CUDA build on a machine without a GPU")
def test_kernel_call_without_a_device_raises_runtime_error():
    with pytest.raises(RuntimeError, match="minifloat._cuda.quantize: CUDA error"):
        mc.raw_kernels().quantize(0, 0, 16, False, minifloat.e4m3._key, OPTS, False, 0)


def test_block_quantize_of_a_cpu_tensor_stays_on_the_cpu_path():
    x = torch.linspace(-3, 3, 64)
    got = minifloat.quantize(x, "mxfp4")
    assert got.device.type == "cpu"
    assert torch.equal(got, minifloat.blocks.quantize_blocks(x, "mxfp4"))
