"""docs/results.md is what examples/results_cpp.py makes of the C++ trainer's committed runs, its
verdicts follow the declared rule (examples/torch/verdict.py), and every run carries its record
(examples/run_record.py)."""

import csv
import gzip
import json
import math
import os
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

pytest.importorskip("mpmath")
import results_cpp  # noqa: E402
import run_record  # noqa: E402

# train --csv's columns (examples/train.cpp), and the dynamic containers' that the tables read.
COLUMNS = ["epoch", "train_loss", "train_acc", "test_loss", "test_acc", "low_ratio", "model_bits", "promotions",
           "promotions_total", "loss_scale", "skipped_steps", "lr", "top_overflow", "epoch_seconds", "eval_seconds",
           "low_ratio_start", "low_ratio_end"]
DYNAMIC = ["dc_learning", "w_total_mean", "a_total_mean", "red_qm", "red_qe", "red_qe_g", "red_qm_qe", "red_qm_qe_g",
           "red_qm_qe_w", "red_qm_qe_a", "w_mantissa_share", "a_mantissa_share", "w_exponent_share",
           "a_exponent_share", "w_gecko_exponent_share", "a_gecko_exponent_share"]
SEEDS = range(1, 9)


@pytest.fixture(scope="module")
def planned():
    return results_cpp.plan()


def _run(directory, name, seed, final, *, low_ratio=0.0, bits=10**6, epochs=2, promotions=0, start=None, end=None,
         dynamic=False, mem=None):
    """One run's per-epoch CSV and record (and .mem.csv), as the scripts leave them."""
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"{name}-s{seed}")
    with open(stem + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS + (DYNAMIC if dynamic else []))
        for e in range(1, epochs + 1):
            acc = final if e == epochs else final - 0.05
            loss = "nan" if acc < 0.15 else 0.5
            w.writerow([e, loss, acc, 0.6, acc, low_ratio, bits, 0, promotions, 65536, 0, 0.01, "", 2.0, 0.3,
                        low_ratio if start is None else start, low_ratio if end is None else end]
                       + ([0, 24.0, 20.0, 1.9, 1.1, 1.05, 2.5, 2.0, 3.0, 1.8, 0.2, 0.6, 0.5, 0.3, 0.8, 0.9]
                          if dynamic else []))
    with open(stem + ".json", "w") as f:
        json.dump({"command": ["train"], "commit": "0123456789abcdef", "dirty": False, "cpu_user_s": 1.0,
                   "cpu_sys_s": 0.0, "finished": "2000-01-01T00:00:00Z", "train_sha256": "ab" * 32,
                   "build": {"CMAKE_BUILD_TYPE": "Release"}, "cpu_model": "test CPU"}, f)
    if mem is not None:
        cats = ["weights", "extra_bits", "compute_copy", "gradients", "optimizer_state", "activations",
                "activation_gradients", "journal"]
        with open(stem + ".mem.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["run", "peak_total"] + [c + "_at_peak" for c in cats] + [c + "_peak" for c in cats])
            w.writerow([name, mem] + [mem // 16] * 16)
    return stem


def _claim_lines(doc, start):
    return [line for line in doc.splitlines() if line.startswith(start)]


def test_the_committed_runs_rewrite_the_results_document_byte_for_byte(planned):
    with open(os.path.join(ROOT, "docs", "results.md"), encoding="utf-8") as f:
        committed = f.read()
    assert results_cpp.document(os.path.join(ROOT, "results", "cpp"), planned) == committed, (
        "docs/results.md differs from what examples/results_cpp.py writes from results/cpp/; "
        "regenerate it with `python3 examples/results_cpp.py`")


def test_every_row_that_carries_a_claim_is_planned_with_at_least_8_seeds(planned):
    seeds = {}
    for r in planned:
        seeds.setdefault((r["part"], r["config"]), set()).add(r["seed"])
    claims = {k: v for k, v in seeds.items() if k[1] not in results_cpp.CONTEXT and k[0] != "no-master/fused"}
    assert claims and all(len(v) >= 8 for v in claims.values()), {k: len(v) for k, v in claims.items() if len(v) < 8}
    assert set(results_cpp.PARTS) == {r["part"] for r in planned}


def test_a_part_without_runs_says_not_run_with_the_command_that_runs_it(tmp_path, planned):
    doc = results_cpp.document(str(tmp_path), planned)
    for part in results_cpp.PARTS:
        assert f"no run of this part is committed under `results/cpp/{part}/`. `{results_cpp.command(part)}` runs it" in doc
    assert "No run is committed at this commit." in doc


def test_the_tradeoff_claims_follow_the_rule_on_synthetic_runs(tmp_path, planned):
    d = str(tmp_path / "tradeoff")
    for s in SEEDS:
        base = 0.80 + 0.02 * math.sin(s)   # the seed moves every row alike: pairing removes it
        _run(d, "fp32", s, base, bits=2 * 10**6)
        _run(d, "uniform", s, base - 0.05, low_ratio=0.66, bits=670000)               # 5 points worse on every seed
        _run(d, "op", s, base + 0.001 * (s % 3), low_ratio=0.20, bits=900000)
        _run(d, "ours-r0.5-decreasing", s, base + 0.002 * ((-1) ** s), low_ratio=0.52, bits=740000)   # within ±0.2
    doc = results_cpp.document(str(tmp_path), planned)
    uniform = _claim_lines(doc, "- *Uniform loses")
    assert len(uniform) == 1 and "**loses**" in uniform[0] and "**holds here**" in uniform[0]
    ours = _claim_lines(doc, "- *Ours keeps accuracy")
    assert len(ours) == 1 and "ours-r0.5-decreasing (ratio 0.5200 = 2.6× op's)" in ours[0]
    assert ours[0].count("**keeps accuracy**") == 2 and "**holds here**" in ours[0]
    row = next(line for line in doc.splitlines() if line.startswith("| uniform |"))
    assert "-5.00 [-5.00, -5.00], MDE 0.00 | loses | 0/8 / 0/8 |" in row and "| 0.670 |" in row   # memory vs all-high


def test_promotion_counts_divergence_both_ways_and_shows_the_trajectory(tmp_path, planned):
    d = str(tmp_path / "promotion")
    for s in SEEDS:
        _run(d, "fp32-lr0.3", s, 0.85, epochs=3)
        _run(d, "uniform-lr0.3-promo-off", s, 0.10, epochs=3, low_ratio=0.66)     # diverges (NaN, chance)
        stem = _run(d, "uniform-lr0.3-promo-on", s, 0.84, epochs=3, low_ratio=0.64, promotions=3, start=0.66,
                    end=0.62)                                                   # trains; costs 2 % of all-high
        with gzip.open(stem + ".steps.csv.gz", "wt", newline="") as f:
            w = csv.writer(f)
            w.writerow(["epoch", "step", "loss", "loss_scale", "skipped", "low_ratio", "max_overflow", "top_overflow"])
            for step in range(30):
                w.writerow([1 + step // 10, step, 2.0, 65536, 0, 0.66, 0.01 * step, f"fc1.Y={0.01 * step:g}"])
        with gzip.open(stem.replace("promo-on", "promo-off") + ".steps.csv.gz", "wt", newline="") as f:
            f.write("epoch,step,loss,loss_scale,skipped,low_ratio,max_overflow,top_overflow\n1,0,2.3,65536,0,0.66,0,\n")
    doc = results_cpp.document(str(tmp_path), planned)
    line = _claim_lines(doc, "- uniform-lr0.3:")
    assert len(line) == 1
    assert "final: 8/8 diverge without promotion, 8 of them train with it" in line[0]
    assert "max 2.00 % of all-high's aggregate" in line[0] and line[0].count("**holds here**") == 2
    assert "uniform, lr 0.3, seed 1, promotion (Θ = 0.01):" in doc
    assert "| step | 0 | 9 | 10 | 19 | 20 | 29 |" in doc   # the first steps and each epoch's last one


def test_no_master_and_dynamic_rows_get_verdicts_against_fp32(tmp_path, planned):
    t3 = str(tmp_path / "no-master" / "table3")
    dm = str(tmp_path / "dynamic" / "mlp")
    for s in SEEDS:
        base = 0.88 + 0.01 * math.cos(s)
        _run(t3, "fp32", s, base, epochs=3, mem=33568352)
        _run(t3, "fp32-master-amp", s, base + 0.001, epochs=3, mem=33568352)
        _run(t3, "fp8-e5m2", s, base - 0.05 + 0.002 * (s % 2), epochs=3, mem=33540988)
        _run(dm, "fp32", s, base, epochs=3)
        _run(dm, "qm-qe+gecko", s, base + 0.001 * (-1) ** s, epochs=3, dynamic=True)   # within ±0.1
    doc = results_cpp.document(str(tmp_path), planned)
    row = next(line for line in doc.splitlines() if line.startswith("| fp8-e5m2 |"))
    assert row.count("| loses |") == 2 and "| 33,540,988 |" in row
    assert "**keeps accuracy**" in _claim_lines(doc, "- qm-qe+gecko − fp32")[0]
    assert "| qm-qe+gecko | 8 |" in doc and "2.50×" in doc and "24.0 / 20.0" in doc


def _fake_train(tmp_path, body):
    build = tmp_path / "build"
    (build / "examples").mkdir(parents=True)
    (build / "CMakeCache.txt").write_text("CMAKE_BUILD_TYPE:STRING=Release\nCMAKE_CXX_FLAGS:STRING=-ffp-contract=off\n"
                                          "MINIFLOAT_NN_GEMM:STRING=blocked\nOTHER:BOOL=ON\n")
    train = build / "examples" / "train"
    train.write_text("#!/bin/sh\n" + body)
    train.chmod(train.stat().st_mode | stat.S_IEXEC)
    return str(train)


def test_run_record_writes_the_record_of_a_successful_run(tmp_path):
    train = _fake_train(tmp_path, 'echo "epoch,test_acc" > "$2"; echo trained\n')
    csv_path, record = str(tmp_path / "r-s1.csv"), str(tmp_path / "r-s1.json")
    rc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "run_record.py"), "--json", record,
                         "--log", str(tmp_path / "r-s1.log"), "--", train, "--csv", csv_path]).returncode
    assert rc == 0 and os.path.exists(csv_path)
    with open(record) as f:
        meta = json.load(f)
    assert meta["command"] == [train, "--csv", csv_path] and meta["returncode"] == 0
    assert meta["build"] == {"CMAKE_BUILD_TYPE": "Release", "CMAKE_CXX_FLAGS": "-ffp-contract=off",
                             "MINIFLOAT_NN_GEMM": "blocked"}
    assert meta["train_sha256"] == run_record.sha256_of(train)
    assert meta["commit"] == run_record.git_state(ROOT)["commit"] and isinstance(meta["dirty"], bool)
    assert {"cpu_user_s", "cpu_sys_s", "finished", "cpu_model"} <= set(meta)
    assert (tmp_path / "r-s1.log").read_text() == "trained\n"


def test_run_record_writes_no_record_when_the_run_fails(tmp_path):
    train = _fake_train(tmp_path, "echo broken >&2; exit 3\n")
    record = str(tmp_path / "r-s1.json")
    rc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "run_record.py"), "--json", record,
                         "--log", str(tmp_path / "r-s1.log"), "--", train]).returncode
    assert rc == 3 and not os.path.exists(record)
    assert "broken" in (tmp_path / "r-s1.log").read_text()
