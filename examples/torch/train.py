#!/usr/bin/env python3
"""Train a residual network on Fashion-MNIST with the precision-assignment paper's methods.

Every policy is the C++ training layer's, reached through minifloat.training: the precision
assignment (all-high, uniform, op, op-variant, ours with its demotion orders), rounding at every
Y/GY/P/GP site, overflow promotion, dynamic loss scaling, and tensors saved for backward stored
as bit-packed codes (or Gecko tensors) with their bytes measured by the hooks. One CSV row per
epoch; docs/torch-training.md describes every column.

Example:
  PYTHONPATH=build/release/python python examples/torch/train.py --model resnet18 --epochs 1 \\
      --train-limit 4000 --assignment ours --ratio 0.5 --save-activations packed --csv out.csv

With --recipe it trains by a low-precision training recipe instead (minifloat.recipes: every
operand of the forward, input-gradient and weight-gradient GEMMs in its own format; docs/recipes.md),
with per-GEMM-role overflow, underflow and clamped-block counts and operand bytes in the CSV:
  PYTHONPATH=build/release/python python examples/torch/train.py --model resnet20 --recipe nvfp4 \\
      --epochs 1 --train-limit 4000 --csv out.csv

Under torchrun it trains with DistributedDataParallel on gloo, each rank on its share of every
batch, and sends gradients as codes of --comm-format (minifloat.distributed; docs/distributed.md):
  PYTHONPATH=build/release/python torchrun --nproc_per_node 2 examples/torch/train.py --model resnet20 \\
      --epochs 1 --train-limit 4000 --comm-format e4m3 --comm-rounding stochastic --csv out.csv
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CSV_COLUMNS = [
    "epoch", "train_loss", "train_accuracy", "test_accuracy", "steps", "skipped_steps", "loss_scale",
    "promotions", "low_ratio", "paper_total_bits", "saved_activation_peak_bytes",
    "saved_activation_fp32_peak_bytes", "saved_weight_peak_bytes", "saved_other_peak_bytes",
    "optimizer_weight_bytes", "optimizer_state_bytes", "seconds",
]
# Appended with --dynamic: whether bitlengths learned in the epoch; per class (w weights, a
# activations) the mean [min, max over tensors] of the epoch's stored mantissa, exponent and total
# bits per value; the run's cumulative footprint reductions vs fp32 per Table-1 column (all
# tensors, then _w / _a per class; +G columns empty without --dc-gecko); BitWave's container at the
# epoch's end and its running means.
DYNAMIC_COLUMNS = ["dc_learning"] + [
    f"{c}_{comp}_{stat}" for c in ("w", "a") for comp in ("mantissa", "exponent", "total") for stat in ("mean", "min", "max")
] + [f"red_{v}{scope}" for scope in ("", "_w", "_a") for v in ("qm", "qe", "qe_g", "qm_qe", "qm_qe_g")] + [
    "bw_mantissa_bits", "bw_narrowing", "bw_mean_mantissa", "bw_mean_narrowing"]
# Appended when training on several processes (torchrun) or with --comm-format: the group's size,
# the format gradients cross it in, this rank's bytes handed to the collectives in the epoch
# against what fp32 all-reduce hands over, the encoding's counts, and the mean training step time.
COMM_COLUMNS = ["world_size", "comm_format", "comm_bytes_per_rank", "comm_fp32_bytes_per_rank", "comm_ratio",
                "comm_overflows", "comm_underflows", "comm_nans", "step_seconds"]
# Appended with --promotion or --log-overflows K: per epoch, the model aggregate (the paper's
# total bits) in force at its first step and after its last step's promotions, the bytes the hooks
# held saved for backward (all categories) at the peak of its first step and of its last full-batch
# step (footnote 3 of the paper measures the aggregate when training starts and ends); the K
# forward sites with the highest overflow ratios while low, as "site max epoch" (the largest
# one-step ratio, the one promotion compares with Θ, and overflows over values in the epoch),
# highest first, joined by "; "; and every promotion event as "step site ratio from->to".
OVERFLOW_COLUMNS = ["paper_total_bits_start", "paper_total_bits_end", "saved_bytes_first_step",
                    "saved_bytes_last_full_step", "top_overflow_ratios", "promotion_events"]
TENSOR_COLUMNS = ["epoch", "tensor", "class", "numel", "learning", "n_mantissa", "n_exponent", "mantissa_bits",
                  "exponent_bits", "mean_mantissa_bits", "mean_exponent_bits", "sign_share", "mean_total_bits",
                  "gecko_exponent_bits"]


def _checked(convert, noun, ok, complaint):
    """An argparse type: `convert` the text (else "is not {noun}"), then require ok(value)."""

    def parse(text):
        try:
            v = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{text} {complaint}")
        return v

    return parse


_positive_int = _checked(int, "an integer", lambda v: v >= 1, "is not positive")
_positive_float = _checked(float, "a number", lambda v: 0 < v < float("inf"), "is not a positive finite number")
_non_negative = _checked(float, "a number", lambda v: 0 <= v < float("inf"), "is not a finite number >= 0")
_non_negative_int = _checked(int, "an integer", lambda v: v >= 0, "is negative")
_at_least_two = _checked(int, "an integer", lambda v: v >= 2, "is less than 2")
_unit_float = _checked(float, "a number", lambda v: 0.0 <= v <= 1.0, "is outside [0, 1]")


def _weights(text):
    if text in ("fp32-master", "low-only"):
        return (text, None)
    if text.startswith("low+"):
        try:
            k = int(text[4:])
        except ValueError:
            k = -1
        if 1 <= k <= 32:
            return ("low+K", k)
    raise argparse.ArgumentTypeError(f"{text!r} is not fp32-master, low-only or low+K with K in 1..32")


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["resnet18", "resnet20", "mlp"], default="resnet20",
                   help="torchvision's ResNet-18 adapted to 1x28x28, the CIFAR-style ResNet-20, or a 4-layer MLP "
                        "(examples/torch/models.py) (default resnet20)")
    p.add_argument("--width", type=_positive_float, default=1.0, help="channel width multiplier (default 1)")
    p.add_argument("--epochs", type=_positive_int, default=1, help="training epochs (default 1)")
    p.add_argument("--train-limit", type=_positive_int, default=None,
                   help="train on the first N training images only (default: all 60000)")
    p.add_argument("--test-limit", type=_positive_int, default=None,
                   help="evaluate on the first N test images only (default: all 10000)")
    p.add_argument("--batch-size", type=_positive_int, default=64, help="mini-batch size (default 64)")
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam",
                   help="Adam, or SGD with momentum 0.9 (default adam)")
    p.add_argument("--lr", type=_positive_float, default=None, help="learning rate (default 2e-3 Adam, 0.05 SGD)")
    p.add_argument("--weight-decay", type=_non_negative, default=0.0, help="L2 weight decay of the optimizer (default 0)")
    p.add_argument("--lr-schedule", choices=["constant", "cosine"], default="constant",
                   help="constant, or cosine decay to 0 over all steps, stepped after every batch (default constant)")
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation, data order and rounding (default 0)")
    p.add_argument("--assignment", choices=["fp32", "all-high", "uniform", "op", "op-variant", "ours"], default=None,
                   help="precision assignment (the paper's §3.1 and §4.1; fp32: no rounding) (default ours; "
                        "fp32 with --dynamic, which replaces it)")
    p.add_argument("--ratio", type=_unit_float, default=0.5,
                   help="low-precision ratio r that 'ours' demotes to, in [0, 1] (default 0.5)")
    p.add_argument("--order", choices=["decreasing", "increasing", "random"], default="decreasing",
                   help="demotion order of 'ours' (default decreasing, the paper's)")
    p.add_argument("--promotion", action="store_true", help="overflow-driven precision promotion after each step")
    p.add_argument("--theta", type=_unit_float, default=0.01, help="promotion threshold Θ (default 0.01)")
    p.add_argument("--log-overflows", type=_non_negative_int, default=None, metavar="K",
                   help="log per epoch the K forward sites with the highest overflow ratios, every promotion "
                        "event, and the aggregate and saved bytes at the epoch's start and end (CSV columns and "
                        "an 'overflows' line; default 5 with --promotion, else 0: off)")
    p.add_argument("--low-forward", default="paper_fp(4,3,4)", metavar="FMT",
                   help="low-precision candidate C(t, lo) of forward tensors Y and P (default the paper's paper_fp(4,3,4))")
    p.add_argument("--low-backward", default="paper_fp(5,2,0)", metavar="FMT",
                   help="low-precision candidate C(t, lo) of backward tensors GY and GP (default the paper's "
                        "paper_fp(5,2,0); GP stays high in every assignment)")
    p.add_argument("--rounding", default="nearest_even",
                   help="rounding mode of every site: nearest_even, stochastic, ... (default nearest_even)")
    p.add_argument("--loss-scaling", choices=["dynamic", "none"], default=None,
                   help="dynamic loss scaling with GradScaler's rules, or none (default dynamic; none with "
                        "--dynamic, which needs it off)")
    p.add_argument("--growth-interval", type=_positive_int, default=None,
                   help="successful steps between loss-scale growths (default: one epoch, as the paper)")
    p.add_argument("--dynamic", choices=["qm-qe", "bitwave"], default=None,
                   help="Schrödinger's FP's dynamic fp32 containers on every layer output and weight in place of "
                        "the precision assignment: QM+QE bitlength learning or BitWave (docs/torch-training.md); "
                        "gradients stay fp32")
    dc = p.add_argument_group("dynamic containers (--dynamic; the C++ trainer's --dc-* flags, same defaults)")
    dc.add_argument("--dc-gamma-m", type=_non_negative, default=0.1,
                    help="QM+QE: regularizer strength of the mantissa bitlengths, eq. 16 (default 0.1)")
    dc.add_argument("--dc-gamma-e", type=_non_negative, default=0.1,
                    help="QM+QE: regularizer strength of the exponent bitlengths, eq. 16 (default 0.1)")
    dc.add_argument("--dc-bit-lr", type=_non_negative, default=0.5, help="QM+QE: SGD step of the bitlengths (default 0.5)")
    dc.add_argument("--dc-lambda", choices=["footprint", "elements"], default="footprint",
                    help="QM+QE: lambda_t = the tensor's share of the footprint (default) or of the elements")
    dc.add_argument("--dc-exponent-gradient", choices=["exact", "linearised"], default="exact",
                    help="QM+QE: exponent bitlength gradient as the exact finite difference (default) or eqs. 9-10 "
                         "linearised")
    dc.add_argument("--dc-learn-epochs", type=_non_negative_int, default=5,
                    help="QM+QE: bitlengths learn in the first N epochs, then are rounded up and frozen (default 5)")
    dc.add_argument("--dc-relearn-epochs", type=_non_negative_int, default=5,
                    help="QM+QE: and for M epochs after a learning-rate change: an epoch that starts at a tenth or "
                         "less of the rate its learning period began at (default 5)")
    dc.add_argument("--dc-bw-history", type=_at_least_two, default=100,
                    help="BitWave: per-batch losses in the regression (default 100)")
    dc.add_argument("--dc-bw-threshold", type=_non_negative, default=1e-3,
                    help="BitWave: slope threshold, normalised by the mean loss (default 1e-3)")
    dc.add_argument("--dc-bw-cadence", type=_positive_int, default=1, help="BitWave: batches between decisions (default 1)")
    dc.add_argument("--dc-bw-fix-epoch", type=_non_negative_int, default=5,
                    help="BitWave: fix the container at its average after F epochs (default 5; 0 never)")
    dc.add_argument("--dc-gecko", choices=["faithful", "improved"], default=None,
                    help="also count the Gecko-encoded exponents (the +G columns; costs time) (default off)")
    dc.add_argument("--dc-sign", choices=["omit", "always"], default="omit",
                    help="omit the sign bit of tensors without negative values (default) or always count it")
    dc.add_argument("--dc-tensor-csv", default=None,
                    help="write per epoch and tensor: learned and stored bitlengths (replaced atomically)")
    p.add_argument("--weights", type=_weights, default=("fp32-master", None),
                   help="fp32-master (torch optimizer), low-only (weights only as --visible codes) or low+K "
                        "(--visible codes plus K extra bits): the no-master optimizers of minifloat.optim")
    p.add_argument("--visible", default="bfloat16", help="the stored weight format of low-only / low+K (default bfloat16)")
    p.add_argument("--save-activations", choices=["fp32", "packed", "gecko"], default="packed",
                   help="how tensors saved for backward are kept: as they are, bit-packed codes of their site's "
                        "format, or Gecko tensors (default packed)")
    comm = p.add_argument_group("gradient communication (under torchrun, or one process with --comm-format)")
    comm.add_argument("--comm-format", default=None, metavar="FMT",
                      help="send gradient buckets as codes of this format or block format (e4m3, bf16, mxfp8-e4m3, "
                           "mxfp4, ...) through minifloat.distributed.compress_hook (default: fp32 all-reduce)")
    comm.add_argument("--comm-rounding", default="nearest_even",
                      help="rounding of the sent gradients: nearest_even, stochastic, ... (default nearest_even)")
    comm.add_argument("--comm-overflow", choices=["saturate", "infinity"], default=None,
                      help="overflow of the sent gradients: infinity gives the format's Inf or NaN, which the loss "
                           "scaler sees and backs off from (default infinity for a scalar format with dynamic loss "
                           "scaling, else saturate)")
    comm.add_argument("--comm-error-feedback", action="store_true",
                      help="keep each bucket's quantization residual and add it the next step")
    comm.add_argument("--comm-round-back", action="store_true",
                      help="round the averaged gradient back to --comm-format")
    comm.add_argument("--comm-faithful-sum", action="store_true",
                      help="sum as a ring all-reduce that rounds the partial sum to --comm-format after every hop")
    comm.add_argument("--bucket-cap-mb", type=_positive_float, default=25.0, help="DDP bucket size in MB (default 25)")
    rec = p.add_argument_group("training recipe (minifloat.recipes; replaces the precision assignment)")
    rec.add_argument("--recipe", default=None, metavar="NAME",
                     help="train every Linear/Conv2d GEMM by this recipe: nvfp4, mxfp8, mxfp8_rceil, mxfp4, "
                          "mxfp4_rceil, fp8, bf16, fp32 (docs/recipes.md)")
    rec.add_argument("--rht", choices=["on", "off"], default=None,
                     help="random Hadamard transform: off removes it, on adds the default one to the weight-gradient "
                          "GEMM (default: the recipe's)")
    rec.add_argument("--sr", choices=["on", "off"], default=None,
                     help="stochastic rounding: on for the gradient operands, off rounds all to nearest (default: the "
                          "recipe's)")
    rec.add_argument("--scale-rule", default=None, metavar="RULE",
                     help="MX scale rule of every E8M0-scaled operand: floor, rceil, ... (default: the recipe's)")
    rec.add_argument("--prescale", type=_positive_float, default=None,
                     help="pre-scale of the operands that have one (mxfp4's 3/4; 1 turns it off)")
    rec.add_argument("--accumulation", choices=["fp32", "hopper-fp8", "hopper-fp8-no-promotion"], default="fp32",
                     help="accumulation of every GEMM: fp32, or emulated (operands.HOPPER_FP8_MODEL: 14-bit sums, "
                          "promoted to fp32 every 128, or never) -- slow, for small models (default fp32)")
    rec.add_argument("--keep-first-last", choices=["on", "off"], default="on",
                     help="keep the first and last layers in fp32, as the papers do (default on)")
    p.add_argument("--csv", default=None, help="write one row per epoch to this CSV file (replaced atomically)")
    p.add_argument("--data-dir", default=None, help="Fashion-MNIST IDX directory (default Debian's)")
    p.add_argument("--threads", type=_positive_int, default=None, help="torch threads (default torch's choice)")
    return p


def load_splits(args):
    """The training and test splits, limited as the flags say; a missing or bad file ends the run."""
    import fashion_mnist
    try:
        directory = args.data_dir or fashion_mnist.DEFAULT_DIR
        return (fashion_mnist.load("train", directory, args.train_limit),
                fashion_mnist.load("test", directory, args.test_limit))
    except fashion_mnist.DatasetError as e:
        fail(str(e), 1)


def fail(message, code=2):
    print(f"train.py: error: {message}", file=sys.stderr)
    sys.exit(code)


class CsvFile:
    """The CSV, rewritten whole to PATH.tmp and renamed over PATH after every epoch, so the file
    is never half-written; the directory is checked writable before training starts."""

    def __init__(self, path, columns):
        self.path, self.rows, self.columns = path, [], columns
        try:
            with open(path + ".tmp", "w", newline=""):
                pass
            os.remove(path + ".tmp")
        except OSError as e:
            fail(f"cannot write the CSV file {path}: {e.strerror}")

    def add(self, row):
        self.add_rows([row])

    def add_rows(self, rows):
        self.rows.extend(rows)
        buf = io.StringIO()
        w = csv.DictWriter(buf, self.columns, lineterminator="\n")
        w.writeheader()
        w.writerows(self.rows)
        try:
            with open(self.path + ".tmp", "w", newline="") as f:
                f.write(buf.getvalue())
            os.replace(self.path + ".tmp", self.path)
        except OSError as e:
            fail(f"cannot write the CSV file {self.path}: {e.strerror}", 1)


def progress(epoch, done, total, loss, started, stream=sys.stderr):
    width = 30
    filled = width * done // max(total, 1)
    rate = done / max(time.perf_counter() - started, 1e-9)
    stream.write(f"\repoch {epoch} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                 f"loss {loss:.4f} {rate:.0f} img/s")
    stream.flush()


def _g(v):
    return "" if v is None or v != v else f"{v:.6g}"


class OverflowLog:
    """What --log-overflows records (OVERFLOW_COLUMNS' comment): the overflow ratios of the forward
    sites while they are low (the ones promotion may promote), the promotion log, and the aggregate
    and saved bytes at each epoch's start and end."""

    def __init__(self, pm, store, k):
        self.pm, self.store, self.k = pm, store, k
        self.low = {s.index: s for s in pm.sites() if s.role in ("Y", "P") and s.low and s.enabled}
        self.by_name = {s.name: s for s in pm.sites()}
        self.logged = 0   # promotion events already taken from pm.promotion_log()

    def begin_epoch(self):
        self.max_ratio, self.overflows, self.values, self.events = {}, {}, {}, []
        self.bits_start = self.pm.footprint()["total_bits"]
        self.first_step_bytes = self.last_full_step_bytes = None

    def step(self, run_step, full_batch):
        """Runs one training step with the store's peaks reset around it, so its own peak of saved
        bytes is read; the epoch's peaks are kept as the maxima they would have been without."""
        store = self.store
        kept = dict(store.peak), dict(store.fp32_peak), store.peak_total
        store.reset_peaks()
        r = run_step()
        step_bytes = store.peak_total
        store.peak = {c: max(v, kept[0][c]) for c, v in store.peak.items()}
        store.fp32_peak = {c: max(v, kept[1][c]) for c, v in store.fp32_peak.items()}
        store.peak_total = max(store.peak_total, kept[2])
        if self.first_step_bytes is None:
            self.first_step_bytes = step_bytes
        if full_batch:
            self.last_full_step_bytes = step_bytes
        for i in self.low:   # this step's counts, still there after training_step's promotion
            st = self.pm.site_stats(i)
            if st.values:
                self.max_ratio[i] = max(self.max_ratio.get(i, 0.0), st.overflow_ratio)
                self.overflows[i] = self.overflows.get(i, 0) + st.overflows
                self.values[i] = self.values.get(i, 0) + st.values
        log = self.pm.promotion_log()
        for step, name, ratio in log[self.logged:]:
            site = self.by_name[name]
            self.events.append((step, name, ratio, site.low_format, site.high))
            self.low.pop(site.index, None)
        self.logged = len(log)
        return r

    def top(self):
        ranked = sorted(((self.max_ratio[i], self.overflows[i] / self.values[i], self.pm.site(i).name)
                         for i in self.max_ratio if self.overflows[i]), key=lambda t: (-t[0], -t[1], t[2]))
        return ranked[:self.k]

    def columns(self):
        return {"paper_total_bits_start": self.bits_start, "paper_total_bits_end": self.pm.footprint()["total_bits"],
                "saved_bytes_first_step": self.first_step_bytes, "saved_bytes_last_full_step": self.last_full_step_bytes,
                "top_overflow_ratios": "; ".join(f"{name} {m:.6g} {e:.6g}" for m, e, name in self.top()),
                "promotion_events": "; ".join(f"{step} {name} {ratio:.6g} {lo}->{hi}"
                                              for step, name, ratio, lo, hi in self.events)}

    def line(self):
        top = ", ".join(f"{name} {m:.4f}" for m, _, name in self.top()) or "none"
        first = f", first at step {self.events[0][0]}" if self.events else ""
        return (f"  overflows (largest one-step ratio while low): {top} | promotion events {len(self.events)}{first} "
                f"| aggregate {self.bits_start} -> {self.pm.footprint()['total_bits']} bits | saved bytes first step "
                f"{self.first_step_bytes}, last full step {self.last_full_step_bytes}")


def dynamic_columns(dyn, learning):
    """The DYNAMIC_COLUMNS of one epoch (see their comment)."""
    row = {"dc_learning": int(learning)}
    for cls, is_weight in (("w", True), ("a", False)):
        for comp in ("mantissa", "exponent", "total"):
            for stat, v in zip(("mean", "min", "max"), dyn.spread(is_weight, comp)):
                row[f"{cls}_{comp}_{stat}"] = _g(v)
    names = {"mantissa": "qm", "exponent": "qe", "exponent_gecko": "qe_g", "both": "qm_qe", "both_gecko": "qm_qe_g"}
    for scope, suffix in (("all", ""), ("weight", "_w"), ("activation", "_a")):
        for variant, v in dyn.reductions(scope).items():
            row[f"red_{names[variant]}{suffix}"] = _g(v)
    if dyn.method == "bitwave":
        m, narrowing, _, _, mean_m, mean_n = dyn.bitwave
        row.update(bw_mantissa_bits=m, bw_narrowing=narrowing, bw_mean_mantissa=_g(mean_m), bw_mean_narrowing=_g(mean_n))
    return row


def dynamic_line(dyn, learning):
    """The containers' epoch line: per class mean [min-max over tensors] of stored bits per value."""
    out = "  containers"
    for label, is_weight in (("W", True), ("A", False)):
        out += f"  {label}"
        for comp, short in (("mantissa", "m"), ("exponent", "e"), ("total", "total")):
            mean, lo, hi = dyn.spread(is_weight, comp)
            out += f" {short} {mean:.1f} [{lo:.1f}-{hi:.1f}]"
    red = dyn.reductions()
    out += f"  reduction vs fp32 {red['both']:.2f}x"
    if red["both_gecko"] is not None:
        out += f" (+G {red['both_gecko']:.2f}x)"
    if dyn.method == "bitwave":
        m, narrowing, _, slope, _, _ = dyn.bitwave
        out += f"  container m {m} narrowing {narrowing} slope {slope * 1e3:.3f}e-3"
    return out + ("  learning" if learning else "  frozen")


def tensor_rows(dyn, epoch, learning):
    rows = []
    for t in dyn.tensors():
        rows.append({"epoch": epoch, "tensor": t.name, "class": "weight" if t.is_weight else "activation",
                     "numel": t.numel, "learning": int(learning), "n_mantissa": f"{t.n_mantissa:.4f}",
                     "n_exponent": f"{t.n_exponent:.4f}", "mantissa_bits": t.mantissa_bits,
                     "exponent_bits": t.exponent_bits, "mean_mantissa_bits": _g(t.mean_mantissa_bits),
                     "mean_exponent_bits": _g(t.mean_exponent_bits), "sign_share": _g(t.sign_share),
                     "mean_total_bits": _g(t.mean_total_bits), "gecko_exponent_bits": _g(t.gecko_exponent_bits)})
    return rows


RECIPE_COLUMNS = ["epoch", "train_loss", "train_accuracy", "test_accuracy", "steps", "seconds", "step_seconds"] + [
    f"{role}_{field}" for role in ("forward", "input_grad", "weight_grad")
    for field in ("values", "overflows", "underflows", "blocks", "clamped_blocks", "bytes")] + [
    "operand_bytes", "operand_fp32_bytes", "recipe", "seed", "model", "train_images", "git_commit", "minifloat_version",
    "torch_version"]
# Flags of the precision-assignment trainer that --recipe replaces, with their defaults.
_NOT_WITH_RECIPE = {"assignment": None, "dynamic": None, "promotion": False, "comm_format": None,
                    "weights": ("fp32-master", None), "loss_scaling": None, "rounding": "nearest_even",
                    "low_forward": "paper_fp(4,3,4)", "low_backward": "paper_fp(5,2,0)", "log_overflows": None}


def _git_commit():
    """HEAD's short commit, "+dirty" when tracked files differ from it (provenance.git_state)."""
    import provenance
    state = provenance.git_state(HERE)
    if state["commit"] is None:
        return "unknown"
    return state["commit"][:12] + ("+dirty" if state["dirty"] else "")


def recipe_main(args):
    """Train by a recipe: the model's Linear/Conv2d layers replaced by minifloat.layers' (the first
    and last kept in fp32 unless --keep-first-last off), Adam or SGD on fp32 weights, no loss scaling
    (the block and tensor scales follow each operand's amax)."""
    for flag, default in _NOT_WITH_RECIPE.items():
        if getattr(args, flag) != default:
            fail(f"--{flag.replace('_', '-')} belongs to the precision-assignment trainer; --recipe replaces it")
    if os.environ.get("WORLD_SIZE", "1") != "1":
        fail("--recipe trains on one process")
    import torch
    import minifloat as mf
    from minifloat import layers as mfl, recipes as mfr, operands as mfo
    import fashion_mnist
    import models

    try:
        recipe = mfr.recipe(args.recipe)
    except ValueError as e:
        fail(f"--recipe: {e}")
    accumulation = {"fp32": None, "hopper-fp8": dict(mfo.HOPPER_FP8_MODEL),
                    "hopper-fp8-no-promotion": dict(mfo.HOPPER_FP8_MODEL, promote_every=0)}[args.accumulation]
    try:
        recipe = recipe.variant(rht=None if args.rht is None else args.rht == "on",
                                sr=None if args.sr is None else args.sr == "on", scale_rule=args.scale_rule,
                                prescale=args.prescale,
                                accumulation=accumulation)
    except (TypeError, ValueError) as e:
        fail(f"--rht/--sr/--scale-rule/--prescale/--accumulation: {e}")
    csv_file = CsvFile(args.csv, RECIPE_COLUMNS) if args.csv else None
    if args.threads:
        torch.set_num_threads(args.threads)
    train, test = load_splits(args)
    torch.manual_seed(args.seed)
    model = models.build(args.model, args.width)
    done = mfl.convert(model, recipe, seed=args.seed, keep_first_last=args.keep_first_last == "on")
    print(recipe.describe())
    print(f"{args.model} width {args.width}: {len(done.converted)} layers by the recipe, kept in fp32: "
          f"{', '.join(done.kept) or 'none'}")
    lr = args.lr if args.lr is not None else (2e-3 if args.optimizer == "adam" else 0.05)
    opt = (torch.optim.Adam(model.parameters(), lr=lr) if args.optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9))
    loss_fn = torch.nn.functional.cross_entropy
    meta = dict(recipe=recipe.name, seed=args.seed, model=args.model, train_images=len(train), git_commit=_git_commit(),
                minifloat_version=mf.__version__, torch_version=torch.__version__)
    for epoch in range(1, args.epochs + 1):
        started = time.perf_counter()
        mfl.reset_counters(model)
        model.train()
        total_loss = seen = steps = 0
        step_seconds = 0.0
        generator = torch.Generator().manual_seed(args.seed * 1000 + epoch)
        for x, y in fashion_mnist.batches(train, args.batch_size, generator):
            t0 = time.perf_counter()
            loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step_seconds += time.perf_counter() - t0
            steps += 1
            total_loss += loss.item() * len(y)
            seen += len(y)
            progress(epoch, seen, len(train), total_loss / seen, started)
        sys.stderr.write("\n")
        counts = mfl.counters(model)  # the training steps' GEMMs only: evaluation below runs no backward
        model.eval()
        correct = train_correct = 0
        with torch.no_grad():
            for x, y in fashion_mnist.batches(train, 500):
                train_correct += int((model(x).argmax(1) == y).sum())
            for x, y in fashion_mnist.batches(test, 500):
                correct += int((model(x).argmax(1) == y).sum())
        seconds = time.perf_counter() - started
        row = {"epoch": epoch, "train_loss": f"{total_loss / seen:.6f}",
               "train_accuracy": f"{train_correct / len(train):.4f}", "test_accuracy": f"{correct / len(test):.4f}",
               "steps": steps, "seconds": f"{seconds:.1f}", "step_seconds": f"{step_seconds / max(steps, 1):.4f}"}
        for role, c in counts.items():
            for field in ("values", "overflows", "underflows", "blocks", "clamped_blocks", "bytes"):
                row[f"{role}_{field}"] = c[field]
        row["operand_bytes"] = sum(c["bytes"] for c in counts.values())
        row["operand_fp32_bytes"] = 4 * sum(c["values"] for c in counts.values())
        row.update(meta)
        print(f"epoch {epoch}: loss {row['train_loss']} train acc {row['train_accuracy']} test acc "
              f"{row['test_accuracy']} | {seconds:.1f} s, {row['step_seconds']} s per step")
        for role, c in counts.items():
            print(f"  {role:11s} overflows {c['overflows']} underflows {c['underflows']} clamped blocks "
                  f"{c['clamped_blocks']} of {c['blocks']} | operands {c['bytes']} B "
                  f"({c['bytes'] / max(4 * c['values'], 1):.3f} of fp32)")
        if csv_file:
            csv_file.add(row)
    return 0


def main(argv=None):
    args = parser().parse_args(argv)
    if args.recipe is not None:
        return recipe_main(args)
    recipe_flags = [f for f in ("rht", "sr", "scale_rule", "prescale") if getattr(args, f) is not None]
    if recipe_flags or args.accumulation != "fp32" or args.keep_first_last != "on":
        fail(f"--{(recipe_flags or ['accumulation'])[0].replace('_', '-')} applies with --recipe only")
    if args.dynamic is not None:
        if args.assignment not in (None, "fp32"):
            fail(f"--dynamic {args.dynamic} replaces the precision assignment; --assignment {args.assignment} "
                 "cannot be combined with it")
        if args.loss_scaling == "dynamic":
            fail("--dynamic needs --loss-scaling none: a scaled loss would scale the bitlength gradients")
        if args.promotion or args.log_overflows is not None:
            fail(f"--{'promotion' if args.promotion else 'log-overflows'} applies to precision assignments, "
                 "not to --dynamic")
        args.assignment, args.loss_scaling = "fp32", "none"
    else:
        given = [f for f in ("dc_tensor_csv", "dc_gecko") if getattr(args, f) is not None]
        if given:
            fail(f"--{given[0].replace('_', '-')} applies to --dynamic only")
        args.assignment = args.assignment or "ours"
        args.loss_scaling = args.loss_scaling or "dynamic"

    import torch
    import minifloat as mf
    import minifloat.training as mt
    import fashion_mnist
    import models

    if args.rounding not in mf.ROUNDING:
        fail(f"--rounding {args.rounding!r} is not one of {', '.join(mf.ROUNDING)}")
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1 or args.comm_format is not None
    comm_flags = [f for f in ("comm_error_feedback", "comm_round_back", "comm_faithful_sum") if getattr(args, f)]
    if args.comm_format is None and (comm_flags or args.comm_rounding != "nearest_even"
                                     or args.comm_overflow is not None):
        fail(f"--{(comm_flags or ['comm_rounding'])[0].replace('_', '-')} applies with --comm-format only")
    if args.comm_rounding not in mf.ROUNDING:
        fail(f"--comm-rounding {args.comm_rounding!r} is not one of {', '.join(mf.ROUNDING)}")
    if distributed and (args.promotion or args.dynamic):
        fail("--promotion and --dynamic decide from each rank's own statistics, so replicas would diverge; "
             "they run on one process only")
    log_overflows = args.log_overflows if args.log_overflows is not None else (5 if args.promotion else 0)
    if distributed and log_overflows:
        fail("--log-overflows reads one process's site statistics; it runs on one process only")
    comm_hook = None
    if args.comm_format is not None:
        import minifloat.distributed as mfd
        try:
            # A block format's scale follows each block's amax, so an element beyond the element
            # maximum is not a range the loss scale can fix: block formats saturate, as the MX spec does.
            block = args.comm_format in mf.NAMED_BLOCKS or args.comm_format.replace("_", "-") in mf.NAMED_BLOCKS
            overflow = args.comm_overflow or ("infinity" if args.loss_scaling == "dynamic" and not block else "saturate")
            comm_hook = mfd.compress_hook(args.comm_format, args.comm_rounding, overflow=overflow,
                                          seed=args.seed, error_feedback=args.comm_error_feedback,
                                          round_back=args.comm_round_back, faithful_sum=args.comm_faithful_sum)
        except (TypeError, ValueError) as e:
            fail(f"--comm-format: {e}")
    try:
        visible = mf.parse_format(args.visible)
    except ValueError as e:
        fail(f"--visible: {e}")
    try:
        low_forward, low_backward = mf.parse_format(args.low_forward), mf.parse_format(args.low_backward)
    except ValueError as e:
        fail(f"--low-forward/--low-backward: {e}")
    if args.assignment != "ours" and (args.ratio != 0.5 or args.order != "decreasing"):
        fail("--ratio and --order apply to --assignment ours only")
    rank, world_size = 0, 1
    if distributed:
        rank, world_size = start_process_group()
    columns = (CSV_COLUMNS + (DYNAMIC_COLUMNS if args.dynamic else []) + (COMM_COLUMNS if distributed else [])
               + (OVERFLOW_COLUMNS if log_overflows else []))
    csv_file = CsvFile(args.csv, columns) if args.csv and rank == 0 else None
    tensor_csv = CsvFile(args.dc_tensor_csv, TENSOR_COLUMNS) if args.dc_tensor_csv else None
    if args.threads:
        torch.set_num_threads(args.threads)

    train, test = load_splits(args)

    torch.manual_seed(args.seed)
    model = models.build(args.model, args.width)
    defaults = mt.Candidates()
    candidates = mt.Candidates(Y=(defaults.Y[0], low_forward), GY=(defaults.GY[0], low_backward),
                               P=(defaults.P[0], low_forward), GP=(defaults.GP[0], low_backward))
    pm = mt.instrument(model, torch.zeros(args.batch_size, 1, 28, 28), candidates=candidates, seed=args.seed)
    info = pm.assign(args.assignment, ratio=args.ratio, order=args.order, seed=args.seed)
    pm.set_rounding(args.rounding)
    if args.promotion:
        pm.enable_promotion(args.theta)
    dyn = None
    if args.dynamic:
        dyn = pm.enable_dynamic(mt.DynamicOptions(
            method=args.dynamic, gamma_mantissa=args.dc_gamma_m, gamma_exponent=args.dc_gamma_e, bit_lr=args.dc_bit_lr,
            lambda_rule=args.dc_lambda, exponent_gradient=args.dc_exponent_gradient, learn_epochs=args.dc_learn_epochs,
            relearn_epochs=args.dc_relearn_epochs, bw_history=args.dc_bw_history, bw_threshold=args.dc_bw_threshold,
            bw_cadence=args.dc_bw_cadence, bw_fix_epoch=args.dc_bw_fix_epoch, gecko=args.dc_gecko, sign=args.dc_sign,
            seed=args.seed))
    store = pm.store_saved_tensors(args.save_activations)
    evaluated = pm.module  # rank 0 evaluates the replica itself: DDP's forward would wait for the other ranks
    comm_state = None
    if distributed:
        pm.module = torch.nn.parallel.DistributedDataParallel(pm.module, bucket_cap_mb=args.bucket_cap_mb)
        hook = comm_hook if comm_hook is not None else counted_allreduce_hook()
        pm.module.register_comm_hook(hook.state, hook)
        comm_state = hook.state

    lr = args.lr if args.lr is not None else (2e-3 if args.optimizer == "adam" else 0.05)
    kind, extra = args.weights
    if kind == "fp32-master":
        opt = (torch.optim.Adam(model.parameters(), lr=lr, weight_decay=args.weight_decay) if args.optimizer == "adam"
               else torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=args.weight_decay))
    else:
        storage = mf.optim.LowStorage(visible) if kind == "low-only" else mf.optim.SplitStorage(visible, extra)
        opt = (mf.optim.Adam(model.parameters(), lr=lr, weight_decay=args.weight_decay, storage=storage, seed=args.seed)
               if args.optimizer == "adam" else
               mf.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=args.weight_decay, storage=storage,
                            seed=args.seed))
    steps_per_epoch = (len(train) + args.batch_size - 1) // args.batch_size
    schedule = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * steps_per_epoch, eta_min=0.0)
                if args.lr_schedule == "cosine" else None)
    scaler = mt.LossScaler(growth_interval=args.growth_interval or steps_per_epoch,
                           enabled=args.loss_scaling == "dynamic")

    groups = pm.groups()
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"{args.model} width {args.width}: {len(pm.sites())} sites in {len(groups)} groups; assignment "
          f"{args.assignment}" + (f" r={args.ratio} {args.order}: demoted {len(info['groups_demoted'])} groups, "
                                  f"share {info['demoted_share']:.3f}" if info else ""))
    step = 0
    loss_fn = torch.nn.functional.cross_entropy
    overflow_log = OverflowLog(pm, store, log_overflows) if log_overflows else None
    for epoch in range(1, args.epochs + 1):
        started = time.perf_counter()
        store.reset_peaks()
        total_loss = correct = seen = skipped = 0
        ratio_sum = bits_sum = 0.0
        promotions = 0
        step_seconds = 0.0
        if comm_state is not None:
            comm_before = (comm_state.bytes_sent_total, comm_state.fp32_bytes_total, dict(comm_state.total_stats))
        generator = torch.Generator().manual_seed(args.seed * 1000 + epoch)
        if dyn is not None:
            dyn.begin_epoch(epoch - 1, lr)
            learning = dyn.learning  # during this epoch's steps
        if overflow_log is not None:
            overflow_log.begin_epoch()
        for x, y in fashion_mnist.batches(train, args.batch_size, generator):
            fp = pm.footprint()  # the assignment in force during this step
            ratio_sum += fp["low_ratio"]
            bits_sum += fp["total_bits"]
            batch = len(y)
            if distributed:  # this rank's share of the global batch (rank 0's loss stands for the batch's)
                if len(y) < world_size:
                    continue
                x, y = x.tensor_split(world_size)[rank], y.tensor_split(world_size)[rank]
            step_started = time.perf_counter()
            if overflow_log is not None:
                r = overflow_log.step(lambda: mt.training_step(pm, opt, scaler, loss_fn, x, y, step, store),
                                      full_batch=batch == args.batch_size)
            else:
                r = mt.training_step(pm, opt, scaler, loss_fn, x, y, step, store)
            step_seconds += time.perf_counter() - step_started
            if schedule is not None:
                schedule.step()
            step += 1
            skipped += not r.stepped
            promotions += r.promoted
            total_loss += r.loss * batch
            seen += batch
            if rank == 0:
                progress(epoch, seen, len(train), total_loss / seen, started)
        if rank == 0:
            sys.stderr.write("\n")
        steps = (seen + args.batch_size - 1) // args.batch_size
        pm.module.eval()
        train_correct = 0
        if rank == 0:
            with torch.no_grad():
                for x, y in fashion_mnist.batches(train, 500):
                    train_correct += int((evaluated(x).argmax(1) == y).sum())
                for x, y in fashion_mnist.batches(test, 500):
                    correct += int((evaluated(x).argmax(1) == y).sum())
        if distributed:
            torch.distributed.barrier()
        seconds = time.perf_counter() - started
        if hasattr(opt, "storage_bytes"):
            sb = opt.storage_bytes()
            weight_bytes, state_bytes = sb["weights"], sb["state"]
        else:
            weight_bytes = sum(p.numel() * p.element_size() for g in opt.param_groups for p in g["params"])
            state_bytes = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                              if isinstance(t, torch.Tensor))
        row = {
            "epoch": epoch, "train_loss": f"{total_loss / seen:.6f}", "train_accuracy": f"{train_correct / len(train):.4f}",
            "test_accuracy": f"{correct / len(test):.4f}", "steps": steps, "skipped_steps": skipped,
            "loss_scale": scaler.scale, "promotions": promotions, "low_ratio": f"{ratio_sum / steps:.6f}",
            "paper_total_bits": round(bits_sum / steps), "saved_activation_peak_bytes": store.peak["activation"],
            "saved_activation_fp32_peak_bytes": store.fp32_peak["activation"],
            "saved_weight_peak_bytes": store.peak["weight"], "saved_other_peak_bytes": store.peak["other"],
            "optimizer_weight_bytes": weight_bytes, "optimizer_state_bytes": state_bytes, "seconds": f"{seconds:.1f}",
        }
        if comm_state is not None:
            sent = comm_state.bytes_sent_total - comm_before[0]
            fp32 = comm_state.fp32_bytes_total - comm_before[1]
            counts = {k: v - comm_before[2][k] for k, v in comm_state.total_stats.items()}
            row.update(world_size=world_size, comm_format=args.comm_format or "fp32 all-reduce", comm_bytes_per_rank=sent,
                       comm_fp32_bytes_per_rank=fp32, comm_ratio=f"{sent / max(fp32, 1):.6f}",
                       comm_overflows=counts["overflows"], comm_underflows=counts["underflows"], comm_nans=counts["nans"],
                       step_seconds=f"{step_seconds / max(steps, 1):.4f}")
        say(f"epoch {epoch}: loss {row['train_loss']} train acc {row['train_accuracy']} test acc "
              f"{row['test_accuracy']} | skipped {skipped} scale {scaler.scale:g} promoted {promotions} | "
              f"low ratio {row['low_ratio']} | saved activations peak {store.peak['activation']} B "
              f"({store.peak['activation'] / max(store.fp32_peak['activation'], 1):.3f} of fp32 "
              f"{store.fp32_peak['activation']} B), weights {store.peak['weight']} B, other {store.peak['other']} B "
              f"| optimizer weights {weight_bytes} B state {state_bytes} B | {seconds:.1f} s")
        if comm_state is not None:
            say(f"  gradients on the wire ({row['comm_format']}, {world_size} ranks): {sent} B per rank, "
                f"{row['comm_ratio']} of fp32's {fp32} B; overflows {counts['overflows']} underflows "
                f"{counts['underflows']} NaN {counts['nans']}; {row['step_seconds']} s per step")
        if overflow_log is not None:
            row.update(overflow_log.columns())
            say(overflow_log.line())
        if dyn is not None:
            dyn.end_epoch()
            row.update(dynamic_columns(dyn, learning))
            print(dynamic_line(dyn, learning))
            if tensor_csv:
                tensor_csv.add_rows(tensor_rows(dyn, epoch, learning))
        if csv_file:
            csv_file.add(row)
    if distributed:
        torch.distributed.destroy_process_group()
    return 0


def start_process_group():
    """A gloo group: torchrun's (its environment variables), or one process of its own when
    --comm-format is given without torchrun. Returns (rank, world size)."""
    import datetime
    import socket
    import torch.distributed as dist
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    return dist.get_rank(), dist.get_world_size()


def counted_allreduce_hook():
    """DDP's own arithmetic (torch's allreduce_hook: divide by the world size, all-reduce in fp32)
    with the bytes it hands to the all-reduce counted in a state shaped like compress_hook's."""
    from types import SimpleNamespace
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    state = SimpleNamespace(bytes_sent_total=0, fp32_bytes_total=0,
                            total_stats={"overflows": 0, "underflows": 0, "nans": 0})

    def hook(_state, bucket):
        state.bytes_sent_total += bucket.buffer().numel() * bucket.buffer().element_size()
        state.fp32_bytes_total += 4 * bucket.buffer().numel()
        return allreduce_hook(None, bucket)

    hook.state = state
    return hook


if __name__ == "__main__":
    sys.exit(main())
