"""Argument checks shared by the package's modules: integers with a range, element indices.

No dependency inside the package, so that every module (formats, buffers, operators) may use it.
"""

import operator

import numpy as np


def as_int(value, who, name, low, high):
    """value as a Python int in low..high: Python and NumPy integers (anything with __index__ but
    bool); TypeError or ValueError naming the argument otherwise."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{who}: {name} must be an int, not {type(value).__name__}")
    value = operator.index(value)
    if not low <= value <= high:
        raise ValueError(f"{who}: {name} = {value} is outside {low}..{high}")
    return value


def check_index(value, who, name):
    """An element index or seed: an int in 0..2**64-1."""
    return as_int(value, who, name, 0, (1 << 64) - 1)
