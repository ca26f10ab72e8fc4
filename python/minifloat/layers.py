"""Layers that train by a recipe (minifloat.recipes): every operand of the forward,
input-gradient and weight-gradient GEMMs quantized as the recipe says, gradients passed straight
through the quantization (docs/recipes.md §8-9).

- Linear: Y = X W^T + b on X's last dimension.
- Conv2d: the convolution as an implicit GEMM over the im2col matrix (rows: output pixels n, ho,
  wo; columns K ordered (kh, kw, c), channels fastest, as a channels-last implicit GEMM reads
  them); the weight as the matrix W (out x K) in the same order. Where it gives the same values
  (deterministic rounding, blocks of whole channel groups, every input pixel read), the forward
  operand is quantized on the input's pixels (N*H*W x C) instead of its im2col copies, and the
  input-gradient GEMM runs as torch's transposed convolution of the quantized operands.
- convert(model, recipe) replaces a model's nn.Linear and nn.Conv2d layers in place, keeping the
  first and last layers in fp32 if asked.

Stochastic rounding draws from fold_seed(layer seed, step, role, operand) at each operand's
element index; a layer's seed is fold_seed(run seed, layer index) and its step counts its
training forwards (the buffer `step`, saved with the state dict). The random Hadamard sign
vectors are RandomHadamard buffers (hadamard.<role>.signs), drawn from fold_seed(layer seed,
HADAMARD_KEY, role) and saved and restored with the state dict.
"""

from __future__ import annotations

from collections import namedtuple

import torch
import torch.nn.functional as F
from torch import nn

from . import operands as _ops
from . import recipes as _recipes
from ._ops import fold_seed
from .blocks import BlockFormat
from .recipes import COUNTER_FIELDS, LAYOUTS, ROLES, OPERAND_NAMES, quantize_by_rule

HADAMARD_KEY = 0x48414441  # "HADA": keeps the sign vectors' seeds apart from the rounding seeds


class _RecipeLayer:
    """What Linear and Conv2d share: the recipe, seeds, step, sign vectors, counters and probe."""

    def _setup(self, recipe, seed):
        self.recipe = _recipes.recipe(recipe)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
            raise ValueError(f"minifloat.layers: seed must be an int in [0, 2**64), not {seed!r}")
        self.seed = seed
        self.register_buffer("step", torch.zeros((), dtype=torch.int64))
        self.hadamard = nn.ModuleDict({
            role: _ops.RandomHadamard(self.recipe.gemm(role).hadamard, fold_seed(seed, HADAMARD_KEY, r))
            for r, role in enumerate(ROLES) if self.recipe.gemm(role).hadamard})
        self.reset_counters()
        #: None, or a list to which every quantized GEMM operand is appended as a dict (role,
        #: operand, index, seed, step, value): what the GEMM multiplies, for tests and inspection.
        self.probe = None

    def reset_counters(self):
        self.counters = {role: dict.fromkeys(COUNTER_FIELDS, 0) for role in ROLES}

    def _next_step(self):
        step = int(self.step)
        if self.training and torch.is_grad_enabled():
            self.step += 1
        return step

    def _seed(self, step, role, i):
        return fold_seed(self.seed, step, ROLES.index(role), i)

    def _quantize(self, role, i, m, step, probe_value=None):
        """Operand i of `role` (its stored matrix m, already Hadamard-transformed) quantized."""
        rule = self.recipe.gemm(role).operand(i)
        side, transposed = LAYOUTS[(role, i)]
        seed = self._seed(step, role, i)
        q = quantize_by_rule(m.contiguous(), rule, side=side, transposed=transposed, seed=seed,
                             counters=self.counters[role])
        if self.probe is not None:
            value = q if probe_value is None else probe_value(q)
            self.probe.append(dict(role=role, operand=OPERAND_NAMES[role][i], index=i, seed=seed, step=step,
                                   value=value.detach().clone()))
        return q

    def _transform(self, role, i, m):
        """m with the role's random Hadamard transform along its reduction axis (zero-padded to a
        whole number of blocks: zero rows/columns add nothing to the product)."""
        width = self.recipe.gemm(role).hadamard
        if not width:
            return m
        axis = _ops.reduction_axis(*LAYOUTS[(role, i)])
        short = -m.shape[axis] % width
        if short:
            pad = (0, short) if axis == 1 else (0, 0, 0, short)
            m = F.pad(m, pad)
        return _ops.hadamard_transform(m.contiguous(), self.hadamard[role].signs, axis=axis)

    def _operands(self, role, a, b, step):
        return (self._quantize(role, 0, self._transform(role, 0, a), step),
                self._quantize(role, 1, self._transform(role, 1, b), step))

    def _unscale(self, role, result):
        g = self.recipe.gemm(role)
        p = g.a.prescale * g.b.prescale
        return result if p == 1 else result / p

    def _product(self, role, a, b, step):
        """The GEMM of the quantized stored operands: forward a @ b^T, input gradient a @ b,
        weight gradient a^T @ b; fp32 (torch) or emulated accumulation."""
        g = self.recipe.gemm(role)
        left = a.t() if role == "weight_grad" else a
        right = b.t() if role == "forward" else b
        if g.accumulation is None:
            out = left @ right
        else:
            acc = dict(g.accumulation)
            acc.setdefault("seed", self._seed(step, role, 2))
            out = _ops.emulated_gemm(left, right, **acc)
        return self._unscale(role, out)


class _LinearGemms(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2, weight, layer, step):
        a, b = layer._operands("forward", x2, weight, step)
        ctx.save_for_backward(x2, weight)
        ctx.layer, ctx.step = layer, step
        return layer._product("forward", a, b, step)

    @staticmethod
    def backward(ctx, dy):
        x2, weight = ctx.saved_tensors
        layer, step = ctx.layer, ctx.step
        dy = dy.contiguous()
        dx = dw = None
        if ctx.needs_input_grad[0]:
            a, b = layer._operands("input_grad", dy, weight, step)
            dx = layer._product("input_grad", a, b, step)[:, :x2.shape[1]]
        if ctx.needs_input_grad[1]:
            a, b = layer._operands("weight_grad", dy, x2, step)
            dw = layer._product("weight_grad", a, b, step)
        return dx, dw, None, None


class Linear(nn.Linear, _RecipeLayer):
    """nn.Linear whose three GEMMs follow `recipe` (a minifloat.recipes.Recipe or built-in name)."""

    def __init__(self, in_features, out_features, bias=True, *, recipe="nvfp4", seed=0, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self._setup(recipe, seed)

    def forward(self, x):
        if x.dtype != torch.float32 or self.weight.dtype != torch.float32:
            raise TypeError(f"minifloat.layers.Linear: expected float32 input and weight, got {x.dtype} and "
                            f"{self.weight.dtype}")
        step = self._next_step()
        y = _LinearGemms.apply(x.reshape(-1, self.in_features), self.weight, self, step)
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return super().extra_repr() + f", recipe={self.recipe.name}, seed={self.seed}"


def _covers(size, kernel, stride, padding, dilation, out):
    read = {o * stride - padding + k * dilation for o in range(out) for k in range(kernel)}
    return all(i in read for i in range(size))


class _ConvGemms(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, layer, step):
        ctx.save_for_backward(x, weight)
        ctx.layer, ctx.step = layer, step
        n, c, h, w = x.shape
        o, _, kh, kw = weight.shape
        ho, wo = layer._out_size(h, w)
        w2 = weight.permute(0, 2, 3, 1).reshape(o, kh * kw * c)
        if layer._pixel_path(x):
            pixels = x.permute(0, 2, 3, 1).reshape(n * h * w, c)
            xq = layer._quantize("forward", 0, pixels, step, probe_value=lambda q: layer._cols(
                q.view(n, h, w, c).permute(0, 3, 1, 2)))
            wq = layer._quantize("forward", 1, w2, step)
            y = F.conv2d(xq.view(n, h, w, c).permute(0, 3, 1, 2), wq.view(o, kh, kw, c).permute(0, 3, 1, 2), None,
                         layer.stride, layer.padding, layer.dilation)
            return layer._unscale("forward", y)
        a, b = layer._operands("forward", layer._cols(x), w2, step)
        y2 = layer._product("forward", a, b, step)
        return y2.view(n, ho, wo, o).permute(0, 3, 1, 2)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        layer, step = ctx.layer, ctx.step
        n, c, h, w = x.shape
        o, _, kh, kw = weight.shape
        dy2 = dy.permute(0, 2, 3, 1).reshape(-1, o)
        w2 = weight.permute(0, 2, 3, 1).reshape(o, kh * kw * c)
        dx = dw = None
        if ctx.needs_input_grad[0]:
            a, b = layer._operands("input_grad", dy2, w2, step)
            g = layer.recipe.input_grad
            if g.accumulation is None:
                ow = b.shape[0]  # out channels, padded by the Hadamard transform
                dx = torch.nn.grad.conv2d_input(x.shape, b.view(ow, kh, kw, c).permute(0, 3, 1, 2),
                                                a.view(n, dy.shape[2], dy.shape[3], ow).permute(0, 3, 1, 2),
                                                layer.stride, layer.padding, layer.dilation)
                dx = layer._unscale("input_grad", dx)
            else:
                dcols = layer._product("input_grad", a, b, step)
                dx = layer._fold(dcols, x.shape)
        if ctx.needs_input_grad[1]:
            a, b = layer._operands("weight_grad", dy2, layer._cols(x), step)
            dw = layer._product("weight_grad", a, b, step).view(o, kh, kw, c).permute(0, 3, 1, 2)
        return dx, dw, None, None


class Conv2d(nn.Conv2d, _RecipeLayer):
    """nn.Conv2d (groups 1, zero padding) as an implicit GEMM whose three GEMMs follow `recipe`."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", *, recipe="nvfp4", seed=0, device=None, dtype=None):
        if groups != 1:
            raise ValueError(f"minifloat.layers.Conv2d: groups = {groups}; only groups = 1 is a single GEMM")
        if padding_mode != "zeros":
            raise ValueError(f"minifloat.layers.Conv2d: padding_mode = {padding_mode!r}; only 'zeros' is supported")
        if isinstance(padding, str):
            raise ValueError(f"minifloat.layers.Conv2d: padding = {padding!r}; give the padding in pixels")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device=device, dtype=dtype)
        self._setup(recipe, seed)

    def _out_size(self, h, w):
        return tuple((size + 2 * p - d * (k - 1) - 1) // s + 1 for size, p, d, k, s in
                     zip((h, w), self.padding, self.dilation, self.kernel_size, self.stride))

    def _cols(self, x):
        """The im2col matrix (N*Ho*Wo x kh*kw*C), columns ordered (kh, kw, c)."""
        n, c = x.shape[:2]
        kk = self.kernel_size[0] * self.kernel_size[1]
        cols = F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)  # N x (C*kk) x L
        return cols.view(n, c, kk, -1).permute(0, 3, 2, 1).reshape(-1, kk * c)

    def _fold(self, dcols, shape):
        n, c, h, w = shape
        kk = self.kernel_size[0] * self.kernel_size[1]
        cols = dcols[:, :kk * c].reshape(n, -1, kk, c).permute(0, 3, 2, 1).reshape(n, c * kk, -1)
        return F.fold(cols, (h, w), self.kernel_size, self.dilation, self.padding, self.stride)

    def _pixel_path(self, x):
        """Whether quantizing the input's pixels gives the im2col operand's values exactly."""
        g = self.recipe.forward
        rule = g.a
        if g.hadamard or g.accumulation is not None or rule.stochastic:
            return False
        fmt = rule.format
        if fmt is None:
            return True
        if isinstance(fmt, BlockFormat):
            if rule.tile is not None or x.shape[1] % fmt.block_size:
                return False
            whole_tensor = fmt.scaling != "e8m0"  # NVFP4's tensor scale is the whole operand's amax
        else:
            whole_tensor = rule.scaling == "tensor"
        if not whole_tensor:
            return True
        ho, wo = self._out_size(*x.shape[2:])
        return all(_covers(size, k, s, p, d, out) for size, k, s, p, d, out in
                   zip(x.shape[2:], self.kernel_size, self.stride, self.padding, self.dilation, (ho, wo)))

    def forward(self, x):
        if x.dim() != 4 or x.dtype != torch.float32 or self.weight.dtype != torch.float32:
            raise TypeError(f"minifloat.layers.Conv2d: expected a float32 N x C x H x W input and float32 weight, got "
                            f"{x.dtype} of {x.dim()} dimensions")
        step = self._next_step()
        y = _ConvGemms.apply(x, self.weight, self, step)
        return y if self.bias is None else y + self.bias.view(1, -1, 1, 1)

    def extra_repr(self):
        return super().extra_repr() + f", recipe={self.recipe.name}, seed={self.seed}"


Conversion = namedtuple("Conversion", "converted kept unsupported")


def _convertible(m):
    return not isinstance(m, nn.Conv2d) or (m.groups == 1 and m.padding_mode == "zeros"
                                           and not isinstance(m.padding, str))


def convert(model, recipe, *, seed=0, keep_first_last=True, keep=()):
    """Replace model's nn.Linear and nn.Conv2d layers, in place, by Linear and Conv2d following
    `recipe` (their parameters are the same Parameter objects, so build the optimizer before or
    after). Layer i (in model.named_modules() order, counting every Linear and Conv2d) gets the
    seed fold_seed(seed, i). keep_first_last leaves the first and the last such layer as they are
    (fp32), as the NVFP4 and MXFP4 papers keep them in high precision; `keep` names more layers to
    leave. Grouped convolutions and non-zero padding modes stay as they are (listed as unsupported).
    Returns Conversion(converted, kept, unsupported), lists of module names."""
    rec = _recipes.recipe(recipe)
    if not isinstance(model, nn.Module):
        raise TypeError(f"minifloat.layers.convert: model must be an nn.Module, not {type(model).__name__}")
    if not isinstance(keep_first_last, bool):
        raise TypeError(f"minifloat.layers.convert: keep_first_last must be a bool, not {type(keep_first_last).__name__}")
    keep = set(keep)
    candidates = [(name, m) for name, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    names = {name for name, _ in candidates}
    unknown = keep - names
    if unknown:
        raise ValueError(f"minifloat.layers.convert: keep names {sorted(unknown)}, which are not Linear or Conv2d "
                         "layers of the model")
    if keep_first_last and candidates:
        keep |= {candidates[0][0], candidates[-1][0]}
    converted, kept, unsupported = [], [], []
    for index, (name, m) in enumerate(candidates):
        if name in keep or isinstance(m, _RecipeLayer):
            kept.append(name)
            continue
        if not _convertible(m):
            unsupported.append(name)
            continue
        layer_seed = fold_seed(seed, index)
        with torch.device("meta"):
            if isinstance(m, nn.Linear):
                new = Linear(m.in_features, m.out_features, m.bias is not None, recipe=rec, seed=layer_seed)
            else:
                new = Conv2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation, m.groups,
                             m.bias is not None, m.padding_mode, recipe=rec, seed=layer_seed)
        new.weight, new.bias = m.weight, m.bias
        new.step = torch.zeros((), dtype=torch.int64, device=m.weight.device)
        for role in new.hadamard:
            new.hadamard[role].signs = _ops.hadamard_signs(fold_seed(layer_seed, HADAMARD_KEY, ROLES.index(role)),
                                                           rec.gemm(role).hadamard).to(m.weight.device)
        new.train(m.training)
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, new)
        converted.append(name)
    return Conversion(converted, kept, unsupported)


def recipe_layers(model):
    return [m for m in model.modules() if isinstance(m, _RecipeLayer)]


def counters(model):
    """Per GEMM role, the sums over the model's recipe layers of COUNTER_FIELDS: values
    quantized, element overflows (saturations) and underflows (nonzero values rounded to 0),
    blocks, blocks whose scale was clamped, and bytes the quantized operands would take."""
    total = {role: dict.fromkeys(COUNTER_FIELDS, 0) for role in ROLES}
    for m in recipe_layers(model):
        for role in ROLES:
            for k in COUNTER_FIELDS:
                total[role][k] += m.counters[role][k]
    return total


def reset_counters(model):
    for m in recipe_layers(model):
        m.reset_counters()


__all__ = ["Linear", "Conv2d", "convert", "Conversion", "counters", "reset_counters", "recipe_layers", "HADAMARD_KEY"]
