"""QPyTorch's qtorch.quant.float_quantize with its exact semantics, on minifloat's kernels.

    from minifloat.compat.qtorch import float_quantize   # was: from qtorch.quant import float_quantize

The rules (minifloat/compat/qtorch.hpp, docs/python.md): "nearest" rounds ties away from zero
in float's own binade; the top binade is finite (max = 2^(2^(exp-1)) * (2 - 2^-man)) and any
larger result, Inf and NaN saturate to ±max (exp < 8); below 2^(2 - 2^(exp-1)) values are
rounded on the subnormal grid after a float addition, and a zero result is +0.
"""

import numpy as np
import torch

from .. import _core
from .._arguments import check_index
from .._buffers import Operand, address, lookup, threads

ROUNDING = ("stochastic", "nearest")


def float_quantize(x, exp, man, rounding="stochastic", seed=0, index=0):
    """x (a float32 CPU tensor) quantized to QPyTorch's float format with `exp` exponent and `man`
    mantissa bits; rounding "stochastic" (QPyTorch's default) or "nearest". Returns a new tensor.
    Stochastic draws are minifloat's counter-based ones, keyed by (seed, index + flat index)."""
    who = "minifloat.compat.qtorch.float_quantize"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who}: x must be a torch.Tensor, not {type(x).__name__}")
    source = Operand(x, who)
    source.require_float32()
    for name, value in (("exp", exp), ("man", man)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{who}: {name} must be an int, not {type(value).__name__}")
    problem = _core.qtorch_problem(exp, man)
    if problem:
        raise ValueError(f"{who}: {problem}")
    stochastic = lookup(rounding, ROUNDING, who, "rounding") == 0
    src = source.contiguous()
    out = np.empty(src.shape, dtype=np.float32)
    _core.qtorch_quantize(address(src), address(out), src.size, exp, man, stochastic,
                          check_index(seed, who, "seed"), check_index(index, who, "index"), threads())
    return torch.from_numpy(out)
