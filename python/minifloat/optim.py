"""torch.optim optimizers whose weights live only in the library's storage — split storage (the
visible low-precision codes plus k packed extra mantissa bits, minifloat/storage/split.hpp) or
low-precision codes alone (low_tensor.hpp) — with no fp32 master copy, stepped by the C++
optimizers of minifloat/storage/optimizers.hpp (docs/no-master-weights.md, docs/python.md).

Each parameter tensor keeps the decoded compute copy the model runs on: the restored weights
(compute="restored", the default: with the lossless split bf16 + 16 the run equals
torch.optim.SGD / AdamW bit for bit) or the visible low-precision values (compute="visible",
the paper's forward pass on h). optimizer.storage_bytes() reports what the optimizer holds.
"""

import numpy as np
import torch

from . import _core
from ._buffers import lookup
from ._formats import as_format

SPLIT_MODES = tuple(_core.split_mode_names)
COMPUTE = ("restored", "visible")
FIRST_MOMENT = tuple(_core.first_moment_names)


class SplitStorage:
    """Weights as `visible`-format codes plus `extra_bits` packed extra bits (split_layout):
    mode "truncate" keeps the next extra_bits bits; "stochastic" rounds the visible part
    stochastically and keeps a flag plus extra_bits - 1 bits."""

    def __init__(self, visible="bfloat16", extra_bits=16, mode="truncate"):
        self.visible = as_format(visible, "minifloat.optim.SplitStorage")
        self.extra_bits = extra_bits
        self.mode = lookup(mode, SPLIT_MODES, "minifloat.optim.SplitStorage", "mode")

    def make(self, values, seed):
        return _core.SplitWeights(values.ctypes.data, values.size, self.visible._key, self.extra_bits, self.mode, seed)

    def __repr__(self):
        return f"SplitStorage({self.visible!r}, extra_bits={self.extra_bits}, mode={SPLIT_MODES[self.mode]!r})"


class LowStorage:
    """Weights as `fmt` codes only, rounded after each update with `rounding` (nearest_even or
    stochastic), saturating (low_tensor)."""

    def __init__(self, fmt, rounding="nearest_even"):
        self.fmt = as_format(fmt, "minifloat.optim.LowStorage")
        self.rounding = lookup(rounding, tuple(_core.rounding_names), "minifloat.optim.LowStorage", "rounding")

    def make(self, values, seed):
        return _core.LowWeights(values.ctypes.data, values.size, self.fmt._key, self.rounding, seed)

    def __repr__(self):
        return f"LowStorage({self.fmt!r}, rounding={_core.rounding_names[self.rounding]!r})"


def _seed_of(seed, i):
    return (seed * 0x9E3779B97F4A7C15 + i) % (1 << 64)


class _StoredOptimizer(torch.optim.Optimizer):
    _who = "minifloat.optim"

    def __init__(self, params, defaults, storage, compute, seed):
        if not isinstance(storage, (SplitStorage, LowStorage)):
            raise TypeError(f"{self._who}: storage must be a SplitStorage or LowStorage, not {type(storage).__name__}")
        self._storage = storage
        self._compute = lookup(compute, COMPUTE, self._who, "compute")
        self._seed = seed
        self._adopted = 0
        super().__init__(params, defaults)

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        params = self.param_groups[-1]["params"]
        try:  # every parameter is checked and stored before any parameter is written
            stored = [self._store(p, self._adopted + i) for i, p in enumerate(params)]
        except Exception:
            self.param_groups.pop()
            raise
        self._adopted += len(params)
        for p, weights in zip(params, stored):
            self.state[p]["weights"] = weights
            self._write_compute_copy(p, weights)

    def _store(self, p, i):
        if p.device.type != "cpu":
            raise TypeError(f"{self._who}: a parameter on {p.device.type}; this build keeps weights on the CPU")
        if p.dtype != torch.float32:
            raise TypeError(f"{self._who}: a parameter of dtype {p.dtype}; split and low storage hold float32 weights")
        return self._storage.make(np.ascontiguousarray(p.detach().numpy()), _seed_of(self._seed, i))

    def _write_compute_copy(self, p, weights):
        copy = np.empty(weights.size, dtype=np.float32)
        (weights.restore if self._compute == 0 else weights.visible)(copy.ctypes.data)
        with torch.no_grad():
            p.copy_(torch.from_numpy(copy).view(p.shape))

    def _gradient(self, p):
        g = p.grad
        if g.is_sparse:
            raise TypeError(f"{self._who}: sparse gradients are not supported")
        if g.dtype != torch.float32 or g.device.type != "cpu":
            raise TypeError(f"{self._who}: a gradient of dtype {g.dtype} on {g.device.type}; expected float32 on the CPU")
        return np.ascontiguousarray(g.detach().numpy())

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._check(group)
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                grad = self._gradient(p)
                self._step_one(state, grad, group)
                self._write_compute_copy(p, state["weights"])
        return loss

    def storage_bytes(self):
        """Bytes the optimizer holds: the stored weights (codes and extra bits), the optimizer
        state (momentum / moments), and the parameters' compute copies (4 bytes per weight,
        the model's own tensors)."""
        weights = sum(s["weights"].nbytes for s in self.state.values())
        state = sum(s["optimizer"].nbytes for s in self.state.values() if "optimizer" in s)
        compute = sum(p.numel() * p.element_size() for g in self.param_groups for p in g["params"])
        return {"weights": weights, "state": state, "compute_copy": compute, "total": weights + state + compute}

    def state_dict(self):
        raise NotImplementedError(f"{self._who}: the stored weights live in C++ objects; saving an optimizer's "
                                  "state is not supported yet (save the model's parameters instead)")

    def load_state_dict(self, state_dict):
        raise NotImplementedError(f"{self._who}: loading an optimizer's state is not supported yet")


class SGD(_StoredOptimizer):
    """torch.optim.SGD (momentum, dampening, Nesterov, L2 weight decay, maximize) on stored weights."""

    _who = "minifloat.optim.SGD"

    def __init__(self, params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 storage=None, compute="restored", seed=0):
        _core.check_sgd(lr, momentum, dampening, weight_decay, nesterov, maximize)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize)
        super().__init__(params, defaults, SplitStorage() if storage is None else storage, compute, seed)

    def _check(self, group):
        _core.check_sgd(group["lr"], group["momentum"], group["dampening"], group["weight_decay"], group["nesterov"],
                        group["maximize"])

    def _step_one(self, state, grad, group):
        s = state.setdefault("optimizer", _core.SgdState())
        _core.sgd_step(state["weights"], grad.ctypes.data, grad.size, s, group["lr"], group["momentum"],
                       group["dampening"], group["weight_decay"], group["nesterov"], group["maximize"])


def _default_first_moment():
    """The first-moment kernel of the installed PyTorch: scale_add before 2.0, lerp from 2.0."""
    return "scale_add" if int(torch.__version__.split(".")[0]) < 2 else "lerp"


class Adam(_StoredOptimizer):
    """torch.optim.Adam (L2 weight decay, maximize; no amsgrad) on stored weights."""

    _who = "minifloat.optim.Adam"
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, storage=None, compute="restored", seed=0, first_moment=None):
        if amsgrad:
            raise ValueError(f"{self._who}: amsgrad is not supported")
        first = lookup(_default_first_moment() if first_moment is None else first_moment, FIRST_MOMENT, self._who,
                       "first_moment")
        beta1, beta2 = betas
        _core.check_adam(lr, beta1, beta2, eps, weight_decay, self._decoupled, maximize, first)
        defaults = dict(lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay, maximize=maximize,
                        first_moment=first)
        super().__init__(params, defaults, SplitStorage() if storage is None else storage, compute, seed)

    def _check(self, group):
        _core.check_adam(group["lr"], group["betas"][0], group["betas"][1], group["eps"], group["weight_decay"],
                         self._decoupled, group["maximize"], group["first_moment"])

    def _step_one(self, state, grad, group):
        s = state.setdefault("optimizer", _core.AdamState())
        _core.adam_step(state["weights"], grad.ctypes.data, grad.size, s, group["lr"], group["betas"][0],
                        group["betas"][1], group["eps"], group["weight_decay"], self._decoupled, group["maximize"],
                        group["first_moment"])


class AdamW(Adam):
    """torch.optim.AdamW (decoupled weight decay, default 1e-2) on stored weights."""

    _who = "minifloat.optim.AdamW"
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, storage=None, compute="restored", seed=0, first_moment=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, storage=storage,
                         compute=compute, seed=seed, first_moment=first_moment)
