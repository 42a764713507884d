"""The table side of one compaction (docs/design.md, Storage): open or create the events table, check the writer's
home, read the hashes of the stored ids, make the one commit with its application transactions, merge small files.

Every delta-rs, Arrow or OS failure becomes one line by its class (:func:`pipeline.store.table.fail`). Each
function works on the store location it is given: the workspace's, or the new table a rebuild makes beside it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import Busy, StoreConflict
from ..store.commits import METADATA_KEY, CommitRecord
from ..store.families import COLUMNS
from ..store.schema import DATA_SCHEMA, PARTITIONS, ROW_GROUP_ROWS, TABLE_CONFIGURATION, TABLE_SCHEMA, TARGET_FILE_BYTES
from ..store.table import fail, home_txn_id, open_table, store_errors, txn_ids
from ..store.writer import WriterIdentity
from ..workspace import DELTA_LOG, TABLE, StoreLocation
from .ids import comparable


def open_or_create(location: StoreLocation) -> Any:
    """The events table at its newest version, created (empty, partitioned) when the store has none."""
    from deltalake import DeltaTable

    table = open_table(location)
    if table is not None:
        return table
    try:
        if location.local is not None and location.bounds is not None:  # a new local store: made inside the bounds
            location.local.mkdir(parents=True, exist_ok=True)
            location.bounds.confine(location.local / TABLE / DELTA_LOG, directory=True)
        return DeltaTable.create(
            location.table_uri,
            TABLE_SCHEMA,
            mode="ignore",  # another writer created it meanwhile: use theirs
            partition_by=PARTITIONS,
            name="events",
            description="ratings pipeline events, one row per event (docs/design.md, Storage)",
            configuration=TABLE_CONFIGURATION,
            storage_options=location.options,
        )
    except store_errors() as exc:
        fail(exc, location, "create")


def check_writer(location: StoreLocation, table: Any, writer: WriterIdentity) -> None:
    """Refuse a writer name another home already uses in this store (their offsets would mix)."""
    known = table.transaction_version(home_txn_id(writer.writer))
    if known is not None and known != writer.home_id:
        raise StoreConflict(
            f"writer {writer.writer!r} already commits to {location.describe()} from another home; "
            "give each home its own name (--writer NAME on its first compaction)"
        )


def stored_hashes(location: StoreLocation, table: Any) -> np.ndarray:
    """``_id_hash`` of every row of the table at its loaded version."""
    if not table.get_add_actions().num_rows:
        return np.empty(0, np.uint64)
    try:
        column = table.to_pyarrow_dataset().to_table(columns=["_id_hash"])["_id_hash"]
    except store_errors() as exc:  # a missing or corrupt data file
        fail(exc, location, "read")
    return column.to_numpy().view(np.uint64)


#: A stored row met again: its family, its comparable values, where its line lies (writer, stream, offset).
StoredRow = tuple[str, dict[str, Any], tuple[str, str, int]]


def stored_rows(location: StoreLocation, table: Any, hashes: np.ndarray) -> dict[str, StoredRow]:
    """id -> (family, comparable row, (writer, stream, offset) of its line) of the stored rows whose
    ``_id_hash`` is one of ``hashes`` (the first by provenance, as readers keep)."""
    import pyarrow.dataset as ds

    names = [f.name for f in DATA_SCHEMA if not f.name.startswith("_") and f.name != "raw"]
    try:
        found = table.to_pyarrow_dataset().to_table(
            columns=["family", *names, "_writer", "_stream", "_offset"],
            filter=ds.field("_id_hash").isin(pa.array(hashes.view(np.int64))),
        )
    except store_errors() as exc:  # a missing or corrupt data file
        fail(exc, location, "read")
    out: dict[str, StoredRow] = {}
    for row in sorted(found.to_pylist(), key=lambda r: (r["_writer"], r["_stream"], r["_offset"])):
        family = row.pop("family")
        where = (row["_writer"], row["_stream"], row["_offset"])
        out.setdefault(row["id"], (family, comparable({c: row.get(c) for c, _ in COLUMNS[family]}), where))
    return out


def commit(location: StoreLocation, table: Any, record: CommitRecord, adds: list[Any], writer: WriterIdentity) -> None:
    """The run's one commit: every file it wrote, the record as commit metadata, and per (writer, stream) the
    application transactions whose versions are the end offset, the next line and the dead-letter bytes."""
    from deltalake.transaction import CommitProperties, Transaction

    _check_not_committed_meanwhile(location, record)  # opens the table again: no link has appeared in it
    txns = [Transaction(home_txn_id(record.writer), writer.home_id)]
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
        table.create_write_transaction(
            adds, "append", TABLE_SCHEMA, partition_by=PARTITIONS, commit_properties=properties
        )
    except store_errors() as exc:
        fail(exc, location, "commit to")
    table.update_incremental()


def _check_not_committed_meanwhile(location: StoreLocation, record: CommitRecord) -> None:
    """Refuse to commit ranges this writer committed since the run started (two compactors of one writer
    that the home's lock did not serialise): delta-rs does not check application transactions itself."""
    latest = open_table(location)
    for stream, rng in record.streams.items():
        if latest is not None and (latest.transaction_version(txn_ids(record.writer, stream)[0]) or 0) != rng.start:
            raise Busy(
                f"another compaction of writer {record.writer!r} committed {stream} meanwhile; nothing of this "
                "run is visible: run `ratings compact` again"
            )


def writer_properties() -> Any:
    """The Parquet writer of the files delta-rs writes for us (merges, the layout migration): snappy and row
    groups of :data:`~pipeline.store.schema.ROW_GROUP_ROWS`, as compaction writes its own."""
    from deltalake import WriterProperties

    return WriterProperties(compression="SNAPPY", max_row_group_size=ROW_GROUP_ROWS)


def small_files(table: Any) -> dict[str, int]:
    """Per family, its live files under :data:`~pipeline.store.schema.TARGET_FILE_BYTES` (the ones a merge takes)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    if not actions.num_rows:
        return {}
    small = actions.filter(pc.less(actions["size_bytes"], TARGET_FILE_BYTES))
    counts = small.group_by("partition.family").aggregate([("path", "count")])
    return dict(zip(counts["partition.family"].to_pylist(), counts["path_count"].to_pylist(), strict=True))


def optimize(location: StoreLocation, table: Any, merge_threshold: int, workers: int) -> int:
    """When a family holds more than ``merge_threshold`` small files, merge the small files of every family into
    files of up to :data:`~pipeline.store.schema.TARGET_FILE_BYTES`, in one optimize commit (Delta's optimize, no
    data change; files at the target are left alone, so a merge rewrites only what recent runs added and the one
    file they fill); the files merged."""
    if not any(n > merge_threshold for n in small_files(table).values()):
        return 0
    location.check_table()
    try:
        metrics = table.optimize.compact(
            target_size=TARGET_FILE_BYTES, max_concurrent_tasks=workers, writer_properties=writer_properties()
        )
    except store_errors() as exc:
        fail(exc, location, "optimize")
    return int(metrics.get("numFilesRemoved", 0))
