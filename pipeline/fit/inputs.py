"""What the fit reads (docs/design.md, Inputs): the store's events as polars frames, and task values.

:func:`load_inputs` runs one DuckDB query per frame over the store's views and
returns :class:`FitInputs`; :func:`restrict` cuts it to some tasks and a time
(the evaluation's learn / validate / held-out parts); :func:`task_values`
aggregates ratings once to one row per (task, config), the unit every later
stage works on. Nothing here loops over ratings in Python.

Times are naive ``datetime`` in UTC (microseconds), as the store keeps them.

Beyond docs/design.md, Inputs: :class:`FitInputs` also carries ``retracted`` (the retracted ratings,
so a time cut can honour only earlier retractions) and ``prm``; ``tasks`` also has ``opened_at``;
:func:`task_values` takes no cost floor (nothing in it is floored) and also returns ``wscore``,
``attempts`` and ``unknown_cost``; its ``cost_usd`` is the known part of cost_t,c, completed by
:meth:`pipeline.fit.model.FittedModel.task_costs`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ..scalars import latest
from ..utc import naive

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

#: Columns of :attr:`FitInputs.ratings`, in order.
RATING_COLUMNS = ("id", "task", "region", "config_key", "at", "score", "w", "rater_kind", "rater_name", "origin")


@dataclass
class _Memo:
    """What :func:`task_values` derives from the frames of one :class:`FitInputs`: the task values per
    (without PRM fill-ins, half-life), the PRM fill-in rows of each full aggregation, and the groups."""

    values: dict[tuple[bool, float | None], pl.DataFrame] = field(default_factory=dict)
    prm: dict[float | None, pl.Series] = field(default_factory=dict)
    groups: tuple[pl.Series, pl.DataFrame] | None = None


@dataclass(frozen=True)
class FitInputs:
    """The events a fit uses, one frame per kind, each sorted deterministically.

    - ``tasks``: ``task, region, thread, first_at, opened_at``, sorted by ``(first_at, task)``.
      ``first_at`` is the time of the task's first event of any kind (the task time of docs/design.md, Split);
      ``region``/``thread`` come from the task's first ``task.opened`` (``'general'``/null
      without one); ``opened_at`` is that event's time (null without one).
    - ``ratings``: :data:`RATING_COLUMNS`, sorted by ``(at, id)``. Retracted ratings are removed;
      ``w = precision * confidence * importance``; a rejection is ``score = 0`` with ``w = weight``
      (``origin = 'rejection'``); PRM fill-ins have ``origin = 'prm'``.
    - ``retracted``: the retracted ratings (same columns plus ``retracted_at``, the time of the
      first retraction naming them). Kept so :func:`restrict` can put back a rating whose
      retraction comes after its time limit, and so stats can count retractions.
    - ``attempts``: ``id, task, region, config_key, at, status, cost_usd, duration_ms, node,
      prompt_version, reviewer_verdict, tool_calls, files_read, files_written``, by ``(at, id)``.
    - ``decisions``: ``id, task, region, at, policy, chosen, candidates, propensity, table_version,
      explored, reason, predicted_quality``, by ``(at, id)``.
    - ``closures``: ``id, task, at, outcome``, by ``(at, id)``.
    - ``newest_at``: the newest event time in these inputs (recency ages are measured from it,
      never from the clock); None when there are no events.
    - ``prm``: whether PRM fill-in ratings are part of ``ratings`` (restrict re-derives them).
    - ``notes``: what :func:`load_inputs` left out and why (rows outside the event bounds,
      :func:`pipeline.fit.finite.within_bounds`), for the stats' notes.
    """

    tasks: pl.DataFrame
    ratings: pl.DataFrame
    retracted: pl.DataFrame
    attempts: pl.DataFrame
    decisions: pl.DataFrame
    closures: pl.DataFrame
    newest_at: datetime | None
    prm: bool = False
    notes: tuple[str, ...] = ()
    # Memo of task_values per half-life: the grid search asks for the same few many times.
    _memo: _Memo = field(default_factory=_Memo, compare=False, repr=False)
    # Memo of what is derived from exactly these frames (the evaluation's parts): not carried over by
    # ``dataclasses.replace``, since a replaced frame changes what derives from it.
    _derived: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)


def _connection(store: Any) -> DuckDBPyConnection:
    """The DuckDB connection of a store: the object itself, or its ``con``."""
    return getattr(store, "con", store)


# Each task's first task.opened: its region, thread and time (the task time is completed from the
# other frames in :func:`_tasks`).
_OPENED_SQL = """
SELECT task,
       arg_min_null(region, ("at", id)) AS region,  -- the row of the smallest (at, id), NULL kept
       arg_min_null(thread, ("at", id)) AS thread,
       min("at") AS opened_at
FROM tasks GROUP BY task
"""

# w = precision * confidence * importance; a rejection is score 0 with w = weight (docs/design.md, Rating weight).
_RATINGS_SQL = """
WITH retracted AS (SELECT rating, min("at") AS retracted_at FROM retractions GROUP BY rating)
SELECT u.id, u.task, u.config_key, u."at", u.score, u.w, u.rater_kind, u.rater_name, u.origin, x.retracted_at
FROM (
    SELECT id, task, config_key, "at", score, precision * confidence * importance AS w,
           rater_kind, rater_name, 'rating' AS origin FROM ratings
    UNION ALL
    SELECT id, task, config_key, "at", 0.0 AS score, weight AS w,
           rater_kind, rater_name, 'rejection' AS origin FROM rejections
) u LEFT JOIN retracted x ON x.rating = u.id
"""  # unordered: the ratings and their retractions are sorted by (at, id) once assembled

_ATTEMPTS_SQL = """
SELECT id, task, config_key, "at", status, cost_usd, duration_ms, node, prompt_version, reviewer_verdict,
       tool_calls, files_read, files_written
FROM attempts ORDER BY "at", id
"""

_DECISIONS_SQL = """
SELECT id, task, "at", policy, chosen, candidates, propensity, table_version, explored, reason, predicted_quality
FROM decisions ORDER BY "at", id
"""

_CLOSURES_SQL = 'SELECT id, task, "at", outcome FROM closures ORDER BY "at", id'


def load_inputs(store: Any, *, prm: bool = True, thread: str | None = None, since: datetime | None = None) -> FitInputs:
    """Read the store into :class:`FitInputs`.

    ``store`` is a DuckDB connection with the store's views (``tasks``, ``attempts``, ``ratings``,
    ``rejections``, ``retractions``, ``decisions``, ``closures``), or an object whose ``con`` is one
    (what :func:`pipeline.store.open_store` returns).
    ``thread`` keeps only the tasks whose ``task.opened`` names that thread; ``since`` keeps only
    the tasks whose first event is at or after it. ``prm`` adds PRM fill-in ratings
    (:func:`pipeline.fit.signals.prm_ratings`) for (task, config) pairs that have no other rating.
    """
    from .finite import within_bounds

    con = _connection(store)
    opened = con.sql(_OPENED_SQL).pl()
    all_ratings, attempts, notes = within_bounds(con.sql(_RATINGS_SQL).pl(), con.sql(_ATTEMPTS_SQL).pl())
    decisions = con.sql(_DECISIONS_SQL).pl()
    closures = con.sql(_CLOSURES_SQL).pl()
    tasks = _tasks(
        opened,
        [all_ratings, attempts, decisions, closures],
        thread=thread,
        since=naive(since) if since is not None else None,
    )
    loaded = _assemble(
        tasks,
        all_ratings,
        attempts,
        decisions,
        closures,
        until=None,
        prm=prm,
        every_task=thread is None and since is None,
    )
    return dataclasses.replace(loaded, notes=tuple(notes))


def _tasks(
    opened: pl.DataFrame, frames: list[pl.DataFrame], *, thread: str | None, since: datetime | None
) -> pl.DataFrame:
    """The ``tasks`` frame: every task with an event of any kind, its time ``first_at`` (its first event:
    the first of each frame's first time and its first task.opened), region and thread of its first
    task.opened (``'general'``/null without one), kept by ``thread`` and ``since``, by (first_at, task)."""
    firsts = pl.concat(
        [opened.select("task", at="opened_at")] + [f.group_by("task").agg(pl.col("at").min()) for f in frames]
    )
    out = (
        firsts.group_by("task")
        .agg(first_at=pl.col("at").min())
        .join(opened, on="task", how="left")
        .select("task", pl.col("region").fill_null("general"), "thread", "first_at", "opened_at")
    )
    if thread is not None:
        out = out.filter(pl.col("thread") == thread)
    if since is not None:
        out = out.filter(pl.col("first_at") >= since)
    return out.sort("first_at", "task")


def restrict(inputs: FitInputs, tasks: Collection[str] | pl.Series, *, until: datetime | None) -> FitInputs:
    """Keep only ``tasks``, and only events with ``at <= until`` (None: no time limit).

    Events that tie with ``until`` (the cutoff) are concurrent with it, not later: a batch append or a
    date-only import gives many events one time (docs/design.md, Evaluation). A task whose first event is
    after ``until`` disappears; one whose ``task.opened`` is after it falls back to region ``'general'``.
    A retraction counts only when it is itself at or before ``until``, so a later retraction cannot leak
    into an earlier fit. PRM fill-ins and ``newest_at`` are recomputed from what remains.
    """
    keep = pl.Series("task", list(tasks) if not isinstance(tasks, pl.Series) else tasks, dtype=pl.String)
    task_frame = inputs.tasks.filter(pl.col("task").is_in(keep.implode()))
    if until is not None:
        until = naive(until)
        opened_late = pl.col("opened_at").is_null() | (pl.col("opened_at") > until)
        task_frame = task_frame.filter(pl.col("first_at") <= until).with_columns(
            region=pl.when(opened_late).then(pl.lit("general")).otherwise(pl.col("region")),
            thread=pl.when(opened_late).then(pl.lit(None, pl.String)).otherwise(pl.col("thread")),
            opened_at=pl.when(opened_late).then(pl.lit(None, pl.Datetime("us"))).otherwise(pl.col("opened_at")),
        )
    real = (
        inputs.ratings.lazy()
        .filter(pl.col("origin") != "prm")
        .with_columns(retracted_at=pl.lit(None, pl.Datetime("us")))
    )
    all_ratings = pl.concat([real, inputs.retracted.lazy()], how="vertical_relaxed").drop("region")
    return _assemble(
        task_frame,
        all_ratings,
        inputs.attempts.drop("region"),
        inputs.decisions.drop("region"),
        inputs.closures,
        until=until,
        prm=inputs.prm,
    )


def _assemble(
    tasks: pl.DataFrame,
    all_ratings: pl.DataFrame | pl.LazyFrame,
    attempts: pl.DataFrame,
    decisions: pl.DataFrame,
    closures: pl.DataFrame,
    *,
    until: datetime | None,
    prm: bool,
    every_task: bool = False,
) -> FitInputs:
    """Filter every frame to ``tasks`` and ``at <= until``, attach regions, split off retractions.

    ``every_task``: ``tasks`` holds every task of the frames (the whole store), so only time cuts.
    """
    regions = tasks.select("task", "region")

    def cut(frame: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
        """One lazy query per frame: the time cut and the task cut without an intermediate copy."""
        lazy = frame.lazy()
        if until is not None:
            lazy = lazy.filter(pl.col("at") <= until)
        if not every_task:
            lazy = lazy.join(regions.lazy(), on="task", how="semi")
        return lazy.collect()

    all_ratings = cut(all_ratings)
    retracted_now = pl.col("retracted_at").is_not_null()
    if until is not None:
        retracted_now = retracted_now & (pl.col("retracted_at") <= until)
    ratings = all_ratings.filter(~retracted_now).join(regions, on="task", how="left").select(RATING_COLUMNS)
    retracted = (
        all_ratings.filter(retracted_now)
        .join(regions, on="task", how="left")
        .select(*RATING_COLUMNS, "retracted_at")
        .sort("at", "id", maintain_order=True)
    )
    attempts = _with_region(cut(attempts), regions)
    if prm:
        from .signals import prm_ratings

        ratings = pl.concat([ratings, prm_ratings(attempts, ratings).select(RATING_COLUMNS)], how="vertical_relaxed")
    ratings = ratings.sort("at", "id", maintain_order=True)
    decisions = _with_region(cut(decisions), regions)
    closures = cut(closures)
    times = [
        latest(tasks["first_at"]),
        latest(tasks["opened_at"]),
        latest(ratings["at"]),
        latest(retracted["retracted_at"]),
        latest(attempts["at"]),
        latest(decisions["at"]),
        latest(closures["at"]),
    ]
    known = [t for t in times if t is not None]
    return FitInputs(
        tasks=tasks,
        ratings=ratings,
        retracted=retracted,
        attempts=attempts,
        decisions=decisions,
        closures=closures,
        newest_at=max(known) if known else None,
        prm=prm,
    )


def _with_region(frame: pl.DataFrame, regions: pl.DataFrame) -> pl.DataFrame:
    """``region`` (of the task) as the third column."""
    out = frame.join(regions, on="task", how="left")
    cols = list(frame.columns)
    return out.select([*cols[:2], "region", *cols[2:]])


def recency_weight(at: pl.Expr, newest_at: datetime | None, half_life_days: float | None) -> pl.Expr:
    """Recency factor ``exp(-ln2 * age_days / H)``, age from ``newest_at``; 1 when H is None/inf.

    docs/design.md, Rating weight.
    """
    if half_life_days is None or math.isinf(half_life_days) or newest_at is None:
        return pl.lit(1.0)
    age_days = (pl.lit(newest_at, pl.Datetime("us")) - at).dt.total_microseconds() / 86_400e6
    return (-math.log(2.0) * age_days / half_life_days).exp()


def task_values(inputs: FitInputs, *, half_life_days: float | None = None, real: bool = False) -> pl.DataFrame:
    """One row per (task, config_key) that has ratings, sorted by ``(first_at, task, config_key)``.

    Columns:
    - ``task, region, config_key, first_at`` (task time);
    - ``value`` = q_t,c = sum(w*s) / sum(w) (null when sum(w) = 0), with w recency-weighted when
      ``half_life_days`` is given; ``weight`` = sum(w); ``wscore`` = sum(w*s); ``n`` = number of ratings;
    - ``cost_usd`` = sum of the known costs of c's attempts on t (null when none is known);
      ``attempts`` = number of c's attempts on t; ``unknown_cost`` = how many of them have no cost,
      where a rated (t, c) without any attempt counts as one attempt of unknown cost.
      ``cost_t,c`` (docs/design.md, Task value and task cost) is ``cost_usd + unknown_cost * cost(c, r)``: the
      model fills the estimate in (:meth:`pipeline.fit.model.FittedModel.task_costs`), because cost(c, r) comes
      from the fit, and held-out tasks must take it from the learned part;
    - ``gate`` = weighted mean of the ratings with ``rater_kind == 'gate'`` and ``origin != 'prm'``
      (null when none); ``at`` = the latest rating time.

    ``real``: without the PRM fill-ins (held-out targets and ladder gates never include them). A PRM
    fill-in exists only for a (task, config) with no other rating, so this is the rows of the full
    aggregation whose ratings are not fill-ins: the same sums over the same ratings, taken from the memo.
    """
    key = None if half_life_days is None or math.isinf(half_life_days) else float(half_life_days)
    if real:
        cached = inputs._memo.values.get((True, key))
        if cached is None:
            full = task_values(inputs, half_life_days=key)
            cached = full.filter(~inputs._memo.prm[key])
            inputs._memo.values[(True, key)] = cached
        return cached
    cached = inputs._memo.values.get((False, key))
    if cached is not None:
        return cached
    codes, groups = _groups(inputs)
    w = pl.col("w") * recency_weight(pl.col("at"), inputs.newest_at, key)
    is_gate = (pl.col("rater_kind") == "gate") & (pl.col("origin") != "prm")
    # The gate terms are zeroed outside gate ratings. Sums in rating order (:mod:`pipeline.fit.group_sums`); the
    # group code is the group's row in ``groups``, so the sums line up with those rows.
    terms = (
        inputs.ratings.lazy()
        .select("at", "w", "score", "rater_kind", "origin")
        .with_columns(w=w)
        .with_columns(ws=pl.col("w") * pl.col("score"), is_gate=is_gate)
        .select(
            "w",
            "ws",
            gate_w=pl.when("is_gate").then(pl.col("w")).otherwise(0.0),
            gate_ws=pl.when("is_gate").then(pl.col("ws")).otherwise(0.0),
        )
        .collect()
    )
    totals = _sums(codes, terms, groups.height)
    names = ("weight", "wscore", "gate_w", "gate_ws")
    out = groups.with_columns(pl.Series(name, totals[:, j], pl.Float64) for j, name in enumerate(names)).select(
        "task",
        "region",
        "config_key",
        "first_at",
        value=pl.when(pl.col("weight") > 0).then(pl.col("wscore") / pl.col("weight")),
        weight="weight",
        wscore="wscore",
        n="n",
        cost_usd="cost_usd",
        attempts="attempts",
        unknown_cost="unknown_cost",
        gate=pl.when(pl.col("gate_w") > 0).then(pl.col("gate_ws") / pl.col("gate_w")),
        at="at",
        prm="prm",
    )
    inputs._memo.prm[key] = out["prm"]
    out = out.drop("prm")
    inputs._memo.values[(False, key)] = out
    return out


def _sums(codes: pl.Series, terms: pl.DataFrame, n_groups: int) -> np.ndarray:
    """Per group code 0 .. n_groups - 1, the sum of each column of ``terms`` over its rows, in row order."""
    from .group_sums import group_sums

    return group_sums(codes.to_numpy(), terms.to_numpy(), n_groups)


def _groups(inputs: FitInputs) -> tuple[pl.Series, pl.DataFrame]:
    """The (task, config_key) groups of :func:`task_values`, once per inputs: each rating's group code ``g``,
    and per group (in the output order) everything that does not depend on the half-life: ``n``, ``at``,
    whether its ratings are PRM fill-ins, the costs and the task's region and time. Each half-life then only
    sums its weights by the integer code."""
    if inputs._memo.groups is not None:
        return inputs._memo.groups
    codes = inputs.ratings.select(g=pl.struct("task", "config_key").rank("dense").cast(pl.Int64))["g"]
    costs = (
        inputs.attempts.lazy()
        .group_by("task", "config_key")
        .agg(known=pl.col("cost_usd").count(), attempts=pl.len())
        .with_columns(unknown=pl.col("attempts") - pl.col("known"))
    )
    groups = (
        inputs.ratings.lazy()
        .select("task", "config_key", "at", "origin", g=codes)
        .group_by("g")
        .agg(
            pl.col("task").first(),
            pl.col("config_key").first(),
            n=pl.len(),
            at=pl.col("at").max(),
            prm=(pl.col("origin") == "prm").any(),
        )
        .join(costs, on=["task", "config_key"], how="left")
        .join(inputs.tasks.lazy().select("task", "region", "first_at"), on="task", how="left")
        .with_columns(
            attempts=pl.col("attempts").fill_null(0).cast(pl.Int64),
            unknown_cost=pl.when(pl.col("attempts").is_null()).then(1).otherwise(pl.col("unknown")).cast(pl.Int64),
            n=pl.col("n").cast(pl.Int64),
        )
        .select("g", "task", "region", "config_key", "first_at", "n", "known", "attempts", "unknown_cost", "at", "prm")
        .sort("first_at", "task", "config_key")
        .collect()
    )
    # The known costs of each group's attempts, summed in attempt order (null when none is known).
    priced = inputs.attempts.select("task", "config_key", "cost_usd").filter(pl.col("cost_usd").is_not_null())
    rows = priced.join(
        groups.select("task", "config_key").with_row_index("row"), on=["task", "config_key"], maintain_order="left"
    )
    known_sum = _sums(rows["row"], rows.select("cost_usd"), groups.height)[:, 0]
    groups = groups.with_columns(cost_usd=pl.when(pl.col("known") > 0).then(pl.Series(known_sum, dtype=pl.Float64)))
    groups = groups.select(
        "g", "task", "region", "config_key", "first_at", "n", "cost_usd", "attempts", "unknown_cost", "at", "prm"
    )
    # Renumber the groups by their row (codes 0..G-1 in the output order).
    row_of = np.empty(groups.height, dtype=np.uint32)
    row_of[groups["g"].to_numpy() - 1] = np.arange(groups.height, dtype=np.uint32)
    codes = pl.Series("g", row_of[codes.to_numpy() - 1] if codes.len() else [], dtype=pl.UInt32)
    groups = groups.drop("g")
    inputs._memo.groups = (codes, groups)
    return codes, groups
