"""What each event type is, read off its model once (the models in :mod:`pipeline.streams.events` are the spec).

For every known type, its own fields in model order (the common ``id``, ``type``, ``at``, ``v`` left out), each
with:

- ``kind``: how the field is written in JSON and kept in the store: ``string``, ``double``, ``bigint``,
  ``boolean``, ``strings`` (a list of strings), ``json`` (an object, stored as its JSON text), ``config``
  (flattened to ``cli``, ``route``, ``model``, ``effort`` and ``config_key``) or ``rater`` (``rater_kind``,
  ``rater_name``);
- ``columns``: the store columns it fills, with their DuckDB types (a :class:`~pipeline.streams.events.Column`
  marker renames the column);
- ``default``: the value a line that omits the field means (None when it has none, or it is null).

From these the store's columns and defaults (:mod:`pipeline.store.families`), the compactor's Arrow schema
(:mod:`pipeline.compact.fastpath`) and rows (:mod:`pipeline.compact.rows`) and the simulator's line templates
(:mod:`pipeline.simulate.lines`) are built; the fast batch validator and the JSON Schema are the models' own.
Nothing here imports pyarrow or duckdb: the kinds are plain names that each consumer maps to its types.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

from pydantic import BaseModel

from .events import KNOWN, Column, Config, Event, OtherEvent, Rater

Kind = Literal["string", "double", "bigint", "boolean", "strings", "json", "config", "rater"]

#: The DuckDB type of each scalar kind's column.
SQL_TYPES: dict[str, str] = {
    "string": "VARCHAR",
    "double": "DOUBLE",
    "bigint": "BIGINT",
    "boolean": "BOOLEAN",
    "strings": "VARCHAR[]",
    "json": "VARCHAR",  # the object's JSON text, or NULL
}
#: The columns of the fields every event has, first in every family.
COMMON_COLUMNS = (("id", "VARCHAR"), ("type", "VARCHAR"), ("at", "TIMESTAMP"), ("v", "BIGINT"))
#: The JSON text of the fields the schema does not know (or NULL), last in every family.
EXTRA_COLUMN = ("extra", "VARCHAR")
#: The store's families in the order of its views; the order fixes the events table's columns (their union in
#: this order), so that a store written before keeps its schema. ``other``: types v1 does not know.
FAMILIES = ("tasks", "attempts", "ratings", "rejections", "retractions", "decisions", "closures", "other")


@dataclass(frozen=True)
class FieldSpec:
    """One field of an event type, as the store and the fast paths see it."""

    name: str
    kind: Kind
    columns: tuple[tuple[str, str], ...]  # (store column, DuckDB type) in order
    default: Any  # what an omitted field means; None when there is none or it is null
    required: bool

    @property
    def column(self) -> str:
        """The store column of a scalar field (its first column for ``config`` and ``rater``)."""
        return self.columns[0][0]


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None`` (the field may be null); the annotation itself otherwise."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        kept = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


def _kind(annotation: Any) -> Kind:
    """The kind of a field's (resolved) annotation; a type the spec has no kind for is a programming error."""
    tp = _without_none(annotation)
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _kind(typing.get_args(tp)[0])
    if origin is Literal:
        values = typing.get_args(tp)
        if all(isinstance(v, str) for v in values):
            return "string"
    if origin is list and typing.get_args(tp) and _kind(typing.get_args(tp)[0]) == "string":
        return "strings"
    if origin is dict:
        return "json"
    kinds: dict[Any, Kind] = {str: "string", float: "double", int: "bigint", bool: "boolean"}
    if tp in kinds:
        return kinds[tp]
    if tp is Config:
        return "config"
    if tp is Rater:
        return "rater"
    raise TypeError(f"no store kind for the annotation {annotation!r}: give the spec one (pipeline.streams.spec)")


#: The sub-fields a ``config`` and a ``rater`` field are flattened to, in order.
CONFIG_PARTS = tuple(Config.model_fields)
RATER_PARTS = tuple(Rater.model_fields)


def _columns(name: str, kind: Kind, renamed: str | None) -> tuple[tuple[str, str], ...]:
    if kind == "config":
        return (*((part, "VARCHAR") for part in CONFIG_PARTS), ("config_key", "VARCHAR"))
    if kind == "rater":
        return tuple((f"{name}_{part}", "VARCHAR") for part in RATER_PARTS)
    return ((renamed or name, SQL_TYPES[kind]),)


def field_specs(model: type[BaseModel]) -> tuple[FieldSpec, ...]:
    """The fields of an event model beyond the common ones, in model order."""
    out = []
    for name, info in model.model_fields.items():
        if name in Event.model_fields:
            continue
        kind = _kind(info.annotation)
        renamed = next((m.name for m in info.metadata if isinstance(m, Column)), None)
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        out.append(FieldSpec(name, kind, _columns(name, kind, renamed), default, info.is_required()))
    return tuple(out)


#: Every known type's fields; ``OtherEvent`` has none of its own (all it has beyond the common fields is extra).
FIELDS: dict[str, tuple[FieldSpec, ...]] = {t: field_specs(model) for t, model in KNOWN.items()}


def _family_fields() -> dict[str, tuple[FieldSpec, ...]]:
    by_family: dict[str, tuple[FieldSpec, ...]] = {OtherEvent.family: ()}
    for event_type, model in KNOWN.items():
        if model.family in by_family:
            raise TypeError(f"{event_type}: family {model.family!r} has a second event type")
        by_family[model.family] = FIELDS[event_type]
    if set(by_family) != set(FAMILIES):
        raise TypeError(f"the models' families {sorted(by_family)} are not the store's {sorted(FAMILIES)}")
    return {family: by_family[family] for family in FAMILIES}


#: Each family's fields, in :data:`FAMILIES` order (one event type per family).
FAMILY_FIELDS = _family_fields()


def template_fields(event_type: str) -> tuple[str, ...]:
    """The JSON field names of a line of ``event_type`` in the order :func:`pipeline.streams.events.to_json_line`
    writes them: the common fields, then the type's own in model order."""
    return (*Event.model_fields, *(f.name for f in FIELDS[event_type]))
