"""The straight-through rounding op: forward rounds to one format, backward passes the gradient
through, optionally rounded to a second format (the mixed-precision-training paper's rounding
of the gradient, "rnd on dv"), each with its own mode, overflow policy and seed.

It is the custom operator torch.ops.minifloat.quantize_ste (_custom_ops.py), whose autograd
formula is the straight-through one, so it works the same eagerly, under torch.compile and in
torch.export."""

import torch

from ._custom_ops import to_signed
from ._ops import _format_name, rounding_options


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
    rounding_options(who, rounding, overflow, seed, index, random_bits)
    grad_name = None
    if grad_format is not None:
        grad_name = _format_name(grad_format, who + " (grad_format)")
        rounding_options(who, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits, prefix="grad_")
    return torch.ops.minifloat.quantize_ste(x, _format_name(fmt, who), rounding, overflow, to_signed(seed),
                                            to_signed(index), random_bits, grad_name, grad_rounding, grad_overflow,
                                            to_signed(grad_seed), to_signed(grad_index), grad_random_bits)
