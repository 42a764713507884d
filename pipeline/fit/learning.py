"""The learning stage of a fit: the signals, the evidence gate's tests and the escalation ladders the table
publishes, in one call.

:func:`learning_stage` is what the nightly job calls after the evaluation: it returns the per-member signal
columns, the gate's tests and the ladders for :func:`pipeline.fit.table_build.build_table`, the ``signals``
object of ``stats.json``, and the ladder fit that :func:`pipeline.evaluate.protocol.learning_figures` reports
once on the held-out tasks (with the cost-quality frontier). It follows the evaluation protocol (docs/design.md,
Evaluation) on the parts the context holds: ladders are chosen on the learned part by the cross-validated rule of
:mod:`pipeline.fit.ladders` (on every task when the fit is not evaluated: ``fit-routing --no-evaluate``); the
table publishes exactly those ladders. Their targets never include PRM fill-ins (they are never a held-out target
nor a ladder gate: docs/design.md, Fit), and task costs with unknown attempts take the estimate of the fit of the
part they were chosen on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..defaults import PASS_THRESHOLD
from ..routing.table import Constants, Ladder
from .context import FitContext, Part
from .gate import logged_decisions, member_gate
from .ladders import LadderFit, fit_ladders, ladder_measure, table_ladders
from .model import FittedModel
from .signals import member_signals, relative_advantage, signals_section, win_rates
from .writeback import decision_candidates, decision_writeback, off_policy


class LadderOptions(BaseModel):
    """``--pass-threshold``, ``--ladder-target best-single`` (default) or ``--ladder-budget USD``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pass_threshold: float = Field(default=PASS_THRESHOLD, ge=0.0, le=1.0)
    target: Literal["best-single", "budget"] = "best-single"
    budget_usd: float | None = Field(default=None, gt=0.0)

    @model_validator(mode="after")
    def _budget_needs_target(self) -> LadderOptions:
        if (self.target == "budget") != (self.budget_usd is not None):
            raise ValueError("--ladder-budget USD sets the budget target; it needs a budget and nothing else does")
        return self


@dataclass(frozen=True)
class LearningOutputs:
    member_signals: pl.DataFrame  # region, config_key, relative_advantage, win_rate -> build_table(signals=)
    gate: pl.DataFrame  # the evidence gate's tests of every member          -> build_table(gate=)
    ladders: dict[str, Ladder]  # region -> Ladder                                 -> build_table(ladders=)
    signals: dict[str, Any]  # the ``signals`` object of stats.json
    ladder_fit: LadderFit | None  # None: no ladder fitted, ``ladder_reason`` says why
    ladder_reason: str | None
    learned_model: FittedModel  # the fit of the part the ladders were chosen on: it costs the held-out tasks


def costed_targets(values: pl.DataFrame, model: FittedModel) -> pl.DataFrame:
    """Task values of real ratings with ``cost_usd`` = cost_t,c costed by ``model`` (unknown attempts filled)."""
    costed = model.task_costs(values)
    return costed.with_columns(cost_usd=pl.col("cost_t"), unknown_cost=pl.lit(0, pl.Int64)).drop("cost_t")


def with_after(values: pl.DataFrame, decisions: pl.DataFrame | None, pass_threshold: float) -> pl.DataFrame:
    """``values`` (task values) with ``after``, the configs that had failed on the task before each outcome, as the
    ladders read it (:func:`pipeline.fit.ladder_search.task_matrix`): the ``after`` of the first decision that chose
    the config on the task (``decisions``: :func:`pipeline.fit.gate.logged_decisions`); else, for an outcome the
    aggregation marks ``escalated`` (run after another config's failed attempt), the other configs on the task whose
    gate is below ``pass_threshold`` (null, left out, when there is none); else empty: a first run."""
    key = values.with_columns(_task=pl.col("task").cast(pl.Int64), _key=pl.col("config_key").cast(pl.String))
    failed = key.filter(pl.col("gate") < pass_threshold).group_by("_task").agg(_failed=pl.col("_key").sort())
    key = key.join(failed, on="_task", how="left").with_columns(
        _failed=pl.col("_failed").list.set_difference(pl.concat_list("_key")).list.sort()
    )
    if decisions is not None and decisions.height:
        logged = (
            decisions.sort("at", "id")
            .group_by("task", "chosen", maintain_order=True)
            .first()
            .select(_task="task", _key="chosen", _logged=pl.col("after_failed").fill_null([]))
        )
        key = key.join(logged, on=["_task", "_key"], how="left")
    else:
        key = key.with_columns(_logged=pl.lit(None, pl.List(pl.String)))
    escalated = pl.col("escalated").fill_null(False)
    by_timing = pl.when(pl.col("_failed").list.len() > 0).then(pl.col("_failed"))
    after = (
        pl.when(pl.col("_logged").list.len() > 0)
        .then(pl.col("_logged"))
        .when(escalated)
        .then(by_timing)
        .otherwise(pl.lit([], pl.List(pl.String)))
    )
    return key.with_columns(after=after).drop("_task", "_key", "_failed", "_logged")


def learning_stage(
    ctx: FitContext,
    published: FittedModel,
    *,
    constants: Constants,
    seed: int = 0,
    ladder: LadderOptions | None = None,
    writeback: bool = True,
    evaluated: bool = True,
) -> LearningOutputs:
    """Signals and the evidence gate's tests on all tasks (as the published table), ladders chosen on the learned
    part (every task when not ``evaluated``) by the cross-validated rule of :mod:`pipeline.fit.ladders`, aiming at
    that fit's best single configuration.

    ``published`` is the model the table publishes (refit on all tasks with ``constants``); its greedy choice is
    the target policy of the off-policy estimates. ``writeback`` False: the logged decisions are ignored.
    """
    ladder = ladder or LadderOptions()
    values = ctx.values(Part.FULL)
    decisions = ctx.decisions if writeback else ctx.decisions.clear()
    candidates = decision_candidates(ctx, decisions)
    target = (
        published.choose_frame(candidates)
        if candidates.height
        else pl.DataFrame(schema={"task": pl.Int64, "chosen": ctx.config_dtype})
    )
    newest = ctx.newest_of(Part.FULL)
    advantage = relative_advantage(values, newest)
    wins = win_rates(values)
    signals = signals_section(
        ctx.counts,
        task_values=values,
        newest_at=newest,
        writeback=decision_writeback(decisions, ctx.closures),
        off_policy=off_policy(decisions, ctx.closures, target),
        advantage=advantage,
        wins=wins,
    )
    part = Part.LEARNED if evaluated else Part.FULL
    learned_model = ctx.model(part, constants, published.objective) if evaluated else published
    learned_tv = with_after(
        costed_targets(ctx.values(part, real=True), learned_model),
        logged_decisions(ctx, part) if writeback else None,
        ladder.pass_threshold,
    )
    fit: LadderFit | None = None
    reason: str | None = None
    if not learned_tv.height:
        reason = "no learned task has a rating"
    elif ladder.target == "budget" and not learned_model.cost_known:
        reason = "the budget target needs costs, and this store has none"
    else:
        fit = fit_ladders(
            learned_tv,
            target=ladder.target,
            budget_usd=ladder.budget_usd,
            pass_threshold=ladder.pass_threshold,
            measure=ladder_measure(learned_model.effective_objective, learned_model.constants.lambda_),
        )
    return LearningOutputs(
        member_signals=member_signals(values, newest, advantage=advantage, wins=wins),
        gate=member_gate(ctx, Part.FULL, published, seed=seed, writeback=writeback),
        ladders=table_ladders(fit) if fit is not None else {},
        signals=signals,
        ladder_fit=fit,
        ladder_reason=reason,
        learned_model=learned_model,
    )
