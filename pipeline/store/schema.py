"""The events table's columns and layout: the union of the families' columns, the partition first, provenance last.

- ``family`` partitions the table (``family=<f>/``); each family's view is its partition. Within a family, files
  are kept near :data:`TARGET_FILE_BYTES` (compaction's merge, docs/design.md, Storage), whatever span of time
  they cover: a reader filtering on time skips files by their ``at`` statistics, and pays for a few large files
  instead of one per day (a store of an earlier layout, partitioned by day as well, is migrated by its first
  compaction: :mod:`pipeline.compat.daily_layout`);
- then every family column of :data:`pipeline.store.families.COLUMNS` once, in the order they first appear (``at`` is
  a UTC ``timestamp``; a column a family does not have is null in its rows);
- ``raw``: the line as it was appended, for the family ``other`` only (events of a type v1 does not know);
- the provenance of each row, which the compactor needs and any engine may query: ``_writer``, ``_stream``,
  ``_offset`` (where the line lies: in that writer's stream, at that byte) and ``_id_hash`` (a 64-bit hash of
  ``id``, :func:`pipeline.compact.ids.hash_ids`, the key compaction deduplicates on).
"""

from __future__ import annotations

import pyarrow as pa

from .families import COLUMNS

PARTITIONS = ["family"]
#: Files of a family are merged up to this size (Parquet bytes): large enough that listing and opening files costs
#: readers little next to reading them (Spark, Trino and Databricks aim at 128 MiB to 1 GiB), small enough that a
#: nightly merge rewrites little.
TARGET_FILE_BYTES = 128 << 20
#: Rows per Parquet row group: the unit DuckDB, polars and Spark read in parallel (a file of 1M rows is read by
#: eight threads, not one).
ROW_GROUP_ROWS = 1 << 17
PROVENANCE = [
    ("_writer", pa.string()),
    ("_stream", pa.string()),
    ("_offset", pa.int64()),
    ("_id_hash", pa.int64()),
]

_ARROW = {
    "VARCHAR": pa.string(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "VARCHAR[]": pa.list_(pa.string()),
}


def _union() -> list[tuple[str, pa.DataType]]:
    seen: dict[str, pa.DataType] = {}
    for columns in COLUMNS.values():
        for name, sql in columns:
            if name in seen and seen[name] != _ARROW[sql]:
                raise TypeError(f"column {name} has two types across families")  # a contract error, caught by tests
            seen.setdefault(name, _ARROW[sql])
    return list(seen.items())


#: The data columns (what a Parquet file of the table holds: no partition columns).
DATA_FIELDS: list[tuple[str, pa.DataType]] = [*_union(), ("raw", pa.string()), *PROVENANCE]
DATA_SCHEMA = pa.schema(DATA_FIELDS)
#: The table's schema (the partition column first).
TABLE_SCHEMA = pa.schema([("family", pa.string()), *DATA_FIELDS])

#: Table properties: keep the whole commit log (it records which stream bytes became which rows), and no
#: automatic cleanup a reader of an old version could miss.
TABLE_CONFIGURATION = {"delta.enableExpiredLogCleanup": "false"}
