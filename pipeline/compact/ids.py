"""The id index: 16 bytes per stored event, enough to deduplicate against the whole store.

Each stored event contributes ``(h, pos)``: ``h`` is a 64-bit hash of its id
(:func:`hash_ids`), ``pos`` where its line lies in the streams (stream number in the top 8 bits,
byte offset below). Streams are append-only (``ratings verify`` checks the bytes
the manifests consumed), so the stored line can always be read back: an incoming
event whose ``h`` is known is a **duplicate** when its line is byte-identical to
the stored one (what a retried append of one serialised event gives) and a
**conflict** otherwise. Only hits read a line back; a new id costs one hash.

A 64-bit id hash collides with probability about n^2 / 2^65 (1e-7 at 5M events);
a collision turns an event into a visible conflict (dead-lettered), it never
drops a different event silently, because the lines are compared byte for byte.

Segments are Parquet files under ``store/_index/`` listed in the manifest; each
compaction adds one segment (sorted by ``h``) and merges them when there are
many; in memory the index is one sorted array.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from ..home import STREAMS, Home

SCHEMA = pa.schema([pa.field("h", pa.uint64()), pa.field("pos", pa.uint64())])
_OFFSET_BITS = 56
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1

NEW, DUPLICATE, CONFLICT = 0, 1, 2


_C1 = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio
_M1, _M2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)  # MurmurHash3's fmix64
_S33 = np.uint64(33)
_GATHER = 1 << 23  # bytes gathered at a time: bounds the temporary matrix


def _fmix64(h: np.ndarray) -> np.ndarray:
    h ^= h >> _S33
    h *= _M1
    h ^= h >> _S33
    h *= _M2
    h ^= h >> _S33
    return h


def hash_ids(ids: pa.Array) -> np.ndarray:
    """A stable 64-bit hash of each string, vectorised (the index persists: never change this function).

    The UTF-8 bytes are read as little-endian 64-bit words, zero-padded; ``h = len * C1``, then
    for each word ``h = fmix64(h ^ word)`` (MurmurHash3's finaliser). Rows are hashed in groups
    of one length; ids written by one dispatcher (ULIDs) are one contiguous block.
    """
    ids = ids.cast(pa.large_string()) if ids.type != pa.large_string() else ids
    n = len(ids)
    if n == 0:
        return np.empty(0, np.uint64)
    offsets = np.frombuffer(ids.buffers()[1], np.int64, n + 1, ids.offset * 8)
    data = np.frombuffer(ids.buffers()[2], np.uint8) if ids.buffers()[2] is not None else np.zeros(1, np.uint8)
    lengths = np.diff(offsets)
    out = np.empty(n, np.uint64)
    for length in np.unique(lengths).tolist():
        same = np.flatnonzero(lengths == length)
        width = max(8, (length + 7) // 8 * 8)
        step = max(1, _GATHER // width)
        for begin in range(0, len(same), step):
            rows = same[begin : begin + step]
            matrix = np.zeros((len(rows), width), np.uint8)
            first = int(offsets[rows[0]])
            if rows[-1] - rows[0] == len(rows) - 1 and int(offsets[rows[-1] + 1]) - first == len(rows) * length:
                matrix[:, :length] = data[first : first + len(rows) * length].reshape(len(rows), length)  # contiguous
            elif length:
                matrix[:, :length] = data[offsets[rows][:, None] + np.arange(length)[None, :]]
            words = matrix.view("<u8")
            h = np.full(len(rows), length, np.uint64) * _C1  # arrays wrap mod 2^64 silently
            for j in range(words.shape[1]):
                h = _fmix64(h ^ words[:, j])
            out[rows] = h
    return out


def position(stream: str, offsets: np.ndarray) -> np.ndarray:
    """Packed ``(stream, byte offset)`` of lines."""
    return (np.uint64(STREAMS.index(stream)) << np.uint64(_OFFSET_BITS)) | offsets.astype(np.uint64)


class LineReader:
    """Reads one stored line back from the streams by its packed position."""

    def __init__(self, home: Home):
        self.home = home
        self.fds: dict[int, int] = {}

    def line(self, pos: int) -> bytes:
        number, offset = pos >> _OFFSET_BITS, pos & _OFFSET_MASK
        fd = self.fds.get(number)
        if fd is None:
            fd = self.fds[number] = os.open(self.home.stream(STREAMS[number]), os.O_RDONLY)
        out = b""
        while True:
            block = os.pread(fd, 1 << 16, offset + len(out))
            cut = block.find(b"\n")
            if cut >= 0 or not block:
                return out + block[: cut if cut >= 0 else len(block)]
            out += block

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


class IdIndex:
    """Sorted id hashes with the stream position of each stored event."""

    def __init__(self, h: np.ndarray | None = None, pos: np.ndarray | None = None):
        h = np.empty(0, np.uint64) if h is None else h
        pos = np.empty(0, np.uint64) if pos is None else pos
        order = np.argsort(h, kind="stable")
        self.h, self.pos = h[order], pos[order]

    @classmethod
    def from_tables(cls, tables: list[pa.Table]) -> IdIndex:
        if not tables:
            return cls()
        table = pa.concat_tables(tables)
        return cls(table["h"].to_numpy(), table["pos"].to_numpy())

    def __len__(self) -> int:
        return len(self.h)

    def lookup(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(known mask, stored position of the known ones: 0 elsewhere)."""
        if not len(self.h):
            return np.zeros(len(h), bool), np.zeros(len(h), np.uint64)
        at = np.searchsorted(self.h, h)
        at[at >= len(self.h)] = 0
        known = self.h[at] == h
        return known, np.where(known, self.pos[at], np.uint64(0))

    def classify(self, h: np.ndarray, line_of: Callable[[int], bytes], reader: LineReader) -> np.ndarray:
        """Per incoming row (ids hashed to ``h``; ``line_of(i)`` is row i's line): NEW, DUPLICATE or CONFLICT.

        A known id is compared with the stored line; a repeat of a new id within the batch with the
        first occurrence in the batch.
        """
        out = np.zeros(len(h), np.int8)
        if not len(h):
            return out
        known, stored = self.lookup(h)
        for i in np.flatnonzero(known):
            out[i] = DUPLICATE if reader.line(int(stored[i])) == line_of(i) else CONFLICT
        _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        first_of_row = first[inverse]
        for i in np.flatnonzero((first_of_row != np.arange(len(h))) & ~known):
            out[i] = DUPLICATE if line_of(int(first_of_row[i])) == line_of(i) else CONFLICT
        return out

    def add(self, h: np.ndarray, pos: np.ndarray) -> None:
        """Add new (unique, unknown) ids.

        Both parts are sorted, so the stable sort (a merge sort that finds runs) merges them in linear time.
        """
        if len(h):
            order = np.argsort(h, kind="stable")
            merged_h = np.concatenate([self.h, h[order]])
            merged_pos = np.concatenate([self.pos, pos[order]])
            order = np.argsort(merged_h, kind="stable")
            self.h, self.pos = merged_h[order], merged_pos[order]


def segment_table(h: np.ndarray, pos: np.ndarray) -> pa.Table:
    order = np.argsort(h, kind="stable")
    return pa.table({"h": pa.array(h[order], pa.uint64()), "pos": pa.array(pos[order], pa.uint64())}, schema=SCHEMA)
