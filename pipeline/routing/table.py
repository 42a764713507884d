"""The routing table, schema ``routing-table/v1.2`` (docs/design.md, Routing table): model, load, atomic publish.

This is the contract with dispatchers: a program in any language reads
``fits/routing-table.json`` with a JSON parser; Python dispatchers use
:func:`load` and :class:`pipeline.routing.Router`.

v1.1 adds fields and changes the meaning of none: per member the evidence gate's test against each
static choice (``gate``), and the quality floor (``constants.min_quality``). A v1 table (without them)
still loads; the router then applies the gate v1 tables were published with (see
:mod:`pipeline.routing.policies`). v1.2 adds, per test, the evidence of logged single-config runs
(:class:`Evidence`: tasks, runs, effective samples, weighting, escalations left out), the shipped ``prices`` and per
region the mean tokens they are read with (the cost prior of configs not yet run, docs/design.md, Cost prior); a
v1.1 table loads as it was.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .. import defaults
from ..errors import TableSchemaError
from ..jsonfile import json_schema, read_json, validate
from ..prices import Price
from ..workspace import TABLE_SCHEMA_FILE, atomic_write

SCHEMA = "routing-table/v1.2"
SCHEMA_MAJOR = "routing-table/v1"
#: The first minor version whose members carry the evidence gate's tests (``Member.gate``).
SCHEMA_WITH_GATE = "routing-table/v1.1"

# allow_inf_nan=False: a table never holds NaN or an infinity (JSON has neither; a dispatcher could not rank by one).
#: Where a published constant comes from: searched and adopted, the shipped value, or pinned on the command line.
ConstantOrigin = Literal["fitted", "shipped", "pinned"]

_MODEL = ConfigDict(frozen=True, extra="forbid", defer_build=True, allow_inf_nan=False)


class Constants(BaseModel):
    """The routing constants (docs/design.md, Fit; docs/design.md, Evaluation).

    ``half_life_days`` null means no recency weighting.
    """

    model_config = _MODEL

    prior_source: Literal["shipped", "measured"] = defaults.PRIOR_SOURCE  # type: ignore[assignment]
    prior_weight: float = defaults.PRIOR_WEIGHT
    exploration: float = defaults.EXPLORATION
    # How exploration draws (v1.2): epsilon, a uniformly chosen other member with probability ``exploration``;
    # thompson, with probability ``exploration`` a Thompson draw on the members' posteriors (docs/design.md,
    # Decisions).
    exploration_mode: Literal["epsilon", "thompson"] = defaults.EXPLORATION_MODE  # type: ignore[assignment]
    half_life_days: float | None = defaults.HALF_LIFE_DAYS
    min_samples: int = defaults.MIN_SAMPLES
    cost_floor_usd: float = defaults.COST_FLOOR_USD
    lambda_: float | None = Field(default=None, alias="lambda")
    # The quality floor: the best objective among members whose quality is at least this, else the highest
    # quality (docs/design.md, Routing). None: no floor.
    min_quality: float | None = Field(default=None, ge=0.0, le=1.0)


#: The searched and shipped constants (by their JSON names), in the order the case-study page and
#: ``ratings compare`` show them.
CONSTANT_NAMES = (
    "prior_source",
    "prior_weight",
    "exploration",
    "half_life_days",
    "min_samples",
    "cost_floor_usd",
    "lambda",
)


class Static(BaseModel):
    """Static fallback from ``shipped.json`` (docs/design.md, Static fallback)."""

    model_config = _MODEL

    default_config: str | None = None
    cheap_config: str | None = None
    frontier_config: str | None = None
    pinned: dict[str, str] = Field(default_factory=dict)


class Evidence(BaseModel):
    """The evidence gate's test of a member against one static choice ``s`` in its region (v1.1; v1.2 adds the
    logged-run fields, docs/design.md, Evidence gate).

    On the ``tasks`` of the region where both were candidates and either ran (not after another config had
    failed): ``difference`` = the objective of the member minus that of ``s`` from the self-normalized,
    inverse-propensity weighted means of each (quality per dollar: mean quality / mean cost; utility and quality:
    the difference of the means), ``lower`` = the lower end of its one-sided 95% bootstrap interval (tasks
    resampled, so a task both ran enters as its paired difference; null below two effective samples).
    ``passes``: ``effective_samples >= min_samples`` and ``lower > 0``.

    ``shared_tasks``: the tasks both ran; ``runs``/``static_runs``: the runs of the member / of ``s`` in the
    comparison; ``effective_samples``: the smaller side's (sum w)^2 / sum w^2; ``weighted``: whether logged
    propensities weighted it (else an unweighted comparison); ``escalations``: outcomes of the member seen only
    after another config failed, left out of the estimate; ``level``: the one-sided level of ``lower`` (5% over
    the members tested against ``s`` in the region, Bonferroni).
    """

    model_config = _MODEL

    shared_tasks: int
    difference: float | None
    lower: float | None
    passes: bool
    tasks: int | None = None
    runs: int | None = None
    static_runs: int | None = None
    effective_samples: float | None = None
    weighted: bool | None = None
    escalations: int | None = None
    level: float | None = None


class Member(BaseModel):
    """One configuration in one region: what the fit believes of it.

    ``gate`` (v1.1) maps each static choice of the table (cheap, frontier, default, most-rated config) to
    the evidence gate's test of this member against it; absent for the static choice itself and in v1 tables.
    """

    model_config = _MODEL

    config: str
    quality: float
    cost_usd: float | None
    value: float
    weight: float
    n_ratings: int
    relative_advantage: float | None = None
    win_rate: float | None = None
    prior: float | None = None
    gate: dict[str, Evidence] | None = None


class Ladder(BaseModel):
    """An escalation ladder: run ``rungs[0]``; when its gate is below ``pass_threshold``, run the next."""

    model_config = _MODEL

    rungs: list[str]
    pass_threshold: float = 0.5
    validated_quality: float | None = None
    validated_cost_usd: float | None = None


class Region(BaseModel):
    """``mean_tokens`` (v1.2): the region's mean tokens per task (input and output each) that token prices are read
    with, implied by its priced members' known costs (:func:`pipeline.prices.implied_tokens`); null without one."""

    model_config = _MODEL

    members: list[Member]
    choice: str | None
    ladder: Ladder | None = None
    mean_tokens: float | None = None


class Source(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)

    version: int | None = None  # the store's table version the fit read (tables before it carried `manifest`)
    events: dict[str, int] = Field(default_factory=dict)
    sha256: str | None = None


class RoutingTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, populate_by_name=True, allow_inf_nan=False)

    schema_: str = Field(default=SCHEMA, alias="schema")
    version: str = ""
    fitted_at: str | None
    source: Source
    objective: defaults.Objective
    constants: Constants
    # fitted: every searched constant is fitted (or pinned); shipped: none is; mixed: one verdict adopted the
    # fitted values of its family and the other kept the shipped ones.
    constants_source: Literal["fitted", "shipped", "mixed"]
    # Per searched constant: "fitted" (its family's verdict adopted it), "shipped" or "pinned" (given on the
    # command line). Optional: tables written before it have none.
    constants_provenance: dict[str, ConstantOrigin] = Field(default_factory=dict)
    static: Static
    regions: dict[str, Region]
    evaluation: dict[str, Any] = Field(default_factory=dict)
    # v1.2: shipped.json's prices, the cost prior of a config the table does not know (Router.prior_row).
    prices: list[Price] = Field(default_factory=list)

    @model_validator(mode="after")
    def _utility_needs_lambda(self) -> RoutingTable:
        # The greedy rule has no default lambda (pipeline.routing.greedy): a utility table carries its own.
        if self.objective == "utility" and self.constants.lambda_ is None:
            raise ValueError("a table ranked by utility needs constants.lambda (lambda * quality - cost)")
        return self

    def content_hash(self) -> str:
        """``version``: sha256 (first 16 hex) of the canonical JSON of everything below ``fitted_at``."""
        data = self.to_json_dict()
        body = {k: v for k, v in data.items() if k not in ("schema", "version", "fitted_at")}
        return hashlib.sha256(canonical_json(body)).hexdigest()[:16]

    def with_version(self) -> RoutingTable:
        return self.model_copy(update={"version": self.content_hash()})

    def to_json_dict(self) -> dict[str, Any]:
        """The published form; without prices, ``prices`` and every ``mean_tokens`` are left out (a table fitted
        without prices keeps its bytes and version)."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=False)
        if not self.prices:
            del data["prices"]
            for region in data["regions"].values():
                if region["mean_tokens"] is None:
                    del region["mean_tokens"]
        return data


def canonical_json(data: Any) -> bytes:
    """Sorted keys, no NaN, 2-space indent, trailing newline: the published byte form."""
    return (json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def load(path: str | Path) -> RoutingTable:
    """Load and validate a table; refuse an unknown major schema with a clear error."""
    path = Path(path)
    data = read_json(path, TableSchemaError, missing="no routing table here; run `fit-routing` first")
    schema = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(schema, str) or schema.split(".")[0] != SCHEMA_MAJOR:
        raise TableSchemaError(
            f"{path}: schema {schema!r} is not {SCHEMA_MAJOR!r}; this version of the pipeline reads {SCHEMA_MAJOR} only"
        )
    return validate(RoutingTable, data, path, TableSchemaError)


def table_json_schema() -> dict[str, Any]:
    """The JSON Schema of a routing table (``fits/routing-table.schema.json``), generated from the model."""
    return json_schema(RoutingTable, TABLE_SCHEMA_FILE, SCHEMA)


def publish(table: RoutingTable, path: str | Path, *, root: Path | None = None) -> RoutingTable:
    """Stamp the version, write its JSON Schema beside the table, then the table (the last write is the commit
    point), each atomically (temp, fsync, rename); with ``root`` (the home) both stay inside it."""
    path = Path(path)
    table = table.with_version()
    atomic_write(path.with_name(TABLE_SCHEMA_FILE), canonical_json(table_json_schema()), root=root)
    atomic_write(path, canonical_json(table.to_json_dict()), root=root)
    return table
