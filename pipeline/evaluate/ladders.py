"""Ladder scoring on held-out tasks: what the fitted escalation ladders realize (``stats.json`` ``ladders``).

A ladder runs by the escalation rule of :mod:`pipeline.fit.ladder_search`, on logs as on a full-information
table: per task the quality of the rung it stopped at, the summed cost of the rungs it ran and whether it could
be estimated there (rung 1 a first run, every needed later rung seen or completed from the tasks that saw it).
A task where it cannot is left out of the quality and cost means and lowers ``coverage`` = observed tasks /
tasks. Every figure is the mean of a per-task column of :func:`evaluate_ladder`.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import polars as pl

from ..defaults import PASS_THRESHOLD
from ..fit.ladder_search import MAX_RUNGS, MIN_COVERAGE, TaskMatrix, run_ladder, search_ladders, task_matrix
from ..fit.ladders import LadderFit
from ..rounding import round_figure
from ..scalars import mean_of

#: Above this many configurations the hindsight frontier is searched by the beam, not enumerated.
EXHAUSTIVE_HINDSIGHT = 20


def evaluate_ladder(
    rungs: list[str],
    task_values: pl.DataFrame,
    *,
    pass_threshold: float = PASS_THRESHOLD,
    cost_estimates: dict[str, float] | None = None,
) -> pl.DataFrame:
    """Per task: ``task, region, stopped_at, calls, quality, cost_usd, observed`` of one ladder.

    ``quality``/``cost_usd``/``calls`` are null where the ladder cannot be estimated (``observed`` false: rung 1
    has no first run there, or a needed rung is neither seen nor completed from enough donors,
    :mod:`pipeline.fit.ladder_search`); ``stopped_at`` is null there and where the run was completed from donors.
    """
    configs = tuple(sorted(set(task_values["config_key"].unique().to_list()) | set(rungs)))
    m = task_matrix(task_values, configs, cost_estimates)
    run = run_ladder(m, tuple(configs.index(c) for c in rungs), pass_threshold)
    return pl.DataFrame(
        {
            "task": m.tasks,
            "region": m.regions,
            "stopped_at": [rungs[k] if k >= 0 else None for k in run.stop.tolist()],
            "calls": run.calls,
            "quality": run.quality,
            "cost_usd": run.cost if m.cost_known else np.full(len(m.tasks), np.nan),
            "observed": run.observed,
        },
        schema={
            "task": task_values.schema["task"],
            "region": pl.String,
            "stopped_at": pl.String,
            "calls": pl.Float64,
            "quality": pl.Float64,
            "cost_usd": pl.Float64,
            "observed": pl.Boolean,
        },
    ).with_columns(pl.col("quality", "cost_usd", "calls").fill_nan(None))


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
    spend = "cost_usd" if fit.cost_known else "calls"
    chosen_spend = mean_of(both[spend])
    cost_known = fit.cost_known

    def mean(frame: pl.DataFrame, col: str) -> float | None:
        return round_figure(mean_of(frame[col])) if frame.height and (cost_known or "cost" not in col) else None

    def ratio(a: float | None, b: float | None) -> float | None:
        return round_figure(a / b) if a is not None and b not in (None, 0.0) else None

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
            "coverage": round_figure(seen.height / rows.height) if rows.height else None,
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
        "coverage": round_figure(mean_of(runs["observed"])) if runs.height else None,
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
        "rule": fit.rule,
        "hindsight": hindsight(fit, task_values_heldout, quality, chosen_spend, cost_estimates),
    }


def hindsight(
    fit: LadderFit,
    task_values_heldout: pl.DataFrame,
    chosen_quality: float | None,
    chosen_spend: float | None,
    cost_estimates: dict[str, float] | None = None,
) -> dict[str, Any] | None:
    """Diagnostic, chosen with hindsight on the held-out tasks (never used to choose): every ladder of up to
    three rungs scored as the summary scores the published ones (on the tasks where it and the best single were
    observed; ladders of 2+ rungs observed on at least ``MIN_COVERAGE`` of them), and

    - ``frontier_at_cost``: the best quality any of them reaches at no more than the chosen ladders' spend (cost
      per task, calls without costs), and its ``gap`` above the chosen ladders' quality;
    - ``cheapest_reaching_best_single``: the cheapest one whose quality reaches the best single's on its tasks,
      with its spend as a share of the best single's (``cost_ratio``).

    So a reader sees how far the rule's choice is from the limit of this held-out sample.
    """
    if fit.best_single is None or chosen_quality is None or chosen_spend is None:
        return None
    configs = tuple(sorted(set(task_values_heldout["config_key"].unique().to_list()) | {fit.best_single}))
    m = task_matrix(task_values_heldout, configs, cost_estimates)
    if not m.cost_known and fit.cost_known:
        return None
    best = run_ladder(m, (configs.index(fit.best_single),), fit.pass_threshold)
    scored = [_scored(m, lad, best, fit.pass_threshold) for lad in _all_ladders(m, fit.pass_threshold)]
    ok = [x for x in scored if x is not None]
    near = max((x for x in ok if x["spend"] <= chosen_spend + 1e-12), key=lambda x: x["quality"], default=None)
    reach = min(
        (x for x in ok if x["quality"] >= x["best_quality"] - 1e-12),
        key=lambda x: (x["spend"], -x["quality"]),
        default=None,
    )
    unit = "cost_usd" if m.cost_known else "calls"

    def row(x: dict[str, Any] | None) -> dict[str, Any] | None:
        if x is None:
            return None
        return {
            "ladder": x["ladder"],
            "quality": round_figure(x["quality"]),
            unit: round_figure(x["spend"]),
            "quality_ratio": round_figure(x["quality"] / x["best_quality"]) if x["best_quality"] else None,
            "cost_ratio": round_figure(x["spend"] / x["best_spend"]) if x["best_spend"] else None,
        }

    return {
        "diagnostic": "chosen with hindsight on the held-out tasks; never used to choose",
        "ladders_scored": len(ok),
        "frontier_at_cost": {
            **(row(near) or {}),
            "gap": round_figure(near["quality"] - chosen_quality) if near else None,
        },
        "cheapest_reaching_best_single": row(reach),
    }


def _all_ladders(m: TaskMatrix, pass_threshold: float) -> list[tuple[int, ...]]:
    """Every ordered ladder of up to three distinct configs (the beam's front above ``EXHAUSTIVE_HINDSIGHT``)."""
    n = len(m.configs)
    if n <= EXHAUSTIVE_HINDSIGHT:
        return [lad for k in range(1, MAX_RUNGS + 1) for lad in itertools.permutations(range(n), k)]
    rows = np.ones(len(m.tasks), dtype=bool)
    return [lad for lad, _ in search_ladders(m, rows, pass_threshold).candidates]


def _scored(m: TaskMatrix, rungs: tuple[int, ...], best: Any, pass_threshold: float) -> dict[str, Any] | None:
    run = run_ladder(m, rungs, pass_threshold)
    ok = run.observed & best.observed
    if not ok.any() or (len(rungs) > 1 and ok.sum() < MIN_COVERAGE * best.observed.sum()):
        return None
    spend = run.cost if m.cost_known else run.calls
    best_spend = best.cost if m.cost_known else best.calls
    return {
        "ladder": [m.configs[j] for j in rungs],
        "quality": float(run.quality[ok].mean()),
        "spend": float(spend[ok].mean()),
        "best_quality": float(best.quality[ok].mean()),
        "best_spend": float(best_spend[ok].mean()),
    }
