"""The table side of one compaction (docs/design.md, Storage): open or create the events table, check the writer's
home, read the hashes of the stored ids, make the one commit with its application transactions, merge small files.

Every delta-rs failure becomes one line (:func:`pipeline.store.table.fail`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import PipelineError, StoreConflict
from ..store.commits import METADATA_KEY, CommitRecord
from ..store.schema import PARTITIONS, ROW_GROUP_ROWS, TABLE_CONFIGURATION, TABLE_SCHEMA, TARGET_FILE_BYTES
from ..store.table import fail, home_txn_id, open_table, txn_ids
from ..store.writer import WriterIdentity
from ..workspace import DELTA_LOG, Workspace


def open_or_create(ws: Workspace) -> Any:
    """The events table at its newest version, created (empty, partitioned) when the store has none."""
    from deltalake import DeltaTable

    location = ws.store
    table = open_table(location)
    if table is not None:
        return table
    try:
        if ws.store_in_home and location.table_path is not None:
            ws.check_folder(location.table_path / DELTA_LOG)
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
    except PipelineError:
        raise
    except Exception as exc:  # noqa: BLE001 - delta-rs and I/O failures become one line
        fail(exc, location, "create")


def check_writer(ws: Workspace, table: Any, writer: WriterIdentity) -> None:
    """Refuse a writer name another home already uses in this store (their offsets would mix)."""
    known = table.transaction_version(home_txn_id(writer.writer))
    if known is not None and known != writer.home_id:
        raise StoreConflict(
            f"writer {writer.writer!r} already commits to {ws.store.describe()} from another home; "
            "give each home its own name (--writer NAME on its first compaction)"
        )


def stored_hashes(ws: Workspace, table: Any) -> np.ndarray:
    """``_id_hash`` of every row of the table at its loaded version."""
    if not table.get_add_actions().num_rows:
        return np.empty(0, np.uint64)
    try:
        column = table.to_pyarrow_dataset().to_table(columns=["_id_hash"])["_id_hash"]
    except Exception as exc:  # noqa: BLE001 - a missing or corrupt data file
        fail(exc, ws.store, "read")
    return column.to_numpy().view(np.uint64)


def commit(ws: Workspace, table: Any, record: CommitRecord, adds: list[Any], writer: WriterIdentity) -> None:
    """The run's one commit: every file it wrote, the record as commit metadata, and per (writer, stream) the
    application transactions whose versions are the end offset, the next line and the dead-letter bytes."""
    from deltalake.transaction import CommitProperties, Transaction

    _check_not_committed_meanwhile(ws, record)
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
    except Exception as exc:  # noqa: BLE001 - delta-rs raises DeltaError, OSError and others: one line (fail)
        fail(exc, ws.store, "commit to")
    table.update_incremental()


def _check_not_committed_meanwhile(ws: Workspace, record: CommitRecord) -> None:
    """Refuse to commit ranges this writer committed since the run started (two compactors of one writer
    that the home's lock did not serialise): delta-rs does not check application transactions itself."""
    latest = open_table(ws.store)
    for stream, rng in record.streams.items():
        if latest is not None and (latest.transaction_version(txn_ids(record.writer, stream)[0]) or 0) != rng.start:
            raise StoreConflict(
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


def optimize(ws: Workspace, table: Any, merge_threshold: int, workers: int) -> int:
    """When a family holds more than ``merge_threshold`` small files, merge the small files of every family into
    files of up to :data:`~pipeline.store.schema.TARGET_FILE_BYTES`, in one optimize commit (Delta's optimize, no
    data change; files at the target are left alone, so a merge rewrites only what recent runs added and the one
    file they fill); the files merged."""
    if not any(n > merge_threshold for n in small_files(table).values()):
        return 0
    try:
        metrics = table.optimize.compact(
            target_size=TARGET_FILE_BYTES, max_concurrent_tasks=workers, writer_properties=writer_properties()
        )
    except Exception as exc:  # noqa: BLE001 - delta-rs raises DeltaError, OSError and others: one line (fail)
        fail(exc, ws.store, "optimize")
    return int(metrics.get("numFilesRemoved", 0))
