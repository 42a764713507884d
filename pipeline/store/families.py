"""The columns of each store family, derived from the event spec (:mod:`pipeline.streams.spec`): one place that
names them, written by nobody.

Compaction writes Parquet with exactly these columns, the store's DuckDB views
expose them (also when a family has no rows yet), and the fitter queries them.
Types are DuckDB SQL types. ``at`` is a naive ``TIMESTAMP`` in UTC (microseconds);
``extra`` is the JSON text of the fields the v1 schema does not know (or NULL).

Config columns (``cli``, ``route``, ``model``, ``effort``) are flattened and
``config_key`` is :func:`pipeline.streams.events.config_key` of them; a rater is
``rater_kind`` and ``rater_name``; an object (``labels``) is its JSON text.
"""

from __future__ import annotations

from ..streams.spec import COMMON_COLUMNS, EXTRA_COLUMN, FAMILIES, FAMILY_FIELDS

#: Per family, its columns in order: the common ones, the fields of its type, ``extra``. Family ``other`` holds
#: events of a type v1 does not know: everything but the common fields stays in ``extra``.
COLUMNS: dict[str, list[tuple[str, str]]] = {
    family: [*COMMON_COLUMNS, *(c for f in fields for c in f.columns), EXTRA_COLUMN]
    for family, fields in FAMILY_FIELDS.items()
}

#: The views the store always exposes (``other`` is queryable too, as ``other``).
VIEWS = FAMILIES

#: The defaults of optional fields (docs/design.md, Events), applied to a row whose line omits them: per family,
#: store column -> value (the model's default; a field whose default is null has none).
DEFAULTS: dict[str, dict[str, object]] = {
    family: {f.column: f.default for f in fields if f.default is not None}
    for family, fields in FAMILY_FIELDS.items()
    if any(f.default is not None for f in fields)
}


def empty_select(family: str) -> str:
    """``SELECT`` with the family's columns and no rows (a view for a family with no data yet)."""
    cols = ", ".join(f'CAST(NULL AS {t}) AS "{c}"' for c, t in COLUMNS[family])
    return f"SELECT {cols} WHERE false"


def schema_rows() -> list[dict[str, str]]:
    """Every view and its columns, in contract order (``ratings sql --schema``): ``{view, column, type}`` rows."""
    return [{"view": view, "column": name, "type": sql} for view in VIEWS for name, sql in COLUMNS[view]]


#: Column names that DuckDB reserves as keywords: a query must quote them (``"at"``).
RESERVED_COLUMNS = frozenset({"at"})
