"""Batch framing: a batch of several events is all or nothing for every reader (docs/design.md, Storage).

The protocol, which every writer and reader of the streams follows (the README repeats the writer's steps):

**Lines.** A batch of several events is written, per stream, as a *part*: a begin line, the part's event lines
(``B`` bytes in all, newlines included), an end line. Frame lines have exactly these bytes (compact JSON, keys in
this order, no other field)::

    {"type":"batch.begin","id":"<batch id>","lines":N,"bytes":B}
    {"type":"batch.begin","id":"<batch id>","lines":N,"bytes":B,"then":{"ratings":R}}   (tasks part of a 2-stream batch)
    {"type":"batch.end","id":"<batch id>"}

A batch with events for both streams frames both parts with one id; the tasks part's begin carries ``then``: the
size ``R`` of the ratings stream when the batch started, where its ratings part begins. The types ``batch.begin``
and ``batch.end`` are reserved: no event has them, and a line of either type that is not a frame in the exact
form above is an invalid line like any other. A single-line append carries no frame.

**Writer** (under the ``flock`` of each stream it writes, taken in the order tasks then ratings):

1. recover (below); then, before writing a part, write the note ``<batch id> <begin offset>\\n`` into the
   stream's lock file (``pwrite`` at 0, ``ftruncate`` to its length, fsync unless the policy is ``never``);
2. write the part: begin, lines, end. A two-stream batch writes the tasks begin and lines (fsync), then the whole
   ratings part (fsync), then the tasks end, so that a whole tasks part implies a whole ratings part, also on disk;
3. fsync per policy, then truncate the lock file to 0 (the batch is whole; the note is gone).

An error while writing (a full disk) truncates what the batch wrote and clears the notes: nothing was appended.

**Recovery** (by the next holder of a stream's lock: a writer, ``ratings repair``, :func:`consistent_cut`):

- a torn tail (bytes after the last newline) is moved to ``quarantine/<stream>.<offset>.<unique>.fragment``;
- a note ``X O``: if the stream holds a whole part X at O, the batch completed: clear the note. If the bytes at O
  are not the begin of X, the part was never written: clear the note. If it is a tasks part with ``then`` whose
  lines are all there (only its end is missing) and the ratings stream holds a whole part X at R, roll forward:
  append the end. Otherwise roll back: move bytes [O, end of stream) to
  ``quarantine/<stream>.<O as 20 digits>.<unique>.batch`` (fsync'd, then the directory), truncate the stream
  to O, fsync it, clear the note.

**Readers** decide each line with :func:`~pipeline.streams.log.scan` (the reference; compaction may decide the same
vectorised and is tested against it): an event line outside any part is taken; a part's event lines are taken only
when the part is whole (begin X, then exactly N lines in exactly B bytes, then end X); frame lines are never events.
A part that the data read does not yet cover (a live writer is still writing, or recovery will resolve it) stops the
range before its begin. A part that cannot become whole (a frame line inside it, its end missing where its byte
count says, the count of its lines wrong) is *broken*: its begin and its lines (those starting within its B bytes,
up to any frame line inside them, so a later batch is never swallowed) go to the dead letters with the reason, and
reading goes on after them; so does an end with no begin. Only a writer that breaks the protocol leaves a broken
part.

:func:`consistent_cut` takes both stream locks, recovers both streams and returns their sizes: every batch lies
wholly inside or wholly outside the cut. The frame lines and the reference scanner are :mod:`pipeline.streams.scan`;
this module is the writer's side: locks, notes, quarantine, recovery, the cut, writing.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Literal

from ..workspace import STREAMS, StrPath, Workspace, fsync_dir
from .scan import (
    BATCH_ID_RE,
    BLOCK,
    FRAME_PREFIX,
    BatchBegin,
    BatchEnd,
    Frame,
    Pread,
    Then,
    check_part,
    complete_end,
    frame_of,
    lines_at,
)
from .ulid import new_id

FsyncPolicy = Literal["always", "batch", "never"]

_WRITE = 1 << 22  # bytes per write call of a part
_NOTE_RE = BATCH_ID_RE + rb" (0|[1-9][0-9]{0,18})\n"


# --------------------------------------------------------------------------- locks
@dataclass
class Held:
    """A stream whose lock this process holds: the lock file and the stream, both open."""

    stream: str
    lock_fd: int
    fd: int  # O_RDWR | O_APPEND
    path: str


def waiting_for(stream: str) -> None:
    """Called when :func:`hold` finds a stream's lock held by another writer, before it blocks on it.

    Does nothing; tests replace it to observe the wait instead of assuming it by sleeping.
    """


@contextmanager
def hold(
    ws: Workspace, streams: Sequence[str], *, create: bool = True, durable: bool = True
) -> Iterator[dict[str, Held]]:
    """Take the exclusive ``flock`` of each stream in the fixed order (tasks, then ratings) and open the streams.

    Every path is confined to the home (a symbolic link is refused). Without ``create`` a stream that does not
    exist is left out (nothing to recover in it, size 0), but its lock is still taken and held: a writer takes
    the lock before it creates the stream, so a stream that is missing under its lock stays missing until the
    lock is released (checking for the file before taking the lock would let a two-stream batch start and end
    between the check and the other stream's lock). Only a home without ``streams/`` takes no lock at all: a
    writer starting there writes wholly after the cut. ``durable``: fsync ``streams/`` when this call created a
    stream or a lock file, so a note written to a new lock file survives a power loss.
    """
    ordered = [s for s in STREAMS if s in streams]
    if create:
        ws.root.mkdir(parents=True, exist_ok=True)  # the home itself may be new (its folders are confined)
    elif not ws.streams.is_dir():
        ordered = []
    with ExitStack() as stack:
        held: dict[str, Held] = {}
        for stream in ordered:
            lock_path, path = ws.stream_lock(stream), ws.stream(stream)
            created = not lock_path.exists() or not path.exists()
            lock_fd = ws.open(lock_path, os.O_RDWR | os.O_CREAT)
            stack.callback(os.close, lock_fd)  # closing releases the flock
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another writer holds it: wait for it
                waiting_for(stream)
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
            if not create and not os.path.lexists(path):
                continue  # under its lock: no writer is creating it now
            fd = ws.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            stack.callback(os.close, fd)
            if durable and created:
                fsync_dir(ws.streams)
            held[stream] = Held(stream, lock_fd, fd, str(path))
        yield held


# --------------------------------------------------------------------------- notes in the lock file
def write_note(held: Held, batch_id: str, offset: int, *, durable: bool) -> None:
    """Step 1 of the writer: ``<batch id> <begin offset>\\n`` at the start of the lock file, nothing after it."""
    note = f"{batch_id} {offset}\n".encode()
    written = os.pwrite(held.lock_fd, note, 0)
    while written < len(note):
        written += os.pwrite(held.lock_fd, note[written:], written)
    os.ftruncate(held.lock_fd, len(note))
    if durable:
        os.fsync(held.lock_fd)


def read_note(held: Held) -> tuple[str, int] | Literal[False] | None:
    """The note in the lock file: ``(batch id, offset)``, None when there is none, False when it is garbled
    (a note cut short: its part was never begun, since a writer writes a part only after its note)."""
    size = os.fstat(held.lock_fd).st_size
    if size == 0:
        return None
    match = re.fullmatch(_NOTE_RE, os.pread(held.lock_fd, min(size, 256), 0))
    if not match:
        return False
    return match.group(1).decode(errors="replace"), int(match.group(2))


def clear_note(held: Held) -> None:
    """Step 3 of the writer: the batch is whole (or resolved), the note goes. Not fsync'd: a note that comes
    back after a power loss names a whole part, which recovery clears again."""
    os.ftruncate(held.lock_fd, 0)


# --------------------------------------------------------------------------- quarantine
def _write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data``; a short write is finished before returning."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def quarantine_range(ws: Workspace, held: Held, start: int, end: int, kind: Literal["fragment", "batch"]) -> str:
    """Copy bytes ``[start, end)`` of the stream to a new ``quarantine/<stream>.<start>.<unique>.<kind>`` file,
    fsync it and the folder, then truncate the stream to ``start`` and fsync it. A crash in between leaves a
    copy, never a loss."""
    path = ws.quarantined(held.stream, start, new_id(), kind)
    qfd = ws.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        pos = start
        while pos < end:
            block = os.pread(held.fd, min(BLOCK, end - pos), pos)
            if not block:
                raise OSError(f"{held.path} shrank while it was being quarantined")
            _write_all(qfd, block)
            pos += len(block)
        os.fsync(qfd)
    except BaseException:
        os.close(qfd)
        with suppress(OSError):
            os.unlink(path)
        raise
    os.close(qfd)
    fsync_dir(ws.quarantine)
    os.ftruncate(held.fd, start)
    os.fsync(held.fd)
    return str(path)


# --------------------------------------------------------------------------- recovery
@dataclass
class Recovery:
    """What recovery did to the streams it held."""

    quarantined: list[str] = field(default_factory=list)  # fragment and batch files written
    completed: list[str] = field(default_factory=list)  # "<stream>:<batch id>" rolled forward (end appended)

    def merge(self, other: Recovery) -> None:
        self.quarantined += other.quarantined
        self.completed += other.completed


def _pread_of(fd: int) -> Pread:
    return lambda n, off: os.pread(fd, n, off)


def _begin_at(fd: int, offset: int, limit: int) -> tuple[BatchBegin, int] | None:
    """The begin line at ``offset`` and its length (newline included), if a whole begin line is there."""
    for _, raw in lines_at(_pread_of(fd), offset, limit):
        frame = frame_of(raw)
        return (frame, len(raw) + 1) if isinstance(frame, BatchBegin) else None
    return None


def whole_part_at(fd: int, offset: int, batch_id: str) -> bool:
    """Whether the stream open at ``fd`` holds a whole part of batch ``batch_id`` at ``offset``."""
    limit = complete_end(_pread_of(fd), offset, os.fstat(fd).st_size)
    found = _begin_at(fd, offset, limit)
    if found is None or found[0].id != batch_id:
        return False
    return check_part(_pread_of(fd), offset, found[0], found[1], limit).kind == "whole"


def last_frame(pread: Pread, size: int) -> tuple[int, Frame] | None:
    """The last frame line among the complete lines of a stream of ``size`` bytes: (offset, frame)."""
    limit = complete_end(pread, 0, size)
    width = len(FRAME_PREFIX)
    high = limit  # a frame line starts before ``high``
    while high > 0:
        low = max(0, high - BLOCK)
        block = pread(min(limit, high + width) - low, low)
        stop = high - low + width  # rfind finds a prefix lying wholly inside block[:stop]
        while (idx := block.rfind(FRAME_PREFIX, 0, stop)) >= 0:
            before = block[idx - 1 : idx] if idx else (pread(1, low - 1) if low else b"\n")
            if before == b"\n":  # a line starts here
                offset, raw = next(lines_at(pread, low + idx, limit))
                if (frame := frame_of(raw)) is not None:
                    return offset, frame
            stop = idx + width - 1
        high = low
    return None


def _unfinished_tail(fd: int, size: int) -> tuple[str, int] | None:
    """(batch id, offset) of an unfinished part at the end of the stream, as if a note named it."""
    found = last_frame(_pread_of(fd), size)
    if found is None:
        return None
    offset, begin = found
    if not isinstance(begin, BatchBegin):
        return None
    if check_part(_pread_of(fd), offset, begin, len(begin.line()), size).kind != "unfinished":
        return None
    return begin.id, offset


def recover(ws: Workspace, held: Held, *, durable: bool = True, scan_tail: bool = False) -> Recovery:
    """Resolve what a writer that died holding this stream's lock left: a torn tail, a batch cut short.

    The caller holds the lock. Roll forward reads the ratings stream without its lock: a whole ratings part is
    never removed by anyone (recovery rolls back only parts that are not whole). ``scan_tail`` (``ratings
    repair``): with no note, look back for the last frame line as well, and resolve a batch left unfinished at
    the end as if a note named it (only a power loss with ``fsync=never``, or a writer that skips the note,
    leaves one; readers stop before it until then).
    """
    done = Recovery()
    size = os.fstat(held.fd).st_size
    if size and os.pread(held.fd, 1, size - 1) != b"\n":
        keep = complete_end(_pread_of(held.fd), 0, size)
        done.quarantined.append(quarantine_range(ws, held, keep, size, "fragment"))
        size = keep
    note = read_note(held)
    if note is None and scan_tail:
        note = _unfinished_tail(held.fd, size)
    if note is None:
        return done
    if note is False:
        clear_note(held)
        return done
    batch_id, offset = note
    found = _begin_at(held.fd, offset, size) if offset < size else None
    if found is None or found[0].id != batch_id:  # the part was never begun (or the note is stale)
        clear_note(held)
        return done
    begin, begin_len = found
    part = check_part(_pread_of(held.fd), offset, begin, begin_len, size)
    if part.kind == "whole":
        clear_note(held)
        return done
    if held.stream == "tasks" and begin.then is not None and part.lines_complete and _ratings_whole(ws, begin):
        _write_all(held.fd, BatchEnd(id=batch_id).line())
        if durable:
            os.fsync(held.fd)
        clear_note(held)
        done.completed.append(f"{held.stream}:{batch_id}")
        return done
    done.quarantined.append(quarantine_range(ws, held, offset, size, "batch"))
    clear_note(held)
    return done


def _ratings_whole(ws: Workspace, begin: BatchBegin) -> bool:
    assert begin.then is not None
    path = ws.stream("ratings")
    if not path.exists():
        return False
    fd = ws.open(path, os.O_RDONLY)
    try:
        return whole_part_at(fd, begin.then.ratings, begin.id)
    finally:
        os.close(fd)


def recover_all(ws: Workspace, held: Mapping[str, Held], *, durable: bool = True, scan_tail: bool = False) -> Recovery:
    """:func:`recover` each held stream in the fixed order (tasks, then ratings)."""
    done = Recovery()
    for stream in STREAMS:
        if stream in held:
            done.merge(recover(ws, held[stream], durable=durable, scan_tail=scan_tail))
    return done


def consistent_cut(home: Workspace | StrPath | None) -> dict[str, int]:
    """``{stream: size}`` such that every batch lies wholly inside or wholly outside ``[0, size)``.

    Takes both stream locks (tasks, then ratings), recovers both streams, reads their sizes, releases the
    locks. Compaction takes its input range from it (holding the locks only for that moment).
    """
    ws = Workspace.of(home)
    with hold(ws, STREAMS, create=False) as held:
        recover_all(ws, held)
        return {stream: os.fstat(held[stream].fd).st_size if stream in held else 0 for stream in STREAMS}


# --------------------------------------------------------------------------- writing
def write_line(held: Held, line: bytes, fsync: FsyncPolicy) -> None:
    """A single-line append (no frame): one write; on an error the partial line is cut off again."""
    end = os.fstat(held.fd).st_size
    try:
        _write_all(held.fd, line)
    except BaseException:
        with suppress(OSError):
            os.ftruncate(held.fd, end)
        raise
    if fsync != "never":
        os.fsync(held.fd)


def _write_chunked(held: Held, pieces: Sequence[bytes], fsync: FsyncPolicy) -> None:
    """Write ``pieces`` in few large writes (about 4 MiB each); ``always`` fsyncs between them as well (the
    caller fsyncs after the last)."""
    data = b"".join(pieces)
    if len(data) < _WRITE:  # one write, as the loop below would do
        _write_all(held.fd, data)
        return
    buffer: list[bytes] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= _WRITE:
            _write_all(held.fd, b"".join(buffer))
            buffer, size = [], 0
            if fsync == "always":
                os.fsync(held.fd)
    if buffer:
        _write_all(held.fd, b"".join(buffer))


def batch_id_of(event_ids: Sequence[str]) -> str:
    """The id of a batch: 32 hex digits of the SHA-256 of its events' ids, so that appending the same events
    (with their own ids and times) gives the same bytes in any home. Frames are matched by position, so a batch
    appended twice may carry one id twice."""
    return hashlib.sha256("\n".join(event_ids).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def write_batch(
    held: Mapping[str, Held], parts: Mapping[str, Sequence[bytes]], fsync: FsyncPolicy, *, batch_id: str | None = None
) -> str:
    """Steps 1 to 3 of the writer for one batch (the caller holds the locks of ``parts``' streams and has
    recovered them); return the batch id (default: a new ULID). On an error every stream is truncated back:
    nothing was appended."""
    batch_id = batch_id or new_id()
    order = [s for s in STREAMS if parts.get(s)]
    starts = {s: os.fstat(held[s].fd).st_size for s in order}
    durable = fsync != "never"

    def begin(stream: str, then: int | None = None) -> bytes:
        lines = parts[stream]
        size = sum(map(len, lines))
        return BatchBegin(
            id=batch_id, lines=len(lines), bytes=size, then=Then(ratings=then) if then is not None else None
        ).line()

    end = BatchEnd(id=batch_id).line()
    try:
        for stream in order:
            write_note(held[stream], batch_id, starts[stream], durable=durable)
        if len(order) == 2:
            tasks, ratings = held["tasks"], held["ratings"]
            _write_chunked(tasks, [begin("tasks", starts["ratings"]), *parts["tasks"]], fsync)
            if durable:
                os.fsync(tasks.fd)  # the tasks lines are on disk before the ratings part can be
            _write_chunked(ratings, [begin("ratings"), *parts["ratings"], end], fsync)
            if durable:
                os.fsync(ratings.fd)  # the ratings part is on disk before the tasks end can be
            _write_chunked(tasks, [end], fsync)
            if durable:
                os.fsync(tasks.fd)
        else:
            only = held[order[0]]
            _write_chunked(only, [begin(order[0]), *parts[order[0]], end], fsync)
            if durable:
                os.fsync(only.fd)
    except BaseException as exc:
        _roll_back(held, starts, durable, exc)
        raise
    for stream in order:
        clear_note(held[stream])
    return batch_id


def _roll_back(held: Mapping[str, Held], starts: Mapping[str, int], durable: bool, exc: BaseException) -> None:
    """Undo a batch the writer could not finish: truncate each stream back, then clear its note. When that
    fails too, the notes stay and the next holder of the locks rolls the batch back."""
    try:
        for stream, start in starts.items():
            os.ftruncate(held[stream].fd, start)
            if durable:
                os.fsync(held[stream].fd)
        for stream in starts:
            clear_note(held[stream])
        exc.add_note("the batch was rolled back: nothing of it was appended")
    except OSError as undo:
        exc.add_note(f"the batch could not be rolled back ({undo}); the next append or `ratings repair` will")
