"""Fit test helpers: tiny hand-made stores as in-memory DuckDB tables with the store's columns.

``memory_store(*events)`` builds one table per family (columns of :mod:`pipeline.store.families`, defaults
filled in: docs/design.md, Events), which is what the aggregation (:mod:`pipeline.fit.aggregate`) queries; so
hand-made inputs go through the same SQL as a compacted store. ``context(*events)`` aggregates them into a
:class:`pipeline.fit.context.FitContext`. Event helpers return ``(family, row)``.
Times are hours after ``T0``. Plain helpers (no fixtures): tests import them with
``from fixtures_fit import ...`` (``tests/`` is on the path through its conftest).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import polars as pl

from pipeline.fit.aggregate import DuckDBEngine, Spec
from pipeline.fit.context import FitContext
from pipeline.fit.shipped import Shipped
from pipeline.store import families
from pipeline.streams.events import Config
from pipeline.utc import format_timestamp

T0 = datetime(2026, 1, 1)
A = "a/-/m1/-"
B = "b/-/m2/-"
C = "c/-/m3/-"

_TYPES = {
    "tasks": "task.opened",
    "attempts": "task.attempted",
    "ratings": "task.rated",
    "rejections": "task.rejected",
    "retractions": "rating.retracted",
    "decisions": "route.decided",
    "closures": "task.closed",
}
Event = tuple[str, dict[str, Any]]


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def opened(
    task: str, region: str = "general", hours: float = 0, thread: str | None = None, id: str | None = None
) -> Event:
    return "tasks", {
        "id": id or f"open-{task}-{hours}",
        "task": task,
        "region": region,
        "thread": thread,
        "at": at(hours),
    }


def rated(
    id: str,
    task: str,
    config: str,
    score: float,
    hours: float = 1,
    *,
    kind: str = "gate",
    precision: float = 1.0,
    confidence: float = 1.0,
    importance: float = 1.0,
) -> Event:
    return "ratings", {
        "id": id,
        "task": task,
        "config_key": config,
        "score": score,
        "at": at(hours),
        "rater_kind": kind,
        "rater_name": f"{kind}-1",
        "precision": precision,
        "confidence": confidence,
        "importance": importance,
    }


def rejected(id: str, task: str, config: str, hours: float = 1, weight: float = 1.0) -> Event:
    return "rejections", {
        "id": id,
        "task": task,
        "config_key": config,
        "at": at(hours),
        "rater_kind": "reviewer",
        "rater_name": "reviewer-1",
        "claim": "does not build",
        "weight": weight,
    }


def attempted(
    id: str,
    task: str,
    config: str,
    hours: float = 0.5,
    cost: float | None = None,
    status: str = "success",
    **trace: Any,
) -> Event:
    return "attempts", {
        "id": id,
        "task": task,
        "config_key": config,
        "at": at(hours),
        "status": status,
        "cost_usd": cost,
        **trace,
    }


def retracted(id: str, rating: str, hours: float = 2) -> Event:
    return "retractions", {"id": id, "rating": rating, "at": at(hours), "reason": "wrong task"}


def decided(
    id: str,
    task: str,
    chosen: str,
    candidates: list[str],
    hours: float = 0,
    propensity: float | None = 1.0,
    policy: str = "learning_governed",
) -> Event:
    return "decisions", {
        "id": id,
        "task": task,
        "at": at(hours),
        "policy": policy,
        "chosen": chosen,
        "candidates": candidates,
        "propensity": propensity,
    }


def closed(id: str, task: str, hours: float = 3, outcome: str = "done") -> Event:
    return "closures", {"id": id, "task": task, "at": at(hours), "outcome": outcome}


def memory_store(*events: Event) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one table per family holding ``events``."""
    con = duckdb.connect(":memory:")
    rows: dict[str, list[dict[str, Any]]] = {}
    for family, row in events:
        rows.setdefault(family, []).append(row)
    for family, columns in families.COLUMNS.items():
        con.execute(f'CREATE TABLE "{family}" AS {families.empty_select(family)}')
        if family not in rows:
            continue
        defaults = {"type": _TYPES[family], "v": 1, **families.DEFAULTS.get(family, {})}
        names = [c for c, _ in columns]
        frame = pl.DataFrame(
            [{c: {**defaults, **r}.get(c) for c in names} for r in rows[family]],
            schema={c: _polars_type(t) for c, t in columns},
        )
        con.register("incoming", frame)
        con.execute(f'INSERT INTO "{family}" BY NAME SELECT * FROM incoming')
        con.unregister("incoming")
    return con


def _polars_type(sql: str) -> pl.DataType:
    return {
        "VARCHAR": pl.String,
        "TIMESTAMP": pl.Datetime("us"),
        "BIGINT": pl.Int64,
        "DOUBLE": pl.Float64,
        "BOOLEAN": pl.Boolean,
        "VARCHAR[]": pl.List(pl.String),
    }[sql]


def context(
    *events: Event,
    prm: bool = False,
    shipped: Shipped | None = None,
    objective: str = "quality_per_dollar",
    **spec: Any,
) -> FitContext:
    """The aggregation of a memory store of ``events`` (PRM off unless asked; ``spec``: :class:`Spec` fields)."""
    return FitContext.build(
        DuckDBEngine(memory_store(*events)),
        Spec(prm=prm, **spec),
        shipped=shipped or Shipped(found=False),
        objective=objective,
    )


def task_ids(*events: Event) -> list[str]:
    """The task ids of ``events`` in code order (a task's code is its rank by id)."""
    return sorted({row["task"] for _, row in events if row.get("task") is not None})


def named(frame: pl.DataFrame, events: list[Event] | tuple[Event, ...]) -> pl.DataFrame:
    """``frame`` with its task codes as the task ids of ``events`` and its configs and regions as text."""
    ids = task_ids(*events)
    out = frame.with_columns(pl.col("task").map_elements(lambda i: ids[i], return_dtype=pl.String))
    return out.with_columns(pl.col(c).cast(pl.String) for c in ("config_key", "region") if c in out.columns)


def worked_events() -> list[Event]:
    """The hand-worked example of tests/fit/test_model.py (numbers worked out there).

    t1, t2 in ``implement``; t3 in ``review``. Ratings (w = precision*confidence*importance):
    t1 A 1.0 (w 1) and 0.5 (w 1); t1 B rejected (score 0, w 2); t2 A 0.8 (w 0.5); t2 B 0.6 (w 1);
    t3 A 0.2 (w 1); t3 B 1.0 (w 1). Attempts: t1 A 0.10 + 0.30; t1 B 1.00; t2 A cost unknown;
    t2 B 2.00; t3 A 0.20; t3 B none (rated only: one attempt of unknown cost).
    """
    return [
        opened("t1", "implement", 0),
        opened("t2", "implement", 10),
        opened("t3", "review", 20),
        attempted("x1", "t1", A, 0.5, 0.10),
        attempted("x2", "t1", A, 0.6, 0.30),
        attempted("x3", "t1", B, 0.5, 1.00),
        attempted("x4", "t2", A, 10.5, None),
        attempted("x5", "t2", B, 10.5, 2.00),
        attempted("x6", "t3", A, 20.5, 0.20),
        rated("r1", "t1", A, 1.0, 1),
        rated("r2", "t1", A, 0.5, 1, kind="reviewer"),
        rejected("j1", "t1", B, 1, 2.0),
        rated("r3", "t2", A, 0.8, 11, precision=0.5),
        rated("r4", "t2", B, 0.6, 11),
        rated("r5", "t3", A, 0.2, 21),
        rated("r6", "t3", B, 1.0, 21),
    ]


def as_event(event: Event) -> dict[str, Any]:
    """The v1 event (a JSON-ready dict) that compaction turns into ``event``'s store row."""
    family, row = event
    out: dict[str, Any] = {
        "id": row["id"],
        "type": _TYPES[family],
        "at": format_timestamp(row["at"].replace(tzinfo=UTC)),
    }
    fields = {k: v for k, v in row.items() if k not in ("id", "at") and v is not None}
    if "config_key" in fields:
        out["config"] = Config.from_key(fields.pop("config_key")).model_dump()
    if "rater_kind" in fields:
        out["rater"] = {"kind": fields.pop("rater_kind"), "name": fields.pop("rater_name")}
    if family == "rejections":
        fields["evidence"] = ["ci log"]
    return {**out, **fields}
