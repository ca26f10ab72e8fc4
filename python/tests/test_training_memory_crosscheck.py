"""examples/torch/memory_crosscheck.py: the allocators (torch's profiler, NumPy's tracemalloc domain)
see the saving the saved-tensor hooks report between fp32 and packed storage."""

import os
import sys

import pytest

pytest.importorskip("torch")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch")))
import memory_crosscheck  # noqa: E402


def test_the_allocators_see_the_saving_the_hooks_report():
    args = memory_crosscheck.parser().parse_args(["--width", "0.25", "--batch-size", "8", "--assignments", "uniform"])
    result = memory_crosscheck.run(args)
    assert result["passed"]
    r = result["assignments"]["uniform"]
    fp32, packed = r["fp32"], r["packed"]
    # fp32 storage holds what the hooks hold as float32; packed storage holds fp(3,2,2) codes, 6 of 32 bits
    # for the activations, so packing must save most of the bytes in both accountings.
    assert fp32["hooks_total_bytes"] == packed["hooks_as_fp32_bytes"]
    assert r["hooks_saving_bytes"] > 0.6 * fp32["hooks_total_bytes"]
    assert abs(r["allocator_saving_bytes"] - r["hooks_saving_bytes"]) <= 0.01 * r["hooks_saving_bytes"]
    assert packed["numpy_allocator_bytes"] > 0   # the codes are NumPy buffers: without that domain they are missed


def test_an_unknown_assignment_is_refused_naming_the_argument(capsys):
    with pytest.raises(SystemExit):
        memory_crosscheck.main(["--assignments", "uniform,sideways"])
    assert "--assignments" in capsys.readouterr().err
