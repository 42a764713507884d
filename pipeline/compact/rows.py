"""Store rows of events: the Arrow schema of each family and the per-event conversion.

The Arrow schema is derived from :data:`pipeline.store.families.COLUMNS` (the one
column contract). :func:`event_row` is the reference conversion of one
validated event, field by field as the event spec says (:mod:`pipeline.streams.spec`);
the vectorised fast path (``fastpath.py``) must produce the same values, which the
tests check.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa

from ..store.families import COLUMNS
from ..streams.events import FAMILY, AnyEvent
from ..streams.spec import CONFIG_PARTS, FIELDS, RATER_PARTS
from ..utc import naive, parse_timestamp

_ARROW = {
    "VARCHAR": pa.string(),
    "TIMESTAMP": pa.timestamp("us"),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "VARCHAR[]": pa.list_(pa.string()),
}

SCHEMAS: dict[str, pa.Schema] = {
    family: pa.schema([pa.field(name, _ARROW[sql]) for name, sql in cols]) for family, cols in COLUMNS.items()
}

#: Columns with a few values per chunk (the config, the rater, type, status, region): compaction keeps them
#: dictionary-encoded from the parse to the file, so placing rows in partitions moves 4-byte indices, not
#: strings, and the Parquet writer takes the dictionary as it is instead of building one.
ENCODED_COLUMNS = frozenset(
    {"type", "cli", "route", "model", "effort", "config_key", "rater_kind", "rater_name", "status", "region"}
)
ENCODED = pa.dictionary(pa.int32(), pa.string())
#: :data:`SCHEMAS` with the :data:`ENCODED_COLUMNS` dictionary-encoded (what the vectorised path produces).
ENCODED_SCHEMAS: dict[str, pa.Schema] = {
    family: pa.schema([pa.field(f.name, ENCODED) if f.name in ENCODED_COLUMNS else f for f in schema])
    for family, schema in SCHEMAS.items()
}

_COMMON = ("id", "type", "at", "v", "filled")  # ``filled`` is the line's provenance, not stored (Storage)


def json_text(value: Any) -> str:
    """The one JSON text form of ``labels`` and ``extra`` in the store: compact, keys sorted, UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


def parse_at(text: str | None) -> datetime | None:
    """A validated ``...Z`` timestamp to a naive UTC datetime (the store's TIMESTAMP)."""
    return None if text is None else naive(parse_timestamp(text))


def family_of(event_type: str) -> str:
    return FAMILY.get(event_type, "other")


def event_row(event: AnyEvent, fallback_id: str) -> tuple[str, dict[str, Any]]:
    """(family, row) of one validated event. ``fallback_id`` names an event that came without an id."""
    family = family_of(event.type)
    row: dict[str, Any] = {"id": event.id or fallback_id, "type": event.type, "at": parse_at(event.at), "v": event.v}
    if family == "other":
        rest = {k: v for k, v in event.model_dump(mode="json").items() if k not in _COMMON}
        row["extra"] = json_text(rest) if rest else None
        return family, row
    extra = event.extra
    for field in FIELDS[event.type]:
        value = getattr(event, field.name)
        if field.kind == "config":
            row.update(zip(CONFIG_PARTS, (getattr(value, part) for part in CONFIG_PARTS), strict=True))
            row["config_key"] = value.key
        elif field.kind == "rater":
            row.update(
                (column, getattr(value, part)) for (column, _), part in zip(field.columns, RATER_PARTS, strict=True)
            )
            if value.__pydantic_extra__:  # a rater's own unknown fields are kept in extra
                extra = {**extra, field.name: dict(value.__pydantic_extra__)}
        elif field.kind == "json":
            row[field.column] = json_text(value) if value is not None else None
        else:
            row[field.column] = list(value) if isinstance(value, list) else value
    row["extra"] = json_text(extra) if extra else None
    return family, row


def table_of(family: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMAS[family])
