"""minifloat's operations as torch custom operators: torch.compile(fullgraph=True) of functions
that call them compiles without a graph break and gives eager's bits; torch.export of a model
with a rounding op runs; the fake implementations give the right shapes and dtypes and refuse
the arguments eager refuses."""

import contextlib

import pytest
import torch
from torch import nn

import minifloat as mf
from minifloat import _custom_ops
from minifloat._custom_ops import CPU_KERNELS_IN_CPP, operator_args

# The rounding operators' CPU kernels as the dispatcher runs them (C++ where _torch_ops.so was
# built) and the Python ones (the fallback elsewhere), called directly so that both are tested.
KERNELS = {"dispatcher": (torch.ops.minifloat.quantize, torch.ops.minifloat.quantize_with_stats,
                          torch.ops.minifloat.quantize_),
           "python": (_custom_ops._quantize_kernel, _custom_ops._quantize_with_stats_kernel,
                      _custom_ops._quantize_in_place_kernel)}
PYTHON_KERNELS = {"quantize": _custom_ops._quantize_kernel, "quantize_with_stats": _custom_ops._quantize_with_stats_kernel,
                  "quantize_": _custom_ops._quantize_in_place_kernel, "quantize_ste": _custom_ops._quantize_ste_kernel,
                  "encode": _custom_ops._encode_kernel, "decode": _custom_ops._decode_kernel,
                  "quantize_blocks": _custom_ops._quantize_blocks_kernel}
OTHER_OPERATORS = ("encode", "decode", "quantize_ste", "quantize_blocks")


def operator(name, kernels):
    """An operator's CPU kernel: the dispatcher's (C++ where built) or the Python fallback."""
    return getattr(torch.ops.minifloat, name) if kernels == "dispatcher" else PYTHON_KERNELS[name]


@contextlib.contextmanager
def cpu_kernels(kernels):
    """With "python", the Python fallback kernels as every operator's CPU kernel in the dispatcher
    (as where _torch_ops.so is absent), counting their calls; the registration is dropped after."""
    calls = []
    if kernels == "dispatcher":
        yield calls
        return
    library = torch.library.Library("minifloat", "IMPL")
    for name, kernel in PYTHON_KERNELS.items():
        library.impl(name, lambda *args, _kernel=kernel, _name=name: calls.append(_name) or _kernel(*args), "CPU")
    try:
        yield calls
    finally:
        library._destroy()


def same_bits(a, b):
    a, b = a.contiguous(), b.contiguous()
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def compiled(fn, backend="aot_eager"):
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend=backend)


@pytest.mark.parametrize("rounding", ["nearest_even", "stochastic", "toward_zero"])
def test_quantize_compiles_without_a_graph_break_and_gives_eagers_bits(rounding):
    def fn(x):
        y = mf.quantize(x * 2, mf.e4m3, rounding=rounding, overflow="saturate", seed=2**64 - 3, index=5)
        return mf.quantize(y + 1, "bf16") * 3

    x = torch.randn(4096)
    assert same_bits(compiled(fn)(x), fn(x))


def test_quantize_with_stats_operator_inside_a_compiled_graph():
    def fn(x):
        return torch.ops.minifloat.quantize_with_stats(*operator_args(x, "e5m2", "nearest_even", "infinity", 0, 0, 0,
                                                                     "test"))

    x = torch.randn(1000) * 1e5
    y, counts = compiled(fn)(x)
    expected, stats = mf.quantize(x, "e5m2", stats=True)
    assert same_bits(y, expected) and counts.tolist() == list(stats)


def test_encode_decode_and_in_place_rounding_compile():
    def fn(x):
        codes = mf.encode(x, mf.e4m3, overflow="saturate", dtype=torch.float8_e4m3fn)
        back = mf.decode(codes)
        z = x.clone()
        mf.quantize_(z, mf.binary16)
        return codes, back, z

    x = torch.randn(2048) * 100
    got, want = compiled(fn)(x), fn(x)
    for a, b in zip(got, want):
        assert same_bits(a, b)


def test_quantize_ste_gradients_match_eager_under_compile():
    def fn(x):
        return (mf.quantize_ste(x, mf.e4m3, grad_format=mf.e5m2, grad_rounding="stochastic", grad_seed=9) ** 2).sum()

    x1 = torch.randn(512, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    fn(x1).backward()
    compiled(fn)(x2).backward()
    assert same_bits(x1.grad, x2.grad)


def test_inductor_compiles_a_function_with_a_rounding_op():
    def fn(x):
        return torch.relu(mf.quantize(torch.sin(x), mf.e2m1, overflow="saturate")) + 1

    x = torch.randn(333)
    assert same_bits(compiled(fn, backend="inductor")(x), fn(x))


class Rounded(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 8)

    def forward(self, x):
        w = mf.quantize_ste(self.linear.weight, mf.e4m3, overflow="saturate")
        return nn.functional.linear(mf.quantize(x, mf.bfloat16), w, self.linear.bias)


def test_torch_export_of_a_model_with_rounding_ops_runs_and_matches_eager():
    torch.manual_seed(0)
    model = Rounded().eval()
    x = torch.randn(4, 16)
    exported = torch.export.export(model, (x,))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert any("minifloat.quantize" in t for t in targets)
    assert same_bits(exported.module()(x), model(x))


def test_fake_implementations_give_shapes_and_dtypes_and_check_arguments():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(3, 8)
        assert mf.quantize(x, mf.e4m3).shape == (3, 8)
        assert mf.encode(x, mf.e4m3).dtype == torch.uint8
        assert mf.encode(x, mf.bfloat16).dtype == torch.int16
        assert mf.encode(x, mf.e2m1, dtype=torch.float4_e2m1fn_x2).shape == (3, 4)
        assert mf.decode(torch.empty(3, 8, dtype=torch.uint8), mf.e4m3, dtype=torch.float64).dtype == torch.float64
        with pytest.raises(ValueError, match="rounding"):
            mf.quantize(x, mf.e4m3, rounding="sideways")
        with pytest.raises(ValueError):
            torch.ops.minifloat.quantize(x, [4, 3, 7, 1, 1], mf.ROUNDING.index("stochastic"), 1, 0, 0, 99)
    meta = torch.empty(5, device="meta")
    assert mf.quantize(meta, "e5m2").device.type == "meta"


def test_compiled_call_refuses_a_bad_argument_while_tracing():
    def fn(x):
        return mf.quantize(x, "e4m3", random_bits=40, rounding="stochastic")

    with pytest.raises(Exception, match="random_bits"):
        compiled(fn)(torch.randn(8))


@pytest.mark.parametrize("fmt, rule", [("mxfp4", "floor"), ("mxfp8-e4m3", "rceil"), ("nvfp4", "floor")])
def test_block_formats_through_quantize_compile_and_match_eager(fmt, rule):
    def fn(x):
        return mf.quantize(x * 3, fmt, axis=0, scale_rule=rule, rounding="stochastic", seed=5) - 1

    x = torch.randn(64, 48)
    assert same_bits(compiled(fn)(x), fn(x))
    assert same_bits(fn(x), mf.blocks.quantize_blocks(x * 3, fmt, axis=0, scale_rule=rule, rounding="stochastic",
                                                      seed=5) - 1)


def test_quantize_refuses_block_arguments_for_a_scalar_format():
    with pytest.raises(ValueError, match="block formats"):
        mf.quantize(torch.ones(4), "e4m3", axis=0)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fmt, rounding, overflow", [("e4m3", "nearest_even", "saturate"),
                                                     ("e5m2", "stochastic", "infinity"),
                                                     ("e2m1", "toward_zero", "saturate"),
                                                     ("e8m0", "nearest_away", "infinity"),
                                                     ("bf16", "to_odd", "infinity")])
def test_rounding_operators_give_the_eager_bits_and_counts(kernels, dtype, fmt, rounding, overflow):
    """The operators' CPU kernels (C++ where _torch_ops.so was built, else Python) against the
    eager path, on a strided tensor with specials, over more than one piece of work."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        check_rounding_operators(*KERNELS[kernels], dtype, fmt, rounding, overflow)
    finally:
        torch.set_num_threads(threads)


def check_rounding_operators(quantize, quantize_with_stats, quantize_, dtype, fmt, rounding, overflow):
    x = (torch.randn(3, 70001, dtype=dtype) * 300)[:, ::2]
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0], dtype=dtype)
    args = operator_args(x, fmt, rounding, overflow, 2**64 - 7, 11, 0, "test")
    want, stats = mf.quantize(x, fmt, rounding, overflow, seed=2**64 - 7, index=11, stats=True)
    assert same_bits(quantize(*args), want)
    y, counts = quantize_with_stats(*args)
    assert same_bits(y, want) and counts.tolist() == list(stats)
    z = x.clone()
    quantize_(z, *args[1:])
    zs = x.clone()[:, ::3]
    quantize_(zs, *args[1:])
    assert same_bits(z, want) and same_bits(zs, mf.quantize(x.clone()[:, ::3], fmt, rounding, overflow,
                                                            seed=2**64 - 7, index=11))


@pytest.mark.parametrize("kernels", KERNELS)
def test_rounding_operators_refuse_bad_arguments_and_leave_the_input(kernels):
    quantize, _, quantize_ = KERNELS[kernels]
    x = torch.randn(16)
    before = x.clone()
    key = [4, 3, 7, 1, 1]
    for bad, match in [(([4, 3, 7, 1, 9], 0, 0, 0, 0, 0), "specials"), ((key, 99, 0, 0, 0, 0), "rounding"),
                       ((key, 0, 5, 0, 0, 0), "overflow"), ((key, 3, 0, 0, 0, 70), "random_bits"),
                       (([40, 3, 7, 1, 1], 0, 0, 0, 0, 0), "format")]:
        with pytest.raises(ValueError, match=match):
            quantize_(x, *bad)
    with pytest.raises(TypeError, match="float32 or float64"):
        quantize(x.to(torch.int32), key, 0, 0, 0, 0, 0)
    assert torch.equal(x, before)


def test_the_cpu_kernels_are_the_compiled_ones_where_torch_ops_was_built():
    import pathlib
    built = (pathlib.Path(mf.__file__).parent / "_torch_ops.so").exists()
    assert CPU_KERNELS_IN_CPP == built


def check_other_operators(kernels):
    """encode, decode, quantize_ste's forward and quantize_blocks called as operators (one kernel
    set) against the eager functions, on strided tensors with specials over more than one piece."""
    x = (torch.randn(3, 70001) * 300)[:, ::2]
    x[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    encode, decode, ste, blocks = (operator(name, kernels) for name in OTHER_OPERATORS)
    for fmt, dtype in [("e4m3", torch.float32), ("e5m2", torch.float64), ("bf16", torch.float32),
                       ("binary16", torch.float64)]:
        values = x.to(dtype)
        args = operator_args(values, fmt, "stochastic", "infinity", 2**64 - 7, 11, 0, "test")
        codes = encode(*args, None)
        assert same_bits(codes, mf.encode(values, fmt, "stochastic", "infinity", seed=2**64 - 7, index=11))
        assert same_bits(decode(codes[:, ::3], args[1], dtype == torch.float64),
                         mf.decode(codes[:, ::3], fmt, dtype=dtype))
        grad_args = operator_args(None, "e5m2", "nearest_even", "infinity", 0, 0, 0, "test")[1:]
        assert same_bits(ste(*args, *grad_args),
                         mf.quantize(values, fmt, "stochastic", "infinity", seed=2**64 - 7, index=11))
    y = (torch.randn(2, 64, 1300) * 40)[:, :, ::2]
    y[1, 5, 7] = float("nan")
    rules = mf.blocks.SCALE_RULES
    for t, fmt, axis, rule, tensor_scale in [(x, "mxfp4", -1, "floor", None), (x, "mxfp8-e4m3", 1, "rceil", None),
                                             (y, "mxfp6-e3m2", 1, "even", None), (y, "nvfp4", -1, "floor", None),
                                             (x, "nvfp4", 0, "floor", 0.25), (y, "mxint8", 0, "ceil", None)]:
        block = mf.blocks.NAMED_BLOCKS[fmt]
        got = blocks(t, _custom_ops.block_key(block), axis, mf.ROUNDING.index("stochastic"), rules.index(rule),
                     mf.OVERFLOW.index("saturate"), _custom_ops.to_signed(2**64 - 3), 5, 0, tensor_scale)
        want = mf.blocks.quantize_blocks(t, block, axis=axis, rounding="stochastic", scale_rule=rule, seed=2**64 - 3,
                                         index=5, tensor_scale=tensor_scale)
        assert same_bits(got, want), (fmt, axis, rule)


@pytest.mark.parametrize("kernels", KERNELS)
def test_encode_decode_ste_and_block_operators_give_the_eager_bits(kernels):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        check_other_operators(kernels)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("kernels", KERNELS)
def test_other_operators_refuse_bad_arguments_and_leave_the_input(kernels):
    encode, decode, ste, blocks = (operator(name, kernels) for name in OTHER_OPERATORS)
    x = torch.randn(64)
    before = x.clone()
    key = [4, 3, 7, 1, 1]
    mxfp4 = _custom_ops.block_key(mf.blocks.NAMED_BLOCKS["mxfp4"])
    nvfp4 = _custom_ops.block_key(mf.blocks.NAMED_BLOCKS["nvfp4"])
    for call, error, match in [
            (lambda: encode(x, [4, 3, 7, 1, 9], 0, 0, 0, 0, 0, None), ValueError, "specials"),
            (lambda: encode(x, key, 0, 0, 0, 0, 70, None), ValueError, "random_bits"),
            (lambda: encode(x.to(torch.int32), key, 0, 0, 0, 0, 0, None), TypeError, "float32 or float64"),
            (lambda: encode(torch.tensor([1.0, float("nan")]), [2, 1, 1, 1, 2], 0, 1, 0, 0, 0, None), ValueError,
             "flat index 1"),
            (lambda: decode(x, key, False), TypeError, "integer"),
            (lambda: decode(torch.zeros(4, dtype=torch.int64), [11, 52, 1023, 1, 0], False), ValueError, "float"),
            (lambda: ste(x, key, 0, 0, 0, 0, 0, [4, 3, 7, 1, 1], 99, 0, 0, 0, 0), ValueError, "rounding"),
            (lambda: ste(x, key, 0, 0, 0, 0, 0, [4, 3, 7, 1, 1], 3, 0, 0, 0, 70), ValueError, "random_bits"),
            (lambda: blocks(x, mxfp4, 0, 0, 9, 0, 0, 0, 0, None), ValueError, "scale rule"),
            (lambda: blocks(x, mxfp4, 3, 0, 0, 0, 0, 0, 0, None), ValueError, "axis"),
            (lambda: blocks(x, mxfp4[:5] + [0, 0, 0], 0, 0, 0, 0, 0, 0, 0, None), ValueError, "block"),
            (lambda: blocks(x, nvfp4, 0, 0, 1, 0, 0, 0, 0, None), ValueError, "E8M0"),
            (lambda: blocks(x, nvfp4, 0, 0, 0, 0, 0, 0, 0, -1.0), ValueError, "tensor_scale"),
            (lambda: blocks(x, nvfp4, 0, 0, 0, 0, 0, 0, 0, 1e300), ValueError, "tensor_scale"),
            (lambda: blocks(x.double(), mxfp4, 0, 0, 0, 0, 0, 0, 0, None), TypeError, "float32")]:
        with pytest.raises(error, match=match):
            call()
    assert torch.equal(x, before)


@pytest.mark.parametrize("kernels", KERNELS)
def test_encode_decode_ste_and_blocks_compile_without_a_graph_break_and_give_eagers_bits(kernels):
    """Each of these operators in one fullgraph-compiled function (inductor), with the C++ kernels
    and with the Python fallback kernels in the dispatcher, against eager, bit for bit."""
    def fn(x):
        fp8 = mf.encode(x, mf.e4m3, overflow="saturate", dtype="native")
        fp4 = mf.encode(x, "e2m1", "stochastic", "saturate", seed=7, dtype=torch.float4_e2m1fn_x2)
        wide = mf.encode(x.double(), "e5m2", "stochastic", seed=2**64 - 1, index=3)
        return (fp8, fp4, wide, mf.decode(fp8), mf.decode(fp4, dtype=torch.float64), mf.decode(wide, "e5m2"),
                mf.encode(mf.decode(fp8).to(torch.bfloat16), "e2m3", overflow="saturate"),
                mf.quantize_ste(x, "bf16", grad_format=mf.e5m2) * 2,
                mf.quantize(x, "mxfp6-e2m3", axis=0, rounding="stochastic", seed=3),
                mf.quantize(x, "nvfp4", tensor_scale=0.5), mf.quantize(x, "mxfp8-e5m2", scale_rule="ceil"))

    x = torch.randn(96, 64) * 20
    want = fn(x)
    with cpu_kernels(kernels) as calls:
        got = compiled(fn, backend="inductor")(x)
    assert len(got) == len(want) and all(same_bits(a, b) for a, b in zip(got, want))
    assert kernels == "dispatcher" or {"encode", "decode", "quantize_ste", "quantize_blocks"} <= set(calls)


@pytest.mark.parametrize("call, error, match", [
    (lambda x: mf.encode(x, "e4m3", rounding="sideways"), ValueError, "rounding"),
    (lambda x: mf.encode(x, "e4m3", dtype=torch.float8_e5m2), ValueError, "dtype"),
    (lambda x: mf.encode(x[:, :3], "e2m1", dtype=torch.float4_e2m1fn_x2), ValueError, "even"),
    (lambda x: mf.decode(mf.encode(x, "e4m3"), "e4m3", dtype=torch.int32), TypeError, "dtype"),
    (lambda x: mf.decode(mf.encode(x, "e4m3")), TypeError, "fmt"),
    (lambda x: mf.quantize_ste(x, "e4m3", grad_format="e5m2", grad_overflow="wrap"), ValueError, "grad_overflow"),
    (lambda x: mf.quantize(x, "mxfp4", scale_rule="round"), ValueError, "scale_rule"),
    (lambda x: mf.quantize(x, "mxfp4", axis=2), ValueError, "axis")])
def test_compiled_calls_of_the_other_operators_refuse_bad_arguments_while_tracing(call, error, match):
    x = torch.randn(4, 8)
    with pytest.raises(error, match=match):
        call(x)  # eagerly
    with pytest.raises(Exception, match=match):
        compiled(call)(x)
