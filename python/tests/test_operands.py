"""minifloat.operands: the bindings of hadamard.hpp, operand.hpp and emulated_gemm.hpp, each against
an independent oracle written here (a dense Hadamard matrix in float64, exact rational sums with
fractions.Fraction, numpy's float32 arithmetic) or against the C++ rule it names."""

import io
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

import minifloat as mf
from minifloat import operands as ops
from minifloat.blocks import quantize_blocks


def dense_hadamard(b):
    i = np.arange(b)
    return np.array([[(-1) ** bin(r & c).count("1") for c in i] for r in i], dtype=np.float64)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)


def test_signs_are_plus_minus_one_reproducible_and_seed_dependent():
    s = ops.hadamard_signs(5, 256)
    assert s.dtype == torch.float32 and s.shape == (256,)
    assert set(s.tolist()) == {1.0, -1.0}
    assert torch.equal(s, ops.hadamard_signs(5, 256))
    assert not torch.equal(s, ops.hadamard_signs(6, 256))
    assert not torch.equal(ops.hadamard_signs(mf.fold_seed(5, 1), 16), ops.hadamard_signs(mf.fold_seed(5, 2), 16))
    with pytest.raises(ValueError, match="power of two"):
        ops.hadamard_signs(0, 12)


@pytest.mark.parametrize("b", [2, 16, 32, 128])
def test_transform_is_the_dense_matrix_and_its_inverse_within_the_documented_bound(b):
    x = randn(8, 4 * b, seed=b)
    s = ops.hadamard_signs(b, b)
    y = ops.hadamard_transform(x, s)
    m = dense_hadamard(b) * s.double().numpy()[None, :] / math.sqrt(b)  # M = H D / sqrt(b)
    blocks = x.double().numpy().reshape(8, 4, b)
    exact = blocks @ m.T
    u = 2.0 ** -24
    levels = math.log2(b)
    err = np.linalg.norm(y.double().numpy().reshape(8, 4, b) - exact, axis=-1)
    assert np.all(err <= (levels + 1) * u * np.linalg.norm(blocks, axis=-1) * 1.001)
    back = ops.hadamard_transform(y, s, inverse=True)
    err = np.linalg.norm((back - x).double().numpy().reshape(8, 4, b), axis=-1)
    assert np.all(err <= 2 * (levels + 1) * u * np.linalg.norm(blocks, axis=-1) * 1.001)


def test_both_operands_transformed_along_k_keep_the_product_exactly_on_small_integers():
    g = torch.Generator().manual_seed(1)
    a = torch.randint(-1000, 1001, (5, 64), generator=g).float()
    b = torch.randint(-1000, 1001, (64, 7), generator=g).float()
    s = ops.hadamard_signs(3, 16)
    ta = ops.hadamard_transform(a, s, axis=1)  # A: K along rows
    tb = ops.hadamard_transform(b, s, axis=0)  # B: K down columns
    qa, qb = (4 * ta).numpy(), (4 * tb).numpy()  # the 1/4 scale and the sums are exact here
    assert np.array_equal(qa, np.trunc(qa)) and np.array_equal(qb, np.trunc(qb))
    exact = a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)
    assert np.array_equal(qa.astype(np.int64) @ qb.astype(np.int64), 16 * exact)


def test_axis_of_an_nd_tensor_and_numpy_arrays():
    x = randn(3, 32, 5, seed=2)
    s = ops.hadamard_signs(9, 16)
    y = ops.hadamard_transform(x, s, axis=1)
    for p in range(3):
        along_rows = ops.hadamard_transform(x[p].T.contiguous(), s)  # the same columns as rows
        assert torch.equal(y[p], along_rows.T)
    assert np.array_equal(ops.hadamard_transform(x.numpy(), s.numpy(), axis=1), y.numpy())
    with pytest.raises(ValueError, match="multiple of the block size"):
        ops.hadamard_transform(randn(4, 24), s)
    with pytest.raises(ValueError, match="signs"):
        ops.hadamard_transform(randn(4, 32), s * 0.5)


def test_random_hadamard_signs_survive_a_state_dict_round_trip():
    layer = ops.RandomHadamard(16, seed=mf.fold_seed(42, 3))
    assert "signs" in layer.state_dict()
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    restored = ops.RandomHadamard(16, seed=0)
    assert not torch.equal(restored.signs, layer.signs)
    restored.load_state_dict(torch.load(buffer))
    assert torch.equal(restored.signs, layer.signs)
    x = randn(4, 64, seed=3)
    assert torch.equal(restored(x), layer(x))
    assert torch.equal(restored(layer(x), inverse=True), layer(layer(x), inverse=True))


def test_reduction_axis_of_each_stored_operand():
    assert ops.reduction_axis("left") == 1 and ops.reduction_axis("left", transposed=True) == 0
    assert ops.reduction_axis("right") == 0 and ops.reduction_axis("right", transposed=True) == 1
    with pytest.raises(ValueError, match="side"):
        ops.reduction_axis("middle")


def test_a_weight_stored_transposed_is_blocked_along_k_like_its_transpose():
    w = randn(24, 64, seed=4)  # nn.Linear's weight: N x K, the right operand stored transposed
    q = ops.quantize_operand(w, "nvfp4", side="right", transposed=True)
    assert torch.equal(q, quantize_blocks(w, "nvfp4", axis=1))
    q_t = ops.quantize_operand(w.T.contiguous(), "nvfp4", side="right")  # B = W^T, K x N
    assert torch.equal(q_t.T, q)


def test_tiles_share_one_scale_and_give_w_and_w_transposed_the_same_values():
    w = randn(40, 37, seed=5)
    for rounding in ("nearest_even", "stochastic"):
        q = ops.quantize_tiles(w, "nvfp4", rounding=rounding, seed=11)
        q_t = ops.quantize_tiles(w.T.contiguous(), "nvfp4", transposed=True, rounding=rounding, seed=11)
        assert torch.equal(q_t.T, q)
    # nearest: each tile is one NVFP4 block of its values (same tensor scale)
    t = float(w.abs().max()) / (6 * 448)
    q = ops.quantize_tiles(w, "nvfp4", tensor_scale=t)
    for i in range(0, 40, 16):
        for j in range(0, 37, 16):
            tile = w[i:i + 16, j:j + 16].contiguous().reshape(1, -1)
            one_block = quantize_blocks(tile, mf.blocks.block_format(mf.e2m1, tile.numel(), "e4m3_times_tensor"),
                                        tensor_scale=t)
            assert torch.equal(q[i:i + 16, j:j + 16].reshape(1, -1), one_block)
    value, stats = ops.quantize_tiles(w, "mxfp8-e4m3", tile=(8, 32), stats=True)
    assert stats.elements.values == w.numel()
    with pytest.raises(ValueError, match="tile"):
        ops.quantize_tiles(w, "nvfp4", tile=(64, 32))


def test_transforms_and_tiles_are_bit_identical_for_any_thread_count():
    # every shape spans several pieces of the thread split, and none divides evenly into them
    # (208 000 values of row blocks; 9 units of 16 x 1000 column blocks; 19 bands of tile rows,
    # the last one 12 rows tall)
    x_rows, x_cols, w = randn(1000, 208, seed=8), randn(3, 48, 1000, seed=9), randn(300, 1001, seed=10)
    signs = ops.hadamard_signs(3, 16)
    before = torch.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            got = [ops.hadamard_transform(x_rows, signs), ops.hadamard_transform(x_cols, signs, axis=1),
                   ops.hadamard_transform(x_cols, signs, axis=1, inverse=True)]
            stats = []
            for fmt, rounding in (("nvfp4", "stochastic"), ("mxfp8-e4m3", "nearest_even")):
                q, st = ops.quantize_tiles(w, fmt, rounding=rounding, seed=12, index=5, stats=True)
                q_t, st_t = ops.quantize_tiles(w.T.contiguous(), fmt, transposed=True, rounding=rounding, seed=12,
                                               index=5, stats=True)
                got += [q, q_t]
                stats += [st, st_t]
            results.append((got, stats))
    finally:
        torch.set_num_threads(before)
    one_thread, one_thread_stats = results[0]
    assert torch.equal(one_thread[3].T, one_thread[4])  # the transposed bands copied out and back
    for got, stats in results[1:]:
        for a, b in zip(got, one_thread):
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))
        assert stats == one_thread_stats


def test_four_over_six_picks_the_smaller_error_by_hand():
    x = torch.zeros(2, 16)
    x[0, 0], x[0, 1] = 5.0, 6.0  # to 6: 5 -> 4 (error 1); to 4: 5 -> 4.5, 6 -> 6 (error 0.25)
    x[1, :] = 1.5  # D6 = 0.25 and D4 = 0.375 are E4M3 values: both candidates exact, the tie keeps 6
    y, (blocks, fours) = ops.quantize_four_over_six(x, tensor_scale=1.0, stats=True)
    assert (blocks, fours) == (2, 1)
    assert y[0, 0].item() == 4.5 and y[0, 1].item() == 6.0
    assert torch.equal(y[1], x[1])
    g = randn(64, 64, seed=6)
    y = ops.quantize_four_over_six(g, axis=0, tensor_scale=float(g.abs().max()) / (6 * 448) * 0.75)
    plain = quantize_blocks(g, "nvfp4", axis=0, tensor_scale=float(g.abs().max()) / (6 * 448) * 0.75)
    err = ((y - g) ** 2).reshape(4, 16, 64).sum(1)
    err_plain = ((plain - g) ** 2).reshape(4, 16, 64).sum(1)
    assert torch.all(err <= err_plain) and torch.any(err < err_plain)
    with pytest.raises(ValueError, match="E8M0"):
        ops.quantize_four_over_six(g, "mxfp4")


def e4m3_values(shape, seed):
    return mf.quantize(randn(*shape, seed=seed), "e4m3", overflow="saturate")


def truncate_to_bits(x, bits):
    """x (a Fraction) truncated toward zero to `bits` significant bits (normal range)."""
    if x == 0:
        return x
    e = math.floor(math.log2(abs(x)))
    while Fraction(2) ** e > abs(x):
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    q = Fraction(2) ** (e - bits + 1)
    n = math.floor(abs(x) / q)
    return n * q if x > 0 else -n * q


def test_emulated_gemm_fp32_is_the_plain_fp32_loop():
    a, b = e4m3_values((3, 50), 7), e4m3_values((50, 4), 8)
    c = ops.emulated_gemm(a, b)
    an, bn = a.numpy(), b.numpy()
    for i in range(3):
        for j in range(4):
            s = np.float32(0)
            for k in range(50):
                s = np.float32(s + np.float32(an[i, k] * bn[k, j]))
            assert c[i, j].item() == s


def test_emulated_gemm_hopper_model_against_exact_rational_sums():
    m, n, k = 2, 3, 300
    a, b = e4m3_values((m, k), 9), e4m3_values((k, n), 10)
    c = ops.emulated_gemm(a, b, **ops.HOPPER_FP8_MODEL)
    assert ops.HOPPER_FP8_MODEL["promote_every"] == 128
    for i in range(m):
        for j in range(n):
            total = np.float32(0)
            s = Fraction(0)
            for l in range(k):
                if l and l % 128 == 0:
                    total = np.float32(total + np.float32(float(s)))
                    s = Fraction(0)
                s = truncate_to_bits(s + Fraction(float(a[i, l])) * Fraction(float(b[l, j])), 14)
            total = np.float32(total + np.float32(float(s)))
            assert c[i, j].item() == total
    assert torch.allclose(c, a @ b, rtol=1e-2, atol=1e-2)


def test_emulated_gemm_reads_transposed_views_and_draws_from_the_seed():
    a, b = e4m3_values((5, 40), 11), e4m3_values((40, 6), 12)
    rule = dict(product="bfloat16", product_rounding="stochastic", accumulator="bfloat16",
                accumulator_rounding="stochastic", promote_every=16)
    c = ops.emulated_gemm(a, b, seed=mf.fold_seed(1, 0, 2), **rule)
    assert torch.equal(ops.emulated_gemm(a.T.contiguous().T, b.T.contiguous().T, seed=mf.fold_seed(1, 0, 2), **rule), c)
    assert np.array_equal(ops.emulated_gemm(a.numpy(), b.numpy(), seed=mf.fold_seed(1, 0, 2), **rule), c.numpy())
    assert not torch.equal(ops.emulated_gemm(a, b, seed=mf.fold_seed(1, 1, 2), **rule), c)


def test_emulated_gemm_refuses_bad_arguments():
    a, b = randn(2, 3), randn(4, 5)
    with pytest.raises(ValueError, match="inner dimensions"):
        ops.emulated_gemm(a, b)
    with pytest.raises(ValueError, match="accumulator"):
        ops.emulated_gemm(randn(2, 3), randn(3, 2), accumulator=mf.format(11, 52))
    with pytest.raises(TypeError, match="float32"):
        ops.emulated_gemm(randn(2, 3).double(), randn(3, 2))
    with pytest.raises(ValueError, match="product_rounding"):
        ops.emulated_gemm(randn(2, 3), randn(3, 2), product_rounding="sideways")
