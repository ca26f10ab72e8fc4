"""Drop-in replacements for other low-precision libraries' entry points."""

from . import qtorch

__all__ = ["qtorch"]
