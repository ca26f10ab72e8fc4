"""The package's own entry points on CUDA tensors: minifloat.quantize, quantize_, encode, decode
and quantize_ste, and block formats through quantize, eagerly and under torch.compile, give the CPU's bits and keep the data on the
device. Run by tests/gpu/run.sh on a machine with a GPU."""

import sys

import torch

import minifloat as mf


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.cpu().view(torch.uint8), b.cpu().view(torch.uint8))


def main():
    failures = []
    x = torch.randn(1 << 20, dtype=torch.float32) * 300
    d = x.cuda()
    for fmt in (mf.e4m3, mf.e5m2, mf.bfloat16, mf.fp_4_3_4, mf.e2m1):
        for rounding in ("nearest_even", "stochastic", "toward_zero"):
            want, stats = mf.quantize(x, fmt, rounding=rounding, overflow="saturate", seed=11, index=3, stats=True)
            got, dstats = mf.quantize(d, fmt, rounding=rounding, overflow="saturate", seed=11, index=3, stats=True)
            if got.device != d.device or not same(got, want) or dstats != stats:
                failures.append(f"quantize {fmt} {rounding}")
            torch._dynamo.reset()  # a fresh compile per case (each format and mode is a new guard)
            compiled = torch.compile(lambda t: mf.quantize(t, fmt, rounding=rounding, overflow="saturate", seed=11,
                                                           index=3), fullgraph=True, backend="aot_eager")
            if not same(compiled(d), want):
                failures.append(f"compiled quantize {fmt} {rounding}")
        y = d.clone()
        mf.quantize_(y, fmt, overflow="saturate")
        if not same(y, mf.quantize(x, fmt, overflow="saturate")):
            failures.append(f"quantize_ {fmt}")
    codes = mf.encode(d, mf.e4m3, overflow="saturate")
    if not same(codes, mf.encode(x, mf.e4m3, overflow="saturate")):
        failures.append("encode e4m3")
    if not same(mf.decode(codes, mf.e4m3), mf.decode(codes.cpu(), mf.e4m3)):
        failures.append("decode e4m3")
    # Block formats through minifloat.quantize (and its custom operator under torch.compile).
    m = x[: 1 << 18].reshape(512, 512)
    dm = m.cuda()
    for name in ("mxfp8-e4m3", "mxfp4", "nvfp4"):
        for axis in (-1, 0):
            want, stats = mf.quantize(m, name, axis=axis, rounding="stochastic", seed=5, stats=True)
            got, dstats = mf.quantize(dm, name, axis=axis, rounding="stochastic", seed=5, stats=True)
            if got.device != dm.device or not same(got, want) or dstats != stats:
                failures.append(f"quantize {name} axis {axis}")
            torch._dynamo.reset()
            compiled = torch.compile(lambda t: mf.quantize(t, name, axis=axis), fullgraph=True, backend="aot_eager")
            if not same(compiled(dm), mf.quantize(m, name, axis=axis)):
                failures.append(f"compiled quantize {name} axis {axis}")
    # Values inside e4m3's range: an overflow would give NaN, whose payload torch's own arithmetic
    # in the backward pass (2 * q) keeps on the CPU and replaces by the canonical NaN on the GPU.
    w = (d[:4096] / 8).requires_grad_()
    (mf.quantize_ste(w, mf.e4m3, grad_format=mf.e5m2) ** 2).sum().backward()
    wc = (x[:4096] / 8).requires_grad_()
    (mf.quantize_ste(wc, mf.e4m3, grad_format=mf.e5m2) ** 2).sum().backward()
    if not same(w.grad, wc.grad):
        failures.append("quantize_ste gradient")
    print("dispatch:", "FAIL " + ", ".join(failures) if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
