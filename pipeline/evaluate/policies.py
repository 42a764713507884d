"""Every routing policy on the held-out tasks: greedy hit rate, mean quality, mean cost (``stats.json`` ``policies``).

Each eligible held-out task (done by two or more configs, some task value > 0:
docs/design.md, Best per dollar and the hit rate) is routed as if new by the router, greedy (no exploration draw),
with the configs that did it as the pool and the task's region. A hit is a
choice in the task's best set (:func:`pipeline.evaluate.metrics.mark_best` under
the table's objective; quality alone when no cost is known).

Policies that act on failures (``ladder``, ``trace_governed``) run as a
dispatcher would: when the chosen config's gate on the task (its task value
when it has no gate rating) is below the pass threshold (the ladder's, else
0.5), it is added to ``failures`` and the task is routed again, until one
passes or the pool is used up. Quality is the task value of the config it
stopped at; cost is the sum over every config it ran; ``hit`` is whether the
config it stopped at is in the best set (so compare sequential policies by
quality and cost too). As every policy here, they choose only among the
configs observed on the task: a rung not observed on it is skipped. Other
policies run once.

Pass a table fitted on the learned tasks only (with its signals and ladders),
never the published one, which has seen the held-out tasks: :func:`held_out_policies` builds it.

Unknown costs: ``cost_t,c = cost_usd + unknown_cost * cost(c, r)`` with
``cost(c, r)`` the table's row for the task's region (never 0: docs/design.md, Cost).

The loop is over tasks (a few thousand), never over ratings.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

import polars as pl

from ..fit.gate import member_gate
from ..fit.inputs import FitInputs, task_values
from ..fit.learning import costed_targets
from ..fit.model import Shipped, fit_model
from ..fit.signals import member_signals
from ..fit.table_build import build_table
from ..rounding import round_figure
from ..routing.policies import BUILTIN, POLICIES
from ..routing.router import Router
from ..routing.table import Constants, Ladder, RoutingTable
from .metrics import eligible, mark_best
from .split import parts

#: Policies that escalate on a failed gate when evaluated.
SEQUENTIAL = frozenset({"ladder", "trace_governed"})
DEFAULT_PASS_THRESHOLD = 0.5

#: One eligible held-out task: (task, region, pool, {config: (value, cost, in the best set, gate or value)}).
_Task = tuple[str, str, tuple[str, ...], dict[str, tuple[float, float | None, bool, float]]]


def _with_costs(router: Router, values: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """Add ``cost`` = cost_t,c with unknown attempt costs estimated from the table; say whether any cost is known."""
    pairs = values.select("region", "config_key").unique().sort("region", "config_key")
    est = [router.view(r).row(c).cost_usd for r, c in pairs.iter_rows()]
    estimates = pairs.with_columns(pl.Series("_est", est, dtype=pl.Float64))
    unknown = (
        pl.col("unknown_cost") if "unknown_cost" in values.columns else pl.col("cost_usd").is_null().cast(pl.Int64)
    )
    out = (
        values.join(estimates, on=["region", "config_key"], how="left")
        .with_columns(cost=pl.col("cost_usd").fill_null(0.0) + unknown * pl.col("_est"))
        .drop("_est")
    )
    known = out["cost"].null_count() < out.height and any(e is not None for e in est)
    return out, known


def evaluate_policies(
    table_or_router: RoutingTable | Router,
    heldout_task_values: pl.DataFrame,
    *,
    policies: Sequence[str] | None = None,
    pass_threshold: float | None = None,
) -> dict[str, dict[str, Any]]:
    """Per policy ``{hit_rate, hits, n, mean_quality, mean_cost_usd, mean_configs_run}`` on the held-out tasks.

    ``heldout_task_values`` is :func:`pipeline.fit.inputs.task_values` of the held-out tasks. Figures are null
    when there is no eligible task (and ``mean_cost_usd`` when no cost is known).
    """
    router = table_or_router if isinstance(table_or_router, Router) else Router(table_or_router)
    names = list(policies) if policies is not None else list(POLICIES)
    rows = eligible(heldout_task_values)
    if rows.height == 0:
        return {
            p: {
                "hit_rate": None,
                "hits": 0,
                "n": 0,
                "mean_quality": None,
                "mean_cost_usd": None,
                "mean_configs_run": None,
            }
            for p in names
        }
    rows, cost_known = _with_costs(router, rows)
    objective = router.objective if cost_known else "quality"
    best = mark_best(
        rows, objective=objective, floor=router.constants.cost_floor_usd, lam=router.constants.lambda_, cost="cost"
    )
    if "gate" not in best.columns:
        best = best.with_columns(gate=pl.lit(None, pl.Float64))
    best = best.with_columns(passed_on=pl.coalesce("gate", "value")).sort("task", "config_key")
    tasks: list[_Task] = []
    rows_by_task = best.select("task", "region", "config_key", "value", "cost", "best", "passed_on").iter_rows()
    for task, rows_of_task in itertools.groupby(rows_by_task, key=operator.itemgetter(0)):  # rows sorted by task
        group = list(rows_of_task)
        cells = {c: (v, k, b, g) for _t, _r, c, v, k, b, g in group}
        tasks.append((task, group[0][1], tuple(sorted(cells)), cells))
    return {name: _summary(policy_columns(router, name, tasks, pass_threshold), cost_known) for name in names}


def policy_columns(
    router: Router, policy: str, tasks: Sequence[_Task], pass_threshold: float | None
) -> dict[str, list[Any]]:
    """Per task, in task order: ``task``, ``config`` (where it stopped), ``hit`` (in the best set), ``quality``
    (its task value), ``cost`` (summed over every config run), ``ran`` (configs run)."""
    columns: dict[str, list[Any]] = {"task": [], "config": [], "hit": [], "quality": [], "cost": [], "ran": []}
    for task, region, pool, cells in tasks:
        config, cost, ran = _run(router, policy, region, pool, cells, pass_threshold)
        value, _, is_best, _ = cells[config]
        for name, x in zip(columns, (task, config, bool(is_best), value, cost, ran), strict=True):
            columns[name].append(x)
    return columns


def _summary(columns: dict[str, list[Any]], cost_known: bool) -> dict[str, Any]:
    """Means of the per-task columns of one policy. Summed in task order with Python floats (as a running total
    would), so the published figures never depend on a vectorised summation order."""
    n = len(columns["task"])
    hits = sum(columns["hit"])
    return {
        "hit_rate": round_figure(hits / n),
        "hits": hits,
        "n": n,
        "mean_quality": round_figure(sum(columns["quality"]) / n),
        "mean_cost_usd": round_figure(sum(columns["cost"]) / n) if cost_known else None,
        "mean_configs_run": round_figure(sum(columns["ran"]) / n),
    }


def _run(
    router: Router,
    policy: str,
    region: str,
    pool: tuple[str, ...],
    cells: dict[str, tuple[float, float | None, bool, float]],
    pass_threshold: float | None,
) -> tuple[str, float, int]:
    """Route one task; escalate on a failed gate for sequential policies. Returns (final config, cost, configs run)."""
    decision = router.route(region, pool=pool, policy=policy)
    config, cost, ran = decision.config, cells[decision.config][1] or 0.0, 1
    if policy not in SEQUENTIAL:
        return config, cost, ran
    threshold = pass_threshold
    if threshold is None:
        view = router.view(region)
        ladder = view.ladder or router.star.ladder
        threshold = ladder.pass_threshold if ladder is not None and policy == "ladder" else DEFAULT_PASS_THRESHOLD
    failures: list[str] = []
    while cells[config][3] < threshold and len(failures) + 1 < len(pool):
        failures.append(config)
        config = router.route(region, pool=pool, failures=failures, policy=policy).config
        cost += cells[config][1] or 0.0
        ran += 1
    return config, cost, ran


def held_out_policies(
    inputs: FitInputs,
    constants: Constants,
    shipped: Shipped,
    objective: str,
    fraction: float,
    ladders: dict[str, Ladder],
    *,
    seed: int = 0,
) -> dict[str, Any]:
    """The ``policies`` section: every built-in routing policy scored on the held-out tasks.

    The router runs on a table built from the learned tasks only (model, member signals, the evidence gate's
    tests and the ladders the cross-validated rule chose on the learned tasks, all before the cutoff), never on
    the published table, which has seen the held-out tasks. Held-out targets exclude PRM fill-ins, as every
    held-out figure.
    """
    cut = parts(inputs, fraction)
    model = fit_model(cut.learned, constants, shipped, objective)
    table = build_table(
        model,
        constants_source="fitted",
        static=shipped.static,
        source={"version": None},
        fitted_at=cut.learned.newest_at,
        ladders=ladders,
        signals=member_signals(task_values(cut.learned), cut.learned.newest_at),
        gate=member_gate(cut.learned, model, shipped.static, attempts=inputs.attempts, seed=seed),
    )
    figures = evaluate_policies(table, costed_targets(cut.held_out, model), policies=BUILTIN)
    return {
        "protocol": (
            "each eligible held-out task routed as new by a table fitted on the learned tasks only "
            "(the published constants; ladders chosen on the learned tasks), greedy, pool = the configs that "
            "did the task; ladder and trace_governed escalate on a failed gate"
        ),
        "policies": figures,
    }
