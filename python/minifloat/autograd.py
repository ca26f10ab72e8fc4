"""The straight-through rounding op: forward rounds to one format, backward passes the gradient
through, optionally rounded to a second format (the mixed-precision-training paper's rounding
of the gradient, "rnd on dv"), each with its own mode, overflow policy and seed.

It is the custom operator torch.ops.minifloat.quantize_ste (_custom_ops.py), whose autograd
formula is the straight-through one, so it works the same eagerly, under torch.compile and in
torch.export."""

import torch

from . import interop
from ._custom_ops import operator_args


def quantize_ste(x, fmt, rounding="nearest_even", overflow="infinity", seed=0, index=0, random_bits=0,
                 grad_format=None, grad_rounding="nearest_even", grad_overflow="infinity", grad_seed=0, grad_index=0,
                 grad_random_bits=0):
    """quantize(x, fmt, ...) with a straight-through gradient: d(out)/d(x) is taken as the identity.

    With grad_format, the incoming gradient is rounded to grad_format (grad_rounding,
    grad_overflow, stochastic draws from (grad_seed, grad_index + flat index)) before it flows on;
    a second derivative passes straight through again. Every argument, the gradient's included,
    is checked when the op is called, not when backward runs."""
    who = "minifloat.quantize_ste"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who}: x must be a torch.Tensor, not {type(x).__name__}")
    if x.dtype not in (torch.float32, torch.float64) and x.dtype in interop._TORCH:
        x = x.to(torch.float32)  # low-precision values (float8, bfloat16, ...): exactly, and differentiably
    grad = (None, 0, 0, 0, 0, 0)
    if grad_format is not None:
        grad = operator_args(None, grad_format, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits,
                             who + " (grad_format)", "grad_")[1:]
    return torch.ops.minifloat.quantize_ste(*operator_args(x, fmt, rounding, overflow, seed, index, random_bits, who),
                                            *grad)
