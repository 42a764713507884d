"""The full-information table a backtest replays (docs/design.md, Backtest, The table).

A long table (CSV, CSV.gz, Parquet) is read exactly as ``ratings import`` reads it: imported into a scratch home
under the backtest's ``--out`` and compacted; a home (``--home``) is read from its store as it is (nothing is
written there). Both then go through :func:`from_frames`, fed by the fit's own statements
(:mod:`pipeline.fit.aggregate`):

- a **row** of (task t, config c) is one attempt of c on t with the ratings that followed it: the ratings of
  (t, c) at or after the attempt's time and before the next attempt's (those before the first attempt count
  for the first); its score is their weighted mean ``sum(w s) / sum(w)``, else (no rating of its own) the task
  value ``q_t,c`` of every rating of (t, c). A rated pair without any attempt is one row of unknown cost. An
  imported table gives one row per line of the file, in the order of its ``at``;
- the **configs** are every config with a row; a task without a row of every config is **dropped** and
  counted (only tasks every config did can reveal any config's outcome);
- tasks in ``(time, task id)`` order, the time being the task's first event (docs/design.md, Split);
- a row without a cost, in a table with costs, costs its config's mean known cost (else the mean of every
  known cost), counted in ``filled_costs``; without any known cost the table has no costs (``cost_known``
  False) and every objective degrades to quality, as in the fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import polars as pl

from ..errors import PipelineError

if TYPE_CHECKING:
    from ..streams.imports import ConfigFormat
    from ..workspace import Workspace


class BacktestInputError(PipelineError):
    """A table or home a backtest cannot replay (exit 2, with the remedy)."""


class Outcome(NamedTuple):
    """What one run of a config on a task reveals: one row of the table."""

    score: float
    cost_usd: float  # the realized cost (a filled-in mean when the row has none; 0 without costs)
    logged_cost_usd: float | None  # the row's own cost (None: unknown, logged as unknown)
    failure_mode: str | None = None  # the attempt's failure_mode, when its table has one (logged with the run)


class Cell(NamedTuple):
    """One row as read: its score, its cost (None: unknown) and its attempt's failure_mode."""

    score: float
    cost: float | None
    failure_mode: str | None = None


@dataclass(frozen=True)
class FullTable:
    """Every kept task with every config's rows, in task order.

    ``rows[i][k]`` are the outcomes of config ``configs[k]`` on task ``tasks[i]``, in row order (at least one).
    ``quality[i, k]`` / ``cost[i, k]``: the first row's score and realized cost (what a single run reveals);
    ``mean_quality[k]`` / ``mean_cost[k]``: the config's mean over the kept tasks of its mean over its rows.
    """

    source: str
    tasks: tuple[str, ...]
    region_of: tuple[str, ...]  # per task
    at: tuple[datetime, ...]  # per task: its time (naive UTC)
    configs: tuple[str, ...]  # sorted keys
    rows: tuple[tuple[tuple[Outcome, ...], ...], ...]
    cost_known: bool
    dropped_tasks: int
    filled_costs: int
    quality: np.ndarray = field(repr=False)
    cost: np.ndarray = field(repr=False)
    mean_quality: np.ndarray = field(repr=False)
    mean_cost: np.ndarray = field(repr=False)

    @property
    def n(self) -> int:
        return len(self.tasks)

    @property
    def regions(self) -> tuple[str, ...]:
        """The regions of the kept tasks, sorted."""
        return tuple(sorted(set(self.region_of)))

    def region_codes(self) -> np.ndarray:
        """Per task, the index of its region in :attr:`regions`."""
        index = {r: i for i, r in enumerate(self.regions)}
        return np.array([index[r] for r in self.region_of], dtype=np.int64)

    @property
    def several_rows(self) -> bool:
        return any(len(cell) > 1 for row in self.rows for cell in row)


def read_file(path: str | Path, scratch: Workspace, *, config_format: ConfigFormat = "auto") -> FullTable:
    """Import the long table ``path`` into the scratch home (``ratings import``'s reader, rater kind ``gate``),
    compact it and read it back (:func:`read_home`)."""
    from ..compact import compact
    from ..streams.imports import import_table

    path = Path(path)
    import_table(scratch, path, rater_name=path.name.split(".")[0], fsync="never", config_format=config_format)
    compact(scratch)
    return read_home(scratch, source=str(path))


def read_home(ws: Workspace, *, source: str | None = None) -> FullTable:
    """The full-information table of a home's store as it is (read only: nothing is compacted or written)."""
    from ..fit.aggregate import INSIDE_ATTEMPT, Spec, ratings_sql, tasks_sql
    from ..fit.engine import DUCKDB
    from ..store import open_store
    from ..store.views import reading

    with open_store(ws, read_only=True) as store, reading(store):
        con = store.con
        con.execute(f"CREATE OR REPLACE TEMP VIEW fit_all_ratings AS {ratings_sql()}")
        # every rating and rejection inside the event bounds with a weight above 0, not retracted (as the fit)
        ratings = con.sql(
            'SELECT task, config_key, "at", id, w, score FROM fit_all_ratings WHERE inside AND w > 0 '
            "AND score IS NOT NULL AND id NOT IN (SELECT rating FROM retractions WHERE rating IS NOT NULL)"
        ).pl()
        attempts = con.sql(f'SELECT task, config_key, "at", id, cost_usd FROM attempts WHERE {INSIDE_ATTEMPT}').pl()
        tasks = con.sql(f"SELECT task, region, first_at FROM ({tasks_sql(DUCKDB, Spec(prm=False))}) t").pl()
        modes = con.sql(_FAILURE_MODES).pl()
        con.execute("DROP VIEW fit_all_ratings")
    return from_frames(ratings, attempts, tasks, source=source or str(ws.root), failure_modes=modes)


# An attempt's failure_mode is kept in the attempts view's extra until the event spec gives it a column.
_FAILURE_MODES = """
SELECT id, json_extract_string(extra, '$.failure_mode') AS failure_mode FROM attempts
WHERE json_extract_string(extra, '$.failure_mode') IS NOT NULL
"""


def from_frames(
    ratings: pl.DataFrame,
    attempts: pl.DataFrame,
    tasks: pl.DataFrame,
    *,
    source: str,
    failure_modes: pl.DataFrame | None = None,
) -> FullTable:
    """The rows of every (task, config) (module doc), the kept tasks in order. ``ratings``: ``task, config_key,
    at, id, w, score`` (weights above 0); ``attempts``: ``task, config_key, at, id, cost_usd``; ``tasks``: ``task,
    region, first_at``; ``failure_modes`` (``id, failure_mode``) names the attempts that carry one."""

    rows = _slot_rows(ratings, attempts, failure_modes, source)
    configs = tuple(sorted(rows["config_key"].unique().to_list()))
    complete = rows.group_by("task").agg(k=pl.col("config_key").n_unique()).filter(pl.col("k") == len(configs))
    named = tasks.join(rows.select("task").unique(), on="task", how="semi").height
    tasks = tasks.join(complete, on="task", how="semi").sort("first_at", "task")
    if tasks.height == 0:
        raise BacktestInputError(
            f"{source}: no task was done by every one of its {len(configs)} configs, so no task can reveal the "
            "outcome of whichever config a policy chooses; a backtest needs a full-information table (give it one "
            "where every config did every task, or a home whose tasks several configs did)"
        )
    kept = rows.join(tasks.select("task", i=pl.int_range(pl.len())), on="task", how="inner").sort(
        "i", "config_key", "j"
    )
    index = {c: k for k, c in enumerate(configs)}
    cells: list[list[list[Cell]]] = [[[] for _ in configs] for _ in range(tasks.height)]
    for i, config, cost, mode, score in kept.select("i", "config_key", "cost_usd", "failure_mode", "score").iter_rows():
        cells[i][index[config]].append(Cell(float(score), cost, mode))
    return build(
        source,
        tasks=tasks["task"].to_list(),
        regions=tasks["region"].to_list(),
        at=tasks["first_at"].to_list(),
        configs=configs,
        cells=cells,
        dropped_tasks=named - tasks.height,
    )


def _slot_rows(
    ratings: pl.DataFrame, attempts: pl.DataFrame, failure_modes: pl.DataFrame | None, source: str
) -> pl.DataFrame:
    """One row per (task, config, attempt j) that has an outcome: ``task, config_key, j, cost_usd, failure_mode,
    score`` (the score of the ratings placed on attempt j, else of its pair's; from_frames's arguments)."""
    keys = ["task", "config_key"]
    ratings = ratings.select(*keys, "at", "id", ws=pl.col("w") * pl.col("score"), w="w").sort("at", "id")
    if ratings.height == 0:
        raise BacktestInputError(f"{source}: no rating with a weight above 0: nothing to replay")
    modes = (
        failure_modes
        if failure_modes is not None
        else pl.DataFrame(schema={"id": pl.String, "failure_mode": pl.String})
    )
    attempts = (
        attempts.select(*keys, "at", "id", "cost_usd")
        .join(modes, on="id", how="left")
        .sort(*keys, "at", "id")
        .with_columns(j=pl.int_range(pl.len()).over(keys))
        .sort("at", "id")
    )
    # Each rating goes to the last attempt of its pair at or before it (the first attempt when none is); both
    # frames are sorted by time, hence within each pair.
    placed = ratings.join_asof(
        attempts.select(*keys, "at", "j"), on="at", by=keys, strategy="backward", check_sortedness=False
    ).with_columns(pl.col("j").fill_null(0))
    own = placed.group_by(*keys, "j").agg(W=pl.col("w").sum(), S=pl.col("ws").sum())
    pair = placed.group_by(keys).agg(W_tc=pl.col("w").sum(), S_tc=pl.col("ws").sum())
    # A rated pair without attempts is one row (j = 0) of unknown cost.
    slots = pl.concat(
        [
            attempts.select(*keys, "j", "cost_usd", "failure_mode"),
            pair.join(attempts, on=keys, how="anti").select(
                *keys, j=pl.lit(0, pl.Int64), cost_usd=pl.lit(None, pl.Float64), failure_mode=pl.lit(None, pl.String)
            ),
        ],
        how="vertical_relaxed",
    )
    return (
        slots.join(pair, on=keys, how="inner")  # pairs without any rating have no outcome
        .join(own, on=[*keys, "j"], how="left")
        .select(
            *keys,
            "j",
            "cost_usd",
            "failure_mode",
            score=pl.when(pl.col("W") > 0).then(pl.col("S") / pl.col("W")).otherwise(pl.col("S_tc") / pl.col("W_tc")),
        )
    )


def build(
    source: str,
    *,
    tasks: Sequence[str],
    regions: Sequence[str],
    at: Sequence[datetime],
    configs: Sequence[str],
    cells: Sequence[Sequence[Sequence[Cell | tuple[float, float | None]]]],
    dropped_tasks: int = 0,
) -> FullTable:
    """The table of ``cells[i][k]``, the :class:`Cell` rows (or (score, cost) pairs) of config ``configs[k]`` on
    task ``tasks[i]``
    (in task order, configs sorted, at least one row each); unknown costs filled as the module doc says."""
    rows = [[[Cell(*c) for c in cell] for cell in row] for row in cells]
    known = [c.cost for row in rows for cell in row for c in cell if c.cost is not None]
    cost_known = bool(known)
    overall = float(np.mean(known)) if cost_known else 0.0
    fill: list[float] = []
    for k in range(len(configs)):
        own = [c.cost for row in rows for c in row[k] if c.cost is not None]
        fill.append(float(np.mean(own)) if own else overall)
    filled = 0
    outcomes: list[tuple[tuple[Outcome, ...], ...]] = []
    for row in rows:
        out_row = []
        for k, cell in enumerate(row):
            if not cell:
                raise ValueError(f"task {len(outcomes)} has no row of {configs[k]}")
            filled += sum(c.cost is None for c in cell) if cost_known else 0
            out_row.append(
                tuple(Outcome(c.score, c.cost if c.cost is not None else fill[k], c.cost, c.failure_mode) for c in cell)
            )
        outcomes.append(tuple(out_row))
    n, m = len(outcomes), len(configs)
    quality = np.array([[cell[0].score for cell in row] for row in outcomes], dtype=np.float64).reshape(n, m)
    cost = np.array([[cell[0].cost_usd for cell in row] for row in outcomes], dtype=np.float64).reshape(n, m)
    mean_q = np.array([[np.mean([o.score for o in c]) for c in row] for row in outcomes]).reshape(n, m)
    mean_c = np.array([[np.mean([o.cost_usd for o in c]) for c in row] for row in outcomes]).reshape(n, m)
    return FullTable(
        source=source,
        tasks=tuple(tasks),
        region_of=tuple(regions),
        at=tuple(at),
        configs=tuple(configs),
        rows=tuple(outcomes),
        cost_known=cost_known,
        dropped_tasks=dropped_tasks,
        filled_costs=int(filled),
        quality=quality,
        cost=cost,
        mean_quality=mean_q.mean(axis=0),
        mean_cost=mean_c.mean(axis=0),
    )
