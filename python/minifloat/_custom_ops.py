"""minifloat's operations as torch operators (torch.library), so that torch.compile and
torch.export see one opaque node per call instead of the NumPy code behind it. They take CPU
tensors and, where the package was built with its CUDA kernels, CUDA tensors (docs/cuda.md).

The schemas are defined here with torch.library's low-level Library API (a call through it costs
less than through torch.library.custom_op's wrappers), each with a fake (meta) implementation that
gives the output's shape and dtype and runs the same argument checks, so a bad argument fails
while tracing, as it would eagerly. Every operator has a C++ CPU kernel in torch's dispatcher
(src/torch_ops.cpp, the library minifloat/_torch_ops.so, built where the build found torch's CMake
package), so a compiled graph calls the rounding with no Python in between; where that library is
absent or was built against another torch, the Python kernels below (the eager functions of
_ops.py and blocks.py) run instead, with the same bits. Every operator's kernel for other devices
(CUDA) is the Python one. minifloat.quantize, quantize_, encode, decode and quantize_ste call these
operators for traced tensors (quantize_ste always: its autograd formula is registered here); they
are also reachable as torch.ops.minifloat.<name>.

The operators take the format and options as the extension minifloat._core takes them: the
format key [exponent bits, mantissa bits, bias, subnormals, specials index] (a block format's
key adds block size, scaling index and integer elements) and the indices of the rounding mode,
overflow policy and scale rule in minifloat.ROUNDING, minifloat.OVERFLOW and
minifloat.blocks.SCALE_RULES; encode's dtype (None: integer codes) is one that minifloat.encode
has checked holds the format's codes. Seeds and element indices are unsigned 64-bit in minifloat and signed in torch's
schema: they cross the operator boundary as the signed integer with the same bits (`to_signed` /
`to_unsigned`).
"""

import pathlib
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
    return key_list(as_format(name, "minifloat"))


def key_list(f):
    """A Format as the key list the operators take."""
    e, m, bias, subnormals, specials = f._key
    return [e, m, bias, int(subnormals), specials]


def format_key(fmt, who):
    """The key list a rounding operator takes for fmt (a Format or a format name)."""
    if isinstance(fmt, Format):
        return key_list(fmt)
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


_CODE_DTYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

_lib.define(f"encode({_ROUNDING_SCHEMA}, ScalarType? dtype) -> Tensor")
_lib.define("decode(Tensor codes, int[] fmt, bool double) -> Tensor")
_lib.define(f"quantize_ste({_ROUNDING_SCHEMA}, int[]? grad_fmt, int grad_rounding, int grad_overflow, int grad_seed, "
            "int grad_index, int grad_random_bits) -> Tensor")
_lib.define("quantize_blocks(Tensor x, int[] fmt, int axis, int rounding, int scale_rule, int overflow, int seed, "
            "int index, int random_bits, float? tensor_scale) -> Tensor")


def _encode_kernel(x, fmt, mode, on_overflow, seed, index, random_bits, dtype):
    """The codes of x rounded (the eager encode): integer codes, or as `dtype`, a dtype holding them."""
    who = "minifloat.encode"
    _check_values(x, who)
    f = _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    return _ops._encode(x, f, *_names(mode, on_overflow), to_unsigned(seed), to_unsigned(index), random_bits, dtype)


def _format_of_key(key, who):
    if len(key) != 5:
        raise ValueError(f"{who}: a format key has 5 entries, not {len(key)}")
    return Format._from_key((key[0], key[1], key[2], bool(key[3]), _index(key[4], _formats.SPECIALS, who, "specials")))


def _check_codes(codes, who):
    if codes.dtype in (torch.float32, torch.float64, torch.bool) or codes.dtype.is_complex:
        raise TypeError(f"{who}: codes has dtype {codes.dtype}; expected an integer dtype or one holding codes")


def _decode_kernel(codes, fmt, is_double):
    """The values of codes (the eager decode: integer codes, or a dtype holding fmt's codes)."""
    who = "minifloat.decode"
    _check_codes(codes, who)
    return _ops._decode(codes, _format_of_key(fmt, who), torch.float64 if is_double else torch.float32)


def _quantize_ste_kernel(x, fmt, mode, on_overflow, seed, index, random_bits, grad_fmt, grad_mode, grad_overflow,
                         grad_seed, grad_index, grad_random_bits):
    """quantize_ste's forward: quantize, with the gradient's arguments checked when the op is called."""
    who = "minifloat.quantize_ste"
    _check_values(x, who)
    if grad_fmt is not None:
        _check(grad_fmt, grad_mode, grad_overflow, grad_seed, grad_index, grad_random_bits, x.dtype == torch.float64,
               who + " (grad_format)")
    f = _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    return _ops._quantize(who, x, f, *_names(mode, on_overflow), to_unsigned(seed), to_unsigned(index),
                          random_bits, None, False, False)


def _block_format(key, who="minifloat.quantize"):
    from .blocks import BlockFormat
    if len(key) != 8:
        raise ValueError(f"{who}: a block format key has 8 entries, not {len(key)}")
    e, m, bias, subnormals, specials, block_size, scaling, integer = key
    return BlockFormat._from_key(((e, m, bias, bool(subnormals), specials), block_size, scaling, bool(integer)))


def block_key(f):
    """A BlockFormat as the flat int list the block operators take."""
    element, block_size, scaling, integer = f._key
    return [*element[:3], int(element[3]), element[4], block_size, scaling, int(integer)]


def _block_args(fmt, mode, rule, on_overflow, who):
    """(BlockFormat, rounding, scale_rule and overflow names) of quantize_blocks' key and indices."""
    from .blocks import SCALE_RULES
    return (_block_format(fmt, who), _index(mode, _ops.ROUNDING, who, "rounding"),
            SCALE_RULES[_index(rule, SCALE_RULES, who, "scale rule")], _index(on_overflow, _ops.OVERFLOW, who, "overflow"))


def _quantize_blocks_kernel(x, fmt, axis, mode, rule, on_overflow, seed, index, random_bits, tensor_scale):
    from .blocks import quantize_blocks as eager
    f, mode, rule, on_overflow = _block_args(fmt, mode, rule, on_overflow, "minifloat.quantize")
    return eager(x, f, axis=axis, rounding=_ops.ROUNDING[mode], scale_rule=rule, overflow=_ops.OVERFLOW[on_overflow],
                 seed=to_unsigned(seed), index=to_unsigned(index), random_bits=random_bits, tensor_scale=tensor_scale)


@torch.library.register_fake("minifloat::encode", lib=_lib)
def _(x, fmt, mode, on_overflow, seed, index, random_bits, dtype):
    who = "minifloat.encode"
    _check_values(x, who)
    f = _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    target = _ops._code_dtype(dtype, f, True, who)
    if target is None:
        return x.new_empty(x.shape, dtype=_CODE_DTYPES[_ops.code_bytes(f.bit_width)])
    if target == _ops.interop.TORCH_FP4_X2:
        _ops._check_nibble_pairs(x, who)
        return x.new_empty(x.shape[:-1] + (x.shape[-1] // 2,), dtype=target)
    return x.new_empty(x.shape, dtype=target)


@torch.library.register_fake("minifloat::decode", lib=_lib)
def _(codes, fmt, is_double):
    who = "minifloat.decode"
    _check_codes(codes, who)
    f = _format_of_key(fmt, who)
    own = _ops.interop.packed_format_of(codes.dtype) or (_ops.interop.format_of(codes.dtype), 1)
    if own[0] is not None and own[0] != f:
        raise ValueError(f"{who}: codes of dtype {codes.dtype} are codes of {own[0]}, not of {f}")
    problem = _core.conversion_problem(f._key, is_double)
    if problem:
        raise ValueError(f"{who}: {problem}")
    shape = codes.shape[:-1] + (own[1] * codes.shape[-1],) if codes.dim() else codes.shape
    return codes.new_empty(shape, dtype=torch.float64 if is_double else torch.float32)


@torch.library.register_fake("minifloat::quantize_ste", lib=_lib)
def _(x, fmt, mode, on_overflow, seed, index, random_bits, grad_fmt, grad_mode, grad_overflow, grad_seed, grad_index,
      grad_random_bits):
    who = "minifloat.quantize_ste"
    _check_values(x, who)
    _check(fmt, mode, on_overflow, seed, index, random_bits, x.dtype == torch.float64, who)
    if grad_fmt is not None:
        _check(grad_fmt, grad_mode, grad_overflow, grad_seed, grad_index, grad_random_bits, x.dtype == torch.float64,
               who + " (grad_format)")
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("minifloat::quantize_blocks", lib=_lib)
def _(x, fmt, axis, mode, rule, on_overflow, seed, index, random_bits, tensor_scale):
    from .blocks import _geometry, _options
    who = "minifloat.quantize"
    f, mode, rule, on_overflow = _block_args(fmt, mode, rule, on_overflow, who)
    if x.dtype != torch.float32:
        raise TypeError(f"{who}: x has dtype {x.dtype}; block formats take float32")
    _geometry(tuple(x.shape), axis, who)
    _options(who, f, _ops.ROUNDING[mode], rule, _ops.OVERFLOW[on_overflow], to_unsigned(seed), to_unsigned(index),
             random_bits, tensor_scale)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


CPU_KERNELS_IN_CPP = _load_cpu_kernels()
for _name, _kernel in (("quantize", _quantize_kernel), ("quantize_with_stats", _quantize_with_stats_kernel),
                       ("quantize_", _quantize_in_place_kernel), ("quantize_ste", _quantize_ste_kernel),
                       ("encode", _encode_kernel), ("decode", _decode_kernel),
                       ("quantize_blocks", _quantize_blocks_kernel)):
    # CompositeExplicitAutograd: every device (CUDA through _ops' CUDA path); a CPU kernel of
    # _torch_ops.so, when loaded, takes precedence for CPU tensors.
    _lib.impl(_name, _kernel, "CompositeExplicitAutograd")


def _ste_setup(ctx, inputs, output):
    ctx.grad_args = inputs[7:]


def _ste_backward(ctx, grad):
    """The incoming gradient, passed straight through or rounded to grad_fmt. The rounding is the
    straight-through op itself (with no further gradient format), so a second derivative is the
    identity again rather than an error."""
    grad_fmt, grad_mode, grad_overflow, grad_seed, grad_index, grad_random_bits = ctx.grad_args
    if grad_fmt is not None:
        grad = torch.ops.minifloat.quantize_ste(grad.contiguous(), grad_fmt, grad_mode, grad_overflow, grad_seed,
                                                grad_index, grad_random_bits, None, 0, 0, 0, 0, 0)
    return (grad,) + (None,) * 12


torch.library.register_autograd("minifloat::quantize_ste", _ste_backward, setup_context=_ste_setup, lib=_lib)
