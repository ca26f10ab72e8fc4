"""quantize, encode and decode of CUDA tensors, on the C++ core compiled for the GPU.

The kernels live in the extension minifloat._cuda_kernels (python/src/cuda/), built only where
CMake found a CUDA compiler. Nothing here imports it until a function needs it, and
`import minifloat` never imports this module: neither needs a GPU, a driver or the CUDA build.

The *_into functions take tensors that are already checked for kind and shape by the caller
(minifloat._ops dispatches to them for CUDA tensors) and check what only they know: every
tensor a contiguous CUDA tensor on one device, of the dtypes the kernels take. They launch on
the current stream of that device (torch.cuda.current_stream(device)) and return at once,
except where a result is read back: statistics, and encode's check for values without a code
(all_finite formats only). Element i of the flat tensor is rounded with element index
index + i, so stochastic rounding gives the CPU's bits whatever the grid.

`format_key` is a Format's `_key` tuple, `options` the tuple of minifloat._ops.rounding_options;
`blocks` and `threads` (0 = automatic) override the grid, for tests.
"""

import importlib

import torch

_FLOAT_DTYPES = {torch.float32: False, torch.float64: True}  # value: is double
_CODE_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _kernels():
    """The extension module; ImportError saying why when this build has none."""
    try:
        return importlib.import_module("minifloat._cuda_kernels")
    except ImportError as e:
        raise ImportError("minifloat was built without its CUDA kernels (minifloat._cuda_kernels: "
                          f"{e}); rebuild with a CUDA compiler installed (docs/cuda.md)") from e


def is_built():
    """True when this installation has the CUDA kernels (needs no GPU or driver)."""
    try:
        _kernels()
    except ImportError:
        return False
    return True


def problem():
    """Why the CUDA kernels cannot run here ('' when they can): not built, or the CUDA runtime's
    error (no driver, no device)."""
    try:
        kernels = _kernels()
    except ImportError as e:
        return str(e)
    return kernels.runtime_problem()


def is_available():
    """True when the CUDA kernels are built and a CUDA device can run them."""
    return problem() == ""


def _device_of(who, tensors):
    """The one CUDA device of `tensors` ((name, tensor) pairs), each checked to be a contiguous
    strided CUDA tensor; TypeError / ValueError naming the argument."""
    device = None
    for name, t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{who}: {name} must be a torch.Tensor, not {type(t).__name__}")
        if t.device.type != "cuda":
            raise TypeError(f"{who}: {name} is a {t.device.type} tensor; expected a CUDA tensor")
        if t.layout != torch.strided or not t.is_contiguous():
            raise ValueError(f"{who}: {name} must be a contiguous (strided) tensor")
        if device is None:
            device = t.device
        elif t.device != device:
            raise ValueError(f"{who}: {name} is on {t.device}, the other operand on {device}")
    return device


def _same_size(who, a_name, a, b_name, b):
    if a.numel() != b.numel():
        raise ValueError(f"{who}: {b_name} has {b.numel()} elements, {a_name} has {a.numel()}")


def _is_double(who, name, t):
    if t.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{who}: {name} has dtype {t.dtype}; expected torch.float32 or torch.float64")
    return _FLOAT_DTYPES[t.dtype]


def _grid(who, blocks, threads):
    for name, value in (("blocks", blocks), ("threads", threads)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{who}: {name} must be an int, not {type(value).__name__}")
    if not 0 <= blocks < 2**31:
        raise ValueError(f"{who}: blocks = {blocks} is outside 0..2**31-1 (0 = automatic)")
    if not 0 <= threads <= 1024:
        raise ValueError(f"{who}: threads = {threads} is outside 0..1024 (0 = automatic)")
    return blocks, threads


def quantize_into(x, out, format_key, options, want_stats=False, *, blocks=0, threads=0):
    """out = x rounded (out may be x itself). x, out: contiguous CUDA float32/float64 tensors of
    one dtype, device and size. Returns None, or with want_stats the counts
    (values, overflows, underflows, nans, infinities), which waits for the stream."""
    who = "minifloat.quantize"
    device = _device_of(who, (("x", x), ("out", out)))
    is_double = _is_double(who, "x", x)
    if out.dtype != x.dtype:
        raise TypeError(f"{who}: out has dtype {out.dtype}, x has {x.dtype}")
    _same_size(who, "x", x, "out", out)
    blocks, threads = _grid(who, blocks, threads)
    kernels = _kernels()
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        return kernels.quantize(x.data_ptr(), out.data_ptr(), x.numel(), is_double, format_key, options,
                                bool(want_stats), stream, blocks, threads)


def encode_into(x, codes, format_key, options, *, blocks=0, threads=0):
    """codes = the codes of x rounded. x: a contiguous CUDA float32/float64 tensor; codes: a
    contiguous integer CUDA tensor of x's size and device whose items have the narrowest size of
    1, 2, 4 or 8 bytes that holds the format's bit width (torch.uint8, int16, int32, int64 hold
    the bits). Returns the flat index of the first value without a code (NaN or Inf into an
    all_finite format), or x.numel() when every value has one; only all_finite formats wait for
    the stream to say so."""
    who = "minifloat.encode"
    device = _device_of(who, (("x", x), ("codes", codes)))
    is_double = _is_double(who, "x", x)
    if codes.dtype not in _CODE_DTYPES:
        raise TypeError(f"{who}: codes has dtype {codes.dtype}; expected an integer dtype")
    _same_size(who, "x", x, "codes", codes)
    blocks, threads = _grid(who, blocks, threads)
    kernels = _kernels()
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        return kernels.encode(x.data_ptr(), codes.data_ptr(), x.numel(), is_double, codes.element_size(),
                              format_key, options, stream, blocks, threads)


def decode_into(codes, out, format_key, *, blocks=0, threads=0):
    """out = the values of integer codes (each item's bits read as unsigned; bits above the
    format's width ignored). codes: a contiguous integer CUDA tensor; out: a contiguous CUDA
    float32/float64 tensor of its size and device."""
    who = "minifloat.decode"
    device = _device_of(who, (("codes", codes), ("out", out)))
    if codes.dtype not in _CODE_DTYPES:
        raise TypeError(f"{who}: codes has dtype {codes.dtype}; expected an integer dtype")
    is_double = _is_double(who, "out", out)
    _same_size(who, "codes", codes, "out", out)
    blocks, threads = _grid(who, blocks, threads)
    kernels = _kernels()
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        kernels.decode(codes.data_ptr(), codes.element_size(), out.data_ptr(), codes.numel(), is_double, format_key,
                       stream, blocks, threads)


def quantize_blocks_into(x, out, geometry, block_key, options, want_stats=False, *, blocks=0, threads=0):
    """out = x fake-quantized to a block format (out may be x itself). x, out: contiguous CUDA
    float32 tensors of one device and size; geometry: (before, length, after) of x's C-order
    shape with the blocks along the middle axis; block_key: a BlockFormat's `_key`; options: the
    options tuple of minifloat.blocks. Returns None, or with want_stats the block statistics tuple
    ((values, overflows, underflows, nans, infinities), blocks, scale_clamped, nan_blocks), which
    waits for the stream (as does NVFP4 without a given tensor scale: it reads the tensor's amax)."""
    who = "minifloat.quantize_blocks"
    device = _device_of(who, (("x", x), ("out", out)))
    if x.dtype != torch.float32 or out.dtype != torch.float32:
        raise TypeError(f"{who}: block formats take float32 CUDA tensors, not {x.dtype} and {out.dtype}")
    _same_size(who, "x", x, "out", out)
    before, length, after = geometry
    if before * length * after != x.numel():
        raise ValueError(f"{who}: geometry {tuple(geometry)} does not hold the {x.numel()} values of x")
    blocks, threads = _grid(who, blocks, threads)
    kernels = _kernels()
    with torch.cuda.device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        return kernels.quantize_blocks(x.data_ptr(), out.data_ptr(), before, length, after, block_key, options,
                                       bool(want_stats), stream, blocks, threads)


def raw_kernels():
    """The extension module itself (pointer-level calls, for tests and benchmarks)."""
    return _kernels()
