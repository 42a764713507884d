"""The id index: 16 bytes per stored event, enough to deduplicate against the whole store.

Each stored event contributes ``(h, p)``: ``h`` is a 64-bit BLAKE2b hash of its
id, ``p`` a 64-bit BLAKE2b hash of its raw line (the payload). An incoming
event whose ``h`` is known is a duplicate when ``p`` matches (dropped and
counted) and a conflict otherwise (dead-lettered). Two events are "the same
payload" when their lines are byte-identical, which is what a retried append of
one serialised event gives. A 64-bit id hash collides with probability about
n^2 / 2^65 (1e-7 at 5M events); a collision can only turn an event into a
visible conflict, never drop a different event silently (the payload hash must
collide too).

Segments are Parquet files under ``store/_index/`` listed in the manifest; each
compaction adds one segment (sorted by ``h``) and merges them when there are
many, so the index stays one sorted array in memory.
"""
from __future__ import annotations

from hashlib import blake2b

import numpy as np
import pyarrow as pa

SCHEMA = pa.schema([pa.field("h", pa.uint64()), pa.field("p", pa.uint64())])


def hash64(values: list[bytes]) -> np.ndarray:
    """64-bit BLAKE2b of each value (little-endian), stable across versions and platforms."""
    joined = b"".join(blake2b(v, digest_size=8).digest() for v in values)
    return np.frombuffer(joined, dtype="<u8").astype(np.uint64)


class IdIndex:
    """Sorted id hashes with their payload hashes; grows by the hashes of each accepted batch."""

    def __init__(self, h: np.ndarray | None = None, p: np.ndarray | None = None):
        h = np.empty(0, np.uint64) if h is None else h
        p = np.empty(0, np.uint64) if p is None else p
        order = np.argsort(h, kind="stable")
        self.h, self.p = h[order], p[order]

    @classmethod
    def from_tables(cls, tables: list[pa.Table]) -> "IdIndex":
        if not tables:
            return cls()
        table = pa.concat_tables(tables)
        return cls(table["h"].to_numpy(), table["p"].to_numpy())

    def __len__(self) -> int:
        return len(self.h)

    def lookup(self, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(known mask, payload hash of the known ones: 0 elsewhere)."""
        if not len(self.h):
            return np.zeros(len(h), bool), np.zeros(len(h), np.uint64)
        pos = np.searchsorted(self.h, h)
        pos[pos >= len(self.h)] = 0
        known = self.h[pos] == h
        return known, np.where(known, self.p[pos], np.uint64(0))

    def classify(self, h: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Per incoming row: 0 new, 1 duplicate, 2 conflict, against this index and earlier rows of the batch.

        The first occurrence of an id in the batch is the one compared with the index; a later one is
        compared with that first occurrence.
        """
        out = np.zeros(len(h), np.int8)
        if not len(h):
            return out
        known, stored_p = self.lookup(h)
        out[known] = np.where(stored_p[known] == p[known], 1, 2)
        _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
        first_of_row = first[inverse]
        repeat = first_of_row != np.arange(len(h))
        # A repeat of a new id: duplicate of that first occurrence if the payload matches, else conflict.
        fresh_repeat = repeat & ~known
        out[fresh_repeat] = np.where(p[fresh_repeat] == p[first_of_row[fresh_repeat]], 1, 2)
        return out

    def add(self, h: np.ndarray, p: np.ndarray) -> None:
        """Add new (unique, unknown) ids.

        Both parts are sorted, so the stable sort (a merge sort that finds runs) merges them in linear time.
        """
        if len(h):
            order = np.argsort(h, kind="stable")
            merged_h = np.concatenate([self.h, h[order]])
            merged_p = np.concatenate([self.p, p[order]])
            order = np.argsort(merged_h, kind="stable")
            self.h, self.p = merged_h[order], merged_p[order]


def segment_table(h: np.ndarray, p: np.ndarray) -> pa.Table:
    order = np.argsort(h, kind="stable")
    return pa.table({"h": pa.array(h[order], pa.uint64()), "p": pa.array(p[order], pa.uint64())}, schema=SCHEMA)
