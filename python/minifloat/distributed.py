"""Low-precision gradient communication for torch.distributed: DDP communication hooks.

`compress_hook(fmt, ...)` returns a hook for `DistributedDataParallel.register_comm_hook` that
sends every gradient bucket as codes of `fmt` (a scalar format, bit-packed at its width, or a
block format, element codes plus scales as the block codec stores them), sums the decoded values
in fp32 and optionally rounds the average back to `fmt`. `compress_wrapper(fmt, hook)` rounds a
bucket to `fmt` around another hook, as torch's fp16_compress_wrapper does. Every rounding, code,
packing and block scale is the C++ library's: a bucket's sending (divide, add the residual, round
with counts, encode) and receiving (decode every rank's codes and add them) are one pass each of
the extension (python/src/distributed.cpp); this module moves the bytes. docs/distributed.md
states every rule: the wire layout, the seed of each rounding, the NaN rule and what is counted.
"""

from __future__ import annotations

import numbers
import sys

import torch
import torch.distributed as dist

from . import _core, _ops, blocks
from ._buffers import threads
from ._formats import Format, as_format

__all__ = ["CompressionState", "compress_hook", "compress_wrapper"]

_COUNTS = ("values", "overflows", "underflows", "nans", "infinities", "nan_blocks", "scale_clamped")


def _comm_format(fmt, who):
    """fmt as a Format or a BlockFormat (block names first: 'mxfp4' is a block format)."""
    if isinstance(fmt, (Format, blocks.BlockFormat)):
        f = fmt
    elif isinstance(fmt, str):
        f = blocks.NAMED_BLOCKS.get(fmt, blocks.NAMED_BLOCKS.get(fmt.replace("_", "-")))
        if f is None:
            f = as_format(fmt, who)
    else:
        raise TypeError(f"{who}: fmt must be a minifloat Format, BlockFormat or a format name, not {type(fmt).__name__}")
    if isinstance(f, Format) and f.specials == "unsigned_exponent":
        raise ValueError(f"{who}: fmt={f} has no sign bit and cannot carry gradients")
    return f


def _seed(seed, who):
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{who}: seed must be an integer, not {type(seed).__name__}")
    if not 0 <= int(seed) < 1 << 64:
        raise ValueError(f"{who}: seed = {int(seed)} is outside [0, 2**64)")
    return int(seed)


def _flag(value, who, name):
    if not isinstance(value, bool):
        raise TypeError(f"{who}: {name} must be a bool, not {type(value).__name__}")
    return value


class CompressionState:
    """What a compress_hook or compress_wrapper knows and has counted.

    step: backward passes completed (the step key of the stochastic draws). state_dict() and
    load_state_dict() save and restore it with the seed, the residuals and the counters, so a
    resumed run draws and adds where it stopped. Accounting, per rank (this process):
      bytes_sent_step / fp32_bytes_step: bytes this rank handed to the collective in the last
        completed step, and the bytes plain fp32 DDP hands to its all-reduce for the same buckets;
      bytes_sent_total / fp32_bytes_total: the same summed over every step;
      bucket_stats[i]: the counts of bucket i's encoding in the last step (values, overflows,
        underflows, nans, infinities; block formats also nan_blocks, scale_clamped);
      total_stats: those counts summed over buckets and steps.
    compress_wrapper's states count no bytes (the wrapped hook does the communication)."""

    def __init__(self, fmt, rounding, overflow, scale_rule, seed, round_back, error_feedback, faithful_sum,
                 process_group, counts_bytes):
        self.fmt, self.rounding, self.overflow, self.scale_rule = fmt, rounding, overflow, scale_rule
        self.seed, self.round_back, self.error_feedback, self.faithful_sum = seed, round_back, error_feedback, faithful_sum
        self.process_group = process_group
        self.step = 0
        self.residuals = {}  # bucket index -> (layout of the bucket, fp32 residual)
        self.bytes_sent_step = self.fp32_bytes_step = 0
        self.bytes_sent_total = self.fp32_bytes_total = 0
        self.counts_bytes = counts_bytes
        self.bucket_stats = {}
        self.total_stats = dict.fromkeys(_COUNTS, 0)
        self._open = {"bytes": 0, "fp32": 0, "stats": {}}
        self._codecs = {}  # bucket index -> the wire codec with its buffers, kept from step to step

    @property
    def is_block(self):
        return isinstance(self.fmt, blocks.BlockFormat)

    def group(self):
        return self.process_group if self.process_group is not None else dist.group.WORLD

    def rank_and_size(self):
        g = self.group()
        return dist.get_rank(g), dist.get_world_size(g)

    # Seeds: element i of bucket b draws from (key, i), the key folded from the user's seed by
    # minifloat.fold_seed (C++ minifloat::fold_seed). A rank's encoding folds its rank;
    # roundings that every rank repeats identically (round back, the faithful ring's hops) fold
    # world_size + k, a value no rank has, so they never share a stream with a rank's encoding.
    def send_seed(self, step, rank, bucket_index):
        return _ops.fold_seed(self.seed, step, rank, bucket_index)

    def shared_seed(self, step, world_size, k, bucket_index):
        return _ops.fold_seed(self.seed, step, world_size + k, bucket_index)

    def _record(self, bucket_index, counts, sent, fp32):
        self._open["stats"][bucket_index] = counts
        self._open["bytes"] += sent
        self._open["fp32"] += fp32
        for k, v in counts.items():
            self.total_stats[k] += v

    def _end_step(self):
        self.bucket_stats = self._open["stats"]
        if self.counts_bytes:
            self.bytes_sent_step, self.fp32_bytes_step = self._open["bytes"], self._open["fp32"]
            self.bytes_sent_total += self.bytes_sent_step
            self.fp32_bytes_total += self.fp32_bytes_step
        self._open = {"bytes": 0, "fp32": 0, "stats": {}}
        self.step += 1

    def accounting(self):
        """The counters as one dict (what the trainer writes)."""
        return {"step": self.step, "bytes_sent_step": self.bytes_sent_step, "fp32_bytes_step": self.fp32_bytes_step,
                "bytes_sent_total": self.bytes_sent_total, "fp32_bytes_total": self.fp32_bytes_total,
                **{f"total_{k}": v for k, v in self.total_stats.items()}}

    def _codec(self, bucket_index, n):
        codec = self._codecs.get(bucket_index)
        if codec is None or codec.n != n:
            codec = self._codecs[bucket_index] = _codec(self.fmt, n)
        return codec

    def _options_key(self):
        return {"format": str(self.fmt), "rounding": self.rounding, "overflow": self.overflow,
                "scale_rule": self.scale_rule, "round_back": self.round_back, "error_feedback": self.error_feedback,
                "faithful_sum": self.faithful_sum}

    def state_dict(self):
        """What a checkpoint needs to resume the hook bit for bit: the step (the draws' step key),
        the seed, the error-feedback residuals (per bucket: its element counts and the fp32
        residual, copied), the byte counters and the counts, and the options they were made
        with. Plain ints, strings, tuples and tensors (torch.save / torch.load(weights_only=True))."""
        return {"options": self._options_key(), "seed": self.seed, "step": self.step,
                "residuals": {index: {"numels": _numels(layout) if layout[:1] != ("restored",) else layout[1],
                                      "residual": residual.clone()}
                              for index, (layout, residual) in self.residuals.items()},
                "bytes_sent_step": self.bytes_sent_step, "fp32_bytes_step": self.fp32_bytes_step,
                "bytes_sent_total": self.bytes_sent_total, "fp32_bytes_total": self.fp32_bytes_total,
                "bucket_stats": {i: dict(c) for i, c in self.bucket_stats.items()},
                "total_stats": dict(self.total_stats)}

    def load_state_dict(self, state_dict):
        """Restores what state_dict() returned (from a hook made with the same format and options;
        ValueError naming the option otherwise). Restored residuals apply to the bucket of the same
        index whose parameters have the same element counts in order (DDP's parameters are new
        objects after a restart)."""
        who = "minifloat.distributed.CompressionState.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(f"{who}: state_dict must be a dict, not {type(state_dict).__name__}")
        missing = [k for k in ("options", "seed", "step", "residuals", "bytes_sent_step", "fp32_bytes_step",
                               "bytes_sent_total", "fp32_bytes_total", "bucket_stats", "total_stats")
                   if k not in state_dict]
        if missing:
            raise ValueError(f"{who}: state_dict lacks {', '.join(missing)}")
        mine = self._options_key()
        for name, value in state_dict["options"].items():
            if mine.get(name) != value:
                raise ValueError(f"{who}: the checkpoint's {name} is {value!r}, this hook's is {mine.get(name)!r}")
        residuals = {}
        for index, entry in state_dict["residuals"].items():
            residual = entry["residual"]
            if not isinstance(residual, torch.Tensor) or residual.dtype != torch.float32 or residual.dim() != 1:
                raise ValueError(f"{who}: the residual of bucket {index} is not a 1-D float32 tensor")
            residuals[int(index)] = (("restored", tuple(entry["numels"])), residual.detach().clone().contiguous())
        self.seed = _seed(state_dict["seed"], who)
        self.step = int(state_dict["step"])
        self.residuals = residuals
        self.bytes_sent_step, self.fp32_bytes_step = int(state_dict["bytes_sent_step"]), int(state_dict["fp32_bytes_step"])
        self.bytes_sent_total = int(state_dict["bytes_sent_total"])
        self.fp32_bytes_total = int(state_dict["fp32_bytes_total"])
        self.bucket_stats = {int(i): dict(c) for i, c in state_dict["bucket_stats"].items()}
        self.total_stats = dict.fromkeys(_COUNTS, 0) | dict(state_dict["total_stats"])
        self._open = {"bytes": 0, "fp32": 0, "stats": {}}

    def _round(self, x, seed, out=None):
        """x rounded to the format (fake-quantized fp32), with this state's options."""
        if self.is_block:
            return blocks.quantize_blocks(x, self.fmt, rounding=self.rounding, scale_rule=self.scale_rule,
                                          overflow=self.overflow, seed=seed, out=out)
        return _ops.quantize(x, self.fmt, self.rounding, self.overflow, seed=seed, out=out)


def _stats_dict(st):
    if isinstance(st, blocks.BlockStats):
        e = st.elements
        return {"values": e.values, "overflows": e.overflows, "underflows": e.underflows, "nans": e.nans,
                "infinities": e.infinities, "nan_blocks": st.nan_blocks, "scale_clamped": st.scale_clamped}
    return {"values": st.values, "overflows": st.overflows, "underflows": st.underflows, "nans": st.nans,
            "infinities": st.infinities}


def _bucket_buffer(bucket, who):
    buffer = bucket.buffer()
    if buffer.dtype != torch.float32 or buffer.device.type != "cpu":
        raise TypeError(f"{who}: gradient buckets must be float32 CPU tensors, got {buffer.dtype} on "
                        f"{buffer.device.type}")
    return buffer


def _layout(bucket):
    """What identifies a bucket's content across steps (DDP rebuilds its buckets once, after the
    first step, so index i may hold other parameters from then on)."""
    try:
        return tuple((id(p), p.numel()) for p in bucket.parameters())
    except (AttributeError, RuntimeError):
        return (bucket.buffer().numel(),)


def _same_layout(kept, layout):
    """A kept residual applies to this bucket: the same parameters, or (restored by
    load_state_dict, where parameter identities are new) the same element counts in order."""
    if kept == layout:
        return True
    return isinstance(kept, tuple) and kept[:1] == ("restored",) and kept[1] == _numels(layout)


def _numels(layout):
    return tuple(entry[1] if isinstance(entry, tuple) else entry for entry in layout)


# -- wire codecs: one rank's payload as a 1-D uint8 tensor, and back ------------------------------

_CODE_DTYPES = {8: torch.uint8, 16: torch.int16, 32: torch.int32}  # what minifloat.encode returns


def _ptr(t):
    return 0 if t is None else t.data_ptr()


class _ScalarCodec:
    """Codes of fmt bit-packed at fmt.bit_width (minifloat.pack's stream of little-endian 32-bit
    words). For widths of 8, 16 and 32 bits those are the codes' own little-endian bytes, which a
    little-endian host sends as they are (the same bytes, without pack's padding to a whole
    32-bit word). A format without a NaN code (all_finite, e2m1, ...) cannot carry a non-finite value:
    its payload ends with one byte, 1 when this rank's bucket held one (its codes are then sent as
    the codes of the bucket with those values zeroed, and every receiver reads the rank's whole
    contribution as NaN), else 0.

    The sender's work (divide, add the residual, round with counts, write the codes, keep the new
    residual) is one pass of the extension (_core.comm_send) over the bucket; so is the receiver's
    (_core.comm_receive: decode every rank's codes and add them in rank order, into the bucket).
    The payload and gather buffers are kept from step to step."""

    def __init__(self, fmt, n):
        self.fmt, self.n, self.bits = fmt, n, fmt.bit_width
        self.whole_bytes = self.bits in _CODE_DTYPES and sys.byteorder == "little"
        self.packed_bytes = n * self.bits // 8 if self.whole_bytes else 4 * -(-(n * self.bits) // 32)
        self.has_flag = not fmt.has_nan
        self.size = self.packed_bytes + (1 if self.has_flag else 0)
        self.code_bytes = self.bits // 8 if self.whole_bytes else 4  # other widths: 32-bit codes, then pack
        self.payload = torch.empty(self.size, dtype=torch.uint8)
        self.codes = None if self.whole_bytes else torch.empty(n, dtype=torch.int32)
        self.gathered = None

    def gather_buffer(self, world_size):
        if self.gathered is None or self.gathered.numel() != world_size * self.size:
            self.gathered = torch.empty(world_size * self.size, dtype=torch.uint8)
        return self.gathered

    def send(self, flat, world_size, residual_in, residual_out, state, seed):
        """The payload of flat / world_size (+ residual_in), its counts; residual_out gets the
        rounding's error (zero where it is not finite, and everywhere when the rank is flagged)."""
        opts = (_ops.ROUNDING.index(state.rounding), _ops.OVERFLOW.index(state.overflow), 0, seed, 0)
        codes = self.payload if self.whole_bytes else self.codes
        *counts, nonfinite = _core.comm_send(flat.data_ptr(), self.n, float(world_size), _ptr(residual_in),
                                             _ptr(residual_out), codes.data_ptr(), self.code_bytes, self.fmt._key,
                                             opts, threads())
        if not self.whole_bytes:
            self.payload[:self.packed_bytes] = _ops.pack(codes, self.bits)
        if self.has_flag:
            flag = 1 if nonfinite else 0
            self.payload[self.packed_bytes] = flag
            if flag and residual_out is not None:
                residual_out.zero_()  # the rank's whole contribution reads as NaN: no error to keep
        return self.payload, dict(zip(_COUNTS, counts))

    def receive(self, gathered, world_size, out):
        """out = the fp32 sum, in rank order, of every rank's decoded values."""
        per_rank = gathered.view(world_size, self.size)
        flagged = self.has_flag and bool(per_rank[:, self.packed_bytes].any())
        if self.whole_bytes and not self.has_flag:
            codes = gathered
        elif flagged:
            codes = gathered  # not read: every value is NaN
        elif self.whole_bytes:
            codes = per_rank[:, :self.packed_bytes].contiguous()
        else:
            codes = torch.stack([_ops.unpack(per_rank[r, :self.packed_bytes], self.bits, self.n).to(torch.int32)
                                 for r in range(world_size)])
        _core.comm_receive(codes.data_ptr(), self.code_bytes, self.n, world_size, flagged, out.data_ptr(),
                           self.fmt._key, threads())

    def decode(self, payload):
        codes = payload[:self.packed_bytes]
        codes = codes.view(_CODE_DTYPES[self.bits]) if self.whole_bytes else _ops.unpack(codes, self.bits, self.n)
        values = _ops.decode(codes, self.fmt)
        if self.has_flag and int(payload[self.packed_bytes]) != 0:
            values.fill_(float("nan"))
        return values

    def decode_all(self, gathered, world_size):
        """Every rank's values, (world_size, n) (the faithful ring sum adds them itself)."""
        per_rank = gathered.view(world_size, self.size)
        return torch.stack([self.decode(per_rank[r]) for r in range(world_size)])


class _BlockCodec:
    """encode_blocks of the flat bucket (blocks of block_size consecutive elements; the last one
    shorter): element codes as the codec stores them (4-bit: two a byte; 8-bit: a byte each; other
    widths bit-packed at the element width with minifloat.pack), then the scale codes (a byte per
    block), then for a per-tensor-scaled format (NVFP4) its fp32 scale (4 bytes, little-endian).
    Sending and receiving are one pass each of the extension (_core.comm_send_blocks,
    _core.comm_receive_blocks), as for scalar formats."""

    def __init__(self, fmt, n):
        self.fmt, self.n = fmt, n
        self.width = fmt.element.bit_width
        if fmt.packed:
            self.element_bytes = (n + 1) // 2
        elif self.width == 8:
            self.element_bytes = n
        else:
            self.element_bytes = 4 * -(-(n * self.width) // 32)
        self.bit_packed = not fmt.packed and self.width != 8
        self.scale_count = -(-n // fmt.block_size)
        self.has_tensor_scale = fmt.scaling != "e8m0"
        self.size = self.element_bytes + self.scale_count + (4 if self.has_tensor_scale else 0)
        self.payload = torch.empty(self.size, dtype=torch.uint8)
        self.codes = torch.empty(n, dtype=torch.uint8) if self.bit_packed else None
        self.gathered = None

    gather_buffer = _ScalarCodec.gather_buffer

    def send(self, flat, world_size, residual_in, residual_out, state, seed):
        opts = blocks._options("minifloat.distributed", self.fmt, state.rounding, state.scale_rule, state.overflow,
                               seed, 0, 0, None)
        elements = self.codes if self.bit_packed else self.payload
        scales = self.payload[self.element_bytes:]
        tensor_scale, raw = _core.comm_send_blocks(flat.data_ptr(), self.n, float(world_size), _ptr(residual_in),
                                                   _ptr(residual_out), elements.data_ptr(), self.fmt.packed,
                                                   scales.data_ptr(), self.fmt._key, opts, threads())
        if self.bit_packed:
            self.payload[:self.element_bytes] = _ops.pack(self.codes, self.width)
        if self.has_tensor_scale:
            self.payload[-4:] = torch.tensor([tensor_scale], dtype=torch.float32).view(torch.uint8)
        return self.payload, _stats_dict(blocks._stats(raw))

    def _parts(self, gathered, world_size):
        """Each rank's element codes (a byte each, or packed nibbles), scale codes and tensor scale."""
        per_rank = gathered.view(world_size, self.size)
        if self.bit_packed:
            elements = [_ops.unpack(per_rank[r, :self.element_bytes], self.width, self.n).to(torch.uint8)
                        for r in range(world_size)]
        else:
            elements = [per_rank[r, :self.element_bytes] for r in range(world_size)]
        scales = [per_rank[r, self.element_bytes:self.element_bytes + self.scale_count] for r in range(world_size)]
        if self.has_tensor_scale:
            tails = per_rank[:, self.size - 4:].contiguous().view(torch.float32).reshape(-1)
            tensor_scales = [float(v) for v in tails]
        else:
            tensor_scales = [1.0] * world_size
        return elements, scales, tensor_scales

    def receive(self, gathered, world_size, out):
        elements, scales, tensor_scales = self._parts(gathered, world_size)
        _core.comm_receive_blocks([e.data_ptr() for e in elements], self.fmt.packed, [s.data_ptr() for s in scales],
                                  tensor_scales, out.data_ptr(), self.n, self.fmt._key, threads())

    def decode_all(self, gathered, world_size):
        elements, scales, tensor_scales = self._parts(gathered, world_size)
        return torch.stack([blocks.decode_blocks((e, s, t) if self.has_tensor_scale else (e, s), self.fmt,
                                                 shape=(self.n,)) for e, s, t in zip(elements, scales, tensor_scales)])


def _codec(fmt, n):
    return _BlockCodec(fmt, n) if isinstance(fmt, blocks.BlockFormat) else _ScalarCodec(fmt, n)


def _all_gather():
    """torch.distributed's gather of equal-sized tensors into one: all_gather_single (torch 2.13
    renamed all_gather_into_tensor to it), looked up at each call."""
    gather = getattr(dist, "all_gather_single", None)
    return gather if gather is not None else dist.all_gather_into_tensor


def _ring_chunks(n, world_size, granule):
    """The ring all-reduce's chunk boundaries: world_size consecutive chunks of whole granules
    (block_size for a block format, 1 otherwise), the last ones shorter or empty."""
    units = -(-n // granule)
    per = -(-units // world_size)
    return [(min(n, c * per * granule), min(n, (c + 1) * per * granule)) for c in range(world_size)]


def _faithful_ring_sum(values, state, step, bucket_index):
    """The sum of values[r] (r = 0..W-1) as a ring all-reduce computes it when every hop rounds its
    partial sum to the format: chunk c starts at rank (c + 1) mod W and hop k (1..W-1) adds rank
    (c + 1 + k) mod W's value in fp32, then rounds the chunk with the seed shared_seed(W, k, b)
    and element indices counted from the bucket's start."""
    world_size, n = values.shape
    granule = state.fmt.block_size if state.is_block else 1
    chunks = _ring_chunks(n, world_size, granule)
    partial = torch.empty(n, dtype=torch.float32)
    for c, (lo, hi) in enumerate(chunks):
        partial[lo:hi] = values[(c + 1) % world_size, lo:hi]
    for k in range(1, world_size):
        seed = state.shared_seed(step, world_size, k, bucket_index)
        for c, (lo, hi) in enumerate(chunks):
            if lo == hi:
                continue
            part = partial[lo:hi] + values[(c + 1 + k) % world_size, lo:hi]
            if state.is_block:
                partial[lo:hi] = blocks.quantize_blocks(part, state.fmt, rounding=state.rounding,
                                                        scale_rule=state.scale_rule, overflow=state.overflow,
                                                        seed=seed, index=lo)
            else:
                partial[lo:hi] = _ops.quantize(part, state.fmt, state.rounding, state.overflow, seed=seed, index=lo)
    return partial


def _run_compressed(state, bucket, who):
    buffer = _bucket_buffer(bucket, who)
    rank, world_size = state.rank_and_size()
    index, n, step = bucket.index(), buffer.numel(), state.step
    flat = buffer.view(-1) if buffer.is_contiguous() else buffer.reshape(-1).clone()
    codec = state._codec(index, n)
    residual_in = residual_out = None
    if state.error_feedback:
        layout = _layout(bucket)
        kept = state.residuals.get(index)
        if kept is not None and _same_layout(kept[0], layout):
            residual_in = kept[1]
        residual_out = residual_in if residual_in is not None else torch.empty(n, dtype=torch.float32)
        state.residuals[index] = (layout, residual_out)
    # x = flat / W (as DDP divides before its all-reduce) + residual, rounded: one pass, flat unchanged
    payload, counts = codec.send(flat, world_size, residual_in, residual_out, state,
                                 state.send_seed(step, rank, index))
    state._record(index, counts, payload.numel(), 4 * n)
    gathered = codec.gather_buffer(world_size)
    fut = _all_gather()(gathered, payload, group=state.group(), async_op=True).get_future()
    if bucket.is_last():
        state._end_step()

    def reduce(done):
        done.wait()  # rethrows a failed collective
        if state.faithful_sum:
            flat.copy_(_faithful_ring_sum(codec.decode_all(gathered, world_size), state, step, index))
        else:
            codec.receive(gathered, world_size, flat)  # fp32, in rank order
        if state.round_back:
            state._round(flat, state.shared_seed(step, world_size, 0, index), out=flat)
        if flat.data_ptr() != buffer.data_ptr():
            buffer.copy_(flat.view(buffer.shape))
        return buffer

    return fut.then(reduce)


def _options(who, fmt, rounding, overflow, scale_rule, seed, round_back, error_feedback, faithful_sum):
    f = _comm_format(fmt, who)
    if rounding not in _ops.ROUNDING:
        raise ValueError(f"{who}: rounding={rounding!r} is not one of {', '.join(_ops.ROUNDING)}")
    if overflow is None:
        overflow = "saturate"
    if overflow not in _ops.OVERFLOW:
        raise ValueError(f"{who}: overflow={overflow!r} is not one of {', '.join(_ops.OVERFLOW)}")
    if scale_rule not in blocks.SCALE_RULES:
        raise ValueError(f"{who}: scale_rule={scale_rule!r} is not one of {', '.join(blocks.SCALE_RULES)}")
    if scale_rule != blocks.SCALE_RULES[0] and not (isinstance(f, blocks.BlockFormat) and f.scaling == "e8m0"):
        raise ValueError(f"{who}: scale_rule={scale_rule!r} applies to MX block formats only, not {f}")
    seed = _seed(seed, who)
    if isinstance(f, blocks.BlockFormat):  # the block codec's own checks, now rather than inside a collective
        blocks._options(who, f, rounding, scale_rule, overflow, seed, 0, 0, None)
        if overflow == "infinity" and not f.element.has_nan:  # encode_blocks would refuse an overflow mid-run
            raise ValueError(f"{who}: overflow='infinity' needs element codes for Inf or NaN; {f.element} (in {f}) "
                             "has none: use overflow='saturate'")
    for name, value in (("round_back", round_back), ("error_feedback", error_feedback),
                        ("faithful_sum", faithful_sum)):
        _flag(value, who, name)
    if faithful_sum and round_back:
        raise ValueError(f"{who}: faithful_sum=True already leaves the sum in the format; round_back applies to the "
                         "default exchange-then-sum only")
    return f, overflow, seed


def compress_hook(fmt, rounding="nearest_even", *, overflow="saturate", scale_rule="floor", seed=0,
                  round_back=False, error_feedback=False, faithful_sum=False, process_group=None):
    """A DDP communication hook sending each gradient bucket as codes of `fmt`.

    Each rank divides its float32 bucket by the world size (as DDP does), adds its kept residual
    (error_feedback), rounds it to fmt (stochastic draws: element i of bucket b at step s on rank r
    from (fold_seed(seed, s, r, b), i)), and all-gathers the bytes (docs/distributed.md: wire
    layout). Every rank decodes every contribution and sums them in fp32 in rank order, so every
    rank holds the same result; round_back=True rounds that average to fmt once more (draws folded
    with world_size in the rank position, the same on every rank). faithful_sum=True instead sums
    as a ring all-reduce that rounds its partial sum to fmt after each of the world_size - 1 hops.

    fmt: a Format, a BlockFormat or a name ("e4m3", "bf16", "mxfp4", ...). Returns the hook, a
    function hook(state, bucket) with the CompressionState as `hook.state`:
        hook = minifloat.distributed.compress_hook("e4m3", "stochastic", seed=1)
        ddp.register_comm_hook(hook.state, hook)"""
    who = "minifloat.distributed.compress_hook"
    f, overflow, seed = _options(who, fmt, rounding, overflow, scale_rule, seed, round_back, error_feedback,
                                 faithful_sum)
    state = CompressionState(f, rounding, overflow, scale_rule, seed, round_back, error_feedback, faithful_sum,
                             process_group, counts_bytes=True)

    def minifloat_compress_hook(hook_state, bucket):
        return _run_compressed(hook_state if isinstance(hook_state, CompressionState) else state, bucket, who)

    minifloat_compress_hook.state = state
    return minifloat_compress_hook


def compress_wrapper(fmt, hook, rounding="nearest_even", *, overflow="saturate", scale_rule="floor", seed=0,
                     process_group=None):
    """Another DDP hook (PowerSGD, allreduce_hook, ...) run on a bucket rounded to `fmt`, and its
    result rounded to `fmt` again, as torch's fp16_compress_wrapper does with float16.

    The bucket is rounded in place (draws from (fold_seed(seed, step, rank, bucket), i)) before
    `hook` sees it; its result is rounded with draws folded with world_size in the rank position
    (the same on every rank). The values are fmt's, but the wrapped hook sends them as it sends
    float32, so the state counts roundings, not bytes. Returns hook(hook_state, bucket), where
    hook_state is the wrapped hook's state, with the wrapper's CompressionState as `.state`."""
    who = "minifloat.distributed.compress_wrapper"
    if not callable(hook):
        raise TypeError(f"{who}: hook must be a DDP communication hook (a callable), not {type(hook).__name__}")
    f, overflow, seed = _options(who, fmt, rounding, overflow, scale_rule, seed, False, False, False)
    state = CompressionState(f, rounding, overflow, scale_rule, seed, True, False, False, process_group,
                             counts_bytes=False)

    def minifloat_compress_wrapper_hook(hook_state, bucket):
        buffer = _bucket_buffer(bucket, who)
        rank, world_size = state.rank_and_size()
        index, step = bucket.index(), state.step
        flat = buffer.view(-1)
        if state.is_block:
            _, st = blocks.quantize_blocks(flat, f, rounding=rounding, scale_rule=scale_rule, overflow=overflow,
                                           seed=state.send_seed(step, rank, index), stats=True, out=flat)
        else:
            _, st = _ops.quantize(flat, f, rounding, overflow, seed=state.send_seed(step, rank, index), stats=True, out=flat)
        state._record(index, _stats_dict(st), 0, 0)
        shared_seed = state.shared_seed(step, world_size, 0, index)
        if bucket.is_last():
            state._end_step()
        fut = hook(hook_state, bucket)

        def round_back(done):
            result = done.value()
            result = result[0] if isinstance(result, (list, tuple)) else result
            target = bucket.buffer()
            target.view(-1).copy_(state._round(result.reshape(-1).to(torch.float32), shared_seed))
            return target

        return fut.then(round_back)

    minifloat_compress_wrapper_hook.state = state
    return minifloat_compress_wrapper_hook
