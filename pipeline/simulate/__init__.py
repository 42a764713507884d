"""A simulator with known truth: a team's backlog as real v1 streams, plus the truth behind them.

``simulate(out_dir, scenario, seed=, corrupt=)`` writes ``streams/tasks.jsonl``,
``streams/ratings.jsonl``, ``fits/shipped.json`` and ``truth.json``;
``preset("backlog" | "scale", tasks)`` gives the built-in scenarios.
"""

from ..fit.shipped import Prior
from .presets import preset
from .run import SimResult, simulate
from .scenario import (
    ConfigSpec,
    Drift,
    GateSpec,
    Policy,
    RatingSpec,
    RegionSpec,
    ReviewerSpec,
    Scenario,
    load_scenario,
)
from .truth import load_truth

__all__ = [
    "ConfigSpec",
    "Drift",
    "GateSpec",
    "Policy",
    "Prior",
    "RatingSpec",
    "RegionSpec",
    "ReviewerSpec",
    "Scenario",
    "SimResult",
    "load_scenario",
    "load_truth",
    "preset",
    "simulate",
]
