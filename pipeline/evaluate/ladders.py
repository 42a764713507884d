"""Ladder scoring on held-out tasks: what the fitted escalation ladders realize (``stats.json`` ``ladders``).

A ladder runs by the escalation rule of :mod:`pipeline.fit.ladder_search`; per task it gives the quality of
the rung it stopped at, the summed cost of the rungs it ran and whether every rung it ran was observed. A
task with an unobserved needed rung is never counted as a success: it is left out of the quality and cost
means and lowers ``coverage`` = observed tasks / tasks. Every figure is the mean of a per-task column of
:func:`evaluate_ladder`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ..fit.ladder_search import run_ladder, task_matrix
from ..fit.ladders import DEFAULT_PASS_THRESHOLD, LadderFit
from .metrics import round9


def evaluate_ladder(
    rungs: list[str],
    task_values: pl.DataFrame,
    *,
    pass_threshold: float = DEFAULT_PASS_THRESHOLD,
    cost_estimates: dict[str, float] | None = None,
) -> pl.DataFrame:
    """Per task: ``task, region, stopped_at, calls, quality, cost_usd, observed`` of one ladder.

    ``quality``/``cost_usd`` are null where a needed rung was not observed (``observed`` false); a
    rung with no task value anywhere in the frame leaves every task that needs it unobserved.
    """
    configs = tuple(sorted(set(task_values["config_key"].unique().to_list()) | set(rungs)))
    m = task_matrix(task_values, configs, cost_estimates)
    run = run_ladder(m, tuple(configs.index(c) for c in rungs), pass_threshold)
    return pl.DataFrame(
        {
            "task": m.tasks,
            "region": m.regions,
            "stopped_at": [rungs[k] for k in run.stop.tolist()],
            "calls": run.calls,
            "quality": run.quality,
            "cost_usd": run.cost if m.cost_known else np.full(len(m.tasks), np.nan),
            "observed": run.observed,
        },
        schema={
            "task": pl.String,
            "region": pl.String,
            "stopped_at": pl.String,
            "calls": pl.Int64,
            "quality": pl.Float64,
            "cost_usd": pl.Float64,
            "observed": pl.Boolean,
        },
    ).with_columns(pl.col("quality").fill_nan(None), pl.col("cost_usd").fill_nan(None))


def published_runs(
    fit: LadderFit, task_values: pl.DataFrame, cost_estimates: dict[str, float] | None = None
) -> pl.DataFrame:
    """:func:`evaluate_ladder` per task with the ladder its region publishes (own, else ``'*'``), plus
    ``best_quality``/``best_cost_usd``: the best single config's value and cost on the same task."""
    if fit.best_single is None:
        raise ValueError("published_runs needs a ladder fit with a best single config")
    used = fit.published()
    regions = sorted(task_values["region"].unique().to_list())
    parts = [
        evaluate_ladder(
            used.get(r, used["*"]),
            task_values.filter(pl.col("region") == r),
            pass_threshold=fit.pass_threshold,
            cost_estimates=cost_estimates,
        )
        for r in regions
    ]
    runs = pl.concat(parts).sort("task") if parts else evaluate_ladder(used["*"], task_values)
    single = evaluate_ladder([fit.best_single], task_values, cost_estimates=cost_estimates).select(
        "task", best_quality="quality", best_cost_usd="cost_usd", best_observed="observed"
    )
    return runs.join(single, on="task", how="left")


def ladders_section(
    fit: LadderFit, task_values_heldout: pl.DataFrame, cost_estimates: dict[str, float] | None = None
) -> dict[str, Any]:
    """The ``ladders`` object of ``stats.json``.

    ``regions``: per region and ``'*'``, the ladder used, where it comes from, its validated and held-out
    quality and cost and its held-out coverage (held-out means over the fully observed tasks).
    ``summary``: the published ladders on the held-out tasks where every rung they ran was observed (and
    the best single too), next to the best single configuration (highest learned quality) on those same
    tasks. Costs are null when unknown; ``gate_is_target`` true means the gate is the quality measure
    itself, so the figures are an upper bound for a perfect verifier.
    """
    if not fit.ladders or fit.best_single is None or task_values_heldout.is_empty():
        return {
            "target": fit.target,
            "pass_threshold": fit.pass_threshold,
            "regions": {},
            "summary": None,
            "reason": "no ladder fitted or no held-out task values",
        }
    runs = published_runs(fit, task_values_heldout, cost_estimates)
    both = runs.filter(pl.col("observed") & pl.col("best_observed"))
    cost_known = fit.cost_known

    def mean(frame: pl.DataFrame, col: str) -> float | None:
        return round9(frame[col].mean()) if frame.height and (cost_known or "cost" not in col) else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return round9(a / b) if a is not None and b not in (None, 0.0) else None

    regions: dict[str, Any] = {}
    for region, choice in sorted(fit.ladders.items()):
        if region == "*":
            rows = evaluate_ladder(
                choice.rungs, task_values_heldout, pass_threshold=fit.pass_threshold, cost_estimates=cost_estimates
            )
        else:
            rows = runs.filter(pl.col("region") == region)
        seen = rows.filter(pl.col("observed"))
        regions[region] = {
            "ladder": choice.rungs,
            "source": choice.source,
            "reason": choice.reason,
            "validated_quality": choice.validated_quality,
            "validated_cost_usd": choice.validated_cost_usd,
            "held_out_quality": mean(seen, "quality"),
            "held_out_cost_usd": mean(seen, "cost_usd"),
            "held_out_calls": mean(seen, "calls"),
            "coverage": round9(seen.height / rows.height) if rows.height else None,
            "held_out_tasks": rows.height,
        }
    quality, cost = mean(both, "quality"), mean(both, "cost_usd")
    best_q, best_c = mean(both, "best_quality"), mean(both, "best_cost_usd")
    summary = {
        "held_out_quality": quality,
        "held_out_cost_usd": cost,
        "best_single_config": fit.best_single,
        "best_single_quality": best_q,
        "best_single_cost_usd": best_c,
        "quality_ratio": ratio(quality, best_q),
        "cost_ratio": ratio(cost, best_c),
        "coverage": round9(runs["observed"].mean()) if runs.height else None,
        "gate_is_target": fit.gate_is_target,
    }
    return {
        "target": fit.target,
        "budget_usd": fit.budget_usd,
        "pass_threshold": fit.pass_threshold,
        "cost_known": cost_known,
        "search": fit.search,
        "regions": regions,
        "summary": summary,
        "held_out_tasks_compared": both.height,
    }
