"""One compaction: new stream bytes -> Parquet files -> a new manifest (DESIGN 4).

Steps, each safe to interrupt:

1. take ``store/.compact.lock``; read the newest manifest (the offsets consumed so far);
2. cut each ``deadletter/<stream>.jsonl`` back to the size that manifest recorded
   (lines of a crashed run go; the rerun writes them again);
3. read each stream from its offset to its last newline in chunks; validate; drop
   duplicate ids, dead-letter conflicts and invalid lines;
4. write Parquet files (temp, fsync, rename) with names unique to this run, an
   id-index segment, merged files for crowded partitions; fsync their directories;
5. create the next manifest put-if-absent. Until then nothing of this run is
   visible; after it, everything is.

A crash before step 5 leaves only invisible files; the next run redoes the same
bytes and reaches the same store content.
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
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel

from ..errors import StoreCorrupt
from ..events import DEFAULT_MAX_LINE_BYTES, SCHEMA_VERSION
from ..families import COLUMNS
from ..home import STREAMS, Home
from ..manifest import FileEntry, Manifest, Outcomes, StreamRange, create_manifest, load_manifest
from ..streams import new_id
from .files import DeadLetters, deadletter_record, entry_for, fsync_dirs, write_parquet
from .ids import CONFLICT, DUPLICATE, NEW, IdIndex, LineReader, hash_ids, position, segment_table
from .parse import Chunk, ParsedChunk, parse_chunk
from .rows import SCHEMAS

DEFAULT_MERGE_THRESHOLD = 16  # files in one partition before they are merged into one
INDEX_MERGE_THRESHOLD = 8  # index segments before they are merged into one
DEFAULT_CHUNK_BYTES = 32 << 20
DEFAULT_BUFFER_ROWS = 1_000_000  # rows held in memory before they are written out
_WORKERS = 2  # chunks parsed / files written at once


class CompactResult(BaseModel):
    """What one compaction did."""

    manifest: int | None  # the newest manifest after this run (None: the store is still empty)
    created: bool  # whether this run created that manifest
    streams: dict[str, Outcomes]
    files_written: int
    files_merged: int
    rows: dict[str, int]  # rows per family in the whole store

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def fault_hook(step: str) -> None:
    """Called between the durable steps (``after-parquet``, ``before-manifest``, ``after-manifest``).

    Does nothing; crash tests replace it to stop a run at a chosen step.
    """


@contextmanager
def compact_lock(home: Home) -> Iterator[None]:
    """One compactor at a time: an exclusive ``flock`` on ``store/.compact.lock`` (waits for the holder)."""
    home.store.mkdir(parents=True, exist_ok=True)
    fd = os.open(home.store / ".compact.lock", os.O_RDWR | os.O_CREAT, 0o644)
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
) -> CompactResult:
    """Compact the new bytes of every stream into the store; a run with no new input changes nothing."""
    if merge_threshold < 2:
        raise ValueError("merge_threshold must be at least 2")
    home = Home.resolve(home)
    with compact_lock(home):
        run = _Run(
            home,
            merge_threshold=merge_threshold,
            chunk_bytes=chunk_bytes,
            buffer_rows=buffer_rows,
            max_line_bytes=max_line_bytes,
            progress=progress,
        )
        try:
            return run.run()
        finally:
            run.reader.close()


def _last_newline_end(handle, start: int, size: int) -> int:
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


class _Run:
    def __init__(
        self,
        home: Home,
        *,
        merge_threshold: int,
        chunk_bytes: int,
        buffer_rows: int,
        max_line_bytes: int,
        progress: bool,
    ):
        self.home = home
        self.store = home.store
        self.merge_threshold = merge_threshold
        self.chunk_bytes = chunk_bytes
        self.buffer_rows = buffer_rows
        self.max_line_bytes = max_line_bytes
        self.progress = progress
        self.prev = load_manifest(home)
        self.number = self.prev.number + 1 if self.prev else 1
        self.run_id = new_id()
        self.seq = 0
        self.files: list[FileEntry] = list(self.prev.files) if self.prev else []
        self.new_files: list[FileEntry] = []
        self.dirs: set[Path] = set()
        self.buffers: dict[tuple[str, str], list[pa.Table]] = {}
        self.buffered = 0
        self.new_h: list[np.ndarray] = []
        self.new_pos: list[np.ndarray] = []
        self.reader = LineReader(home)
        self.index = IdIndex.from_tables(
            [pq.read_table(self.store / e.path) for e in self.prev.index] if self.prev else []
        )

    # ------------------------------------------------------------------ the run
    def run(self) -> CompactResult:
        plans = [self._plan(stream) for stream in STREAMS]
        total = sum(end - start for _, start, end, _ in plans)
        ranges: dict[str, StreamRange] = {}
        with self._bar(total) as bar:
            for stream, start, end, prev_range in plans:
                ranges[stream] = self._consume(stream, start, end, prev_range, bar)
        consumed = any(r.end > r.start for r in ranges.values())
        if not consumed:
            return self._result(self.prev, created=False, streams=ranges, merged=0)
        self._flush()
        fault_hook("after-parquet")
        index = list(self.prev.index) if self.prev else []
        if self.new_h:
            index.append(self._write_index(np.concatenate(self.new_h), np.concatenate(self.new_pos), "ids"))
        if len(index) > INDEX_MERGE_THRESHOLD:
            index = [self._write_index(self.index.h, self.index.pos, "ids-all")]
        merged = self._merge()
        fsync_dirs(self.dirs)
        manifest = Manifest(
            number=self.number,
            event_schema_version=SCHEMA_VERSION,
            streams=ranges,
            files=sorted(self.files, key=lambda e: e.path),
            index=index,
            rows={family: sum(e.rows for e in self.files if e.family == family) for family in COLUMNS},
            merged=merged,
        )
        fault_hook("before-manifest")
        create_manifest(self.home, manifest)
        fault_hook("after-manifest")
        return self._result(manifest, created=True, streams=ranges, merged=len(merged))

    def _result(
        self, manifest: Manifest | None, *, created: bool, streams: dict[str, StreamRange], merged: int
    ) -> CompactResult:
        return CompactResult(
            manifest=manifest.number if manifest else None,
            created=created,
            streams={s: r.outcomes for s, r in streams.items()},
            files_written=len(self.new_files) if created else 0,
            files_merged=merged,
            rows=dict(manifest.rows) if manifest else dict.fromkeys(COLUMNS, 0),
        )

    @contextmanager
    def _bar(self, total: int):
        if not self.progress or total < (1 << 20):
            yield None
            return
        import click

        with click.progressbar(length=total, label="compacting", file=sys.stderr) as bar:
            yield bar

    # ------------------------------------------------------------------ reading
    def _plan(self, stream: str) -> tuple[str, int, int, StreamRange | None]:
        prev_range = self.prev.streams.get(stream) if self.prev else None
        start = prev_range.end if prev_range else 0
        path = self.home.stream(stream)
        size = path.stat().st_size if path.exists() else 0
        if size < start:
            raise StoreCorrupt(
                f"{path} has {size} bytes but the store already consumed {start}: the stream was truncated or replaced"
            )
        if size == start:
            return stream, start, start, prev_range
        with open(path, "rb") as handle:
            return stream, start, _last_newline_end(handle, start, size), prev_range

    def _consume(self, stream: str, start: int, end: int, prev_range: StreamRange | None, bar) -> StreamRange:
        line_start = prev_range.next_line if prev_range else 1
        keep = prev_range.deadletter_bytes if prev_range else 0
        letters = (
            DeadLetters(self.home.deadletter, stream, keep)
            if (keep or (self.home.deadletter / f"{stream}.jsonl").exists() or end > start)
            else None
        )
        outcomes = Outcomes()
        digest = hashlib.sha256()
        try:
            if end > start:
                # Arrow releases the GIL while it parses: the next chunk is parsed while this one is taken.
                with open(self.home.stream(stream), "rb") as handle, ThreadPoolExecutor(_WORKERS) as pool:
                    pending: deque[tuple[Chunk, Future]] = deque()
                    for chunk in self._chunks(stream, handle, start, end, line_start):
                        pending.append((chunk, pool.submit(parse_chunk, chunk, self.max_line_bytes)))
                        if len(pending) >= _WORKERS:
                            self._settle(pending.popleft(), digest, outcomes, letters, bar)
                    while pending:
                        self._settle(pending.popleft(), digest, outcomes, letters, bar)
        except BaseException:
            if letters is not None:
                letters.close()
            raise
        dl_bytes = keep
        if letters is not None:
            letters.sync_and_close()
            dl_bytes = letters.size
        return StreamRange(
            start=start,
            end=end,
            sha256=digest.hexdigest(),
            line_start=line_start,
            outcomes=outcomes,
            deadletter_bytes=dl_bytes,
        )

    def _settle(self, item: tuple[Chunk, Future], digest, outcomes: Outcomes, letters: DeadLetters | None, bar) -> None:
        chunk, parsed = item
        digest.update(chunk.block)
        self._take(chunk, parsed.result(), outcomes, letters)
        if bar is not None:
            bar.update(len(chunk.block))

    def _chunks(self, stream: str, handle, start: int, end: int, line_no: int) -> Iterator[Chunk]:
        pos = start
        while pos < end:
            handle.seek(pos)
            block = handle.read(min(self.chunk_bytes, end - pos))
            cut = block.rfind(b"\n") + 1
            while cut == 0:  # one line longer than a chunk: read on to its newline
                more = handle.read(min(self.chunk_bytes, end - pos - len(block)))
                block += more
                cut = block.rfind(b"\n") + 1
            chunk = Chunk.of(stream, block[:cut], pos, line_no)
            yield chunk
            pos += cut
            line_no += len(chunk)

    # ------------------------------------------------------------------ validating and deduplicating
    def _take(self, chunk: Chunk, parsed: ParsedChunk, outcomes: Outcomes, letters: DeadLetters | None) -> None:
        """Deduplicate a parsed chunk against the index, buffer its new rows, dead-letter the rest."""
        outcomes.lines += len(chunk)
        outcomes.frames += parsed.frames
        rejected: list[tuple[int, str]] = list(parsed.invalid)
        outcomes.invalid += len(parsed.invalid)
        families = sorted(parsed.tables)
        if families:
            lines = np.concatenate([parsed.tables[f]["_line"].to_numpy() for f in families])
            ids = pa.concat_arrays([parsed.tables[f]["id"].combine_chunks() for f in families])
            order = np.argsort(lines, kind="stable")
            lines = lines[order]
            ids = ids.take(pa.array(order))
            h = hash_ids(ids)
            verdict = self.index.classify(h, lambda k: chunk.line(int(lines[k])), self.reader)
            new = verdict == NEW
            pos = position(chunk.stream, chunk.offsets[lines[new]])
            self.index.add(h[new], pos)
            self.new_h.append(h[new])
            self.new_pos.append(pos)
            outcomes.stored += int(new.sum())
            outcomes.duplicate += int((verdict == DUPLICATE).sum())
            outcomes.conflict += int((verdict == CONFLICT).sum())
            rejected += [
                (int(lines[k]), f"id: conflict: {ids[int(k)].as_py()!r} is already stored with a different payload")
                for k in np.flatnonzero(verdict == CONFLICT)
            ]
            keep = np.zeros(len(chunk), bool)
            keep[lines[new]] = True
            for family in families:
                table = parsed.tables[family]
                mask = keep[table["_line"].to_numpy()]
                kept = (table if mask.all() else table.filter(pa.array(mask))).drop_columns(["_line"])
                if kept.num_rows:
                    self._buffer(family, kept)
        if rejected:
            if letters is None:
                raise StoreCorrupt(f"no dead-letter file open for {chunk.stream}")
            for i, reason in sorted(rejected):
                letters.write(
                    deadletter_record(chunk.stream, int(chunk.offsets[i]), chunk.first_line + i, reason, chunk.line(i))
                )

    # ------------------------------------------------------------------ writing
    def _buffer(self, family: str, table: pa.Table) -> None:
        codes = pc.dictionary_encode(pc.cast(table["at"], pa.date32()), null_encoding="encode").combine_chunks()
        keys = [d.isoformat() if d is not None else "none" for d in codes.dictionary.to_pylist()]
        idx = codes.indices.to_numpy()
        grouped = len(keys) == 1 or bool(np.all(idx[:-1] <= idx[1:]))  # time-ordered streams usually are
        order = np.arange(len(idx)) if grouped else np.argsort(idx, kind="stable")
        bounds = np.searchsorted(idx[order], np.arange(len(keys) + 1))
        ordered = table if grouped else table.take(pa.array(order))
        for k, key in enumerate(keys):
            self.buffers.setdefault((family, key), []).append(ordered.slice(bounds[k], bounds[k + 1] - bounds[k]))
        self.buffered += table.num_rows
        if self.buffered >= self.buffer_rows:
            self._flush()

    def _path(self, family: str, partition: str, tag: str) -> Path:
        self.seq += 1
        return (
            self.store / family / f"date={partition}" / f"{self.number:020d}-{self.run_id}-{self.seq:05d}{tag}.parquet"
        )

    def _flush(self) -> None:
        """Write one file per buffered partition (in parallel: the Parquet writer releases the GIL)."""
        jobs = [(family, partition, self._path(family, partition, "")) for family, partition in sorted(self.buffers)]

        def write(job: tuple[str, str, Path]) -> FileEntry:
            family, partition, path = job
            table = pa.concat_tables(self.buffers[(family, partition)])
            write_parquet(table, path)
            return entry_for(self.store, path, family, partition, table.num_rows)

        with ThreadPoolExecutor(_WORKERS) as pool:
            entries = list(pool.map(write, jobs))
        for (_, _, path), entry in zip(jobs, entries):
            self.dirs.add(path.parent)
            self.files.append(entry)
            self.new_files.append(entry)
        self.buffers.clear()
        self.buffered = 0

    def _write_index(self, h: np.ndarray, pos: np.ndarray, tag: str) -> FileEntry:
        self.seq += 1
        path = self.store / "_index" / f"{self.number:020d}-{self.run_id}-{self.seq:05d}-{tag}.parquet"
        write_parquet(segment_table(h, pos), path)
        self.dirs.add(path.parent)
        return entry_for(self.store, path, "_index", "-", len(h))

    def _merge(self) -> list[str]:
        """Merge the files of each partition that holds more than ``merge_threshold``; return the replaced paths."""
        groups: dict[tuple[str, str], list[FileEntry]] = {}
        for entry in self.files:
            groups.setdefault((entry.family, entry.partition), []).append(entry)
        replaced: list[str] = []
        for (family, partition), entries in sorted(groups.items()):
            if len(entries) <= self.merge_threshold:
                continue
            entries = sorted(entries, key=lambda e: e.path)
            table = pa.concat_tables([pq.read_table(self.store / e.path, schema=SCHEMAS[family]) for e in entries])
            path = self._path(family, partition, "-merged")
            write_parquet(table, path)
            self.dirs.add(path.parent)
            gone = {e.path for e in entries}
            self.files = [e for e in self.files if e.path not in gone]
            self.files.append(entry_for(self.store, path, family, partition, table.num_rows))
            replaced += sorted(gone)
        return replaced
