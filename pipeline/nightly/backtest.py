"""The typed result of a backtest (``ratings backtest --json``, ``backtest.json``), which a case study's
``stats.json`` carries as its ``backtest`` section (docs/design.md, Backtest, Report). Here, with the stats' other
sections, so that the job and the page read it; :mod:`pipeline.backtest` makes it.

Shape: ``{"runs": [{"policy", "objective", "start", "whole": S, "second_half": S, "nights": [...]}],
"references": {objective: ...}, "about": {...}}``. Each S holds the means over seeds of ``mean_quality``,
``mean_cost_usd``, ``configs_per_task``, ``value``, ``vs_region_best``, ``vs_full_information`` and ``lift``,
with ``p5`` / ``p95``, the 5th and 95th percentiles over seeds of ``vs_region_best``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..defaults import FitMode, Objective

#: Said by every output of a backtest.
SIMULATION_NOTE = (
    "A backtest of a benchmark table is a simulation of deployment, not a deployment: every task was replayed "
    "from a table where every configuration did it, and only the runs the policy chose were revealed."
)

_MODEL = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

Start = Literal["cheapest", "frontier", "shipped"]


class Summary(BaseModel):
    """One loop's figures over a set of tasks, as means over seeds (null where undefined)."""

    model_config = _MODEL

    mean_quality: float | None
    mean_cost_usd: float | None  # null without costs
    configs_per_task: float | None
    value: float | None  # the objective's realized value
    vs_region_best: float | None  # value / the best region-level table's value (reference > 0), else null
    vs_full_information: float | None  # value / the full-information loop's value (> 0), else null
    lift: float | None  # utility only: (value - start) / (region best - start)
    p5: float | None  # 5th percentile over seeds of vs_region_best
    p95: float | None  # 95th percentile over seeds of vs_region_best
    full_information_value: float | None  # the full-information loop's value (mean over seeds)


class Night(Summary):
    night: int  # 0-based
    first_task: int  # 0-based index in task order
    tasks: int


class ColdStart(BaseModel):
    """How long the loop takes to learn (docs/design.md, Backtest, Report): per region, the median over seeds of the
    night (0-based, as ``nights``) from which the loop's value in that region stays within ``threshold`` of the
    region's best config that night; null where at least half the seeds never settle."""

    model_config = _MODEL

    threshold: float
    regions: dict[str, float | None]
    every_region: float | None  # the median over seeds of the latest of the regions' nights
    never: dict[str, int]  # per region: seeds that never settle (their last night is below the threshold)


class Run(BaseModel):
    """One (policy, objective, start) over every seed."""

    model_config = _MODEL

    policy: str
    objective: Objective
    start: Start
    start_config: str
    whole: Summary
    second_half: Summary
    nights: list[Night]
    cold_start: ColdStart | None = None  # (null in a report written before it)


class Reference(BaseModel):
    """A reference on the tasks reported: its config (or configs per region), value, quality and cost."""

    model_config = _MODEL

    config: str | None = None  # a static start, the best single
    configs: dict[str, str] | None = None  # the best region-level table: region -> config
    value: float | None
    mean_quality: float | None
    mean_cost_usd: float | None


class References(BaseModel):
    model_config = _MODEL

    starts: dict[str, Reference]
    best_single: Reference
    region_best: Reference
    oracle: Reference


class NightReferences(References):
    night: int


class ObjectiveReferences(BaseModel):
    """The references of one objective (lambda pinned for utility), on the whole stream, its second half and
    each night."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    objective: Objective  # as asked
    ranked_by: Objective  # quality when the table has no costs
    lambda_: float | None = Field(default=None, alias="lambda")
    lambda_source: str | None = None
    whole: References
    second_half: References
    nights: list[NightReferences]


class StartChoice(BaseModel):
    model_config = _MODEL

    config: str
    why: str


class About(BaseModel):
    """What was replayed and how."""

    model_config = _MODEL

    note: str = SIMULATION_NOTE
    source: str
    tasks: int
    dropped_tasks: int  # tasks without a row of every config
    configs: list[str]
    regions: list[str]
    cost_known: bool
    filled_costs: int  # rows without a cost, costed by their config's mean known cost
    rows_per_pair: str  # "one" or "several" (then each run reveals the next unrevealed row)
    night_size: int
    nights: int
    second_half_first_task: int
    seeds: int
    fit: FitMode
    pass_threshold: float
    max_runs: int
    gate_noise: float
    starts: dict[str, StartChoice]
    policies: list[str]


class BacktestReport(BaseModel):
    model_config = _MODEL

    runs: list[Run]
    references: dict[str, ObjectiveReferences]
    about: About

    def to_json_dict(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)
