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

from collections.abc import Sequence
from typing import Any

import polars as pl

from ..defaults import PASS_THRESHOLD
from ..fit.context import FitContext, Part
from ..fit.gate import member_gate
from ..fit.learning import costed_targets
from ..fit.signals import member_signals
from ..fit.table_build import build_table
from ..rounding import round_figure
from ..routing.policies import BUILTIN, ESCALATES, POLICIES
from ..routing.router import Router
from ..routing.table import Constants, Ladder, RoutingTable
from .metrics import eligible, mark_best


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

    ``heldout_task_values`` is :meth:`pipeline.fit.context.FitContext.values` of the held-out tasks. Figures are null
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
    return {name: _summary(policy_columns(router, name, best, pass_threshold), cost_known) for name in names}


def policy_columns(router: Router, policy: str, best: pl.DataFrame, pass_threshold: float | None) -> pl.DataFrame:
    """Per task, in task order: ``task``, ``config`` (where it stopped), ``hit`` (in the best set), ``quality``
    (its task value), ``cost`` (summed over every config run, in the order run), ``ran`` (configs run).

    ``best``: the eligible rows with ``value, cost, best, passed_on``, by (task, config). A policy's choices
    depend on a task only through its region, its pool and (for those that escalate) which pool members pass
    their gate, so each such signature is routed once (:func:`_route_signature`) and the tasks take its run."""
    threshold = pl.lit(pass_threshold if pass_threshold is not None else PASS_THRESHOLD)
    if policy == "ladder" and pass_threshold is None:
        regions = best["region"].cast(pl.String).unique().to_list()
        marks = {r: _ladder_threshold(router, r) for r in regions}
        threshold = pl.col("region").cast(pl.String).replace_strict(marks, return_dtype=pl.Float64)
    signed = best.with_columns(
        key=pl.col("config_key").cast(pl.String),
        bit=pl.when(pl.col("passed_on") >= threshold).then(pl.lit("1")).otherwise(pl.lit("0")),
    )
    tasks = signed.group_by("task", maintain_order=True).agg(
        region=pl.col("region").first().cast(pl.String),
        pool=pl.col("key").str.join("|"),
        bits=pl.col("bit").str.join("") if policy in ESCALATES else pl.lit(""),
    )
    signatures = tasks.select("region", "pool", "bits").unique(maintain_order=True)
    runs = [_route_signature(router, policy, *row) for row in signatures.iter_rows()]
    signatures = signatures.with_columns(run=pl.Series(runs, dtype=pl.List(pl.String)))
    per_task = tasks.join(signatures, on=["region", "pool", "bits"], how="left", maintain_order="left")
    steps = (
        per_task.select("task", "run")
        .with_columns(step=pl.int_ranges(pl.col("run").list.len()))
        .explode("run", "step")
        .join(
            signed.select("task", run="key", cost=pl.col("cost").fill_null(0.0), value="value", hit="best"),
            on=["task", "run"],
            how="left",
            maintain_order="left",
        )
    )
    width = int(steps["step"].to_numpy().max(initial=0)) + 1
    wide = steps.pivot(on="step", index="task", values="cost", maintain_order=True)
    total = pl.col("0")
    for k in range(1, width):  # the costs added in the order the configs ran, as a running total would
        total = total + pl.col(str(k)).fill_null(0.0)
    last = steps.group_by("task", maintain_order=True).last()
    return last.select("task", config="run", hit="hit", quality="value", ran=pl.col("step") + 1).with_columns(
        cost=wide.select(cost=total)["cost"]
    )


def _ladder_threshold(router: Router, region: str) -> float:
    """The pass threshold ``ladder`` escalates on in ``region``: its ladder's, else the default."""
    view = router.view(region)
    ladder = view.ladder or router.star.ladder
    return ladder.pass_threshold if ladder is not None else PASS_THRESHOLD


def _route_signature(router: Router, policy: str, region: str, pool: str, bits: str) -> list[str]:
    """The configs a policy runs for a task of ``region`` whose pool is ``pool`` (keys joined by ``|``): one, or
    for an escalating policy every config it ran until one passed (``bits``: pass marks in pool order) or the
    pool was used up."""
    members = tuple(pool.split("|"))
    config = router.route(region, pool=members, policy=policy).config
    ran = [config]
    if policy not in ESCALATES:
        return ran
    passes = dict(zip(members, bits, strict=True))
    while passes[config] != "1" and len(ran) < len(members):
        config = router.route(region, pool=members, failures=ran, policy=policy).config
        ran.append(config)
    return ran


def _summary(columns: pl.DataFrame, cost_known: bool) -> dict[str, Any]:
    """Means of the per-task columns of one policy. Summed in task order with Python floats (as a running total
    would), so the published figures never depend on a vectorised summation order."""
    n = columns.height
    hits = int(columns["hit"].sum())
    return {
        "hit_rate": round_figure(hits / n),
        "hits": hits,
        "n": n,
        "mean_quality": round_figure(sum(columns["quality"].to_list()) / n),
        "mean_cost_usd": round_figure(sum(columns["cost"].to_list()) / n) if cost_known else None,
        "mean_configs_run": round_figure(sum(columns["ran"].to_list()) / n),
    }


def held_out_policies(
    ctx: FitContext, constants: Constants, objective: str, ladders: dict[str, Ladder], *, seed: int = 0
) -> dict[str, Any]:
    """The ``policies`` section: every built-in routing policy scored on the held-out tasks.

    The router runs on a table built from the learned tasks only (model, member signals, the evidence gate's
    tests and the ladders the cross-validated rule chose on the learned tasks, all before the cutoff), never on
    the published table, which has seen the held-out tasks. Held-out targets exclude PRM fill-ins, as every
    held-out figure.
    """
    model = ctx.model(Part.LEARNED, constants, objective)
    table = build_table(
        model,
        constants_source="fitted",
        static=ctx.shipped.static,
        source={"version": None},
        fitted_at=ctx.newest_of(Part.LEARNED),
        ladders=ladders,
        signals=member_signals(ctx.values(Part.LEARNED), ctx.newest_of(Part.LEARNED)),
        gate=member_gate(ctx, Part.LEARNED, model, seed=seed),
    )
    figures = evaluate_policies(table, costed_targets(ctx.values(Part.HELD_OUT, real=True), model), policies=BUILTIN)
    return {
        "protocol": (
            "each eligible held-out task routed as new by a table fitted on the learned tasks only "
            "(the published constants; ladders chosen on the learned tasks), greedy, pool = the configs that "
            "did the task; ladder and trace_governed escalate on a failed gate"
        ),
        "policies": figures,
    }
