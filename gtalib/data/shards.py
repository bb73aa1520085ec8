"""Token shards: a 64-byte header followed by little-endian uint16 token ids, read by memory map.

Header (little-endian, 64 bytes, zero-padded)::

    offset  size  field
    0       8     magic  b"GTALIBTK"
    8       4     format version (1)
    12      4     vocab_size    (every id < vocab_size)
    16      4     eot           (end-of-text id; it precedes every document)
    20      4     itemsize      (2: uint16)
    24      8     n_tokens

uint16 holds every id of both tokenizers (GPT-2: 50,257 < 65,536). A shard is written to a
temporary file and renamed, so a reader never sees a half-written one.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterable

import numpy as np

MAGIC = b"GTALIBTK"
VERSION = 1
HEADER_BYTES = 64
_HEADER = struct.Struct("<8sIIIIQ")
DTYPE = np.dtype("<u2")


class ShardError(ValueError):
    """A shard file is missing, truncated, or its header or contents are not valid."""


def write_shard(path: str | os.PathLike, docs: Iterable[Iterable[int]], vocab_size: int, eot: int) -> int:
    """Write documents as one shard: ``[eot, *doc_0, eot, *doc_1, ...]``.

    Args:
        path: destination; written as ``<path>.tmp`` then renamed.
        docs: token ids per document, each id in ``[0, vocab_size)``.
        vocab_size: at most 65,536 (uint16).
        eot: end-of-text id, in ``[0, vocab_size)``.

    Returns:
        the number of tokens written (documents + one eot each).

    Raises:
        ValueError: ``vocab_size`` over 65,536, ``eot`` out of range, or an id out of range.
    """
    if not 0 < vocab_size <= 1 << 16:
        raise ValueError(f"vocab_size must be in [1, 65536] for uint16 shards, got {vocab_size}")
    if not 0 <= eot < vocab_size:
        raise ValueError(f"eot must be in [0, vocab_size={vocab_size}), got {eot}")
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "wb") as f:
        f.write(b"\0" * HEADER_BYTES)
        for doc in docs:
            arr = np.asarray(doc, dtype=np.int64)
            if arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
                f.close()
                tmp.unlink()
                raise ValueError(f"token id out of [0, {vocab_size}) while writing {path}")
            f.write(np.asarray([eot], dtype=DTYPE).tobytes() + arr.astype(DTYPE).tobytes())
            n += 1 + arr.size
        f.seek(0)
        f.write(_HEADER.pack(MAGIC, VERSION, vocab_size, eot, DTYPE.itemsize, n))
    os.replace(tmp, path)
    return n


def read_header(path: str | os.PathLike) -> dict:
    """The header of a shard as a dict (``vocab_size``, ``eot``, ``n_tokens``, ``itemsize``, ``version``).

    Raises:
        ShardError: missing file, wrong magic, unknown version or itemsize, or a file size that
            does not equal header + n_tokens * itemsize (truncated or padded). The message names
            the file.
    """
    path = Path(path)
    if not path.is_file():
        raise ShardError(f"token shard {path} does not exist; build the corpus (gtalib data build)")
    size = path.stat().st_size
    with open(path, "rb") as f:
        raw = f.read(HEADER_BYTES)
    if len(raw) < HEADER_BYTES:
        raise ShardError(f"token shard {path} is truncated: {size} bytes, shorter than its header")
    magic, version, vocab_size, eot, itemsize, n = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise ShardError(f"{path} is not a gtalib token shard (magic {magic!r}, expected {MAGIC!r})")
    if version != VERSION:
        raise ShardError(f"token shard {path} has format version {version}; this gtalib reads {VERSION}")
    if itemsize != DTYPE.itemsize:
        raise ShardError(f"token shard {path} has itemsize {itemsize}; expected {DTYPE.itemsize} (uint16)")
    expected = HEADER_BYTES + n * itemsize
    if size != expected:
        raise ShardError(f"token shard {path} is corrupt or truncated: {size} bytes, header says "
                         f"{n} tokens = {expected} bytes")
    return {"version": version, "vocab_size": vocab_size, "eot": eot, "itemsize": itemsize, "n_tokens": n}


def open_shard(path: str | os.PathLike, check_ids: bool = False) -> np.memmap:
    """Memory-map a shard's tokens as a read-only uint16 array of shape ``(n_tokens,)``.

    Args:
        check_ids: also scan the tokens and require every id < the header's vocab_size and the
            first token to be eot (one pass over the file).

    Raises:
        ShardError: see :func:`read_header`; with ``check_ids``, an id out of range.
    """
    h = read_header(path)
    if h["n_tokens"] == 0:
        return np.zeros(0, dtype=DTYPE)
    arr = np.memmap(path, dtype=DTYPE, mode="r", offset=HEADER_BYTES, shape=(h["n_tokens"],))
    if check_ids and (int(arr.max()) >= h["vocab_size"] or int(arr[0]) != h["eot"]):
        raise ShardError(f"token shard {path} holds ids outside [0, {h['vocab_size']}) or does not "
                         f"start with the end-of-text id {h['eot']}")
    return arr
