"""The append-only task and rating streams (docs/design.md, Storage): append, repair, read.

Lock protocol, the same for every writer in any language (the README repeats it, with the exact bytes):

1. open ``streams/.<stream>.lock`` (``O_RDWR|O_CREAT``, never delete it) and take an exclusive ``flock(2)`` on it
   (BSD ``flock``, not ``fcntl``/POSIX record locks: on Linux the two do not exclude each other). A batch with
   events for both streams takes both locks, tasks first, and holds them to its end;
2. open ``streams/<stream>.jsonl`` with ``O_RDWR|O_APPEND|O_CREAT``;
3. recover what a writer that died holding the lock left (:func:`pipeline.streams.framing.recover`): bytes after the
   last newline go to ``quarantine/<stream>.<offset, 20 digits>.<unique>.fragment`` (``O_EXCL``, fsync'd with
   the folder) before the stream is truncated to that offset; a batch cut short, named by the note in the lock
   file, is completed or moved to ``quarantine/...batch``;
4. one event: write its line (one compact UTF-8 JSON object + ``\n``, at most 1 MiB) with one ``write`` call;
   several: frame them as a batch (:mod:`pipeline.streams.framing`: a note in the lock file, then begin, lines, end);
   finish short writes; on an error, truncate the stream back to where the append began;
5. fsync as the policy says (``never``; ``batch``: once per stream, and the note first; ``always``: after every
   write call as well), clear the note, close the stream, release the lock.

Readers take no lock: they stop at the last newline, take a batch's lines only when its part is whole, and never
see a frame line (:func:`read_lines`, :func:`read`). A cut across both streams that no batch straddles:
:func:`pipeline.streams.framing.consistent_cut`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from ..errors import InvalidEvent
from ..workspace import STREAMS, StrPath, Workspace
from . import framing
from . import scan as scanner
from .batch import Batch, Item, prepare
from .events import DEFAULT_MAX_LINE_BYTES, AnyEvent, parse_line
from .framing import FsyncPolicy
from .future import MAX_FUTURE
from .scan import Verdict
from .ulid import new_id

__all__ = [
    "AppendResult",
    "Batch",
    "FsyncPolicy",
    "Item",
    "RawLine",
    "append",
    "new_id",
    "prepare",
    "read",
    "read_lines",
    "repair",
    "scan",
    "write",
]


@dataclass
class AppendResult:
    appended: int = 0
    streams: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    unknown_types: dict[str, int] = field(default_factory=dict)  # kept as family ``other``, ignored by the fit
    batch: str | None = None  # the batch id when the events were framed as one batch
    blank: int = 0  # blank lines skipped

    def summary(self) -> dict[str, Any]:
        return {"appended": self.appended, "streams": dict(self.streams), "blank_lines": self.blank}


def write(ws: Workspace, batch: Batch, fsync: FsyncPolicy) -> AppendResult:
    """Append a prepared batch under the lock protocol: one event as one line, several as one framed batch.

    All or nothing: an I/O error (a full disk) truncates what this call wrote, so nothing of the batch was
    appended, and the error says so in a note.
    """
    result = AppendResult(ids=batch.ids, unknown_types=batch.unknown_types, blank=batch.blank)
    if not batch.lines:
        return result
    with framing.hold(ws, list(batch.lines), durable=fsync != "never") as held:
        result.quarantined = framing.recover_all(ws, held, durable=fsync != "never").quarantined
        try:
            if len(batch) == 1:
                ((stream, (line,)),) = batch.lines.items()
                framing.write_line(held[stream], line, fsync)
            else:
                result.batch = framing.write_batch(held, batch.lines, fsync, batch_id=framing.batch_id_of(batch.ids))
        except OSError as exc:
            exc.add_note(f"while appending {len(batch)} event(s) to {', '.join(h.path for h in held.values())}")
            raise
    result.streams = {stream: len(todo) for stream, todo in batch.lines.items()}
    result.appended = len(batch)
    return result


def append(
    home: Workspace | StrPath | None,
    events: Iterable[Item],
    *,
    fsync: FsyncPolicy = "batch",
    source: str = "<input>",
    max_bytes: int = DEFAULT_MAX_LINE_BYTES,
    allow_types: Iterable[str] = (),
    future: timedelta | None = MAX_FUTURE,
) -> AppendResult:
    """Validate the whole batch, fill ``id`` and ``at`` where absent, and append each event to its stream.

    All or nothing: an invalid item raises :class:`~pipeline.errors.InvalidBatch` and no byte is written; several
    events are framed as one batch, which readers take whole or not at all, also after a crash or a full disk. An
    unknown type one edit away from a v1 type is refused as a typo unless ``allow_types`` names it, a time more
    than ``future`` after now is refused (None: any), blank lines are skipped and counted, and the fields filled
    are recorded in ``filled``
    (:func:`pipeline.streams.batch.prepare`).
    """
    if fsync not in ("always", "batch", "never"):
        raise ValueError(f"fsync must be always, batch or never, not {fsync!r}")
    batch = prepare(events, source=source, max_bytes=max_bytes, allow_types=allow_types, future=future)
    return write(Workspace.of(home), batch, fsync)


def repair(home: Workspace | StrPath | None = None) -> framing.Recovery:
    """Recover every stream under its lock (tasks, then ratings): torn tails and batches cut short (also one
    left without a note at the end of a stream)."""
    ws = Workspace.of(home)
    with framing.hold(ws, STREAMS, create=False) as held:
        return framing.recover_all(ws, held, scan_tail=True)


@dataclass(frozen=True)
class RawLine:
    line_no: int  # 1-based, counting every line of the stream (frame lines too)
    offset: int  # byte offset of the line's first byte
    raw: bytes  # without the trailing newline


def scan(
    home: Workspace | StrPath | None, stream: str, *, start: int = 0, end: int | None = None, start_line: int = 1
) -> Iterator[scanner.Scanned]:
    """Every line of a stream from byte ``start`` to ``end`` (default: its size) with the reader's verdict
    (:class:`pipeline.streams.scan.StreamScan`); an unfinished batch at the end stops it."""
    ws = Workspace.of(home)
    path = ws.stream(stream)
    if not os.path.lexists(path):
        return
    fd = ws.open(path, os.O_RDONLY)
    try:
        yield from scanner.scan_fd(fd, start, end, start_line=start_line)
    finally:
        os.close(fd)


def read_lines(
    home: Workspace | StrPath | None,
    stream: str,
    *,
    start: int = 0,
    end: int | None = None,
    start_line: int = 1,
) -> Iterator[RawLine]:
    """Yield the event lines a reader takes from byte ``start``: lines outside batches and the lines of whole
    batches; never a frame line, a line of a broken batch, an unfinished batch or bytes after the last newline."""
    for line in scan(home, stream, start=start, end=end, start_line=start_line):
        if line.verdict is Verdict.TAKE:
            yield RawLine(line.line_no, line.offset, line.raw)


def read(
    home: Workspace | StrPath | None,
    stream: str,
    *,
    errors: Literal["raise", "skip"] = "raise",
    max_bytes: int | None = None,
) -> Iterator[AnyEvent]:
    """Yield the events of a stream in order. Invalid lines and lines of a broken batch raise
    :class:`InvalidEvent` or are skipped."""
    ws = Workspace.of(home)
    source = str(ws.stream(stream))
    kwargs = {"max_bytes": max_bytes} if max_bytes else {}
    for line in scan(ws, stream):
        if line.verdict is Verdict.FRAME:
            continue
        try:
            if line.verdict is Verdict.BROKEN:
                raise InvalidEvent(line.reason or "broken batch", line=line.line_no, source=source)
            yield parse_line(line.raw, line=line.line_no, source=source, **kwargs)
        except InvalidEvent:
            if errors == "raise":
                raise
