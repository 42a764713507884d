"""``stats.json`` of a case study, schema ``case-study-stats/v1`` (its keys are fixed within v1).

Every number that a case study page or ``ratings compare`` shows comes from
here; nothing on a page is computed anywhere else. Undefined numbers are
``null`` (never NaN), with the reason in the neighbouring ``reason`` text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..evaluate.verdict import Recommendation
from ..jsonfile import json_schema, parse_json
from ..routing.table import ConstantOrigin
from ..workspace import STATS_SCHEMA_FILE
from .backtest import BacktestReport

STATS_SCHEMA = "case-study-stats/v1"

_M = ConfigDict(frozen=True, extra="forbid", defer_build=True, populate_by_name=True)
_OPEN = ConfigDict(frozen=True, extra="allow", defer_build=True, populate_by_name=True)

Interval = tuple[float, float] | None


class Source(BaseModel):
    model_config = _OPEN

    version: int | None = None  # the store's table version the fit read (tables before it carried `manifest`)
    events: dict[str, int] = Field(default_factory=dict)
    command: str | None = None  # the command line that produced the stats


class RatingCounts(BaseModel):
    model_config = _M

    total: int
    by_rater_kind: dict[str, int]
    retracted: int


class Split(BaseModel):
    model_config = _M

    learned_tasks: int
    held_out_tasks: int
    eligible_held_out: int
    cutoff_at: str | None
    validation_tasks: int


class ConstantSet(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, populate_by_name=True)

    prior_source: Literal["shipped", "measured"]
    prior_weight: float
    exploration: float
    half_life_days: float | None  # null: no recency weighting (infinity)
    min_samples: int
    cost_floor_usd: float
    lambda_: float | None = Field(default=None, alias="lambda")
    min_quality: float | None = None  # the quality floor (routing-table/v1.1); null: none


class Constants(BaseModel):
    model_config = _M

    shipped: ConstantSet
    fitted: ConstantSet
    selected_on: dict[str, Literal["validation", "pinned"]]
    published: Literal["fitted", "shipped", "mixed"]
    provenance: dict[str, ConstantOrigin] = Field(default_factory=dict)
    values: ConstantSet | None = None  # the published constants
    #: where the "shipped" constants came from: a shipped.json, or the code defaults when there is none
    shipped_from: Literal["file", "code defaults"] = "file"


class HitRate(BaseModel):
    model_config = _OPEN

    hit_rate: float | None
    hits: int
    n: int
    ci95: Interval


class Difference(BaseModel):
    model_config = _M

    value: float | None
    ci95: Interval


class ExplorationSide(BaseModel):
    """One epsilon replayed on the held-out tasks, each figure the mean over the replay seeds."""

    model_config = _M

    exploration: float
    realized_value: float | None
    tasks_routed: float | None
    tasks_skipped: float | None
    explored: float | None


class ExplorationVerdict(BaseModel):
    """The exploration family's verdict: held-out replay of the fitted against the shipped epsilon, with the
    priors that are published; ``method`` says how the interval was made (seeds, resamples, block length)."""

    model_config = _M

    shipped: ExplorationSide
    fitted: ExplorationSide
    difference: Difference
    recommendation: Recommendation
    reason: str
    validation: dict[str, float | None]  # the validation replay values that chose the fitted epsilon
    method: dict[str, Any]


class Routing(BaseModel):
    """The prior family's verdict (greedy hit rates, top level, as in v1), the exploration verdict, and the
    published combination's figures on the same held-out tasks."""

    model_config = _M

    shipped: HitRate  # carries expected_hit_rate_with_exploration as an extra key
    fitted: HitRate
    difference: Difference
    recommendation: Recommendation
    reason: str
    validation: dict[str, float | None] | None = None  # greedy hit rates on validation (adopt needs both)
    exploration: ExplorationVerdict | None = None
    published: dict[str, Any] | None = None


class ReplayRun(BaseModel):
    """A held-out replay (the exploration verdict's sides: each figure the mean over the replay seeds)."""

    model_config = _OPEN

    exploration: float
    realized_value: float | None
    tasks_routed: float | None
    tasks_skipped: float | None


class Replay(BaseModel):
    model_config = _OPEN

    shipped: ReplayRun
    fitted: ReplayRun


class Calibration(BaseModel):
    model_config = _OPEN

    regions_mse: float | None
    plain_mean_mse: float | None
    regions_mae: float | None
    plain_mean_mae: float | None
    difference_ci95: Interval
    recommendation: Recommendation
    reason: str
    n: int = 0


class Baseline(BaseModel):
    model_config = _OPEN

    config: str | None = None
    hit_rate: float | None
    mean_quality: float | None
    mean_cost_usd: float | None


class Baselines(BaseModel):
    model_config = _OPEN

    best_single: Baseline
    cheapest: Baseline
    random: Baseline
    oracle: Baseline
    shipped: Baseline
    fitted: Baseline


class PriorRow(BaseModel):
    model_config = _M

    selector: str
    region: str
    shipped: float
    measured: float | None
    weight: float
    n: int
    disagrees: bool


class GridRow(BaseModel):
    model_config = _OPEN

    prior_source: str
    prior_weight: float
    exploration: float | None = None
    half_life_days: float | None = None
    lambda_: float | None = Field(default=None, alias="lambda")
    validation: float | None
    held_out_diagnostic: float | None


class Stats(BaseModel):
    """The whole ``stats.json``. ``signals``, ``ladders``, ``frontier``, ``policies`` come from their stages."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True, populate_by_name=True)

    schema_: str = Field(default=STATS_SCHEMA, alias="schema")
    name: str
    table_version: str | None = None  # the routing table these stats describe (its history copy has it)
    source: Source
    objective: Literal["quality_per_dollar", "utility", "quality"]
    objective_requested: str | None = None  # what was asked for (the objective degrades to quality without costs)
    cost_known: bool
    ratings: RatingCounts
    split: Split
    constants: Constants
    routing: Routing
    replay: Replay
    calibration: Calibration
    baselines: Baselines
    priors: list[PriorRow]
    grid: list[GridRow]
    signals: dict[str, Any] | None = None
    ladders: dict[str, Any] | None = None
    frontier: dict[str, Any] | None = None
    policies: dict[str, Any] | None = None
    routing_table: dict[str, Any] | None = None  # the published table in words (pipeline.routing.summary)
    options: dict[str, Any] | None = None  # the FitOptions of the fit, as the CLI spells them
    # The case study's backtest (``ratings backtest``, attached by ``fit-routing --backtest FILE``): a simulation of
    # deployment on the same table. Absent when none was attached.
    backtest: BacktestReport | None = None
    notes: list[str] = Field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude={"backtest"} if self.backtest is None else None)


def load_stats(path: str | Path) -> Stats:
    return Stats.model_validate(parse_json(Path(path).read_bytes()))


def stats_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``stats.json`` (``case-studies/stats.schema.json``), generated from :class:`Stats`."""
    return json_schema(Stats, STATS_SCHEMA_FILE, STATS_SCHEMA)


def write_stats_schema(root: Path) -> Path:
    """Write ``case-studies/stats.schema.json`` under ``root`` (``python -m pipeline.nightly.stats [ROOT]``)."""
    from ..routing.table import canonical_json
    from ..workspace import Workspace

    ws = Workspace.resolve(root)
    ws.write(ws.stats_schema, canonical_json(stats_json_schema()))
    return ws.stats_schema


if __name__ == "__main__":
    import sys

    print(write_stats_schema(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
