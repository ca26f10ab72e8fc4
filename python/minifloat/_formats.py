"""Formats: minifloat.format(E, M, bias=None, subnormals=True, specials="ieee") and the named ones.

A Format is an immutable value (hashable, picklable, its repr is the call that builds it). Every
check is the C++ library's (minifloat::format::problem); names are looked up in the tables the
extension exports, so a format or name added to the headers appears here without a Python edit.
"""

from . import _core
from ._arguments import as_int

SPECIALS = tuple(_core.specials_names)


def _integer(value, what):
    """value as a C int (Python or NumPy integer); the format's own check judges its range."""
    return as_int(value, "minifloat.format", what, -(1 << 31), (1 << 31) - 1)


class Format:
    """fp(E, M, bias): a sign bit, E exponent bits, M mantissa bits (docs/formats.md)."""

    __slots__ = ("_key", "_name", "_constants")

    def __init__(self, exponent_bits, mantissa_bits, bias=None, subnormals=True, specials="ieee"):
        e = _integer(exponent_bits, "exponent_bits")
        m = _integer(mantissa_bits, "mantissa_bits")
        if not isinstance(subnormals, bool):
            raise TypeError(f"minifloat.format: subnormals must be a bool, not {type(subnormals).__name__}")
        if not isinstance(specials, str):
            raise TypeError(f"minifloat.format: specials must be a str, not {type(specials).__name__}")
        if specials not in SPECIALS:
            raise ValueError(f"minifloat.format: specials={specials!r} is not one of {', '.join(SPECIALS)}")
        if not 1 <= e <= 11:
            raise ValueError(f"minifloat.format: exponent_bits = {e} is outside 1..11")
        b = (1 << (e - 1)) - 1 if bias is None else _integer(bias, "bias")
        key = (e, m, b, subnormals, SPECIALS.index(specials))
        problem = _core.format_problem(key)
        if problem:
            raise ValueError(f"minifloat.format: {problem}")
        object.__setattr__(self, "_key", key)
        # Plain attributes, so that torch.compile reads them without calling into the extension.
        object.__setattr__(self, "_name", _core.format_string(key))
        object.__setattr__(self, "_constants", _core.format_constants(key))

    @classmethod
    def _from_key(cls, key):
        e, m, b, subnormals, specials = key
        return cls(e, m, b, subnormals, SPECIALS[specials])

    exponent_bits = property(lambda self: self._key[0])
    mantissa_bits = property(lambda self: self._key[1])
    bias = property(lambda self: self._key[2])
    subnormals = property(lambda self: self._key[3])
    specials = property(lambda self: SPECIALS[self._key[4]])

    @property
    def bit_width(self):
        """Bits per code, as the C++ format counts them (E8M0, which has no sign bit: 8)."""
        return self._constants["bit_width"]

    def constants(self):
        """emax, emin, max_finite, min_normal, min_subnormal, epsilon, overflow_threshold, ... (exact)."""
        return dict(self._constants)

    def __getattr__(self, name):
        constants = object.__getattribute__(self, "_constants")
        if name in constants:
            return constants[name]
        raise AttributeError(f"minifloat.Format has no attribute {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError("minifloat.Format is immutable")

    def __delattr__(self, name):
        raise AttributeError("minifloat.Format is immutable")

    def __eq__(self, other):
        return isinstance(other, Format) and self._key == other._key

    def __hash__(self):
        return hash(("minifloat.Format", self._key))

    def __reduce__(self):
        return (Format, (self.exponent_bits, self.mantissa_bits, self.bias, self.subnormals, self.specials))

    def __repr__(self):
        return (f"minifloat.format({self.exponent_bits}, {self.mantissa_bits}, bias={self.bias}, "
                f"subnormals={self.subnormals}, specials={self.specials!r})")

    def __str__(self):
        return self._name


format = Format  # the spelling of the issue and of docs/python.md: minifloat.format(5, 2)

#: The named formats of format.hpp that float32 rounds to (binary32, binary16, bfloat16, e5m2, e4m3,
#: fp_6_9_0, fp_4_3_4, fp_5_2_0, e4m3fnuz, e5m2fnuz and the OCP MX elements e2m3, e3m2, e2m1, int8_mx).
#: E8M0 (parse_format("e8m0")) is not among them only because its smallest value 2^-127 is below
#: float's normal range; float32 data still rounds to it, through the core's double path.
NAMED = {name: Format._from_key(key) for name, key in _core.named_formats}


def parse_format(name):
    """The format a name stands for, as minifloat::parse_format reads it (fp32, binary32, fp16,
    binary16, half, bf16, bfloat16, e4m3, e5m2, e8m0, paper_fp(e,m,b), ieee(E,M,bias=B), ... and
    whatever str(fmt) prints), or a key of NAMED (fp_4_3_4)."""
    if not isinstance(name, str):
        raise TypeError(f"minifloat.parse_format: a format name must be a str, not {type(name).__name__}")
    if name in NAMED:
        return NAMED[name]
    return Format._from_key(_core.parse_format(name))


def as_format(fmt, who):
    """A Format from a Format or a name (parse_format); TypeError for anything else."""
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str):
        return parse_format(fmt)
    raise TypeError(f"{who}: fmt must be a minifloat.Format or a format name, not {type(fmt).__name__}")
