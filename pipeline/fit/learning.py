"""The learning stage of a fit: the signals, the evidence gate's tests and the escalation ladders the table
publishes, in one call.

:func:`learning_stage` is what the nightly job calls after the evaluation: it returns the per-member signal
columns, the gate's tests and the ladders for :func:`pipeline.fit.table_build.build_table`, the ``signals``
object of ``stats.json``, and the ladder fit that :func:`pipeline.evaluate.protocol.learning_figures` reports
once on the held-out tasks (with the cost-quality frontier). It follows the evaluation protocol (docs/design.md,
Evaluation) on the parts the caller cut: ladders are chosen on the learned part by the cross-validated rule of
:mod:`pipeline.fit.ladders`; the table publishes exactly those ladders (the ones the stats prove). Their targets
never include PRM fill-ins (they are never a held-out target nor a ladder gate: docs/design.md, Fit), and task
costs with unknown attempts take the estimate of the learned fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..routing.table import Constants, Ladder
from .gate import member_gate
from .inputs import FitInputs, task_values
from .ladders import DEFAULT_PASS_THRESHOLD, LadderFit, fit_ladders, table_ladders
from .model import FittedModel, Shipped, fit_model
from .signals import member_signals, relative_advantage, signals_section, win_rates
from .writeback import decision_candidates, decision_writeback, off_policy


class LadderOptions(BaseModel):
    """``--pass-threshold``, ``--ladder-target best-single`` (default) or ``--ladder-budget USD``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pass_threshold: float = Field(default=DEFAULT_PASS_THRESHOLD, ge=0.0, le=1.0)
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
    learned_model: FittedModel  # the fit of the learned part: it costs the held-out tasks


def costed_targets(part: FitInputs, model: FittedModel) -> pl.DataFrame:
    """Task values without PRM fill-ins, ``cost_usd`` = cost_t,c costed by ``model`` (unknown attempts filled)."""
    values = model.task_costs(task_values(part, real=True))
    return values.with_columns(cost_usd=pl.col("cost_t"), unknown_cost=pl.lit(0, pl.Int64)).drop("cost_t")


def learning_stage(
    inputs: FitInputs,
    published: FittedModel,
    *,
    constants: Constants,
    shipped: Shipped,
    objective: str,
    learned: FitInputs,
    seed: int = 0,
    ladder: LadderOptions | None = None,
) -> LearningOutputs:
    """Signals and the evidence gate's tests on all tasks (as the published table), ladders chosen on the
    ``learned`` part of the fit's split (:func:`pipeline.evaluate.split.parts`) by the cross-validated rule of
    :mod:`pipeline.fit.ladders`, aiming at the learned fit's best single configuration.

    ``published`` is the model the table publishes (refit on all tasks with ``constants``); its greedy
    choice is the target policy of the off-policy estimates.
    """
    ladder = ladder or LadderOptions()
    values = task_values(inputs)
    decisions, closures = inputs.decisions, inputs.closures
    target = (
        published.choose_frame(decision_candidates(decisions, ordered=False))
        if decisions.height
        else pl.DataFrame(schema={"task": pl.String, "chosen": pl.String})
    )
    advantage = relative_advantage(values, inputs.newest_at)
    wins = win_rates(values, inputs.attempts)
    signals = signals_section(
        task_values=values,
        ratings=inputs.ratings,
        attempts=inputs.attempts,
        newest_at=inputs.newest_at,
        writeback=decision_writeback(decisions, closures),
        off_policy=off_policy(decisions, closures, target),
        advantage=advantage,
        wins=wins,
    )

    learned_model = fit_model(learned, constants, shipped, objective)
    learned_tv = costed_targets(learned, learned_model)
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
            best_single=learned_model.highest_quality(),
        )
    return LearningOutputs(
        member_signals=member_signals(values, inputs.newest_at, advantage=advantage, wins=wins),
        gate=member_gate(inputs, published, shipped.static, attempts=inputs.attempts, seed=seed),
        ladders=table_ladders(fit) if fit is not None else {},
        signals=signals,
        ladder_fit=fit,
        ladder_reason=reason,
        learned_model=learned_model,
    )
