"""Built-in scenarios: ``backlog`` (the embedded default data) and ``scale`` (benchmark inputs).

The backlog is a team's thread over four months, as its dispatcher logged it (one
config per task, a share of side-by-side lanes, escalations after failed gates): six
configurations across four CLIs and several routes, five regions, a static logging policy on shipped
priors of which some are wrong on purpose (Codex is believed strong at abstract
work and is not; Kimi is believed mediocre at clean-up and is the best per
dollar there; MiniMax is believed good at research and is not), and one drift:
Kimi's new release gets much better at research after 60% of the timeline.
The true best configuration per dollar wins each region by at least 10%,
also after the compression toward 0.5 that gate noise and reviewer scores
cause, so a fit can recover it.
"""

from __future__ import annotations

from typing import Literal

from ..fit.shipped import Prior
from ..streams.events import Config
from .scenario import ConfigSpec, Drift, GateSpec, Policy, RegionSpec, ReviewerSpec, Scenario

OPUS = "claude-code/anthropic/claude-opus-4-5/high"
SONNET = "claude-code/openrouter/claude-sonnet-4-5/medium"
CODEX = "codex/openai/gpt-5-codex/medium"
KIMI = "kimi-cli/moonshot/kimi-k2/-"
GLM = "opencode/openrouter/z-ai%2Fglm-4.6/-"
MINIMAX = "claude-code/minimax/MiniMax-M2/-"

#: name, share of the tasks, cost multiplier, node, duration (s), tool calls, files read, files written
_REGION_ROWS = [
    ("abstract", 0.15, 1.2, "planner", 420, 12, 14, 1),
    ("implement", 0.35, 1.0, "implementer", 600, 35, 10, 4),
    ("clean-up", 0.2, 0.6, "implementer", 240, 18, 6, 3),
    ("review", 0.15, 0.8, "reviewer", 180, 8, 9, 0),
    ("research", 0.15, 1.4, "researcher", 900, 25, 20, 0.3),
]
REGIONS = [RegionSpec.model_validate(dict(zip(RegionSpec.model_fields, row, strict=True))) for row in _REGION_ROWS]


def _q(abstract: float, implement: float, clean_up: float, review: float, research: float) -> dict[str, float]:
    return {"abstract": abstract, "implement": implement, "clean-up": clean_up, "review": review, "research": research}


def _config(key: str, quality: dict[str, float], **truth: float) -> ConfigSpec:
    """The configuration of ``key`` (its parts decoded once), with its true quality per region and costs."""
    parts = Config.from_key(key)
    return ConfigSpec(
        cli=parts.cli, route=parts.route, model=parts.model, effort=parts.effort, quality=quality, **truth
    )


CONFIGS = [
    _config(OPUS, _q(0.92, 0.9, 0.9, 0.95, 0.9), cost_usd=1.2, cost_sigma=0.6),
    _config(SONNET, _q(0.82, 0.72, 0.75, 0.35, 0.55), cost_usd=0.6),
    _config(CODEX, _q(0.38, 0.9, 0.8, 0.25, 0.35), cost_usd=0.45),
    _config(KIMI, _q(0.22, 0.45, 0.82, 0.12, 0.45), cost_usd=0.3, cost_missing=0.1),
    _config(GLM, _q(0.2, 0.35, 0.5, 0.08, 0.62), cost_usd=0.25),
    _config(MINIMAX, _q(0.12, 0.25, 0.36, 0.05, 0.4), cost_usd=0.2),
]

PRIORS = [
    Prior(selector="claude-code", region="*", quality=0.75),
    Prior(selector="claude-code/anthropic", region="review", quality=0.9),
    Prior(selector="claude-code/anthropic/claude-opus-4-5", region="abstract", quality=0.9),
    Prior(selector="codex", region="*", quality=0.7),
    Prior(selector="codex", region="abstract", quality=0.85),  # wrong on purpose: true 0.38
    Prior(selector="codex", region="implement", quality=0.85),
    Prior(selector="kimi-cli", region="*", quality=0.45),
    Prior(selector="kimi-cli", region="clean-up", quality=0.4),  # wrong on purpose: true 0.82
    Prior(selector="opencode", region="*", quality=0.45),
    Prior(selector="opencode/openrouter/z-ai%2Fglm-4.6", region="research", quality=0.6),
    Prior(selector="claude-code/minimax", region="*", quality=0.3),
    Prior(selector="claude-code/minimax/MiniMax-M2", region="research", quality=0.75),  # wrong on purpose: true 0.40
]

POLICY = Policy(
    name="shipped",
    prior_weight=3,
    exploration=0.3,
    min_samples=3,
    objective="quality_per_dollar",
    default_config=SONNET,
    cheap_config=MINIMAX,
    frontier_config=OPUS,
    pinned={"reviewer": OPUS},
    priors=PRIORS,
)

GATES = [
    GateSpec(name="pytest", rate=0.95),
    GateSpec(name="ruff", rate=0.6),
    GateSpec(name="build", rate=0.18),
]

REVIEWERS = [
    ReviewerSpec(name="opus-review", bias=0.06),
    ReviewerSpec(name="gpt-review", bias=-0.08),
    ReviewerSpec(name="gemini-review", bias=0.02, noise=0.2),
]

#: After 60% of the timeline Kimi's release gets much better at research (and best per dollar there).
DRIFT = Drift(config=KIMI, at=0.6, quality={"research": 0.88})

BACKLOG = Scenario(
    name="backlog",
    tasks=1000,
    start="2026-06-01T00:00:00Z",
    days=120,
    thread="backlog",
    regions=REGIONS,
    configs=CONFIGS,
    gates=GATES,
    reviewers=REVIEWERS,
    humans=["lead", "maintainer"],
    prompt_versions=["implement-v1", "implement-v2"],
    prompt_version_rate=0.4,
    drift=DRIFT,
    policy=POLICY,
    # What a team's dispatcher logs: one config per task (its route.decided with the propensity), on 15% of the
    # tasks a competing side-by-side lane, and after a failed gate on every lane an escalation (9 times in 10).
    attempts=(1.0, 0.0, 0.0),
    side_by_side=0.15,
    escalation=0.9,
)

#: About 3.4 ratings per task: 300,000 tasks give about a million ratings.
SCALE_TASKS = 300_000
#: The backlog's shape before it was a dispatcher's logs: 1, 2 or 3 configs per task as independent second
#: opinions, no lanes, no escalations (every task a fair draw of each config it ran: what the benchmarks measure).
SECOND_OPINIONS = {"attempts": (0.55, 0.3, 0.15), "side_by_side": 0.0, "escalation": 0.0}


def preset(name: Literal["backlog", "scale"], tasks: int | None = None) -> Scenario:
    """A built-in scenario; ``tasks`` overrides its number of tasks."""
    if name == "backlog":
        scenario = BACKLOG
    elif name == "scale":
        # The benchmarks' inputs keep their shape: independent second opinions, no lanes or escalations.
        scenario = BACKLOG.model_copy(
            update={"name": "scale", "tasks": SCALE_TASKS, "days": 365, "thread": "scale", **SECOND_OPINIONS}
        )
    else:
        raise ValueError(f"unknown preset {name!r}: choose backlog or scale")
    if tasks is not None:
        scenario = Scenario.model_validate({**scenario.model_dump(), "tasks": tasks})
    return scenario
