"""Durable Parquet files and dead letters: temp name, fsync, rename (DESIGN 4)."""

from __future__ import annotations

import base64
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import StoreCorrupt
from ..home import fsync_dir
from ..manifest import FileEntry, file_sha256

#: snappy (DuckDB's own default) is fast to write and read; statistics let DuckDB skip row groups on filters.
_PARQUET_OPTIONS = {"compression": "snappy", "write_statistics": True}


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` durably: a temp file beside it, fsync, rename. The caller fsyncs the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as handle:
            pq.write_table(table, handle, **_PARQUET_OPTIONS)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def entry_for(store: Path, path: Path, family: str, partition: str, rows: int) -> FileEntry:
    return FileEntry(
        path=path.relative_to(store).as_posix(),
        family=family,
        partition=partition,
        rows=rows,
        bytes=path.stat().st_size,
        sha256=file_sha256(path),
    )


def fsync_dirs(paths: set[Path]) -> None:
    """fsync each directory, several at once: concurrent fsyncs share the file system's journal commits."""
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(fsync_dir, sorted(paths)))


def deadletter_record(stream: str, offset: int, line_no: int, reason: str, raw: bytes) -> bytes:
    """One dead-letter line: ``{stream, byte_offset, line_no, reason, raw_b64}``."""
    record = {
        "stream": stream,
        "byte_offset": offset,
        "line_no": line_no,
        "reason": reason,
        "raw_b64": base64.b64encode(raw).decode("ascii"),
    }
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class DeadLetters:
    """``deadletter/<stream>.jsonl``, cut back to what the last manifest recorded (a crashed run's lines go)."""

    def __init__(self, directory: Path, stream: str, keep_bytes: int):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{stream}.jsonl"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        size = os.fstat(self.fd).st_size
        if size < keep_bytes:
            os.close(self.fd)
            raise StoreCorrupt(f"{self.path} has {size} bytes, the newest manifest recorded {keep_bytes}")
        if size > keep_bytes:
            os.ftruncate(self.fd, keep_bytes)
        os.lseek(self.fd, keep_bytes, os.SEEK_SET)
        self.size = keep_bytes
        self.written = 0

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(data)
        self.written += len(data)

    def sync_and_close(self) -> None:
        try:
            if self.written:
                os.fsync(self.fd)
        finally:
            os.close(self.fd)

    def close(self) -> None:
        os.close(self.fd)
