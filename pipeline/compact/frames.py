"""Batch frames in a stream range, found before the range is parsed (docs/design.md, Storage: batch framing).

Compaction decides every line the way :class:`pipeline.streams.scan.StreamScan` (the reference) does, without a
Python step per line: frame lines are rare, so it finds them by a byte search of the range (a memory map, no
copy), judges each batch part with the reference :func:`pipeline.streams.scan.check_part`, and gives the chunk
parser a short list of lines with a special verdict: a frame of a whole part (not an event), or a line of a
broken part (a dead letter with the reason). Every other line is an event line, parsed as usual. An unfinished
part ends the range before its begin. ``tests/test_compact_frames.py`` holds this against the reference.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field

import numpy as np

from ..streams.scan import FRAME_PREFIX, BatchBegin, BatchEnd, check_part, frame_of, lines_at


@dataclass
class FramePlan:
    """What the frames of one range decide: where reading stops, and the lines with a special verdict."""

    end: int  # the range ends here (before the begin of an unfinished part, else where it was asked to)
    unfinished: BatchBegin | None = None  # the part that ended the range early
    offsets: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # sorted line offsets
    is_frame: np.ndarray = field(default_factory=lambda: np.empty(0, bool))  # True: a frame; False: broken
    reasons: list[str | None] = field(default_factory=list)

    def lookup(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For line offsets: (index into this plan, or -1 for an ordinary event line; whether that is a frame)."""
        if not len(self.offsets):
            return np.full(len(offsets), -1), np.zeros(len(offsets), bool)
        at = np.minimum(np.searchsorted(self.offsets, offsets), len(self.offsets) - 1)
        found = self.offsets[at] == offsets
        index = np.where(found, at, -1)
        return index, found & self.is_frame[at]


_SCAN = 1 << 20  # bytes compared at a time: the mask stays in cache
_PROBE = FRAME_PREFIX.index(b"b")  # a byte of the prefix (of "batch") event lines rarely have at that place


def _frame_starts(view: mmap.mmap, start: int, end: int) -> list[int]:
    """Offsets of the lines in ``[start, end)`` whose byte at :data:`_PROBE` is the prefix's: numpy compares the
    bytes after every newline, a piece at a time, quicker than a search for the whole prefix."""
    data = np.frombuffer(view, np.uint8, end)
    want = FRAME_PREFIX[_PROBE]
    found = [start] if end - start > _PROBE and data[start + _PROBE] == want else []
    for at in range(start, end, _SCAN):
        probe = np.flatnonzero(data[at : min(at + _SCAN, end)] == 10) + (at + 1 + _PROBE)
        probe = probe[probe < end]
        found += (probe[data[probe] == want] - _PROBE).tolist()
    return found


def _frame_lines(view: mmap.mmap, start: int, end: int) -> list[tuple[int, bytes]]:
    """(offset, line) of every line in ``[start, end)`` that starts with the frame prefix."""
    found = [o for o in _frame_starts(view, start, end) if view[o : o + len(FRAME_PREFIX)] == FRAME_PREFIX]
    return [(offset, view[offset : view.find(b"\n", offset, end)]) for offset in found]


def plan_frames(fd: int, start: int, end: int) -> FramePlan:
    """Decide the frames of ``[start, end)`` of an open stream (``end`` just after a newline)."""
    plan = FramePlan(end=end)
    if end <= start:
        return plan
    with mmap.mmap(fd, end, access=mmap.ACCESS_READ) as view:
        candidates = [(o, raw, frame_of(raw)) for o, raw in _frame_lines(view, start, end)]
    special: list[tuple[int, bool, str | None]] = []

    def pread(n: int, off: int) -> bytes:
        return os.pread(fd, n, off)

    consumed = start
    for offset, raw, frame in candidates:
        if frame is None or offset < consumed:
            continue
        if isinstance(frame, BatchEnd):
            reason = f"a batch.end of batch {frame.id} without its batch.begin: a batch is all or nothing"
            special.append((offset, False, reason))
            continue
        assert isinstance(frame, BatchBegin)
        body = offset + len(raw) + 1
        part = check_part(pread, offset, frame, len(raw) + 1, end)
        if part.kind == "unfinished":  # a writer is still writing it, or recovery will resolve it
            plan.end, plan.unfinished = offset, frame
            break
        if part.kind == "whole":
            end_line = body + frame.bytes
            special += [(offset, True, None), (end_line, True, None)]
            consumed = end_line + len(BatchEnd(id=frame.id).line())
            continue
        special.append((offset, False, part.reason))  # broken: its begin and its lines are dead letters
        consumed, taken = body, 0
        for line_offset, line in lines_at(pread, body, end):
            if taken == part.lines:
                break
            special.append((line_offset, False, part.reason))
            consumed, taken = line_offset + len(line) + 1, taken + 1
    if special:
        plan.offsets = np.array([s[0] for s in special], np.int64)
        plan.is_frame = np.array([s[1] for s in special], bool)
        plan.reasons = [s[2] for s in special]
    return plan
