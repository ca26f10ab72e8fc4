"""How tensors and arrays reach the C++ kernels: checks, C-order buffers and their addresses.

Torch CPU tensors are viewed as NumPy arrays without a copy (tensor.detach().numpy()); a
tensor or array that is not C-contiguous is copied to C order first, so element i of a kernel
is element i of the flattened (row-major) tensor whatever its strides. Every check happens
before any kernel runs, so an error leaves the caller's data as it was.
"""

import numpy as np
import torch

FLOAT_DTYPES = {np.dtype(np.float32): False, np.dtype(np.float64): True}  # value: is double


def threads():
    """The thread count of the kernels: torch's intra-op thread count (torch.set_num_threads)."""
    return max(1, torch.get_num_threads())


_CODE_VIEWS = {1: (torch.uint8, np.uint8), 2: (torch.int16, np.uint16)}


class Operand:
    """A torch tensor or NumPy array seen as a NumPy array (`array`, sharing memory).

    A tensor or array of a low-precision float dtype that minifloat knows as a format (torch's
    float8 types, bfloat16 and float16, ml_dtypes' types: minifloat.format_of) is seen as its
    codes: `array` is then an unsigned integer view of the same memory and `codes_format` the
    format. A NumPy array in non-native byte order is read through a native copy (`contiguous`)."""

    def __init__(self, x, who, name="x"):
        from .interop import format_of, packed_format_of  # interop imports _formats, which imports this module
        self.codes_format = None
        self.codes_per_byte = 1
        if isinstance(x, torch.Tensor):
            if x.device.type != "cpu":
                why = "this function runs on CPU tensors only"
                if x.device.type == "cuda":
                    from . import _cuda
                    why = _cuda.problem() or why
                raise TypeError(f"{who}: {name} is a {x.device.type} tensor and {why} (move it with .cpu(); "
                                "docs/cuda.md)")
            if x.layout != torch.strided:
                raise TypeError(f"{who}: {name} has layout {x.layout}; only dense (strided) tensors are supported")
            self.is_torch = True
            self.tensor = x
            # A negative-bit view (torch._neg_view) is read through a resolved copy: writes to it
            # must go back through the tensor (see `aliases`).
            self.aliases = not x.is_neg()
            fmt = format_of(x.dtype) if x.dtype not in (torch.float32, torch.float64) else None
            packed = packed_format_of(x.dtype)
            if packed is not None:  # torch.float4_e2m1fn_x2: the bytes, two codes each
                self.codes_format, self.codes_per_byte = packed
                self.array = x.detach().view(torch.uint8).numpy()
            elif fmt is not None:
                self.codes_format = fmt
                self.array = x.detach().view(_CODE_VIEWS[x.element_size()][0]).numpy().view(
                    _CODE_VIEWS[x.element_size()][1])
            else:
                try:
                    self.array = x.detach().resolve_conj().resolve_neg().numpy()
                except TypeError as e:  # a dtype NumPy has no counterpart for
                    raise TypeError(f"{who}: {name} has dtype {x.dtype}, which minifloat does not take here") from e
        elif isinstance(x, np.ndarray):
            self.is_torch = False
            self.tensor = None
            self.aliases = True
            fmt = format_of(x.dtype) if x.dtype.kind in "fV" and x.dtype.itemsize <= 2 else None  # float16, ml_dtypes
            if fmt is not None:
                self.codes_format = fmt
                self.array = x.view(_CODE_VIEWS[x.dtype.itemsize][1])
            else:
                self.array = x
        else:
            raise TypeError(f"{who}: {name} must be a torch.Tensor or a numpy.ndarray, not {type(x).__name__}")
        self.who = who
        self.name = name

    @property
    def dtype(self):
        """The element type in native byte order (what `contiguous` returns)."""
        d = self.array.dtype
        return d if d.isnative else d.newbyteorder("=")

    def dtype_name(self):
        if self.is_torch:
            return str(self.tensor.dtype)
        return f"numpy.{self.array.dtype}" if self.array.dtype.kind != "V" else str(self.array.dtype)

    def require_float(self):
        """True for float64, False for float32; TypeError otherwise."""
        if self.codes_format is not None or self.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{self.who}: {self.name} has dtype {self.dtype_name()}; expected float32 or float64")
        return FLOAT_DTYPES[self.dtype]

    def require_float32(self):
        if self.codes_format is not None or self.dtype != np.float32:
            raise TypeError(f"{self.who}: {self.name} has dtype {self.dtype_name()}; expected float32")

    def require_integer(self):
        if self.codes_format is None and self.array.dtype.kind not in "iu":
            raise TypeError(f"{self.who}: {self.name} has dtype {self.dtype_name()}; expected an integer dtype")

    def contiguous(self):
        """The values in C order and native byte order: the array itself when it already is, else a copy."""
        a = self.array
        if a.flags.c_contiguous and a.dtype.isnative:
            return a
        return np.ascontiguousarray(a, dtype=self.dtype).reshape(a.shape)  # ascontiguousarray makes 0-d 1-d

    def wrap(self, array):
        """array as the kind of this operand (a tensor shares the array's memory)."""
        return torch.from_numpy(array) if self.is_torch else array

    def check_writable(self):
        """ValueError when the values cannot be written in place: read-only, an inference tensor
        outside inference mode, or elements that share memory."""
        if not self.array.flags.writeable:
            raise ValueError(f"{self.who}: {self.name} is read-only")
        if self.is_torch and self.tensor.is_inference() and not torch.is_inference_mode_enabled():
            raise ValueError(f"{self.who}: {self.name} is an inference tensor, which can only be written inside "
                             "torch.inference_mode()")
        if overlaps_itself(self.array):
            raise ValueError(f"{self.who}: {self.name} has elements that share memory (an expanded tensor, a "
                             "broadcast array or overlapping strides); write into a tensor with one location per element")


def overlaps_itself(array):
    """True when two elements of array may share memory (zero or overlapping strides). Dimensions
    sorted by stride must each step over the whole extent of the ones below; a layout that passes
    is free of overlap, and the rare non-overlapping layout that fails is refused as if it overlapped."""
    if array.size <= 1:
        return False
    dims = sorted((abs(stride), size) for stride, size in zip(array.strides, array.shape) if size > 1)
    extent = array.itemsize
    for stride, size in dims:
        if stride < extent:
            return True
        extent = stride * (size - 1) + extent
    return False


def address(array):
    return array.ctypes.data


def lookup(value, names, who, what):
    """The index of a name in one of the extension's name tables."""
    if not isinstance(value, str):
        raise TypeError(f"{who}: {what} must be a str, not {type(value).__name__}")
    try:
        return names.index(value)
    except ValueError:
        raise ValueError(f"{who}: {what}={value!r} is not one of {', '.join(names)}") from None
