"""The events table's columns: the union of the families' columns, partitions first, provenance last.

- ``family`` and ``event_date`` (the UTC date of ``at``; null for an event without a time) partition the table
  (``family=<f>/event_date=<d>/``); each family's view is its partition.
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

PARTITIONS = ["family", "event_date"]
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
#: The table's schema (partition columns first).
TABLE_SCHEMA = pa.schema([("family", pa.string()), ("event_date", pa.date32()), *DATA_FIELDS])

#: Table properties: keep the whole commit log (it records which stream bytes became which rows), and no
#: automatic cleanup a reader of an old version could miss.
TABLE_CONFIGURATION = {"delta.enableExpiredLogCleanup": "false"}
