"""Block-scaled formats (OCP MX, NVFP4) over tensors and arrays; every rule is block.hpp's.

A block format is an element format, a block size and a scale encoding (docs/formats.md §8).
quantize_blocks fake-quantizes float32 data along any axis, encode_blocks gives the element and
scale codes (in torchao's byte layout), decode_blocks gives the values back. The blocks run along
`axis`: the data is seen, without a copy, as (before, length, after) with before the product of
the dimensions ahead of the axis and after the product of those behind it, and every block is
`block_size` consecutive positions along the axis (the last one of each line shorter when the
block size does not divide the length). Stochastic rounding draws the value at row-major flat
index i of the tensor from (seed, index + i), whatever the axis and however the work is split.
"""

import math
from collections import namedtuple

import numpy as np
import torch

from . import _core
from ._buffers import Operand, address, lookup, threads
from ._formats import Format, as_format
from ._ops import RoundingStats, _cuda_target, _on_cuda, _output, _run_into, mark_written, rounding_options

SCALE_RULES = tuple(_core.scale_rule_names)
BLOCK_SCALINGS = tuple(_core.block_scaling_names)


class BlockFormat:
    """A block-scaled format: element format, block size and how the block scale is stored
    (e8m0: an OCP MX power of two; e4m3_times_tensor: NVFP4's E4M3 scale times an fp32
    per-tensor scale). Immutable, hashable, picklable."""

    __slots__ = ("_key",)

    def __init__(self, element, block_size=32, scaling="e8m0", integer_elements=None):
        who = "minifloat.blocks.block_format"
        element = as_format(element, who)
        if isinstance(block_size, bool) or not isinstance(block_size, int):
            raise TypeError(f"{who}: block_size must be an int, not {type(block_size).__name__}")
        scaling_index = lookup(scaling, BLOCK_SCALINGS, who, "scaling")
        if integer_elements is None:
            integer_elements = element == _INT8_MX  # MXINT8's two's-complement codes
        if not isinstance(integer_elements, bool):
            raise TypeError(f"{who}: integer_elements must be a bool, not {type(integer_elements).__name__}")
        if not -2**31 <= block_size < 2**31:  # block.hpp names the range it takes; this keeps the value a C int
            raise ValueError(f"{who}: block_size = {block_size} does not fit a C int")
        key = (element._key, block_size, scaling_index, integer_elements)
        problem = _core.block_format_problem(key)
        if problem:
            raise ValueError(f"{who}: {problem}")
        object.__setattr__(self, "_key", key)

    @classmethod
    def _from_key(cls, key):
        element, block_size, scaling, integer = key
        return cls(Format._from_key(element), block_size, BLOCK_SCALINGS[scaling], integer)

    element = property(lambda self: Format._from_key(self._key[0]))
    block_size = property(lambda self: self._key[1])
    scaling = property(lambda self: BLOCK_SCALINGS[self._key[2]])
    integer_elements = property(lambda self: self._key[3])

    @property
    def bits_per_value(self):
        """Storage per value, scales included (MXFP4: 4 + 8 / 32 = 4.25)."""
        return self.element.bit_width + 8 / self.block_size

    @property
    def packed(self):
        """True when encode_blocks packs two element codes per byte (4-bit elements)."""
        return self.element.bit_width == 4

    def __setattr__(self, name, value):
        raise AttributeError("minifloat.blocks.BlockFormat is immutable")

    def __eq__(self, other):
        return isinstance(other, BlockFormat) and self._key == other._key

    def __hash__(self):
        return hash(("minifloat.blocks.BlockFormat", self._key))

    def __reduce__(self):
        return (BlockFormat, (self.element, self.block_size, self.scaling, self.integer_elements))

    def __repr__(self):
        return (f"minifloat.blocks.block_format({self.element!r}, block_size={self.block_size}, "
                f"scaling={self.scaling!r}, integer_elements={self.integer_elements})")

    def __str__(self):
        return _core.block_format_string(self._key)


_INT8_MX = Format._from_key(dict(_core.named_formats)["int8_mx"])

block_format = BlockFormat  # the function-style spelling, as minifloat.format

#: The named block formats of block.hpp (named_block_formats), by their C++ names
#: (mxfp8-e4m3, ...); as_block_format also takes them with underscores.
NAMED_BLOCKS = {name: BlockFormat._from_key(key) for name, key in _core.named_block_formats}

mxfp8_e4m3 = NAMED_BLOCKS["mxfp8-e4m3"]
mxfp8_e5m2 = NAMED_BLOCKS["mxfp8-e5m2"]
mxfp6_e3m2 = NAMED_BLOCKS["mxfp6-e3m2"]
mxfp6_e2m3 = NAMED_BLOCKS["mxfp6-e2m3"]
mxfp4 = NAMED_BLOCKS["mxfp4"]
mxint8 = NAMED_BLOCKS["mxint8"]
nvfp4 = NAMED_BLOCKS["nvfp4"]


def as_block_format(fmt, who):
    """A BlockFormat from a BlockFormat or a name of NAMED_BLOCKS ('mxfp4', 'mxfp8-e4m3' or 'mxfp8_e4m3')."""
    if isinstance(fmt, BlockFormat):
        return fmt
    if isinstance(fmt, str):
        found = NAMED_BLOCKS.get(fmt, NAMED_BLOCKS.get(fmt.replace("_", "-")))
        if found is None:
            raise ValueError(f"{who}: fmt={fmt!r} is not one of {', '.join(NAMED_BLOCKS)}")
        return found
    raise TypeError(f"{who}: fmt must be a minifloat.blocks.BlockFormat or a block format name, "
                    f"not {type(fmt).__name__}")


class BlockStats(namedtuple("BlockStats", "elements blocks scale_clamped nan_blocks")):
    """What a block pass saw (minifloat::block_stats): `elements` counts the scaled values V / X as
    RoundingStats (overflows = saturations, underflows = nonzero values that became 0), `blocks`
    the blocks, `scale_clamped` those whose scale hit the scale format's range (NVFP4: or rounded
    to 0), `nan_blocks` those whose scale is NaN (a NaN or Inf inside)."""

    __slots__ = ()


class BlockCodes(namedtuple("BlockCodes", "elements scales tensor_scale")):
    """encode_blocks' result: element codes (uint8), scale codes (uint8) and the fp32 per-tensor
    scale (NVFP4's S_t; 1.0 for MX). decode_blocks(codes, fmt, ...) takes them back."""

    __slots__ = ()


def _stats(raw):
    elements, blocks, clamped, nan_blocks = raw
    return BlockStats(RoundingStats(*elements), blocks, clamped, nan_blocks)


def _geometry(shape, axis, who):
    """(before, length, after) of a shape with blocks along `axis`; a 0-d value is one line of one."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"{who}: axis must be an int, not {type(axis).__name__}")
    shape = tuple(shape) or (1,)
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"{who}: axis = {axis} is out of range for {len(shape)} dimension"
                         f"{'s' if len(shape) != 1 else ''}")
    axis %= len(shape)
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:]), axis


def _tensor_scale(tensor_scale, f, who, required=False):
    """NVFP4's per-tensor decode scale as the extension takes it (0.0 = computed from the data)."""
    if tensor_scale is None:
        if required and f.scaling != "e8m0":
            raise ValueError(f"{who}: tensor_scale is required for {f}: pass codes as (elements, scales, tensor_scale) "
                             "or encode_blocks' BlockCodes")
        return 0.0 if f.scaling != "e8m0" else 1.0
    if isinstance(tensor_scale, (torch.Tensor, np.ndarray)):
        if (tensor_scale.size if isinstance(tensor_scale, np.ndarray) else tensor_scale.numel()) != 1:
            raise ValueError(f"{who}: tensor_scale must hold one value, not {tuple(tensor_scale.shape)}")
        tensor_scale = tensor_scale.item()
    if isinstance(tensor_scale, bool) or not isinstance(tensor_scale, (int, float)):
        raise TypeError(f"{who}: tensor_scale must be a float, not {type(tensor_scale).__name__}")
    if f.scaling == "e8m0":
        if tensor_scale != 1:
            raise ValueError(f"{who}: tensor_scale is for block formats with a per-tensor scale (nvfp4), not {f}")
        return 1.0
    with np.errstate(over="ignore"):  # a value beyond float32 becomes Inf, refused below
        value = float(np.float32(tensor_scale))  # the fp32 the kernels use
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{who}: tensor_scale = {tensor_scale} is not a positive finite float32")
    return value


def _options(who, f, rounding, scale_rule, overflow, seed, index, random_bits, tensor_scale):
    mode, on_overflow, bits, seed, index = rounding_options(who, rounding, overflow, seed, index, random_bits)
    rule = lookup(scale_rule, SCALE_RULES, who, "scale_rule")
    if f.scaling != "e8m0" and scale_rule != SCALE_RULES[0]:
        raise ValueError(f"{who}: scale_rule={scale_rule!r} is for E8M0 (MX) scales; {f} rounds its E4M3 scale "
                         "to nearest")
    opts = (mode, on_overflow, bits, seed, index, rule, _tensor_scale(tensor_scale, f, who))
    _core.check_block_options(f._key, opts)  # ValueError naming the field, before anything is written
    return opts


def _checked(who, x, fmt, axis, rounding, scale_rule, overflow, seed, index, random_bits, tensor_scale, stats):
    """What quantize_blocks and encode_blocks check first, in their order: (the float32 operand,
    the BlockFormat, its (before, length, after, axis) geometry, the options tuple)."""
    source = Operand(x, who)
    source.require_float32()
    f = as_block_format(fmt, who)
    geometry = _geometry(source.array.shape, axis, who)
    opts = _options(who, f, rounding, scale_rule, overflow, seed, index, random_bits, tensor_scale)
    if not isinstance(stats, bool):
        raise TypeError(f"{who}: stats must be a bool, not {type(stats).__name__}")
    return source, f, geometry, opts


def quantize_blocks(x, fmt, *, axis=-1, rounding="nearest_even", scale_rule="floor", overflow="saturate", seed=0,
                    index=0, random_bits=0, tensor_scale=None, stats=False, out=None):
    """x fake-quantized to the block format `fmt` along `axis`: each block's scale found, every
    element rounded with the core and multiplied back by the scale (block.hpp quantize_blocks).

    x: a float32 CPU torch.Tensor or numpy.ndarray, any shape and strides. Returns a new tensor/array
    of x's kind and shape (or writes into `out`, which may be x itself). fmt: a BlockFormat or a name
    in NAMED_BLOCKS. rounding: any mode of ROUNDING; overflow: saturate (the MX spec's) | infinity.
    scale_rule: one of SCALE_RULES (MX only). tensor_scale: NVFP4's fp32 S_t (None: the tensor's
    finite amax / (6 * 448)). Stochastic rounding draws flat index i from (seed, index + i).
    stats=True returns (result, BlockStats). Not differentiable (x is read through detach())."""
    who = "minifloat.blocks.quantize_blocks"
    if _on_cuda(x):
        return _quantize_blocks_cuda(who, x, fmt, axis, rounding, scale_rule, overflow, seed, index, random_bits,
                                     tensor_scale, stats, out)
    source, f, (before, length, after, _), opts = _checked(who, x, fmt, axis, rounding, scale_rule, overflow, seed,
                                                           index, random_bits, tensor_scale, stats)
    target = _output(source, out, who)  # kind, dtype, shape, writable, no element sharing memory
    if target is not None and target.is_torch and target.tensor.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"{who}: out requires grad; write under torch.no_grad()")
    if target is not None and not target.aliases:  # a negative view: compute, then copy through torch
        value, counts = quantize_blocks(x, f, axis=axis, rounding=rounding, scale_rule=scale_rule, overflow=overflow,
                                        seed=seed, index=index, random_bits=random_bits, tensor_scale=tensor_scale,
                                        stats=True)
        with torch.no_grad():
            target.tensor.copy_(value)
        return (target.tensor, counts) if stats else target.tensor
    counts = []

    def kernel(src, dst):
        counts.append(_core.quantize_blocks(address(src), address(dst), before, length, after, f._key, opts, threads(),
                                            stats))

    result = _run_into(source, target, kernel)
    if target is not None and target.is_torch:
        mark_written(target.tensor)
    value = out if target is not None else source.wrap(result)
    return (value, _stats(counts[0])) if stats else value


def _quantize_blocks_cuda(who, x, fmt, axis, rounding, scale_rule, overflow, seed, index, random_bits, tensor_scale,
                          stats, out):
    """quantize_blocks of a CUDA tensor by the GPU kernels (minifloat._cuda): the same scale rules
    and element rounding as the CPU, the result on x's device."""
    from . import _cuda
    if x.dtype != torch.float32:
        raise TypeError(f"{who}: x has dtype {x.dtype}; block formats take float32")
    f = as_block_format(fmt, who)
    before, length, after, _ = _geometry(x.shape, axis, who)
    opts = _options(who, f, rounding, scale_rule, overflow, seed, index, random_bits, tensor_scale)
    if not isinstance(stats, bool):
        raise TypeError(f"{who}: stats must be a bool, not {type(stats).__name__}")
    target = _cuda_target(who, x, out, False)
    src = x.detach().contiguous()
    dst = target.detach() if target is not None and target.is_contiguous() else torch.empty_like(src)
    counts = _cuda.quantize_blocks_into(src, dst, (before, length, after), f._key, opts, stats)
    if target is not None and dst.data_ptr() != target.data_ptr():
        with torch.no_grad():
            target.copy_(dst)
    result = target if target is not None else dst
    return (result, _stats(counts)) if stats else result


def _scale_shape(shape, axis, f):
    shape = tuple(shape) or (1,)
    return shape[:axis] + (-(-shape[axis] // f.block_size),) + shape[axis + 1:]


def _packed_shape(shape):
    """Two 4-bit codes per byte over the row-major values: the last dimension halved when it is
    even (torchao's layout), else one flat run of ceil(n / 2) bytes."""
    shape = tuple(shape) or (1,)
    if shape[-1] % 2 == 0:
        return shape[:-1] + (shape[-1] // 2,)
    return (-(-math.prod(shape) // 2),)


def encode_blocks(x, fmt, *, axis=-1, rounding="nearest_even", scale_rule="floor", overflow="saturate", seed=0,
                  index=0, random_bits=0, tensor_scale=None, stats=False):
    """The codes of x in the block format `fmt` along `axis`, as BlockCodes(elements, scales,
    tensor_scale) (with stats=True: (BlockCodes, BlockStats)); options as quantize_blocks.

    elements (uint8): one code per value in x's shape (MXINT8: the two's-complement byte, view it
    as int8), except 4-bit elements (MXFP4, NVFP4): two per byte over the row-major values, value
    2i in the low nibble of byte i, shaped as torchao's qdata (last dimension halved) when the last
    dimension is even. scales (uint8): E8M0 (MX) or E4M3 (NVFP4) codes, x's shape with the axis
    dimension replaced by the number of blocks along it. A NaN/Inf block: scale NaN (0xFF / 0x7F),
    elements the element format's NaN code, or 0 where it has none."""
    who = "minifloat.blocks.encode_blocks"
    source, f, (before, length, after, ax), opts = _checked(who, x, fmt, axis, rounding, scale_rule, overflow, seed,
                                                            index, random_bits, tensor_scale, stats)
    src = source.contiguous()
    n = src.size
    if f.packed:
        # whole 32-bit words for the kernel's packed writer; the result is a view of its bytes
        words = np.zeros(-(-n // 8), dtype=np.uint32)
        elements = words.view(np.uint8)[:(n + 1) // 2].reshape(_packed_shape(src.shape))
        element_address = address(words)
    else:
        elements = np.empty(src.shape, dtype=np.uint8)
        element_address = address(elements)
    scales = np.empty(_scale_shape(src.shape, ax, f), dtype=np.uint8)
    used_scale, counts = _core.encode_blocks(address(src), element_address, address(scales), f.packed, before, length,
                                             after, f._key, opts, threads(), stats)
    codes = BlockCodes(source.wrap(elements), source.wrap(scales), used_scale)
    return (codes, _stats(counts)) if stats else codes


_TORCH_BYTE_DTYPES = tuple(d for d in (torch.uint8, torch.int8, getattr(torch, "float8_e4m3fn", None),
                                       getattr(torch, "float8_e5m2", None), getattr(torch, "float8_e8m0fnu", None),
                                       getattr(torch, "float4_e2m1fn_x2", None)) if d is not None)


def _byte_operand(codes, who, name):
    """A uint8 view of integer or torch 8-bit float/scale codes (torchao's qdata and scale dtypes)."""
    if isinstance(codes, torch.Tensor) and codes.dtype in _TORCH_BYTE_DTYPES and codes.dtype is not torch.uint8:
        if codes.device.type != "cpu":
            raise TypeError(f"{who}: {name} is a {codes.device.type} tensor; this build of minifloat runs on CPU "
                            f"tensors only (move it with .cpu())")
        codes = codes.view(torch.uint8)
    source = Operand(codes, who, name)
    if source.dtype not in (np.uint8, np.int8):
        raise TypeError(f"{who}: {name} has dtype {source.dtype_name()}; expected uint8 or int8 (or a torch 8-bit "
                        "float / float4_e2m1fn_x2 dtype)")
    return source


def decode_blocks(codes, fmt, *, axis=-1, shape=None):
    """The float32 values of block codes: element value times its block's decoded scale (times S_t
    for NVFP4), NaN where the scale is NaN; equal bit for bit to quantize_blocks with the same options.

    codes: encode_blocks' BlockCodes, or a tuple (elements, scales) or (elements, scales,
    tensor_scale) laid out as encode_blocks lays them (for axis -1, torchao's qdata and scale).
    elements: uint8/int8 codes (or torch float8_e4m3fn, float8_e5m2, float4_e2m1fn_x2 views of them);
    scales: uint8 (or torch float8_e8m0fnu / float8_e4m3fn). tensor_scale: NVFP4's S_t (required
    there). shape: the values' shape; by default elements' shape, or for packed 4-bit codes that shape
    with the last dimension doubled. Returns the elements' kind (tensor or array)."""
    who = "minifloat.blocks.decode_blocks"
    if not isinstance(codes, (tuple, list)) or len(codes) not in (2, 3):
        raise TypeError(f"{who}: codes must be encode_blocks' BlockCodes or a tuple (elements, scales[, tensor_scale]), "
                        f"not {type(codes).__name__}" + (f" of {len(codes)} items" if isinstance(codes, (tuple, list))
                                                         else ""))
    elements, scales = codes[0], codes[1]
    tensor_scale = codes[2] if len(codes) == 3 else None
    codes = _byte_operand(elements, who, "elements")
    scale_codes = _byte_operand(scales, who, "scales")
    if codes.is_torch != scale_codes.is_torch:
        raise TypeError(f"{who}: elements and scales must both be torch tensors or both numpy arrays")
    f = as_block_format(fmt, who)
    t = _tensor_scale(tensor_scale, f, who, required=True)
    if shape is None:
        shape = tuple(codes.array.shape)
        if f.packed:
            shape = (shape or (1,))[:-1] + (2 * (shape or (1,))[-1],)
    else:
        try:
            shape = tuple(int(d) for d in shape)
        except TypeError:
            raise TypeError(f"{who}: shape must be a sequence of ints, not {type(shape).__name__}") from None
        if any(d < 0 for d in shape):
            raise ValueError(f"{who}: shape {shape} has a negative dimension")
    before, length, after, ax = _geometry(shape, axis, who)
    n = before * length * after
    expected = (n + 1) // 2 if f.packed else n
    if codes.array.size != expected:
        raise ValueError(f"{who}: elements holds {codes.array.size} codes; {expected} "
                         f"{'bytes of packed 4-bit codes' if f.packed else 'codes'} expected for shape {shape}")
    expected_scales = _scale_shape(shape, ax, f)
    if tuple(scale_codes.array.shape) != expected_scales and not (
            scale_codes.array.ndim == 1 and scale_codes.array.size == math.prod(expected_scales)):
        raise ValueError(f"{who}: scales has shape {tuple(scale_codes.array.shape)}; {expected_scales} expected "
                         f"for shape {shape} with blocks along axis {axis}")
    element_bytes = codes.contiguous()
    scale_bytes = scale_codes.contiguous()  # held until the call returns
    values = np.empty(shape, dtype=np.float32)
    _core.decode_blocks(address(element_bytes), element_bytes.size, f.packed, address(scale_bytes),
                        address(values), before, length, after, f._key, t, threads())
    return codes.wrap(values)


__all__ = ["BlockFormat", "BlockStats", "BlockCodes", "block_format", "as_block_format", "NAMED_BLOCKS",
           "SCALE_RULES", "BLOCK_SCALINGS", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8",
           "nvfp4", "quantize_blocks", "encode_blocks", "decode_blocks"]
