"""minifloat's operations as torch custom operators (torch.library), so that torch.compile and
torch.export see one opaque node per call instead of the NumPy code behind it. They take CPU
tensors and, where the package was built with its CUDA kernels, CUDA tensors (docs/cuda.md).

Each operator's CPU implementation is the eager function of _ops.py (every check and every
rounding decision stays there and in the C++ headers); its fake implementation gives the output's
shape and dtype and runs the same argument checks, so a bad argument fails while tracing, as it
would eagerly. minifloat.quantize, quantize_, encode, decode and quantize_ste call these
operators for torch tensors; they are also reachable as torch.ops.minifloat.<name>.

Seeds and element indices are unsigned 64-bit in minifloat and signed in torch's schema: they
cross the operator boundary as the signed integer with the same bits (`to_signed` / `to_unsigned`).
"""

from typing import Optional

import torch

from . import _core, _ops
from ._formats import as_format

_U64 = 1 << 64


def to_signed(value):
    """The int64 with the bits of a 0..2**64-1 seed or index (a torch schema int is signed)."""
    return value - _U64 if value >= 1 << 63 else value


def to_unsigned(value):
    return value + _U64 if value < 0 else value


def _check(fmt, rounding, overflow, seed, index, random_bits, is_double, who, prefix=""):
    f = as_format(fmt, who)
    opts = _ops.rounding_options(who, rounding, overflow, to_unsigned(seed), to_unsigned(index), random_bits, prefix)
    _core.check_options(f._key, opts, is_double)
    return f


def _result_dtype(x):
    return x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32


@torch.library.custom_op("minifloat::quantize", mutates_args=())
def quantize(x: torch.Tensor, fmt: str, rounding: str, overflow: str, seed: int, index: int,
             random_bits: int) -> torch.Tensor:
    return _ops._quantize("minifloat.quantize", x, fmt, rounding, overflow, to_unsigned(seed), to_unsigned(index),
                          random_bits, None, False, False)


@quantize.register_fake
def _(x, fmt, rounding, overflow, seed, index, random_bits):
    _check(fmt, rounding, overflow, seed, index, random_bits, x.dtype == torch.float64, "minifloat.quantize")
    return torch.empty_like(x, dtype=_result_dtype(x), memory_format=torch.contiguous_format)


@torch.library.custom_op("minifloat::quantize_with_stats", mutates_args=())
def quantize_with_stats(x: torch.Tensor, fmt: str, rounding: str, overflow: str, seed: int, index: int,
                        random_bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rounded x, int64 tensor of values, overflows, underflows, nans, infinities)."""
    y, stats = _ops._quantize("minifloat.quantize", x, fmt, rounding, overflow, to_unsigned(seed),
                              to_unsigned(index), random_bits, None, True, False)
    return y, torch.tensor(tuple(stats), dtype=torch.int64)


@quantize_with_stats.register_fake
def _(x, fmt, rounding, overflow, seed, index, random_bits):
    _check(fmt, rounding, overflow, seed, index, random_bits, x.dtype == torch.float64, "minifloat.quantize")
    return (torch.empty_like(x, dtype=_result_dtype(x), memory_format=torch.contiguous_format),
            x.new_empty(5, dtype=torch.int64))


@torch.library.custom_op("minifloat::quantize_", mutates_args=("x",))
def quantize_(x: torch.Tensor, fmt: str, rounding: str, overflow: str, seed: int, index: int,
              random_bits: int) -> None:
    _ops._quantize("minifloat.quantize_", x, fmt, rounding, overflow, to_unsigned(seed), to_unsigned(index),
                   random_bits, None, False, True)


@quantize_.register_fake
def _(x, fmt, rounding, overflow, seed, index, random_bits):
    _check(fmt, rounding, overflow, seed, index, random_bits, x.dtype == torch.float64, "minifloat.quantize_")


_CODE_DTYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@torch.library.custom_op("minifloat::encode", mutates_args=())
def encode(x: torch.Tensor, fmt: str, rounding: str, overflow: str, seed: int, index: int, random_bits: int,
           dtype: Optional[torch.dtype]) -> torch.Tensor:
    return _ops._encode(x, fmt, rounding, overflow, to_unsigned(seed), to_unsigned(index), random_bits, dtype)


@encode.register_fake
def _(x, fmt, rounding, overflow, seed, index, random_bits, dtype):
    who = "minifloat.encode"
    f = _check(fmt, rounding, overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    target = _ops._code_dtype(dtype, f, True, who)
    if target is None:
        return x.new_empty(x.shape, dtype=_CODE_DTYPES[_ops.code_bytes(f.bit_width)])
    if target == _ops.interop.TORCH_FP4_X2:
        if x.dim() == 0 or x.shape[-1] % 2:
            raise ValueError(f"{who}: two e2m1 codes go into each byte of float4_e2m1fn_x2, so the last dimension "
                             "must be even")
        return x.new_empty(x.shape[:-1] + (x.shape[-1] // 2,), dtype=target)
    return x.new_empty(x.shape, dtype=target)


@torch.library.custom_op("minifloat::decode", mutates_args=())
def decode(codes: torch.Tensor, fmt: Optional[str], dtype: torch.dtype) -> torch.Tensor:
    return _ops._decode(codes, fmt, dtype)


@decode.register_fake
def _(codes, fmt, dtype):
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"minifloat.decode: dtype must be float32 or float64, not {dtype}")
    shape = codes.shape
    if codes.dtype == _ops.interop.TORCH_FP4_X2:
        shape = shape[:-1] + (2 * shape[-1],)
    return codes.new_empty(shape, dtype=dtype)


@torch.library.custom_op("minifloat::quantize_ste", mutates_args=())
def quantize_ste(x: torch.Tensor, fmt: str, rounding: str, overflow: str, seed: int, index: int, random_bits: int,
                 grad_fmt: Optional[str], grad_rounding: str, grad_overflow: str, grad_seed: int, grad_index: int,
                 grad_random_bits: int) -> torch.Tensor:
    if grad_fmt is not None:  # checked when the op is called, not first when backward runs
        _check(grad_fmt, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits,
               x.dtype == torch.float64, "minifloat.quantize_ste (grad_format)", "grad_")
    return _ops._quantize("minifloat.quantize_ste", x.detach(), fmt, rounding, overflow, to_unsigned(seed),
                          to_unsigned(index), random_bits, None, False, False)


@quantize_ste.register_fake
def _(x, fmt, rounding, overflow, seed, index, random_bits, grad_fmt, grad_rounding, grad_overflow, grad_seed,
      grad_index, grad_random_bits):
    who = "minifloat.quantize_ste"
    _check(fmt, rounding, overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    if grad_fmt is not None:
        _check(grad_fmt, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits,
               x.dtype == torch.float64, who + " (grad_format)", "grad_")
    return torch.empty_like(x, dtype=_result_dtype(x), memory_format=torch.contiguous_format)


def _ste_setup(ctx, inputs, output):
    ctx.grad_args = inputs[7:]


def _ste_backward(ctx, grad):
    """The incoming gradient, passed straight through or rounded to grad_fmt. The rounding is the
    straight-through op itself (with no further gradient format), so a second derivative is the
    identity again rather than an error."""
    grad_fmt, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits = ctx.grad_args
    if grad_fmt is not None:
        grad = quantize_ste(grad.contiguous(), grad_fmt, grad_rounding, grad_overflow, grad_seed, grad_index,
                            grad_random_bits, None, "nearest_even", "infinity", 0, 0, 0)
    return (grad,) + (None,) * 12


quantize_ste.register_autograd(_ste_backward, setup_context=_ste_setup)


def _block_format(key):
    from .blocks import BlockFormat
    e, m, bias, subnormals, specials, block_size, scaling, integer = key
    return BlockFormat._from_key(((e, m, bias, bool(subnormals), specials), block_size, scaling, bool(integer)))


def block_key(f):
    """A BlockFormat as the flat int list the block operators take."""
    element, block_size, scaling, integer = f._key
    return [*element[:3], int(element[3]), element[4], block_size, scaling, int(integer)]


@torch.library.custom_op("minifloat::quantize_blocks", mutates_args=())
def quantize_blocks(x: torch.Tensor, fmt: list[int], axis: int, rounding: str, scale_rule: str, overflow: str,
                    seed: int, index: int, random_bits: int, tensor_scale: Optional[float]) -> torch.Tensor:
    from .blocks import quantize_blocks as eager
    return eager(x, _block_format(fmt), axis=axis, rounding=rounding, scale_rule=scale_rule, overflow=overflow,
                 seed=to_unsigned(seed), index=to_unsigned(index), random_bits=random_bits, tensor_scale=tensor_scale)


@quantize_blocks.register_fake
def _(x, fmt, axis, rounding, scale_rule, overflow, seed, index, random_bits, tensor_scale):
    from .blocks import SCALE_RULES, _geometry
    who = "minifloat.quantize"
    _block_format(fmt)  # the format's own checks
    if x.dtype != torch.float32:
        raise TypeError(f"{who}: x has dtype {x.dtype}; block formats take float32")
    _geometry(tuple(x.shape), axis, who)
    _ops.rounding_options(who, rounding, overflow, to_unsigned(seed), to_unsigned(index), random_bits)
    if scale_rule not in SCALE_RULES:
        raise ValueError(f"{who}: scale_rule={scale_rule!r} is not one of {', '.join(SCALE_RULES)}")
    return torch.empty_like(x, memory_format=torch.contiguous_format)
