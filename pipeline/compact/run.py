"""One compaction: the new bytes of this home's streams -> one commit of the events table (docs/design.md, Storage).

Steps, each safe to interrupt:

1. take ``store/.compact.lock`` (one compactor per home); open the table at its newest version ``r``
   (create it when there is none); read this writer's application transactions: per stream the byte offset
   consumed so far, the next line number and the size of its dead-letter file;
2. cut each ``deadletter/<stream>.jsonl`` back to that size (lines of a crashed run go; the rerun writes them
   again); take each stream's range up to its last complete line;
3. read the ranges in chunks; validate (vectorised, the unusual lines one by one); drop ids the run already
   took (same payload) or dead-letter them (another payload); hold back ids the table already has;
4. write Parquet files per family as the buffer fills; resolve the held-back ids against the
   stored rows (one read of the table); fsync files, directories and dead letters;
5. commit every file in one Delta commit carrying, per (writer, stream), the application transaction whose
   version is the end offset consumed, and commit metadata (byte ranges, sha256 of the bytes read, outcome
   counts, event schema version). Until then nothing of the run is visible; after it, everything is;
6. let Delta's optimize merge the small files of a family that holds too many, up to the target file size (a
   commit of its own, no data change).

Before step 1's run, a store of the earlier layout (partitioned by event date too) is migrated in a commit of its
own (:mod:`pipeline.compat.daily_layout`).

A crash before step 5 leaves only files no commit names (``ratings vacuum`` removes them); the rerun redoes
the same bytes. A crash after it finds the offsets moved on and lands nothing twice. Concurrent commits of
other writers are retried by delta-rs (appends do not conflict).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from ..store.upgrade import Rebuild

from ..compat import daily_layout
from ..errors import StoreCorrupt
from ..store.commits import CommitRecord, Outcomes, StreamRange
from ..store.schema import DATA_SCHEMA
from ..store.table import (
    RECOVER,
    exists,
    family_rows,
    machine_errors,
    machine_failure,
    txn_ids,
)
from ..store.writer import WriterIdentity, check_name, identity, remember
from ..streams.events import DEFAULT_MAX_LINE_BYTES, FAMILY, SCHEMA_VERSION, stream_of
from ..streams.framing import consistent_cut
from ..streams.future import MAX_FUTURE, latest_time
from ..streams.log import new_id
from ..streams.scan import complete_end
from ..utc import now_ms
from ..workspace import STREAMS, StrPath, Workspace
from .commit import check_writer, commit, open_or_create, optimize, stored_hashes, stored_rows
from .files import DeadLetters, TableFiles, deadletter_record, encode_columns, file_stats, partition_dir
from .frames import FramePlan, plan_frames
from .ids import (
    CONFLICT,
    DEFERRED,
    DUPLICATE,
    NEW,
    IdSet,
    LazyIds,
    LineReader,
    agree,
    argsort_stable,
    comparable,
    conflict_reason,
    filled_of,
    first_of_same,
    position,
    same_event,
    with_id_hash,
)
from .parse import Chunk, ParsedChunk, apply_frames, late_rows, parse_chunk

DEFAULT_MERGE_THRESHOLD = 16  # small files in one family before Delta's optimize merges them
# Bytes read at a time. Under glibc's largest mmap threshold (32 MiB): a freed block's memory is reused for the
# next one instead of being mapped afresh, page-faulted and zeroed by the kernel for every block (measured with
# bench.compact: half the page faults of 32 MiB blocks, a third less system time; 8 MiB costs more per chunk).
DEFAULT_CHUNK_BYTES = 16 << 20
DEFAULT_BUFFER_ROWS = 1_000_000  # rows held in memory before they are written out
_WORKERS = 2  # chunks parsed / files written at once
LONG_LINE_HEAD = 4096  # bytes of a line over the size limit its dead letter keeps
#: The stream each family's events are appended to (unknown types, family ``other``, go to ``tasks``).
STREAM_OF_FAMILY = {family: stream_of(t) for t, family in FAMILY.items()} | {"other": stream_of("other")}


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
    """Called between the durable steps (``before-migration`` and ``after-migration`` of an old store's layout,
    ``after-files``, ``before-commit``, ``after-commit``, ``after-optimize``).

    Does nothing; crash tests replace it (in a child process) to kill the run at a chosen step.
    """


def compact(
    home: Workspace | StrPath | None = None,
    *,
    progress: bool = False,
    merge_threshold: int = DEFAULT_MERGE_THRESHOLD,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    buffer_rows: int = DEFAULT_BUFFER_ROWS,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    rebuild: bool = False,
    future: timedelta | None = MAX_FUTURE,
) -> CompactResult:
    """Compact the new bytes of every stream into the table; a run with no new input commits nothing.

    ``rebuild`` rebuilds a local store's table from the streams (the old one moved aside once the new one is
    whole: :class:`pipeline.store.upgrade.Rebuild`). A line dated more than ``future`` after this run is
    dead-lettered (written past the skew by a writer that did not check it; None: any time is stored).
    """
    if merge_threshold < 2:
        raise ValueError("merge_threshold must be at least 2")
    ws = Workspace.of(home)
    if ws.writer is not None:
        check_name(ws.writer)
    if ws.store.local is None:
        exists(ws.store)  # an unreachable object store is one line before anything is written
    with machine_errors("compact (nothing of this run is visible)"), ws.lock(ws.compact_lock):
        from ..compat import manifest_store
        from ..store.upgrade import Rebuild

        notes = manifest_store.upgrade(ws)
        writer = identity(ws)
        build = Rebuild.start(ws) if rebuild else None
        sizes = {"chunk_bytes": chunk_bytes, "buffer_rows": buffer_rows, "max_line_bytes": max_line_bytes}
        options: dict[str, Any] = {"merge_threshold": merge_threshold, "progress": progress, "future": future, **sizes}
        result, built = Rebuild.around(build, lambda: _Run(ws, writer, build=build, **options).run_once())
        notes += built
    return result.model_copy(update={"notes": notes + result.notes})


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
        ws: Workspace,
        writer: WriterIdentity,
        *,
        merge_threshold: int,
        chunk_bytes: int,
        buffer_rows: int,
        max_line_bytes: int,
        progress: bool,
        future: timedelta | None = MAX_FUTURE,
        build: Rebuild | None = None,
    ):
        self.ws = ws
        self.location = build.build if build is not None else ws.store  # a rebuild writes its new table beside
        self.deadletters = build.letters if build is not None else None  # ... and its dead letters
        self.skew = future or MAX_FUTURE
        # the latest time a line may carry, from this run's clock (None: any)
        self.latest = latest_time(datetime.now(UTC), future) if future is not None else None
        self.writer = writer
        self.merge_threshold = merge_threshold
        self.chunk_bytes = chunk_bytes
        self.buffer_rows = buffer_rows
        self.max_line_bytes = max_line_bytes
        self.progress = progress
        self.run_id = new_id()
        self.seq = 0
        self.buffers: dict[str, list[pa.Table]] = {}  # per family, rows not yet written
        self.buffered = 0
        self.adds: list[Any] = []  # deltalake AddAction of every file written
        self.held: list[_Held] = []
        self.reader = LineReader(ws)
        self.files = TableFiles(ws, self.location)
        self.letters: dict[str, DeadLetters] = {}
        self.lean: dict[str, bool] = {}  # the fast path's per-type hint (pipeline.compact.fastpath.parse_fast)
        self.table = open_or_create(self.location)
        self.read_version = self.table.version()
        self.notes: list[str] = []

    def run_once(self) -> CompactResult:
        """:meth:`run`, its files closed after."""
        try:
            return self.run()
        finally:
            self.close()

    def close(self) -> None:
        self.reader.close()
        for letters in self.letters.values():
            letters.close()

    # ------------------------------------------------------------------ the run
    def run(self) -> CompactResult:
        check_writer(self.location, self.table, self.writer)
        remember(self.ws, self.writer)
        self.table, self.notes = daily_layout.migrate(self.location, self.table, fault_hook)
        self.read_version = self.table.version()
        cut = consistent_cut(self.ws)  # every batch wholly inside or wholly outside (docs/design.md, batch framing)
        plans = {stream: self._plan(stream, cut[stream]) for stream in STREAMS}
        waiting = plans["tasks"].frames.unfinished if plans["tasks"].frames is not None else None
        if waiting is not None and waiting.then is not None and plans["ratings"].start <= waiting.then.ratings:
            # the tasks part of a two-stream batch is unfinished: its ratings part waits with it (all or nothing)
            plans["ratings"] = self._plan("ratings", min(cut["ratings"], waiting.then.ratings))
        total = sum(p.end - p.start for p in plans.values())
        if not total:
            return self._result(created=False, plans=list(plans.values()), merged=0)
        self.ids = IdSet(
            stored_hashes(self.location, self.table), expected=total // 128
        )  # lines are rarely shorter than 128 bytes
        with self._bar(total) as bar:
            for plan in plans.values():
                self.letters[plan.stream] = DeadLetters(self.ws, plan.stream, plan.deadletter_bytes, self.deadletters)
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
        commit(self.location, self.table, record, self.adds, self.writer)
        fault_hook("after-commit")
        merged = optimize(self.location, self.table, self.merge_threshold, _WORKERS)
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
            notes=self.notes,
        )

    @contextmanager
    def _bar(self, total: int) -> Iterator[Any]:
        if not self.progress or total < (1 << 20):
            yield None
            return
        import click

        with click.progressbar(length=total, label="compacting", file=sys.stderr) as bar:
            yield bar

    # ------------------------------------------------------------------ reading
    def _plan(self, stream: str, size: int) -> _Plan:
        """The range of ``stream`` this run reads: from what this writer committed to the consistent cut ``size``,
        less an unfinished batch part at its end; and the frames in it."""
        end_id, line_id, dl_id = txn_ids(self.writer.writer, stream)
        start = self.table.transaction_version(end_id) or 0
        line_start = self.table.transaction_version(line_id) or 1
        dl_bytes = self.table.transaction_version(dl_id) or 0
        path = self.ws.stream(stream)
        if size < start:
            raise StoreCorrupt(
                f"{path} has {size} bytes but writer {self.writer.writer!r} already committed up to byte {start}: "
                "the stream was truncated or replaced; restore it, or move the store aside and rebuild "
                "(`ratings compact --rebuild`)"
            )
        plan = _Plan(stream=stream, start=start, end=start, line_start=line_start, deadletter_bytes=dl_bytes)
        if size > start:
            fd = self.ws.open(path, os.O_RDONLY)
            try:
                end = complete_end(lambda n, off: os.pread(fd, n, off), start, size)
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
        with open(self.ws.stream(plan.stream), "rb") as handle, ThreadPoolExecutor(_WORKERS) as pool:
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
        parsed.tables = {family: with_id_hash(encode_columns(table)) for family, table in parsed.tables.items()}
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
        parsed, broken = apply_frames(chunk, parsed, frames, outcomes)
        if self.latest is not None:
            parsed, late = late_rows(parsed, self.latest, self.skew)
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
            ids = LazyIds([parsed.tables[f]["id"] for f in families], order)
            by_hash = argsort_stable(h)
            verdict = self._classify(chunk, lines, ids, h, by_hash)
            new = verdict == NEW
            added = by_hash[new[by_hash]]  # the new rows, by hash
            self.ids.add(h[added], position(chunk.stream, chunk.offsets[lines[added]]), ordered=True)
            outcomes.stored += int(new.sum())
            outcomes.duplicate += int((verdict == DUPLICATE).sum())
            outcomes.conflict += int((verdict == CONFLICT).sum())
            rejected += [(int(lines[k]), conflict_reason(ids[int(k)])) for k in np.flatnonzero(verdict == CONFLICT)]
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
        self, chunk: Chunk, lines: np.ndarray, ids: LazyIds, h: np.ndarray, by_hash: np.ndarray
    ) -> np.ndarray:
        """NEW, DUPLICATE, CONFLICT or DEFERRED (the table has the id) per row of a chunk, in line order
        (``by_hash``: the rows in hash order, a stable sort)."""
        out = np.zeros(len(h), np.int8)
        in_table, taken, pos = self.ids.lookup(h)
        out[in_table] = DEFERRED
        for k in np.flatnonzero(taken & ~in_table):
            earlier = self.reader.line(int(pos[k]))
            out[k] = same_event(earlier, chunk.line(int(lines[k])), ids[int(k)])
        first_of_row = first_of_same(h, by_hash)
        for k in np.flatnonzero((first_of_row != np.arange(len(h))) & (out == NEW)):
            j = int(first_of_row[k])
            if out[j] == DEFERRED:
                out[k] = DEFERRED  # resolved with the first against the stored row
            else:
                out[k] = same_event(chunk.line(int(lines[j])), chunk.line(int(lines[k])), ids[int(k)])
        return out

    def _resolve_held(self) -> None:
        """Compare the rows whose id the table had with the stored rows: duplicates go, conflicts are dead-lettered."""
        if not self.held:
            return
        wanted = np.unique(np.concatenate([held.rows["_id_hash"].to_numpy() for held in self.held]).view(np.uint64))
        stored = stored_rows(self.location, self.table, wanted)
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
                ignored = filled_of(held.chunk.line(int(lines[k])))
                if where[0] == self.writer.writer:  # a line of this home's streams: what its append filled
                    ignored |= filled_of(self.reader.line(int(position(where[1], np.array([where[2]]))[0])))
                same = family == held.family and agree(values, comparable(row), ignored)
                resolved[k] = DUPLICATE if same else CONFLICT
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
                        conflict_reason(rows[int(j)]["id"]),
                        held.chunk.line(i),
                    )
                )
        self.held.clear()

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
        """Add a family's rows to its buffer (in row order)."""
        self.buffers.setdefault(family, []).append(table)
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
        """Write one file per buffered family (in parallel: the Parquet writer releases the GIL)."""
        from deltalake.transaction import AddAction

        jobs = []
        for family in sorted(self.buffers):
            self.seq += 1
            jobs.append((family, f"{partition_dir(family)}/part-{self.run_id}-{self.seq:05d}.snappy.parquet"))

        def write(job: tuple[str, str]) -> Any:
            family, relative = job
            table = self._file_table(family, self.buffers[family])
            try:
                size, metadata = self.files.write(table, relative)
            except OSError as exc:
                raise machine_failure(
                    exc, f"write {relative} in the store {self.location.describe()} (nothing of this run is visible)"
                ) from None
            return AddAction(relative, size, {"family": family}, now_ms(), True, file_stats(metadata))

        with ThreadPoolExecutor(_WORKERS) as pool:
            self.adds.extend(pool.map(write, jobs))
        self.buffers.clear()
        self.buffered = 0


__all__ = ["RECOVER", "CommitRecord", "CompactResult", "Outcomes", "StreamRange", "compact"]
