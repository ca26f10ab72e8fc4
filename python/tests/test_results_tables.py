"""docs/results-torch.md is what the table script makes of the committed runs, and its verdicts follow
the declared rule (examples/torch/verdict.py)."""

import csv
import math
import os
import random
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))

pytest.importorskip("mpmath")
import reproduce  # noqa: E402
import verdict  # noqa: E402


def test_the_committed_runs_rewrite_the_results_document_byte_for_byte():
    with open(os.path.join(ROOT, "docs", "results-torch.md"), encoding="utf-8") as f:
        committed = f.read()
    assert reproduce.document(os.path.join(ROOT, "results", "torch")) == committed, (
        "docs/results-torch.md differs from what examples/torch/reproduce.py writes from results/torch/; "
        "regenerate it with `python examples/torch/reproduce.py`")


@pytest.mark.parametrize("p,df,published", [
    # Student's t table values (e.g. NIST/SEMATECH e-Handbook of Statistical Methods, Table 1.3.6.7.2).
    (0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 7, 2.365), (0.975, 30, 2.042), (0.80, 7, 0.896), (0.90, 4, 1.533),
])
def test_t_quantiles_match_the_published_table(p, df, published):
    assert verdict.t_quantile(p, df) == pytest.approx(published, abs=5e-4)
    assert verdict.t_quantile(1 - p, df) == pytest.approx(-published, abs=5e-4)


def test_the_rule_keeps_loses_or_is_inconclusive_by_the_interval():
    assert verdict.paired([0.2, -0.1, 0.3, 0.0, 0.1]).verdict == "keeps accuracy"
    assert verdict.paired([-6.0, -5.5, -7.0, -6.2]).verdict == "loses"
    assert verdict.paired([-0.3, -0.2, -0.4, -0.3]).verdict == "keeps accuracy (a loss under the margin)"
    assert verdict.paired([-4.0, 3.0, -1.0]).verdict == "inconclusive"
    assert verdict.paired([-5.0]).verdict.startswith("inconclusive")
    c = verdict.paired([1.0, 2.0, 3.0])
    t = verdict.t_quantile(0.975, 2)
    assert (c.lo, c.hi) == pytest.approx((2 - t / math.sqrt(3), 2 + t / math.sqrt(3)))
    assert c.mde == pytest.approx((t + verdict.t_quantile(0.8, 2)) / math.sqrt(3))


def test_t_quantile_refuses_a_probability_outside_the_unit_interval():
    with pytest.raises(ValueError, match="0 < p < 1"):
        verdict.t_quantile(1.5, 3)


def _write(path, accuracies, low_ratio, bits, act, dynamic=False, log=None):
    """A train.py CSV; `log`: per epoch the overflow-log columns (--log-overflows) with the promotions."""
    cols = ["epoch", "train_loss", "train_accuracy", "test_accuracy", "steps", "skipped_steps", "loss_scale",
            "promotions", "low_ratio", "paper_total_bits", "saved_activation_peak_bytes",
            "saved_activation_fp32_peak_bytes", "saved_weight_peak_bytes", "saved_other_peak_bytes",
            "optimizer_weight_bytes", "optimizer_state_bytes", "seconds"]
    extra = ["dc_learning", "w_total_mean", "a_total_mean", "red_qm_qe"] if dynamic else []
    logged = ["paper_total_bits_start", "paper_total_bits_end", "saved_bytes_first_step", "saved_bytes_last_full_step",
              "top_overflow_ratios", "promotion_events"] if log else []
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols + extra + logged)
        for e, acc in enumerate(accuracies, 1):
            epoch_log = log[e - 1] if log else {}
            w.writerow([e, 0.5, acc, acc, 79, 0, 1024, len(epoch_log.get("events", [])), low_ratio, bits, act,
                        4 * 10**6, 1000, 100, 2000, 2000, 1.0]
                       + ([int(e < len(accuracies)), 24.0, 20.0, 1.3] if dynamic else [])
                       + ([epoch_log[k] for k in logged[:4]] + ["; ".join(epoch_log["top"]),
                                                                "; ".join(epoch_log["events"])] if log else []))


def test_the_claims_follow_the_rule_on_synthetic_runs(tmp_path):
    rng = random.Random(1)
    order = f"-{reproduce.ORDER_RATIO}"
    shift = {"uniform": -0.10, "increasing" + order: -0.05, "random" + order: -0.04, "uniform-promo": -0.03}
    ratio = {"uniform": 1.0, "op": 0.27, "increasing" + order: reproduce.ORDER_RATIO,
             "random" + order: reproduce.ORDER_RATIO, "uniform-promo": 0.95, "ours-0.9-promo": 0.88,
             **{f"ours-{r}": r for r in reproduce.RATIOS}}
    for c in reproduce.configs():
        for s in c.seeds:
            base = 0.80 + 0.02 * math.sin(s)   # the seed moves every row alike: pairing removes it
            acc = base + shift.get(c.name, 0.0) + rng.uniform(-0.002, 0.002)
            r = ratio.get(c.name, 0.0)
            high = 2.0 if c.name == "fp32" else 1.0
            _write(c.csv(str(tmp_path), s), [acc - 0.1, acc], r, round(1e6 * high * (1 - r / 2)),
                   round(4e6 / high * (1 - r / 2)), dynamic=c.part == "dynamic")
    doc = reproduce.document(str(tmp_path))
    claim = {line[:2]: line for line in doc.splitlines() if line[:2] in ("1.", "2.", "3.", "4.", "5.")}
    assert "**loses**" in claim["1."] and "**holds here**" in claim["1."]
    assert f"The largest r that keeps accuracy is {max(reproduce.RATIOS)}" in doc and "(the paper's measure: claim **holds**" in doc
    assert "**holds here**" in claim["3."]
    assert claim["4."].count("**is untested here**") == 2   # nothing diverged without promotion
    assert claim["5."].count("keeps accuracy") == 2
    assert "No run of this part is committed." not in doc


def test_the_promotion_table_reports_footnote_3_within_each_run_from_the_overflow_log(tmp_path):
    """Promoted runs log the aggregate and saved bytes at each epoch's start and end: the table reports
    the run's end minus start as a share of all-high's, and the per-epoch overflow table their top sites."""
    all_high_bits, all_high_saved = 2 * 10**6, 4 * 10**6 + 1000 + 100   # activations + weight copy + other peaks
    for c in reproduce.configs():
        if c.part not in ("assign", "promotion") or c.name not in ("fp32", "all-high", "uniform", "uniform-promo"):
            continue
        for s in c.seeds:
            log = None
            if c.name == "uniform-promo":   # one promotion in epoch 1 that adds 1 % of all-high's bits, 2 % of its bytes
                start, grown = 10**6, all_high_bits // 100
                log = [{"paper_total_bits_start": start, "paper_total_bits_end": start + grown,
                        "saved_bytes_first_step": 10**6, "saved_bytes_last_full_step": 10**6 + all_high_saved // 50,
                        "top": [f"conv.Y 0.{5 + s} 0.01", "bn.Y 0.002 0.001"],
                        "events": [f"{3 + s} conv.Y 0.{5 + s} paper_fp(3,2,2)->paper_fp(6,9,0)"]},
                       {"paper_total_bits_start": start + grown, "paper_total_bits_end": start + grown,
                        "saved_bytes_first_step": 10**6 + all_high_saved // 50,
                        "saved_bytes_last_full_step": 10**6 + all_high_saved // 50, "top": [], "events": []}]
            bits = all_high_bits if c.name == "all-high" else 10**6
            _write(c.csv(str(tmp_path), s), [0.7, 0.8], 0.0 if c.name == "all-high" else 0.9, bits,
                   4 * 10**6 if c.name == "all-high" else 10**6, log=log)
    doc = reproduce.document(str(tmp_path))
    row = next(line for line in doc.splitlines() if line.startswith("| uniform + promotion |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    n = len(reproduce.PROMOTION_SEEDS)
    assert cells[8] == f"3–{3 + n - 1}"                 # the steps of the promotions over the seeds
    assert cells[11] == "+1.00" and cells[12] == "+2.00"   # footnote 3: aggregate and saved bytes, % of all-high's
    claim = next(line for line in doc.splitlines() if line.startswith("4."))
    assert "within each run, +1.00 % of all-high's" in claim and "+2.00 % of all-high's saved bytes" in claim
    top = [line for line in doc.splitlines() if line.startswith("| uniform + promotion | 1 |")]
    assert top and "S = 0: conv.Y 0.5000, bn.Y 0.0020" in top[0]
