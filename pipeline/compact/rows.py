"""Store rows of events: the Arrow schema of each family and the per-event conversion.

The Arrow schema is derived from :data:`pipeline.families.COLUMNS` (the one
column contract). :func:`event_row` is the reference conversion of one
validated event; the vectorised fast path (``fastpath.py``) must produce the
same values, which the tests check.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa

from ..families import COLUMNS
from ..streams.events import FAMILY, AnyEvent, Rater

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
#: Store columns whose value is not the event field of the same name.
_RENAMED = {"table_version": "table"}


def json_text(value: Any) -> str:
    """The one JSON text form of ``labels`` and ``extra`` in the store: compact, keys sorted, UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


def parse_at(text: str | None) -> datetime | None:
    """A validated ``...Z`` timestamp to a naive UTC datetime (the store's TIMESTAMP)."""
    if text is None:
        return None
    return datetime.fromisoformat(text[:-1])


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
    for name, _ in COLUMNS[family]:
        if name in row or name == "extra":
            continue
        # the family's columns name only fields its event type has (families.COLUMNS), hence getattr
        if name in ("cli", "route", "model", "effort"):
            row[name] = getattr(event.config, name)  # type: ignore[union-attr]
        elif name == "config_key":
            row[name] = event.config.key  # type: ignore[union-attr]
        elif name in ("rater_kind", "rater_name"):
            row[name] = getattr(event.rater, name[6:])  # type: ignore[union-attr]
        elif name == "labels":
            labels = getattr(event, "labels", None)
            row[name] = json_text(labels) if labels is not None else None
        else:
            value = getattr(event, _RENAMED.get(name, name))
            row[name] = list(value) if isinstance(value, list) else value
    rater = getattr(event, "rater", None)  # an unknown field named "rater" (a dict, kept in extra) is not a Rater
    if isinstance(rater, Rater) and rater.__pydantic_extra__:
        extra = {**extra, "rater": dict(rater.__pydantic_extra__)}
    row["extra"] = json_text(extra) if extra else None
    return family, row


def table_of(family: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMAS[family])
