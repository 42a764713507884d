"""Baselines (docs/design.md, Baselines) on the eligible held-out tasks: hit rate, mean quality, mean cost of each.

- ``best_single``: the config with the highest learned quality (global pool), scored on the eligible tasks it
  did, with its ``coverage`` (:func:`pipeline.evaluate.yardstick.single_rows`: the frontier's point of it).
- ``cheapest``: the same for the config with the lowest learned cost (configs of unknown cost last); all null
  when no cost is known at all.
- ``random``: the expectation of a uniform choice among the configs that did the task.
- ``oracle``: one config of the task's best set (:func:`pipeline.evaluate.yardstick.oracle_row`).
- ``shipped``, ``fitted``: the greedy choices of those constants.

Quality is the task value q_t,c of the chosen config; cost its cost_t,c (column ``cost_t``); hit: it is in the best set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from ..scalars import mean_of
from .yardstick import oracle_row, single_rows


def score_choice(best: pl.DataFrame, chosen: pl.DataFrame, *, cost_known: bool, config: str | None = None) -> dict:
    """``{config, hit_rate, mean_quality, mean_cost_usd}`` of one choice per task over the ``best`` frame's tasks."""
    rows = best.join(chosen.select("task", pl.col("chosen").alias("config_key")), on=["task", "config_key"])
    return _summary(rows["best"].cast(pl.Float64), rows["value"], rows["cost_t"], cost_known=cost_known, config=config)


def baselines(
    best: pl.DataFrame,
    *,
    learned_quality: Sequence[tuple[str, float]],
    learned_cost: Sequence[tuple[str, float | None]],
    shipped: pl.DataFrame,
    fitted: pl.DataFrame,
    cost_known: bool,
) -> dict[str, dict]:
    """All six baselines. ``best`` is :func:`pipeline.evaluate.metrics.mark_best` of the eligible held-out tasks."""
    by_quality = [c for c, _ in sorted(learned_quality, key=lambda x: (-x[1], x[0]))]
    by_cost = [c for c, _ in sorted(learned_cost, key=lambda x: (x[1] is None, x[1] or 0.0, x[0]))]
    singles = single_rows(best, cost_known=cost_known)
    absent = {"hit_rate": None, "mean_quality": None, "mean_cost_usd": None, "tasks": 0, "coverage": 0.0}

    def single(config: str | None) -> dict[str, Any]:
        return singles.get(config, {**absent, "config": config}) if config is not None else {**absent, "config": None}

    out = {
        "best_single": single(by_quality[0] if by_quality else None),
        # without any known cost there is no cheapest config: every figure is null
        "cheapest": single(by_cost[0] if by_cost else None) if cost_known else {**absent, "config": None},
    }
    per_task_random = best.group_by("task").agg(
        pl.col("best").cast(pl.Float64).mean().alias("hit"), pl.col("value").mean(), pl.col("cost_t").mean()
    )
    out["random"] = _summary(
        per_task_random["hit"], per_task_random["value"], per_task_random["cost_t"], cost_known=cost_known
    )
    out["oracle"] = oracle_row(best, cost_known=cost_known)
    out["shipped"] = score_choice(best, shipped, cost_known=cost_known)
    out["fitted"] = score_choice(best, fitted, cost_known=cost_known)
    return out


def _summary(
    hit: pl.Series, quality: pl.Series, cost: pl.Series, *, cost_known: bool, config: str | None = None
) -> dict[str, Any]:
    return {
        "config": config,
        "hit_rate": mean_of(hit),
        "mean_quality": mean_of(quality),
        "mean_cost_usd": mean_of(cost) if cost_known else None,
    }
