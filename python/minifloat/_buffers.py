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


class Operand:
    """A torch tensor or NumPy array seen as a NumPy array (`array`, sharing memory)."""

    def __init__(self, x, who, name="x"):
        if isinstance(x, torch.Tensor):
            if x.device.type != "cpu":
                raise TypeError(f"{who}: {name} is a {x.device.type} tensor; this build of minifloat runs on CPU "
                                f"tensors only (move it with .cpu())")
            if x.layout != torch.strided:
                raise TypeError(f"{who}: {name} has layout {x.layout}; only dense (strided) tensors are supported")
            self.is_torch = True
            self.tensor = x
            # A negative-bit view (torch._neg_view) is read through a resolved copy: writes to it
            # must go back through the tensor (see `aliases`).
            self.aliases = not x.is_neg()
            try:
                self.array = x.detach().resolve_conj().resolve_neg().numpy()
            except TypeError as e:  # a dtype NumPy has no counterpart for (bfloat16, ...)
                raise TypeError(f"{who}: {name} has dtype {x.dtype}, which minifloat does not take here") from e
        elif isinstance(x, np.ndarray):
            self.is_torch = False
            self.tensor = None
            self.array = x
            self.aliases = True
        else:
            raise TypeError(f"{who}: {name} must be a torch.Tensor or a numpy.ndarray, not {type(x).__name__}")
        self.who = who
        self.name = name

    @property
    def dtype(self):
        return self.array.dtype

    def dtype_name(self):
        return str(self.tensor.dtype) if self.is_torch else f"numpy.{self.array.dtype}"

    def require_float(self):
        """True for float64, False for float32; TypeError otherwise."""
        if self.array.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{self.who}: {self.name} has dtype {self.dtype_name()}; expected float32 or float64")
        return FLOAT_DTYPES[self.array.dtype]

    def require_float32(self):
        if self.array.dtype != np.float32:
            raise TypeError(f"{self.who}: {self.name} has dtype {self.dtype_name()}; expected float32")

    def require_integer(self):
        if self.array.dtype.kind not in "iu":
            raise TypeError(f"{self.who}: {self.name} has dtype {self.dtype_name()}; expected an integer dtype")

    def contiguous(self):
        """The values in C order: the array itself when it already is, else a copy."""
        return self.array if self.array.flags.c_contiguous else np.ascontiguousarray(self.array)

    def wrap(self, array):
        """array as the kind of this operand (a tensor shares the array's memory)."""
        return torch.from_numpy(array) if self.is_torch else array


def address(array):
    return array.ctypes.data


def check_index(value, who, name):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{who}: {name} must be an int, not {type(value).__name__}")
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{who}: {name} = {value} is outside 0..2**64-1")
    return value


def lookup(value, names, who, what):
    """The index of a name in one of the extension's name tables."""
    if not isinstance(value, str):
        raise TypeError(f"{who}: {what} must be a str, not {type(value).__name__}")
    try:
        return names.index(value)
    except ValueError:
        raise ValueError(f"{who}: {what}={value!r} is not one of {', '.join(names)}") from None
