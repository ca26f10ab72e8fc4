"""The GPU kernels (minifloat._cuda) against the CPU kernels (minifloat._core), bit for bit.

Run by tests/gpu/run.sh on a machine with a GPU (PYTHONPATH=<build>/python). Checks, for
float32 (16M values) and float64 (4M values) and every format family, rounding mode and
overflow policy: quantize's values and statistics (with and without counting), encode's codes
and its first value without a code; decode of every code of every 8-bit format (and of random
16-bit codes); quantize and encode of every 8-bit format's values and their neighbours;
data on which whole warps take the core's single-binade path; MX and NVFP4 block fake
quantization (every named block format, mode, scale rule and overflow policy, four layouts,
statistics, grids); stochastic rounding under many grids, element-index offsets, random_bits
and split calls; a non-default stream. Prints one line per group and a summary; exits 1 on any mismatch.

`--dry-run` runs the same script on this machine without a GPU: the "device" side is then the
CPU kernels again, called in pieces whose size follows the grid (so the script's data, cases,
comparisons and bookkeeping run, but no CUDA kernel does). `--small` cuts the sizes (for the
dry run on a small machine).
"""

import argparse
import sys
import time

import numpy as np
import torch

import minifloat
from minifloat import _core
from minifloat._ops import code_bytes, rounding_options

MODES = tuple(_core.rounding_names)
OVERFLOWS = tuple(_core.overflow_names)
_INT_OF = {torch.float32: torch.int32, torch.float64: torch.int64}
_TORCH_CODES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bit_width(f):
    """The code width as the C++ library counts it (E8M0: 8, no sign bit)."""
    return _core.format_constants(f._key)["bit_width"]


def formats_for(dtype):
    """Every family: IEEE, bfloat16, OCP FP8 (nan_only), fnuz, the papers' all_finite, MX elements,
    E8M0 (unsigned exponent; float data goes through the double plan), no subnormals."""
    fs = [minifloat.binary16, minifloat.bfloat16, minifloat.e5m2, minifloat.e4m3, minifloat.e4m3fnuz,
          minifloat.e5m2fnuz, minifloat.fp_4_3_4, minifloat.fp_5_2_0, minifloat.fp_6_9_0, minifloat.e2m3,
          minifloat.e3m2, minifloat.e2m1, minifloat.int8_mx, minifloat.parse_format("e8m0"),
          minifloat.format(5, 2, subnormals=False), minifloat.format(4, 3, bias=7, subnormals=False,
                                                                       specials="nan_only"),
          minifloat.format(3, 0, specials="all_finite"), minifloat.binary32]
    if dtype == torch.float64:
        fs += [minifloat.format(11, 40), minifloat.format(8, 30, specials="all_finite"),
               minifloat.format(11, 4, subnormals=False)]
    return fs


def test_values(n, dtype, seed=20261128):
    """n values that reach every path: random bit patterns (NaN, Inf, subnormals, huge), log-uniform
    magnitudes over narrow and wide ranges, the same with few mantissa bits (exact values and ties),
    and a block of specials."""
    g = torch.Generator().manual_seed(seed)
    width = 32 if dtype == torch.float32 else 64
    itype = _INT_OF[dtype]
    q = n // 4
    raw = torch.randint(-2**62, 2**62, (q,), generator=g, dtype=torch.int64)
    raw = raw ^ (torch.randint(0, 4, (q,), generator=g, dtype=torch.int64) << 62)
    if width == 32:
        raw = (raw & 0xFFFFFFFF).to(torch.int64)
        raw = torch.where(raw >= 2**31, raw - 2**32, raw).to(torch.int32)
    parts = [raw.view(dtype)]
    low, high = (-150, 128) if width == 32 else (-1075, 1024)
    for lo, hi, keep in ((-30, 20, None), (low, high, None), (-30, 20, 6)):
        m = q if keep is None or len(parts) < 3 else n - 3 * q
        e = torch.randint(lo, hi, (m,), generator=g)
        frac = 1 + torch.rand(m, generator=g, dtype=torch.float64)
        v = torch.ldexp(frac, e).to(dtype)
        v = torch.where(torch.rand(m, generator=g) < 0.5, -v, v)
        if keep is not None:
            bits = v.view(itype)
            mant = 23 if width == 32 else 52
            v = (bits & ~((1 << (mant - keep)) - 1)).view(dtype)
        parts.append(v)
    x = torch.cat(parts)[:n].clone()
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 448.0, 57344.0,
                             65504.0, 65520.0, 6.0, 7.0, 7.5, 1e-45, -1e-45, 2.0**-127, 3e38], dtype=dtype)
    x[:specials.numel()] = specials
    return x[torch.randperm(n, generator=g)]


class Failures:
    def __init__(self):
        self.checks = 0
        self.failed = []

    def check(self, ok, what):
        self.checks += 1
        if not ok:
            self.failed.append(what)
            print("  MISMATCH:", what, flush=True)
        return ok


def same_bits(a, b):
    """Bitwise equality of two float or integer tensors (NaN payloads included), on a's device."""
    b = b.to(a.device)
    if a.dtype in _INT_OF:
        return torch.equal(a.view(_INT_OF[a.dtype]), b.view(_INT_OF[b.dtype]))
    return torch.equal(a, b)


def first_difference(x, a, b):
    b = b.to(a.device)
    if a.dtype in _INT_OF:
        a, b = a.view(_INT_OF[a.dtype]), b.view(_INT_OF[b.dtype])
    i = int((a != b).nonzero()[0, 0])
    xi = x.reshape(-1)[i].item()
    return f"first at {i}: x={xi!r} gpu={a.reshape(-1)[i].item()!r} cpu={b.reshape(-1)[i].item()!r}"


def cpu_encode(x, f, opts):
    """The CPU's codes and first index without a code (its pointer-level call, which does not raise)."""
    nbytes = code_bytes(bit_width(f))
    arr = x.numpy()
    codes = np.zeros(arr.shape, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[nbytes])
    first = _core.encode(arr.ctypes.data, codes.ctypes.data, arr.size, arr.dtype == np.float64, nbytes, f._key, opts,
                         max(1, torch.get_num_threads()))
    return torch.from_numpy(codes.view({1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[nbytes])), first


class Device:
    """The kernels under test: minifloat._cuda on CUDA tensors."""

    name = "GPU"

    def __init__(self):
        import minifloat._cuda as mc
        self.mc = mc
        self.device = torch.device("cuda")

    def quantize(self, x, f, opts, stats, blocks=0, threads=0):
        out = torch.empty_like(x)
        counts = self.mc.quantize_into(x, out, f._key, opts, stats, blocks=blocks, threads=threads)
        return out, counts

    def encode(self, x, f, opts, blocks=0, threads=0):
        codes = torch.empty(x.shape, dtype=_TORCH_CODES[code_bytes(bit_width(f))], device=x.device)
        first = self.mc.encode_into(x, codes, f._key, opts, blocks=blocks, threads=threads)
        return codes, first

    def decode(self, codes, f, dtype, blocks=0, threads=0):
        out = torch.empty(codes.shape, dtype=dtype, device=codes.device)
        self.mc.decode_into(codes, out, f._key, blocks=blocks, threads=threads)
        return out

    def quantize_blocks(self, x, f, geometry, opts, stats, blocks=0, threads=0):
        out = torch.empty_like(x)
        counts = self.mc.quantize_blocks_into(x, out, geometry, f._key, opts, stats, blocks=blocks, threads=threads)
        return out, counts

    def synchronize(self):
        torch.cuda.synchronize()


class CpuStandIn:
    """--dry-run: the CPU kernels in pieces of blocks * threads elements (index advanced per piece),
    standing in for the device so the script runs end to end without one."""

    name = "CPU stand-in"

    def __init__(self):
        self.device = torch.device("cpu")

    @staticmethod
    def _pieces(n, blocks, threads):
        step = max(1, (blocks or 64) * (threads or 256))
        return [(s, min(step, n - s)) for s in range(0, n, step)] or [(0, 0)]

    def quantize(self, x, f, opts, stats, blocks=0, threads=0):
        flat, out = x.reshape(-1), torch.empty(x.numel(), dtype=x.dtype)
        total = [0] * 5
        for start, count in self._pieces(x.numel(), blocks, threads):
            o = opts[:4] + ((opts[4] + start) % 2**64,)
            arr, dst = flat[start:start + count].numpy(), out[start:start + count].numpy()
            c = _core.quantize(arr.ctypes.data, dst.ctypes.data, count, x.dtype == torch.float64, f._key, o, 1, stats)
            if stats:
                total = [a + b for a, b in zip(total, c)]
        return out.reshape(x.shape), (tuple(total) if stats else None)

    def encode(self, x, f, opts, blocks=0, threads=0):
        return cpu_encode(x, f, opts)

    def decode(self, codes, f, dtype, blocks=0, threads=0):
        return minifloat.decode(codes, f, dtype=dtype)

    def quantize_blocks(self, x, f, geometry, opts, stats, blocks=0, threads=0):
        arr = x.contiguous().numpy()
        out = np.empty_like(arr)
        before, length, after = geometry
        counts = _core.quantize_blocks(arr.ctypes.data, out.ctypes.data, before, length, after, f._key, opts, 1, stats)
        return torch.from_numpy(out), counts

    def synchronize(self):
        pass


def check_quantize_encode(dev, fails, x_cpu, dtype):
    """Every format, mode and overflow policy: values, counts (both kernels) and codes."""
    x = x_cpu.to(dev.device)
    for f in formats_for(dtype):
        t0 = time.time()
        bad_before = len(fails.failed)
        for mode in MODES:
            for overflow in OVERFLOWS:
                opts = rounding_options("check", mode, overflow, 12345, 7, 0)
                what = f"{dtype} {f} {mode} {overflow}"
                ref, ref_counts = minifloat.quantize(x_cpu, f, rounding=mode, overflow=overflow, seed=12345, index=7,
                                                     stats=True)
                got, _ = dev.quantize(x, f, opts, False)
                if not fails.check(same_bits(got, ref), f"quantize {what}"):
                    print("   ", first_difference(x, got, ref))
                got2, counts = dev.quantize(x, f, opts, True)
                fails.check(same_bits(got2, ref), f"quantize (counting) {what}")
                fails.check(tuple(counts) == tuple(ref_counts), f"counts {what}: gpu {tuple(counts)} cpu {tuple(ref_counts)}")
                ref_codes, ref_first = cpu_encode(x_cpu, f, opts)
                codes, first = dev.encode(x, f, opts)
                fails.check(first == ref_first, f"encode first without code {what}: gpu {first} cpu {ref_first}")
                if ref_first == x.numel():  # else the CPU stops writing at the first value without a code
                    if not fails.check(same_bits(codes, ref_codes), f"encode {what}"):
                        print("   ", first_difference(x, codes, ref_codes))
        dev.synchronize()
        status = "ok" if len(fails.failed) == bad_before else "MISMATCH"
        print(f"  {dtype} {str(f):32s} 7 modes x 2 overflow: quantize, counts, encode {status} ({time.time() - t0:.1f} s)",
              flush=True)


def check_codes(dev, fails):
    """Every code of every 8-bit format decoded; those values and their neighbours rounded and encoded."""
    all8 = torch.arange(256, dtype=torch.int64).to(torch.uint8)
    for f in formats_for(torch.float32):
        width = bit_width(f)
        if width > 8:
            continue
        bad_before = len(fails.failed)
        for dtype in (torch.float32, torch.float64):
            codes = (all8 & ((1 << width) - 1)) if width < 8 else all8
            ref = minifloat.decode(codes, f, dtype=dtype)
            got = dev.decode(codes.to(dev.device), f, dtype)
            fails.check(same_bits(got, ref), f"decode every code {f} {dtype}")
            # The values, their float neighbours (just inside and outside each rounding boundary), halves.
            finite = ref[torch.isfinite(ref)]
            neighbours = torch.cat([ref, torch.nextafter(finite, torch.full_like(finite, float("inf"))),
                                    torch.nextafter(finite, torch.full_like(finite, float("-inf"))),
                                    (finite[1:] + finite[:-1]) / 2, finite * 1.5, -finite])
            for mode in MODES:
                for overflow in OVERFLOWS:
                    for index in (0, 3):
                        opts = rounding_options("check", mode, overflow, 99, index, 0)
                        r, rc = minifloat.quantize(neighbours, f, rounding=mode, overflow=overflow, seed=99,
                                                   index=index, stats=True)
                        g, gc = dev.quantize(neighbours.to(dev.device), f, opts, True)
                        fails.check(same_bits(g, r) and tuple(gc) == tuple(rc),
                                    f"quantize of {f} values and neighbours {dtype} {mode} {overflow}")
                        rcodes, rfirst = cpu_encode(neighbours, f, opts)
                        gcodes, gfirst = dev.encode(neighbours.to(dev.device), f, opts)
                        fails.check(gfirst == rfirst and (rfirst < neighbours.numel() or same_bits(gcodes, rcodes)),
                                    f"encode of {f} values and neighbours {dtype} {mode} {overflow}")
        print(f"  {str(f):32s} every code decoded, values and neighbours rounded and encoded: "
              f"{'ok' if len(fails.failed) == bad_before else 'MISMATCH'}", flush=True)
    # Wider codes: every 16-bit code of binary16 and bfloat16, random codes of wider integer types.
    all16 = torch.arange(65536, dtype=torch.int32).to(torch.int16)
    for f in (minifloat.binary16, minifloat.bfloat16):
        for dtype in (torch.float32, torch.float64):
            fails.check(same_bits(dev.decode(all16.to(dev.device), f, dtype), minifloat.decode(all16, f, dtype=dtype)),
                        f"decode every 16-bit code {f} {dtype}")
    g = torch.Generator().manual_seed(5)
    wide = torch.randint(-2**62, 2**62, (1 << 16,), generator=g, dtype=torch.int64)
    for ctype in (torch.int32, torch.int64):
        for f in (minifloat.e4m3, minifloat.binary16, minifloat.format(8, 20)):
            c = wide.to(ctype)
            fails.check(same_bits(dev.decode(c.to(dev.device), f, torch.float32), minifloat.decode(c, f)),
                        f"decode {ctype} codes (bits above the width ignored) {f}")
    print("  16-bit and wider codes decoded", flush=True)


def check_launch_independence(dev, fails, x_cpu):
    """Stochastic rounding and counts: the same bits for any grid, index offset, random_bits, split."""
    # (1, 1) and (1, 32) run one or 32 threads over every element: they get a short prefix.
    grids = [(0, 0), (1, 1), (1, 32), (3, 96), (13, 33), (7, 1024), (1024, 256), (100000, 64)]
    tiny = {(1, 1): 4099, (1, 32): 65539}
    n = x_cpu.numel()
    for dtype in (torch.float32, torch.float64):
        xc = x_cpu.to(dtype) if dtype == torch.float64 else x_cpu
        x = xc.to(dev.device)
        for f in (minifloat.e4m3, minifloat.bfloat16, minifloat.parse_format("e8m0"), minifloat.fp_4_3_4):
            bad_before = len(fails.failed)
            for index in (0, 1, 2, 3, 5, 2**40 + 3, 2**64 - 2):
                for random_bits in (0, 3, 16):
                    opts = rounding_options("check", "stochastic", "saturate", 777, index, random_bits)
                    ref, rc = minifloat.quantize(xc, f, rounding="stochastic", overflow="saturate", seed=777,
                                                 index=index, random_bits=random_bits, stats=True)
                    for blocks, threads in (grids if random_bits == 0 and index in (0, 3) else grids[:1] + grids[3:5]):
                        m = tiny.get((blocks, threads), n)
                        want, want_counts = ref, rc
                        if m < n:
                            want, want_counts = minifloat.quantize(xc[:m], f, rounding="stochastic", overflow="saturate",
                                                                   seed=777, index=index, random_bits=random_bits,
                                                                   stats=True)
                        got, gc = dev.quantize(x[:m], f, opts, True, blocks=blocks, threads=threads)
                        fails.check(same_bits(got, want) and tuple(gc) == tuple(want_counts),
                                    f"stochastic {dtype} {f} index {index} random_bits {random_bits} grid {blocks}x{threads}")
            # A call split in two with index = offset gives the bits of the whole.
            opts = rounding_options("check", "stochastic", "infinity", 31, 11, 0)
            whole, _ = dev.quantize(x, f, opts, False)
            k = n // 3 + 1
            a, _ = dev.quantize(x[:k].contiguous(), f, opts, False, blocks=5, threads=64)
            b, _ = dev.quantize(x[k:].contiguous(), f, opts[:4] + (opts[4] + k,), False, blocks=9, threads=160)
            fails.check(same_bits(torch.cat([a, b]), whole), f"split stochastic call {dtype} {f}")
            print(f"  {dtype} {str(f):32s} stochastic under {len(grids)} grids, 7 index offsets, random_bits 0/3/16, "
                  f"a split call: {'ok' if len(fails.failed) == bad_before else 'MISMATCH'}", flush=True)
    # Encode's grid independence (stochastic, codes of 1 byte) and its first index without a code.
    xs = x_cpu[:65539].clone()
    xs[~torch.isfinite(xs)] = 0.0  # then NaN (no code in fp_4_3_4) first at 777; Inf saturates to max
    xs[777] = float("nan")
    xs[5000] = float("inf")
    for blocks, threads in grids:
        opts = rounding_options("check", "stochastic", "saturate", 5, 1, 0)
        ref, rfirst = cpu_encode(xs, minifloat.fp_4_3_4, opts)
        _, gfirst = dev.encode(xs.to(dev.device), minifloat.fp_4_3_4, opts, blocks=blocks, threads=threads)
        fails.check(gfirst == rfirst == 777, f"encode first without code, grid {blocks}x{threads}: gpu {gfirst} cpu {rfirst}")
        xe = x_cpu[: tiny.get((blocks, threads), n)]
        ref, _ = cpu_encode(xe, minifloat.e4m3, opts)
        got, _ = dev.encode(xe.to(dev.device), minifloat.e4m3, opts, blocks=blocks, threads=threads)
        fails.check(same_bits(got, ref), f"encode e4m3 stochastic grid {blocks}x{threads}")
    print("  encode under every grid: codes and first index without a code checked", flush=True)


def plain_values(f, n, dtype, seed):
    """n values of f's plain range (zero, or a magnitude from the smallest normal up to the largest
    finite), random signs: data on which whole warps take the core's single-binade path."""
    c = _core.format_constants(f._key)
    g = torch.Generator().manual_seed(seed)
    lo, hi = np.log2(c["min_normal"]), np.log2(c["max_finite"])
    v = torch.exp2(lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64))
    v = torch.minimum(v, torch.tensor(c["max_finite"], dtype=torch.float64)).to(dtype)
    v = torch.where(torch.rand(n, generator=g) < 0.5, -v, v)
    v[torch.rand(n, generator=g) < 0.01] = 0.0
    return v


def check_plain_warps(dev, fails):
    """Data whose warps mostly meet the single-binade condition (the kernels then take that path
    of the core), with an outlier every 3001 values so that some warps take the general path."""
    for dtype in (torch.float32, torch.float64):
        for f in formats_for(dtype):
            if _core.format_constants(f._key)["epsilon"] >= 1 or f == minifloat.parse_format("e8m0"):
                continue  # no mantissa bit: the single-binade path never applies
            bad_before = len(fails.failed)
            x_cpu = plain_values(f, 1 << 18, dtype, 41)
            x_cpu[::3001] = 1e-30
            x = x_cpu.to(dev.device)
            for mode in MODES:
                for overflow in OVERFLOWS:
                    opts = rounding_options("check", mode, overflow, 8, 1, 0)
                    ref, rc = minifloat.quantize(x_cpu, f, rounding=mode, overflow=overflow, seed=8, index=1, stats=True)
                    got, gc = dev.quantize(x, f, opts, True)
                    fails.check(same_bits(got, ref) and tuple(gc) == tuple(rc),
                                f"plain-range quantize {dtype} {f} {mode} {overflow}")
            print(f"  {dtype} {str(f):32s} plain-range data, 7 modes x 2 overflow: "
                  f"{'ok' if len(fails.failed) == bad_before else 'MISMATCH'}", flush=True)


def block_test_values(n, seed):
    """Block-format data: smooth blocks (normal values over a few binades, as activations and
    gradients), blocks with one outlier, all-zero blocks, and the mixed bit patterns of
    test_values (NaN, Inf, subnormals, huge) in a quarter of the data."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g) * torch.exp2(torch.randint(-20, 20, (n // 64 + 1,), generator=g).float()).repeat_interleave(64)[:n]
    x[torch.rand(n, generator=g) < 0.002] *= 1e4
    x[256:512] = 0.0
    mixed = test_values(n // 4, torch.float32, seed + 1)
    x[n - n // 4:] = mixed
    return x


def check_blocks(dev, fails):
    """MX and NVFP4 fake quantization: every named block format, rounding mode, scale rule and
    overflow policy, blocks along the last axis (whole and partial blocks) and along strided axes,
    with statistics; NVFP4 with its computed and a given tensor scale; several grids."""
    x_all = block_test_values(1 << 18, 77)
    shapes = [((4096, 64), -1), ((1000, 77), -1), ((6, 101, 43), 1), ((77, 129), 0)]
    for name, f in minifloat.blocks.NAMED_BLOCKS.items():
        t0 = time.time()
        bad_before = len(fails.failed)
        rules = minifloat.blocks.SCALE_RULES if f.scaling == "e8m0" else ("floor",)
        for shape, axis in shapes:
            n = int(np.prod(shape))
            x_cpu = x_all[:n].reshape(shape).contiguous()
            x = x_cpu.to(dev.device)
            before, length, after, _ = minifloat.blocks._geometry(shape, axis, "check")
            for mode in MODES:
                for rule in rules:
                    for overflow in ("saturate", "infinity"):
                        for tensor_scale in ((None, 0.37) if f.scaling != "e8m0" else (None,)):
                            ref, rs = minifloat.blocks.quantize_blocks(x_cpu, f, axis=axis, rounding=mode, scale_rule=rule,
                                                                       overflow=overflow, seed=21, index=5,
                                                                       tensor_scale=tensor_scale, stats=True)
                            opts = minifloat.blocks._options("check", f, mode, rule, overflow, 21, 5, 0, tensor_scale)
                            got, gs = dev.quantize_blocks(x, f, (before, length, after), opts, True)
                            what = f"blocks {name} {shape} axis {axis} {mode} {rule} {overflow} tensor_scale {tensor_scale}"
                            if not fails.check(same_bits(got, ref), what):
                                print("   ", first_difference(x, got.reshape(-1), ref.reshape(-1)))
                            fails.check(minifloat.blocks._stats(gs) == rs, f"{what} stats: gpu {gs} cpu {tuple(rs)}")
        # The grid does not change the bits: stochastic under a few grids.
        x_cpu = x_all[: 1000 * 77].reshape(1000, 77)
        opts = minifloat.blocks._options("check", f, "stochastic", "floor", "saturate", 3, 2**40 + 1, 0, None)
        ref = minifloat.blocks.quantize_blocks(x_cpu, f, rounding="stochastic", seed=3, index=2**40 + 1)
        for blocks, threads in ((1, 1), (3, 96), (1024, 256)):
            got, _ = dev.quantize_blocks(x_cpu.to(dev.device), f, (1000, 77, 1), opts, False, blocks=blocks, threads=threads)
            fails.check(same_bits(got, ref), f"blocks {name} stochastic grid {blocks}x{threads}")
        dev.synchronize()
        print(f"  {name:12s} 4 layouts x 7 modes x {len(rules)} rules x 2 overflow, stats, grids: "
              f"{'ok' if len(fails.failed) == bad_before else 'MISMATCH'} ({time.time() - t0:.1f} s)", flush=True)


def check_stream(dev, fails, x_cpu):
    """A launch on a non-default stream, the result read after that stream's work only; in place."""
    if dev.device.type != "cuda":
        return
    s = torch.cuda.Stream()
    x = x_cpu.to(dev.device)
    ref = minifloat.quantize(x_cpu, minifloat.e5m2, rounding="stochastic", seed=3)
    with torch.cuda.stream(s):
        y = x.clone()
        dev.mc.quantize_into(y, y, minifloat.e5m2._key, rounding_options("check", "stochastic", "infinity", 3, 0, 0))
    s.synchronize()
    fails.check(same_bits(y, ref), "in-place quantize on a side stream")
    print("  a side stream, in place: checked", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="no GPU: the CPU kernels stand in for the device")
    parser.add_argument("--small", action="store_true", help="small sizes (for the dry run)")
    args = parser.parse_args()
    t0 = time.time()
    if args.dry_run:
        dev = CpuStandIn()
    else:
        import minifloat._cuda as mc
        if not mc.is_available():
            print("check_kernels: the CUDA kernels cannot run here:", mc.problem())
            return 2
        dev = Device()
        print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, CUDA runtime of torch "
              f"{torch.version.cuda}; minifloat._cuda_kernels built with CUDA runtime "
              f"{mc.raw_kernels().runtime_version()}, driver {mc.raw_kernels().driver_version()}")
    n32, n64 = (1 << 16, 1 << 14) if args.small else (1 << 24, 1 << 22)
    print(f"threads for the CPU reference: {torch.get_num_threads()}; values: {n32} float32, {n64} float64", flush=True)
    fails = Failures()
    x32 = test_values(n32, torch.float32)
    x64 = test_values(n64, torch.float64)
    print("quantize / encode, every format family, mode and overflow policy:", flush=True)
    check_quantize_encode(dev, fails, x32, torch.float32)
    check_quantize_encode(dev, fails, x64, torch.float64)
    print("codes:", flush=True)
    check_codes(dev, fails)
    print("plain-range data (the single-binade path):", flush=True)
    check_plain_warps(dev, fails)
    print("block formats (MX, NVFP4):", flush=True)
    check_blocks(dev, fails)
    print("launch configurations:", flush=True)
    check_launch_independence(dev, fails, x32[: 1 << 20])
    check_stream(dev, fails, x32)
    verdict = "PASS" if not fails.failed else "FAIL"
    print(f"SUMMARY check_kernels ({dev.name}): {verdict}: {fails.checks - len(fails.failed)} of {fails.checks} "
          f"checks identical to the CPU, {len(fails.failed)} mismatched ({time.time() - t0:.0f} s)")
    for what in fails.failed[:30]:
        print("  failed:", what)
    return 0 if not fails.failed else 1


if __name__ == "__main__":
    sys.exit(main())
