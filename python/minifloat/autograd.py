"""The straight-through rounding op: forward rounds to one format, backward passes the gradient
through, optionally rounded to a second format (the mixed-precision-training paper's rounding
of the gradient, "rnd on dv"), each with its own mode, overflow policy and seed."""

import torch

from ._formats import as_format
from ._ops import quantize, rounding_options


class _StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, forward_args, backward_args):
        ctx.backward_args = backward_args
        return quantize(x.detach(), *forward_args)

    @staticmethod
    def backward(ctx, grad):
        if ctx.backward_args is None:
            return grad, None, None
        return quantize(grad.detach().contiguous(), *ctx.backward_args), None, None


def quantize_ste(x, fmt, rounding="nearest_even", overflow="infinity", seed=0, index=0, random_bits=0,
                 grad_format=None, grad_rounding="nearest_even", grad_overflow="infinity", grad_seed=0, grad_index=0,
                 grad_random_bits=0):
    """quantize(x, fmt, ...) with a straight-through gradient: d(out)/d(x) is taken as the identity.

    With grad_format, the incoming gradient is rounded to grad_format (grad_rounding,
    grad_overflow, stochastic draws from (grad_seed, grad_index + flat index)) before it flows on.
    Every argument is checked when the op is called, not when backward runs."""
    who = "minifloat.quantize_ste"
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{who}: x must be a torch.Tensor, not {type(x).__name__}")
    f = as_format(fmt, who)
    rounding_options(who, rounding, overflow, seed, index, random_bits)
    forward_args = (f, rounding, overflow, seed, index, random_bits)
    backward_args = None
    if grad_format is not None:
        g = as_format(grad_format, who)
        rounding_options(who, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits)
        backward_args = (g, grad_rounding, grad_overflow, grad_seed, grad_index, grad_random_bits)
    return _StraightThrough.apply(x, forward_args, backward_args)
