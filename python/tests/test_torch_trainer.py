"""examples/torch/train.py: its bad-input errors and one tiny run with its CSV."""

import csv
import importlib.util
import os
import subprocess
import sys

import pytest

TRAIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch", "train.py"))


def run(*args):
    return subprocess.run([sys.executable, TRAIN, *args], capture_output=True, text=True, env=os.environ.copy(),
                          timeout=300)


def load_train():
    """train.py as a module, its directory (fashion_mnist, models) importable."""
    if os.path.dirname(TRAIN) not in sys.path:
        sys.path.insert(0, os.path.dirname(TRAIN))
    spec = importlib.util.spec_from_file_location("torch_train_for_test", TRAIN)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    return train


@pytest.mark.parametrize("args, message", [
    (["--dynamic", "bitwave", "--loss-scaling", "dynamic"], "--loss-scaling none"),
    (["--dynamic", "qm-qe", "--assignment", "uniform"], "replaces the precision assignment"),
    (["--dynamic", "qm-qe", "--promotion"], "--promotion"),
    (["--dc-tensor-csv", "bits.csv"], "applies to --dynamic only"),
    (["--dynamic", "bitwave", "--dc-bw-history", "1"], "less than 2"),
    (["--dynamic", "qm-qe", "--dc-tensor-csv", "/nonexistent-directory/bits.csv"], "cannot write the CSV file"),
    (["--ratio", "1.5"], "outside [0, 1]"),
    (["--epochs", "0"], "not positive"),
    (["--weights", "low+99"], "low+K"),
    (["--rounding", "sideways"], "--rounding"),
    (["--visible", "fp(3"], "--visible"),
    (["--low-forward", "fp(9,99)"], "--low-forward/--low-backward"),
    (["--low-backward", "bf17"], "--low-forward/--low-backward"),
    (["--assignment", "uniform", "--ratio", "0.3"], "--assignment ours only"),
    (["--csv", "/nonexistent-directory/out.csv"], "cannot write the CSV file"),
    (["--data-dir", "/nonexistent-directory"], "dataset-fashion-mnist"),
    (["--model", "vgg"], "invalid choice"),
])
def test_bad_input_gives_a_clear_message_and_a_nonzero_exit(args, message, capsys):
    # In this process: a new interpreter per case spent about 5 s importing torch for a message.
    with pytest.raises(SystemExit) as stop:
        load_train().main(args)
    assert stop.value.code not in (0, None)
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("args, message, code", [
    (["--model", "vgg"], "invalid choice", 2),  # argparse, before torch is imported
    (["--data-dir", "/nonexistent-directory"], "dataset-fashion-mnist", 1),  # after
])
def test_the_script_exits_with_the_errors_code_and_message(args, message, code):
    r = run(*args)
    assert r.returncode == code
    assert message in r.stderr, r.stderr


def test_a_tiny_run_writes_one_csv_row_per_epoch_with_measured_memory(tmp_path):
    out = tmp_path / "out.csv"
    r = run("--model", "resnet20", "--width", "0.25", "--epochs", "2", "--train-limit", "128", "--test-limit", "64",
            "--assignment", "uniform", "--save-activations", "packed", "--promotion", "--csv", str(out),
            "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "epoch 1 [" in r.stderr and "saved activations peak" in r.stdout
    rows = list(csv.DictReader(out.open()))
    assert [row["epoch"] for row in rows] == ["1", "2"]
    for row in rows:
        measured, fp32 = int(row["saved_activation_peak_bytes"]), int(row["saved_activation_fp32_peak_bytes"])
        assert 0 < measured <= 0.3 * fp32  # uniform: every activation in fp(4,3,4), 8 of 32 bits
        assert 0.0 <= float(row["test_accuracy"]) <= 1.0
    assert not (tmp_path / "out.csv.tmp").exists()


def test_low_forward_picks_the_low_format_that_saved_activations_are_packed_in(tmp_path):
    out = tmp_path / "out.csv"
    r = run("--model", "resnet20", "--width", "0.25", "--epochs", "1", "--train-limit", "64", "--test-limit", "64",
            "--assignment", "uniform", "--low-forward", "paper_fp(3,2,2)", "--low-backward", "paper_fp(4,2,0)",
            "--save-activations", "packed", "--csv", str(out), "--threads", "1")
    assert r.returncode == 0, r.stderr
    row = next(csv.DictReader(out.open()))
    # uniform: every saved activation a 6-bit fp(3,2,2) code, packed: 6/32 of the float32 bytes
    assert int(row["saved_activation_peak_bytes"]) * 32 == int(row["saved_activation_fp32_peak_bytes"]) * 6


def test_the_normalisation_constants_are_the_training_pixels_mean_and_deviation():
    sys.path.insert(0, os.path.dirname(TRAIN))
    import fashion_mnist

    images = fashion_mnist.load("train").images.numpy().astype("float64") / 255.0
    assert round(float(images.mean()), 4) == fashion_mnist.PIXEL_MEAN
    assert round(float(images.std()), 4) == fashion_mnist.PIXEL_STD


@pytest.mark.parametrize("method", ["qm-qe", "bitwave"])
def test_a_tiny_dynamic_run_reports_learned_bitlengths_per_epoch_and_tensor(tmp_path, method):
    out, bits = tmp_path / "out.csv", tmp_path / "bits.csv"
    r = run("--model", "resnet20", "--width", "0.25", "--epochs", "2", "--train-limit", "192", "--test-limit", "64",
            "--dynamic", method, "--dc-bit-lr", "20", "--dc-gamma-m", "10", "--dc-learn-epochs", "1",
            "--dc-bw-history", "2", "--dc-bw-threshold", "0", "--dc-bw-fix-epoch", "1", "--dc-gecko", "faithful",
            "--csv", str(out), "--dc-tensor-csv", str(bits), "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "containers  W m" in r.stdout and "reduction vs fp32" in r.stdout
    rows = list(csv.DictReader(out.open()))
    assert [row["dc_learning"] for row in rows] == ["1", "0"]
    for row in rows:
        assert float(row["red_qm_qe"]) >= 1.0 and float(row["red_qm_qe_g"]) > 0
        assert 0 <= float(row["a_mantissa_mean"]) <= 23
    tensors = list(csv.DictReader(bits.open()))
    per_epoch = len(tensors) // 2
    assert per_epoch > 40 and [t["epoch"] for t in tensors] == ["1"] * per_epoch + ["2"] * per_epoch
    assert {t["class"] for t in tensors} == {"weight", "activation"}
    if method == "qm-qe":
        assert any(float(t["n_mantissa"]) < 23 for t in tensors[:per_epoch])  # learned in epoch 1
        for t in tensors[per_epoch:]:  # frozen, rounded up
            assert float(t["n_mantissa"]) == int(t["mantissa_bits"]) and float(t["n_exponent"]) == int(t["exponent_bits"])
    else:
        # Three steps a epoch, history 2, threshold 0: BitWave moved, then was fixed at its average.
        assert rows[0]["bw_mantissa_bits"] != "23" or rows[0]["bw_narrowing"] != "0"
        assert len({t["mantissa_bits"] for t in tensors}) <= 2  # one network-wide container per epoch


def test_the_trainers_dynamic_container_flags_default_to_the_library_controllers_options():
    # train.py builds its parser before importing torch (fast --help and errors), so it writes
    # the --dc-* defaults and names out; they must stay the C++ controller's (dynamic_controller.hpp).
    import minifloat as mf
    import minifloat.training as mt
    train = load_train()
    args = train.parser().parse_args([])
    library = mt.DynamicOptions()
    for flag, field in [("dc_gamma_m", "gamma_mantissa"), ("dc_gamma_e", "gamma_exponent"), ("dc_bit_lr", "bit_lr"),
                        ("dc_lambda", "lambda_rule"), ("dc_exponent_gradient", "exponent_gradient"),
                        ("dc_learn_epochs", "learn_epochs"), ("dc_relearn_epochs", "relearn_epochs"),
                        ("dc_bw_history", "bw_history"), ("dc_bw_threshold", "bw_threshold"),
                        ("dc_bw_cadence", "bw_cadence"), ("dc_bw_fix_epoch", "bw_fix_epoch"), ("dc_gecko", "gecko"),
                        ("dc_sign", "sign")]:
        assert getattr(args, flag) == getattr(library, field), flag
    choices = {a.dest: a.choices for a in train.parser()._actions}
    assert list(choices["dynamic"]) == list(mf._core.dynamic_method_names)
    assert list(choices["dc_lambda"]) == list(mf._core.lambda_rule_names)
    assert list(choices["dc_exponent_gradient"]) == list(mf._core.exponent_gradient_names)
    assert list(choices["dc_gecko"]) == list(mf._core.gecko_variant_names)
    assert list(choices["dc_sign"]) == list(mf._core.sign_rule_names)
