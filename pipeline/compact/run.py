"""One compaction: the new bytes of this home's streams -> one commit of the events table (docs/design.md, Storage).

Steps, each safe to interrupt:

1. take ``store/.compact.lock`` (one compactor per home); open the table at its newest version ``r``
   (create it when there is none); read this writer's application transactions: per stream the byte offset
   consumed so far, the next line number and the size of its dead-letter file;
2. cut each ``deadletter/<stream>.jsonl`` back to that size (lines of a crashed run go; the rerun writes them
   again); take each stream's range up to its last complete line;
3. read the ranges in chunks; validate (vectorised, the unusual lines one by one); drop ids the run already
   took (same payload) or dead-letter them (another payload); hold back ids the table already has;
4. write Parquet files per (family, event date) as the buffer fills; resolve the held-back ids against the
   stored rows (one read of the table); fsync files, directories and dead letters;
5. commit every file in one Delta commit carrying, per (writer, stream), the application transaction whose
   version is the end offset consumed, and commit metadata (byte ranges, sha256 of the bytes read, outcome
   counts, event schema version). Until then nothing of the run is visible; after it, everything is;
6. let Delta's optimize merge the files of partitions that hold too many (a commit of its own, no data change).

A crash before step 5 leaves only files no commit names (``ratings vacuum`` removes them); the rerun redoes
the same bytes. A crash after it finds the offsets moved on and lands nothing twice. Concurrent commits of
other writers are retried by delta-rs (appends do not conflict).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sys
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from ..errors import Busy, InvalidEvent, StoreConflict, StoreCorrupt
from ..families import COLUMNS
from ..home import STREAMS, Home
from ..store import location as loc
from ..store.schema import DATA_SCHEMA, PARTITIONS, TABLE_CONFIGURATION, TABLE_SCHEMA
from ..store.table import (
    RECOVER,
    exists,
    fail,
    home_txn_id,
    machine_errors,
    machine_failure,
    open_table,
    store_errors,
    txn_ids,
)
from ..store.writer import WriterIdentity, check_name, identity, remember
from ..streams.events import (
    DEFAULT_MAX_LINE_BYTES,
    FAMILY,
    SCHEMA_VERSION,
    format_timestamp,
    parse_line,
    stream_of,
)
from ..streams.framing import consistent_cut
from ..streams.future import MAX_FUTURE, future_reason, latest_time
from ..streams.log import new_id
from .files import DeadLetters, TableFiles, deadletter_record, encode_columns, file_stats, partition_dir
from .frames import FramePlan, plan_frames
from .ids import CONFLICT, DEFERRED, DUPLICATE, NEW, IdSet, LineReader, argsort_stable, hash_ids, position
from .parse import Chunk, ParsedChunk, parse_chunk
from .rows import event_row

DEFAULT_MERGE_THRESHOLD = 16  # files in one partition before Delta's optimize merges them
# Bytes read at a time. Under glibc's largest mmap threshold (32 MiB): a freed block's memory is reused for the
# next one instead of being mapped afresh, page-faulted and zeroed by the kernel for every block (measured with
# bench.compact: half the page faults of 32 MiB blocks, a third less system time; 8 MiB costs more per chunk).
DEFAULT_CHUNK_BYTES = 16 << 20
DEFAULT_BUFFER_ROWS = 1_000_000  # rows held in memory before they are written out
METADATA_KEY = "ratings.compaction"  # the commit metadata this compactor writes
_WORKERS = 2  # chunks parsed / files written at once
LONG_LINE_HEAD = 4096  # bytes of a line over the size limit its dead letter keeps
#: The stream each family's events are appended to (unknown types, family ``other``, go to ``tasks``).
STREAM_OF_FAMILY = {family: stream_of(t) for t, family in FAMILY.items()} | {"other": stream_of("other")}


class Outcomes(BaseModel):
    """What happened to the lines of one stream range."""

    model_config = ConfigDict(extra="forbid")

    lines: int = 0
    stored: int = 0
    duplicate: int = 0  # same id and same payload as an event already stored: dropped
    conflict: int = 0  # same id, different payload: dead-lettered
    invalid: int = 0  # not a valid v1 event (or a line of a broken batch): dead-lettered
    frames: int = 0  # batch frame lines (pipeline.streams.framing): not events, neither stored nor dead-lettered


class StreamRange(BaseModel):
    """The bytes ``[start, end)`` of one writer's stream consumed by one commit, and what became of them."""

    model_config = ConfigDict(extra="forbid")

    start: int = 0
    end: int = 0
    sha256: str = ""  # of the bytes [start, end)
    line_start: int = 1  # line number of the first line of the range (1-based)
    outcomes: Outcomes = Field(default_factory=Outcomes)
    deadletter: tuple[int, int] = (0, 0)  # bytes of deadletter/<stream>.jsonl written for this range

    @property
    def next_line(self) -> int:
        return self.line_start + self.outcomes.lines


class CommitRecord(BaseModel):
    """The commit metadata of one compaction (``ratings.compaction`` in the commit info)."""

    model_config = ConfigDict(extra="forbid")

    writer: str
    read_version: int | None  # the table version the run deduplicated against
    event_schema_version: int
    streams: dict[str, StreamRange]


class CompactResult(BaseModel):
    """What one compaction did."""

    version: int | None  # the table's newest version after this run (None: no table yet)
    created: bool  # whether this run committed new data
    writer: str
    streams: dict[str, Outcomes]
    files_written: int
    files_merged: int  # files Delta's optimize replaced by merged ones
    rows: dict[str, int]  # rows per family in the whole table (as the commit statistics count them)
    notes: list[str] = Field(default_factory=list)  # e.g. the upgrade of an old store

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def fault_hook(step: str) -> None:
    """Called between the durable steps (``after-files``, ``before-commit``, ``after-commit``, ``after-optimize``).

    Does nothing; crash tests replace it (in a child process) to kill the run at a chosen step.
    """


@contextmanager
def compact_lock(home: Home, location: loc.Location | None = None) -> Iterator[None]:
    """One compactor per home: an exclusive ``flock`` on ``store/.compact.lock`` (waits for the holder); inside
    the home, or through a link into the store given with ``--store`` (``location``)."""
    bounds = location.bounds if location is not None else home.bounds
    fd = bounds.open(home.store / ".compact.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def compact(
    home: str | os.PathLike | Home | None = None,
    *,
    progress: bool = False,
    merge_threshold: int = DEFAULT_MERGE_THRESHOLD,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    buffer_rows: int = DEFAULT_BUFFER_ROWS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    rebuild: bool = False,
    config: loc.StoreConfig | None = None,
    future: timedelta | None = MAX_FUTURE,
) -> CompactResult:
    """Compact the new bytes of every stream into the table; a run with no new input commits nothing.

    ``rebuild`` rebuilds a local store's table from the streams (the old one moved aside once the new one is
    whole). A line dated more than ``future`` after this run is dead-lettered (written past the skew by a writer
    that did not check it; None: any time is stored).
    """
    if merge_threshold < 2:
        raise ValueError("merge_threshold must be at least 2")
    home = Home.resolve(home)
    location = loc.resolve(home, config)
    config = config if config is not None else loc.current_config()
    if config.writer is not None:
        check_name(config.writer)
    if location.local is None:
        exists(location)  # an unreachable object store is one line before anything is written
    with machine_errors("compact (nothing of this run is visible)"), compact_lock(home, location):
        from ..store.upgrade import Rebuild, upgrade_if_old

        notes = upgrade_if_old(home, location)
        writer = identity(home, config.writer, location.bounds)
        build = Rebuild.start(home, location) if rebuild else None

        def run_once() -> CompactResult:
            run = _Run(
                home,
                build.build if build is not None else location,
                writer,
                merge_threshold=merge_threshold,
                chunk_bytes=chunk_bytes,
                buffer_rows=buffer_rows,
                max_line_bytes=max_line_bytes,
                progress=progress,
                future=future,
                deadletters=build.letters if build is not None else home.deadletter,
            )
            try:
                return run.run()
            finally:
                run.close()

        if build is None:
            result = run_once()
        else:
            try:
                result = run_once()
            except BaseException:
                build.abandon()  # the old table and dead letters were never moved: the store is as it was
                raise
            notes += build.finish()
    return result.model_copy(update={"notes": notes + result.notes})


def _last_newline_end(handle: Any, start: int, size: int) -> int:
    """Offset just after the last ``\\n`` in ``[start, size)``, or ``start`` when there is none."""
    pos = size
    while pos > start:
        lo = max(start, pos - (1 << 16))
        handle.seek(lo)
        idx = handle.read(pos - lo).rfind(b"\n")
        if idx >= 0:
            return lo + idx + 1
        pos = lo
    return start


@dataclass
class _Held:
    """Rows whose id the table already has: resolved against the stored rows at the end of the run."""

    family: str
    rows: pa.Table  # with _line
    chunk: Chunk
    letters: DeadLetters
    outcomes: Outcomes


@dataclass(frozen=True)
class _LongLine:
    """A line over the size limit, streamed past: where it starts, its length (no newline), its first bytes."""

    offset: int
    length: int
    head: bytes


@dataclass
class _Plan:
    stream: str
    start: int
    end: int
    line_start: int
    deadletter_bytes: int
    outcomes: Outcomes = field(default_factory=Outcomes)
    sha256: str = ""
    frames: FramePlan | None = None


class _Run:
    def __init__(
        self,
        home: Home,
        location: loc.Location,
        writer: WriterIdentity,
        *,
        merge_threshold: int,
        chunk_bytes: int,
        buffer_rows: int,
        max_line_bytes: int,
        progress: bool,
        future: timedelta | None = MAX_FUTURE,
        deadletters: Path | None = None,
    ):
        self.home = home
        self.deadletters = deadletters if deadletters is not None else home.deadletter
        self.location = location
        self.writer = writer
        self.merge_threshold = merge_threshold
        self.chunk_bytes = chunk_bytes
        self.buffer_rows = buffer_rows
        self.max_line_bytes = max_line_bytes
        self.progress = progress
        self.skew = future or MAX_FUTURE
        # the latest time a line may carry, from this run's clock (None: any)
        self.latest = latest_time(datetime.now(UTC), future) if future is not None else None
        self.run_id = new_id()
        self.seq = 0
        self.buffers: dict[tuple[str, date | None], list[pa.Table]] = {}
        self.buffered = 0
        self.adds: list[Any] = []  # deltalake AddAction of every file written
        self.held: list[_Held] = []
        self.reader = LineReader(home)
        self.files = TableFiles(location)
        self.letters: dict[str, DeadLetters] = {}
        self.lean: dict[str, bool] = {}  # the fast path's per-type hint (pipeline.compact.fastpath.parse_fast)
        self.table = self._open_or_create()
        self.read_version = self.table.version()

    def close(self) -> None:
        self.reader.close()
        for letters in self.letters.values():
            letters.close()

    # ------------------------------------------------------------------ the run
    def run(self) -> CompactResult:
        self._check_home()
        remember(self.home, self.writer, self.location.bounds)
        cut = consistent_cut(self.home)  # every batch wholly inside or wholly outside (docs/design.md, batch framing)
        plans = {stream: self._plan(stream, cut[stream]) for stream in STREAMS}
        waiting = plans["tasks"].frames.unfinished if plans["tasks"].frames is not None else None
        if waiting is not None and waiting.then is not None and plans["ratings"].start <= waiting.then.ratings:
            # the tasks part of a two-stream batch is unfinished: its ratings part waits with it (all or nothing)
            plans["ratings"] = self._plan("ratings", min(cut["ratings"], waiting.then.ratings))
        total = sum(p.end - p.start for p in plans.values())
        if not total:
            return self._result(created=False, plans=list(plans.values()), merged=0)
        self.ids = IdSet(self._table_hashes(), expected=total // 128)  # lines are rarely shorter than 128 bytes
        with self._bar(total) as bar:
            for plan in plans.values():
                self.letters[plan.stream] = DeadLetters(self.home, plan.stream, plan.deadletter_bytes, self.deadletters)
                self._consume(plan, bar)
        self._resolve_held()
        self._flush()
        for letters in self.letters.values():
            letters.sync()
        self.files.sync()
        fault_hook("after-files")
        record = CommitRecord(
            writer=self.writer.writer,
            read_version=self.read_version,
            event_schema_version=SCHEMA_VERSION,
            streams={
                p.stream: StreamRange(
                    start=p.start,
                    end=p.end,
                    sha256=p.sha256,
                    line_start=p.line_start,
                    outcomes=p.outcomes,
                    deadletter=(p.deadletter_bytes, self.letters[p.stream].size),
                )
                for p in plans.values()
                if p.end > p.start
            },
        )
        fault_hook("before-commit")
        self._commit(record)
        fault_hook("after-commit")
        merged = self._optimize()
        fault_hook("after-optimize")
        return self._result(created=True, plans=list(plans.values()), merged=merged)

    def _result(self, *, created: bool, plans: list[_Plan], merged: int) -> CompactResult:
        return CompactResult(
            version=self.table.version(),
            created=created,
            writer=self.writer.writer,
            streams={p.stream: p.outcomes for p in plans},
            files_written=len(self.adds) if created else 0,
            files_merged=merged,
            rows=family_rows(self.table),
        )

    @contextmanager
    def _bar(self, total: int) -> Iterator[Any]:
        if not self.progress or total < (1 << 20):
            yield None
            return
        import click

        with click.progressbar(length=total, label="compacting", file=sys.stderr) as bar:
            yield bar

    # ------------------------------------------------------------------ the table
    def _open_or_create(self) -> Any:
        from deltalake import DeltaTable

        table = open_table(self.location)
        if table is not None:
            return table
        try:
            if self.location.local is not None:  # a local store given with --store may be new: its root is made
                self.location.local.mkdir(parents=True, exist_ok=True)
                self.location.bounds.confine(self.location.local / loc.TABLE / "_delta_log" / "x")
            return DeltaTable.create(
                self.location.table_uri,
                TABLE_SCHEMA,
                mode="ignore",  # another writer created it meanwhile: use theirs
                partition_by=PARTITIONS,
                name="events",
                description="ratings pipeline events, one row per event (docs/design.md, Storage)",
                configuration=TABLE_CONFIGURATION,
                storage_options=self.location.options,
            )
        except store_errors() as exc:
            fail(exc, self.location, "create")

    def _check_home(self) -> None:
        """Refuse a writer name another home already uses in this store (their offsets would mix)."""
        known = self.table.transaction_version(home_txn_id(self.writer.writer))
        if known is not None and known != self.writer.home_id:
            raise StoreConflict(
                f"writer {self.writer.writer!r} already commits to {self.location.describe()} from another home; "
                "give each home its own name (--writer NAME on its first compaction)"
            )

    def _table_hashes(self) -> np.ndarray:
        """``_id_hash`` of every row of the table at the read version."""
        if not self.table.get_add_actions().num_rows:
            return np.empty(0, np.uint64)
        try:
            column = self.table.to_pyarrow_dataset().to_table(columns=["_id_hash"])["_id_hash"]
        except store_errors() as exc:  # a missing or corrupt data file
            fail(exc, self.location, "read")
        return column.to_numpy().view(np.uint64)

    def _commit(self, record: CommitRecord) -> None:
        from deltalake.transaction import CommitProperties, Transaction

        self._check_not_committed_meanwhile(record)  # opens the table again: no link has appeared in it
        txns = [Transaction(home_txn_id(record.writer), self.writer.home_id)]
        for stream, rng in record.streams.items():
            end_id, line_id, dl_id = txn_ids(record.writer, stream)
            txns += [
                Transaction(end_id, rng.end),
                Transaction(line_id, rng.next_line),
                Transaction(dl_id, rng.deadletter[1]),
            ]
        properties = CommitProperties(
            custom_metadata={METADATA_KEY: record.model_dump(mode="json")},
            app_transactions=txns,
            max_commit_retries=1000,  # appends never conflict with appends: a busy store only needs patience
        )
        try:
            self.table.create_write_transaction(
                self.adds, "append", TABLE_SCHEMA, partition_by=PARTITIONS, commit_properties=properties
            )
        except store_errors() as exc:
            fail(exc, self.location, "commit to")
        self.table.update_incremental()

    def _check_not_committed_meanwhile(self, record: CommitRecord) -> None:
        """Refuse to commit ranges this writer committed since the run started (two compactors of one writer
        that the home's lock did not serialise): delta-rs does not check application transactions itself."""
        latest = open_table(self.location)
        for stream, rng in record.streams.items():
            if latest is not None and (latest.transaction_version(txn_ids(record.writer, stream)[0]) or 0) != rng.start:
                raise Busy(
                    f"another compaction of writer {record.writer!r} committed {stream} meanwhile; nothing of this "
                    "run is visible: run `ratings compact` again"
                )

    def _optimize(self) -> int:
        """When a partition holds more than ``merge_threshold`` files, merge the small files of every partition
        in one optimize commit (Delta's optimize, no data change); the files merged."""
        actions = pa.table(self.table.get_add_actions(flatten=True))
        if not actions.num_rows:
            return 0
        counts = actions.group_by(["partition.family", "partition.event_date"]).aggregate([("path", "count")])
        if not pc.any(pc.greater(counts["path_count"], self.merge_threshold)).as_py():
            return 0
        self.location.check_table()
        try:
            metrics = self.table.optimize.compact(max_concurrent_tasks=_WORKERS)
        except store_errors() as exc:
            fail(exc, self.location, "optimize")
        return int(metrics.get("numFilesRemoved", 0))

    # ------------------------------------------------------------------ reading
    def _plan(self, stream: str, size: int) -> _Plan:
        """The range of ``stream`` this run reads: from what this writer committed to the consistent cut ``size``,
        less an unfinished batch part at its end; and the frames in it."""
        end_id, line_id, dl_id = txn_ids(self.writer.writer, stream)
        start = self.table.transaction_version(end_id) or 0
        line_start = self.table.transaction_version(line_id) or 1
        dl_bytes = self.table.transaction_version(dl_id) or 0
        path = self.home.stream(stream)
        if size < start:
            raise StoreCorrupt(
                f"{path} has {size} bytes but writer {self.writer.writer!r} already committed up to byte {start}: "
                "the stream was truncated or replaced; restore it, or move the store aside and rebuild "
                "(`ratings compact --rebuild`)"
            )
        plan = _Plan(stream=stream, start=start, end=start, line_start=line_start, deadletter_bytes=dl_bytes)
        if size > start:
            fd = self.home.open(path, os.O_RDONLY)
            try:
                with os.fdopen(os.dup(fd), "rb") as handle:
                    end = _last_newline_end(handle, start, size)
                plan.frames = plan_frames(fd, start, end)
            finally:
                os.close(fd)
            plan.end = plan.frames.end
        return plan

    def _consume(self, plan: _Plan, bar: Any) -> None:
        if plan.end == plan.start:
            return
        digest = hashlib.sha256()
        # Arrow and hashlib release the GIL: the next chunks are split and parsed while this one is taken.
        with open(self.home.stream(plan.stream), "rb") as handle, ThreadPoolExecutor(_WORKERS) as pool:
            pending: deque[Future[tuple[Chunk, ParsedChunk]] | _LongLine] = deque()
            for item in self._blocks(plan, handle, digest):
                if isinstance(item, _LongLine):
                    pending.append(item)
                else:
                    pending.append(pool.submit(self._parse, plan.stream, *item))
                if len(pending) > _WORKERS:
                    self._settle(pending.popleft(), plan, bar)
            while pending:
                self._settle(pending.popleft(), plan, bar)
        plan.sha256 = digest.hexdigest()

    def _parse(self, stream: str, block: bytes, end: int, pos: int) -> tuple[Chunk, ParsedChunk]:
        """Split and parse the lines of ``block[:end]`` (in a worker thread; its line numbers are set when it is
        settled)."""
        chunk = Chunk.of(stream, block, pos, 0, self.writer.writer, end)
        parsed = parse_chunk(chunk, self.max_line_bytes, self.lean)
        parsed.tables = {family: _with_id_hash(encode_columns(table)) for family, table in parsed.tables.items()}
        return chunk, parsed

    def _settle(self, job: Future[tuple[Chunk, ParsedChunk]] | _LongLine, plan: _Plan, bar: Any) -> None:
        line_no = plan.line_start + plan.outcomes.lines  # jobs are settled in stream order
        if isinstance(job, _LongLine):
            plan.outcomes.lines += 1
            plan.outcomes.invalid += 1
            reason = f"-: line is {job.length} bytes, over the limit of {self.max_line_bytes}"
            if plan.frames is not None:
                index, _ = plan.frames.lookup(np.array([job.offset]))
                if index[0] >= 0:  # a line of a broken batch part: the batch's reason
                    reason = f"-: {plan.frames.reasons[int(index[0])]}"
            record = deadletter_record(plan.stream, job.offset, line_no, reason, job.head, raw_bytes=job.length)
            self.letters[plan.stream].write(record)
            size = job.length + 1
        else:
            chunk, parsed = job.result()
            chunk.first_line = line_no
            self._take(chunk, parsed, plan.outcomes, plan.frames)
            size = int(chunk.starts[-1])
        if bar is not None:
            bar.update(size)

    def _blocks(self, plan: _Plan, handle: Any, digest: Any) -> Iterator[tuple[bytes, int, int] | _LongLine]:
        """Blocks of whole lines over the plan's range, hashed as they are read, as (block, the length of its whole
        lines, their stream offset); a line over the size limit is streamed past (hashed, never held whole) and
        given as a :class:`_LongLine`."""
        pos = plan.start
        while pos < plan.end:
            handle.seek(pos)
            block = handle.read(min(self.chunk_bytes, plan.end - pos))
            cut = block.rfind(b"\n") + 1
            while cut == 0 and len(block) <= self.max_line_bytes:  # a line longer than a chunk: read on
                more = handle.read(min(self.chunk_bytes, self.max_line_bytes + 1, plan.end - pos - len(block)))
                block += more
                cut = block.rfind(b"\n") + 1
            if cut:  # the bytes after the cut are read again with the next block (no copy of this one)
                digest.update(memoryview(block)[:cut])
                yield block, cut, pos
                pos += cut
                continue
            length = self._stream_past(handle, block, plan.end - pos, digest)
            yield _LongLine(offset=pos, length=length, head=block[:LONG_LINE_HEAD])
            pos += length + 1

    def _stream_past(self, handle: Any, start: bytes, left: int, digest: Any) -> int:
        """Hash a line over the size limit piece by piece up to its newline (which it includes); its length."""
        piece, length = start, 0
        while True:
            cut = piece.find(b"\n")
            if cut >= 0:
                digest.update(piece[: cut + 1])
                return length + cut
            digest.update(piece)
            length += len(piece)
            piece = handle.read(min(1 << 20, left - length))

    # ------------------------------------------------------------------ validating and deduplicating
    def _take(self, chunk: Chunk, parsed: ParsedChunk, outcomes: Outcomes, frames: FramePlan | None) -> None:
        """Deduplicate a parsed chunk, buffer its new rows, hold back known ids, dead-letter the rest."""
        outcomes.lines += len(chunk)
        parsed, broken = _apply_frames(chunk, parsed, frames, outcomes)
        if self.latest is not None:
            parsed, late = _late(parsed, self.latest, self.skew)
            broken += late
        rejected: list[tuple[int, str]] = list(parsed.invalid) + broken
        outcomes.invalid += len(parsed.invalid) + len(broken)
        families = sorted(parsed.tables)
        if families:
            lines = np.concatenate([parsed.tables[f]["_line"].to_numpy() for f in families])
            h = np.concatenate([parsed.tables[f]["_id_hash"].to_numpy() for f in families]).view(np.uint64)
            order = None
            if len(families) > 1:  # in line order
                order = np.argsort(lines, kind="stable")
                lines, h = lines[order], h[order]
            ids = _LazyIds([parsed.tables[f]["id"] for f in families], order)
            by_hash = argsort_stable(h)
            verdict = self._classify(chunk, lines, ids, h, by_hash)
            new = verdict == NEW
            added = by_hash[new[by_hash]]  # the new rows, by hash
            self.ids.add(h[added], position(chunk.stream, chunk.offsets[lines[added]]), ordered=True)
            outcomes.stored += int(new.sum())
            outcomes.duplicate += int((verdict == DUPLICATE).sum())
            outcomes.conflict += int((verdict == CONFLICT).sum())
            rejected += [(int(lines[k]), _conflict_reason(ids[int(k)])) for k in np.flatnonzero(verdict == CONFLICT)]
            keep = np.zeros(len(chunk), bool)
            keep[lines[new]] = True
            hold = np.zeros(len(chunk), bool)
            hold[lines[verdict == DEFERRED]] = True
            for family in families:
                table = parsed.tables[family]
                at = table["_line"].to_numpy()
                if hold[at].any():
                    held = table.filter(pa.array(hold[at]))
                    self.held.append(_Held(family, held, chunk, self.letters[chunk.stream], outcomes))
                mask = keep[at]
                kept = table if mask.all() else table.filter(pa.array(mask))
                if kept.num_rows:
                    self._buffer(family, self._rows(family, kept, chunk))
        for i, reason in sorted(rejected):
            self.letters[chunk.stream].write(
                deadletter_record(chunk.stream, int(chunk.offsets[i]), chunk.first_line + i, reason, chunk.line(i))
            )

    def _classify(
        self, chunk: Chunk, lines: np.ndarray, ids: _LazyIds, h: np.ndarray, by_hash: np.ndarray
    ) -> np.ndarray:
        """NEW, DUPLICATE, CONFLICT or DEFERRED (the table has the id) per row of a chunk, in line order
        (``by_hash``: the rows in hash order, a stable sort)."""
        out = np.zeros(len(h), np.int8)
        in_table, taken, pos = self.ids.lookup(h)
        out[in_table] = DEFERRED
        for k in np.flatnonzero(taken & ~in_table):
            earlier = self.reader.line(int(pos[k]))
            out[k] = _same_event(earlier, chunk.line(int(lines[k])), ids[int(k)])
        first_of_row = _first_of_same(h, by_hash)
        for k in np.flatnonzero((first_of_row != np.arange(len(h))) & (out == NEW)):
            j = int(first_of_row[k])
            if out[j] == DEFERRED:
                out[k] = DEFERRED  # resolved with the first against the stored row
            else:
                out[k] = _same_event(chunk.line(int(lines[j])), chunk.line(int(lines[k])), ids[int(k)])
        return out

    def _resolve_held(self) -> None:
        """Compare the rows whose id the table had with the stored rows: duplicates go, conflicts are dead-lettered."""
        if not self.held:
            return
        wanted = np.unique(np.concatenate([held.rows["_id_hash"].to_numpy() for held in self.held]).view(np.uint64))
        stored = self._stored_rows(wanted)
        for held in self.held:
            resolved = np.zeros(held.rows.num_rows, np.int8)
            rows = held.rows.drop_columns(["_line", "_id_hash"]).to_pylist()
            lines = held.rows["_line"].to_numpy()
            for k, row in enumerate(rows):
                known = stored.get(row["id"])
                if known is None:  # only the 64-bit hashes met: a new id
                    resolved[k] = NEW
                    continue
                family, values, where = known
                if family != held.family:
                    resolved[k] = CONFLICT
                    continue
                ignored = filled_of(held.chunk.line(int(lines[k])))
                if where[0] == self.writer.writer:  # a line of this home's streams: what its append filled
                    ignored |= filled_of(self.reader.line(int(position(where[1], np.array([where[2]]))[0])))
                resolved[k] = DUPLICATE if _agree(values, _comparable(row), ignored) else CONFLICT
            new = resolved == NEW
            held.outcomes.stored += int(new.sum())
            held.outcomes.duplicate += int((resolved == DUPLICATE).sum())
            held.outcomes.conflict += int((resolved == CONFLICT).sum())
            if new.any():
                fresh = held.rows.filter(pa.array(new))
                hashes = fresh["_id_hash"].to_numpy().view(np.uint64)
                self.ids.add(hashes, position(held.chunk.stream, held.chunk.offsets[lines[new]]))
                self._buffer(held.family, self._rows(held.family, fresh, held.chunk))
            for j in np.flatnonzero(resolved == CONFLICT):
                i = int(lines[j])
                held.letters.write(
                    deadletter_record(
                        held.chunk.stream,
                        int(held.chunk.offsets[i]),
                        held.chunk.first_line + i,
                        _conflict_reason(rows[int(j)]["id"]),
                        held.chunk.line(i),
                    )
                )
        self.held.clear()

    def _stored_rows(self, hashes: np.ndarray) -> dict[str, tuple[str, dict[str, Any], tuple[str, str, int]]]:
        """id -> (family, comparable row, (writer, stream, offset) of its line) of the stored rows whose
        ``_id_hash`` is one of ``hashes`` (the first by provenance, as readers keep)."""
        import pyarrow.dataset as ds

        names = [f.name for f in DATA_SCHEMA if not f.name.startswith("_") and f.name != "raw"]
        try:
            found = self.table.to_pyarrow_dataset().to_table(
                columns=["family", *names, "_writer", "_stream", "_offset"],
                filter=ds.field("_id_hash").isin(pa.array(hashes.view(np.int64))),
            )
        except store_errors() as exc:  # a missing or corrupt data file
            fail(exc, self.location, "read")
        out: dict[str, tuple[str, dict[str, Any], tuple[str, str, int]]] = {}
        for row in sorted(found.to_pylist(), key=lambda r: (r["_writer"], r["_stream"], r["_offset"])):
            family = row.pop("family")
            where = (row["_writer"], row["_stream"], row["_offset"])
            out.setdefault(row["id"], (family, _comparable({c: row.get(c) for c, _ in COLUMNS[family]}), where))
        return out

    # ------------------------------------------------------------------ writing
    def _rows(self, family: str, table: pa.Table, chunk: Chunk) -> pa.Table:
        """A family's parsed rows (with ``_line`` and ``_id_hash``) with what the table adds per row: ``_offset``
        and ``raw`` (family ``other``); the other columns are added when a file is written."""
        lines = table["_line"].to_numpy()
        rows = table.drop_columns(["_line"])
        rows = rows.append_column("_offset", pa.array(chunk.offsets[lines], pa.int64()))
        if family == "other":
            rows = rows.append_column("raw", pa.array([chunk.line(int(i)).decode("utf-8") for i in lines], pa.string()))
        return rows

    def _buffer(self, family: str, table: pa.Table) -> None:
        """Add a family's rows to the buffers of their partitions (event dates, in row order within each)."""
        days, keys = _event_days(table["at"])
        grouped = len(keys) == 1 or bool(np.all(days[:-1] <= days[1:]))  # time-ordered streams usually are
        # a stable sort of small integers is a radix sort in numpy
        order = np.arange(len(days)) if grouped else np.argsort(days, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(days, minlength=len(keys)))])
        ordered = table if grouped else table.take(pa.array(order))
        for k, key in enumerate(keys):
            if bounds[k + 1] > bounds[k]:
                self.buffers.setdefault((family, key), []).append(ordered.slice(bounds[k], bounds[k + 1] - bounds[k]))
        self.buffered += table.num_rows
        if self.buffered >= self.buffer_rows:
            self._flush()

    def _file_table(self, family: str, parts: list[pa.Table]) -> pa.Table:
        """Buffered rows of one partition as a data file: the family's columns and the provenance, in table
        order. A file holds only the columns its family has; every reader of the table reads the others as
        null (Delta's schema: a column a file lacks is null in its rows)."""
        table = pa.concat_tables(parts).unify_dictionaries()  # one dictionary per column in the file
        n = table.num_rows
        names = set(table.column_names)
        columns: dict[str, pa.ChunkedArray | pa.Array] = {}
        for f in DATA_SCHEMA:
            if f.name in names:
                columns[f.name] = table[f.name].cast(f.type) if f.name == "at" else table[f.name]
            elif f.name in ("_writer", "_stream"):
                value = self.writer.writer if f.name == "_writer" else STREAM_OF_FAMILY[family]
                columns[f.name] = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value]))
        return pa.table(columns)

    def _flush(self) -> None:
        """Write one file per buffered partition (in parallel: the Parquet writer releases the GIL)."""
        from deltalake.transaction import AddAction

        jobs = []
        for family, day in sorted(self.buffers, key=lambda k: (k[0], k[1] or date.min)):
            self.seq += 1
            jobs.append((family, day, f"{partition_dir(family, day)}/part-{self.seq:05d}-{self.run_id}.snappy.parquet"))

        def write(job: tuple[str, date | None, str]) -> Any:
            family, day, relative = job
            table = self._file_table(family, self.buffers[(family, day)])
            try:
                size, metadata = self.files.write(table, relative)
            except OSError as exc:
                raise machine_failure(
                    exc, f"write {relative} in the store {self.location.describe()} (nothing of this run is visible)"
                ) from None
            partition = {"family": family, "event_date": day.isoformat() if day else None}
            return AddAction(relative, size, partition, _now_ms(), True, file_stats(metadata))

        with ThreadPoolExecutor(_WORKERS) as pool:
            self.adds.extend(pool.map(write, jobs))
        self.buffers.clear()
        self.buffered = 0


def _apply_frames(
    chunk: Chunk, parsed: ParsedChunk, frames: FramePlan | None, outcomes: Outcomes
) -> tuple[ParsedChunk, list[tuple[int, str]]]:
    """The chunk's parse with the frame plan applied: frame lines counted (not events), the lines of a broken
    batch part taken out of the rows and the invalid lines, and returned as (line index, reason) dead letters."""
    index, is_frame = frames.lookup(chunk.offsets) if frames is not None else (np.full(len(chunk), -1), None)
    special = index >= 0
    if not special.any():
        return parsed, []
    assert frames is not None and is_frame is not None
    outcomes.frames += int(is_frame.sum())
    broken = [(int(i), f"-: {frames.reasons[int(index[i])]}") for i in np.flatnonzero(special & ~is_frame)]
    tables = {}
    for family, table in parsed.tables.items():
        keep = ~special[table["_line"].to_numpy()]
        if keep.any():
            tables[family] = table if keep.all() else table.filter(pa.array(keep))
    invalid = [(i, reason) for i, reason in parsed.invalid if not special[i]]
    return ParsedChunk(tables=tables, invalid=invalid), broken


def _late(parsed: ParsedChunk, latest: str, skew: timedelta) -> tuple[ParsedChunk, list[tuple[int, str]]]:
    """The chunk's rows without those dated after ``latest`` (this run's time plus the skew), and those as
    (line index, reason) dead letters: another writer wrote them without the check ``append`` makes."""
    limit = pa.scalar(datetime.fromisoformat(latest[:-1]) + timedelta(seconds=1), pa.timestamp("us"))
    late: list[tuple[int, str]] = []
    tables = {}
    for family, table in parsed.tables.items():
        after = np.asarray(pc.fill_null(pc.greater_equal(table["at"], limit), False).to_numpy(zero_copy_only=False))
        if after.any():
            rows = table.filter(pa.array(after))
            for line, at in zip(rows["_line"].to_pylist(), rows["at"].to_pylist(), strict=True):
                moment = format_timestamp(at.replace(tzinfo=UTC))
                late.append((int(line), f"at: {future_reason(moment, latest, skew, moment='this compaction')}"))
        kept = table.filter(pa.array(~after)) if after.any() else table
        if kept.num_rows:
            tables[family] = kept
    return (ParsedChunk(tables=tables, invalid=parsed.invalid), late) if late else (parsed, late)


def _with_id_hash(table: pa.Table) -> pa.Table:
    """``table`` with ``_id_hash``: :func:`pipeline.compact.ids.hash_ids` of its ids (computed while parsing)."""
    return table.append_column("_id_hash", pa.array(hash_ids(table["id"].combine_chunks()).view(np.int64)))


class _LazyIds:
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


def _first_of_same(h: np.ndarray, order: np.ndarray) -> np.ndarray:
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


def _event_days(at: pa.ChunkedArray) -> tuple[np.ndarray, list[date | None]]:
    """Per row, the index of its UTC date (``event_date``) in the returned dates (sorted; ``None`` last, for
    rows without a time), as the smallest integer type that holds it."""
    day = pc.cast(pc.cast(at, pa.date32()), pa.int32()).combine_chunks()  # days since 1970-01-01
    valid = np.asarray(day.is_valid()) if day.null_count else None
    values = np.asarray(day.fill_null(0).to_numpy() if valid is not None else day.to_numpy(), np.int64)
    dated = values if valid is None else values[valid]
    if len(dated) and int(dated.max()) - int(dated.min()) < (1 << 20):  # a span of days: count, no sort
        low = int(dated.min())
        present = np.flatnonzero(np.bincount(dated - low)) + low
        index = np.zeros(int(present[-1]) - low + 1, np.int64)
        index[present - low] = np.arange(len(present))
        codes = index[np.clip(values - low, 0, len(index) - 1)]
    else:
        present = np.unique(dated)
        codes = np.searchsorted(present, values)
    keys: list[date | None] = [_EPOCH + timedelta(days=int(d)) for d in present]
    if valid is not None:
        codes[~valid] = len(keys)
        keys.append(None)
    kind = np.int16 if len(keys) < (1 << 15) else np.int64
    return codes.astype(kind), keys


_EPOCH = date(1970, 1, 1)


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _conflict_reason(event_id: str) -> str:
    return f"id: conflict: {event_id!r} is already stored with a different payload"


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A row's values with ``at`` as naive UTC (stored rows carry the zone), for payload comparison."""
    at = row.get("at")
    if at is not None and getattr(at, "tzinfo", None) is not None:
        row = {**row, "at": at.replace(tzinfo=None)}
    return row


def _same_event(earlier: bytes, line: bytes, event_id: str) -> int:
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
    return DUPLICATE if _agree(event_row(first, "")[1], event_row(second, "")[1], ignored) else CONFLICT


def _agree(stored: dict[str, Any], incoming: dict[str, Any], ignored: set[str]) -> bool:
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


def family_rows(table: Any) -> dict[str, int]:
    """Rows per family at the table's loaded version, from the commit statistics (no data read)."""
    counts = dict.fromkeys(COLUMNS, 0)
    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows:
        grouped = actions.group_by("partition.family").aggregate([("num_records", "sum")])
        families, sums = grouped["partition.family"].to_pylist(), grouped["num_records_sum"].to_pylist()
        for family, n in zip(families, sums, strict=True):
            counts[family] = int(n or 0)
    return counts


__all__ = ["RECOVER", "CommitRecord", "CompactResult", "Outcomes", "StreamRange", "compact"]
