"""Max pooling with its Y/GY sites, keeping the argmax indices for backward bit-packed.

torch's max_pool2d saves for backward its input and the int64 position of each output's maximum
in the input plane (h·W + w): 64 bits per output value. Which of the window's kH·kW positions won
needs only ceil(log2(kH·kW)) bits (4 for ResNet's 3×3 pool), so `_MaxPool2dSite` keeps the
position inside the window instead, bit-packed at that width by the library's bit-packing
(minifloat.pack, storage/bitpack.hpp), and turns it back into the plane index for torch's own
max_pool2d backward: the conversion is exact integer arithmetic, so backward gets the very indices
torch computed. The packed words are saved through ctx.save_for_backward, so a SavedTensorStore
counts their real bytes (category "other"); in its "fp32" mode, or without a store, the int64
indices are kept as torch keeps them. The input is not saved (its shape is all backward needs).
"""

from __future__ import annotations

import torch
from torch import nn

from .._ops import pack, unpack


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class PoolGeometry:
    """kernel, stride, padding, dilation of a 2-d pooling window (each a pair)."""

    def __init__(self, pool: nn.MaxPool2d):
        self.kernel = _pair(pool.kernel_size)
        self.stride = _pair(pool.stride if pool.stride is not None else pool.kernel_size)
        self.padding = _pair(pool.padding)
        self.dilation = _pair(pool.dilation)
        self.ceil_mode = bool(pool.ceil_mode)
        self.bits = max(1, (self.kernel[0] * self.kernel[1] - 1).bit_length())

    def _origins(self, out_h, out_w):
        """The top-left input coordinate of each output's window, as (out_h, 1) and (1, out_w)."""
        h0 = torch.arange(out_h, dtype=torch.int64).mul_(self.stride[0]).sub_(self.padding[0]).view(-1, 1)
        w0 = torch.arange(out_w, dtype=torch.int64).mul_(self.stride[1]).sub_(self.padding[1]).view(1, -1)
        return h0, w0

    def window_codes(self, indices: torch.Tensor, in_w: int) -> torch.Tensor:
        """Plane indices h·W + w (N, C, out_h, out_w) → positions i·kW + j inside each window."""
        h0, w0 = self._origins(indices.shape[-2], indices.shape[-1])
        i = torch.div(indices, in_w, rounding_mode="floor").sub_(h0).div_(self.dilation[0], rounding_mode="floor")
        j = torch.remainder(indices, in_w).sub_(w0).div_(self.dilation[1], rounding_mode="floor")
        return i.mul_(self.kernel[1]).add_(j)

    def plane_indices(self, codes: torch.Tensor, in_w: int) -> torch.Tensor:
        """The inverse of window_codes (codes shaped like the output)."""
        h0, w0 = self._origins(codes.shape[-2], codes.shape[-1])
        codes = codes.to(torch.int64)
        h = torch.div(codes, self.kernel[1], rounding_mode="floor").mul_(self.dilation[0]).add_(h0)
        w = torch.remainder(codes, self.kernel[1]).mul_(self.dilation[1]).add_(w0)
        return h.mul_(in_w).add_(w)


class _MaxPool2dSite(torch.autograd.Function):
    """max_pool2d, its output rounded at site Y; backward rounds the gradient at GY, then torch's
    max_pool2d backward with the indices decoded from their packed window positions."""

    @staticmethod
    def forward(ctx, x, owner, geometry: PoolGeometry, forward, backward):
        g = geometry
        out, indices = torch.nn.functional.max_pool2d(x.detach(), g.kernel, g.stride, g.padding, g.dilation,
                                                      g.ceil_mode, return_indices=True)
        out = out.contiguous()
        ctx.kept = owner._round(forward, out) if forward is not None else None
        owner._note(out, forward, "activation")
        ctx.owner, ctx.backward_site, ctx.geometry = owner, backward, g
        ctx.input_shape, ctx.out_shape = x.shape, out.shape
        store = owner.saved_store
        ctx.packed = store is not None and store._active and store.mode != "fp32"
        if ctx.packed:
            ctx.save_for_backward(pack(g.window_codes(indices, x.shape[-1]), g.bits))
        else:
            ctx.save_for_backward(indices)
        return out

    @staticmethod
    def backward(ctx, grad):
        (saved,) = ctx.saved_tensors
        g = ctx.owner._rounded_gradient(ctx.backward_site, grad, ctx.kept)
        geo = ctx.geometry
        if ctx.packed:
            count = 1
            for d in ctx.out_shape:
                count *= d
            codes = unpack(saved, geo.bits, count).view(ctx.out_shape)
            indices = geo.plane_indices(codes, ctx.input_shape[-1])
        else:
            indices = saved
        # The input's values are not read by the backward, only its shape.
        shape_only = torch.empty(ctx.input_shape, dtype=g.dtype)
        gx = torch.ops.aten.max_pool2d_with_indices_backward(g, shape_only, list(geo.kernel), list(geo.stride),
                                                             list(geo.padding), list(geo.dilation), geo.ceil_mode,
                                                             indices)
        return gx, None, None, None, None


class MaxPoolSites(nn.Module):
    """Replaces an nn.MaxPool2d in the traced graph: the pool with its Y and GY sites."""

    def __init__(self, owner, pool: nn.MaxPool2d, y, gy):
        super().__init__()
        self._owner = [owner]
        self.geometry = PoolGeometry(pool)
        self.y, self.gy = y, gy

    def forward(self, x):
        return _MaxPool2dSite.apply(x, self._owner[0], self.geometry, self.y, self.gy)


def is_plain_max_pool(module) -> bool:
    """An nn.MaxPool2d that returns only its output (the kind MaxPoolSites replaces)."""
    return type(module) is nn.MaxPool2d and not module.return_indices
