"""The sections of ``stats.json`` (docs/design.md, Case studies), one pydantic model each: what the job writes and
what the case study and ``ratings compare`` read, by attribute.

Each model names every key its section holds and a stats file writes each of them, null or not; the few keys a
section holds only in some fits (the shipped side's expected hit rate, a single configuration's coverage, a ladder
rule's kappas) are listed in the model's ``written_if_given`` and written only where the stage gave them, so the
same figures give the same bytes. A new section (a backtest's) is one more model here and one more optional
field of :class:`pipeline.nightly.stats.Stats`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from ..evaluate.verdict import Recommendation
from ..fit.kappa import KappaRow
from ..routing.table import ConstantOrigin

Interval = tuple[float, float] | None


class Section(BaseModel):
    """A part of ``stats.json``: frozen, every key named; those in ``written_if_given`` are written only where set."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, populate_by_name=True)

    written_if_given: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _written(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        for name in self.written_if_given - self.model_fields_set:
            field = type(self).model_fields[name]
            data.pop(field.alias if info.by_alias and field.alias else name, None)
        return data


# ---------------------------------------------------------------------------------------------------- routing
class HitRate(Section):
    """A greedy hit rate on the eligible held-out tasks, with its Wilson interval."""

    hit_rate: float | None
    hits: int
    n: int
    ci95: Interval
    expected_hit_rate_with_exploration: float | None = None  # the shipped constants' only

    written_if_given = frozenset({"expected_hit_rate_with_exploration"})


class Difference(Section):
    value: float | None
    ci95: Interval


class Pair(Section):
    """A figure of the shipped and of the fitted constants (on validation)."""

    shipped: float | None
    fitted: float | None


class ExplorationSide(Section):
    """One arm (how it explores and how much) replayed on the held-out tasks, each figure the mean over the replay
    seeds."""

    exploration: float
    exploration_mode: Literal["epsilon", "thompson"] = "epsilon"  # a stats file before modes were replayed: epsilon
    realized_value: float | None
    tasks_routed: float | None
    tasks_skipped: float | None
    explored: float | None


class ExplorationMethod(Section):
    """How the exploration verdict's interval was made (docs/design.md, Verdicts)."""

    seeds: int
    bootstrap_seeds: int
    resamples: int
    block_length: int | None
    tasks: int
    dropped_resamples: int
    resample_tasks: int | None = None  # held-out tasks a resample replays when it replays fewer than all

    written_if_given = frozenset({"resample_tasks"})


class LoggedSide(Section):
    """A target policy's off-policy figures on the logged held-out decisions (docs/design.md,
    Verdicts on logged data)."""

    snips: float | None
    dr: float | None
    effective_samples: float
    matched: int  # logged tasks whose action the target could take


class LoggedVerdict(Section):
    """Fitted against shipped on the logged held-out decisions: SNIPS decides, the doubly robust estimate beside it,
    each difference with its paired bootstrap 95% interval over tasks."""

    shipped: LoggedSide
    fitted: LoggedSide
    tasks: int
    snips: Difference
    dr: Difference
    dropped_resamples: int
    weighted: bool  # some action carries a logged propensity (else the estimate is unweighted)
    propensity_clip: float
    decisions: int  # tasks whose action a logged decision chose
    escalations: int  # runs left out: seen only after another config failed
    validation: Pair  # the same estimate on the logged validation decisions (or the values that chose the arm)
    recommendation: Recommendation
    reason: str


class ExplorationVerdict(Section):
    """The exploration family's verdict: held-out replay of the fitted against the shipped arm (mode and share),
    with the priors that are published; on logged data (no eligible held-out task) the logged decisions decide."""

    shipped: ExplorationSide
    fitted: ExplorationSide
    difference: Difference
    recommendation: Recommendation
    reason: str
    validation: Pair  # the validation values that chose the fitted arm
    method: ExplorationMethod
    decided_by: Literal["replay", "logged"] = "replay"  # (the defaults read a stats file written before them)
    logged: LoggedVerdict | None = None


class Published(Section):
    """The published combination of constants on the held-out tasks."""

    constants_source: Literal["fitted", "shipped", "mixed"]
    provenance: dict[str, ConstantOrigin]
    hit_rate: float | None
    hits: int
    n: int
    ci95: Interval
    exploration: float
    exploration_mode: Literal["epsilon", "thompson"] = "epsilon"
    realized_value: float | None


class Routing(Section):
    """The prior family's verdict (greedy hit rates, or the logged decisions where no hit rate exists), the
    exploration verdict, and the published combination."""

    shipped: HitRate
    fitted: HitRate
    difference: Difference
    recommendation: Recommendation
    reason: str
    validation: Pair  # greedy hit rates on validation (adopt needs both)
    # (the defaults read a stats file written before them)
    decided_by: Literal["hit_rate", "logged"] = "hit_rate"
    searched_by: Literal["hit_rate", "logged"] = "hit_rate"  # what chose the fitted constants on validation
    logged: LoggedVerdict | None = None  # wherever the held-out tasks logged an action
    exploration: ExplorationVerdict
    published: Published


class Replay(Section):
    shipped: ExplorationSide
    fitted: ExplorationSide


# ---------------------------------------------------------------------------------------------------- held-out figures
class Calibration(Section):
    regions_mse: float | None
    plain_mean_mse: float | None
    regions_mae: float | None
    plain_mean_mae: float | None
    difference_ci95: Interval
    recommendation: Recommendation
    reason: str
    n: int
    tasks: int


class Baseline(Section):
    """A baseline on the eligible held-out tasks; a single config also has its ``tasks`` and ``coverage``."""

    config: str | None
    hit_rate: float | None
    mean_quality: float | None
    mean_cost_usd: float | None
    tasks: int | None = None
    coverage: float | None = None

    written_if_given = frozenset({"tasks", "coverage"})


class Baselines(Section):
    best_single: Baseline
    cheapest: Baseline
    random: Baseline
    oracle: Baseline
    shipped: Baseline
    fitted: Baseline


class PriorRow(Section):
    """A shipped prior against the learned real ratings it covers."""

    selector: str
    region: str
    shipped: float
    measured: float | None
    weight: float
    n: int
    disagrees: bool


class GridRow(Section):
    """One evaluated constant set of the search (docs/design.md, Grids and the search)."""

    kind: Literal["greedy_hit_rate", "logged_value", "replay", "expected_hit_rate"]
    prior_source: Literal["shipped", "measured"]
    prior_weight: float
    exploration: float | None
    exploration_mode: Literal["epsilon", "thompson"] | None = None  # an arm's (replay and logged exploration rows)
    half_life_days: float | None
    lambda_: float | None = Field(alias="lambda")
    validation: float | None
    held_out_diagnostic: float | None

    written_if_given = frozenset({"exploration_mode"})


# ---------------------------------------------------------------------------------------------------- signals
class SignalCounts(Section):
    ratings_by_origin: dict[str, int]
    prm_fill_ins: int
    tasks_compared: int
    rejections: int
    prompt_versions: int


class MemberSignal(Section):
    region: str
    config_key: str
    relative_advantage: float
    n_tasks: int
    wins: int | None
    losses: int | None
    ties: int | None
    rated_tasks: int | None
    win_rate: float | None


class MemberRanks(Section):
    top: list[MemberSignal]
    bottom: list[MemberSignal]


class RejectionRow(Section):
    region: str
    config_key: str
    rejections: int
    weight: float


class PromptVersionRow(Section):
    prompt_version: str
    region: str
    wins: int
    losses: int
    ties: int
    n_tasks: int
    win_rate: float | None
    n: int


class WritebackRow(Section):
    policy: str
    decisions: int
    resolved: int
    unresolved: int
    mean_reward: float | None


class OffPolicy(Section):
    n: int
    matched: int
    ips: float | None
    snips: float | None
    ess: float
    reason: str | None


class Signals(Section):
    counts: SignalCounts
    members: dict[str, MemberRanks]
    rejections: list[RejectionRow]
    prompt_versions: list[PromptVersionRow]
    decisions: list[WritebackRow] | None
    off_policy: OffPolicy | None


# ---------------------------------------------------------------------------------------------------- ladders
class LadderSearch(Section):
    strategy: str
    configs: int
    pruned: list[str] | None = None
    evaluated: int | None = None
    candidates: int | None = None

    written_if_given = frozenset({"pruned", "evaluated", "candidates"})


class LadderRule(Section):
    name: str | None = None
    measure: str | None = None  # what the rule judges by: the objective's value, or "budget" (quality)
    folds: int | None = None
    kappa: float | None = None
    kappas: list[KappaRow] = Field(default_factory=list)
    reason: str | None = None

    written_if_given = frozenset({"name", "measure", "folds", "kappa", "kappas", "reason"})


class LadderRegion(Section):
    """A region's ladder (or ``'*'``'s), its validated figures and its held-out ones."""

    ladder: list[str]
    source: Literal["global", "region"]
    reason: str
    validated_quality: float | None
    validated_cost_usd: float | None
    held_out_quality: float | None
    held_out_cost_usd: float | None
    held_out_calls: float | None
    coverage: float | None
    held_out_tasks: int


class LadderSummary(Section):
    held_out_quality: float | None
    held_out_cost_usd: float | None
    best_single_config: str
    best_single_quality: float | None
    best_single_cost_usd: float | None
    quality_ratio: float | None
    cost_ratio: float | None
    coverage: float | None
    gate_is_target: bool


class HindsightPoint(Section):
    """A ladder found with hindsight; its spend is ``cost_usd``, or ``calls`` without costs."""

    ladder: list[str] | None = None
    quality: float | None = None
    cost_usd: float | None = None
    calls: float | None = None
    quality_ratio: float | None = None
    cost_ratio: float | None = None
    gap: float | None = None

    written_if_given = frozenset({"ladder", "quality", "cost_usd", "calls", "quality_ratio", "cost_ratio", "gap"})


class Hindsight(Section):
    diagnostic: str
    ladders_scored: int
    frontier_at_cost: HindsightPoint
    cheapest_reaching_best_single: HindsightPoint | None


class Ladders(Section):
    """The ladders the learning stage chose, reported on the held-out tasks (docs/design.md, Ladders)."""

    target: str | None = None
    budget_usd: float | None = None
    pass_threshold: float | None = None
    cost_known: bool | None = None
    search: LadderSearch | None = None
    regions: dict[str, LadderRegion]
    summary: LadderSummary | None
    held_out_tasks_compared: int | None = None
    rule: LadderRule | None = None
    hindsight: Hindsight | None = None
    reason: str | None = None

    written_if_given = frozenset(
        {"target", "budget_usd", "pass_threshold", "cost_known", "search", "held_out_tasks_compared", "rule"}
        | {"hindsight", "reason"}
    )


# ---------------------------------------------------------------------------------------------------- frontier
class RouterPoint(Section):
    lambda_: float = Field(alias="lambda")
    quality: float | None
    cost_usd: float | None
    tasks: int


class SinglePoint(Section):
    config: str
    quality: float | None
    cost_usd: float | None
    tasks: int
    coverage: float | None
    snips_quality: float | None = None
    snips_cost_usd: float | None = None
    logged: int | None = None
    decisions: int | None = None

    written_if_given = frozenset({"snips_quality", "snips_cost_usd", "logged", "decisions"})


class OraclePoint(Section):
    quality: float | None
    cost_usd: float | None
    tasks: int


class Aiq(Section):
    router: float | None
    singles: float | None
    cost_range_usd: tuple[float, float] | None = None

    written_if_given = frozenset({"cost_range_usd"})


class Frontier(Section):
    """The cost-quality frontier of the utility objective and AIQ (docs/design.md, Cost-quality frontier and AIQ)."""

    lambdas: list[float] | None
    router: list[RouterPoint]
    singles: list[SinglePoint]
    oracle: OraclePoint
    aiq: Aiq
    held_out_tasks: int | None = None
    reason: str | None
    note: str | None = None

    written_if_given = frozenset({"held_out_tasks", "note"})


# ---------------------------------------------------------------------------------------------------- policies
class PolicyFigures(Section):
    hit_rate: float | None
    hits: int
    n: int
    mean_quality: float | None
    mean_cost_usd: float | None
    mean_configs_run: float | None


class Policies(Section):
    protocol: str
    policies: dict[str, PolicyFigures]
