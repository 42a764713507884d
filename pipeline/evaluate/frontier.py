"""Cost-quality frontier of the utility objective and RouterBench's AIQ.

docs/design.md, Cost-quality frontier and AIQ.

For each lambda of the grid, the router routes every held-out task among the configs that did it by the
utility objective ``lambda * q(c, r) - cost(c, r)`` (the choice and tie rules of docs/design.md,
Greedy choice and ties; with the fitted (c, r) table) and realizes the task values and costs of its choices:
one (mean cost, mean quality) point per lambda. Beside them: every single config's point and the oracle's, as
the baselines table has them (:mod:`pipeline.evaluate.yardstick`: a single over the eligible tasks it did, with
its coverage and, where the logs carry propensities, its SNIPS estimate; the oracle one config of each task's best
set).

AIQ (Average Improvement in Quality, RouterBench, Hu et al. 2024) of a set of points::

    H(c)  = max { sum_i a_i q_i : sum_i a_i c_i <= c, a in the simplex }   (non-decreasing concave hull;
                                                                           H = 0 below the set's cheapest point)
    AIQ   = 1 / (c_max - c_min) * integral_{c_min}^{c_max} H(c) dc

with ``[c_min, c_max]`` the cost range of the single configurations (the pool's range, the same for the
router and the singles so their AIQs compare). Costs unknown: points carry null costs and AIQ is null.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from ..defaults import lambda_grid
from ..rounding import round_figure
from ..scalars import mean_of
from .metrics import mark_best
from .yardstick import oracle_row, single_rows, snips_singles


def frontier_lambdas(task_values_learn: pl.DataFrame) -> list[float] | None:
    """The utility lambda grid (:func:`pipeline.defaults.lambda_grid`) in units of mean learned cost / mean learned
    quality, over the learned (task, config) rows with a known cost and a value; None without costs. (Kept to 15
    decimals: the frontier only routes by them and reports them rounded.)
    """
    rows = task_values_learn.filter(pl.col("cost_usd").is_not_null() & pl.col("value").is_not_null())
    mean_cost, mean_quality = mean_of(rows["cost_usd"]), mean_of(rows["value"])
    if mean_cost is None or not mean_quality:
        return None
    grid = lambda_grid(mean_cost / mean_quality, decimals=15)
    # A subnormal mean quality can overflow the quotient: no finite grid, no frontier (never an infinite lambda).
    return grid if all(map(math.isfinite, grid)) else None


def route_by_table(members: pl.DataFrame, task_values: pl.DataFrame, lam: float) -> pl.DataFrame:
    """Per task: the config that did it maximizing ``lam * quality(c, r) - cost(c, r)``.

    ``members``: the fitted (c, r) rows (``region`` incl. ``'*'``, ``config_key``, ``quality``,
    ``cost_usd``); a (c, r) absent from its region falls back to the config's ``'*'`` row; a member with
    unknown cost counts 0 (then the objective is quality). Ties: higher quality, lower cost, key order.
    Columns ``task, config_key``.
    """
    return _route(_pool(members, task_values), lam)


def _pool(members: pl.DataFrame, task_values: pl.DataFrame) -> pl.DataFrame:
    """``task, config_key, q, c`` of every routable (task, config): what :func:`route_by_table` ranks (the same
    for every lambda, so the frontier builds it once)."""
    types = task_values.schema
    members = members.filter(
        pl.col("config_key").cast(pl.String).is_in(task_values["config_key"].cast(pl.String).unique().implode())
    )
    region_rows = members.filter(pl.col("region") != "*").select(
        pl.col("region").cast(types["region"]),
        pl.col("config_key").cast(types["config_key"]),
        q="quality",
        c="cost_usd",
    )
    star = members.filter(pl.col("region") == "*").select(
        pl.col("config_key").cast(types["config_key"]), q_star="quality", c_star="cost_usd"
    )
    return (
        task_values.select("task", "region", "config_key")
        .join(region_rows, on=["region", "config_key"], how="left")
        .join(star, on="config_key", how="left")
        .with_columns(q=pl.coalesce("q", "q_star"), c=pl.coalesce("c", "c_star").fill_null(0.0))
        .filter(pl.col("q").is_not_null())
        .select("task", "config_key", "q", "c")
    )


def _route(pool: pl.DataFrame, lam: float) -> pl.DataFrame:
    """Per task the pool row maximizing ``lam * q - c`` (ties: higher q, lower c, key order)."""
    return (
        pool.with_columns(u=lam * pl.col("q") - pl.col("c"))
        .sort(["task", "u", "q", "c", "config_key"], descending=[False, True, True, False, False])
        .group_by("task", maintain_order=True)
        .first()
        .select("task", "config_key")
    )


def _point(frame: pl.DataFrame) -> tuple[float | None, float | None, int]:
    if frame.is_empty():
        return None, None, 0
    cost = mean_of(frame["cost"]) if frame["cost"].null_count() == 0 else None
    return mean_of(frame["value"]), cost, frame.height


def hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Vertices (cost, quality) of the non-decreasing concave hull, by increasing cost.

    Drop every point that a cheaper point matches in quality, then keep the upper hull (monotone chain).
    """
    pts = sorted(set(points), key=lambda p: (p[0], -p[1]))
    rising, best = [], -math.inf
    for c, q in pts:
        if q > best:
            rising.append((c, q))
            best = q
    upper: list[tuple[float, float]] = []
    for p in rising:
        while len(upper) >= 2:
            (c1, q1), (c2, q2) = upper[-2], upper[-1]
            if (q2 - q1) * (p[0] - c1) <= (p[1] - q1) * (c2 - c1):  # upper[-1] under the chord: not a vertex
                upper.pop()
            else:
                break
        upper.append(p)
    return upper


def aiq(points: list[tuple[float, float]], c_min: float, c_max: float) -> float | None:
    """Area under the hull on ``[c_min, c_max]`` divided by ``c_max - c_min`` (module docstring)."""
    if not points:
        return None
    vertices = hull(points)
    cs = np.array([v[0] for v in vertices])
    qs = np.array([v[1] for v in vertices])
    if c_max <= c_min:
        return float(np.interp(c_min, cs, qs)) if c_min >= cs[0] else 0.0
    grid = np.unique(np.concatenate([[c_min, c_max], cs[(cs > c_min) & (cs < c_max)]]))
    # H below the set's cheapest point is 0 (the set cannot work there); add that step's edge.
    if cs[0] > c_min and cs[0] < c_max:
        grid = np.unique(np.concatenate([grid, [np.nextafter(cs[0], -np.inf)]]))
    h = np.where(grid < cs[0], 0.0, np.interp(grid, cs, qs))
    area = float(np.sum((grid[1:] - grid[:-1]) * (h[1:] + h[:-1]) / 2.0))
    return area / (c_max - c_min)


def _with_costs(tv: pl.DataFrame, cost_estimates: dict[str, float] | None) -> pl.DataFrame:
    """``tv`` with ``cost``: the (task, config)'s own cost, else the fitted estimate of its config (never 0)."""
    est = pl.DataFrame(
        {"config_key": list((cost_estimates or {}).keys()), "_est": list((cost_estimates or {}).values())},
        schema={"config_key": pl.String, "_est": pl.Float64},
    ).with_columns(pl.col("config_key").cast(tv.schema["config_key"]))
    return tv.join(est, on="config_key", how="left").with_columns(cost=pl.coalesce("cost_usd", "_est"))


def _router_points(
    tv: pl.DataFrame,
    lambdas: list[float],
    *,
    members: pl.DataFrame | None,
    choose: Callable[[float], pl.DataFrame] | None,
) -> list[dict[str, Any]]:
    """The router's point per lambda: mean quality and cost of its choices on the held-out tasks."""
    pool = _pool(members, tv) if choose is None and members is not None else None
    router = []
    for lam in lambdas:
        if choose is not None:
            chosen = choose(lam)
        elif pool is not None:
            chosen = _route(pool, lam)
        else:
            raise ValueError("frontier_section needs members or choose")
        realized = chosen.select("task", "config_key").join(tv, on=["task", "config_key"], how="inner")
        q, c, n = _point(realized)
        router.append(
            {"lambda": round_figure(lam), "quality": round_figure(q), "cost_usd": round_figure(c), "tasks": n}
        )
    return router


def _partial_note(singles: list[dict[str, Any]], tasks: int, *, snips: bool) -> str | None:
    """What a single's point means when some configurations did only some of the held-out tasks."""
    partial = [s["config"] for s in singles if s["tasks"] < tasks]
    if not partial:
        return None
    return (
        f"{len(partial)} of {len(singles)} configurations did only some of the {tasks} held-out tasks (logged "
        "data): each single's point is its mean over the tasks it did (its coverage says how many), while "
        "the router routes every task among the configs that did it"
        + ("; the SNIPS estimates beside them are what each would do on every task" if snips else "")
    )


def frontier_section(
    task_values_heldout: pl.DataFrame,
    lambdas: list[float] | None,
    *,
    members: pl.DataFrame | None = None,
    choose: Callable[[float], pl.DataFrame] | None = None,
    cost_estimates: dict[str, float] | None = None,
    floor: float = 0.000001,
    decisions: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """The ``frontier`` object of ``stats.json``: ``router`` (one point per lambda), ``singles``,
    ``oracle``, and ``aiq`` for the router and the singles.

    ``task_values_heldout``: the eligible held-out tasks (the one yardstick); ``floor``: the cost floor of the
    best set; ``decisions``: the logged routing decisions, for the singles' SNIPS estimates.

    The router's choice per lambda comes from ``choose(lam) -> frame[task, config_key]`` when given,
    else :func:`route_by_table` over ``members``. A held-out (task, config) cost is its ``cost_usd``;
    when unknown, ``cost_estimates[config]`` (the fitted cost(c, r)) fills it, never 0.
    """
    tv = _with_costs(task_values_heldout.filter(pl.col("value").is_not_null()), cost_estimates)
    cost_known = tv.height > 0 and tv["cost"].null_count() == 0
    best = mark_best(tv, objective="quality_per_dollar", floor=floor, cost="cost")  # as the baselines' best set
    snips = snips_singles(best, decisions, cost_known=cost_known, cost="cost") if decisions is not None else {}
    singles = [
        {
            "config": config,
            "quality": row["mean_quality"],
            "cost_usd": row["mean_cost_usd"],
            "tasks": row["tasks"],
            "coverage": row["coverage"],
            **snips.get(config, {}),
        }
        for config, row in single_rows(best, cost_known=cost_known, cost="cost").items()
    ]
    o = oracle_row(best, cost_known=cost_known, cost="cost")
    oracle = {"quality": o["mean_quality"], "cost_usd": o["mean_cost_usd"], "tasks": o["tasks"]}
    if lambdas is None:
        return {
            "lambdas": None,
            "router": [],
            "singles": singles,
            "oracle": oracle,
            "aiq": {"router": None, "singles": None},
            "reason": "no costs: the utility objective degrades to quality and has no frontier",
        }
    router = _router_points(tv, lambdas, members=members, choose=choose)

    def known(points: list[dict]) -> list[tuple[float, float]]:
        return [(p["cost_usd"], p["quality"]) for p in points if p["cost_usd"] is not None and p["quality"] is not None]

    single_pts, router_pts = known(singles), known(router)
    if not single_pts:
        return {
            "lambdas": [round_figure(x) for x in lambdas],
            "router": router,
            "singles": singles,
            "oracle": oracle,
            "aiq": {"router": None, "singles": None},
            "reason": "no single configuration has known costs",
        }
    c_min, c_max = min(c for c, _ in single_pts), max(c for c, _ in single_pts)
    tasks = tv["task"].n_unique()
    note = _partial_note(singles, tasks, snips=bool(snips))
    return {
        "lambdas": [round_figure(x) for x in lambdas],
        "router": router,
        "singles": singles,
        "oracle": oracle,
        "aiq": {
            "router": round_figure(aiq(router_pts, c_min, c_max)),
            "singles": round_figure(aiq(single_pts, c_min, c_max)),
            "cost_range_usd": [round_figure(c_min), round_figure(c_max)],
        },
        "held_out_tasks": tasks,
        "reason": None,
        "note": note,
    }
