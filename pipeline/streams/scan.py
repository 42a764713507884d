"""Frame lines and the reference scanner: what a reader takes of a stream (docs/design.md, Batch framing).

A batch is framed by a ``batch.begin`` line (its id, lines, bytes and, for a two-stream batch, where its ratings
part ends) and a ``batch.end`` line (:func:`frame_of` reads both). :class:`StreamScan` decides each line of a
byte range as a reader does: taken, a frame line, or a line of a broken part (with the reason); a part the
range does not yet cover stops it. The writer's side (locks, notes, recovery, the consistent cut) is
:mod:`pipeline.streams.framing`.
"""

from __future__ import annotations

import builtins
import enum
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BEGIN, END = "batch.begin", "batch.end"  # pipeline.streams.events.RESERVED_TYPES: no event has either type
#: Every frame line starts with these bytes (the cheap test before the exact one).
FRAME_PREFIX = b'{"type":"batch.'

BLOCK = 1 << 20  # bytes per read while scanning or copying
_NUM = rb"(0|[1-9][0-9]{0,17})"
#: A batch id: printable ASCII but '"' and '\\' (no escapes, no space), at most 128 characters; a ULID fits.
BATCH_ID = r"[\x21\x23-\x5b\x5d-\x7e]{1,128}"
BATCH_ID_RE = b"(" + BATCH_ID.encode() + b")"
# Compiled on first use (by ``re``'s own cache): appending one event never needs them.
_BEGIN_RE = (
    rb'\{"type":"batch\.begin","id":"' + BATCH_ID_RE + rb'","lines":' + _NUM + rb',"bytes":' + _NUM
    + rb'(?:,"then":\{"ratings":' + _NUM + rb"\})?\}"
)  # fmt: skip
_END_RE = rb'\{"type":"batch\.end","id":"' + BATCH_ID_RE + rb'"\}'


# --------------------------------------------------------------------------- frame lines
class Then(BaseModel):
    """Where the ratings part of a two-stream batch begins (the ratings stream's size when the batch started)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

    ratings: int = Field(ge=0)


class BatchBegin(BaseModel):
    """``{"type":"batch.begin","id","lines":N,"bytes":B}``: N event lines of B bytes follow, then the end."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

    type: Literal["batch.begin"] = "batch.begin"
    id: str = Field(pattern=f"^{BATCH_ID}$")
    lines: int = Field(ge=1)
    bytes: int = Field(ge=1)
    then: Then | None = None

    def line(self) -> builtins.bytes:  # ``bytes`` is a field here
        """The exact bytes of this frame line, newline included."""
        then = f',"then":{{"ratings":{self.then.ratings}}}' if self.then is not None else ""
        return f'{{"type":"batch.begin","id":"{self.id}","lines":{self.lines},"bytes":{self.bytes}{then}}}\n'.encode()


class BatchEnd(BaseModel):
    """``{"type":"batch.end","id"}``: the part of batch ``id`` is whole."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

    type: Literal["batch.end"] = "batch.end"
    id: str = Field(pattern=f"^{BATCH_ID}$")

    def line(self) -> bytes:
        return f'{{"type":"batch.end","id":"{self.id}"}}\n'.encode()


Frame = BatchBegin | BatchEnd


def frame_of(raw: bytes) -> Frame | None:
    """The frame a line is (without its newline), or None for any other line (an ordinary event line).

    Only the exact form is a frame: a cheap prefix test, then one regular expression. A line of a reserved type
    in any other form is not a frame; the event parser refuses it like any invalid line.
    """
    if not raw.startswith(FRAME_PREFIX):
        return None
    if match := re.fullmatch(_BEGIN_RE, raw):
        batch_id, lines, size, then = match.groups()
        if int(lines) < 1 or int(size) < 1:
            return None
        return BatchBegin(
            id=batch_id.decode(),
            lines=int(lines),
            bytes=int(size),
            then=Then(ratings=int(then)) if then is not None else None,
        )
    if match := re.fullmatch(_END_RE, raw):
        return BatchEnd(id=match.group(1).decode())
    return None


# --------------------------------------------------------------------------- the reference scanner
class Verdict(enum.StrEnum):
    TAKE = "take"  # an event line a reader takes (valid or not: the event parser decides that)
    FRAME = "frame"  # a frame line of a whole part: never an event
    BROKEN = "broken"  # a line of a part that can never become whole: a dead letter with the reason


@dataclass(frozen=True, slots=True)
class Scanned:
    line_no: int  # 1-based, counting every line of the stream (frame lines too)
    offset: int  # stream byte offset of the line's first byte
    raw: bytes  # without the newline
    verdict: Verdict
    reason: str | None = None  # why a BROKEN line is not taken


Pread = Callable[[int, int], bytes]  # (length, offset) -> bytes


def complete_end(pread: Pread, start: int, end: int) -> int:
    """Offset just after the last newline in ``[start, end)``; ``start`` when there is none."""
    pos = end
    while pos > start:
        low = max(start, pos - BLOCK)
        idx = pread(pos - low, low).rfind(b"\n")
        if idx >= 0:
            return low + idx + 1
        pos = low
    return start


def lines_at(pread: Pread, start: int, limit: int) -> Iterator[tuple[int, bytes]]:
    """``(offset, line without newline)`` of the lines in ``[start, limit)``; ``limit`` ends on a newline."""
    pos = start
    pending: list[bytes] = []  # pieces of a line longer than one block
    offset = start
    while pos < limit:
        chunk = pread(min(BLOCK, limit - pos), pos)
        if not chunk:
            return
        pos += len(chunk)
        if b"\n" not in chunk:
            pending.append(chunk)
            continue
        pieces = chunk.split(b"\n")
        if pending:
            pieces[0] = b"".join(pending) + pieces[0]
        tail = pieces.pop()
        pending = [tail] if tail else []
        for piece in pieces:
            yield offset, piece
            offset += len(piece) + 1


@dataclass(frozen=True)
class PartCheck:
    """What the bytes after a begin line make of its part."""

    kind: Literal["whole", "broken", "unfinished"]
    lines: int  # lines of the part that follow the begin: N when whole, the broken lines when broken
    reason: str | None = None
    lines_complete: bool = False  # unfinished with exactly its N lines and B bytes: only the end is missing


def check_part(pread: Pread, begin_offset: int, begin: BatchBegin, begin_len: int, limit: int) -> PartCheck:
    """Judge the part whose begin line (``begin_len`` bytes with its newline) starts at ``begin_offset``.

    ``limit``: the end of the complete lines available (the scan's range, or the stream's last newline).
    """
    body_end = begin_offset + begin_len + begin.bytes
    missing_end = f"part of batch {begin.id}, whose batch.end is missing: a batch is all or nothing"
    mismatch = (
        f"part of batch {begin.id}, whose lines do not match its batch.begin ({begin.lines} line(s), "
        f"{begin.bytes} bytes): a batch is all or nothing"
    )
    count = 0
    for offset, raw in lines_at(pread, begin_offset + begin_len, limit):
        if offset >= body_end:
            if offset > body_end:  # the line before crossed the declared end: the byte count is wrong
                return PartCheck("broken", count, mismatch)
            if count != begin.lines:
                return PartCheck("broken", count, mismatch)
            frame = frame_of(raw)
            if isinstance(frame, BatchEnd) and frame.id == begin.id:
                return PartCheck("whole", count)
            return PartCheck("broken", count, missing_end)
        if raw.startswith(FRAME_PREFIX) and frame_of(raw) is not None:  # a frame inside: this part never ends
            return PartCheck("broken", count, missing_end)
        count += 1
    if limit > body_end:  # the last line crossed the declared end and nothing follows it
        return PartCheck("broken", count, mismatch)
    return PartCheck("unfinished", count, lines_complete=limit == body_end and count == begin.lines)


class StreamScan:
    """The reference decision for every line of a stream range (iterate it once).

    After iteration, ``stop`` is where reading stopped (the end of the last complete line, or the begin of an
    unfinished part, which ``unfinished`` then holds) and ``stop_line`` the number of the line there.
    """

    def __init__(self, pread: Pread, start: int, end: int, *, start_line: int = 1) -> None:
        self.pread, self.start, self.limit = pread, start, complete_end(pread, start, end)
        self.stop, self.stop_line = start, start_line
        self.unfinished: BatchBegin | None = None

    def __iter__(self) -> Iterator[Scanned]:
        lines = lines_at(self.pread, self.start, self.limit)
        line_no = self.stop_line
        for offset, raw in lines:
            frame = frame_of(raw) if raw.startswith(FRAME_PREFIX) else None
            if frame is None:
                yield Scanned(line_no, offset, raw, Verdict.TAKE)
            elif isinstance(frame, BatchEnd):
                reason = f"a batch.end of batch {frame.id} without its batch.begin: a batch is all or nothing"
                yield Scanned(line_no, offset, raw, Verdict.BROKEN, reason)
            else:
                part = check_part(self.pread, offset, frame, len(raw) + 1, self.limit)
                if part.kind == "unfinished":
                    self.stop, self.stop_line, self.unfinished = offset, line_no, frame
                    return
                verdict = Verdict.TAKE if part.kind == "whole" else Verdict.BROKEN
                yield Scanned(line_no, offset, raw, Verdict.FRAME if part.kind == "whole" else verdict, part.reason)
                for _ in range(part.lines):
                    line_no += 1
                    at, body = next(lines)
                    yield Scanned(line_no, at, body, verdict, part.reason)
                if part.kind == "whole":
                    line_no += 1
                    at, end = next(lines)
                    yield Scanned(line_no, at, end, Verdict.FRAME)
            line_no += 1
        self.stop, self.stop_line = self.limit, line_no


def scan_bytes(data: bytes, *, base: int = 0, start_line: int = 1) -> StreamScan:
    """:class:`StreamScan` of ``data``, the stream's bytes from offset ``base`` (a test or a vectorised reader's
    block; bytes after its last newline are not read)."""
    view = memoryview(data)
    return StreamScan(
        lambda n, off: bytes(view[off - base : off - base + n]), base, base + len(data), start_line=start_line
    )


def scan_fd(fd: int, start: int = 0, end: int | None = None, *, start_line: int = 1) -> StreamScan:
    """:class:`StreamScan` of an open stream file from ``start`` to ``end`` (default: its current size)."""
    size = os.fstat(fd).st_size if end is None else end
    return StreamScan(lambda n, off: os.pread(fd, n, off), start, size, start_line=start_line)
