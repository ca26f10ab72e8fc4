"""Low-precision training recipes: for each of a layer's three GEMMs (forward Y = X W^T, input
gradient dX = dY W, weight gradient dW = dY^T X) and each operand, the format or block format,
the scale rule, the rounding, the Hadamard transform and the accumulation (docs/recipes.md §8).

A Recipe holds three GemmRules; a GemmRule holds the rules of its two operands (OperandRule),
the width of the random Hadamard transform applied to both along the reduction axis (0: none)
and the accumulation (None: fp32, else minifloat.operands.emulated_gemm's options). The block
axis is not a choice: every operand is blocked along its GEMM's reduction axis, as the hardware
blocks it. Every rounding is the C++ headers' (minifloat.operands, minifloat.blocks,
minifloat.quantize): this module only says which call quantizes which operand with which seed.

Built in (RECIPES): nvfp4, mxfp8 (floor scales), mxfp8_rceil, mxfp4 (floor), mxfp4_rceil,
fp8 (per-tensor scaled e4m3 forward, e5m2 gradients), bf16 and fp32 (no rounding).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from . import operands as _ops
from ._formats import Format, as_format
from ._ops import ROUNDING, OVERFLOW, fold_seed, quantize
from .blocks import SCALE_RULES, BlockFormat, as_block_format, encode_blocks

#: The three GEMMs of a linear or convolution layer, in the order their roles are folded into seeds.
ROLES = ("forward", "input_grad", "weight_grad")
#: Each GEMM's operands (a, b) by what they hold.
OPERAND_NAMES = {"forward": ("x", "w"), "input_grad": ("dy", "w"), "weight_grad": ("dy", "x")}
#: Each operand as stored (side, transposed) -- docs/recipes.md §1: forward A = X (M x K), B^T = W
#: (N x K); input gradient A = dY, B = W (K = out features); weight gradient A^T = dY, B = X
#: (K = batch rows).
LAYOUTS = {("forward", 0): ("left", False), ("forward", 1): ("right", True),
           ("input_grad", 0): ("left", False), ("input_grad", 1): ("right", False),
           ("weight_grad", 0): ("left", True), ("weight_grad", 1): ("right", False)}
SCALINGS = ("none", "tensor")


def _fail(cls, message, error=ValueError):
    raise error(f"minifloat.recipes.{cls}: {message}")


@dataclass(frozen=True)
class OperandRule:
    """How one GEMM operand is quantized.

    format: None (kept in fp32), a Format or format name (each value rounded on its own), or a
    BlockFormat or block format name (blocks along the GEMM's reduction axis).
    rounding: a mode of minifloat.ROUNDING (stochastic draws from (seed, element index)).
    scale_rule: MX scale rule (floor, rceil, ...); block formats with E8M0 scales only.
    scaling: 'tensor' scales a scalar format per tensor (torchao's tensorwise rule: x * s with
    s = max_finite / amax in fp32, rounded, divided by s), 'none' rounds the values as they are.
    tile: (rows, cols) 2-D tiles of the weight W (out x in) whose scale W and W^T share
    (weight operands only; NVFP4: (16, 16)); None: 1-D blocks along the reduction axis.
    four_over_six: NVFP4's per-block 4-over-6 choice (arXiv:2512.02010).
    prescale: MX blocks only: each element is multiplied by this after its block's scale is found
    from the unscaled block, and the GEMM's result divided by the product of its operands'
    prescales (Tseng et al.'s 3/4 before stochastic rounding, so that no element lies beyond the
    element maximum, where stochastic rounding would clip).
    overflow: saturate | infinity."""

    format: object = None
    rounding: str = "nearest_even"
    scale_rule: str = "floor"
    scaling: str = "none"
    tile: tuple | None = None
    four_over_six: bool = False
    prescale: float = 1.0
    overflow: str = "saturate"

    def __post_init__(self):
        who = "OperandRule"
        fmt = self.format
        if isinstance(fmt, str):
            try:
                fmt = as_block_format(fmt, who)
            except ValueError:
                try:
                    fmt = as_format(fmt, who)
                except (TypeError, ValueError):
                    _fail(who, f"format={self.format!r} is neither a format nor a block format name")
        elif fmt is not None and not isinstance(fmt, (Format, BlockFormat)):
            _fail(who, f"format must be None, a Format, a BlockFormat or a name, not {type(fmt).__name__}", TypeError)
        object.__setattr__(self, "format", fmt)
        if self.rounding not in ROUNDING:
            _fail(who, f"rounding={self.rounding!r} is not one of {', '.join(ROUNDING)}")
        if self.overflow not in OVERFLOW:
            _fail(who, f"overflow={self.overflow!r} is not one of {', '.join(OVERFLOW)}")
        if self.scale_rule not in SCALE_RULES:
            _fail(who, f"scale_rule={self.scale_rule!r} is not one of {', '.join(SCALE_RULES)}")
        block = isinstance(fmt, BlockFormat)
        if self.scale_rule != "floor" and not (block and fmt.scaling == "e8m0"):
            _fail(who, f"scale_rule={self.scale_rule!r} is for block formats with E8M0 (MX) scales, not {fmt}")
        if self.scaling not in SCALINGS:
            _fail(who, f"scaling={self.scaling!r} is not one of {', '.join(SCALINGS)}")
        if self.scaling == "tensor" and not isinstance(fmt, Format):
            _fail(who, f"scaling='tensor' is for scalar formats; {fmt} " +
                  ("has its own scales" if block else "is not rounded"))
        if self.tile is not None:
            tile = tuple(self.tile) if isinstance(self.tile, (tuple, list)) else None
            if not (tile and len(tile) == 2 and all(isinstance(t, int) and not isinstance(t, bool) and 1 <= t <= 1024
                                                    for t in tile)):
                _fail(who, f"tile must be None or a pair of ints in 1..1024, not {self.tile!r}")
            if not block:
                _fail(who, f"tile is for block formats, not {fmt}")
            object.__setattr__(self, "tile", tile)
        if not isinstance(self.four_over_six, bool):
            _fail(who, f"four_over_six must be a bool, not {type(self.four_over_six).__name__}", TypeError)
        if self.four_over_six and not (block and fmt.scaling != "e8m0"):
            _fail(who, f"four_over_six is for NVFP4-style formats (E4M3 scales), not {fmt}")
        if self.four_over_six and self.tile is not None:
            _fail(who, "four_over_six and tile cannot be combined")
        if isinstance(self.prescale, bool) or not isinstance(self.prescale, (int, float)) or not (
                0 < self.prescale < math.inf):
            _fail(who, f"prescale must be a positive finite number, not {self.prescale!r}")
        object.__setattr__(self, "prescale", float(self.prescale))
        if self.prescale != 1 and not (block and fmt.scaling == "e8m0" and self.tile is None):
            _fail(who, f"prescale is for 1-D blocks with E8M0 (MX) scales, not {fmt}" + (" in tiles" if self.tile else ""))

    @property
    def quantized(self):
        return self.format is not None

    @property
    def stochastic(self):
        return self.quantized and self.rounding == "stochastic"

    def describe(self):
        if self.format is None:
            return "fp32"
        parts = [str(self.format)]
        if self.tile:
            parts.append(f"{self.tile[0]}x{self.tile[1]} tiles")
        if self.scaling == "tensor":
            parts.append("per-tensor scale")
        if isinstance(self.format, BlockFormat) and self.format.scaling == "e8m0":
            parts.append(self.scale_rule)
        if self.four_over_six:
            parts.append("4/6")
        if self.prescale != 1:
            parts.append(f"x{self.prescale:g}")
        parts.append("SR" if self.rounding == "stochastic" else self.rounding)
        return " ".join(parts)


@dataclass(frozen=True)
class GemmRule:
    """One GEMM: its operands' rules (a: the left operand, b: the right one, as LAYOUTS names
    them), the random Hadamard transform's width along the reduction axis applied to both (0:
    none; a power of two), and the accumulation: None (fp32) or a dict of emulated_gemm options
    (product, accumulator, their roundings, promote_every, ...; e.g. operands.HOPPER_FP8_MODEL)."""

    a: OperandRule = field(default_factory=OperandRule)
    b: OperandRule = field(default_factory=OperandRule)
    hadamard: int = 0
    accumulation: dict | None = None

    def __post_init__(self):
        who = "GemmRule"
        for name in ("a", "b"):
            if not isinstance(getattr(self, name), OperandRule):
                _fail(who, f"{name} must be an OperandRule, not {type(getattr(self, name)).__name__}", TypeError)
        h = self.hadamard
        if isinstance(h, bool) or not isinstance(h, int) or not (h == 0 or (1 <= h <= 4096 and h & (h - 1) == 0)):
            _fail(who, f"hadamard must be 0 or a power of two in 1..4096, not {h!r}")
        if h and (self.a.tile or self.b.tile):
            _fail(who, "a Hadamard transform along the reduction axis cannot be combined with 2-D tiles (W and W^T "
                       "would no longer share their values)")
        if self.accumulation is not None:
            if not isinstance(self.accumulation, dict):
                _fail(who, f"accumulation must be None or a dict of emulated_gemm options, not "
                           f"{type(self.accumulation).__name__}", TypeError)
            allowed = {"product", "product_rounding", "accumulator", "accumulator_rounding", "overflow",
                       "promote_every", "random_bits", "seed"}
            unknown = set(self.accumulation) - allowed
            if unknown:
                _fail(who, f"accumulation has unknown options {sorted(unknown)}; allowed: {sorted(allowed)}")
            object.__setattr__(self, "accumulation", dict(self.accumulation))

    def operand(self, i):
        return self.a if i == 0 else self.b

    def __hash__(self):
        return hash((self.a, self.b, self.hadamard, tuple(sorted((self.accumulation or {}).items(), key=str))))


@dataclass(frozen=True)
class Recipe:
    """A training recipe: the rules of the forward, input-gradient and weight-gradient GEMMs."""

    name: str
    forward: GemmRule = field(default_factory=GemmRule)
    input_grad: GemmRule = field(default_factory=GemmRule)
    weight_grad: GemmRule = field(default_factory=GemmRule)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            _fail("Recipe", f"name must be a non-empty str, not {self.name!r}", TypeError)
        for role in ROLES:
            if not isinstance(getattr(self, role), GemmRule):
                _fail("Recipe", f"{role} must be a GemmRule, not {type(getattr(self, role)).__name__}", TypeError)
        for role, i in (("forward", 0), ("input_grad", 0), ("weight_grad", 0), ("weight_grad", 1)):
            if getattr(self, role).operand(i).tile is not None:
                _fail("Recipe", f"{role}.{'ab'[i]} holds {OPERAND_NAMES[role][i]}, not the weight: 2-D tiles are "
                                "for the weight operand (forward.b, input_grad.b)")

    def gemm(self, role):
        if role not in ROLES:
            _fail("Recipe", f"role={role!r} is not one of {', '.join(ROLES)}")
        return getattr(self, role)

    def operands(self):
        """(role, operand index, operand name, OperandRule) of all six operands."""
        return [(role, i, OPERAND_NAMES[role][i], self.gemm(role).operand(i)) for role in ROLES for i in (0, 1)]

    @property
    def uses_hadamard(self):
        return any(self.gemm(r).hadamard for r in ROLES)

    def variant(self, *, rht=None, sr=None, scale_rule=None, prescale=None, accumulation=None, name=None):
        """This recipe with one ingredient changed (the trainer's flags):
        rht: False removes every Hadamard transform; True puts the default 16-wide one (or as
        wide as the operands' blocks) on the weight-gradient GEMM when the recipe has none.
        sr: False rounds every operand to nearest-even; True rounds the gradient operands (dy)
        stochastically. scale_rule: the MX scale rule of every E8M0-scaled operand.
        prescale: the pre-scale of every operand that has one (MX operands of mxfp4).
        accumulation: the emulated accumulation of all three GEMMs (None: keep the recipe's;
        'fp32': plain fp32)."""
        gemms = {role: self.gemm(role) for role in ROLES}
        suffix = []
        if rht is not None:
            if not isinstance(rht, bool):
                _fail("Recipe.variant", f"rht must be a bool or None, not {type(rht).__name__}", TypeError)
            if not rht:
                gemms = {r: dataclasses.replace(g, hadamard=0) for r, g in gemms.items()}
            elif not any(g.hadamard for g in gemms.values()):
                fmt = gemms["weight_grad"].a.format
                width = fmt.block_size if isinstance(fmt, BlockFormat) else 16
                gemms["weight_grad"] = dataclasses.replace(gemms["weight_grad"], hadamard=width)
            suffix.append("rht" if rht else "no_rht")
        if sr is not None:
            if not isinstance(sr, bool):
                _fail("Recipe.variant", f"sr must be a bool or None, not {type(sr).__name__}", TypeError)
            new = {}
            for role, g in gemms.items():
                ops = []
                for i in (0, 1):
                    o = g.operand(i)
                    if o.quantized:
                        gradient = OPERAND_NAMES[role][i] == "dy"
                        o = dataclasses.replace(o, rounding="stochastic" if sr and gradient else
                                                ("nearest_even" if o.rounding == "stochastic" else o.rounding))
                    ops.append(o)
                new[role] = dataclasses.replace(g, a=ops[0], b=ops[1])
            gemms = new
            suffix.append("sr" if sr else "no_sr")
        if scale_rule is not None:
            if not any(isinstance(o.format, BlockFormat) and o.format.scaling == "e8m0"
                       for g in gemms.values() for o in (g.a, g.b)):
                _fail("Recipe.variant", f"scale_rule={scale_rule!r}: recipe {self.name} has no E8M0-scaled operand")
            gemms = {r: dataclasses.replace(g, **{k: dataclasses.replace(o, scale_rule=scale_rule) if (
                isinstance(o.format, BlockFormat) and o.format.scaling == "e8m0") else o for k, o in
                (("a", g.a), ("b", g.b))}) for r, g in gemms.items()}
            suffix.append(scale_rule)
        if prescale is not None:
            if not any(o.prescale != 1 for g in gemms.values() for o in (g.a, g.b)):
                _fail("Recipe.variant", f"prescale={prescale!r}: recipe {self.name} has no pre-scaled operand")
            gemms = {r: dataclasses.replace(g, **{k: dataclasses.replace(o, prescale=prescale) if o.prescale != 1
                                                 else o for k, o in (("a", g.a), ("b", g.b))})
                     for r, g in gemms.items()}
            suffix.append(f"prescale{prescale:g}")
        if accumulation is not None:
            acc = None if accumulation == "fp32" else accumulation
            gemms = {r: dataclasses.replace(g, accumulation=acc) for r, g in gemms.items()}
            suffix.append("acc")
        return Recipe(name or "_".join([self.name] + suffix), **gemms)

    def describe(self):
        lines = [f"recipe {self.name}:"]
        for role in ROLES:
            g = self.gemm(role)
            a, b = OPERAND_NAMES[role]
            extra = (f", RHT {g.hadamard}" if g.hadamard else "") + (", emulated accumulation" if g.accumulation else "")
            lines.append(f"  {role}: {a} {g.a.describe()} | {b} {g.b.describe()}{extra}")
        return "\n".join(lines)


def _uniform(name, fwd_x, w, dy, x_wgrad=None, w_dgrad=None, *, wgrad_hadamard=0, dgrad_hadamard=0):
    return Recipe(name, forward=GemmRule(fwd_x, w), input_grad=GemmRule(dy, w_dgrad or w, hadamard=dgrad_hadamard),
                  weight_grad=GemmRule(dy, x_wgrad or fwd_x, hadamard=wgrad_hadamard))


def _nvfp4():
    # "Pretraining LLMs with NVFP4" (arXiv:2509.25149): 1x16 blocks with E4M3 scales and the fp32
    # tensor scale on every operand, 16x16 tiles for weights, stochastic rounding on gradients only,
    # a 16-wide random Hadamard transform on the weight-gradient GEMM's inputs.
    near, tiles = OperandRule("nvfp4"), OperandRule("nvfp4", tile=(16, 16))
    return _uniform("nvfp4", near, tiles, OperandRule("nvfp4", rounding="stochastic"), wgrad_hadamard=16)


def _mx(name, block, scale_rule):
    # torchao's MXFP8 training recipe: every operand of every GEMM in MXFP8 E4M3, blocks of 32
    # along the reduction axis, nearest-even, scales by the floor (OCP MX v1.0) or RCEIL rule.
    rule = OperandRule(block, scale_rule=scale_rule)
    return _uniform(name, rule, rule, rule)


def _mxfp4(name, scale_rule):
    # Tseng, Yu, Park, "Training LLMs with MXFP4" (AISTATS 2025, arXiv:2502.20586): the backward
    # GEMMs in MXFP4 with stochastic rounding of every operand after a 3/4 pre-scale, and a random
    # Hadamard transform along each backward GEMM's reduction axis (here one MX block, 32 wide);
    # the forward GEMM stays in bf16 (our reading of the paper's recipe).
    fwd = OperandRule("bfloat16")
    sr = OperandRule("mxfp4", rounding="stochastic", scale_rule=scale_rule, prescale=0.75)
    return Recipe(name, forward=GemmRule(fwd, fwd), input_grad=GemmRule(sr, sr, hadamard=32),
                  weight_grad=GemmRule(sr, sr, hadamard=32))


def _fp8():
    # Per-tensor-scaled FP8 (torchao's tensorwise float8 training): e4m3 for activations and
    # weights, e5m2 for gradients, each tensor scaled by max_finite / amax, nearest-even, saturating.
    e4m3 = OperandRule("e4m3", scaling="tensor")
    return _uniform("fp8", e4m3, e4m3, OperandRule("e5m2", scaling="tensor"))


def _plain(name, fmt):
    rule = OperandRule(fmt)
    return _uniform(name, rule, rule, rule)


#: The built-in recipes by name.
RECIPES = {r.name: r for r in (_nvfp4(), _mx("mxfp8", "mxfp8-e4m3", "floor"), _mx("mxfp8_rceil", "mxfp8-e4m3", "rceil"),
                               _mxfp4("mxfp4", "floor"), _mxfp4("mxfp4_rceil", "rceil"), _fp8(),
                               _plain("bf16", "bfloat16"), _plain("fp32", None))}


def recipe(name_or_recipe):
    """A Recipe from a Recipe or a built-in name."""
    if isinstance(name_or_recipe, Recipe):
        return name_or_recipe
    if isinstance(name_or_recipe, str):
        found = RECIPES.get(name_or_recipe, RECIPES.get(name_or_recipe.replace("-", "_")))
        if found is None:
            raise ValueError(f"minifloat.recipes.recipe: {name_or_recipe!r} is not one of {', '.join(RECIPES)}")
        return found
    raise TypeError(f"minifloat.recipes.recipe: expected a Recipe or a name, not {type(name_or_recipe).__name__}")


# --- quantizing one operand --------------------------------------------------------------------

COUNTER_FIELDS = ("values", "overflows", "underflows", "blocks", "clamped_blocks", "bytes")


def operand_bytes(rule, numel, blocks):
    """Bytes the operand would take in its format: packed element codes, one byte per block scale
    and 4 for an fp32 tensor scale (fp32 operands: 4 per value)."""
    fmt = rule.format
    if fmt is None:
        return 4 * numel
    if isinstance(fmt, BlockFormat):
        return -(-numel * fmt.element.bit_width // 8) + blocks + (4 if fmt.scaling != "e8m0" else 0)
    return -(-numel * fmt.bit_width // 8) + (4 if rule.scaling == "tensor" else 0)


def _prescaled_blocks(x, rule, axis, seed):
    """MX blocks with Tseng et al.'s pre-scale: each block's E8M0 scale X is block.hpp's (from the
    block's own amax by the scale rule), and its elements are the core's rounding of
    prescale * v / X (one fp32 product, then an exact division by a power of two) times X. The
    pre-scale after the scale keeps a block's largest value below the element maximum before
    stochastic rounding (with prescale 1 this is quantize_blocks bit for bit; tested)."""
    fmt = rule.format
    codes, st = encode_blocks(x, fmt, axis=axis, scale_rule=rule.scale_rule, stats=True)
    exponent = codes.scales.to(torch.int32) - 127
    scale = torch.ldexp(torch.ones((), dtype=torch.float32), exponent.to(torch.float32))
    scale = torch.where(codes.scales == 255, torch.full_like(scale, float("nan")), scale)
    scale = scale.repeat_interleave(fmt.block_size, dim=axis).narrow(axis, 0, x.shape[axis])
    element, elements = quantize(x * rule.prescale / scale, fmt.element, rule.rounding, overflow=rule.overflow,
                                 seed=seed, stats=True)
    return element * scale, st._replace(elements=elements)


def quantize_by_rule(m, rule, *, side, transposed, seed, counters=None):
    """The 2-D operand `m` (float32, as stored) quantized by `rule` along its reduction axis
    (reduction_axis(side, transposed)): the values the GEMM multiplies. With a prescale p they are
    those of p * m; the layer divides the GEMM's result by the product of its operands' prescales.
    counters (a dict of COUNTER_FIELDS) is added to."""
    fmt = rule.format
    if fmt is None:
        if counters is not None:
            counters["values"] += m.numel()
            counters["bytes"] += 4 * m.numel()
        return m
    x = m
    blocks = clamped = 0
    if isinstance(fmt, BlockFormat):
        common = dict(rounding=rule.rounding, overflow=rule.overflow, seed=seed)
        if rule.prescale != 1:
            q, st = _prescaled_blocks(x, rule, _ops.reduction_axis(side, transposed), seed)
        elif rule.tile is not None:
            # the weight W (out x in) is the canonical matrix: stored as is (input gradient's B) or
            # as B^T (forward); either way W itself is tiled, so both GEMMs see the same values
            q, st = _ops.quantize_tiles(x, fmt, tile=rule.tile, scale_rule=rule.scale_rule, stats=True, **common)
        elif rule.four_over_six:
            q, (blocks, _) = _ops.quantize_four_over_six(x, fmt, axis=_ops.reduction_axis(side, transposed),
                                                         stats=True, **common)
            st = None
        else:
            q, st = _ops.quantize_operand(x, fmt, side=side, transposed=transposed, scale_rule=rule.scale_rule,
                                          stats=True, **common)
        if st is not None:
            elements, blocks, clamped = st.elements, st.blocks, st.scale_clamped
    else:
        scale = None
        if rule.scaling == "tensor":
            amax = x.abs().max().clamp(min=1e-12)
            scale = (torch.tensor(fmt.max_finite, dtype=torch.float32) / amax).to(torch.float32)
            x = x * scale
        q, elements = quantize(x, fmt, rule.rounding, overflow=rule.overflow, seed=seed, stats=True)
        if scale is not None:
            q = q / scale
    if counters is not None:
        counters["values"] += m.numel()
        if not (isinstance(fmt, BlockFormat) and rule.four_over_six):
            counters["overflows"] += elements.overflows
            counters["underflows"] += elements.underflows
        counters["blocks"] += blocks
        counters["clamped_blocks"] += clamped
        counters["bytes"] += operand_bytes(rule, m.numel(), blocks)
    return q


__all__ = ["ROLES", "OPERAND_NAMES", "LAYOUTS", "OperandRule", "GemmRule", "Recipe", "RECIPES", "recipe",
           "quantize_by_rule", "operand_bytes", "COUNTER_FIELDS", "fold_seed"]
