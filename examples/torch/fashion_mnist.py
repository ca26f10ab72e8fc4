"""Fashion-MNIST from Debian's dataset-fashion-mnist package, read from its IDX files.

No download: the four gzip-compressed IDX files live in /usr/share/datasets/fashion-mnist. Every
file is validated completely before use — the magic number (two zero bytes, element type 0x08 =
unsigned byte, the expected rank), every dimension, and that the payload is exactly as long as
the dimensions say — and any failure raises DatasetError naming the file and the problem (the
same rules as the C++ loader, examples/data/idx.hpp).
"""

from __future__ import annotations

import gzip
import os
import struct
from dataclasses import dataclass

import numpy as np
import torch

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
# A corrupt header must not make us allocate gigabytes: the training images are 47 MB.
MAX_PAYLOAD_BYTES = 1 << 30
UNSIGNED_BYTE = 0x08

# Mean and standard deviation of the training split's pixels scaled to [0, 1], computed from the
# Debian files; python/tests/test_torch_trainer.py checks these constants.
PIXEL_MEAN = 0.2860
PIXEL_STD = 0.3530


class DatasetError(RuntimeError):
    """A data file is missing, unreadable or malformed; the message names the file."""


def _hint(path: str) -> str:
    return f"{path} (Debian package dataset-fashion-mnist provides it)"


def read_idx(path: str, rank: int) -> np.ndarray:
    """The unsigned-byte array of rank `rank` stored in the IDX file `path` (gzip or plain)."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(2)
            raw.seek(0)
            data = gzip.decompress(raw.read()) if head == b"\x1f\x8b" else raw.read()
    except FileNotFoundError:
        raise DatasetError(f"cannot open {_hint(path)}: no such file") from None
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise DatasetError(f"cannot read {_hint(path)}: {e}") from None
    if len(data) < 4 + 4 * rank:
        raise DatasetError(f"{path}: {len(data)} bytes is too short for an IDX header of rank {rank}")
    zero0, zero1, kind, file_rank = data[0], data[1], data[2], data[3]
    if zero0 != 0 or zero1 != 0:
        raise DatasetError(f"{path}: not an IDX file (the magic number does not start with two zero bytes)")
    if kind != UNSIGNED_BYTE:
        raise DatasetError(f"{path}: element type 0x{kind:02x}, expected 0x08 (unsigned byte)")
    if file_rank != rank:
        raise DatasetError(f"{path}: rank {file_rank}, expected {rank}")
    dims = struct.unpack(f">{rank}I", data[4 : 4 + 4 * rank])
    count = 1
    for d in dims:
        count *= d
        if count > MAX_PAYLOAD_BYTES:
            raise DatasetError(f"{path}: dimensions {dims} exceed {MAX_PAYLOAD_BYTES} bytes")
    payload = memoryview(data)[4 + 4 * rank :]
    if len(payload) != count:
        raise DatasetError(f"{path}: payload of {len(payload)} bytes, the dimensions {dims} say {count}")
    return np.frombuffer(payload, dtype=np.uint8).reshape(dims).copy()


@dataclass
class Split:
    images: torch.Tensor  # uint8, N x 1 x 28 x 28
    labels: torch.Tensor  # int64, N

    def __len__(self) -> int:
        return self.labels.numel()


def load(split: str, directory: str = DEFAULT_DIR, limit: int | None = None) -> Split:
    """The "train" (60000) or "test" (10000) split, optionally only its first `limit` images."""
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise ValueError(f"split must be 'train' or 'test', not {split!r}")
    images = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), 3)
    labels = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), 1)
    if images.shape[0] != labels.shape[0]:
        raise DatasetError(f"{directory}: {images.shape[0]} {split} images but {labels.shape[0]} labels")
    if images.shape[1:] != (28, 28):
        raise DatasetError(f"{directory}: {split} images are {images.shape[1]}x{images.shape[2]}, expected 28x28")
    if labels.size and int(labels.max()) >= 10:
        raise DatasetError(f"{directory}: {split} label {int(labels.max())} is outside 0..9")
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        images, labels = images[:limit], labels[:limit]
    return Split(torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels.astype(np.int64)))


def normalise(images: torch.Tensor) -> torch.Tensor:
    """uint8 pixels to float32, scaled to [0, 1] and standardised with the training statistics."""
    return (images.to(torch.float32) / 255.0 - PIXEL_MEAN) / PIXEL_STD


def batches(split: Split, batch_size: int, generator: torch.Generator | None = None):
    """(images, labels) batches, normalised; shuffled when a generator is given (seeded order)."""
    order = torch.randperm(len(split), generator=generator) if generator is not None else torch.arange(len(split))
    for start in range(0, len(split), batch_size):
        idx = order[start : start + batch_size]
        yield normalise(split.images[idx]), split.labels[idx]
