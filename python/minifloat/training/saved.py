"""Tensors saved for backward, stored as bit-packed codes of their assigned format.

`SavedTensorStore(mode)` is a context manager around a forward pass
(torch.autograd.graph.saved_tensors_hooks). Every tensor autograd saves for backward goes through
its pack hook:

- a tensor that a rounding site produced (PrecisionModel notes each output of its sites, with
  the site's format in force) and that is unchanged since (same storage, same version, still
  alive) is, in mode "packed", stored as its codes in that format (minifloat.encode) bit-packed
  at the format's width (minifloat.pack) — the values are representable, so decoding gives them
  back bit for bit; in mode "gecko" as a Gecko tensor (minifloat.gecko_compress): sign and the
  format's M mantissa bits per value plus Gecko-coded exponents, exact for the same reason (a value
  of fp(E, M) is a float32 with at most M mantissa bits); in mode "fp32" it is kept as it is;
- anything else (max-pool indices, batch norm's saved mean and inverse deviation, a tensor of a
  disabled site, a non-contiguous view) is kept as it is, and counted as "other";
- a site's output holding a value its format has no code for (a NaN or an infinity in a format
  without them: a diverging step) is kept as it is, in its category, so the backward runs and
  the loss scaler skips the step as it does with mode "fp32".

As without the store, a saved tensor changed in place between the forward and the backward is
refused: unpacking raises torch's RuntimeError ("modified by an inplace operation"), in every
mode (torch does not check the versions of tensors that saved-tensor hooks hold).

Bytes are counted by the hooks, not computed from bit widths: a stored object adds its bytes
when packed and subtracts them when autograd frees it, so `peak` is the measured high-water mark
of live saved bytes per category (activation, weight, other). A tensor saved twice (a convolution
and a ReLU saving the same map) is stored once while the first copy is alive. `fp32_peak` is the
high-water mark per category that the same saved tensors would have held as float32, counted
alongside in the same run.
"""

from __future__ import annotations

import weakref

import torch

from .._formats import Format
from .._ops import decode, encode, gecko_compress, gecko_decompress, pack, unpack

MODES = ("fp32", "packed", "gecko")
CATEGORIES = ("activation", "weight", "other")


class _Stored:
    __slots__ = ("tensor", "words", "fmt", "shape", "dtype", "numel", "nbytes", "category", "source", "version",
                 "__weakref__")


class SavedTensorStore:
    def __init__(self, mode: str = "packed"):
        if mode not in MODES:
            raise ValueError(f"minifloat.training.SavedTensorStore: mode {mode!r} is not one of {', '.join(MODES)}")
        self.mode = mode
        self._notes = {}  # (data_ptr, numel) -> (weakref to the tensor, version, format, category)
        # (data_ptr, shape, strides, dtype, version) -> (weakref to the tensor, weakref to the
        # _Stored holding it): the same memory seen the same way (a tensor and its transpose share
        # a data_ptr). A hit needs the tensor alive: once it dies its memory may hold another tensor.
        self._cache = {}
        self.live = dict.fromkeys(CATEGORIES, 0)
        self.peak = dict.fromkeys(CATEGORIES, 0)
        self.live_total = self.peak_total = 0
        self.fp32_live = dict.fromkeys(CATEGORIES, 0)  # the same stored tensors as float32
        self.fp32_peak = dict.fromkeys(CATEGORIES, 0)
        self.packed_count = 0
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._active = False  # notes are taken only inside `with store:` (not in evaluation passes)

    # -- notes from the rounding sites ------------------------------------------------------------
    def note(self, t: torch.Tensor, fmt: Format | None, category: str, version_offset: int = 0) -> None:
        """t holds values of fmt now; version_offset: how many times autograd will still bump t's
        version before anyone saves it (1 for a tensor a custom Function marked dirty)."""
        if not self._active:
            return
        self._notes[(t.data_ptr(), t.numel())] = (weakref.ref(t), t._version + version_offset, fmt, category)

    def _lookup(self, t: torch.Tensor):
        entry = self._notes.get((t.data_ptr(), t.numel()))
        if entry is None:
            return None
        ref, version, fmt, category = entry
        owner = ref()
        # Alive (so its storage is not reused by another tensor) and unmodified since rounding.
        if owner is None or owner._version != version or t._version != version:
            return None
        return fmt, category

    # -- the hooks -------------------------------------------------------------------------------
    def _pack(self, t: torch.Tensor):
        key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, t._version)
        hit = self._cache.get(key)
        if hit is not None:
            original, held = hit[0](), hit[1]()
            if original is not None and held is not None:
                return held
        s = _Stored()
        s.shape, s.dtype, s.numel = t.shape, t.dtype, t.numel()
        # What torch checks for the tensors it saves itself: the version at save time, compared
        # when the backward unpacks it (a weak reference: the store must not keep it alive).
        s.source, s.version = weakref.ref(t), t._version
        found = self._lookup(t) if (t.dtype == torch.float32 and t.is_contiguous()) else None
        s.category = found[1] if found is not None else "other"
        fp32_bytes = t.numel() * t.element_size()
        s.fmt, s.words, s.tensor = None, None, t
        s.nbytes = fp32_bytes
        if found is not None and found[0] is not None and self.mode != "fp32" and self._codable(t, found[0]):
            s.fmt, s.tensor = found[0], None
            if self.mode == "packed":
                s.words = pack(encode(t.detach(), s.fmt), s.fmt.bit_width)
            else:
                s.words = gecko_compress(t.detach(), mantissa_bits=s.fmt.mantissa_bits, rounding="toward_zero")
            s.nbytes = s.words.numel()
            self.packed_count += 1
        self._add(s.category, s.nbytes, fp32_bytes)
        weakref.finalize(s, self._add, s.category, -s.nbytes, -fp32_bytes)
        self._cache[key] = (weakref.ref(t), weakref.ref(s))
        return s

    @staticmethod
    def _codable(t: torch.Tensor, fmt: Format) -> bool:
        """Whether fmt has a code for every value of t: a NaN or an infinity that the format lacks
        (a diverging forward) keeps t as float32 rather than failing inside autograd's pack hook."""
        return fmt.specials == "ieee" or bool(torch.isfinite(t).all())

    def _unpack(self, s: _Stored) -> torch.Tensor:
        source = s.tensor if s.tensor is not None else s.source()
        if source is not None and source._version != s.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{source.type()} {list(source.shape)}] is at version {source._version}; expected version "
                f"{s.version} instead (minifloat.training.SavedTensorStore checks what torch checks without it)")
        if s.tensor is not None:
            return s.tensor
        if self.mode == "gecko":
            return gecko_decompress(s.words, s.shape)
        codes = unpack(s.words, s.fmt.bit_width, s.numel)
        return decode(codes, s.fmt).reshape(s.shape)

    def _add(self, category: str, nbytes: int, fp32_bytes: int) -> None:
        self.live[category] += nbytes
        self.peak[category] = max(self.peak[category], self.live[category])
        self.live_total += nbytes
        self.peak_total = max(self.peak_total, self.live_total)
        self.fp32_live[category] += fp32_bytes
        self.fp32_peak[category] = max(self.fp32_peak[category], self.fp32_live[category])

    def reset_peaks(self) -> None:
        self.peak = dict(self.live)
        self.peak_total, self.fp32_peak = self.live_total, dict(self.fp32_live)

    def __enter__(self):
        self._active = True
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        # Notes are for the forward pass in the context; stored objects outlive it until backward.
        self._active = False
        self._notes.clear()
        self._cache = {k: r for k, r in self._cache.items() if r[0]() is not None and r[1]() is not None}
        return self._hooks.__exit__(*exc)
