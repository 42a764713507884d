"""``ratings verify``: recompute what the manifests claim from the streams, dead letters and store files.

Checked, naming every mismatch:

- each manifest reads, its number matches its file name, numbers run 1, 2, 3 ...;
- per stream the consumed ranges are contiguous (each starts where the previous one
  ended, line numbers too); the stream still holds those bytes and their SHA-256 and
  line count match; the outcomes add up to the lines;
- the dead-letter records written by each compaction are as many as its invalid lines
  plus conflicts, and lie in its byte range;
- every file the newest manifest lists exists with the recorded size, SHA-256 and rows;
  the rows per family and the id index add up; the stored events across all manifests
  equal the rows of the store; ids are unique in the store.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .home import Home
from .manifest import Manifest, file_sha256, load_manifest, manifest_numbers


class VerifyResult(BaseModel):
    ok: bool
    manifests: int
    newest: int | None
    files: int
    problems: list[str]

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _range_digest(path: Path, start: int, end: int) -> tuple[str, int]:
    """(SHA-256, newline count) of the bytes ``[start, end)`` of ``path``."""
    digest = hashlib.sha256()
    lines = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            block = handle.read(min(left, 1 << 22))
            if not block:
                break
            digest.update(block)
            lines += block.count(b"\n")
            left -= len(block)
    return digest.hexdigest(), lines


def _deadletter_records(path: Path, start: int, end: int) -> list[dict[str, Any]] | None:
    """The records in bytes ``[start, end)`` of a dead-letter file; None when the file is shorter."""
    if end == start:
        return []
    if not path.exists() or path.stat().st_size < end:
        return None
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(end - start)
    return [json.loads(line) for line in data.splitlines() if line]


def verify(home: str | os.PathLike | Home | None = None) -> VerifyResult:
    """Check the store against its manifests and the streams; ``ok`` is False with every problem named."""
    home = Home.resolve(home)
    problems: list[str] = []
    numbers = manifest_numbers(home)
    manifests: list[Manifest] = []
    for expected, number in enumerate(numbers, start=1):
        if number != expected:
            problems.append(f"manifest numbers are not 1..{len(numbers)}: found {number} where {expected} was due")
        try:
            manifest = load_manifest(home, number)
        except Exception as exc:  # StoreCorrupt: say which and go on with the others
            problems.append(str(exc))
            continue
        if manifest.number != number:
            problems.append(f"manifest {number} says it is number {manifest.number}")
        manifests.append(manifest)
    ends: dict[str, tuple[int, int, int]] = {}  # stream -> (end, next line, dead-letter bytes)
    stored = 0
    for manifest in manifests:
        for stream, rng in manifest.streams.items():
            where = f"manifest {manifest.number} stream {stream}"
            end, next_line, dl_bytes = ends.get(stream, (0, 1, 0))
            if (rng.start, rng.line_start) != (end, next_line):
                problems.append(
                    f"{where}: range starts at byte {rng.start} line {rng.line_start}, "
                    f"the previous one ended at byte {end} line {next_line}"
                )
            out = rng.outcomes
            if out.stored + out.duplicate + out.conflict + out.invalid + out.frames != out.lines:
                problems.append(f"{where}: outcomes {out.model_dump()} do not add up to its {out.lines} lines")
            stored += out.stored
            path = home.stream(stream)
            size = path.stat().st_size if path.exists() else 0
            if size < rng.end:
                problems.append(f"{where}: {path} has {size} bytes, the manifest consumed up to {rng.end}")
            else:
                digest, lines = _range_digest(path, rng.start, rng.end)
                if digest != rng.sha256:
                    problems.append(
                        f"{where}: sha256 of bytes {rng.start}..{rng.end} is {digest}, the manifest says {rng.sha256}"
                    )
                if lines != out.lines:
                    problems.append(
                        f"{where}: {lines} lines in bytes {rng.start}..{rng.end}, the manifest says {out.lines}"
                    )
            records = _deadletter_records(home.deadletter / f"{stream}.jsonl", dl_bytes, rng.deadletter_bytes)
            if records is None:
                problems.append(
                    f"{where}: deadletter/{stream}.jsonl is shorter than the {rng.deadletter_bytes} bytes recorded"
                )
            else:
                if len(records) != out.invalid + out.conflict:
                    problems.append(
                        f"{where}: {len(records)} dead letters, the manifest counts "
                        f"{out.invalid} invalid + {out.conflict} conflicts"
                    )
                outside = [r["line_no"] for r in records if not rng.start <= r.get("byte_offset", -1) < rng.end]
                if outside:
                    problems.append(f"{where}: dead letters of lines {outside[:5]} lie outside its byte range")
            ends[stream] = (rng.end, rng.next_line, rng.deadletter_bytes)
    newest = manifests[-1] if manifests else None
    files = 0
    if newest is not None:
        files = len(newest.files) + len(newest.index)
        problems += _check_files(home, newest, stored)
    return VerifyResult(
        ok=not problems,
        manifests=len(numbers),
        newest=newest.number if newest else None,
        files=files,
        problems=problems,
    )


def _check_files(home: Home, manifest: Manifest, stored: int) -> list[str]:
    import pyarrow.parquet as pq

    problems: list[str] = []
    where = f"manifest {manifest.number}"
    per_family: dict[str, int] = {}
    for entry in [*manifest.files, *manifest.index]:
        path = home.store / entry.path
        if not path.is_file():
            problems.append(f"{where}: file {entry.path} is missing")
            continue
        if path.stat().st_size != entry.bytes:
            problems.append(
                f"{where}: file {entry.path} has {path.stat().st_size} bytes, the manifest says {entry.bytes}"
            )
            continue
        if file_sha256(path) != entry.sha256:
            problems.append(f"{where}: file {entry.path} does not have the sha256 the manifest records")
            continue
        rows = pq.read_metadata(path).num_rows
        if rows != entry.rows:
            problems.append(f"{where}: file {entry.path} has {rows} rows, the manifest says {entry.rows}")
        per_family[entry.family] = per_family.get(entry.family, 0) + rows
    index_rows = per_family.pop("_index", 0)
    for family, rows in sorted(manifest.rows.items()):
        if per_family.get(family, 0) != rows:
            problems.append(
                f"{where}: family {family} has {per_family.get(family, 0)} rows in its files, the manifest says {rows}"
            )
    total = sum(manifest.rows.values())
    if index_rows != total:
        problems.append(f"{where}: the id index holds {index_rows} ids for {total} stored events")
    if stored != total:
        problems.append(f"{where}: the manifests stored {stored} events in all, the store holds {total}")
    if not problems and total:
        problems += _check_unique_ids(home, manifest)
    return problems


def _check_unique_ids(home: Home, manifest: Manifest) -> list[str]:
    import duckdb

    paths = ", ".join("'" + str(home.store / e.path).replace("'", "''") + "'" for e in manifest.files)
    con = duckdb.connect(":memory:")
    try:
        dupes = con.execute(
            f"SELECT id, count(*) FROM read_parquet([{paths}], hive_partitioning = false, union_by_name = true) "
            "GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 5"
        ).fetchall()
    finally:
        con.close()
    return [f"manifest {manifest.number}: id {i!r} is stored {n} times" for i, n in dupes]
