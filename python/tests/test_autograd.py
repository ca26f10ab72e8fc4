"""The straight-through op: gradcheck, and the gradient rounding checked by hand."""

import torch

import minifloat as mf


def test_gradcheck_passes_for_a_format_close_to_double():
    # fp(11, 40): the rounding moves a value by at most 2^-41 relatively, far below gradcheck's
    # finite-difference step, so the numerical Jacobian is the identity the op claims.
    fmt = mf.format(11, 40)
    x = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: mf.quantize_ste(t, fmt), (x,))
    assert torch.autograd.gradcheck(lambda t: mf.quantize_ste(t, fmt, grad_format=mf.bfloat16) * 3, (x,))


def test_forward_rounds_and_backward_passes_the_gradient_through_unchanged():
    x = torch.tensor([0.1, 1.3, -7.7, 500.0], requires_grad=True)
    y = mf.quantize_ste(x, mf.e4m3, overflow="saturate")
    assert torch.equal(y.detach(), mf.quantize(x.detach(), mf.e4m3, overflow="saturate"))
    g = torch.tensor([0.123, -4.56, 7.89e-3, 1e5])
    y.backward(g)
    assert torch.equal(x.grad, g)


def test_backward_rounds_the_gradient_to_its_own_format_mode_and_seed():
    x = torch.randn(1000, requires_grad=True)
    g = torch.randn(1000) * 1e-3
    y = mf.quantize_ste(x, mf.bfloat16, grad_format=mf.e5m2, grad_rounding="stochastic", grad_seed=5, grad_index=3)
    y.backward(g)
    assert torch.equal(x.grad, mf.quantize(g, mf.e5m2, "stochastic", seed=5, index=3))
    assert not torch.equal(x.grad, mf.quantize(g, mf.e5m2, "stochastic", seed=6, index=3))


def test_the_op_composes_in_a_model_and_float64_works():
    w = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    loss = (mf.quantize_ste(w, mf.binary16, grad_format="bf16") ** 2).sum()
    loss.backward()
    want = mf.quantize(2 * mf.quantize(w.detach(), mf.binary16), mf.bfloat16)
    assert torch.equal(w.grad, want)
