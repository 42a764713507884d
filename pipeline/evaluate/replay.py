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


@dataclass(frozen=True)
class Run:
    """One replay path: its exploration, the seed of its draws, and the order of the tasks it routes.

    ``order`` lists positions in the time-ordered tasks (None: every task once, in time order); a moving-block
    bootstrap resample repeats and reorders blocks of consecutive tasks. ``seed`` is an int or a tuple of ints
    (``numpy.random.default_rng`` accepts both); runs with the same seed share their draws.
    """

    exploration: float
    seed: int | tuple[int, ...]
    order: np.ndarray | None = None


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
    """:func:`replay` for several epsilons from the same start (their draws are shared)."""
    return replay_runs(start, tasks, outcomes, [Run(eps, seed) for eps in explorations])


def replay_runs(
    start: ReplayStart, tasks: pl.DataFrame, outcomes: pl.DataFrame, runs: Sequence[Run]
) -> list[ReplayResult]:
    """Every run of ``runs`` from the same start, side by side.

    The loop is over task positions (a replay is sequential by nature), never over ratings or runs: outcomes
    are laid out once as a dense task x config matrix, and each step routes one task in every run at once
    (numpy over runs x configs).
    """
    pool = sorted(start.pool)
    ordered = tasks.select("task", "region", "first_at").sort(["first_at", "task"])
    n_tasks = ordered.height
    if not pool or not runs or n_tasks == 0:
        return [
            ReplayResult(
                exploration=r.exploration,
                realized_value=None,
                tasks_routed=0,
                tasks_skipped=_length(r, n_tasks),
                explored=0,
            )
            for r in runs
        ]
    regions = sorted(set(ordered["region"].to_list()))
    task_region = ordered["region"].replace_strict(regions, list(range(len(regions))), return_dtype=pl.Int64).to_numpy()
    return _run(
        start,
        pool,
        regions,
        task_region,
        _outcome_matrix(ordered, outcomes, pool),
        _initial_state(start.fitted_task_values),
        runs,
    )


def _length(run: Run, n_tasks: int) -> int:
    return n_tasks if run.order is None else len(run.order)


def _run(
    start: ReplayStart,
    pool: list[str],
    regions: list[str],
    task_region: np.ndarray,
    matrix: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    state: dict[tuple[str, str], tuple[float, float, float, int]],
    runs: Sequence[Run],
) -> list[ReplayResult]:
    """Route every run's tasks; each step takes one task position in all runs (of equal length) at once."""
    n_tasks, k_pool = len(task_region), len(pool)
    steps = {_length(r, n_tasks) for r in runs}
    if len(steps) != 1:
        raise ValueError("runs replayed together route the same number of tasks")
    (length,) = steps
    n_runs, g_regions = len(runs), len(regions)
    order = np.stack([np.arange(n_tasks) if r.order is None else np.asarray(r.order, dtype=np.int64) for r in runs])
    eps = np.array([r.exploration for r in runs])
    # One uniform and one index per position, whatever epsilon is: runs that share a seed share their draws.
    draws: dict[object, tuple[np.ndarray, np.ndarray]] = {}
    for r in runs:
        key = r.seed
        if key not in draws:
            rng = np.random.default_rng(r.seed)
            draws[key] = (rng.random(length), rng.random(length))
    draw_u = np.stack([draws[r.seed][0] for r in runs])
    draw_i = np.stack([draws[r.seed][1] for r in runs])
    value, weight, cost, known = matrix
    # Per run, region, config: S, W, the sum and count of known task costs (DESIGN 5 posterior and cost mean).
    init = np.array([[state.get((c, g), (0.0, 0.0, 0.0, 0)) for c in pool] for g in regions], dtype=float)
    sums = np.broadcast_to(init, (n_runs, g_regions, k_pool, 4)).copy()
    prior = np.array([[start.lookup[(c, g)][0] for c in pool] for g in regions], dtype=float)
    fallback = np.array(
        [[np.nan if start.lookup[(c, g)][1] is None else start.lookup[(c, g)][1] for c in pool] for g in regions],
        dtype=float,
    )
    rows = np.arange(n_runs)
    routed = np.zeros(n_runs, dtype=np.int64)
    explored = np.zeros(n_runs, dtype=np.int64)
    total_q = np.zeros(n_runs)
    total_cost = np.zeros(n_runs)
    total_utility = np.zeros(n_runs)
    k = start.prior_weight
    for step in range(length):
        task = order[:, step]
        region = task_region[task]
        acc = sums[rows, region]  # (runs, configs, 4)
        s, w, cost_sum, cost_n = acc[..., 0], acc[..., 1], acc[..., 2], acc[..., 3]
        p = prior[region]
        # q = (k * p + S) / (k + W); q = p when k + W = 0 (DESIGN 5)
        with np.errstate(invalid="ignore", divide="ignore"):
            q = np.where(k + w == 0, p, (k * p + s) / (k + w))
            est = np.where(cost_n > 0, cost_sum / np.maximum(cost_n, 1), fallback[region])
        est = np.where(np.isnan(est), np.nan, np.maximum(est, start.floor))
        # At or above the quality floor first; below it, quality alone (docs/design.md, Fit)
        above = np.ones_like(q, dtype=bool) if start.min_quality is None else q >= start.min_quality
        score = np.where(above, _values(start, q, est), q)
        greedy = _greedy(above, score, q, est)
        chosen = greedy
        if k_pool > 1:
            explore = draw_u[:, step] < eps
            other = (draw_i[:, step] * (k_pool - 1)).astype(np.int64)  # uniform over the pool without the greedy
            chosen = np.where(explore, np.where(other < greedy, other, other + 1), greedy)
            explored += explore
        cell = task * k_pool + chosen
        q_seen = value[cell]
        seen = ~np.isnan(q_seen)  # not NaN: the chosen config did this task (else it is skipped)
        routed += seen
        q_seen = np.where(seen, q_seen, 0.0)
        c_seen = cost[cell]
        priced = seen & ~np.isnan(c_seen)
        c_val = np.where(priced, c_seen, 0.0)
        total_q += q_seen
        total_cost += c_val
        if start.lam is not None:
            total_utility += np.where(priced, start.lam * q_seen - c_val, 0.0)
        w_seen = np.where(seen, weight[cell], 0.0)
        learn = seen & known[cell]
        target = sums[rows, region, chosen]
        target[:, 0] += q_seen * w_seen
        target[:, 1] += w_seen
        target[:, 2] += np.where(learn, c_val, 0.0)
        target[:, 3] += learn
        sums[rows, region, chosen] = target
    return [
        ReplayResult(
            exploration=r.exploration,
            realized_value=_realized(
                start, int(routed[i]), float(total_q[i]), float(total_cost[i]), float(total_utility[i])
            ),
            tasks_routed=int(routed[i]),
            tasks_skipped=length - int(routed[i]),
            explored=int(explored[i]) if k_pool > 1 else 0,
        )
        for i, r in enumerate(runs)
    ]


def _greedy(above: np.ndarray, score: np.ndarray, q: np.ndarray, est: np.ndarray) -> np.ndarray:
    """Per run, the greedy order (docs/design.md, Fit): at or above the quality floor first, then the best score,
    then higher q, then lower cost, then key order."""
    best = above == above.max(axis=1, keepdims=True)
    s_best = np.where(best, score, -np.inf)
    best &= s_best == s_best.max(axis=1, keepdims=True)
    q_best = np.where(best, q, -np.inf)
    best &= q_best == q_best.max(axis=1, keepdims=True)
    cheap = np.where(best, -np.nan_to_num(est, nan=0.0), -np.inf)
    best &= cheap == cheap.max(axis=1, keepdims=True)
    return np.argmax(best, axis=1)  # the first (lowest key) of the remaining ties


def _outcome_matrix(
    ordered: pl.DataFrame, outcomes: pl.DataFrame, pool: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
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
        arrays.append(out)
    value, weight, cost, known = arrays
    return value, weight, cost, known


def _values(start: ReplayStart, q: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """The objective of DESIGN 5 on the posterior (quality where the cost is unknown)."""
    if start.objective == "quality":
        return q
    if start.objective == "utility":
        return np.where(np.isnan(cost), q, (start.lam or 0.0) * q - cost)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isnan(cost), q, q / cost)


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
