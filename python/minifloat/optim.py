"""torch.optim optimizers whose weights live only in the library's storage — split storage (the
visible low-precision codes plus k packed extra mantissa bits, minifloat/storage/split.hpp),
low-precision codes alone (low_tensor.hpp) or an OCP MX block-scaled tensor alone
(low_block_tensor.hpp) — with no fp32 master copy, stepped by the C++ optimizers of
minifloat/storage/optimizers.hpp (docs/no-master-weights.md, docs/python.md). A step checks every
parameter before it changes any: all or nothing.

Each parameter tensor keeps the decoded compute copy the model runs on: the restored weights
(compute="restored", the default: with the lossless split bf16 + 16 the run equals
torch.optim.SGD / AdamW bit for bit) or the visible low-precision values (compute="visible",
the paper's forward pass on h). optimizer.storage_bytes() reports what the optimizer holds.
"""

import collections

import numpy as np
import torch

from . import _core
from ._arguments import as_int
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
        self.extra_bits = as_int(extra_bits, "minifloat.optim.SplitStorage", "extra_bits", 0, 64)
        self.mode = lookup(mode, SPLIT_MODES, "minifloat.optim.SplitStorage", "mode")

    def make(self, values, seed):
        return _core.SplitWeights(values.ctypes.data, values.size, self.visible._key, self.extra_bits, self.mode, seed)

    def describe(self):
        return {"kind": "split", "visible": self.visible._key, "extra_bits": self.extra_bits,
                "mode": SPLIT_MODES[self.mode]}

    def save(self, weights):
        visible, extra, size, seed, generation = weights.parts()
        return {"visible_words": _words_tensor(visible), "extra_words": _words_tensor(extra), "size": size,
                "seed": seed, "generation": generation}

    def load(self, entry):
        visible, extra = _words_array(entry["visible_words"]), _words_array(entry["extra_words"])
        return _core.SplitWeights.from_parts(self.visible._key, self.extra_bits, self.mode, entry["seed"],
                                             entry["generation"], entry["size"], visible.ctypes.data, visible.size,
                                             extra.ctypes.data, extra.size)

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

    def describe(self):
        return {"kind": "low", "format": self.fmt._key, "rounding": _core.rounding_names[self.rounding]}

    def save(self, weights):
        codes, size, seed, generation = weights.parts()
        return {"code_words": _words_tensor(codes), "size": size, "seed": seed, "generation": generation}

    def load(self, entry):
        codes = _words_array(entry["code_words"])
        return _core.LowWeights.from_parts(self.fmt._key, self.rounding, entry["seed"], entry["generation"],
                                           entry["size"], codes.ctypes.data, codes.size)

    def __repr__(self):
        return f"LowStorage({self.fmt!r}, rounding={_core.rounding_names[self.rounding]!r})"


class BlockStorage:
    """Weights as an OCP MX block-scaled tensor only (storage::low_block_tensor): element codes
    of `fmt` (an MX format name: mxfp8-e4m3, mxfp8-e5m2, mxfp6-e3m2, mxfp6-e2m3, mxfp4, mxint8)
    plus one E8M0 scale per block of 32, re-quantized whole blocks at a time after each update
    with `rounding` (nearest_even or stochastic), elements saturating. A parameter of two or more
    dimensions is stored as (shape[0], rest) rows, its blocks along each row (the reduction
    dimension of a linear layer's (out, in) weight); a vector is one row."""

    def __init__(self, fmt="mxfp8-e4m3", rounding="nearest_even"):
        who = "minifloat.optim.BlockStorage"
        name = fmt if isinstance(fmt, str) else str(fmt)
        if name not in _core.block_storage_names:
            raise ValueError(f"{who}: fmt {fmt!r} is not one of {', '.join(_core.block_storage_names)} (NVFP4's "
                             "per-tensor scale needs the whole updated tensor, which a chunked step does not have)")
        self.fmt = name
        self.rounding = lookup(rounding, tuple(_core.rounding_names), who, "rounding")

    @staticmethod
    def _rows(p):
        return p.shape[0] if p.dim() >= 2 and p.shape[0] > 0 else 1

    def make(self, values, seed, rows=1):
        return _core.BlockWeights(values.ctypes.data, values.size, self.fmt, rows, self.rounding, seed)

    def describe(self):
        return {"kind": "block", "format": self.fmt, "rounding": _core.rounding_names[self.rounding]}

    def save(self, weights):
        elements, scales, size, rows, seed, generation = weights.parts()
        return {"element_words": _words_tensor(elements), "scales": torch.from_numpy(scales), "size": size,
                "rows": rows, "seed": seed, "generation": generation}

    def load(self, entry):
        words = _words_array(entry["element_words"])
        scales = entry["scales"]
        if not isinstance(scales, torch.Tensor) or scales.dtype != torch.uint8 or scales.dim() != 1:
            raise ValueError("minifloat.optim.load_state_dict: stored scales must be a 1-D uint8 tensor")
        scales = np.ascontiguousarray(scales.detach().cpu().numpy())
        return _core.BlockWeights.from_parts(self.fmt, entry["rows"], self.rounding, entry["seed"], entry["generation"],
                                             entry["size"], words.ctypes.data, words.size, scales.ctypes.data,
                                             scales.size)

    def __repr__(self):
        return f"BlockStorage({self.fmt!r}, rounding={_core.rounding_names[self.rounding]!r})"


def _words_tensor(words):
    """uint32 words as an int32 tensor: every torch operation and torch.save handle int32, and
    checkpoints written so far hold int32."""
    return torch.from_numpy(words.view(np.int32))


def _words_array(tensor):
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.int32 or tensor.dim() != 1:
        raise ValueError("minifloat.optim.load_state_dict: stored words must be a 1-D int32 tensor")
    return np.ascontiguousarray(tensor.detach().cpu().numpy()).view(np.uint32)


def _float_array(tensor, what):
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.float32:
        raise ValueError(f"minifloat.optim.load_state_dict: {what} must be a float32 tensor")
    return np.ascontiguousarray(tensor.detach().cpu().numpy()).reshape(-1)


def _seed_of(seed, i):
    """Parameter i's seed: the library's rule (training/parameter_seed.hpp), as the C++ trainer's;
    a negative or wide run seed is taken modulo 2**64."""
    return _core.parameter_seed(int(seed) % (1 << 64), i)


class _StoredOptimizer(torch.optim.Optimizer):
    _who = "minifloat.optim"

    def __init__(self, params, defaults, storage, compute, seed):
        if not isinstance(storage, (SplitStorage, LowStorage, BlockStorage)):
            raise TypeError(f"{self._who}: storage must be a SplitStorage, LowStorage or BlockStorage, "
                            f"not {type(storage).__name__}")
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

    def _check_parameter(self, p, who):
        if p.device.type != "cpu":
            raise TypeError(f"{who}: a parameter on {p.device.type}; this build keeps weights on the CPU")
        if p.dtype != torch.float32:
            raise TypeError(f"{who}: a parameter of dtype {p.dtype}; the stored weights are float32")

    def _store(self, p, i):
        self._check_parameter(p, self._who)
        values = np.ascontiguousarray(p.detach().numpy())
        if isinstance(self._storage, BlockStorage):
            return self._storage.make(values, _seed_of(self._seed, i), BlockStorage._rows(p))
        return self._storage.make(values, _seed_of(self._seed, i))

    def _check_matches(self, p, weights, i, who):
        """The parameter still is what the stored weights are the weights of: float32 on the CPU,
        as many values (p.data may have been replaced since, e.g. by pruning or .half())."""
        self._check_parameter(p, who)
        if p.numel() != weights.size:
            raise ValueError(f"{who}: parameter {i} has {p.numel()} values, its stored weights {weights.size} "
                             "(was p.data replaced? build a new optimizer for the new tensor)")

    def _write_compute_copy(self, p, weights):
        fill = weights.restore if self._compute == 0 else weights.visible
        with torch.no_grad():
            if p.is_contiguous():
                # Straight into the parameter's memory (a float32 CPU tensor of weights.size values:
                # checked by every caller): a temporary of p's size was faulted in page by page on
                # every step, then copied (docs/python.md).
                fill(p.data_ptr())
                # Then what p.copy_ did for autograd: one in-place op bumps the version counter p
                # shares with its views, so a graph that saved p sees the change. x * 1 is x for
                # every value a restore writes (its NaNs are quiet).
                p.view(-1)[:1].mul_(1)
            else:
                copy = np.empty(weights.size, dtype=np.float32)
                fill(copy.ctypes.data)
                p.copy_(torch.from_numpy(copy).view(p.shape))

    def _gradient(self, p, i, who):
        g = p.grad
        if g.is_sparse:
            raise TypeError(f"{who}: sparse gradients are not supported")
        if g.dtype != torch.float32 or g.device.type != "cpu":
            raise TypeError(f"{who}: a gradient of dtype {g.dtype} on {g.device.type}; expected float32 on the CPU")
        if g.numel() != p.numel():
            raise ValueError(f"{who}: parameter {i} has {p.numel()} values, its gradient {g.numel()}")
        return np.ascontiguousarray(g.detach().numpy()).reshape(-1)

    @torch.no_grad()
    def step(self, closure=None):
        """One step of every parameter with a gradient, all or nothing: every group's settings,
        every parameter, gradient and the storability of every update are checked before any
        weight or state changes, so after an error a retry does not step anything twice."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        who = f"{self._who}.step"
        for group in self.param_groups:
            self._check(group)
        params, weights, grads, states, settings = [], [], [], [], []
        for i, p in enumerate(self._parameters()):
            if p.grad is None:
                continue
            state = self.state[p]
            self._check_matches(p, state["weights"], i, who)
            grads.append(self._gradient(p, i, who))
            params.append(p)
            weights.append(state["weights"])
            states.append(state.get("optimizer"))
        if not params:
            return loss
        fresh = [s is None for s in states]
        states = [self._new_state() if s is None else s for s in states]
        groups = {id(p): group for group in self.param_groups for p in group["params"]}
        settings = [self._settings(groups[id(p)]) for p in params]
        self._steps(weights, [g.ctypes.data for g in grads], [g.size for g in grads], states, settings,
                    not isinstance(self._storage, SplitStorage))
        for p, state, new in zip(params, states, fresh):
            if new:
                self.state[p]["optimizer"] = state
            self._write_compute_copy(p, self.state[p]["weights"])
        return loss

    def storage_bytes(self):
        """Bytes the optimizer holds: the stored weights (codes and extra bits), the optimizer
        state (momentum / moments), and the parameters' compute copies (4 bytes per weight,
        the model's own tensors)."""
        weights = sum(s["weights"].nbytes for s in self.state.values())
        state = sum(s["optimizer"].nbytes for s in self.state.values() if "optimizer" in s)
        compute = sum(p.numel() * p.element_size() for g in self.param_groups for p in g["params"])
        return {"weights": weights, "state": state, "compute_copy": compute, "total": weights + state + compute}

    def _parameters(self):
        return [p for group in self.param_groups for p in group["params"]]

    def _entry(self, s):
        entry = {"weights": self._storage.save(s["weights"])}
        if "optimizer" in s:
            entry["optimizer"] = self._save_state(s["optimizer"])
        return entry

    def state_dict(self):
        """torch.optim's layout — {"state": {index: ...}, "param_groups": [...]} — holding the stored
        weights exactly (code words, extra-bit words, seed, generation), the optimizer state and
        the storage description; torch.save writes it."""
        index = {id(p): i for i, p in enumerate(self._parameters())}
        state = {index[id(p)]: self._entry(self.state[p]) for p in self._parameters()}
        groups = [dict(group, params=[index[id(p)] for p in group["params"]]) for group in self.param_groups]
        return {"state": state, "param_groups": groups, "storage": self._storage.describe()}

    def load_state_dict(self, state_dict):
        """Restores what state_dict() saved into an optimizer over the same parameters and storage,
        and writes the compute copies into the parameters. Everything is checked first (the
        storage, every group's hyperparameters as the constructor checks them, every parameter
        and stored tensor): on an error nothing has changed."""
        who = f"{self._who}.load_state_dict"
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{who}: not a state_dict of this optimizer (no 'state' and 'param_groups')")
        if state_dict.get("storage") != self._storage.describe():
            raise ValueError(f"{who}: the checkpoint's storage {state_dict.get('storage')} is not this optimizer's "
                             f"{self._storage.describe()}")
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(g["params"]) != len(mine["params"]) for g, mine in zip(groups, self.param_groups)):
            raise ValueError(f"{who}: the checkpoint's parameter groups differ from this optimizer's")
        updated = []
        for saved, mine in zip(groups, self.param_groups):
            group = dict(mine)
            group.update({k: v for k, v in saved.items() if k != "params"})
            self._check(group)
            updated.append(group)
        restored = []
        for i, p in enumerate(self._parameters()):
            entry = state_dict["state"].get(i)
            if entry is None:
                raise ValueError(f"{who}: no stored weights for parameter {i}")
            weights = self._storage.load(entry["weights"])
            self._check_matches(p, weights, i, who)
            optimizer = self._load_state(entry["optimizer"], p.numel(), who) if "optimizer" in entry else None
            restored.append((p, weights, optimizer))
        for group, new in zip(self.param_groups, updated):
            group.update({k: v for k, v in new.items() if k != "params"})
        for p, weights, optimizer in restored:
            self.state[p] = {"weights": weights}
            if optimizer is not None:
                self.state[p]["optimizer"] = optimizer
            self._write_compute_copy(p, weights)

    # copy.deepcopy and pickle: the C++ weight stores and states travel as their checkpoint
    # entries (exact), keyed by the parameters, which deepcopy and pickle copy with the groups.
    def __getstate__(self):
        state = {p: self._entry(s) for p, s in self.state.items()}
        return {"defaults": self.defaults, "param_groups": self.param_groups, "stored_state": state,
                "storage": self._storage, "compute": self._compute, "seed": self._seed, "adopted": self._adopted}

    def __setstate__(self, state):
        self._storage, self._compute, self._seed = state["storage"], state["compute"], state["seed"]
        self._adopted = state["adopted"]
        who = f"{self._who} (unpickling)"
        stored = {}
        for p, entry in state["stored_state"].items():
            s = {"weights": self._storage.load(entry["weights"])}
            if "optimizer" in entry:
                s["optimizer"] = self._load_state(entry["optimizer"], s["weights"].size, who)
            stored[p] = s
        super().__setstate__({"defaults": state["defaults"], "param_groups": state["param_groups"],
                              "state": collections.defaultdict(dict, stored)})


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

    @staticmethod
    def _settings(group):
        return (group["lr"], group["momentum"], group["dampening"], group["weight_decay"], group["nesterov"],
                group["maximize"])

    _new_state = staticmethod(_core.SgdState)
    _steps = staticmethod(_core.sgd_steps)

    @staticmethod
    def _save_state(s):
        return {"momentum_buffer": torch.from_numpy(s.momentum_buffer()), "steps": s.steps}

    @staticmethod
    def _load_state(entry, n, who):
        buffer = _float_array(entry["momentum_buffer"], "momentum_buffer")
        if buffer.size not in (0, n):
            raise ValueError(f"{who}: a momentum buffer of {buffer.size} values for {n} parameters")
        s = _core.SgdState()
        s.set(buffer.ctypes.data, buffer.size, int(entry["steps"]))
        return s



class Adam(_StoredOptimizer):
    """torch.optim.Adam (L2 weight decay, maximize; no amsgrad) on stored weights."""

    _who = "minifloat.optim.Adam"
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 maximize=False, storage=None, compute="restored", seed=0, first_moment=None):
        if amsgrad:
            raise ValueError(f"{self._who}: amsgrad is not supported")
        first = lookup("lerp" if first_moment is None else first_moment, FIRST_MOMENT, self._who, "first_moment")
        beta1, beta2 = betas
        _core.check_adam(lr, beta1, beta2, eps, weight_decay, self._decoupled, maximize, first)
        defaults = dict(lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay, maximize=maximize,
                        first_moment=first)
        super().__init__(params, defaults, SplitStorage() if storage is None else storage, compute, seed)

    def _check(self, group):
        _core.check_adam(group["lr"], group["betas"][0], group["betas"][1], group["eps"], group["weight_decay"],
                         self._decoupled, group["maximize"], group["first_moment"])

    @staticmethod
    def _save_state(s):
        return {"exp_avg": torch.from_numpy(s.exp_avg()), "exp_avg_sq": torch.from_numpy(s.exp_avg_sq()),
                "steps": s.steps}

    @staticmethod
    def _load_state(entry, n, who):
        m = _float_array(entry["exp_avg"], "exp_avg")
        v = _float_array(entry["exp_avg_sq"], "exp_avg_sq")
        if m.size != v.size or m.size not in (0, n):
            raise ValueError(f"{who}: moments of {m.size} and {v.size} values for {n} parameters")
        s = _core.AdamState()
        s.set(m.ctypes.data, v.ctypes.data, m.size, int(entry["steps"]))
        return s

    def _settings(self, group):
        return (group["lr"], group["betas"][0], group["betas"][1], group["eps"], group["weight_decay"],
                self._decoupled, group["maximize"], group["first_moment"])

    _new_state = staticmethod(_core.AdamState)
    _steps = staticmethod(_core.adam_steps)


class AdamW(Adam):
    """torch.optim.AdamW (decoupled weight decay, default 1e-2) on stored weights."""

    _who = "minifloat.optim.AdamW"
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, storage=None, compute="restored", seed=0, first_moment=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize, storage=storage,
                         compute=compute, seed=seed, first_moment=first_moment)
