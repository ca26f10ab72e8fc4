"""minifloat's operations as torch operators (torch.library), so that torch.compile and
torch.export see one opaque node per call instead of the NumPy code behind it. They take CPU
tensors and, where the package was built with its CUDA kernels, CUDA tensors (docs/cuda.md).

The schemas are defined here with torch.library's low-level Library API (a call through it costs
less than through torch.library.custom_op's wrappers), each with a fake (meta) implementation that
gives the output's shape and dtype and runs the same argument checks, so a bad argument fails
while tracing, as it would eagerly. quantize, quantize_with_stats and quantize_ have C++ CPU
kernels in torch's dispatcher (src/torch_ops.cpp, the library minifloat/_torch_ops.so, built where
the build found torch's CMake package), so a compiled graph calls the rounding with no Python in
between; where that library is absent or was built against another torch, the Python kernels below
(the eager functions of _ops.py) run instead, with the same bits. Every other kernel is Python, and
every operator's kernel for other devices (CUDA) is the Python one. minifloat.quantize, quantize_,
encode, decode and quantize_ste call these operators for traced tensors; they are also reachable
as torch.ops.minifloat.<name>.

The rounding operators take the format and options as the extension minifloat._core takes them:
the format key [exponent bits, mantissa bits, bias, subnormals, specials index] and the indices of
the rounding mode and overflow policy in minifloat.ROUNDING and minifloat.OVERFLOW. Seeds and
element indices are unsigned 64-bit in minifloat and signed in torch's schema: they cross the
operator boundary as the signed integer with the same bits (`to_signed` / `to_unsigned`).
"""

import pathlib
from typing import Optional

import torch

from . import _core, _formats, _ops
from ._formats import Format, as_format
from ._ops import rounding_options  # a function, not _ops itself, in what torch.compile traces (no aliasing guard)

_U64 = 1 << 64

_lib = torch.library.Library("minifloat", "DEF")


def to_signed(value):
    """The int64 with the bits of a 0..2**64-1 seed or index (a torch schema int is signed)."""
    return value - _U64 if value >= 1 << 63 else value


def to_unsigned(value):
    return value + _U64 if value < 0 else value


def _load_cpu_kernels():
    """Loads src/torch_ops.cpp's CPU kernels when they were built against this torch; False otherwise."""
    here = pathlib.Path(__file__).parent
    library, built_for = here / "_torch_ops.so", here / "_torch_ops.torch"
    if not (library.exists() and built_for.exists()) or built_for.read_text().strip() != torch.__version__:
        return False
    try:
        torch.ops.load_library(str(library))
    except (OSError, RuntimeError):  # unresolved symbols, or a registration torch refuses
        return False
    return True


@torch.compiler.assume_constant_result
def _key_of_name(name):
    """The format key of a format name (calls the extension: a constant to torch.compile)."""
    return _key_list(as_format(name, "minifloat"))


def _key_list(f):
    e, m, bias, subnormals, specials = f._key
    return [e, m, bias, int(subnormals), specials]


def format_key(fmt, who):
    """The key list a rounding operator takes for fmt (a Format or a format name)."""
    if isinstance(fmt, Format):
        return _key_list(fmt)
    if isinstance(fmt, str):
        return _key_of_name(fmt)
    raise TypeError(f"{who}: fmt must be a minifloat.Format or a format name, not {type(fmt).__name__}")


def operator_args(x, fmt, rounding, overflow, seed, index, random_bits, who, prefix=""):
    """(x, key, mode, overflow, seed, index, random_bits) as the rounding operators take them, checked."""
    mode, on_overflow, random_bits, seed, index = rounding_options(who, rounding, overflow, seed, index, random_bits,
                                                                   prefix)
    return x, format_key(fmt, who), mode, on_overflow, to_signed(seed), to_signed(index), random_bits


def _index(value, names, who, what):
    if not 0 <= value < len(names):
        raise ValueError(f"{who}: {what} index {value} is unknown")
    return value


def _check(key, mode, on_overflow, seed, index, random_bits, is_double, who):
    """The checks of the eager path (format, options, and both against the source type), with the
    errors of src/torch_ops.cpp's; the Format."""
    if len(key) != 5:
        raise ValueError(f"{who}: a format key has 5 entries, not {len(key)}")
    f = Format._from_key((key[0], key[1], key[2], bool(key[3]), _index(key[4], _formats.SPECIALS, who, "specials")))
    options = (_index(mode, _ops.ROUNDING, who, "rounding"), _index(on_overflow, _ops.OVERFLOW, who, "overflow"),
               random_bits, to_unsigned(seed), to_unsigned(index))
    _core.check_options(f._key, options, is_double)
    return f


def _check_values(x, who):
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{who}: x has dtype {x.dtype}; expected float32 or float64")


def _names(mode, on_overflow):
    return _ops.ROUNDING[mode], _ops.OVERFLOW[on_overflow]


_ROUNDING_SCHEMA = "Tensor x, int[] fmt, int rounding, int overflow, int seed, int index, int random_bits"
_lib.define(f"quantize({_ROUNDING_SCHEMA}) -> Tensor")
_lib.define(f"quantize_with_stats({_ROUNDING_SCHEMA}) -> (Tensor, Tensor)")
_lib.define(f"quantize_({_ROUNDING_SCHEMA.replace('Tensor x', 'Tensor(a!) x')}) -> ()")


def _quantize_kernel(x, fmt, mode, on_overflow, seed, index, random_bits):
    who = "minifloat.quantize"
    _check_values(x, who)
    f = _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    return _ops._quantize(who, x, f, *_names(mode, on_overflow), to_unsigned(seed), to_unsigned(index),
                          random_bits, None, False, False)


def _quantize_with_stats_kernel(x, fmt, mode, on_overflow, seed, index, random_bits):
    """(rounded x, int64 tensor of values, overflows, underflows, nans, infinities)."""
    who = "minifloat.quantize"
    _check_values(x, who)
    f = _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    y, stats = _ops._quantize(who, x, f, *_names(mode, on_overflow), to_unsigned(seed),
                              to_unsigned(index), random_bits, None, True, False)
    return y, torch.tensor(tuple(stats), dtype=torch.int64, device=y.device)


def _quantize_in_place_kernel(x, fmt, mode, on_overflow, seed, index, random_bits):
    who = "minifloat.quantize_"
    _check_values(x, who)
    f = _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    _ops._quantize(who, x, f, *_names(mode, on_overflow), to_unsigned(seed), to_unsigned(index),
                   random_bits, None, False, True)


def _result_dtype(x):
    return x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32


@torch.library.register_fake("minifloat::quantize", lib=_lib)
def _(x, fmt, mode, on_overflow, seed, index, random_bits):
    _check_values(x, "minifloat.quantize")
    _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, "minifloat.quantize")
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("minifloat::quantize_with_stats", lib=_lib)
def _(x, fmt, mode, on_overflow, seed, index, random_bits):
    _check_values(x, "minifloat.quantize")
    _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, "minifloat.quantize")
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(5, dtype=torch.int64)


@torch.library.register_fake("minifloat::quantize_", lib=_lib)
def _(x, fmt, mode, on_overflow, seed, index, random_bits):
    _check_values(x, "minifloat.quantize_")
    _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, "minifloat.quantize_")


CPU_KERNELS_IN_CPP = _load_cpu_kernels()
for _name, _kernel in (("quantize", _quantize_kernel), ("quantize_with_stats", _quantize_with_stats_kernel),
                       ("quantize_", _quantize_in_place_kernel)):
    # CompositeExplicitAutograd: every device (CUDA through _ops' CUDA path); a CPU kernel of
    # _torch_ops.so, when loaded, takes precedence for CPU tensors.
    _lib.impl(_name, _kernel, "CompositeExplicitAutograd")


def _check_names(fmt, rounding, overflow, seed, index, random_bits, is_double, who, prefix=""):
    """_check for the operators that take format and option names."""
    f = as_format(fmt, who)
    opts = _ops.rounding_options(who, rounding, overflow, to_unsigned(seed), to_unsigned(index), random_bits, prefix)
    _core.check_options(f._key, opts, is_double)
    return f


_CODE_DTYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@torch.library.custom_op("minifloat::encode", mutates_args=())
def encode(x: torch.Tensor, fmt: str, rounding: str, overflow: str, seed: int, index: int, random_bits: int,
           dtype: Optional[torch.dtype]) -> torch.Tensor:
    return _ops._encode(x, fmt, rounding, overflow, to_unsigned(seed), to_unsigned(index), random_bits, dtype)


@encode.register_fake
def _(x, fmt, rounding, overflow, seed, index, random_bits, dtype):
    who = "minifloat.encode"
    f = _check_names(fmt, rounding, overflow, seed, index, random_bits, x.dtype == torch.float64, who)
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
        _check_names(grad_fmt, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits,
               x.dtype == torch.float64, "minifloat.quantize_ste (grad_format)", "grad_")
    return _ops._quantize("minifloat.quantize_ste", x.detach(), fmt, rounding, overflow, to_unsigned(seed),
                          to_unsigned(index), random_bits, None, False, False)


@quantize_ste.register_fake
def _(x, fmt, rounding, overflow, seed, index, random_bits, grad_fmt, grad_rounding, grad_overflow, grad_seed,
      grad_index, grad_random_bits):
    who = "minifloat.quantize_ste"
    _check_names(fmt, rounding, overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    if grad_fmt is not None:
        _check_names(grad_fmt, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits,
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
