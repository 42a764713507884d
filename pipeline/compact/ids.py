"""Deduplication by id: a 64-bit hash of each id, the table's hashes, and the lines a run took.

The events table keeps ``_id_hash`` (:func:`hash_ids` of ``id``) beside every row, so a compaction loads
8 bytes per stored event to know every id the table holds, whichever writer stored it. An incoming event
whose id the table knows is resolved against the stored row at the end of the run (same payload: a
duplicate, dropped and counted; another payload: a conflict, dead-lettered); one whose id the run itself
took earlier is compared with that line (read back from the stream by its position).

A 64-bit hash collides with probability about n^2 / 2^65 (1e-7 at 5M events); a hit is always confirmed
on the ids themselves, so a collision never drops or dead-letters a different event.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import InvalidEvent
from ..streams.events import parse_line
from ..utc import naive
from ..workspace import STREAMS, Workspace
from .rows import event_row

_OFFSET_BITS = 56
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1

NEW, DUPLICATE, CONFLICT, DEFERRED = 0, 1, 2, 3


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


def argsort_stable(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` of integers, faster when they are mostly distinct (hashes): numpy's
    stable sort of 64-bit values is a merge sort, its default one a vectorised quicksort several times quicker;
    only the indices of runs of equal values are then put back in their input order."""
    order = np.argsort(values)
    ordered = values[order]
    tie = ordered[1:] == ordered[:-1]
    if tie.any():
        in_run = np.zeros(len(values), bool)
        in_run[1:] |= tie
        in_run[:-1] |= tie
        at = np.flatnonzero(in_run)
        run = np.cumsum(np.concatenate([[True], ~tie]))[at]  # which run of equal values each position is in
        order[at] = order[at][np.lexsort((order[at], run))]
    return order


def position(stream: str, offsets: np.ndarray) -> np.ndarray:
    """Packed ``(stream, byte offset)`` of lines."""
    return (np.uint64(STREAMS.index(stream)) << np.uint64(_OFFSET_BITS)) | offsets.astype(np.uint64)


class LineReader:
    """Reads one stored line back from the streams by its packed position."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self.fds: dict[int, int] = {}

    def line(self, pos: int) -> bytes:
        number, offset = pos >> _OFFSET_BITS, pos & _OFFSET_MASK
        fd = self.fds.get(number)
        if fd is None:
            fd = self.fds[number] = self.ws.open(self.ws.stream(STREAMS[number]), os.O_RDONLY)
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


class IdSet:
    """The ids known to one compaction run: those of the table it read, and those it took itself.

    Membership is a sorted array per part (the table's hashes, then one per chunk taken), behind a bit filter
    indexed by the top bits of the hash, so that an id never seen (almost every one) costs one gather. The
    filter has at least 4 slots per id it will hold, so at most one unseen id in four reaches the sorted arrays.
    Ids the run took keep their stream position (to compare a repeat with the line it repeats).
    """

    def __init__(self, table_hashes: np.ndarray, expected: int):
        bits = max(16, int(4 * (len(table_hashes) + expected)).bit_length())
        self._shift = np.uint64(64 - bits)
        self._filter = np.zeros(1 << bits, bool)
        self.table = np.sort(table_hashes.astype(np.uint64, copy=False))
        self._filter[self.table >> self._shift] = True
        self._taken: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted hashes, their positions) per chunk

    def lookup(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per hash: (in the table, taken by this run, position of the taken line or 0)."""
        maybe = np.flatnonzero(self._filter[h >> self._shift])
        in_table = np.zeros(len(h), bool)
        taken = np.zeros(len(h), bool)
        pos = np.zeros(len(h), np.uint64)
        if not len(maybe):
            return in_table, taken, pos
        probe = h[maybe]
        if len(self.table):
            at = np.minimum(np.searchsorted(self.table, probe), len(self.table) - 1)
            in_table[maybe] = self.table[at] == probe
        for hashes, positions in self._taken:
            at = np.minimum(np.searchsorted(hashes, probe), len(hashes) - 1)
            hit = (hashes[at] == probe) & ~taken[maybe]
            taken[maybe[hit]] = True
            pos[maybe[hit]] = positions[at[hit]]
        return in_table, taken, pos

    def add(self, h: np.ndarray, pos: np.ndarray, ordered: bool = False) -> None:
        """Add ids this run took (unique among themselves and unknown before; ``ordered``: sorted already)."""
        if len(h):
            if ordered:
                self._taken.append((h, pos))
            else:
                order = argsort_stable(h)
                self._taken.append((h[order], pos[order]))
            self._filter[h >> self._shift] = True
            if len(self._taken) > 16:  # keep lookups cheap: fold the parts into one
                hashes = np.concatenate([p[0] for p in self._taken])
                positions = np.concatenate([p[1] for p in self._taken])
                order = np.argsort(hashes, kind="stable")
                self._taken = [(hashes[order], positions[order])]


def with_id_hash(table: pa.Table) -> pa.Table:
    """``table`` with ``_id_hash``: :func:`pipeline.compact.ids.hash_ids` of its ids (computed while parsing)."""
    return table.append_column("_id_hash", pa.array(hash_ids(table["id"].combine_chunks()).view(np.int64)))


class LazyIds:
    """The ids of a chunk's rows in line order, gathered only when one is asked for (a repeat or a conflict)."""

    def __init__(self, columns: list[pa.ChunkedArray], order: np.ndarray | None):
        self.columns = columns
        self.order = order  # line order of the concatenated columns (None: they are in it)
        self.ids: pa.Array | None = None

    def __getitem__(self, k: int) -> str:
        if self.ids is None:
            ids = pa.concat_arrays([c.combine_chunks() for c in self.columns])
            self.ids = ids if self.order is None else ids.take(pa.array(self.order))
        return str(self.ids[k].as_py())


def first_of_same(h: np.ndarray, order: np.ndarray) -> np.ndarray:
    """For each position, the first position holding the same value (itself, for a value seen once);
    ``order`` sorts ``h`` stably."""
    ordered = h[order]
    starts = np.ones(len(h), bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    if starts.all():
        return np.arange(len(h))
    first = order[np.maximum.accumulate(np.where(starts, np.arange(len(h)), 0))]
    out = np.empty(len(h), np.int64)
    out[order] = first
    return out


def conflict_reason(event_id: str) -> str:
    return f"id: conflict: {event_id!r} is already stored with a different payload"


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A row's values with ``at`` as naive UTC (stored rows carry the zone), for payload comparison."""
    at = row.get("at")
    return {**row, "at": naive(at)} if isinstance(at, datetime) else row


def same_event(earlier: bytes, line: bytes, event_id: str) -> int:
    """DUPLICATE when two lines with one id carry the same payload (the same bytes, or the same event outside the
    fields ``append`` filled in either: a retry whose ``at`` the append took anew), else CONFLICT; NEW when the
    ids differ (only their hashes met)."""
    if earlier == line:
        return DUPLICATE
    try:
        first, second = parse_line(earlier), parse_line(line)
    except InvalidEvent:
        return CONFLICT
    if first.id != event_id:
        return NEW
    ignored = {*(first.filled or ()), *(second.filled or ())}
    return DUPLICATE if agree(event_row(first, "")[1], event_row(second, "")[1], ignored) else CONFLICT


def agree(stored: dict[str, Any], incoming: dict[str, Any], ignored: set[str]) -> bool:
    """Two rows of one id are the same event when they agree outside the fields an append filled (``ignored``)."""
    return {k: v for k, v in stored.items() if k not in ignored} == {
        k: v for k, v in incoming.items() if k not in ignored
    }


def filled_of(line: bytes) -> set[str]:
    """The fields an append filled in a stream line (``filled``; none when it names none or does not parse)."""
    if b'"filled"' not in line:
        return set()
    try:
        return set(parse_line(line).filled or ())
    except InvalidEvent:
        return set()
