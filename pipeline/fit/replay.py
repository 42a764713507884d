"""Sequential replay (DESIGN 6): how a policy with exploration would have done, routing tasks one by one.

Tasks are routed in time order among the pool the router knows (the configs of
the fit it starts from). Only the chosen config's outcome is revealed: when the
chosen config did the task its task value and cost are scored and folded into
the posterior of (config, region) before the next task, so exploration can pay
off later; when it did not, the task is skipped and counted (nothing is known
of an outcome that was never observed).

Posterior: ``q(c, r) = (k * p(c, r) + S) / (k + W)`` with ``S``, ``W`` the sums
of ``w * s`` and ``w`` (DESIGN 5); a revealed task adds ``value * weight`` and
``weight`` of its (task, config) row. Cost: the mean of the known task costs of
(c, r), else the fit's fallback estimate, floored. Exploration draws come from a
seeded ``numpy`` Generator; one uniform and one index are drawn for every task
whatever epsilon is, so runs that differ only in epsilon share their draws.

Realized objective over the routed tasks: total quality / total cost for
quality per dollar, mean ``lambda * q - cost`` for utility, mean quality for
quality.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict


class ReplayResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    exploration: float
    realized_value: float | None
    tasks_routed: int
    tasks_skipped: int
    explored: int


@dataclass(frozen=True)
class ReplayStart:
    """What a replay starts from: the fitted part's task values and the fit's prior and cost per (c, r)."""

    fitted_task_values: pl.DataFrame  # task, region, config_key, value, weight, cost_usd, unknown_cost
    pool: Sequence[str]  # the configs the router knows
    lookup: dict[tuple[str, str], tuple[float, float | None]]  # (c, r) -> (p(c, r), cost(c, r) of the fit)
    prior_weight: float
    objective: str  # the effective objective (quality when no cost is known)
    floor: float
    lam: float | None = None


def start_from(model: Any, fitted_task_values: pl.DataFrame, regions: Sequence[str]) -> ReplayStart:
    """A replay starting from ``model`` (a :class:`pipeline.fit.model.FittedModel`) for tasks of ``regions``."""
    pool = model.members.filter(pl.col("region") == "*")["config_key"].to_list()
    pairs = pl.DataFrame({"config_key": [c for c in pool for _ in regions], "region": [r for _ in pool for r in regions]},
                         schema={"config_key": pl.String, "region": pl.String})
    rows = model.lookup(pairs).select("config_key", "region", "prior", "cost_usd").iter_rows()
    c = model.constants
    return ReplayStart(
        fitted_task_values=fitted_task_values, pool=pool, lookup={(k, r): (p, cost) for k, r, p, cost in rows},
        prior_weight=float(c.prior_weight), objective=model.effective_objective, floor=float(c.cost_floor_usd),
        lam=c.lambda_,
    )


def posterior(k: float, p: float, s: float, w: float) -> float:
    """``q = (k * p + S) / (k + W)``; ``q = p`` when ``k + W = 0`` (DESIGN 5)."""
    return p if k + w == 0 else (k * p + s) / (k + w)


def replay(
    start: ReplayStart, tasks: pl.DataFrame, outcomes: pl.DataFrame, *, exploration: float, seed: int
) -> ReplayResult:
    """Route ``tasks`` (task, region, first_at) in time order.

    ``outcomes`` are their task values with ``cost_t`` (the realized cost, unknown attempts at the estimate of
    the fit the replay starts from; null when no cost is known) and ``unknown_cost``.
    """
    state = _initial_state(start.fitted_task_values)
    observed = {
        (t, c): (v, w, cost, unknown == 0)
        for t, c, v, w, cost, unknown in outcomes.filter(pl.col("value").is_not_null())
        .select("task", "config_key", "value", "weight", "cost_t", "unknown_cost").iter_rows()
    }
    pool = sorted(start.pool)
    rng = np.random.default_rng(seed)
    ordered = tasks.select("task", "region", "first_at").sort(["first_at", "task"])
    draws_u = rng.random(ordered.height)
    draws_i = rng.random(ordered.height)
    routed = skipped = explored = 0
    total_q = total_cost = total_utility = 0.0
    for i, (task, region, _at) in enumerate(ordered.iter_rows()):
        if not pool:
            skipped += 1
            continue
        scored = []
        for c in pool:
            prior, fallback = start.lookup[(c, region)]
            s, w, cost_sum, cost_n = state.get((c, region), (0.0, 0.0, 0.0, 0))
            q = posterior(start.prior_weight, prior, s, w)
            cost = cost_sum / cost_n if cost_n else fallback
            cost = None if cost is None else max(cost, start.floor)
            scored.append((_value(start, q, cost), q, cost, c))
        greedy = min(scored, key=lambda x: (-x[0], -x[1], x[2] if x[2] is not None else 0.0, x[3]))
        chosen = greedy[3]
        if len(pool) > 1 and draws_u[i] < exploration:
            others = [c for c in pool if c != chosen]
            chosen = others[int(draws_i[i] * len(others))]
            explored += 1
        outcome = observed.get((task, chosen))
        if outcome is None:
            skipped += 1
            continue
        value, weight, cost, cost_known = outcome
        routed += 1
        total_q += value
        if cost is not None:
            total_cost += cost
            if start.lam is not None:
                total_utility += start.lam * value - cost
        s, w, cost_sum, cost_n = state.get((chosen, region), (0.0, 0.0, 0.0, 0))
        known = cost_known and cost is not None
        state[(chosen, region)] = (s + value * weight, w + weight, cost_sum + (cost if known else 0.0), cost_n + known)
    return ReplayResult(
        exploration=exploration, realized_value=_realized(start, routed, total_q, total_cost, total_utility),
        tasks_routed=routed, tasks_skipped=skipped, explored=explored,
    )


def _value(start: ReplayStart, q: float, cost: float | None) -> float:
    """The objective of DESIGN 5 on the posterior (quality when costs are unknown)."""
    if start.objective == "quality" or cost is None:
        return q
    if start.objective == "utility":
        return (start.lam or 0.0) * q - cost
    return q / cost


def _realized(start: ReplayStart, routed: int, total_q: float, total_cost: float, total_utility: float):
    if routed == 0:
        return None
    if start.objective == "quality_per_dollar":
        return total_q / max(total_cost, start.floor)
    if start.objective == "utility":
        return total_utility / routed
    return total_q / routed


def _initial_state(task_values: pl.DataFrame) -> dict[tuple[str, str], tuple[float, float, float, int]]:
    """Per (config, region): S = sum(w*s), W = sum(w), sum and count of the known task costs.

    A task cost is known when every attempt of c on t has a cost (``unknown_cost == 0``), as in the fit.
    """
    known = (pl.col("unknown_cost") == 0) & pl.col("cost_usd").is_not_null()
    grouped = task_values.group_by("config_key", "region").agg(
        pl.col("wscore").sum().alias("s"),
        pl.col("weight").sum().alias("w"),
        pl.col("cost_usd").filter(known).sum().alias("cost_sum"),
        known.sum().alias("cost_n"),
    )
    return {(c, r): (s, w, cs, int(cn)) for c, r, s, w, cs, cn in grouped.iter_rows()}
