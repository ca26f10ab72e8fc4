"""examples/torch/train.py's overflow and promotion logging (--promotion, --log-overflows): the
events agree with the promotion counts, the aggregate's growth with the promoted sites' sizes, and
the logging leaves the epoch's measured peaks as they are without it."""

import csv
import os
import sys

import pytest

torch = pytest.importorskip("torch")
HERE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch"))
sys.path.insert(0, HERE)

import fashion_mnist  # noqa: E402
import models  # noqa: E402
import train  # noqa: E402
import minifloat.training as mt  # noqa: E402

if not os.path.isdir(fashion_mnist.DEFAULT_DIR):
    pytest.skip("Fashion-MNIST (Debian's dataset-fashion-mnist) is not installed", allow_module_level=True)

LOW, HIGH = "paper_fp(3,2,2)", "paper_fp(6,9,0)"
TINY = ["--model", "resnet20", "--width", "0.25", "--epochs", "2", "--train-limit", "80", "--test-limit", "32",
        "--batch-size", "32", "--optimizer", "sgd", "--lr", "0.1", "--assignment", "uniform", "--low-forward", LOW,
        "--low-backward", "paper_fp(4,2,0)", "--threads", "1"]


def run(tmp_path, name, *extra):
    out = tmp_path / f"{name}.csv"
    assert train.main(TINY + list(extra) + ["--csv", str(out)]) == 0
    return list(csv.DictReader(out.open()))


def events(row):
    out = []
    for e in filter(None, row["promotion_events"].split("; ")):
        step, site, ratio, formats = e.split(" ")
        out.append((int(step), site, float(ratio), formats))
    return out


def site_sizes():
    """numel per site of the same model at the same batch, from a graph of its own."""
    torch.manual_seed(0)
    pm = mt.instrument(models.build("resnet20", 0.25), torch.zeros(32, 1, 28, 28))
    return {s.name: (s.numel, s.role) for s in pm.sites()}


def test_promotion_events_match_the_counts_the_threshold_and_the_aggregate(tmp_path, capsys):
    theta = 0.001   # aggressive: fp(3,2,2) overflows above 28, so some sites promote in the first steps
    rows = run(tmp_path, "promo", "--promotion", "--theta", str(theta))
    sizes = site_sizes()
    all_events = []
    for k, row in enumerate(rows):
        ev = events(row)
        assert len(ev) == int(row["promotions"])
        steps = int(row["steps"])
        assert all(k * steps <= step < (k + 1) * steps for step, *_ in ev)   # logged in its own epoch
        assert all(ratio >= theta and formats == f"{LOW}->{HIGH}" for _, _, ratio, formats in ev)
        assert all(sizes[site][1] in ("Y", "P") for _, site, _, _ in ev)      # forward sites only
        # Each promoted site goes from 6 to 16 bits per element: the aggregate grows by exactly that.
        grown = sum(10 * sizes[site][0] for _, site, _, _ in ev)
        assert int(row["paper_total_bits_end"]) - int(row["paper_total_bits_start"]) == grown
        top = [t.split(" ") for t in row["top_overflow_ratios"].split("; ") if t]
        assert 0 < len(top) <= 5
        maxima = [float(m) for _, m, _ in top]
        assert maxima == sorted(maxima, reverse=True)
        assert all(float(m) >= float(e) > 0 for _, m, e in top)
        if ev:   # the largest one-step ratio of the epoch is at least any promoted site's ratio
            assert maxima[0] >= max(ratio for _, _, ratio, _ in ev)
        all_events += ev
    assert all_events, "Θ = 0.001 promoted nothing: the test no longer tests the log"
    assert len({site for _, site, _, _ in all_events}) == len(all_events)   # promoted for good, once
    assert int(rows[1]["paper_total_bits_start"]) == int(rows[0]["paper_total_bits_end"])
    # The saved bytes grow from the first step to the last full one (promotion only widens formats).
    assert int(rows[-1]["saved_bytes_last_full_step"]) > int(rows[0]["saved_bytes_first_step"]) > 0
    assert "promotion events" in capsys.readouterr().out


def test_logging_without_promotion_changes_nothing_it_measures(tmp_path):
    plain = run(tmp_path, "plain")
    logged = run(tmp_path, "logged", "--log-overflows", "3")
    assert "promotion_events" not in plain[0]
    for a, b in zip(plain, logged):
        for col in ("saved_activation_peak_bytes", "saved_activation_fp32_peak_bytes", "saved_weight_peak_bytes",
                    "saved_other_peak_bytes", "paper_total_bits", "promotions", "train_loss"):
            assert a[col] == b[col], col
        assert b["promotion_events"] == ""
        assert b["paper_total_bits_start"] == b["paper_total_bits_end"] == b["paper_total_bits"]
        assert b["saved_bytes_first_step"] == b["saved_bytes_last_full_step"]
        assert len([t for t in b["top_overflow_ratios"].split("; ") if t]) <= 3


@pytest.mark.parametrize("args, message", [
    (["--dynamic", "qm-qe", "--log-overflows", "5"], "--log-overflows applies to precision assignments"),
    (["--recipe", "fp8", "--log-overflows", "5"], "--log-overflows belongs to the precision-assignment trainer"),
    (["--log-overflows", "-1"], "is negative"),
])
def test_log_overflows_refuses_what_it_cannot_log(args, message, capsys):
    with pytest.raises(SystemExit) as e:
        train.main(args)
    assert e.value.code != 0
    assert message in capsys.readouterr().err
