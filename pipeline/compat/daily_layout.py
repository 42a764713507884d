"""The events table partitioned by family *and event date* (the layout before files near a target size): one file
per family and day per compaction, so a 1M-rating store was 2,568 files of about 43 KB and every reader paid for
the listing. The first compaction of such a store migrates it (docs/design.md, Storage, Layout). May be dropped
in 0.2.0 (:mod:`pipeline.compat`): a store of that layout is then rebuilt after ``ratings compact --rebuild``.

The migration is one commit of its own, before the compaction's own, and changes no data: it reads every live row
of the version opened (the old files in path order: family, day, run, so that each new file covers consecutive
days), writes them partitioned by family alone into files of up to the target size, and commits, in one Delta
overwrite, the removal of every old file, the new files and the table's new partitioning and schema (without
``event_date``). The log stays whole, and with it every compaction's record and application transactions
(exactly once holds across it), the table's id and properties; ``source.sha256`` of a fit does not move.

The commit is made on the version read or not at all (no retry): when another writer committed meanwhile, the
rows are read again from the newest version. A crash before the commit leaves files no commit names (``ratings
vacuum`` removes them) and the old layout, which the next compaction migrates again; one after it, the new layout.
A compactor of an earlier version refuses to commit into a migrated store (delta-rs: the partition column
``event_date`` is not in the schema), so every writer of a shared store is upgraded first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import PipelineError
from ..store.schema import PARTITIONS, TABLE_SCHEMA, TARGET_FILE_BYTES
from ..store.table import fail, open_table, store_errors
from ..workspace import StoreLocation

#: The partition columns of the old layout.
DAILY = ["family", "event_date"]
#: The commit metadata of a migration: ``{from, to, read_version, files}``.
LAYOUT_KEY = "ratings.layout"
_ATTEMPTS = 8  # migrations tried when other writers keep committing meanwhile


def needs_migration(table: Any) -> bool:
    """Whether the table has the old layout; any other partitioning than the two known ones is refused."""
    columns = list(table.metadata().partition_columns)
    if columns == PARTITIONS:
        return False
    if columns == DAILY:
        return True
    raise PipelineError(
        f"the store's table is partitioned by {columns}, which this version does not know (it writes {PARTITIONS}): "
        "upgrade the pipeline, or rebuild the store with `ratings compact --rebuild`"
    )


def migrate(location: StoreLocation, table: Any, hook: Callable[[str], None]) -> tuple[Any, list[str]]:
    """``table`` (open at its newest version, at ``location``) in the current layout: as it is, or migrated by one
    commit; with a one-line note when it was. ``hook`` is compaction's fault hook (``before-migration``,
    ``after-migration``)."""
    from deltalake.exceptions import CommitFailedError

    for _ in range(_ATTEMPTS):
        if not needs_migration(table):
            return table, []
        hook("before-migration")
        before = len(table.file_uris())
        location.check_table()
        try:
            _rewrite(table)
        except CommitFailedError:  # another writer committed since the version read: read again
            table = open_table(location)
            continue
        except store_errors() as exc:
            fail(exc, location, "migrate")
        hook("after-migration")
        table = open_table(location)
        after = len(table.file_uris())
        return table, [
            f"migrated the store to the layout of files near {TARGET_FILE_BYTES >> 20} MiB per family: {before:,} "
            f"files partitioned by family and event date became {after:,} (version {table.version()}, no data "
            "changed; `ratings vacuum` removes the old files once no retained version needs them)"
        ]
    raise PipelineError(
        f"cannot migrate the store {location.describe()}: other writers committed during {_ATTEMPTS} attempts; "
        "run `ratings compact` again"
    )


def _rewrite(table: Any) -> None:
    """One overwrite commit, on the version ``table`` is open at, of its rows in the current layout."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    from deltalake import write_deltalake
    from deltalake.transaction import CommitProperties

    from ..compact.commit import writer_properties

    dataset = table.to_pyarrow_dataset()
    fragments = sorted(dataset.get_fragments(), key=lambda fragment: fragment.path)  # family=f/event_date=d/...
    ordered = ds.FileSystemDataset(fragments, dataset.schema, dataset.format, dataset.filesystem)
    # a column added to the schema since the old files were written (additive) reads null
    present = set(dataset.schema.names)
    columns = {
        f.name: ds.field(f.name) if f.name in present else pc.scalar(pa.scalar(None, f.type)) for f in TABLE_SCHEMA
    }
    rows = ordered.scanner(columns=columns).to_reader()
    record = {"from": DAILY, "to": PARTITIONS, "read_version": table.version(), "files": len(fragments)}
    write_deltalake(
        table,
        rows,
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=PARTITIONS,
        target_file_size=TARGET_FILE_BYTES,
        writer_properties=writer_properties(),
        commit_properties=CommitProperties(custom_metadata={LAYOUT_KEY: record}, max_commit_retries=0),
    )
