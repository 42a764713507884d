"""The columns of each store family: the one place that names them.

Compaction writes Parquet with exactly these columns, the store's DuckDB views
expose them (also when a family has no rows yet), and the fitter queries them.
Types are DuckDB SQL types. ``at`` is a naive ``TIMESTAMP`` in UTC (microseconds);
``extra`` is the JSON text of the fields the v1 schema does not know (or NULL).

Config columns (``cli``, ``route``, ``model``, ``effort``) are flattened and
``config_key`` is :func:`pipeline.streams.events.config_key` of them.
"""

from __future__ import annotations

COMMON = [("id", "VARCHAR"), ("type", "VARCHAR"), ("at", "TIMESTAMP"), ("v", "BIGINT")]
CONFIG = [
    ("cli", "VARCHAR"),
    ("route", "VARCHAR"),
    ("model", "VARCHAR"),
    ("effort", "VARCHAR"),
    ("config_key", "VARCHAR"),
]
RATER = [("rater_kind", "VARCHAR"), ("rater_name", "VARCHAR")]
EXTRA = [("extra", "VARCHAR")]

COLUMNS: dict[str, list[tuple[str, str]]] = {
    "tasks": [
        *COMMON,
        ("task", "VARCHAR"),
        ("region", "VARCHAR"),
        ("title", "VARCHAR"),
        ("labels", "VARCHAR"),  # JSON object text, or NULL
        ("thread", "VARCHAR"),
        *EXTRA,
    ],
    "attempts": [
        *COMMON,
        ("task", "VARCHAR"),
        *CONFIG,
        ("status", "VARCHAR"),
        ("cost_usd", "DOUBLE"),
        ("duration_ms", "BIGINT"),
        ("node", "VARCHAR"),
        ("prompt_version", "VARCHAR"),
        ("reviewer_verdict", "VARCHAR"),
        ("tool_calls", "BIGINT"),
        ("files_read", "BIGINT"),
        ("files_written", "BIGINT"),
        *EXTRA,
    ],
    "ratings": [
        *COMMON,
        ("task", "VARCHAR"),
        *CONFIG,
        *RATER,
        ("score", "DOUBLE"),
        ("precision", "DOUBLE"),
        ("confidence", "DOUBLE"),
        ("importance", "DOUBLE"),
        *EXTRA,
    ],
    "rejections": [
        *COMMON,
        ("task", "VARCHAR"),
        *CONFIG,
        *RATER,
        ("claim", "VARCHAR"),
        ("evidence", "VARCHAR[]"),
        ("weight", "DOUBLE"),
        *EXTRA,
    ],
    "retractions": [*COMMON, ("rating", "VARCHAR"), ("reason", "VARCHAR"), *EXTRA],
    "decisions": [
        *COMMON,
        ("task", "VARCHAR"),
        ("policy", "VARCHAR"),
        ("chosen", "VARCHAR"),
        ("candidates", "VARCHAR[]"),
        ("propensity", "DOUBLE"),
        ("table_version", "VARCHAR"),  # the event's ``table`` field (TABLE is an SQL keyword)
        ("explored", "BOOLEAN"),
        ("reason", "VARCHAR"),
        ("predicted_quality", "DOUBLE"),
        *EXTRA,
    ],
    "closures": [*COMMON, ("task", "VARCHAR"), ("outcome", "VARCHAR"), *EXTRA],
    # Events of a type v1 does not know: everything but the common fields stays in ``extra``.
    "other": COMMON + EXTRA,
}

#: The views the store always exposes (``other`` is queryable too, as ``other``).
VIEWS = ("tasks", "attempts", "ratings", "rejections", "retractions", "decisions", "closures", "other")

#: The defaults of optional fields (docs/design.md, Events), applied when a line omits them.
DEFAULTS: dict[str, dict[str, object]] = {
    "tasks": {"region": "general"},
    "ratings": {"precision": 1.0, "confidence": 1.0, "importance": 1.0},
    "rejections": {"weight": 1.0},
    "decisions": {"explored": False, "reason": ""},
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
