"""What a simulated backlog looks like: a small pydantic model, loadable from JSON.

A scenario names the configurations (each with a true quality per region and a
cost distribution), the regions and their shares, the logging policy that chose
who did each task (the shipped constants acting on the shipped priors, which is
where the selection bias comes from), who rates the attempts and how noisily,
and an optional drift. :mod:`pipeline.simulate.presets` holds the built-in ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import PipelineError
from ..fit.shipped import Prior  # the shipped prior the scenario's policy believes: shipped.json's own
from ..jsonfile import read_json, validate
from ..streams.events import config_key
from ..utc import utc_timestamp

Unit = Annotated[float, Field(ge=0.0, le=1.0)]
Positive = Annotated[float, Field(gt=0.0)]
_MODEL = ConfigDict(frozen=True, extra="forbid")


class ConfigSpec(BaseModel):
    """One configuration and the truth about it."""

    model_config = _MODEL

    cli: str = Field(min_length=1)
    route: str | None = None
    model: str = Field(min_length=1)
    effort: str | None = None
    quality: dict[str, Unit] = Field(description="true probability that an attempt succeeds, per region")
    cost_usd: Positive = Field(description="mean cost of one attempt before the region's cost multiplier")
    cost_sigma: Annotated[float, Field(ge=0.0, le=3.0)] = 0.5
    cost_missing: Unit = Field(0.02, description="share of attempts that report no cost")
    available_from: Annotated[float, Field(ge=0.0, lt=1.0)] = Field(
        0.0,
        description="fraction of the timeline from which the config exists (a late config): before it, "
        "it is neither routed nor asked for a second opinion",
    )

    @property
    def key(self) -> str:
        return config_key(self.cli, self.route, self.model, self.effort)

    def event_config(self) -> dict[str, str | None]:
        return {"cli": self.cli, "route": self.route, "model": self.model, "effort": self.effort}


class RegionSpec(BaseModel):
    """A kind of work, its share of the tasks and what an attempt at it looks like."""

    model_config = _MODEL

    name: str = Field(min_length=1)
    share: Positive
    cost_multiplier: Positive = 1.0
    node: str = "implementer"
    duration_s: Positive = 300.0
    tool_calls: Annotated[float, Field(ge=0.0)] = 20.0
    files_read: Annotated[float, Field(ge=0.0)] = 8.0
    files_written: Annotated[float, Field(ge=0.0)] = 2.0


class GateSpec(BaseModel):
    """A deterministic check (tests, lint, build): binary score, high confidence."""

    model_config = _MODEL

    name: str = Field(min_length=1)
    rate: Unit = Field(description="probability it runs on a rated attempt")
    confidence: tuple[Unit, Unit] = (0.9, 1.0)


class ReviewerSpec(BaseModel):
    """A model reviewer: a noisy continuous score with its own bias."""

    model_config = _MODEL

    name: str = Field(min_length=1)
    bias: Annotated[float, Field(ge=-0.5, le=0.5)] = 0.0
    noise: Annotated[float, Field(gt=0.0, le=1.0)] = 0.15


class RatingSpec(BaseModel):
    """Who rates an attempt and how.

    A reviewer's score is ``clip(N(base + bias, noise), 0, 1)`` rounded to 0.01,
    with ``base = success_mean`` for a successful attempt, else ``failure_mean``.
    A human scores a success 1.0 or 0.75 and a failure 0.0 or 0.25 (60/40).
    """

    model_config = _MODEL

    unrated_share: Unit = 0.0
    review_rate: Unit = 0.41
    review_confidence: tuple[Unit, Unit] = (0.5, 0.9)
    success_mean: Unit = 0.9
    failure_mean: Unit = 0.1
    human_rate: Unit = 0.03
    human_importance: Annotated[float, Field(ge=0.0)] = 2.0
    rejection_rate: Unit = Field(0.06, description="probability a failed attempt gets a grounded rejection")
    retraction_rate: Unit = Field(0.01, description="share of reviewer ratings retracted and corrected")


class Policy(BaseModel):
    """The logging policy and the shipped file it comes from (``shipped.json``: docs/design.md, Routing table).

    The policy is static: per region it believes the most specific matching prior
    (``unknown_quality`` when none matches), takes the greedy config by the
    objective over the list price ``cost_usd``, and with probability
    ``exploration`` a uniformly chosen other config.
    """

    model_config = _MODEL

    name: str = "shipped"
    prior_weight: Annotated[float, Field(ge=0.0)] = 3.0
    exploration: Unit = 0.3
    min_samples: Annotated[int, Field(ge=0)] = 3
    objective: Literal["quality_per_dollar", "quality"] = "quality_per_dollar"
    unknown_quality: Unit = 0.5
    default_config: str | None = None
    cheap_config: str | None = None
    frontier_config: str | None = None
    pinned: dict[str, str] = Field(default_factory=dict)
    priors: list[Prior] = Field(default_factory=list)

    def shipped_json(self) -> dict:
        """The ``fits/shipped.json`` document (docs/design.md, Routing table)."""
        return {
            "constants": {
                "prior_weight": self.prior_weight,
                "exploration": self.exploration,
                "min_samples": self.min_samples,
                "objective": self.objective,
            },
            "default_config": self.default_config,
            "cheap_config": self.cheap_config,
            "frontier_config": self.frontier_config,
            "pinned": dict(self.pinned),
            "priors": [p.model_dump() for p in self.priors],
        }


class Drift(BaseModel):
    """From the task at fraction ``at`` of the timeline on, ``config`` has the new ``quality`` in the listed regions."""

    model_config = _MODEL

    config: str
    at: Annotated[float, Field(gt=0.0, lt=1.0)]
    quality: dict[str, Unit]


class Scenario(BaseModel):
    """A team's backlog: who can work, how well, at what cost, who chose, who rates."""

    model_config = _MODEL

    name: str = "custom"
    tasks: Annotated[int, Field(ge=1)] = 1000
    start: str = "2026-06-01T00:00:00Z"
    days: Positive = 120.0
    thread: str = "backlog"
    regions: list[RegionSpec] = Field(min_length=1)
    configs: list[ConfigSpec] = Field(min_length=1)
    attempts: tuple[Unit, Unit, Unit] = Field(
        (0.55, 0.3, 0.15),
        description="probability that 1, 2 or 3 configs attempt a task (the others as independent second opinions)",
    )
    side_by_side: Unit = Field(
        0.0,
        description="a dispatcher's competing lanes: the share of tasks also given, at the same time, to a uniformly "
        "chosen other config, whose decision is logged too (needs attempts (1, 0, 0))",
    )
    escalation: Unit = Field(
        0.0,
        description="a dispatcher's escalation: the probability that a task whose every lane failed its gates runs "
        "the logging policy's escalation config after the failure (frontier_config, else the highest believed "
        "quality not yet run), its decision logged",
    )
    correlation: Annotated[float, Field(ge=0.0, lt=1.0)] = Field(
        0.5, description="share of an attempt's latent outcome that is the task's difficulty (shared by its attempts)"
    )
    gate_noise: Annotated[float, Field(ge=0.0, lt=0.5)] = Field(
        0.05, description="probability that a gate rating disagrees with the attempt's true outcome"
    )
    gates: list[GateSpec] = Field(min_length=1)
    reviewers: list[ReviewerSpec] = Field(min_length=1)
    humans: list[str] = Field(default_factory=lambda: ["lead"], min_length=1)
    ratings: RatingSpec = RatingSpec()
    prompt_versions: list[str] = Field(default_factory=list)
    prompt_version_rate: Unit = 0.0
    drift: Drift | None = None
    policy: Policy = Policy()

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        utc_timestamp(self.start)
        names = [r.name for r in self.regions]
        if len(set(names)) != len(names):
            raise ValueError("region names must be unique")
        keys = [c.key for c in self.configs]
        if len(set(keys)) != len(keys):
            raise ValueError("config keys must be unique")
        for c in self.configs:
            if set(c.quality) != set(names):
                raise ValueError(f"config {c.key}: quality must name exactly the regions {names}")
        if all(c.available_from > 0 for c in self.configs):
            raise ValueError("at least one config must exist from the start (available_from 0)")
        if abs(sum(self.attempts) - 1.0) > 1e-9:
            raise ValueError("attempts: the probabilities of 1, 2 and 3 configs must sum to 1")
        if self.side_by_side > 0 and tuple(self.attempts) != (1.0, 0.0, 0.0):
            raise ValueError("side_by_side lanes replace the second opinions of attempts: set attempts to (1, 0, 0)")

        if self.drift is not None:
            if self.drift.config not in keys:
                raise ValueError(f"drift.config {self.drift.config!r} is not one of the configs")
            if not set(self.drift.quality) <= set(names):
                raise ValueError("drift.quality names a region the scenario does not have")
        for role, key in [
            ("default_config", self.policy.default_config),
            ("cheap_config", self.policy.cheap_config),
            ("frontier_config", self.policy.frontier_config),
            *self.policy.pinned.items(),
        ]:
            if key is not None and key not in keys:
                raise ValueError(f"policy {role} {key!r} is not one of the configs")
        if self.prompt_version_rate > 0 and not self.prompt_versions:
            raise ValueError("prompt_version_rate > 0 needs prompt_versions")
        return self

    @property
    def dispatcher(self) -> bool:
        """The backlog is what a dispatcher logs (side-by-side lanes, escalations), not independent second
        opinions."""
        return self.side_by_side > 0 or self.escalation > 0

    @property
    def region_names(self) -> list[str]:
        return [r.name for r in self.regions]

    @property
    def config_keys(self) -> list[str]:
        return [c.key for c in self.configs]


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario from a JSON file; a bad file is a :class:`PipelineError` naming the field."""
    path = Path(path)
    return validate(Scenario, read_json(path, PipelineError, missing="no such scenario file"), path, PipelineError)
