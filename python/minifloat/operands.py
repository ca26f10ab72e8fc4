"""GEMM operands as low-precision training recipes quantize them, and emulated accumulation;
every rule is the C++ headers' (hadamard.hpp, operand.hpp, emulated_gemm.hpp; docs/recipes.md).

For C = A @ B (A: M x K, B: K x N; K is the reduction axis):

- quantize_operand blocks an operand along K as the hardware does, for A, B or a stored transpose
  (nn.Linear's weight W, N x K, is B stored transposed);
- quantize_tiles gives 2-D tiles (16 x 16 by default) whose scale W and W^T share, so both GEMMs
  that read a weight see the same values;
- quantize_four_over_six is NVFP4 with the per-block "4 over 6" choice (arXiv:2512.02010);
- hadamard_transform is the blockwise random Hadamard transform; RandomHadamard keeps its sign
  vector as a buffer, so it is saved and restored with the model's state dict;
- emulated_gemm rounds every product and running sum to given formats, with optional fp32
  promotion every N elements of K.

Stochastic rounding draws from (seed, element index) as everywhere in minifloat; fold the training
step and the GEMM role into the seed with minifloat.fold_seed(seed, step, role).
"""

import numpy as np
import torch

from . import _core
from ._arguments import check_index
from ._buffers import Operand, address, lookup, threads
from ._formats import Format, as_format
from ._ops import OVERFLOW, ROUNDING, RoundingStats, _output, _run_into, mark_written
from .blocks import _geometry, _options, _stats, as_block_format, quantize_blocks

SIDES = ("left", "right")


def _float32_source(x, who, name="x", dims=None):
    source = Operand(x, who, name)
    source.require_float32()
    if dims is not None and source.array.ndim not in dims:
        raise ValueError(f"{who}: {name} has {source.array.ndim} dimensions; expected "
                         f"{' or '.join(str(d) for d in dims)}")
    return source


def _bool(value, who, name):
    if not isinstance(value, bool):
        raise TypeError(f"{who}: {name} must be a bool, not {type(value).__name__}")
    return value


def hadamard_signs(seed, block_size=16):
    """The random sign vector (+1/-1, float32 CPU tensor of block_size) drawn from `seed`
    (minifloat::hadamard_signs: entry i is -1 when the top bit of the seed's 32-bit draw i is set).
    block_size: a power of two in 1..4096."""
    who = "minifloat.operands.hadamard_signs"
    seed = check_index(seed, who, "seed")
    if isinstance(block_size, bool) or not isinstance(block_size, int):
        raise TypeError(f"{who}: block_size must be an int, not {type(block_size).__name__}")
    if not 0 <= block_size < 1 << 63:
        raise ValueError(f"{who}: block_size = {block_size} is not a power of two in 1..4096")
    return torch.tensor(_core.hadamard_signs(seed, block_size), dtype=torch.float32)


def hadamard_transform(x, signs, *, axis=-1, inverse=False, out=None):
    """x transformed blockwise along `axis` by M = H D / sqrt(b) (inverse: M^T = D H / sqrt(b)),
    b = len(signs) (a power of two dividing the axis' length), D = diag(signs). Applying it to both
    GEMM operands along their reduction axis leaves the product unchanged in exact arithmetic.
    x: float32 CPU tensor or array; signs: float32 +1/-1 (hadamard_signs, or RandomHadamard's buffer)."""
    who = "minifloat.operands.hadamard_transform"
    source = _float32_source(x, who)
    sign_source = _float32_source(signs, who, "signs", dims=(1,))
    _bool(inverse, who, "inverse")
    before, length, after, _ = _geometry(source.array.shape, axis, who)
    sign_values = sign_source.contiguous()
    target = _output(source, out, who)

    def kernel(src, dst):
        _core.hadamard_transform(address(src), address(dst), before, length, after, address(sign_values),
                                 sign_values.size, inverse, threads())

    result = _run_into(source, target, kernel)
    if target is not None and target.is_torch:
        mark_written(target.tensor)
    return out if target is not None else source.wrap(result)


class RandomHadamard(torch.nn.Module):
    """A blockwise random Hadamard transform whose sign vector is a buffer of the module: drawn
    once from `seed` (fold the layer and role into it with minifloat.fold_seed), then saved and
    restored with the state dict, so a restored model applies the very same transform."""

    def __init__(self, block_size=16, seed=0):
        super().__init__()
        self.register_buffer("signs", hadamard_signs(seed, block_size))

    @property
    def block_size(self):
        return self.signs.numel()

    def forward(self, x, axis=-1, inverse=False):
        return hadamard_transform(x, self.signs, axis=axis, inverse=inverse)


def reduction_axis(side="left", transposed=False):
    """The axis of the stored 2-D operand along which C = A @ B reduces: 1 for A (M x K) and for a
    stored B^T (N x K), 0 for a stored A^T (K x M) and for B (K x N)."""
    who = "minifloat.operands.reduction_axis"
    right = lookup(side, SIDES, who, "side") == 1
    return _core.reduction_axis(right, _bool(transposed, who, "transposed"))


def quantize_operand(x, fmt, *, side="left", transposed=False, **options):
    """A 2-D GEMM operand block-quantized along its reduction axis (reduction_axis(side,
    transposed)); options as minifloat.blocks.quantize_blocks (rounding, scale_rule, overflow,
    seed, index, random_bits, tensor_scale, stats, out)."""
    who = "minifloat.operands.quantize_operand"
    _float32_source(x, who, dims=(2,))
    return quantize_blocks(x, fmt, axis=reduction_axis(side, transposed), **options)


def quantize_tiles(x, fmt, *, transposed=False, tile=(16, 16), rounding="nearest_even", scale_rule="floor",
                   overflow="saturate", seed=0, index=0, random_bits=0, tensor_scale=None, stats=False, out=None):
    """x (2-D) block-quantized in 2-D tiles: every tile of tile[0] x tile[1] values of the canonical
    matrix W shares one scale (x is W, or W^T when transposed; tiles are named in W's orientation).
    W(i, j) draws with index `index` + its tile-major position, so quantize_tiles(W) and
    quantize_tiles(W.T, transposed=True) give the same values, transposed, in every mode."""
    who = "minifloat.operands.quantize_tiles"
    source = _float32_source(x, who, dims=(2,))
    f = as_block_format(fmt, who)
    _bool(transposed, who, "transposed")
    _bool(stats, who, "stats")
    if not (isinstance(tile, (tuple, list)) and len(tile) == 2 and all(isinstance(t, int) and not isinstance(t, bool)
                                                                         for t in tile)):
        raise TypeError(f"{who}: tile must be a pair of ints, not {tile!r}")
    if not all(1 <= t <= 1024 for t in tile):
        raise ValueError(f"{who}: tile {tuple(tile)} is not 1..1024 values")
    opts = _options(who, f, rounding, scale_rule, overflow, seed, index, random_bits, tensor_scale)
    rows, cols = source.array.shape
    target = _output(source, out, who)
    counts = []

    def kernel(src, dst):
        counts.append(_core.quantize_tiles(address(src), address(dst), rows, cols, transposed, tile[0], tile[1], f._key,
                                           opts, stats, threads()))

    result = _run_into(source, target, kernel)
    if target is not None and target.is_torch:
        mark_written(target.tensor)
    value = out if target is not None else source.wrap(result)
    return (value, _stats(counts[0])) if stats else value


def quantize_four_over_six(x, fmt="nvfp4", *, axis=-1, rounding="nearest_even", overflow="saturate", seed=0, index=0,
                           random_bits=0, tensor_scale=None, stats=False):
    """x (1-D or 2-D) in NVFP4 along `axis` with the "4 over 6" choice per block: the block's
    largest magnitude scaled to 6 (standard) or to 4, whichever gives the smaller squared error
    (6 on a tie). stats=True returns (result, (blocks, blocks scaled to 4))."""
    who = "minifloat.operands.quantize_four_over_six"
    source = _float32_source(x, who, dims=(1, 2))
    f = as_block_format(fmt, who)
    _bool(stats, who, "stats")
    opts = _options(who, f, rounding, "floor", overflow, seed, index, random_bits, tensor_scale)
    shape = source.array.shape
    before, length, after, ax = _geometry(shape, axis, who)
    rows, cols, layout_axis = (before, length, 1) if after == 1 else (length, after, 0)
    counts = []

    def kernel(src, dst):
        counts.append(_core.quantize_four_over_six(address(src), address(dst), rows, cols, layout_axis, f._key, opts))

    result = source.wrap(_run_into(source, None, kernel))
    return (result, counts[0]) if stats else result


#: A model (not a measurement) of Hopper's FP8 tensor-core accumulation as DeepSeek-V3 describes
#: it: products exact in fp32, sums truncated to 14 significant bits, fp32 promotion every 128.
_product, _product_mode, _accumulator, _accumulator_mode, _overflow, _promote, _bits, _seed = _core.hopper_fp8_model
HOPPER_FP8_MODEL = dict(product=Format._from_key(_product), product_rounding=ROUNDING[_product_mode],
                        accumulator=Format._from_key(_accumulator), accumulator_rounding=ROUNDING[_accumulator_mode],
                        overflow=OVERFLOW[_overflow], promote_every=_promote)


def _as_matrix(x, who, name):
    """(C-order float32 array, transposed) of a 2-D operand: a C-order matrix as it is, the
    transpose of one (x.T of a contiguous tensor) as that matrix with transposed=True, else a copy."""
    source = _float32_source(x, who, name, dims=(2,))
    a = source.array
    if a.dtype.isnative and a.flags.c_contiguous:
        return a, False, source
    if a.dtype.isnative and a.T.flags.c_contiguous:
        return a.T, True, source
    return source.contiguous(), False, source


def emulated_gemm(a, b, *, product="binary32", product_rounding="nearest_even", accumulator="binary32",
                  accumulator_rounding="nearest_even", overflow="infinity", promote_every=0, random_bits=0, seed=0):
    """C = a @ b with every product rounded to `product` and every running sum to `accumulator`
    (formats whose values are floats), partial sums promoted to an fp32 total every
    `promote_every` elements of K (0: never). Per output, k runs in order from +0; each sum is
    rounded once from its exact value. Stochastic draws: products from fold_seed(seed, 0), sums
    from fold_seed(seed, 1), at index (i * K + k) * N + j. a: M x K, b: K x N float32 CPU
    tensors or arrays (transposed views are read without a copy); returns a's kind, M x N."""
    who = "minifloat.operands.emulated_gemm"
    a_array, a_t, a_source = _as_matrix(a, who, "a")
    b_array, b_t, b_source = _as_matrix(b, who, "b")
    if a_source.is_torch != b_source.is_torch:
        raise TypeError(f"{who}: a and b must both be torch tensors or both numpy arrays")
    m, k = a_source.array.shape
    k2, n = b_source.array.shape
    if k != k2:
        raise ValueError(f"{who}: a is {m} x {k} and b is {k2} x {n}; their inner dimensions differ")
    promote_every = check_index(promote_every, who, "promote_every")
    if isinstance(random_bits, bool) or not isinstance(random_bits, int):
        raise TypeError(f"{who}: random_bits must be an int, not {type(random_bits).__name__}")
    acc = (as_format(product, who)._key, lookup(product_rounding, ROUNDING, who, "product_rounding"),
           as_format(accumulator, who)._key, lookup(accumulator_rounding, ROUNDING, who, "accumulator_rounding"),
           lookup(overflow, OVERFLOW, who, "overflow"), promote_every, random_bits, check_index(seed, who, "seed"))
    c = np.empty((m, n), dtype=np.float32)
    _core.emulated_gemm(address(a_array), address(b_array), address(c), m, n, k, a_t, b_t, acc)
    return a_source.wrap(c)


__all__ = ["SIDES", "HOPPER_FP8_MODEL", "RandomHadamard", "hadamard_signs", "hadamard_transform", "reduction_axis",
           "quantize_operand", "quantize_tiles", "quantize_four_over_six", "emulated_gemm", "RoundingStats"]
