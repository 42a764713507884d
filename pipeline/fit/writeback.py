"""Decision writeback and off-policy value estimates (docs/design.md, Decision writeback and off-policy estimates).

Every ``route.decided`` resolves with its task's ``task.closed``: ``done`` is a success (1.0), any other
outcome a failure (0.0). From the resolved decisions: the realized score of each logging policy, and
IPS / SNIPS estimates of what the published (target) policy would have scored, from the logged
propensities. Pure functions over the ``decisions``, ``candidates`` and ``closures`` frames of
:class:`pipeline.fit.context.FitContext` (decisions numbered in ``(at, id)`` order; times in microseconds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from .context import FitContext

_ROUND = 9


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), _ROUND)


def resolve(decisions: pl.DataFrame, closures: pl.DataFrame) -> pl.DataFrame:
    """Each decision with ``reward``: the first ``task.closed`` of its task at or after the decision.

    ``reward = 1.0`` when that outcome is ``done``, else ``0.0``; null (unresolved) when the task has
    no closure at or after the decision. Taking the first closure after the decision (not the task's
    last) resolves a task closed ``escalated``, re-routed and then closed ``done`` correctly: the first
    decision failed, the second succeeded. Sorted by ``(at, id)`` (the decision number).
    """
    # join_asof needs each side sorted by time within ``task`` (checked here by sorting, not by polars).
    left = decisions.sort("at", "decision", nulls_last=False)
    right = closures.select("task", closed_at="at", outcome="outcome").sort("closed_at", "task")
    if right.is_empty():
        out = left.with_columns(closed_at=pl.lit(None, left.schema["at"]), outcome=pl.lit(None, pl.String))
    else:
        right = right.with_columns(pl.col("closed_at").cast(left.schema["at"]))
        out = left.join_asof(
            right, left_on="at", right_on="closed_at", by="task", strategy="forward", check_sortedness=False
        )
    return out.with_columns(
        reward=pl.when(pl.col("outcome").is_null())
        .then(None)
        .when(pl.col("outcome") == "done")
        .then(1.0)
        .otherwise(0.0)
    ).sort("at", "decision", nulls_last=False)


def decision_writeback(decisions: pl.DataFrame, closures: pl.DataFrame) -> list[dict[str, Any]]:
    """Realized score per logging policy: ``decisions, resolved, unresolved, mean_reward`` (mean over resolved)."""
    resolved = resolve(decisions, closures)
    rows = (
        resolved.group_by("policy")
        .agg(
            decisions=pl.len(),
            resolved=pl.col("reward").is_not_null().sum(),
            unresolved=pl.col("reward").is_null().sum(),
            mean_reward=pl.col("reward").mean(),
        )
        .sort("policy")
    )
    return [
        {
            "policy": r["policy"],
            "decisions": int(r["decisions"]),
            "resolved": int(r["resolved"]),
            "unresolved": int(r["unresolved"]),
            "mean_reward": _r(r["mean_reward"]),
        }
        for r in rows.to_dicts()
    ]


def decision_candidates(ctx: FitContext, decisions: pl.DataFrame) -> pl.DataFrame:
    """``task, region, config_key``: the candidate pool of each of ``decisions`` (logged decisions of ``ctx``), one
    row per candidate, in the region of the decision's task.

    Each decision is its own pool, keyed by the decision's number in the ``task`` column (the key
    :meth:`~pipeline.fit.model.FittedModel.choose_frame` groups by): a task routed twice from two different
    pools gets the target's choice among each pool, never among their union. Pass the ``task, chosen`` result to
    :func:`off_policy` as ``target_choice``.
    """
    regions = decisions.select("decision", "task").join(ctx.tasks.select("task", "region"), on="task", how="left")
    return ctx.candidates.join(regions.select("decision", "region"), on="decision", how="inner").select(
        task="decision", region="region", config_key="config"
    )


def off_policy(decisions: pl.DataFrame, closures: pl.DataFrame, target_choice: pl.DataFrame) -> dict[str, Any]:
    """IPS and SNIPS estimates of a deterministic target policy's value from the logged decisions.

    Over the resolved decisions that carry a propensity p_i (logged action a_i, reward r_i), with the
    target's choice pi(i) among decision i's candidates (``target_choice``: columns ``task`` = the decision
    number, as :func:`decision_candidates` keys it, and ``chosen``)::

        w_i   = [a_i == pi(i)] / p_i
        IPS   = sum(w_i * r_i) / n
        SNIPS = sum(w_i * r_i) / sum(w_i)          (null when no logged action matches the target)
        ESS   = (sum w_i)^2 / sum(w_i^2)            (effective sample size; 0 when nothing matches)

    ``n`` counts the decisions used, ``matched`` those whose logged action is the target's choice.
    """
    resolved = resolve(decisions, closures).filter(pl.col("reward").is_not_null() & pl.col("propensity").is_not_null())
    target = target_choice.select(decision=pl.col("task").cast(pl.Int64), target="chosen")
    rows = resolved.join(target, on="decision", how="left").with_columns(
        w=pl.when(pl.col("chosen") == pl.col("target")).then(1.0 / pl.col("propensity")).otherwise(0.0)
    )
    n = rows.height
    if n == 0:
        return {
            "n": 0,
            "matched": 0,
            "ips": None,
            "snips": None,
            "ess": 0.0,
            "reason": "no resolved decision carries a propensity",
        }
    sums = rows.select(
        sw=pl.col("w").sum(),
        swr=(pl.col("w") * pl.col("reward")).sum(),
        sw2=(pl.col("w") ** 2).sum(),
        matched=(pl.col("w") > 0).sum(),
    ).row(0, named=True)
    snips = sums["swr"] / sums["sw"] if sums["sw"] > 0 else None
    ess = sums["sw"] ** 2 / sums["sw2"] if sums["sw2"] > 0 else 0.0
    return {
        "n": n,
        "matched": int(sums["matched"]),
        "ips": _r(sums["swr"] / n),
        "snips": _r(snips),
        "ess": _r(ess),
        "reason": None if sums["matched"] else "no logged action matches the target policy",
    }
