"""Rounding, codes, packing and Gecko over tensors and arrays; every rule is the C++ library's."""

from collections import namedtuple
import numbers

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from . import _core
from ._arguments import as_int, check_index
from ._buffers import Operand, address, lookup, threads
from ._formats import Format, as_format
from . import interop

ROUNDING = tuple(_core.rounding_names)
OVERFLOW = tuple(_core.overflow_names)
GECKO_VARIANTS = tuple(_core.gecko_variant_names)


class RoundingStats(namedtuple("RoundingStats", "values overflows underflows nans infinities")):
    """What a rounding pass saw (minifloat::rounding_stats): overflows count |x| >= the format's
    overflow threshold (Inf and NaN included), underflows finite nonzero inputs rounded to zero."""

    __slots__ = ()

    @property
    def overflow_ratio(self):
        return self.overflows / self.values if self.values else 0.0

    @property
    def underflow_ratio(self):
        return self.underflows / self.values if self.values else 0.0


def rounding_options(who, rounding, overflow, seed, index, random_bits, prefix=""):
    """The (mode, overflow, random_bits, seed, index) tuple the extension takes, checked; errors
    name the arguments with `prefix` (quantize_ste's "grad_")."""
    mode = lookup(rounding, ROUNDING, who, prefix + "rounding")
    on_overflow = lookup(overflow, OVERFLOW, who, prefix + "overflow")
    random_bits = as_int(random_bits, who, prefix + "random_bits", 0, 64)  # the core checks it against the source width
    return (mode, on_overflow, random_bits, check_index(seed, who, prefix + "seed"),
            check_index(index, who, prefix + "index"))


def _output(source, out, who):
    """The output Operand (or None), checked against the input: same kind, dtype and shape."""
    if out is None:
        return None
    target = Operand(out, who, "out")
    if target.is_torch != source.is_torch:
        raise TypeError(f"{who}: out is a {'torch.Tensor' if target.is_torch else 'numpy.ndarray'} but x is not")
    if target.codes_format is not None or target.dtype != source.dtype:
        raise TypeError(f"{who}: out has dtype {target.dtype_name()}, the result has {source.dtype_name()}")
    if target.array.shape != source.array.shape:
        raise ValueError(f"{who}: out has shape {tuple(target.array.shape)}, x has {tuple(source.array.shape)}")
    target.check_writable()
    return target


def _run_into(source, target, kernel):
    """kernel(in_array, out_array) on C-order buffers, writing the result into target.array (or a
    new array); returns the array holding the result."""
    src = source.contiguous()
    if target is None:
        dst = np.empty(src.shape, dtype=src.dtype)
        kernel(src, dst)
        return dst
    direct = target.array.flags.c_contiguous and target.array.dtype.isnative and (
        target.array is src or not np.may_share_memory(target.array, src)
        or (target.array.ctypes.data == src.ctypes.data and target.array.strides == src.strides))
    if direct:
        kernel(src, target.array)
        return target.array
    dst = np.empty(src.shape, dtype=src.dtype)
    kernel(src, dst)
    np.copyto(target.array, dst)
    return target.array


def mark_written(tensor):
    """Moves a tensor's version counter on, as torch's own in-place ops do, so that autograd
    notices the change if a graph saved the tensor (the data was written through a NumPy view)."""
    with torch.no_grad():
        tensor.as_strided_(tensor.size(), tensor.stride(), tensor.storage_offset())


def _on_cuda(x):
    """True for a CUDA tensor that this installation's CUDA kernels can take (built, and a device
    and driver present); any other non-CPU tensor goes on to the CPU path's TypeError."""
    if not (isinstance(x, torch.Tensor) and x.device.type == "cuda"):
        return False
    from . import _cuda
    return _cuda.is_available()


def _cuda_target(who, x, out, in_place):
    """Where a CUDA rounding writes: x itself, out, or None for a new tensor; checked like the CPU path's."""
    target = x if in_place else out
    if target is None:
        return None
    name = "x" if in_place else "out"
    if not isinstance(target, torch.Tensor) or target.device != x.device:
        raise TypeError(f"{who}: {name} must be a tensor on {x.device}")
    if target.dtype != x.dtype or target.shape != x.shape:
        raise ValueError(f"{who}: {name} has dtype {target.dtype} and shape {tuple(target.shape)}, x has {x.dtype} "
                         f"and {tuple(x.shape)}")
    if target.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"{who}: {name} requires grad; round it under torch.no_grad(), or use minifloat.quantize_ste")
    if torch._debug_has_internal_overlap(target) != 0:
        raise ValueError(f"{who}: {name} has elements that share memory; write into a tensor with one location per element")
    return target


def _quantize_cuda(who, x, fmt, rounding, overflow, seed, index, random_bits, out, stats, in_place):
    """quantize of a CUDA tensor by the GPU kernels (minifloat._cuda): the same core, the same bits,
    launched on the current stream with no copy to the host."""
    from . import _cuda
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{who}: x has dtype {x.dtype}; CUDA tensors must be float32 or float64")
    f = as_format(fmt, who)
    opts = rounding_options(who, rounding, overflow, seed, index, random_bits)
    _core.check_options(f._key, opts, x.dtype == torch.float64)
    target = _cuda_target(who, x, out, in_place)
    src = x.detach().contiguous()
    dst = target.detach() if target is not None and target.is_contiguous() else torch.empty_like(src)
    counts = _cuda.quantize_into(src, dst, f._key, opts, stats)
    if target is not None and dst.data_ptr() != target.data_ptr():
        with torch.no_grad():
            target.copy_(dst)
    result = target if target is not None else dst
    return (result, RoundingStats(*counts)) if stats else result


def _quantize(who, x, fmt, rounding, overflow, seed, index, random_bits, out, stats, in_place):
    if _on_cuda(x):
        return _quantize_cuda(who, x, fmt, rounding, overflow, seed, index, random_bits, out, stats, in_place)
    source = Operand(x, who)
    if source.codes_format is not None:  # float8/bfloat16/float16/ml_dtypes values: exactly float32 first
        if in_place:
            raise TypeError(f"{who}: x has dtype {source.dtype_name()}; rounding in place needs float32 or float64 "
                            "(quantize returns the float32 result of any low-precision input)")
        x = _decode(x, None, None)
        source = Operand(x, who)
    is_double = source.require_float()
    f = as_format(fmt, who)
    opts = rounding_options(who, rounding, overflow, seed, index, random_bits)
    _core.check_options(f._key, opts, is_double)  # ValueError naming the field, before anything is written
    if in_place:
        source.check_writable()
        target = source
    else:
        target = _output(source, out, who)
    if target is not None and target.is_torch and target.tensor.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"{who}: {'x' if in_place else 'out'} requires grad; round it under torch.no_grad(), "
                         "or use minifloat.quantize_ste for a differentiable rounding")
    if target is not None and not target.aliases:  # its array is a copy: round, then copy through torch
        value, counts = _quantize(who, x, f, rounding, overflow, seed, index, random_bits, None, True, False)
        with torch.no_grad():
            target.tensor.copy_(value)
        return (target.tensor, counts) if stats else target.tensor
    counts = []

    def kernel(src, dst):
        counts.append(_core.quantize(address(src), address(dst), src.size, is_double, f._key, opts, threads(),
                                     stats))

    result = _run_into(source, target, kernel)
    if target is not None and target.is_torch:
        mark_written(target.tensor)
    if in_place:
        value = x
    elif target is not None:
        value = out
    else:
        value = source.wrap(result)
    return (value, RoundingStats(*counts[0])) if stats else value


def _traced(x):
    """True when x goes through the custom operators (_custom_ops.py) rather than straight to the
    eager code: under torch.compile / torch.export, and for meta and fake tensors, which have no data."""
    if not isinstance(x, torch.Tensor):
        return False
    return torch.compiler.is_compiling() or x.device.type == "meta" or isinstance(x, FakeTensor)


def _format_name(fmt, who):
    """The name a custom operator takes for fmt (a Format's cached name, or the string itself)."""
    if isinstance(fmt, Format):
        return fmt._name
    if isinstance(fmt, str):
        return fmt
    raise TypeError(f"{who}: fmt must be a minifloat.Format or a format name, not {type(fmt).__name__}")


def _block_format_of(fmt):
    """The BlockFormat fmt names (a BlockFormat, or a name of minifloat.blocks.NAMED_BLOCKS), else None."""
    if isinstance(fmt, _blocks.BlockFormat):
        return fmt
    if isinstance(fmt, str):
        return _blocks.NAMED_BLOCKS.get(fmt, _blocks.NAMED_BLOCKS.get(fmt.replace("_", "-")))
    return None


def quantize(x, fmt, rounding="nearest_even", overflow=None, seed=0, index=0, random_bits=0, out=None, stats=False,
             *, axis=-1, scale_rule="floor", tensor_scale=None):
    """x rounded to fmt, as a new tensor/array of x's kind, dtype and shape (or written to `out`).

    x: a float32 or float64 CPU torch.Tensor or numpy.ndarray, any shape and strides; a tensor or
    array of a low-precision dtype minifloat knows (float8, bfloat16, float16, ml_dtypes' types:
    minifloat.format_of) is read exactly as float32 and gives a float32 result.
    fmt: a Format or format name, or a block format (minifloat.blocks: "mxfp8-e4m3", "mxfp4",
    "nvfp4", ...), which fake-quantizes float32 x in blocks along `axis` with `scale_rule`
    (floor | rceil | ceil | even) and NVFP4's `tensor_scale` (minifloat.blocks.quantize_blocks).
    rounding: nearest_even | nearest_away | toward_zero | stochastic | toward_positive | toward_negative | to_odd;
    overflow: infinity | saturate (None: infinity for a format, saturate for a block format, as the MX spec).
    Stochastic rounding draws element i (row-major flat index) from (seed, index + i).
    stats=True returns (result, RoundingStats) (BlockStats for a block format). Under torch.compile
    the call is one graph node (torch.ops.minifloat.quantize / quantize_blocks); `out=` and
    stats=True there read back through a graph break."""
    who = "minifloat.quantize"
    block = _block_format_of(fmt)
    if block is not None:
        overflow = "saturate" if overflow is None else overflow
        if _traced(x) and out is None and not stats:
            mode, on_overflow, random_bits, seed, index = rounding_options(who, rounding, overflow, seed, index,
                                                                           random_bits)
            return torch.ops.minifloat.quantize_blocks(
                x.detach(), _custom_ops.block_key(block), axis, mode, lookup(scale_rule, _blocks.SCALE_RULES, who,
                                                                             "scale_rule"),
                on_overflow, _custom_ops.to_signed(seed), _custom_ops.to_signed(index), random_bits, tensor_scale)
        return _blocks.quantize_blocks(x, block, axis=axis, rounding=rounding, scale_rule=scale_rule, overflow=overflow,
                                       seed=seed, index=index, random_bits=random_bits, tensor_scale=tensor_scale,
                                       stats=stats, out=out)
    if (axis, scale_rule, tensor_scale) != (-1, "floor", None):
        raise ValueError(f"{who}: axis, scale_rule and tensor_scale are for block formats; {fmt!r} is not one")
    overflow = "infinity" if overflow is None else overflow
    if _traced(x) and out is None:
        x = _traced_float_values(x)
        args = _operator_args(x.detach(), fmt, rounding, overflow, seed, index, random_bits, who)
        if not stats:
            return torch.ops.minifloat.quantize(*args)
        y, counts = torch.ops.minifloat.quantize_with_stats(*args)
        return y, RoundingStats(*counts.tolist())
    if (out is None and _custom_ops.CPU_KERNELS_IN_CPP and isinstance(x, torch.Tensor) and x.device.type == "cpu"
            and x.dtype in (torch.float32, torch.float64) and x.layout == torch.strided):
        # the operator's C++ kernel: the same rounding with less Python per call than the NumPy path
        args = _operator_args(x.detach(), fmt, rounding, overflow, seed, index, random_bits, who)
        if not stats:
            return torch.ops.minifloat.quantize(*args)
        y, counts = torch.ops.minifloat.quantize_with_stats(*args)
        return y, RoundingStats(*counts.tolist())
    return _quantize(who, x, fmt, rounding, overflow, seed, index, random_bits, out, stats, False)


def _traced_float_values(x):
    """x, or its values exactly as float32 when x holds low-precision values (float8, bfloat16, ...)."""
    if x.dtype not in (torch.float32, torch.float64) and (x.dtype in interop._TORCH or x.dtype == interop.TORCH_FP4_X2):
        return decode(x)
    return x


def quantize_(x, fmt, rounding="nearest_even", overflow="infinity", seed=0, index=0, random_bits=0, stats=False):
    """quantize in place: x is overwritten (and returned). Nothing is written when an argument is bad."""
    who = "minifloat.quantize_"
    if _traced(x) and not stats:
        torch.ops.minifloat.quantize_(*_operator_args(x, fmt, rounding, overflow, seed, index, random_bits, who))
        return x
    return _quantize(who, x, fmt, rounding, overflow, seed, index, random_bits, None, stats, True)


_TORCH_CODES = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}  # NumPy views that torch takes
_NUMPY_CODES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_TORCH_CODES_DTYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def code_bytes(bit_width):
    return next(b for b in (1, 2, 4, 8) if bit_width <= 8 * b)


def _code_dtype(dtype, f, is_torch, who):
    """What encode's dtype argument asks for: None (integer codes), or a dtype holding f's codes as
    values ("native": the library's own dtype for f, when it has one)."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype == "native":
        found = interop.dtype_of(f, "torch" if is_torch else "numpy")
        if found is None:
            raise ValueError(f"{who}: {'torch' if is_torch else 'NumPy (with ml_dtypes)'} has no dtype for {f}")
        return found
    if is_torch and not isinstance(dtype, torch.dtype):
        raise TypeError(f"{who}: dtype must be a torch.dtype for a tensor, not {dtype!r}")
    if is_torch and interop.TORCH_FP4_X2 is not None and dtype == interop.TORCH_FP4_X2:
        if f != interop.packed_format_of(dtype)[0]:
            raise ValueError(f"{who}: dtype {dtype} holds e2m1 codes, not codes of {f}")
        return dtype
    try:
        g = interop.format_of(dtype)
    except TypeError:
        raise TypeError(f"{who}: dtype must be a torch or NumPy dtype, not {dtype!r}") from None
    if g is None or g.bit_width > 16:
        raise TypeError(f"{who}: dtype {dtype} does not hold minifloat codes (minifloat.format_of gives None)")
    if g != f:
        raise ValueError(f"{who}: dtype {dtype} holds codes of {g}, not of {f}")
    return dtype


def _pack_nibbles(codes, who):
    """uint8 codes (..., 2k) -> (..., k) bytes, element 2i in the low nibble (torch's and torchao's order)."""
    _check_nibble_pairs(codes, who)
    return np.ascontiguousarray(codes[..., 0::2] | (codes[..., 1::2] << 4))


def _check_nibble_pairs(x, who):
    if x.ndim == 0 or x.shape[-1] % 2:
        raise ValueError(f"{who}: two e2m1 codes go into each byte of float4_e2m1fn_x2, so the last dimension "
                         f"must be even, not {x.shape[-1] if x.ndim else 'a scalar'}")


def _unpack_nibbles(packed):
    """(..., k) bytes -> (..., 2k) uint8 codes: the inverse of _pack_nibbles."""
    codes = np.empty(packed.shape[:-1] + (2 * packed.shape[-1],), dtype=np.uint8)
    codes[..., 0::2] = packed & 0x0F
    codes[..., 1::2] = packed >> 4
    return codes


@torch.compiler.assume_constant_result
def _traced_code_dtype(fmt, dtype):
    """_code_dtype for a tensor, where fmt is a format key or name (a constant to torch.compile)."""
    who = "minifloat.encode"
    f = Format._from_key(tuple(fmt)) if isinstance(fmt, (tuple, list)) else as_format(fmt, who)
    return _code_dtype(dtype, f, True, who)


@torch.compiler.assume_constant_result
def _traced_decode_key(fmt, codes_dtype):
    """The format key decode's operator takes for codes of codes_dtype in fmt (a format key, name
    or None), checked as the eager decode checks it (a constant to torch.compile)."""
    who = "minifloat.decode"
    packed = interop.packed_format_of(codes_dtype)
    own = packed[0] if packed is not None else (
        interop.format_of(codes_dtype) if codes_dtype not in (torch.float32, torch.float64) else None)
    if own is None and (codes_dtype.is_floating_point or codes_dtype.is_complex or codes_dtype == torch.bool):
        raise TypeError(f"{who}: codes has dtype {codes_dtype}; expected an integer dtype")
    if fmt is None and own is None:
        raise TypeError(f"{who}: fmt is needed for integer codes")
    f = own if fmt is None else Format._from_key(tuple(fmt)) if isinstance(fmt, (tuple, list)) else as_format(fmt, who)
    if own is not None and f != own:
        raise ValueError(f"{who}: codes of dtype {codes_dtype} are codes of {own}, not of {f}")
    return _custom_ops.key_list(f)


def encode(x, fmt, rounding="nearest_even", overflow="infinity", seed=0, index=0, random_bits=0, dtype=None):
    """The codes of x rounded to fmt (sign | exponent | mantissa, as minifloat::encode).

    By default codes come in the narrowest integer type that holds fmt.bit_width bits: for torch
    uint8, int16, int32 or int64 (the bit pattern: a bfloat16 code is then exactly
    tensor.to(torch.bfloat16).view(torch.int16)); for NumPy uint8/16/32/64.
    dtype=<a dtype holding fmt's values> (torch.float8_e4m3fn for e4m3, ml_dtypes.float6_e2m3fn for
    e2m3, torch.float4_e2m1fn_x2 for e2m1, two codes a byte along the last dimension, ...), or
    dtype="native" for the library's own dtype of fmt, returns the same codes as that dtype.
    ValueError when a value has no code (NaN or ±Inf into an all_finite format)."""
    if _traced(x):
        who = "minifloat.encode"
        args = _operator_args(_traced_float_values(x).detach(), fmt, rounding, overflow, seed, index, random_bits, who)
        target = None if dtype is None else _traced_code_dtype(fmt._key if isinstance(fmt, Format) else fmt, dtype)
        return torch.ops.minifloat.encode(*args, target)
    return _encode(x, fmt, rounding, overflow, seed, index, random_bits, dtype)


def _encode(x, fmt, rounding, overflow, seed, index, random_bits, dtype):
    who = "minifloat.encode"
    if _on_cuda(x) and dtype is None:
        from . import _cuda
        if x.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{who}: x has dtype {x.dtype}; CUDA tensors must be float32 or float64")
        f = as_format(fmt, who)
        opts = rounding_options(who, rounding, overflow, seed, index, random_bits)
        _core.check_options(f._key, opts, x.dtype == torch.float64)
        src = x.detach().contiguous()
        codes = torch.empty(src.shape, dtype=_TORCH_CODES_DTYPES[code_bytes(f.bit_width)], device=x.device)
        first_bad = _cuda.encode_into(src, codes, f._key, opts)
        if first_bad < src.numel():
            raise ValueError(f"{who}: the value at flat index {first_bad} has no code in {f}")
        return codes
    source = Operand(x, who)
    if source.codes_format is not None:
        source = Operand(_decode(x, None, None), who)
    is_double = source.require_float()
    f = as_format(fmt, who)
    opts = rounding_options(who, rounding, overflow, seed, index, random_bits)
    _core.check_options(f._key, opts, is_double)
    target_dtype = _code_dtype(dtype, f, source.is_torch, who)
    nbytes = code_bytes(f.bit_width)
    src = source.contiguous()
    codes = np.empty(src.shape, dtype=_NUMPY_CODES[nbytes])
    if target_dtype is not None and target_dtype == interop.TORCH_FP4_X2:
        _pack_nibbles(codes, who)  # the shape check, before any work
    first_bad = _core.encode(address(src), address(codes), src.size, is_double, nbytes, f._key, opts, threads())
    if first_bad < src.size:
        raise ValueError(f"{who}: the value at flat index {first_bad} ({src.reshape(-1)[first_bad]}) has no code in {f}")
    if target_dtype is None:
        return torch.from_numpy(codes.view(_TORCH_CODES[nbytes])) if source.is_torch else codes
    if not source.is_torch:
        return codes.view(target_dtype)
    if target_dtype == interop.TORCH_FP4_X2:
        return torch.from_numpy(_pack_nibbles(codes, who)).view(target_dtype)
    return torch.from_numpy(codes.view(_TORCH_CODES[nbytes])).view(target_dtype)


def _is_double(dtype, who):
    """False for float32 (and None), True for float64, as a torch or NumPy dtype."""
    if dtype is None or dtype is torch.float32:
        return False
    if dtype is torch.float64:
        return True
    try:
        d = None if isinstance(dtype, torch.dtype) else np.dtype(dtype)
    except TypeError:
        d = None
    if d == np.float32 or d == np.float64:
        return d == np.float64
    raise TypeError(f"{who}: dtype must be float32 or float64, not {dtype}")


def decode(codes, fmt=None, dtype=None):
    """The values of codes in fmt, as float32 (default) or float64.

    codes: integer codes (bits above the format's width are ignored), or a tensor/array of a dtype
    that holds a format's codes (torch.float8_e4m3fn, torch.float4_e2m1fn_x2, ml_dtypes'
    types, bfloat16, float16: minifloat.format_of), whose format is then the default for fmt.
    torch dtypes for torch codes, NumPy dtypes for arrays."""
    if _traced(codes):
        who = "minifloat.decode"
        return torch.ops.minifloat.decode(codes, _traced_decode_key(fmt._key if isinstance(fmt, Format) else fmt,
                                                                    codes.dtype), _is_double(dtype, who))
    return _decode(codes, fmt, dtype)


def _decode(codes, fmt, dtype):
    who = "minifloat.decode"
    if _on_cuda(codes) and fmt is not None and codes.dtype in _TORCH_CODES_DTYPES.values():
        from . import _cuda
        f = as_format(fmt, who)
        is_double = _is_double(dtype, who)
        problem = _core.conversion_problem(f._key, is_double)
        if problem:
            raise ValueError(f"{who}: {problem}")
        src = codes.contiguous()
        values = torch.empty(src.shape, dtype=torch.float64 if is_double else torch.float32, device=codes.device)
        _cuda.decode_into(src, values, f._key)
        return values
    source = Operand(codes, who, "codes")
    source.require_integer()
    if fmt is None and source.codes_format is None:
        raise TypeError(f"{who}: fmt is needed for integer codes")
    f = source.codes_format if fmt is None else as_format(fmt, who)
    if source.codes_format is not None and f != source.codes_format:
        raise ValueError(f"{who}: codes of dtype {source.dtype_name()} are codes of {source.codes_format}, not of {f}")
    is_double = _is_double(dtype, who)
    problem = _core.conversion_problem(f._key, is_double)
    if problem:
        raise ValueError(f"{who}: {problem}")
    src = source.contiguous()
    if source.codes_per_byte == 2:
        src = _unpack_nibbles(src)
    values = np.empty(src.shape, dtype=np.float64 if is_double else np.float32)
    _core.decode(address(src), src.itemsize, address(values), src.size, is_double, f._key, threads())
    return source.wrap(values)


def _bits(bits, who):
    if isinstance(bits, bool) or not isinstance(bits, int):
        raise TypeError(f"{who}: bits must be an int, not {type(bits).__name__}")
    if not 1 <= bits <= 32:
        raise ValueError(f"{who}: bits = {bits} is outside 1..32")
    return bits


def fold_seed(seed, *keys):
    """The seed of one context of a run: `seed` with each key (a step, rank, role, bucket index...)
    folded in turn by the C++ rule `minifloat::fold_seed` (include/minifloat/random.hpp), so one
    seed gives the same draws here and in a C++ trainer. Seed and keys are integers in [0, 2**64)."""
    for name, value in [("seed", seed)] + [(f"keys[{i}]", k) for i, k in enumerate(keys)]:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"fold_seed: {name} must be an integer, got {type(value).__name__}")
        if not 0 <= int(value) < 1 << 64:
            raise ValueError(f"fold_seed: {name} = {int(value)} is outside [0, 2**64)")
    return _core.fold_seed(int(seed), [int(k) for k in keys])


def pack(codes, bits):
    """Integer codes (any integer dtype and shape, row-major; each item's bits read as unsigned)
    packed densely at `bits` bits each (1..32) into a 1-D uint8 tensor/array: field i at bit i*bits
    of a little-endian stream of 32-bit words (minifloat::storage::pack; docs/storage.md).
    ValueError, writing nothing, when a code needs more than `bits` bits."""
    who = "minifloat.pack"
    source = Operand(codes, who, "codes")
    source.require_integer()
    _bits(bits, who)
    src = source.contiguous()
    words = np.zeros(_core.packed_words(src.size, bits), dtype=np.uint32)
    _core.pack(address(src), src.itemsize, src.size, bits, address(words), words.size)
    return source.wrap(words.view(np.uint8))


def unpack(packed, bits, count):
    """The first `count` fields of a pack() result: torch int32 (int64 for bits = 32), NumPy uint32."""
    who = "minifloat.unpack"
    source = Operand(packed, who, "packed")
    if source.dtype != np.uint8:
        raise TypeError(f"{who}: packed has dtype {source.dtype_name()}; expected uint8")
    _bits(bits, who)
    count = check_index(count, who, "count")
    nwords = _core.packed_words(count, bits)
    raw = source.contiguous().reshape(-1)
    if raw.size < 4 * nwords:
        raise ValueError(f"{who}: {count} fields of {bits} bits need {4 * nwords} bytes, packed has {raw.size}")
    words = np.empty(nwords, dtype=np.uint32)
    words.view(np.uint8)[:] = raw[:4 * nwords]
    fields = np.empty(count, dtype=np.uint32)
    _core.unpack(address(words), nwords, bits, count, address(fields))
    if not source.is_torch:
        return fields
    return torch.from_numpy(fields.view(np.int32) if bits < 32 else fields.astype(np.int64))


def _variant(variant, who):
    return lookup(variant, GECKO_VARIANTS, who, "variant")


def _float32_values(x, who):
    source = Operand(x, who)
    source.require_float32()
    return source, source.contiguous()


def gecko_size(x, variant="faithful"):
    """(bits, bytes) of gecko_compress_exponents(x, variant): the format's information and the buffer."""
    who = "minifloat.gecko_size"
    _, src = _float32_values(x, who)
    return _core.gecko_encoded_size(address(src), src.size, _variant(variant, who))


def gecko_compress_exponents(x, variant="faithful"):
    """The exponent fields of float32 x (row-major), Gecko-compressed (docs/gecko.md): faithful
    (the paper's groups of 8, bias 127) or improved (per-tensor base, zero bitmap). A uint8 buffer."""
    who = "minifloat.gecko_compress_exponents"
    source, src = _float32_values(x, who)
    return source.wrap(_core.gecko_encode_exponents(address(src), src.size, _variant(variant, who)))


def _bytes(buffer, who):
    source = Operand(buffer, who, "buffer")
    if source.dtype != np.uint8:
        raise TypeError(f"{who}: buffer has dtype {source.dtype_name()}; expected uint8")
    return source, source.contiguous().reshape(-1)


def gecko_decompress_exponents(buffer, count, variant="faithful"):
    """The `count` exponent fields (uint8) a gecko_compress_exponents buffer holds. ValueError
    naming the defect for truncated, over-long or non-canonical input."""
    who = "minifloat.gecko_decompress_exponents"
    source, raw = _bytes(buffer, who)
    count = check_index(count, who, "count")
    v = _variant(variant, who)
    # Each group of 8 exponents takes at least 4 bits in either variant (docs/gecko.md), so a larger
    # count is a truncated buffer: said before the output is allocated.
    if count > 16 * raw.size + 8:
        raise ValueError(f"{who}: {raw.size} bytes cannot hold {count} exponents (the buffer is truncated or count "
                         "is wrong)")
    exponents = np.empty(count, dtype=np.uint8)
    _core.gecko_decode_exponents(address(raw), raw.size, count, v, address(exponents))
    return source.wrap(exponents)


def gecko_compress(x, mantissa_bits=23, variant="faithful", rounding="toward_zero", overflow="infinity", seed=0,
                   index=0, checksum=True):
    """float32 x (row-major) as one Gecko tensor buffer (uint8): header, sign + top `mantissa_bits`
    mantissa bits per value, Gecko exponents (minifloat::storage::gecko_encode_tensor). The dropped
    mantissa bits are truncated (rounding="toward_zero") or x is rounded to fp(8, mantissa_bits)
    first. mantissa_bits = 23 keeps every float bit for bit. checksum=True (the default) appends a
    CRC-32 that gecko_decompress checks, so a corrupted buffer raises ValueError."""
    who = "minifloat.gecko_compress"
    source, src = _float32_values(x, who)
    if isinstance(mantissa_bits, bool) or not isinstance(mantissa_bits, int):
        raise TypeError(f"{who}: mantissa_bits must be an int, not {type(mantissa_bits).__name__}")
    if not isinstance(checksum, bool):
        raise TypeError(f"{who}: checksum must be a bool, not {type(checksum).__name__}")
    opts = rounding_options(who, rounding, overflow, seed, index, 0)
    return source.wrap(_core.gecko_encode_tensor(address(src), src.size, _variant(variant, who), mantissa_bits, opts,
                                                 checksum))


def gecko_decompress(buffer, shape=None):
    """The float32 values of a gecko_compress buffer (1-D, or reshaped to `shape`)."""
    who = "minifloat.gecko_decompress"
    source, raw = _bytes(buffer, who)
    _, _, count = _core.gecko_tensor_header(address(raw), raw.size)
    if shape is not None and int(np.prod(shape, dtype=np.int64)) != count:
        raise ValueError(f"{who}: shape {tuple(shape)} does not hold the {count} stored values")
    values = np.empty(count, dtype=np.float32)
    _core.gecko_decode_tensor(address(raw), raw.size, address(values), count)
    return source.wrap(values if shape is None else values.reshape(shape))


from . import _custom_ops  # noqa: E402  (registers the operators, which call the functions above)
from ._custom_ops import operator_args as _operator_args  # noqa: E402  (a function: no aliasing guard under torch.compile)
from . import blocks as _blocks  # noqa: E402  (blocks.py builds on the functions above)
