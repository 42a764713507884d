"""``stats.json`` of a case study, schema ``case-study-stats/v1`` (its keys are fixed within v1).

Every number that a case study page or ``ratings compare`` shows comes from
here; nothing on a page is computed anywhere else. Undefined numbers are
``null`` (never NaN), with the reason in the neighbouring ``reason`` text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_serializer

from ..defaults import Objective
from ..jsonfile import json_schema, parse_json
from ..routing.summary import TableSummary
from ..routing.table import ConstantOrigin
from ..workspace import STATS_SCHEMA_FILE
from .backtest import BacktestReport
from .options import FitOptions
from .sections import (
    Baselines,
    Calibration,
    Frontier,
    GridRow,
    Ladders,
    Policies,
    PriorRow,
    Replay,
    Routing,
    Section,
    Signals,
)

STATS_SCHEMA = "case-study-stats/v1"


class Source(Section):
    """Where the figures come from: the store version read, the rows per view, the consumed streams' hash, the
    command line and the credit of the data."""

    version: int | None = None  # the store's table version the fit read
    events: dict[str, int] = Field(default_factory=dict)
    sha256: str | None = None
    command: str | None = None  # the command line that produced the stats
    credit: str | None = None

    written_if_given = frozenset({"credit"})


class RatingCounts(Section):
    total: int
    by_rater_kind: dict[str, int]
    retracted: int


class Split(Section):
    learned_tasks: int
    held_out_tasks: int
    eligible_held_out: int
    cutoff_at: str | None
    validation_tasks: int


class ConstantSet(Section):
    prior_source: Literal["shipped", "measured"]
    prior_weight: float
    exploration: float
    exploration_mode: Literal["epsilon", "thompson"] = "epsilon"  # routing-table/v1.2
    half_life_days: float | None  # null: no recency weighting (infinity)
    min_samples: int
    cost_floor_usd: float
    lambda_: float | None = Field(default=None, alias="lambda")
    min_quality: float | None = None  # the quality floor (routing-table/v1.1); null: none


class Constants(Section):
    shipped: ConstantSet
    fitted: ConstantSet
    selected_on: dict[str, Literal["validation", "pinned"]]
    published: Literal["fitted", "shipped", "mixed"]
    provenance: dict[str, ConstantOrigin] = Field(default_factory=dict)
    values: ConstantSet | None = None  # the published constants
    #: where the "shipped" constants came from: a shipped.json, or the code defaults when there is none
    shipped_from: Literal["file", "code defaults"] = "file"


class _Common(Section):
    """What every ``stats.json`` holds: the data, the constants, the published table in words, the signals."""

    schema_: str = Field(default=STATS_SCHEMA, alias="schema")
    name: str
    table_version: str | None = None  # the routing table these stats describe (its history copy has it)
    source: Source
    objective: Objective
    objective_requested: str | None = None  # what was asked for (the objective degrades to quality without costs)
    cost_known: bool
    ratings: RatingCounts
    constants: Constants
    signals: Signals | None = None
    routing_table: TableSummary | None = None  # the published table in words (pipeline.routing.summary)
    options: FitOptions | None = None  # the options of the fit, as the CLI spells them
    notes: list[str] = Field(default_factory=list)

    @field_serializer("options")
    def _options(self, options: FitOptions | None) -> dict[str, Any] | None:
        """The options as given; ``evaluate`` only where it is false (a refit's) and ``backtest`` only where one was
        attached, as before they existed."""
        if options is None:
            return None
        # without a backtest attached, the options read as before the option existed (the same bytes)
        exclude = ({"evaluate"} if options.evaluate else set()) | ({"backtest"} if not options.backtest else set())
        return options.model_dump(mode="json", by_alias=True, exclude=exclude or None)

    def to_json_dict(self) -> dict[str, Any]:
        """The JSON of the stats: every key, but a section's ``written_if_given`` keys only where it has them."""
        return self.model_dump(mode="json", by_alias=True)


class Stats(_Common):
    """The whole ``stats.json``. ``signals``, ``ladders``, ``frontier``, ``policies`` come from their stages."""

    split: Split
    routing: Routing
    replay: Replay
    calibration: Calibration
    baselines: Baselines
    priors: list[PriorRow]
    grid: list[GridRow]
    ladders: Ladders | None = None
    frontier: Frontier | None = None
    policies: Policies | None = None
    # The case study's backtest (``ratings backtest``, attached by ``fit-routing --backtest FILE``): a simulation of
    # deployment on the same table. Written only where one was attached.
    backtest: BacktestReport | None = None

    written_if_given = frozenset({"backtest"})


class RefitStats(_Common):
    """The ``stats.json`` of a refit without evaluation (``fit-routing --no-evaluate``): no held-out figure, and
    ``evaluated: false`` says so."""

    evaluated: Literal[False] = False


AnyStats = Stats | RefitStats


def parse_stats(data: Any) -> AnyStats:
    """A stats object: a refit's when it says ``evaluated: false``, else the nightly job's."""
    if isinstance(data, dict) and data.get("evaluated") is False:
        return RefitStats.model_validate(data)
    return Stats.model_validate(data)


def load_stats(path: str | Path) -> AnyStats:
    return parse_stats(parse_json(Path(path).read_bytes()))


def stats_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``stats.json`` (``case-studies/stats.schema.json``), generated from the models: a nightly
    job's :class:`Stats` or a refit's :class:`RefitStats`."""
    return json_schema(AnyStats, STATS_SCHEMA_FILE, STATS_SCHEMA)


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
