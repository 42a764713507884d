"""How a policy with exploration would have done, routing tasks one by one (docs/design.md, Sequential replay).

Tasks are routed in time order among the pool the router knows (the configs of
the fit it starts from). Only the chosen config's outcome is revealed: when the
chosen config did the task its task value and cost are scored and folded into
the posterior of (config, region) before the next task, so exploration can pay
off later; when it did not, the task is skipped and counted (nothing is known
of an outcome that was never observed).

Posterior: ``q(c, r) = (k * p(c, r) + S) / (k + W)`` with ``S``, ``W`` the sums
of ``w * s`` and ``w`` (docs/design.md, Quality); a revealed task adds ``value * weight`` and
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
    exploration_mode: str = "epsilon"
    realized_value: float | None
    tasks_routed: int
    tasks_skipped: int
    explored: int


@dataclass(frozen=True)
class ReplayStart:
    """What a replay starts from: the fit's sums, prior and cost per (c, r)."""

    state: dict[tuple[str, str], tuple[float, float, float, int]]  # (c, r) -> S, W, sum and count of known costs
    pool: Sequence[str]  # the configs the router knows
    lookup: dict[tuple[str, str], tuple[float, float | None]]  # (c, r) -> (p(c, r), cost(c, r) of the fit)
    prior_weight: float
    objective: str  # the effective objective (quality when no cost is known)
    floor: float
    lam: float | None = None
    min_quality: float | None = None  # the quality floor of the greedy order (FittedModel's greedy_order)


def start_from(model: Any, regions: Sequence[str]) -> ReplayStart:
    """A replay starting from ``model`` (a :class:`pipeline.fit.model.FittedModel`) for tasks of ``regions``.

    The starting sums per (c, r) are the model's: S = sum(w*s), W = sum(w), and the sum and count of the known task
    costs (a task cost is known when every attempt of c on t has a cost, as in the fit)."""
    pool = [str(c) for c in model.members.filter(pl.col("region") == "*")["config_key"].to_list()]
    pairs = model.keys([c for c in pool for _ in regions], [r for _ in pool for r in regions])
    rows = model.lookup(pairs).select("config_key", "region", "prior", "cost_usd").iter_rows()
    c = model.constants
    if model.effective_objective == "utility" and c.lambda_ is None:
        raise ValueError("the utility objective needs lambda: a replay has no default")
    sums = model.pairs.filter(pl.col("region") != "*").select(
        "config_key", "region", "wscore", "weight", "cost_sum", "cost_n"
    )
    return ReplayStart(
        state={(k, r): (s, w, cs, int(cn)) for k, r, s, w, cs, cn in sums.iter_rows()},
        pool=pool,
        lookup={(k, r): (p, cost) for k, r, p, cost in rows},
        prior_weight=float(c.prior_weight),
        objective=model.effective_objective,
        floor=float(c.cost_floor_usd),
        lam=c.lambda_,
        min_quality=c.min_quality,
    )


def posterior(k: float, p: float, s: float, w: float) -> float:
    """``q = (k * p + S) / (k + W)``; ``q = p`` when ``k + W = 0`` (docs/design.md, Quality)."""
    return p if k + w == 0 else (k * p + s) / (k + w)


@dataclass(frozen=True)
class ReplayRun:
    """One replay path: its exploration, the seed of its draws, and the order of the tasks it routes.

    ``order`` lists positions in the time-ordered tasks (None: every task once, in time order); a moving-block
    bootstrap resample repeats and reorders blocks of consecutive tasks. ``seed`` is an int or a tuple of ints
    (``numpy.random.default_rng`` accepts both); runs with the same seed share their draws.
    """

    exploration: float
    seed: int | tuple[int, ...]
    order: np.ndarray | None = None
    mode: str = "epsilon"  # how it explores: a uniformly chosen other member, or a Thompson draw ("thompson")


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
    return replay_runs(start, tasks, outcomes, [ReplayRun(eps, seed) for eps in explorations])


def replay_runs(
    start: ReplayStart, tasks: pl.DataFrame, outcomes: pl.DataFrame, runs: Sequence[ReplayRun]
) -> list[ReplayResult]:
    """Every run of ``runs`` from the same start, side by side.

    The loop is over task positions (a replay is sequential by nature), never over ratings: outcomes are laid
    out once as a dense task x config matrix, and each run routes its tasks in the compiled loop of
    :mod:`pipeline.evaluate.replay_kernel` (runs in parallel; no runs x tasks matrix is ever made).
    """
    pool = sorted(start.pool)
    ordered = tasks.select("task", "region", "first_at").sort(["first_at", "task"])
    n_tasks = ordered.height
    if not pool or not runs or n_tasks == 0:
        return [
            ReplayResult(
                exploration=r.exploration,
                exploration_mode=r.mode,
                realized_value=None,
                tasks_routed=0,
                tasks_skipped=_length(r, n_tasks),
                explored=0,
            )
            for r in runs
        ]
    names = ordered["region"].cast(pl.String)
    regions = sorted(set(names.to_list()))
    task_region = names.replace_strict(regions, list(range(len(regions))), return_dtype=pl.Int64).to_numpy()
    return _run(
        start,
        pool,
        regions,
        task_region,
        _outcome_matrix(ordered, outcomes, pool),
        start.state,
        runs,
    )


def _length(run: ReplayRun, n_tasks: int) -> int:
    return n_tasks if run.order is None else len(run.order)


def _run(
    start: ReplayStart,
    pool: list[str],
    regions: list[str],
    task_region: np.ndarray,
    matrix: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    state: dict[tuple[str, str], tuple[float, float, float, int]],
    runs: Sequence[ReplayRun],
) -> list[ReplayResult]:
    """Route every run's tasks (:mod:`pipeline.evaluate.replay_kernel`), the runs that share an order together."""
    from .replay_kernel import Outcomes, Policy, route_runs

    n_tasks = len(task_region)
    steps = {_length(r, n_tasks) for r in runs}
    if len(steps) != 1:
        raise ValueError("runs replayed together route the same number of tasks")
    (length,) = steps
    # One uniform and one index per position, whatever epsilon is, then (when a run draws the Thompson way) one
    # standard normal per position and config: runs that share a seed share their draws.
    seeds = list(dict.fromkeys(r.seed for r in runs))
    thompson = np.array([r.mode == "thompson" for r in runs], dtype=np.bool_)
    shape = (length, len(pool)) if thompson.any() else (1, 1)
    draw_u, draw_i = np.empty((len(seeds), length)), np.empty((len(seeds), length))
    draw_z = np.zeros((len(seeds), *shape))
    for row, seed in enumerate(seeds):
        rng = np.random.default_rng(seed)
        draw_u[row], draw_i[row] = rng.random(length), rng.random(length)
        if thompson.any():
            draw_z[row] = rng.standard_normal(shape)
    draw_of_run = np.array([seeds.index(r.seed) for r in runs], dtype=np.int64)
    eps = np.array([r.exploration for r in runs], dtype=np.float64)
    # Per region and config: S, W, the sum and count of known task costs (posterior and cost mean: docs/design.md, Fit).
    init = np.array([[state.get((c, g), (0.0, 0.0, 0.0, 0)) for c in pool] for g in regions], dtype=float)
    policy = Policy(
        prior=np.array([[start.lookup[(c, g)][0] for c in pool] for g in regions], dtype=float),
        fallback=np.array(
            [[np.nan if start.lookup[(c, g)][1] is None else start.lookup[(c, g)][1] for c in pool] for g in regions],
            dtype=float,
        ),
        prior_weight=start.prior_weight,
        floor=start.floor,
        objective=start.objective,
        lam=start.lam,
        min_quality=start.min_quality,
    )
    outcomes = Outcomes(*matrix, task_region=task_region)
    routed, explored = np.zeros(len(runs), dtype=np.int64), np.zeros(len(runs), dtype=np.int64)
    total_q, total_cost, total_utility = np.zeros(len(runs)), np.zeros(len(runs)), np.zeros(len(runs))
    by_order: dict[int, list[int]] = {}
    for i, r in enumerate(runs):
        by_order.setdefault(-1 if r.order is None else id(r.order), []).append(i)
    for members in by_order.values():
        idx = np.array(members, dtype=np.int64)
        totals = route_runs(
            policy, outcomes, init, runs[members[0]].order, (draw_u, draw_i, draw_z), draw_of_run[idx], eps[idx],
            thompson[idx],
        )  # fmt: skip
        routed[idx], explored[idx] = totals.routed, totals.explored
        total_q[idx], total_cost[idx], total_utility[idx] = totals.total_q, totals.total_cost, totals.total_utility
    return [
        ReplayResult(
            exploration=r.exploration,
            exploration_mode=r.mode,
            realized_value=_realized(
                start, int(routed[i]), float(total_q[i]), float(total_cost[i]), float(total_utility[i])
            ),
            tasks_routed=int(routed[i]),
            tasks_skipped=length - int(routed[i]),
            explored=int(explored[i]),
        )
        for i, r in enumerate(runs)
    ]


def _outcome_matrix(
    ordered: pl.DataFrame, outcomes: pl.DataFrame, pool: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flat task x config lists (row-major, in replay order): value (NaN: not observed), weight, cost_t (NaN:
    unknown), and whether cost_t is a known cost (every attempt priced) that may update the cost estimate."""
    k_pool = len(pool)
    cells = (
        outcomes.filter(pl.col("value").is_not_null())
        .join(ordered.select("task").with_row_index("ti"), on="task")
        .join(
            pl.DataFrame({"config_key": pool, "ci": list(range(k_pool))}).with_columns(
                pl.col("config_key").cast(outcomes.schema["config_key"])
            ),
            on="config_key",
        )
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


def _realized(start: ReplayStart, routed: int, total_q: float, total_cost: float, total_utility: float) -> float | None:
    if routed == 0:
        return None
    if start.objective == "quality_per_dollar":
        return total_q / max(total_cost, start.floor)
    if start.objective == "utility":
        return total_utility / routed
    return total_q / routed
