"""Schrödinger's FP's dynamic fp32 containers on a PrecisionModel: QM+QE bitlength learning and BitWave.

`pm.enable_dynamic(DynamicOptions(method="qm-qe" | "bitwave", ...))` puts a container on every
layer output Y (the network input excluded: it is data) and every parameter P, as the C++ example
trainer does (examples/dynamic_containers.hpp). Every quantization, every bitlength gradient and
update, the regularizer, the learn-then-freeze schedule, BitWave's loss-slope controller, the
options' defaults and names and the footprint ledger are the C++ ones
(include/minifloat/training/dynamic_controller.hpp, the controller both trainers call, over
quantum.hpp, bitwave.hpp and container_footprint.hpp) reached through minifloat._core; this file
only wires them to the sites:

- forward of a Y or P site: the tensor's container quantizes the site's output in place
  (quantum_containers::forward, which keeps the unquantized input for the backward while
  training), and the ledger counts what is stored (describe_stored: sign rule, k_m, k_e and, with
  a Gecko variant, the exact Gecko exponent size);
- backward of the matching GY or GP site: the container's backward (eq. 8 on the gradient, which
  stays fp32, and while learning the bitlength gradients Σ g·ΔQ);
- after each step: the bitlength update with the regularizer (QM+QE) or BitWave's observation of
  the step's loss.

The precision-assignment sites are switched off (assignment "fp32"): the containers replace them.
Gradients stay fp32 and loss scaling must be off (a scaled loss would scale the bitlength
gradients). docs/torch-training.md and docs/dynamic-containers.md state the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import _core

METHODS = tuple(_core.dynamic_method_names)
VARIANTS = tuple(_core.footprint_variant_names)
GECKO = tuple(_core.gecko_variant_names)
_DEFAULTS = _core.dynamic_defaults()  # the C++ dynamic_options' defaults (training/dynamic_controller.hpp)


@dataclass(frozen=True)
class DynamicOptions:
    """The C++ dynamic_options (training/dynamic_controller.hpp) by the C++ trainer's --dc-* names;
    every default is read from the C++ struct."""

    method: str = _DEFAULTS["method"]                        # qm-qe | bitwave
    gamma_mantissa: float = _DEFAULTS["gamma_mantissa"]      # γ_m of eq. 16
    gamma_exponent: float = _DEFAULTS["gamma_exponent"]      # γ_e of eq. 16
    bit_lr: float = _DEFAULTS["bit_lr"]                      # SGD step of the bitlengths
    lambda_rule: str = _DEFAULTS["lambda_rule"]              # footprint | elements
    exponent_gradient: str = _DEFAULTS["exponent_gradient"]  # exact | linearised
    learn_epochs: int = _DEFAULTS["learn_epochs"]            # QM+QE learns in the first N epochs, then freezes
    relearn_epochs: int = _DEFAULTS["relearn_epochs"]        # ... and M epochs after a learning-rate change
    relearn_lr_factor: float = _DEFAULTS["relearn_lr_factor"]  # a rate <= F x the period's rate is a change
    bw_history: int = _DEFAULTS["bw_history"]                # BitWave: H losses in the regression
    bw_threshold: float = _DEFAULTS["bw_threshold"]          # BitWave: T on the slope normalised by the mean loss
    bw_cadence: int = _DEFAULTS["bw_cadence"]                # BitWave: batches between decisions
    bw_fix_epoch: int = _DEFAULTS["bw_fix_epoch"]            # BitWave: fix at the average after F epochs (0: never)
    gecko: str | None = _DEFAULTS["gecko"]                   # also count Gecko-encoded exponents (+G): faithful | improved
    sign: str = _DEFAULTS["sign"]                            # omit the sign bit of non-negative tensors, or "always"
    seed: int = _DEFAULTS["seed"]                            # the bitlength draws' seed

    def fields(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def check(self):
        """ValueError naming the field for a value the C++ options refuse."""
        who = "minifloat.training.DynamicOptions"
        for name in ("learn_epochs", "relearn_epochs", "bw_fix_epoch", "bw_history", "bw_cadence", "seed"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{who}: {name} must be >= 0")
        _core.check_dynamic_options(**self.fields())


@dataclass(frozen=True)
class TensorBits:
    """One container's state: the learned real bitlengths (QM+QE; BitWave's are its integers), the
    integer ones in force, and what the ledger counted this epoch (mean bits per stored value)."""

    name: str
    is_weight: bool
    numel: int
    n_mantissa: float
    n_exponent: float
    mantissa_bits: int
    exponent_bits: int
    mean_mantissa_bits: float   # this epoch's stored values (nan when none were stored)
    mean_exponent_bits: float
    sign_share: float
    mean_total_bits: float
    gecko_exponent_bits: float | None


class DynamicContainers:
    """The containers of one PrecisionModel (made by PrecisionModel.enable_dynamic)."""

    def __init__(self, pm, options: DynamicOptions):
        options.check()
        self.options = options
        self.method = options.method
        # The epoch and step decisions are the C++ controller's, as in the C++ trainer.
        self._control = _core.DynamicController(**options.fields())
        self._c = self._control.containers
        self.forward_of = {}   # Y / P site -> tensor index
        self.backward_of = {}  # GY / GP site -> tensor index
        for i, (y, gy) in enumerate(pm._op_sites):
            if i == 0:
                continue  # the input batch: data, neither learned nor counted
            name = pm.traced.operations[i].name
            t = self._control.add(name + ".Y", False, pm.traced.operations[i].numel)
            self.forward_of[y] = t
            if gy is not None:
                self.backward_of[gy] = t
            for qname, p in pm.traced.operations[i].parameters:
                ps, gps = pm._param_sites[qname]
                w = self._control.add(qname, True, p.numel())
                self.forward_of[ps] = w
                self.backward_of[gps] = w
        self.classes = [self._c.tensor(t)[1] for t in range(self._c.size())]
        self._bitwave = self._control.bitwave
        self.epoch_ledger = _core.ContainerLedger(self.classes)
        self.run_ledger = _core.ContainerLedger(self.classes)
        self._gecko = None if options.gecko is None else GECKO.index(options.gecko)
        self._sign_always = options.sign == "always"
        self._training = True
        self.epoch = 0

    # -- the sites' calls ---------------------------------------------------------------------------
    def forward(self, site, t, training: bool):
        """Quantizes site's output tensor t (contiguous float32 CPU) in place. Returns what the
        matching backward() takes: this forward's kept input and draw while training (so that
        several forwards before one backward each get their own), else None."""
        k = self.forward_of.get(site)
        if k is None:
            return None
        n = t.numel()
        kept = self._c.forward_kept(k, t.data_ptr(), n, training)
        if training:
            _, _, _, _, _, km, ke, _ = self._c.tensor(k)
            self.epoch_ledger.record(k, t.data_ptr(), n, km, ke, self._sign_always, self._gecko)
        return kept

    def backward(self, site, g, kept=None) -> None:
        """The container's backward on gradient g (in place) for the forward that returned `kept`."""
        k = self.backward_of.get(site)
        if k is None:
            return
        if kept is None:
            raise RuntimeError(f"minifloat.training: the backward of {self._c.tensor(k)[0]} has no training forward "
                               "(a forward in evaluation mode keeps no input for the bitlength gradients)")
        self._c.backward_kept(k, kept, g.data_ptr(), g.numel())

    def container_of(self, site):
        """(mantissa bits, full range, emin, emax, exponent bits) in force at a Y / P site, or None."""
        k = self.forward_of.get(site)
        return None if k is None else self._c.tensor(k)[7]

    # -- the trainer's calls: each the C++ controller's (training/dynamic_controller.hpp) ---------------
    def begin_epoch(self, epoch: int, lr: float) -> None:
        """Epoch `epoch` (0-based) starts at learning rate lr: the schedule (QM+QE) or BitWave's fix."""
        self.epoch = epoch
        self.epoch_ledger.clear()
        self._control.begin_epoch(int(epoch), float(lr))

    def set_training(self, training: bool) -> None:
        """Evaluation quantizes at ceil(n) (QM+QE) or BitWave's current container, and counts nothing."""
        self._training = training
        if not training:
            self._control.begin_evaluation()

    def begin_step(self, step: int) -> None:
        """QM+QE draws every tensor's bitlengths for `step`; BitWave imposes its current container."""
        self._control.begin_step(int(step))

    def end_step(self, loss: float) -> int:
        """QM+QE's bitlength update, or BitWave's observation of the loss; returns BitWave's decision
        (-1 narrower, 0 hold, 1 wider; 0 for QM+QE)."""
        return self._control.end_step(float(loss))

    def end_epoch(self) -> None:
        self.run_ledger.add(self.epoch_ledger)

    # -- reports -----------------------------------------------------------------------------------
    @property
    def learning(self) -> bool:
        return self._control.learning

    @property
    def bitwave(self):
        """BitWave's state: (mantissa bits, narrowing, fixed, last slope, mean mantissa bits, mean narrowing)."""
        b = self._bitwave
        return (b.mantissa_bits, b.narrowing, b.fixed, b.last_slope, b.mean_mantissa_bits, b.mean_narrowing)

    def tensors(self) -> list[TensorBits]:
        out = []
        for k in range(self._c.size()):
            name, is_weight, numel, nm, ne, km, ke, _ = self._c.tensor(k)
            f = self.epoch_ledger.tensor(k)
            elements, sign, mant, expo, gecko_bits, _ = f.counts()
            per = (lambda v: v / elements) if elements else (lambda v: float("nan"))
            if self.method == "bitwave":
                nm, ne = float(km), float(ke)
            out.append(TensorBits(name, is_weight, numel, nm, ne, km, ke, per(mant), per(expo), per(sign),
                                  per(f.bits(VARIANTS.index("both"))),
                                  per(gecko_bits) if (f.has_gecko and elements) else None))
        return out

    def spread(self, is_weight: bool, component: str):
        """(mean, min, max) over the tensors of one class of this epoch's mean stored bits per value;
        component: mantissa, exponent or total (sign + exponent + mantissa). Element-weighted mean."""
        weighted = elements = 0.0
        lo, hi = float("inf"), float("-inf")
        for k, cls in enumerate(self.classes):
            if cls != is_weight:
                continue
            f = self.epoch_ledger.tensor(k)
            n, _, mant, expo, _, _ = f.counts()
            if n == 0:
                continue
            bits = {"mantissa": mant, "exponent": expo, "total": f.bits(VARIANTS.index("both"))}[component]
            lo, hi = min(lo, bits / n), max(hi, bits / n)
            weighted += bits
            elements += n
        if elements == 0:
            return (float("nan"), float("nan"), float("nan"))
        return (weighted / elements, lo, hi)

    def reductions(self, scope: str = "all", baseline_bits: int = 32) -> dict:
        """Cumulative footprint reduction of the run so far per Table-1 column (32·elements / bits);
        scope: all, weight or activation. +G columns are None without a Gecko variant."""
        totals = self.run_ledger.totals(None if scope == "all" else scope == "weight")
        out = {}
        for v in ("mantissa", "exponent", "exponent_gecko", "both", "both_gecko"):
            if v.endswith("gecko") and not totals.has_gecko:
                out[v] = None
            else:
                out[v] = totals.reduction(VARIANTS.index(v), baseline_bits)
        return out

    def shares(self, is_weight: bool):
        """The run's learned mantissa, exponent and Gecko-exponent footprint as shares of fp32's 23/8/8 bits."""
        return self.run_ledger.totals(is_weight).shares()
