"""The append-only task and rating streams (DESIGN 4).

Lock protocol, the same for every writer in any language:

1. open ``streams/.<stream>.lock`` (create it if absent) and take an exclusive
   ``flock`` on it;
2. open ``streams/<stream>.jsonl`` with ``O_WRONLY|O_APPEND|O_CREAT``;
3. if the file does not end in ``\\n``, move the bytes after the last newline
   to ``quarantine/`` (fsync'd) and truncate them away;
4. write each line (one JSON object + ``\\n``) with one ``write`` call, finishing
   a short write before the next line;
5. fsync as the policy says, then release the lock.

Readers need no lock: they stop at the last newline.
"""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import InvalidBatch, InvalidEvent
from .events import AnyEvent, Event, format_timestamp, parse_line, stream_of, to_json_line, validate_object
from .home import STREAMS, Home, fsync_dir

FsyncPolicy = Literal["always", "batch", "never"]
_CHUNK = 1 << 16
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_id(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, Crockford base32 (sorts by time)."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


@dataclass
class AppendResult:
    appended: int = 0
    streams: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"appended": self.appended, "streams": dict(self.streams)}


def prepare(events: Iterable[AnyEvent | Mapping[str, Any]], *, source: str = "<input>") -> list[AnyEvent]:
    """Validate a whole batch; raise :class:`InvalidBatch` with every bad item, else return the events.

    Mappings are validated as events; item ``i`` (1-based) is reported as line ``i``.
    """
    out: list[AnyEvent] = []
    errors: list[InvalidEvent] = []
    for i, item in enumerate(events, start=1):
        try:
            out.append(item if isinstance(item, Event) else validate_object(dict(item)))
        except InvalidEvent as exc:
            errors.append(exc.located(source=source, line=i))
    if errors:
        raise InvalidBatch(errors)
    return out


def _stamp(event: AnyEvent, now: str) -> AnyEvent:
    update = {}
    if event.id is None:
        update["id"] = new_id()
    if event.at is None:
        update["at"] = now
    return event.model_copy(update=update) if update else event


@contextmanager
def locked(home: Home, stream: str) -> Iterator[int]:
    """Hold the stream's exclusive lock; yield an O_APPEND descriptor on the stream, torn tail repaired."""
    home.streams.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(home.stream_lock(stream), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        fd = os.open(home.stream(stream), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            yield fd
        finally:
            os.close(fd)
    finally:
        os.close(lock_fd)  # closing releases the flock


def _last_newline_end(fd: int, size: int) -> int:
    """Offset just after the last ``\\n`` (0 when there is none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - _CHUNK)
        chunk = os.pread(fd, pos - start, start)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0


def _quarantine_tail(home: Home, stream: str, fd: int) -> str | None:
    """Move bytes after the last newline to ``quarantine/`` (fsync'd), then truncate. Caller holds the lock."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return None
    keep = _last_newline_end(fd, size)
    tail = os.pread(fd, size - keep, keep)
    home.quarantine.mkdir(parents=True, exist_ok=True)
    name = f"{stream}.{keep:020d}.{new_id()}.fragment"
    path = home.quarantine / name
    qfd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(qfd, tail)
        os.fsync(qfd)
    finally:
        os.close(qfd)
    fsync_dir(home.quarantine)
    os.ftruncate(fd, keep)
    os.fsync(fd)
    return str(path)


def _write_all(fd: int, data: bytes) -> None:
    """One ``os.write`` for the whole line; a short write is finished before returning."""
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])


def append(home: str | os.PathLike | Home | None, events: Iterable[AnyEvent | Mapping[str, Any]], *,
           fsync: FsyncPolicy = "batch", source: str = "<input>") -> AppendResult:
    """Validate the whole batch, fill ``id`` and ``at`` where absent, and append each event to its stream.

    All or nothing on validation: an invalid item raises :class:`InvalidBatch` and no byte is
    written. A failed write (disk full) truncates the stream back to its last whole line, so a
    batch cut by an I/O error leaves a clean prefix of it.
    """
    if fsync not in ("always", "batch", "never"):
        raise ValueError(f"fsync must be always, batch or never, not {fsync!r}")
    home = Home.resolve(home)
    batch = prepare(events, source=source)
    now = format_timestamp(_utcnow())
    lines: dict[str, list[bytes]] = {}
    result = AppendResult()
    for event in batch:
        event = _stamp(event, now)
        lines.setdefault(stream_of(event.type), []).append(to_json_line(event))
        result.ids.append(event.id)
    for stream in STREAMS:  # fixed lock order: no deadlock between two batches
        todo = lines.get(stream)
        if not todo:
            continue
        with locked(home, stream) as fd:
            fragment = _quarantine_tail(home, stream, fd)
            if fragment:
                result.quarantined.append(fragment)
            for line in todo:
                start = os.lseek(fd, 0, os.SEEK_END)
                try:
                    _write_all(fd, line)
                except BaseException:
                    os.ftruncate(fd, start)
                    raise
                if fsync == "always":
                    os.fsync(fd)
            if fsync == "batch":
                os.fsync(fd)
        result.streams[stream] = len(todo)
        result.appended += len(todo)
    return result


def _utcnow():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def repair(home: str | os.PathLike | Home | None = None) -> list[str]:
    """Quarantine torn tails of every stream (under each stream's lock); return the fragment paths."""
    home = Home.resolve(home)
    moved = []
    for stream in STREAMS:
        if not home.stream(stream).exists():
            continue
        with locked(home, stream) as fd:
            fragment = _quarantine_tail(home, stream, fd)
            if fragment:
                moved.append(fragment)
    return moved


@dataclass(frozen=True)
class RawLine:
    line_no: int  # 1-based
    offset: int  # byte offset of the line's first byte
    raw: bytes  # without the trailing newline


def read_lines(home: str | os.PathLike | Home | None, stream: str, *, start: int = 0,
               start_line: int = 1) -> Iterator[RawLine]:
    """Yield the complete lines of a stream from byte ``start``; bytes after the last newline are never read."""
    path = Home.resolve(home).stream(stream)
    if not path.exists():
        return
    with open(path, "rb") as handle:
        handle.seek(start)
        offset, line_no, pending = start, start_line, b""
        while chunk := handle.read(1 << 20):
            pending += chunk
            pieces = pending.split(b"\n")
            pending = pieces.pop()
            for piece in pieces:
                yield RawLine(line_no, offset, piece)
                offset += len(piece) + 1
                line_no += 1


def read(home: str | os.PathLike | Home | None, stream: str, *, errors: Literal["raise", "skip"] = "raise",
         max_bytes: int | None = None) -> Iterator[AnyEvent]:
    """Yield the events of a stream in order. Invalid lines raise :class:`InvalidEvent` or are skipped."""
    home = Home.resolve(home)
    source = str(home.stream(stream))
    kwargs = {"max_bytes": max_bytes} if max_bytes else {}
    for line in read_lines(home, stream):
        try:
            yield parse_line(line.raw, line=line.line_no, source=source, **kwargs)
        except InvalidEvent:
            if errors == "raise":
                raise
