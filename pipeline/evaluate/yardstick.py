"""One yardstick: the figures every held-out section shares, computed once from one definition each.

Every held-out figure of a fit (the baselines table, the cost-quality frontier and its AIQ, the ladders, the
policies) is measured on the **eligible held-out tasks** (done by two or more configs, some task value above 0)
with each task's realized costs ``cost_t,c`` (docs/design.md, Evaluation). On them:

- a **single configuration** is scored only where it was observed: its mean quality and cost over the eligible
  tasks it did, its hit rate there (in the task's best set), and its ``coverage`` = those tasks / all eligible
  tasks. The best single and the cheapest baselines are two of these rows;
- the **oracle** takes on each task one configuration of its best set (best per dollar; quality alone without
  costs): the highest quality there, then the lower cost, then key order. Its hit rate is 1 by definition;
- where the logs carry propensities, each single also gets its **off-policy estimate** (SNIPS) from the logged
  routing decisions of the eligible tasks: ``sum_i [a_i = c] q_i / p_i / sum_i [a_i = c] / p_i`` (likewise for
  cost), the quality and cost it would have had on every task, not only where it happened to run.

The baselines table and the frontier figure both read these functions, so a point they share is one number.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ..rounding import round_figure
from ..scalars import mean_of


def single_rows(best: pl.DataFrame, *, cost_known: bool, cost: str = "cost_t") -> dict[str, dict[str, Any]]:
    """Per configuration of ``best`` (:func:`pipeline.evaluate.metrics.mark_best` rows of the eligible tasks, with
    the realized cost in ``cost``): ``config, hit_rate, mean_quality, mean_cost_usd, tasks, coverage``."""
    n_tasks = best["task"].n_unique()
    grouped = (
        best.group_by("config_key")
        .agg(
            hit_rate=pl.col("best").cast(pl.Float64).mean(),
            mean_quality=pl.col("value").mean(),
            mean_cost_usd=pl.col(cost).mean() if cost_known else pl.lit(None, pl.Float64),
            tasks=pl.col("task").n_unique(),
        )
        .sort("config_key")
    )
    return {
        row["config_key"]: {
            "config": row["config_key"],
            "hit_rate": round_figure(row["hit_rate"]),
            "mean_quality": round_figure(row["mean_quality"]),
            "mean_cost_usd": round_figure(row["mean_cost_usd"]),
            "tasks": int(row["tasks"]),
            "coverage": round_figure(row["tasks"] / n_tasks) if n_tasks else None,
        }
        for row in grouped.iter_rows(named=True)
    }


def oracle_row(best: pl.DataFrame, *, cost_known: bool, cost: str = "cost_t") -> dict[str, Any]:
    """The oracle of the module docstring: ``config`` null, ``hit_rate, mean_quality, mean_cost_usd, tasks``."""
    picked = (
        best.filter(pl.col("best"))
        .sort(["task", "value", cost, "config_key"], descending=[False, True, False, False], nulls_last=True)
        .group_by("task", maintain_order=True)
        .first()
    )
    n = picked.height
    return {
        "config": None,
        "hit_rate": 1.0 if n else None,
        "mean_quality": round_figure(mean_of(picked["value"])),
        "mean_cost_usd": round_figure(mean_of(picked[cost])) if cost_known else None,
        "tasks": n,
        "coverage": 1.0 if n else None,
    }


def snips_singles(
    best: pl.DataFrame, decisions: pl.DataFrame, *, cost_known: bool, cost: str = "cost_t"
) -> dict[str, dict[str, Any]]:
    """Per configuration: the SNIPS estimates of its mean quality and cost from the logged decisions of the tasks
    of ``best`` (module docstring), with ``logged`` = the decisions that chose it and ``decisions`` = all used.

    A decision counts when it carries a propensity and the configuration it chose has a task value on its task
    (a routed attempt that was never rated reveals nothing). Empty without such decisions.
    """
    if decisions.is_empty() or "propensity" not in decisions.columns:
        return {}
    logged = (
        decisions.filter(pl.col("propensity").is_not_null() & (pl.col("propensity") > 0))
        .select("task", config_key="chosen", w=1.0 / pl.col("propensity"))
        .join(best.select("task", "config_key", "value", cost), on=["task", "config_key"], how="inner")
    )
    if logged.is_empty():
        return {}
    total = logged.height
    grouped = (
        logged.group_by("config_key")
        .agg(
            logged=pl.len(),
            sw=pl.col("w").sum(),
            swq=(pl.col("w") * pl.col("value")).sum(),
            swc=(pl.col("w") * pl.col(cost)).sum() if cost_known else pl.lit(None, pl.Float64),
        )
        .sort("config_key")
    )
    return {
        row["config_key"]: {
            "snips_quality": round_figure(row["swq"] / row["sw"]),
            "snips_cost_usd": round_figure(row["swc"] / row["sw"]) if cost_known else None,
            "logged": int(row["logged"]),
            "decisions": total,
        }
        for row in grouped.iter_rows(named=True)
    }
