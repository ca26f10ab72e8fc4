"""The precision-assignment paper's training policies on any traceable torch model.

`instrument(model, example_input)` traces the model with torch.fx (trace.py), builds the C++
training graph (include/minifloat/training/graph.hpp) from it and returns a `PrecisionModel`:
the traced module with a rounding site on every activation Y (forward) and its gradient GY
(backward, straight-through), and on every parameter P (forward, through a parametrization) and
its gradient GP (backward). Grouping (Algorithm 1), the assignments, overflow promotion, the loss
scaler and the footprint are the C++ ones, reached through minifloat._core; every rounding is the
core's. docs/torch-training.md states the rules, including how branch merges are grouped.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch import fx, nn
from torch.nn.utils import parametrize

from .. import _core
from .._buffers import threads
from .._formats import Format, as_format
from .._ops import ROUNDING, RoundingStats
from .dynamic import DynamicContainers, DynamicOptions, TensorBits
from .pooling import MaxPoolSites, is_plain_max_pool
from .saved import SavedTensorStore
from .trace import TraceError, TracedNetwork, trace

ROLES = ("Y", "GY", "P", "GP")
ORDERS = tuple(_core.demotion_order_names)
ASSIGNMENTS = ("all-high", "uniform", "op", "op-variant", "ours", "fp32")

__all__ = ["instrument", "training_step", "StepResult", "PrecisionModel", "Group", "SiteInfo", "LossScaler", "Candidates", "SavedTensorStore",
           "DynamicContainers", "DynamicOptions", "TensorBits",
           "TraceError", "trace", "ROLES", "ORDERS", "ASSIGNMENTS"]


@dataclass(frozen=True)
class Candidates:
    """C(t, hi) and C(t, lo) per role (the paper's §3.1); the defaults are the paper's (§5.2):
    high fp(6,9,0) everywhere, low fp(4,3,4) for Y and P, fp(5,2,0) for GY and GP, GP kept high."""

    Y: tuple = ("paper_fp(6,9,0)", "paper_fp(4,3,4)")
    GY: tuple = ("paper_fp(6,9,0)", "paper_fp(5,2,0)")
    P: tuple = ("paper_fp(6,9,0)", "paper_fp(4,3,4)")
    GP: tuple = ("paper_fp(6,9,0)", "paper_fp(5,2,0)")
    gp_stays_high: bool = True

    def keys(self):
        who = "minifloat.training.Candidates"
        return [tuple(as_format(f, who)._key for f in getattr(self, r)) for r in ROLES]


@dataclass(frozen=True)
class SiteInfo:
    index: int
    name: str
    role: str          # Y, GY, P or GP
    numel: int         # at the example's batch size
    low: bool
    enabled: bool
    format: Format     # the one in force
    high: Format
    low_format: Format
    bits: int          # bits per element in force (32 when disabled)


@dataclass(frozen=True)
class Group:
    name: str              # the starting operation (the input or a GEMM)
    operations: tuple      # operations whose Y/GY are in the group, in execution order
    sites: tuple           # site names
    size: int              # Σ numel of the sites


class _RoundSite(torch.autograd.Function):
    """Forward: a copy of x (or x itself, `inplace`) rounded at site `forward`; backward: the gradient rounded at site
    `backward` (None: passed through). Both counted into the sites' step statistics while the
    model trains."""

    @staticmethod
    def forward(ctx, x, owner, forward, backward, kind, inplace=False):
        ctx.owner, ctx.backward_site = owner, backward
        inplace = inplace and x.is_contiguous()
        if inplace:
            # x is a fresh output that only this site reads and that its producer did not save
            # (_rounds_in_place): round it where it is, saving a copy. mark_dirty tells autograd,
            # which would refuse the backward if the tensor had been saved after all.
            out = x.detach()
            ctx.mark_dirty(x)
        else:
            out = x.detach().contiguous(memory_format=torch.contiguous_format).clone()
        ctx.kept = owner._round(forward, out) if forward is not None else None
        result = x if inplace else out
        owner._note(result, forward, kind, inplace)  # mark_dirty bumps x's version once more
        return result

    @staticmethod
    def backward(ctx, grad):
        if ctx.backward_site is None:
            return grad, None, None, None, None, None
        g = grad.contiguous().clone()
        ctx.owner._round_gradient(ctx.backward_site, g, ctx.kept)
        return g, None, None, None, None, None


class _ReluSite(torch.autograd.Function):
    """ReLU and its Y/GY sites in one op: the output is rounded and that rounded v_{i+1} is what
    backward keeps (so the saved-tensor store packs it); backward rounds the incoming gradient
    dv_{i+1} at GY, then masks it with v_{i+1} > 0 — eq. (1)'s dv_i computed from rounded tensors."""

    @staticmethod
    def forward(ctx, x, owner, forward, backward, inplace=False):
        ctx.owner, ctx.backward_site = owner, backward
        inplace = inplace and x.is_contiguous()
        if inplace:
            # x is the previous site's own copy and nothing else reads it: ReLU in place, as
            # torchvision's inplace=True ReLU does (mark_dirty: autograd checks nobody saved it).
            out = torch.relu_(x.detach())
            ctx.mark_dirty(x)
        else:
            out = torch.relu(x.detach()).contiguous()
        ctx.kept = owner._round(forward, out) if forward is not None else None
        result = x if inplace else out
        owner._note(result, forward, "activation", inplace)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        g = ctx.owner._rounded_gradient(ctx.backward_site, grad, ctx.kept)
        # ReLU's own backward kernel (zero where out <= 0), much faster than masked_fill_.
        return torch.ops.aten.threshold_backward(g, out, 0), None, None, None, None


def _container_format(container):
    """The format whose codes hold every value of a dynamic container exactly: fp(8, k_m) with
    fp32's bias, subnormals and IEEE specials (a container value is a float32 whose mantissa keeps
    its top k_m bits; k_m = 0 is stored as fp(8, 1), IEEE's narrowest). NaN comes back as the
    canonical NaN. None for no container."""
    if container is None:
        return None
    return Format(8, max(container[0], 1), 127, True, "ieee")


# Operations whose output is a fresh tensor (never a view of an input) that their backward does
# not keep: their Y site may round that output in place instead of a copy.
_FRESH_UNSAVED_MODULES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d,
                          nn.AdaptiveAvgPool2d, nn.AvgPool2d)
_FRESH_UNSAVED_FUNCTIONS = {operator.add, torch.add, torch.cat, torch.nn.functional.conv2d, torch.nn.functional.linear,
                            torch.nn.functional.adaptive_avg_pool2d}


def _rounds_in_place(node: fx.Node, gm: fx.GraphModule) -> bool:
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)) in _FRESH_UNSAVED_MODULES
    return node.op == "call_function" and node.target in _FRESH_UNSAVED_FUNCTIONS


def _is_relu(node: fx.Node, gm: fx.GraphModule) -> bool:
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)) is nn.ReLU
    if node.op == "call_function":
        return node.target in (torch.relu, torch.nn.functional.relu) and len(node.args) == 1
    return node.op == "call_method" and node.target == "relu" and len(node.args) == 1


class _ActivationSites(nn.Module):
    """Inserted after every operation of the traced graph: rounds Y, and GY in backward. With
    fused_relu it replaces a ReLU instead: ReLU with its Y and GY sites (_ReluSite)."""

    def __init__(self, owner, y, gy, fused_relu=False, inplace=False):
        super().__init__()
        self._owner = [owner]  # a list, so the owner is not registered as a submodule
        self.y, self.gy, self.fused_relu, self.inplace = y, gy, fused_relu, inplace

    def forward(self, x):
        if self.fused_relu:
            return _ReluSite.apply(x, self._owner[0], self.y, self.gy, self.inplace)
        return _RoundSite.apply(x, self._owner[0], self.y, self.gy, "activation", self.inplace)


class _ParameterSites(nn.Module):
    """The parametrization of one parameter: rounds P in forward, GP in backward."""

    def __init__(self, owner, p, gp):
        super().__init__()
        self._owner = [owner]
        self.p, self.gp = p, gp

    def forward(self, w):
        return _RoundSite.apply(w, self._owner[0], self.p, self.gp, "weight")


def _is_instrumented(model: nn.Module) -> bool:
    """Whether model holds the sites of a PrecisionModel (its module, or the model it was built
    from, whose parameters carry the P/GP parametrizations)."""
    for m in model.modules():
        if isinstance(m, (_ActivationSites, _ParameterSites, MaxPoolSites)):
            return True
        if parametrize.is_parametrized(m):
            for plist in m.parametrizations.values():
                if any(isinstance(q, _ParameterSites) for q in plist):
                    return True
    return False


class PrecisionModel:
    """A traced model with a rounding site on every Y, GY, P and GP (see the module comment).

    `module` is the fx GraphModule to call; it shares its submodules (and so its parameters) with
    the model given to instrument(). Call begin_step(step) before each training step's forward and
    promote(step) after the optimizer step."""

    def __init__(self, model: nn.Module, example_input: torch.Tensor, candidates: Candidates, seed: int):
        if not isinstance(model, nn.Module):
            raise TypeError(f"minifloat.training.instrument: model must be an nn.Module, not {type(model).__name__}")
        if _is_instrumented(model):
            # Its parameters are parametrized already (so a second tracing finds no weight sites)
            # and the first sites would keep rounding: one model, one PrecisionModel.
            raise ValueError("minifloat.training.instrument: the model is already instrumented (it holds rounding "
                             "sites of a PrecisionModel); instrument the original, uninstrumented model once and "
                             "use that PrecisionModel")
        # In-place activations would modify rounded outputs after the fact; restored if tracing fails.
        switched = [m for m in model.modules() if getattr(m, "inplace", False) is True]
        for m in switched:
            m.inplace = False
        try:
            self.traced: TracedNetwork = trace(model, example_input)
        except Exception:
            for m in switched:
                m.inplace = True
            raise
        self.graph = _core.TrainingGraph(*candidates.keys(), candidates.gp_stays_high)
        self._op_sites = []  # per operation: (y site, gy site)
        self._param_sites = {}  # qualified parameter name -> (p site, gp site)
        for i, op in enumerate(self.traced.operations):
            if i == 0:
                m = self.graph.add_input(op.name, op.numel)
            else:
                # A merge (several inputs) follows its first input for the parameters it does not
                # have; its Y/GY join the group in force when it executes (Algorithm 1).
                m = self.graph.add_module(op.name, op.is_gemm, op.numel, True, op.inputs[0])
            for qname, p in op.parameters:
                self.graph.add_parameter(m, qname.rsplit(".", 1)[-1], p.numel())
            _, _, _, y, gy, ps, gps = self.graph.module(m)
            self._op_sites.append((y, gy))
            for (qname, _), ps_i, gps_i in zip(op.parameters, ps, gps):
                self._param_sites[qname] = (ps_i, gps_i)
        self.graph.seed_sites(seed)
        self.saved_store: SavedTensorStore | None = None
        self._promotion = None
        self.dynamic: DynamicContainers | None = None
        self.module = self._insert_sites()
        self.assignment = "all-high"

    # -- the torch side -------------------------------------------------------------------------
    def _insert_sites(self) -> fx.GraphModule:
        gm = self.traced.graph_module
        graph = gm.graph
        for i, op in enumerate(self.traced.operations):
            y, gy = self._op_sites[i]
            name = f"_minifloat_site_{i}"
            if _is_relu(op.node, gm):
                # ReLU keeps its output for backward: fused with its sites, it keeps the rounded one.
                source = op.node.args[0]
                inplace = (isinstance(source, fx.Node) and source.op == "call_module"
                           and str(source.target).startswith("_minifloat_site_") and len(source.users) == 1)
                self._fuse(gm, op, name, _ActivationSites(self, y, gy, fused_relu=True, inplace=inplace))
                continue
            if op.node.op == "call_module" and is_plain_max_pool(gm.get_submodule(op.node.target)):
                # Max pooling keeps its argmax indices for backward: fused with its sites, it keeps
                # them bit-packed at the window's width (pooling.py).
                self._fuse(gm, op, name, MaxPoolSites(self, gm.get_submodule(op.node.target), y, gy))
                continue
            gm.add_submodule(name, _ActivationSites(self, y, gy, inplace=_rounds_in_place(op.node, gm)))
            users = list(op.node.users)
            with graph.inserting_after(op.node):
                rounded = graph.call_module(name, (op.node,))
            for u in users:
                u.replace_input_with(op.node, rounded)
            if op.module is not None:
                for qname, _ in op.parameters:
                    pname = qname.rsplit(".", 1)[-1]
                    p, gp = self._param_sites[qname]
                    parametrize.register_parametrization(op.module, pname, _ParameterSites(self, p, gp))
        graph.lint()
        gm.recompile()
        return gm

    def _check(self, site: int, t: torch.Tensor) -> None:
        if t.dtype != torch.float32 or t.device.type != "cpu":
            raise TypeError(f"minifloat.training: site {self.site(site).name} got a {t.dtype} tensor on "
                            f"{t.device}; the sites round float32 CPU tensors")

    def _round(self, site: int, t: torch.Tensor):
        """A forward site (Y or P): the assigned format's rounding, then the site's dynamic container.
        Returns what the matching backward site needs from this forward (the container's kept
        input), or None."""
        self._check(site, t)
        training = self.traced.graph_module.training
        self.graph.apply_site(site, t.data_ptr(), t.numel(), training, threads())
        if self.dynamic is not None:
            if self.dynamic._training != training:
                self.dynamic.set_training(training)
            return self.dynamic.forward(site, t, training)
        return None

    def _round_gradient(self, site: int, g: torch.Tensor, kept=None) -> None:
        """A backward site (GY or GP): the assigned format's rounding, then the container's backward
        for the forward that returned `kept`."""
        self._check(site, g)
        self.graph.apply_site(site, g.data_ptr(), g.numel(), self.traced.graph_module.training, threads())
        if self.dynamic is not None:
            self.dynamic.backward(site, g, kept)

    def _rounded_gradient(self, site: int | None, grad: torch.Tensor, kept=None) -> torch.Tensor:
        """A contiguous copy of an incoming gradient, rounded at `site` when the op has a GY site."""
        g = grad.contiguous().clone()
        if site is not None:
            self._round_gradient(site, g, kept)
        return g

    def _fuse(self, gm: fx.GraphModule, op, name: str, module: nn.Module) -> None:
        """Replaces op's node by a call of `module` (registered as `name`) on the node's first argument."""
        graph = gm.graph
        gm.add_submodule(name, module)
        with graph.inserting_after(op.node):
            fused = graph.call_module(name, (op.node.args[0],))
        op.node.replace_all_uses_with(fused)
        graph.erase_node(op.node)
        op.node = fused

    def _note(self, out, site, kind, dirty=False):
        if self.saved_store is not None:
            fmt = None
            if site is not None:
                info = self.graph.site(site)
                fmt = Format._from_key(info[5]) if info[4] else None
                if fmt is None and self.dynamic is not None:
                    fmt = _container_format(self.dynamic.container_of(site))
            self.saved_store.note(out, fmt, kind, 1 if dirty else 0)

    def store_saved_tensors(self, mode: str = "packed") -> SavedTensorStore:
        """A SavedTensorStore that this model's sites report their outputs to: run the forward
        pass inside `with store:` and autograd keeps the tensors it saves as the store's mode says."""
        self.saved_store = SavedTensorStore(mode)
        return self.saved_store

    def __call__(self, x):
        return self.module(x)

    # -- sites and groups ------------------------------------------------------------------------
    def site(self, index: int) -> SiteInfo:
        name, role, numel, low, enabled, cur, high, lowf, bits = self.graph.site(index)
        return SiteInfo(index, name, role, numel, bool(low), enabled, Format._from_key(cur), Format._from_key(high),
                        Format._from_key(lowf), bits)

    def sites(self) -> list[SiteInfo]:
        return [self.site(i) for i in range(self.graph.site_count())]

    def site_stats(self, index: int) -> RoundingStats:
        return RoundingStats(*self.graph.site_stats(index))

    def find(self, name: str) -> int:
        s = self.graph.find(name)
        if s is None:
            raise KeyError(f"minifloat.training: no site named {name!r}")
        return s

    def groups(self) -> list[Group]:
        out = []
        for name, _, modules, sites, size in _core.group_tensors(self.graph):
            out.append(Group(name, tuple(self.graph.module(m)[0] for m in modules),
                             tuple(self.graph.site(s)[0] for s in sites), size))
        return out

    # -- policies --------------------------------------------------------------------------------
    def assign(self, assignment: str, ratio: float = 0.0, order: str = "decreasing", seed: int = 0) -> dict:
        """Puts a precision assignment into the sites (all C++): 'all-high', 'uniform', 'op',
        'op-variant', 'ours' (size-ordered demotion to `ratio` in `order`, `seed` for random) or
        'fp32' (no rounding at all). Returns what demotion chose ('ours') or {}."""
        who = "minifloat.training.assign"
        if assignment not in ASSIGNMENTS:
            raise ValueError(f"{who}: assignment {assignment!r} is not one of {', '.join(ASSIGNMENTS)}")
        info = {}
        if assignment == "fp32":
            _core.disable_rounding(self.graph)
            self.assignment = assignment
            return info
        if assignment == "ours":
            if order not in ORDERS:
                raise ValueError(f"{who}: order {order!r} is not one of {', '.join(ORDERS)}")
            levels, demoted, share = _core.assign_demote_by_size(self.graph, float(ratio), ORDERS.index(order), seed)
            info = {"groups_demoted": list(demoted), "demoted_share": share}
        else:
            levels = {"all-high": _core.assign_all_high, "uniform": _core.assign_uniform,
                      "op": _core.assign_operator_based,
                      "op-variant": _core.assign_operator_based_variant}[assignment](self.graph)
        _core.apply_assignment(self.graph, levels)
        self.assignment = assignment
        return info

    def set_rounding(self, mode: str) -> None:
        if mode not in ROUNDING:
            raise ValueError(f"minifloat.training: rounding {mode!r} is not one of {', '.join(ROUNDING)}")
        self.graph.set_rounding(ROUNDING.index(mode))

    def begin_step(self, step: int) -> None:
        self.graph.begin_step(step)
        if self.dynamic is not None:
            self.dynamic.begin_step(step)

    def enable_dynamic(self, options: DynamicOptions | None = None) -> DynamicContainers:
        """Schrödinger's FP's dynamic containers (QM+QE or BitWave, dynamic.py) on every Y (input
        excluded) and P, in place of the precision assignment, which is set to 'fp32' (no site
        rounds; gradients stay fp32). Call dynamic.begin_epoch(epoch, lr) before each epoch."""
        self.assign("fp32")
        self.dynamic = DynamicContainers(self, options or DynamicOptions())
        return self.dynamic

    def enable_promotion(self, theta: float = 0.01) -> None:
        self._promotion = _core.OverflowPromotion(float(theta))

    def promote(self, step: int) -> int:
        """Overflow promotion after a step (C++ overflow_promotion): every low forward site whose
        overflow ratio this step is >= Θ goes high for good. Returns how many were promoted."""
        return 0 if self._promotion is None else self._promotion.promote(self.graph, step)

    def promotion_log(self) -> list:
        return [] if self._promotion is None else self._promotion.log()

    def footprint(self) -> dict:
        total, all_high, saved, saveable, ratio = self.graph.footprint()
        return {"total_bits": total, "all_high_bits": all_high, "saved_bits": saved, "saveable_bits": saveable,
                "low_ratio": ratio}


def instrument(model: nn.Module, example_input: torch.Tensor, candidates: Candidates | None = None,
               seed: int = 0) -> PrecisionModel:
    """The model traced, with its C++ training graph and a rounding site on every Y, GY, P, GP.
    Every site starts high; call assign() for another assignment."""
    if candidates is None:
        candidates = Candidates()
    pm = PrecisionModel(model, example_input, candidates, seed)
    pm.assign("all-high")
    return pm


class LossScaler:
    """Dynamic loss scaling with GradScaler's rules, the C++ minifloat::training::loss_scaler."""

    def __init__(self, init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._s = _core.LossScaler(float(init_scale), float(growth_factor), float(backoff_factor), int(growth_interval),
                                   bool(enabled))

    @property
    def scale(self) -> float:
        return self._s.scale

    @property
    def growth_tracker(self) -> int:
        return self._s.growth_tracker

    def unscale_(self, parameters) -> bool:
        """Checks every gradient for non-finite values and multiplies it by 1/scale in place."""
        found = False
        for p in parameters:
            g = p.grad
            if g is None:
                continue
            if g.dtype != torch.float32 or not g.is_contiguous() or g.device.type != "cpu":
                raise TypeError("minifloat.training.LossScaler: gradients must be contiguous float32 CPU tensors")
            found = self._s.unscale(g.data_ptr(), g.numel()) or found
        return found

    def should_step(self) -> bool:
        return self._s.should_step()

    def update(self) -> None:
        self._s.update()


@dataclass(frozen=True)
class StepResult:
    loss: float          # the unscaled loss
    stepped: bool        # False when the loss scaler skipped the step (a non-finite gradient)
    scale: float         # the loss scale used in this step
    promoted: int        # sites promoted after this step


def training_step(pm: PrecisionModel, optimizer: torch.optim.Optimizer, scaler: LossScaler, loss_fn, x, target,
                  step: int, store: SavedTensorStore | None = None) -> StepResult:
    """One step of Algorithm 2 with dynamic loss scaling: begin the sites' step, forward (inside
    `store` when given, so saved tensors are kept as it says), backward of loss x scale with GY and
    GP rounded at their sites, unscale and check every gradient (C++ loss_scaler), the optimizer
    step unless a gradient was non-finite, the scaler's update, then overflow promotion."""
    if pm.dynamic is not None and scaler._s.enabled:
        raise ValueError("minifloat.training.training_step: dynamic containers need loss scaling off (the "
                         "bitlength gradients would be scaled too); use LossScaler(enabled=False)")
    pm.module.train()
    pm.begin_step(step)
    optimizer.zero_grad(set_to_none=True)
    if store is not None:
        with store:
            loss = loss_fn(pm(x), target)
    else:
        loss = loss_fn(pm(x), target)
    scale = scaler.scale
    (loss * scale).backward()
    if pm.dynamic is not None:
        pm.dynamic.end_step(float(loss.detach()))  # the bitlength update (QM+QE) or BitWave's observation
    params = [p for group in optimizer.param_groups for p in group["params"]]
    scaler.unscale_(params)
    stepped = scaler.should_step()
    if stepped:
        optimizer.step()
    scaler.update()
    promoted = pm.promote(step)
    return StepResult(float(loss.detach()), stepped, scale, promoted)
