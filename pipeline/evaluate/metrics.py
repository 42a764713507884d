"""Held-out scoring (docs/design.md, Evaluation): objective score, best set, per-task hits, hit rate.

Everything works on the task-value frame of :meth:`pipeline.fit.context.FitContext.values`
(one row per ``task, config_key``: ``value`` = q_t,c, ``cost_usd`` = cost_t,c)
and a ``chosen`` frame (one row per ``task``: ``task, chosen``) produced by any chooser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..scalars import mean_of
from .intervals import wilson


def objective_expr(objective: str, *, quality: str, cost: str, floor: float, lam: float | None) -> pl.Expr:
    """The objective (docs/design.md, Objectives) as a polars expression.

    ``quality_per_dollar = q / max(cost, floor)``; ``utility = lambda * q - cost``; ``quality = q``.
    """
    q, c = pl.col(quality), pl.col(cost)
    if objective == "quality_per_dollar":
        return q / pl.max_horizontal(c, pl.lit(floor))
    if objective == "utility":
        if lam is None:
            raise ValueError("the utility objective needs lambda")
        return pl.lit(lam) * q - c
    if objective == "quality":
        return q
    raise ValueError(f"unknown objective {objective!r}")


def eligible(task_values: pl.DataFrame) -> pl.DataFrame:
    """Rows of the tasks that count for the hit rate: done by >= 2 configs, some task value > 0.

    A (task, config) whose ratings all have weight 0 has no task value and does not count as done.
    """
    task_values = task_values.filter(pl.col("value").is_not_null())
    per_task = task_values.group_by("task").agg(
        pl.col("config_key").n_unique().alias("_configs"), pl.col("value").max().alias("_top")
    )
    keep = per_task.filter((pl.col("_configs") >= 2) & (pl.col("_top") > 0)).select("task")
    return task_values.join(keep, on="task", how="semi").sort(["task", "config_key"])


def mark_best(
    task_values: pl.DataFrame, *, objective: str, floor: float, lam: float | None = None, cost: str = "cost"
) -> pl.DataFrame:
    """Add ``score`` (the objective on the task's own q_t,c and cost_t,c) and ``best`` (score == the task's max).

    Best per dollar on task t is ``argmax_c q_t,c / max(cost_t,c, floor)`` over the configs that did t; ties all
    count. ``cost`` names a column without nulls (unknown costs already estimated) unless the objective is quality.
    """
    scored = task_values.with_columns(
        objective_expr(objective, quality="value", cost=cost, floor=floor, lam=lam).alias("score")
    )
    return scored.with_columns((pl.col("score") == pl.col("score").max().over("task")).alias("best"))


def route_hits(best: pl.DataFrame, chosen: pl.DataFrame) -> pl.DataFrame:
    """Per task: ``chosen``, ``hit`` (chosen is in the best set), ``share_best_others``.

    ``share_best_others`` = (best members other than the chosen one) / (members other than the chosen one),
    the hit probability of one exploration draw (a uniformly chosen *other* member).
    """
    joined = best.join(chosen.select("task", "chosen"), on="task", how="inner")
    is_chosen = pl.col("config_key") == pl.col("chosen")
    per_task = joined.group_by("task").agg(
        pl.col("chosen").first(),
        (is_chosen & pl.col("best")).any().alias("hit"),
        (~is_chosen & pl.col("best")).sum().alias("_best_others"),
        (~is_chosen).sum().alias("_others"),
    )
    share = pl.when(pl.col("_others") > 0).then(pl.col("_best_others") / pl.col("_others")).otherwise(0.0)
    return per_task.with_columns(share.alias("share_best_others")).drop("_best_others", "_others").sort("task")


@dataclass(frozen=True)
class BestIndex:
    """A :func:`mark_best` frame as integer codes sorted by task, so a greedy pick per task is numpy work.

    The grid search routes the same tasks under a hundred-odd constant sets; only the order of the
    (region, config) pairs changes between them, so the rows are encoded once.
    """

    best: pl.DataFrame  # the rows, sorted by (task, config_key)
    pairs: pl.DataFrame  # region, config_key, pair: every distinct pair of the rows, coded
    pair_code: np.ndarray  # per row
    starts: np.ndarray  # first row of each task
    counts: np.ndarray  # rows (members) per task
    is_best: np.ndarray  # per row
    n_best: np.ndarray  # per task
    tasks: pl.Series  # per task

    @classmethod
    def of(cls, best: pl.DataFrame) -> BestIndex:
        rows = best.sort(["task", "config_key"])
        pairs = rows.select("region", "config_key").unique().sort(["region", "config_key"]).with_row_index("pair")
        coded = rows.join(pairs, on=["region", "config_key"], how="left", maintain_order="left")
        per_task = rows.group_by("task", maintain_order=True).agg(pl.len().alias("n"), pl.col("best").sum().alias("b"))
        counts = per_task["n"].to_numpy().astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        return cls(
            best=rows,
            pairs=pairs,
            pair_code=coded["pair"].to_numpy().astype(np.int64),
            starts=starts,
            counts=counts,
            is_best=rows["best"].to_numpy().astype(bool),
            n_best=per_task["b"].to_numpy().astype(np.int64),
            tasks=per_task["task"],
        )

    def route(self, ranking: pl.DataFrame) -> pl.DataFrame:
        """Per task the member first in ``ranking`` (rows ``region, config_key`` in preference order, every pair of
        :attr:`pairs` present); the same frame as :func:`route_hits`."""
        if self.best.height == 0:
            return pl.DataFrame(
                schema={"task": pl.String, "chosen": pl.String, "hit": pl.Boolean, "share_best_others": pl.Float64}
            )
        order = ranking.select("region", "config_key").with_row_index("rank")
        rank_of_pair = self.pairs.join(order, on=["region", "config_key"], how="left").sort("pair")["rank"]
        row_rank = rank_of_pair.to_numpy().astype(np.int64)[self.pair_code]
        top = np.minimum.reduceat(row_rank, self.starts)
        chosen_rows = np.flatnonzero(row_rank == np.repeat(top, self.counts))
        hit = self.is_best[chosen_rows]
        others = self.counts - 1
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(others > 0, (self.n_best - hit) / np.maximum(others, 1), 0.0)
        return pl.DataFrame(
            {
                "task": self.tasks,
                "chosen": self.best["config_key"].gather(chosen_rows),
                "hit": hit,
                "share_best_others": share.astype(float),
            }
        )


def expected_hit(per_task: pl.DataFrame, exploration: float) -> float | None:
    """Mean over tasks of ``(1 - eps) * hit(greedy) + eps * share of best among the other members``."""
    if per_task.height == 0:
        return None
    hit = per_task["hit"].cast(pl.Float64)
    return mean_of((1 - exploration) * hit + exploration * per_task["share_best_others"])


def hit_summary(per_task: pl.DataFrame) -> dict[str, Any]:
    """``{hit_rate, hits, n, ci95}`` of a :func:`route_hits` frame (hit_rate null when n = 0)."""
    n = per_task.height
    hits = int(per_task["hit"].sum()) if n else 0
    return {"hit_rate": hits / n if n else None, "hits": hits, "n": n, "ci95": wilson(hits, n)}
