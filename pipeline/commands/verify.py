"""``ratings verify``: recheck the events table against its commit log, this home's streams and dead letters.

Checked, naming every problem (docs/design.md, Storage):

- the table opens, and every live file of the checked version exists with the size the log records and the
  row count its statistics record;
- per stream of this home's writer, the committed ranges are contiguous from byte 0 (line numbers too), the
  stream still holds those bytes and their sha256 and line count match, the outcomes add up to the lines,
  the dead-letter records written for a range are as many as its invalid lines and conflicts and lie in it,
  and the application transactions agree with the last range;
- the events stored by all commits (every writer's) equal the rows of the table.

Ids stored twice (two writers committed one id at the same moment; readers keep one row) are listed, not
failed; files under the table that no version references (killed runs) are counted: ``ratings vacuum``
removes them. When the store is damaged the remedy is ``ratings compact --rebuild`` (the streams are the
source of truth).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import PipelineError, StoreCorrupt
from ..workspace import STREAMS, StoreLocation, StrPath, Workspace

REBUILD = (
    "to recover: `ratings compact --rebuild` rebuilds the store from the streams, the source of truth "
    "(restore a stream named above first)"
)


class VerifyResult(BaseModel):
    ok: bool
    version: int | None  # the table version checked (None: no table yet)
    writer: str | None  # this home's writer, whose stream ranges were checked
    commits: int  # compaction commits checked (every writer's)
    files: int  # live files checked
    problems: list[str]
    duplicate_ids: list[str]  # ids stored more than once (readers keep one row each)
    unreferenced_files: int  # files under the table this version does not list (replaced, or of runs never committed)

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


def verify(home: Workspace | StrPath | None = None, *, as_of: str | None = None) -> VerifyResult:
    """Check the store; ``ok`` is False with every problem named (a store that cannot be opened is one problem)."""
    from ..store.commits import METADATA_KEY, CommitRecord
    from ..store.table import commits, open_table, txn_ids
    from ..store.writer import identity

    ws = Workspace.of(home)
    location = ws.store
    as_of = as_of if as_of is not None else ws.as_of
    writer = identity(ws).writer if ws.writer_file.exists() else None
    try:
        table = open_table(location, as_of)
    except PipelineError as exc:
        if not isinstance(exc, StoreCorrupt):  # bad input, a machine or a store that cannot be reached
            raise
        return VerifyResult(
            ok=False,
            version=None,
            writer=writer,
            commits=0,
            files=0,
            problems=[f"{exc}"],
            duplicate_ids=[],
            unreferenced_files=0,
        )
    if table is None:
        return VerifyResult(
            ok=True,
            version=None,
            writer=writer,
            commits=0,
            files=0,
            problems=[],
            duplicate_ids=[],
            unreferenced_files=0,
        )
    problems: list[str] = []
    records = [
        (c["version"], CommitRecord.model_validate(c[METADATA_KEY]))
        for c in commits(table, location)
        if METADATA_KEY in c
    ]
    stored = sum(r.streams[s].outcomes.stored for _, r in records for s in r.streams)
    files, rows, file_problems, unreferenced = _check_files(location, table)
    problems += file_problems
    if stored != rows:
        problems.append(f"the commits stored {stored} events in all, the table holds {rows} rows")
    if writer is not None:
        mine = [(v, r) for v, r in records if r.writer == writer]
        for stream in STREAMS:
            problems += _check_ranges(ws, table, writer, stream, mine, txn_ids(writer, stream))
    duplicates = _duplicate_ids(location, table) if not file_problems else []
    if problems:
        problems.append(REBUILD)
    return VerifyResult(
        ok=not problems,
        version=table.version(),
        writer=writer,
        commits=len(records),
        files=files,
        problems=problems,
        duplicate_ids=duplicates,
        unreferenced_files=unreferenced,
    )


def _check_ranges(
    ws: Workspace, table: Any, writer: str, stream: str, records: list[tuple[int, Any]], txns: tuple[str, str, str]
) -> list[str]:
    problems: list[str] = []
    end, next_line, dl_end = 0, 1, 0
    path = ws.stream(stream)
    size = path.stat().st_size if path.exists() else 0
    for version, record in records:
        rng = record.streams.get(stream)
        if rng is None:
            continue
        where = f"version {version} ({writer}, {stream})"
        if (rng.start, rng.line_start, rng.deadletter[0]) != (end, next_line, dl_end):
            problems.append(
                f"{where}: range starts at byte {rng.start} line {rng.line_start} (dead letters at "
                f"{rng.deadletter[0]}), the previous one ended at byte {end} line {next_line} ({dl_end})"
            )
        out = rng.outcomes
        if out.stored + out.duplicate + out.conflict + out.invalid + out.frames != out.lines:
            problems.append(f"{where}: outcomes {out.model_dump()} do not add up to its {out.lines} lines")
        if size < rng.end:
            problems.append(f"{where}: {path} has {size} bytes, the store consumed up to {rng.end}")
        else:
            digest, lines = _range_digest(path, rng.start, rng.end)
            if digest != rng.sha256:
                problems.append(
                    f"{where}: sha256 of bytes {rng.start}..{rng.end} is {digest}, the commit says {rng.sha256}"
                )
            if lines != out.lines:
                problems.append(f"{where}: {lines} lines in bytes {rng.start}..{rng.end}, the commit says {out.lines}")
        letters = _deadletter_records(ws.dead_letters(stream), *rng.deadletter)
        if letters is None:
            problems.append(
                f"{where}: deadletter/{stream}.jsonl is shorter than the {rng.deadletter[1]} bytes recorded"
            )
        else:
            if len(letters) != out.invalid + out.conflict:
                problems.append(
                    f"{where}: {len(letters)} dead letters, the commit counts {out.invalid} invalid "
                    f"+ {out.conflict} conflicts"
                )
            outside = [r.get("line_no") for r in letters if not rng.start <= r.get("byte_offset", -1) < rng.end]
            if outside:
                problems.append(f"{where}: dead letters of lines {outside[:5]} lie outside its byte range")
        end, next_line, dl_end = rng.end, rng.next_line, rng.deadletter[1]
    recorded = tuple(table.transaction_version(t) for t in txns)
    if records and any(stream in r.streams for _, r in records) and recorded != (end, next_line, dl_end):
        problems.append(
            f"({writer}, {stream}): the table's transactions say byte {recorded[0]} line {recorded[1]} dead letters "
            f"{recorded[2]}, its commits end at byte {end} line {next_line} dead letters {dl_end}"
        )
    return problems


def _check_files(location: StoreLocation, table: Any) -> tuple[int, int, list[str], int]:
    """(live files, rows by their statistics, problems, files no version references)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    actions = pa.table(table.get_add_actions(flatten=True))
    problems: list[str] = []
    rows = 0
    fs, root = _filesystem(location)
    for path, size, records in zip(
        actions["path"].to_pylist(),
        actions["size_bytes"].to_pylist(),
        actions["num_records"].to_pylist(),
        strict=True,
    ):
        rows += int(records or 0)
        where = f"{root}/{path}" if root else path
        info = fs.get_file_info(where)
        if info.size is None:
            problems.append(f"file {path} is missing")
            continue
        if info.size != size:
            problems.append(f"file {path} has {info.size} bytes, the log says {size}")
            continue
        try:
            with fs.open_input_file(where) as handle:
                found = pq.read_metadata(handle).num_rows
        except (OSError, pa.ArrowException) as exc:
            problems.append(f"file {path} is not readable Parquet ({str(exc).splitlines()[0]})")
            continue
        if records is not None and found != records:
            problems.append(f"file {path} has {found} rows, the log says {records}")
    import pyarrow.fs as pafs

    live = set(actions["path"].to_pylist())
    listed = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    prefix = f"{root}/" if root else ""
    data = [i.path.removeprefix(prefix) for i in listed if i.type == pafs.FileType.File and i.path.endswith(".parquet")]
    unreferenced = sum(1 for path in data if not path.startswith("_delta_log/") and path not in live)
    return actions.num_rows, rows, problems, unreferenced


def _filesystem(location: StoreLocation) -> tuple[Any, str]:
    """A pyarrow file system for the table and the table's root in it."""
    import pyarrow.fs as pafs

    if location.table_path is not None:
        return pafs.LocalFileSystem(), str(location.table_path)
    from deltalake.fs import DeltaStorageHandler

    return pafs.PyFileSystem(DeltaStorageHandler(location.table_uri, location.options)), ""


def _duplicate_ids(location: StoreLocation, table: Any) -> list[str]:
    """Ids held by more than one row (first 100, sorted)."""
    import duckdb

    from ..store.views import _quote

    con = duckdb.connect(":memory:")
    try:
        if location.table_path is not None:
            files = ", ".join(_quote(f) for f in table.file_uris())
            source = (
                f"read_parquet([{files}], hive_partitioning = false)" if files else "(SELECT NULL AS id, 0 AS _id_hash)"
            )
        else:  # read whole into memory: DuckDB never stops an Arrow scan half way (its threads would outlive it)
            con.register("ids", table.to_pyarrow_dataset().to_table(columns=["id", "_id_hash"]))
            source = "ids"
        rows = con.execute(
            f"SELECT id FROM {source} WHERE _id_hash IN (SELECT _id_hash FROM {source} GROUP BY 1 HAVING count(*) > 1) "
            "GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 100"
        ).fetchall()
    finally:
        con.close()
    return [r[0] for r in rows]
