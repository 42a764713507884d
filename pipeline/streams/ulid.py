"""ULIDs: 48 bits of milliseconds then 80 random bits, Crockford base32, sorting by time.

Event ids that ``append`` fills in, batch ids of the stream framing, compaction run ids.
"""

from __future__ import annotations

import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # every 10-bit value as two characters


def _encode(value: int, chars: int) -> str:
    """The low ``5 * chars`` bits of ``value`` as ``chars`` Crockford base32 characters, two at a time."""
    paired = chars - chars % 2
    head = _CROCKFORD[(value >> (5 * paired)) & 31] if chars % 2 else ""
    return head + "".join([_PAIRS[(value >> shift) & 1023] for shift in range(5 * paired - 10, -1, -10)])


class _MonotonicUlids:
    """ULIDs in the spec's monotonic mode: within one millisecond, the previous random part plus one.

    Ids of one batch sort in append order, and a new id costs a string join instead of a
    ``urandom`` call and a full encoding (the 24-character prefix changes once per 1024 ids or
    per millisecond). A forked child starts afresh, so parent and child never share a sequence.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.ms, self.random, self.high, self.prefix = -1, 0, -1, ""
        self.lock = threading.Lock()  # a new lock: one held by another thread at fork time stays there

    def _advance(self) -> None:
        """Move to the next random value (a new millisecond draws a fresh one). Caller holds the lock."""
        ms = int(time.time() * 1000)
        if ms > self.ms:  # a clock that steps back keeps the last millisecond: ids still sort
            # top bit clear: 2**79 increments of room before the 80 bits could overflow
            self.ms, self.random, self.high = ms, int.from_bytes(os.urandom(10), "big") >> 1, -1
        else:
            self.random += 1

    def next(self) -> str:
        with self.lock:  # threads of one dispatcher must not draw the same increment
            self._advance()
            high = self.random >> 10
            if high != self.high:
                self.high, self.prefix = high, _encode(self.ms, 10) + _encode(high, 14)
            return self.prefix + _PAIRS[self.random & 1023]

    def take(self, count: int) -> list[str]:
        """``count`` consecutive ids in one step: a block of 1024 shares its prefix, so each id is one join."""
        out: list[str] = []
        if count <= 0:
            return out
        with self.lock:
            self._advance()
            first, self.random = self.random, self.random + count - 1
            value = first
            while value <= self.random:
                high = value >> 10
                prefix = _encode(self.ms, 10) + _encode(high, 14)
                stop = min(self.random, (high << 10) | 1023)
                out += [prefix + pair for pair in _PAIRS[value & 1023 : (stop & 1023) + 1]]
                value = stop + 1
            self.high, self.prefix = high, prefix
        return out


_ULIDS = _MonotonicUlids()
os.register_at_fork(after_in_child=_ULIDS.reset)


def new_id(now_ms: int | None = None) -> str:
    """A ULID. Without ``now_ms``: the current time, monotonic within this process."""
    if now_ms is None:
        return _ULIDS.next()
    return _encode(now_ms, 10) + _encode(int.from_bytes(os.urandom(10), "big"), 16)


def new_ids(count: int) -> list[str]:
    """``count`` ULIDs of the current time, in increasing order (the bulk form of :func:`new_id`)."""
    return _ULIDS.take(count)
