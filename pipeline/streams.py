"""The append-only task and rating streams (DESIGN 4).

Lock protocol, the same for every writer in any language (the README repeats it):

1. open ``streams/.<stream>.lock`` (``O_RDWR|O_CREAT``, never delete it) and take an
   exclusive ``flock(2)`` on it (BSD ``flock``, not ``fcntl``/POSIX record locks: on
   Linux the two do not exclude each other);
2. open ``streams/<stream>.jsonl`` with ``O_RDWR|O_APPEND|O_CREAT``;
3. if the file is not empty and does not end in ``\n``, copy the bytes after the last
   newline to a new file ``quarantine/<stream>.<offset, 20 digits>.<unique>.fragment``
   (``O_EXCL``), fsync it and the ``quarantine/`` directory, then ``ftruncate`` the stream
   to that offset and fsync it;
4. write each line (one compact UTF-8 JSON object + ``\n``, at most 1 MiB) with one
   ``write`` call; finish a short write before the next line; on an error, truncate
   the stream back to where that line began;
5. fsync as the policy says (``always``: after each line, ``batch``: once), close the
   stream, release the lock. Hold one stream's lock at a time.

Readers take no lock: they stop at the last newline.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Literal

from .errors import InvalidBatch, InvalidEvent
from .events import (
    DEFAULT_MAX_LINE_BYTES,
    KNOWN,
    AnyEvent,
    Event,
    decode_line,
    encode_line,
    format_timestamp,
    parse_line,
    stream_of,
    validate_object,
    with_head,
)
from .home import STREAMS, Home, fsync_dir

FsyncPolicy = Literal["always", "batch", "never"]
_CHUNK = 1 << 16
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

    def next(self) -> str:
        with self.lock:  # threads of one dispatcher must not draw the same increment
            ms = int(time.time() * 1000)
            if ms > self.ms:  # a clock that steps back keeps the last millisecond: ids still sort
                # top bit clear: 2**79 increments of room before the 80 bits could overflow
                self.ms, self.random, self.high = ms, int.from_bytes(os.urandom(10), "big") >> 1, -1
            else:
                self.random += 1
            high = self.random >> 10
            if high != self.high:
                self.high, self.prefix = high, _encode(self.ms, 10) + _encode(high, 14)
            return self.prefix + _PAIRS[self.random & 1023]


_ULIDS = _MonotonicUlids()
os.register_at_fork(after_in_child=_ULIDS.reset)


def new_id(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, Crockford base32 (sorts by time).

    Without ``now_ms``: the current time, monotonic within this process.
    """
    if now_ms is None:
        return _ULIDS.next()
    return _encode(now_ms, 10) + _encode(int.from_bytes(os.urandom(10), "big"), 16)


@dataclass
class AppendResult:
    appended: int = 0
    streams: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    unknown_types: dict[str, int] = field(default_factory=dict)  # kept as family ``other``, ignored by the fit

    def summary(self) -> dict[str, Any]:
        return {"appended": self.appended, "streams": dict(self.streams)}


@dataclass
class Batch:
    """A validated batch: the lines to write per stream, and the id of every event in input order."""

    lines: dict[str, list[bytes]] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    unknown_types: dict[str, int] = field(default_factory=dict)


Item = AnyEvent | Mapping[str, Any] | bytes | str


def prepare(
    events: Iterable[Item], *, source: str = "<input>", max_bytes: int = DEFAULT_MAX_LINE_BYTES, now: str | None = None
) -> Batch:
    """Validate a whole batch and render its lines; raise :class:`InvalidBatch` with every bad item.

    An item is an event model, a mapping (what a dispatcher passes) or one raw JSON line
    (bytes or str). Item ``i`` (1-based) is reported as ``source:i``. Each line is built
    from the item's own fields (no model round trip): ``id`` and ``at`` filled when absent,
    ``at`` normalised to UTC, unknown fields kept as given.
    """
    now = now or format_timestamp(_utcnow())
    lines: dict[str, list[bytes]] = {stream: [] for stream in STREAMS}
    ids: list[str] = []
    errors: list[InvalidEvent] = []
    unknown: dict[str, int] = {}
    for i, item in enumerate(events, start=1):
        try:
            if type(item) is dict:  # the common case first: what a dispatcher passes
                data = item
                event = validate_object(data)
            elif isinstance(item, Event):
                event, data = item, item.model_dump(mode="json", exclude_unset=True)
            else:
                if isinstance(item, (bytes, bytearray, memoryview, str)):
                    data = decode_line(item, max_bytes=max_bytes)
                else:
                    data = dict(item) if isinstance(item, Mapping) else item
                event = validate_object(data)
            event_id = event.id or new_id()
            line = encode_line(with_head(data, event, id=event_id, at=event.at or now), max_bytes=max_bytes)
        except InvalidEvent as exc:
            errors.append(exc.located(source=source, line=i))
            continue
        lines[stream_of(event.type)].append(line)
        ids.append(event_id)
        if event.type not in KNOWN:
            unknown[event.type] = unknown.get(event.type, 0) + 1
    if errors:
        raise InvalidBatch(errors)
    return Batch(lines={stream: todo for stream, todo in lines.items() if todo}, ids=ids, unknown_types=unknown)


@contextmanager
def locked(home: Home, stream: str, *, durable: bool = True) -> Iterator[int]:
    """Hold the stream's exclusive lock; yield an O_APPEND descriptor on the stream.

    ``durable``: fsync the directory when this call created the stream file.
    """
    home.streams.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(home.stream_lock(stream), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        path = home.stream(stream)
        existed = path.exists()
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if durable and not existed:
                fsync_dir(home.streams)
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
    """Move bytes after the last newline to ``quarantine/`` (fsync'd), then truncate. Caller holds the lock.

    The fragment is durable before the stream loses it: a crash in between leaves a copy, never a loss.
    """
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return None
    keep = _last_newline_end(fd, size)
    tail = os.pread(fd, size - keep, keep)
    home.quarantine.mkdir(parents=True, exist_ok=True)
    path = home.quarantine / f"{stream}.{keep:020d}.{new_id()}.fragment"
    qfd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(qfd, tail)
        os.fsync(qfd)
    except BaseException:
        os.close(qfd)
        with suppress(OSError):
            os.unlink(path)
        raise
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


def _write_lines(fd: int, lines: list[bytes], fsync: FsyncPolicy) -> None:
    """Write ``lines`` under the lock. On an error, the partial line is cut so the stream ends on a newline."""
    end = os.fstat(fd).st_size  # the stream ends on a newline here: its tail was just quarantined
    for n, line in enumerate(lines):
        try:
            _write_all(fd, line)
        except BaseException as exc:
            with suppress(OSError):
                os.ftruncate(fd, end)
            exc.add_note(f"{n} of the {len(lines)} line(s) of this batch for this stream were appended before it")
            raise
        end += len(line)
        if fsync == "always":
            os.fsync(fd)
    if fsync == "batch":
        os.fsync(fd)


def append(
    home: str | os.PathLike | Home | None,
    events: Iterable[Item],
    *,
    fsync: FsyncPolicy = "batch",
    source: str = "<input>",
    max_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> AppendResult:
    """Validate the whole batch, fill ``id`` and ``at`` where absent, and append each event to its stream.

    All or nothing on validation: an invalid item raises :class:`InvalidBatch` and no byte is
    written. An I/O error (disk full) cuts the line it interrupted, so the stream still ends on
    a whole line; lines written before it stay (a reader may already have seen them), and the
    error's note says how many.
    """
    if fsync not in ("always", "batch", "never"):
        raise ValueError(f"fsync must be always, batch or never, not {fsync!r}")
    home = Home.resolve(home)
    batch = prepare(events, source=source, max_bytes=max_bytes)
    result = AppendResult(ids=batch.ids, unknown_types=batch.unknown_types)
    for stream in STREAMS:  # fixed order, one lock at a time: no deadlock between two batches
        todo = batch.lines.get(stream)
        if not todo:
            continue
        with locked(home, stream, durable=fsync != "never") as fd:
            fragment = _quarantine_tail(home, stream, fd)
            if fragment:
                result.quarantined.append(fragment)
            _write_lines(fd, todo, fsync)
        result.streams[stream] = len(todo)
        result.appended += len(todo)
    return result


def _utcnow():
    from datetime import datetime

    return datetime.now(UTC)


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


def read_lines(
    home: str | os.PathLike | Home | None, stream: str, *, start: int = 0, start_line: int = 1
) -> Iterator[RawLine]:
    """Yield the complete lines of a stream from byte ``start``; bytes after the last newline are never yielded."""
    path = Home.resolve(home).stream(stream)
    if not path.exists():
        return
    with open(path, "rb") as handle:
        handle.seek(start)
        offset, line_no = start, start_line
        pending: list[bytes] = []  # pieces of a line longer than one chunk
        while chunk := handle.read(1 << 20):
            if b"\n" not in chunk:
                pending.append(chunk)
                continue
            pieces = chunk.split(b"\n")
            if pending:
                pieces[0] = b"".join(pending) + pieces[0]
            pending = [pieces.pop()]
            for piece in pieces:
                yield RawLine(line_no, offset, piece)
                offset += len(piece) + 1
                line_no += 1


def read(
    home: str | os.PathLike | Home | None,
    stream: str,
    *,
    errors: Literal["raise", "skip"] = "raise",
    max_bytes: int | None = None,
) -> Iterator[AnyEvent]:
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
