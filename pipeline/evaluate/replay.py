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
    min_quality: float | None = None  # the quality floor of the greedy order (FittedModel's greedy_order)


def start_from(model: Any, fitted_task_values: pl.DataFrame, regions: Sequence[str]) -> ReplayStart:
    """A replay starting from ``model`` (a :class:`pipeline.fit.model.FittedModel`) for tasks of ``regions``."""
    pool = model.members.filter(pl.col("region") == "*")["config_key"].to_list()
    pairs = pl.DataFrame(
        {"config_key": [c for c in pool for _ in regions], "region": [r for _ in pool for r in regions]},
        schema={"config_key": pl.String, "region": pl.String},
    )
    rows = model.lookup(pairs).select("config_key", "region", "prior", "cost_usd").iter_rows()
    c = model.constants
    return ReplayStart(
        fitted_task_values=fitted_task_values,
        pool=pool,
        lookup={(k, r): (p, cost) for k, r, p, cost in rows},
        prior_weight=float(c.prior_weight),
        objective=model.effective_objective,
        floor=float(c.cost_floor_usd),
        lam=c.lambda_,
        min_quality=c.min_quality,
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
    return replay_many(start, tasks, outcomes, explorations=[exploration], seed=seed)[0]


def replay_many(
    start: ReplayStart, tasks: pl.DataFrame, outcomes: pl.DataFrame, *, explorations: Sequence[float], seed: int
) -> list[ReplayResult]:
    """:func:`replay` for several epsilons from the same start, laying the outcomes out once.

    The loop is over tasks (it is sequential by nature), never over ratings: outcomes are laid out as a dense
    task x config matrix first, and each region's greedy choice is kept and recomputed only when one of its
    configs learns something.
    """
    pool = sorted(start.pool)
    k_pool = len(pool)
    ordered = tasks.select("task", "region", "first_at").sort(["first_at", "task"])
    n_tasks = ordered.height
    if k_pool == 0:
        return [
            ReplayResult(exploration=eps, realized_value=None, tasks_routed=0, tasks_skipped=n_tasks, explored=0)
            for eps in explorations
        ]
    regions = sorted(set(ordered["region"].to_list()))
    task_region = ordered["region"].replace_strict(regions, list(range(len(regions))), return_dtype=pl.Int64)
    matrix = _outcome_matrix(ordered, outcomes, pool)
    state = _initial_state(start.fitted_task_values)
    return [
        _run(start, pool, regions, task_region.to_list(), matrix, state, exploration=eps, seed=seed)
        for eps in explorations
    ]


def _run(
    start: ReplayStart,
    pool: list[str],
    regions: list[str],
    task_region: list[int],
    matrix: list[list[Any]],
    state: dict[tuple[str, str], tuple[float, float, float, int]],
    *,
    exploration: float,
    seed: int,
) -> ReplayResult:
    k_pool = len(pool)
    rng = np.random.default_rng(seed)
    draws_u = rng.random(len(task_region)).tolist()
    draws_i = rng.random(len(task_region)).tolist()
    value, weight, cost, known = matrix
    # per region, per config: [S, W, known cost sum, known cost count], prior, fallback cost, greedy sort key
    sums = [[list(state.get((c, r), (0.0, 0.0, 0.0, 0))) for c in pool] for r in regions]
    prior = [[start.lookup[(c, r)][0] for c in pool] for r in regions]
    fallback = [[start.lookup[(c, r)][1] for c in pool] for r in regions]

    floor_q = start.min_quality

    def key(r: int, c: int) -> tuple[bool, float, float, float, int]:
        """Greedy order (docs/design.md, Fit; maximised): at or above the quality floor first, then the best objective
        (quality alone below the floor), then higher q, then lower cost, then key order."""
        s, w, cost_sum, cost_n = sums[r][c]
        q = posterior(start.prior_weight, prior[r][c], s, w)
        est = cost_sum / cost_n if cost_n else fallback[r][c]
        est = None if est is None else max(est, start.floor)
        above = floor_q is None or q >= floor_q
        return (above, _value(start, q, est) if above else q, q, -(est or 0.0), -c)

    keys = [[key(r, c) for c in range(k_pool)] for r in range(len(regions))]
    greedy = [max(range(k_pool), key=row.__getitem__) for row in keys]
    routed = skipped = explored = 0
    total_q = total_cost = total_utility = 0.0
    for i, r in enumerate(task_region):
        chosen = greedy[r]
        if k_pool > 1 and draws_u[i] < exploration:
            other = int(draws_i[i] * (k_pool - 1))  # uniform over the pool without the greedy choice
            chosen = other if other < chosen else other + 1
            explored += 1
        cell = i * k_pool + chosen
        q = value[cell]
        if q != q:  # noqa: PLR0124 - NaN test (cheapest in this per-task loop): the chosen config did not do this task
            skipped += 1
            continue
        routed += 1
        total_q += q
        c = cost[cell]
        if c == c:  # noqa: PLR0124 - not NaN: the cost is known
            total_cost += c
            if start.lam is not None:
                total_utility += start.lam * q - c
        acc = sums[r][chosen]
        acc[0] += q * weight[cell]
        acc[1] += weight[cell]
        if known[cell]:
            acc[2] += c
            acc[3] += 1
        keys[r][chosen] = key(r, chosen)
        greedy[r] = max(range(k_pool), key=keys[r].__getitem__)
    return ReplayResult(
        exploration=exploration,
        realized_value=_realized(start, routed, total_q, total_cost, total_utility),
        tasks_routed=routed,
        tasks_skipped=skipped,
        explored=explored,
    )


def _outcome_matrix(ordered: pl.DataFrame, outcomes: pl.DataFrame, pool: list[str]) -> list[list[Any]]:
    """Flat task x config lists (row-major, in replay order): value (NaN: not observed), weight, cost_t (NaN:
    unknown), and whether cost_t is a known cost (every attempt priced) that may update the cost estimate."""
    k_pool = len(pool)
    cells = (
        outcomes.filter(pl.col("value").is_not_null())
        .join(ordered.select("task").with_row_index("ti"), on="task")
        .join(pl.DataFrame({"config_key": pool, "ci": list(range(k_pool))}), on="config_key")
        .select(
            (pl.col("ti").cast(pl.Int64) * k_pool + pl.col("ci")).alias("cell"),
            "value",
            "weight",
            pl.col("cost_t").cast(pl.Float64).fill_null(float("nan")).alias("cost_t"),
            ((pl.col("unknown_cost") == 0) & pl.col("cost_t").is_not_null()).alias("known"),
        )
    )
    size = ordered.height * k_pool
    cell = cells["cell"].to_numpy()
    arrays = []
    for column, fill in (("value", np.nan), ("weight", 0.0), ("cost_t", np.nan), ("known", False)):
        out = np.full(size, fill, dtype=bool if column == "known" else float)
        out[cell] = cells[column].to_numpy()
        arrays.append(out.tolist())
    return arrays


def _value(start: ReplayStart, q: float, cost: float | None) -> float:
    """The objective of DESIGN 5 on the posterior (quality when costs are unknown)."""
    if start.objective == "quality" or cost is None:
        return q
    if start.objective == "utility":
        return (start.lam or 0.0) * q - cost
    return q / cost


def _realized(start: ReplayStart, routed: int, total_q: float, total_cost: float, total_utility: float) -> float | None:
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
