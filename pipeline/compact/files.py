"""Data files of the events table and the dead letters (docs/design.md, Storage).

A compaction writes its Parquet files itself (one per partition it touches, or several when its buffer
fills), then commits them all in one Delta commit with their statistics; a file no commit names is
invisible to every reader, and ``ratings vacuum`` removes it. Files of a local store are created through
:meth:`pipeline.workspace.Workspace.open` (never following a link out of the home or the store) and fsync'd
with their directories before the commit; files of an object store go through delta-rs's own object store.
"""

from __future__ import annotations

import base64
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import StoreCorrupt
from ..store.schema import ROW_GROUP_ROWS
from ..utc import aware
from ..workspace import NOFOLLOW, StoreLocation, Workspace, fsync_dir
from .rows import ENCODED_COLUMNS

#: snappy is fast to write and read; statistics let every engine skip row groups on filters.
#: Unique per row (ids, offsets, hashes, times, free text): no dictionary page, which the writer would build and
#: then drop; every other column (config parts, types, raters, regions, writer names) repeats and gets one.
UNIQUE_COLUMNS = frozenset({"id", "at", "_offset", "_id_hash", "raw", "extra", "labels", "title", "claim", "rating"})
#: No Arrow schema in the footer: a column compaction kept dictionary-encoded (below) is a plain string column
#: in the file, and every reader reads it as the table's schema says (the Parquet schema holds all of it).
#: Row groups of :data:`~pipeline.store.schema.ROW_GROUP_ROWS`: what readers split a file into.
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "snappy",
    "write_statistics": True,
    "store_schema": False,
    "row_group_size": ROW_GROUP_ROWS,
}


def encode_columns(table: pa.Table) -> pa.Table:
    """``table`` with its :data:`~pipeline.compact.rows.ENCODED_COLUMNS` dictionary-encoded (the same values)."""
    for index, name in enumerate(table.column_names):
        if name in ENCODED_COLUMNS and pa.types.is_string(table.schema.field(index).type):
            table = table.set_column(index, name, pc.dictionary_encode(table[name]))
    return table


def parquet_options(table: pa.Table) -> dict[str, Any]:
    """Writer options for one data file: dictionary encoding only for the columns that repeat."""
    return {**PARQUET_OPTIONS, "use_dictionary": [c for c in table.column_names if c not in UNIQUE_COLUMNS]}


_STAT_STRING_MAX = 32  # longer strings get no min/max in the commit (a truncated max would be wrong)
#: Columns whose min/max the commit records (what queries filter on); every column gets its null count.
STATS_COLUMNS = frozenset(
    {"id", "type", "at", "v", "task", "config_key", "score", "cost_usd", "_writer", "_stream", "_offset", "_id_hash"}
)


def partition_dir(family: str) -> str:
    """``family=<f>`` (Hive style)."""
    return f"family={family}"


def _stat_value(value: Any, upper: bool) -> Any:
    if isinstance(value, datetime):
        moment = aware(value)
        millis = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
        if upper and millis != moment:  # stats hold milliseconds: round a maximum up, a minimum down
            millis += timedelta(milliseconds=1)
        return millis.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float):
        return value + 0.0  # Parquet writes a zero minimum as -0.0: the log records 0.0
    return value


def file_stats(metadata: pq.FileMetaData) -> str:
    """The Delta ``stats`` of one data file (``numRecords``, ``nullCount``, ``minValues``/``maxValues``), read
    off the statistics its Parquet writer kept per row group (no second pass over the data). List columns get
    none; min/max only for :data:`STATS_COLUMNS`, short strings and finite numbers."""
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    groups = [metadata.row_group(g) for g in range(metadata.num_row_groups)]
    for index in range(metadata.num_columns):
        name = metadata.schema.column(index).path
        if "." in name:  # a list's element
            continue
        stats = [group.column(index).statistics for group in groups]  # the writer keeps them for every column
        nulls[name] = sum(s.null_count for s in stats)
        if name not in STATS_COLUMNS or metadata.schema.column(index).physical_type == "BOOLEAN":
            continue
        bounded = [s for s in stats if s.has_min_max]
        if not bounded or any(s.num_values and not s.has_min_max for s in stats):  # all null, or not bounded
            continue
        low, high = min(s.min for s in bounded), max(s.max for s in bounded)
        if isinstance(low, str) and (len(low) > _STAT_STRING_MAX or len(high) > _STAT_STRING_MAX):
            continue
        if isinstance(low, float) and not (math.isfinite(low) and math.isfinite(high)):
            continue
        mins[name], maxs[name] = _stat_value(low, False), _stat_value(high, True)
    return json.dumps(
        {"numRecords": metadata.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
        separators=(",", ":"),
    )


class TableFiles:
    """Writes data files into the table's directory (local) or prefix (object store); returns their sizes."""

    def __init__(self, ws: Workspace, location: StoreLocation | None = None):
        self.ws = ws
        self.location = location = location if location is not None else ws.store
        self.files: list[Path] = []
        self.dirs: set[Path] = set()
        self._fs = None
        if location.local is None:
            from deltalake.fs import DeltaStorageHandler
            from pyarrow.fs import PyFileSystem

            self._fs = PyFileSystem(DeltaStorageHandler(location.table_uri, location.options))

    def write(self, table: pa.Table, relative: str) -> tuple[int, pq.FileMetaData]:
        """Write ``table`` to ``relative`` (a new name) durably; its size in bytes and its Parquet metadata."""
        if self._fs is not None:
            with self._fs.open_output_stream(relative) as out:
                metadata = write_parquet(table, out)
            return int(self._fs.get_file_info(relative).size), metadata
        root = self.location.table_path
        assert root is not None
        path = root / relative
        fd = self.ws.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "wb") as handle:
            metadata = write_parquet(table, handle)
            handle.flush()
            size = os.fstat(handle.fileno()).st_size
        self.files.append(path)
        self.dirs.add(path.parent)
        return size, metadata

    def sync(self) -> None:
        """fsync every file written and every directory one was created in (up to the table), 16 at once:
        concurrent fsyncs share the file system's journal commits, one at a time they would wait for each."""
        root = self.location.table_path
        if root is None:
            return
        dirs = set(self.dirs)
        for d in self.dirs:
            dirs.update(p for p in d.parents if p.is_relative_to(root))
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(_fsync_file, self.files))
            list(pool.map(fsync_dir, sorted(dirs)))


def write_parquet(table: pa.Table, sink: Any) -> pq.FileMetaData:
    """Write ``table`` as one Parquet file to ``sink`` (row groups of :data:`~pipeline.store.schema.ROW_GROUP_ROWS`);
    its metadata. A failed write (a full disk) raises its own ``OSError``: ``pq.write_table`` would replace it by a
    ``RuntimeError`` (its writer, closed after the failure, has no metadata to collect) and print another from its
    finaliser."""
    options = parquet_options(table)
    rows = options.pop("row_group_size")
    writer = pq.ParquetWriter(sink, table.schema, **options)
    try:
        writer.write_table(table, row_group_size=rows)
        writer.close()
    except BaseException:
        writer.is_open = False  # failed: its finaliser must not close it again (it would raise there)
        raise
    return writer.writer.metadata


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def deadletter_record(
    stream: str, offset: int, line_no: int, reason: str, raw: bytes, *, raw_bytes: int | None = None
) -> bytes:
    """One dead-letter line: ``{stream, byte_offset, line_no, reason, raw_b64}``; for a line over the size limit,
    ``raw_b64`` holds its first bytes and ``raw_bytes`` its length (the stream keeps it whole)."""
    record: dict[str, Any] = {
        "stream": stream,
        "byte_offset": offset,
        "line_no": line_no,
        "reason": reason,
        "raw_b64": base64.b64encode(raw).decode("ascii"),
    }
    if raw_bytes is not None:
        record["raw_bytes"] = raw_bytes
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class DeadLetters:
    """``deadletter/<stream>.jsonl``, cut back to the size the store recorded (a crashed run's lines go)."""

    def __init__(self, ws: Workspace, stream: str, keep_bytes: int, folder: Path | None = None):
        self.path = ws.dead_letters(stream) if folder is None else folder / ws.dead_letters(stream).name
        self.fd = ws.open(self.path, os.O_RDWR | os.O_CREAT)
        size = os.fstat(self.fd).st_size
        if size < keep_bytes:
            os.close(self.fd)
            raise StoreCorrupt(
                f"{self.path} has {size} bytes, the store recorded {keep_bytes}: dead letters were lost; "
                "run `ratings compact --rebuild` to write them again from the streams"
            )
        if size > keep_bytes:
            os.ftruncate(self.fd, keep_bytes)
        os.lseek(self.fd, keep_bytes, os.SEEK_SET)
        self.start = keep_bytes
        self.size = keep_bytes
        self.written = 0

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(data)
        self.written += len(data)

    def sync(self) -> None:
        if self.written:
            os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)
