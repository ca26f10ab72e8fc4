#!/usr/bin/python3
"""Train a residual network on Fashion-MNIST with the precision-assignment paper's methods.

Every policy is the C++ training layer's, reached through minifloat.training: the precision
assignment (all-high, uniform, op, op-variant, ours with its demotion orders), rounding at every
Y/GY/P/GP site, overflow promotion, dynamic loss scaling, and tensors saved for backward stored
as bit-packed codes (or Gecko tensors) with their bytes measured by the hooks. One CSV row per
epoch; docs/torch-training.md describes every column.

Example (the issue's "done when" command):
  PYTHONPATH=build/release/python /usr/bin/python3 examples/torch/train.py --model resnet18 --epochs 1 \\
      --train-limit 4000 --assignment ours --ratio 0.5 --save-activations packed --csv out.csv
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
    p.add_argument("--model", choices=["resnet18", "resnet20"], default="resnet20",
                   help="torchvision's ResNet-18 adapted to 1x28x28, or the CIFAR-style ResNet-20 (default resnet20)")
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
    p.add_argument("--seed", type=int, default=0, help="seed of initialisation, data order and rounding (default 0)")
    p.add_argument("--assignment", choices=["fp32", "all-high", "uniform", "op", "op-variant", "ours"], default="ours",
                   help="precision assignment (the paper's §3.1 and §4.1; fp32: no rounding) (default ours)")
    p.add_argument("--ratio", type=_unit_float, default=0.5,
                   help="low-precision ratio r that 'ours' demotes to, in [0, 1] (default 0.5)")
    p.add_argument("--order", choices=["decreasing", "increasing", "random"], default="decreasing",
                   help="demotion order of 'ours' (default decreasing, the paper's)")
    p.add_argument("--promotion", action="store_true", help="overflow-driven precision promotion after each step")
    p.add_argument("--theta", type=_unit_float, default=0.01, help="promotion threshold Θ (default 0.01)")
    p.add_argument("--low-forward", default="paper_fp(4,3,4)", metavar="FMT",
                   help="low-precision candidate C(t, lo) of forward tensors Y and P (default the paper's paper_fp(4,3,4))")
    p.add_argument("--low-backward", default="paper_fp(5,2,0)", metavar="FMT",
                   help="low-precision candidate C(t, lo) of backward tensors GY and GP (default the paper's "
                        "paper_fp(5,2,0); GP stays high in every assignment)")
    p.add_argument("--rounding", default="nearest_even",
                   help="rounding mode of every site: nearest_even, stochastic, ... (default nearest_even)")
    p.add_argument("--loss-scaling", choices=["dynamic", "none"], default="dynamic",
                   help="dynamic loss scaling with GradScaler's rules, or none (default dynamic)")
    p.add_argument("--growth-interval", type=_positive_int, default=None,
                   help="successful steps between loss-scale growths (default: one epoch, as the paper)")
    p.add_argument("--dynamic", choices=["qm-qe", "bitwave"], default=None,
                   help="dynamic bitlength learning: NOT supported by this trainer; given, it exits with an error")
    p.add_argument("--weights", type=_weights, default=("fp32-master", None),
                   help="fp32-master (torch optimizer), low-only (weights only as --visible codes) or low+K "
                        "(--visible codes plus K extra bits): the no-master optimizers of minifloat.optim")
    p.add_argument("--visible", default="bfloat16", help="the stored weight format of low-only / low+K (default bfloat16)")
    p.add_argument("--save-activations", choices=["fp32", "packed", "gecko"], default="packed",
                   help="how tensors saved for backward are kept: as they are, bit-packed codes of their site's "
                        "format, or Gecko tensors (default packed)")
    p.add_argument("--csv", default=None, help="write one row per epoch to this CSV file (replaced atomically)")
    p.add_argument("--data-dir", default=None, help="Fashion-MNIST IDX directory (default Debian's)")
    p.add_argument("--threads", type=_positive_int, default=None, help="torch threads (default torch's choice)")
    return p


def fail(message, code=2):
    print(f"train.py: error: {message}", file=sys.stderr)
    sys.exit(code)


class CsvFile:
    """The CSV, rewritten whole to PATH.tmp and renamed over PATH after every epoch, so the file
    is never half-written; the directory is checked writable before training starts."""

    def __init__(self, path):
        self.path, self.rows = path, []
        try:
            with open(path + ".tmp", "w", newline=""):
                pass
            os.remove(path + ".tmp")
        except OSError as e:
            fail(f"cannot write the CSV file {path}: {e.strerror}")

    def add(self, row):
        self.rows.append(row)
        buf = io.StringIO()
        w = csv.DictWriter(buf, CSV_COLUMNS, lineterminator="\n")
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


def main(argv=None):
    args = parser().parse_args(argv)
    if args.dynamic is not None:
        fail(f"--dynamic {args.dynamic} is not supported by this trainer: QM/QE and BitWave are not yet "
             "driven from minifloat.training (see docs/torch-training.md)")

    import torch
    import minifloat as mf
    import minifloat.training as mt
    import fashion_mnist
    import models

    if args.rounding not in mf.ROUNDING:
        fail(f"--rounding {args.rounding!r} is not one of {', '.join(mf.ROUNDING)}")
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
    csv_file = CsvFile(args.csv) if args.csv else None
    if args.threads:
        torch.set_num_threads(args.threads)

    try:
        directory = args.data_dir or fashion_mnist.DEFAULT_DIR
        train = fashion_mnist.load("train", directory, args.train_limit)
        test = fashion_mnist.load("test", directory, args.test_limit)
    except fashion_mnist.DatasetError as e:
        fail(str(e), 1)

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
    store = pm.store_saved_tensors(args.save_activations)

    lr = args.lr if args.lr is not None else (2e-3 if args.optimizer == "adam" else 0.05)
    kind, extra = args.weights
    if kind == "fp32-master":
        opt = (torch.optim.Adam(model.parameters(), lr=lr) if args.optimizer == "adam"
               else torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9))
    else:
        storage = mf.optim.LowStorage(visible) if kind == "low-only" else mf.optim.SplitStorage(visible, extra)
        opt = (mf.optim.Adam(model.parameters(), lr=lr, storage=storage, seed=args.seed) if args.optimizer == "adam"
               else mf.optim.SGD(model.parameters(), lr=lr, momentum=0.9, storage=storage, seed=args.seed))
    steps_per_epoch = (len(train) + args.batch_size - 1) // args.batch_size
    scaler = mt.LossScaler(growth_interval=args.growth_interval or steps_per_epoch,
                           enabled=args.loss_scaling == "dynamic")

    groups = pm.groups()
    print(f"{args.model} width {args.width}: {len(pm.sites())} sites in {len(groups)} groups; assignment "
          f"{args.assignment}" + (f" r={args.ratio} {args.order}: demoted {len(info['groups_demoted'])} groups, "
                                  f"share {info['demoted_share']:.3f}" if info else ""))
    step = 0
    loss_fn = torch.nn.functional.cross_entropy
    for epoch in range(1, args.epochs + 1):
        started = time.perf_counter()
        store.reset_peaks()
        total_loss = correct = seen = skipped = 0
        ratio_sum = bits_sum = 0.0
        promotions = 0
        generator = torch.Generator().manual_seed(args.seed * 1000 + epoch)
        for x, y in fashion_mnist.batches(train, args.batch_size, generator):
            fp = pm.footprint()  # the assignment in force during this step
            ratio_sum += fp["low_ratio"]
            bits_sum += fp["total_bits"]
            r = mt.training_step(pm, opt, scaler, loss_fn, x, y, step, store)
            step += 1
            skipped += not r.stepped
            promotions += r.promoted
            total_loss += r.loss * len(y)
            seen += len(y)
            progress(epoch, seen, len(train), total_loss / seen, started)
        sys.stderr.write("\n")
        steps = (seen + args.batch_size - 1) // args.batch_size
        pm.module.eval()
        with torch.no_grad():
            train_correct = 0
            for x, y in fashion_mnist.batches(train, 500):
                train_correct += int((pm(x).argmax(1) == y).sum())
            for x, y in fashion_mnist.batches(test, 500):
                correct += int((pm(x).argmax(1) == y).sum())
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
        print(f"epoch {epoch}: loss {row['train_loss']} train acc {row['train_accuracy']} test acc "
              f"{row['test_accuracy']} | skipped {skipped} scale {scaler.scale:g} promoted {promotions} | "
              f"low ratio {row['low_ratio']} | saved activations peak {store.peak['activation']} B "
              f"({store.peak['activation'] / max(store.fp32_peak['activation'], 1):.3f} of fp32 "
              f"{store.fp32_peak['activation']} B), weights {store.peak['weight']} B, other {store.peak['other']} B "
              f"| optimizer weights {weight_bytes} B state {state_bytes} B | {seconds:.1f} s")
        if csv_file:
            csv_file.add(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
