"""The learning stage of a fit: signals, escalation ladders and the cost-quality frontier, in one call.

:func:`learning_stage` is what ``run_fit`` calls after the evaluation: it returns the per-member signal
columns and the ladders for :func:`pipeline.fit.table_build.build_table`, and the ``signals``,
``ladders`` and ``frontier`` objects of ``stats.json``. It follows DESIGN 6's protocol: ladders are
searched on the inner learned part, chosen on validation, and reported once on the held-out tasks; the
table publishes exactly those ladders (the ones the stats prove). Held-out and validation targets never
include PRM fill-ins (they are never a held-out target nor a ladder gate, DESIGN 5), and task costs
with unknown attempts take the estimate of the model fitted on the part before them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..routing.table import Constants, Ladder
from .frontier import frontier_section, lambda_grid
from .inputs import FitInputs, task_values
from .ladders import DEFAULT_PASS_THRESHOLD, fit_ladders, ladders_section, table_ladders
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
    ladders: dict[str, Ladder]  # region -> Ladder                                 -> build_table(ladders=)
    stats: dict[str, Any]  # {"signals", "ladders", "frontier"}              -> Stats(**stats)


def _targets(part: FitInputs, model: FittedModel) -> pl.DataFrame:
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
    fraction: float,
    ladder: LadderOptions | None = None,
) -> LearningOutputs:
    """Signals on all tasks (as the published table), ladders and frontier by the held-out protocol.

    ``published`` is the model the table publishes (refit on all tasks with ``constants``); its greedy
    choice is the target policy of the off-policy estimates. ``fraction`` is the fit's split.
    """
    from .evaluate import parts

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

    _outer, learned, held, _inner, inner_learned, validation = parts(inputs, fraction)
    inner_model = fit_model(inner_learned, constants, shipped, objective)
    learned_model = fit_model(learned, constants, shipped, objective)
    learn_tv = _targets(inner_learned, inner_model)
    val_tv = _targets(validation, inner_model)
    held_tv = _targets(held, learned_model)
    stats: dict[str, Any] = {"signals": signals}
    table: dict[str, Ladder] = {}
    if learn_tv.height and val_tv.height:
        budget_ok = ladder.target != "budget" or learned_model.cost_known
        if budget_ok:
            fit = fit_ladders(
                learn_tv,
                val_tv,
                target=ladder.target,
                budget_usd=ladder.budget_usd,
                pass_threshold=ladder.pass_threshold,
            )
            stats["ladders"] = ladders_section(fit, held_tv)
            table = table_ladders(fit)
        else:
            stats["ladders"] = {
                "summary": None,
                "regions": {},
                "reason": "the budget target needs costs, and this store has none",
            }
    else:
        stats["ladders"] = {"summary": None, "regions": {}, "reason": "too few tasks to split for validation"}
    learned_tv = _targets(learned, learned_model)
    stats["frontier"] = frontier_section(
        held_tv, lambda_grid(learned_tv) if learned_model.cost_known else None, members=learned_model.members
    )
    return LearningOutputs(
        member_signals=member_signals(values, inputs.newest_at, advantage=advantage, wins=wins),
        ladders=table,
        stats=stats,
    )
