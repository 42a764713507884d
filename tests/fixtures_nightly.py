"""Fitted homes shared by the fit tests: fitting is the slow part, so each home is fitted once per session.

``tiny_events`` is the hand-checkable store of ``tests/nightly/test_job.py`` (its numbers are worked out there).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline.nightly.job import FitResult, run_fit
from pipeline.nightly.options import FitOptions
from pipeline.streams.log import append

X, Y = "c/-/x/-", "c/-/y/-"
COST = {"x": 0.1, "y": 0.2}
#: day -> scores of x and y on task T<day> (region r); each rating has one attempt at COST.
RATED: dict[int, dict[str, float]] = {
    1: {"x": 1.0, "y": 1.0},
    2: {"x": 0.5},
    3: {"y": 1.0},
    4: {"x": 1.0},
    5: {"x": 0.0, "y": 1.0},
    6: {"x": 1.0, "y": 1.0},
    7: {"x": 1.0},
    8: {"x": 1.0, "y": 1.0},
    9: {"x": 0.0, "y": 1.0},
    10: {"x": 1.0, "y": 0.0},
}
#: The shipped prior of x (selector of three segments); y has none, so it takes the measured prior.
SHIPPED = {"priors": [{"selector": "c/-/x", "region": "*", "quality": 0.5}]}
#: Everything pinned: k = 1, shipped priors, no exploration, no recency weighting.
PINNED = FitOptions(prior_source="shipped", prior_weight=1, exploration=0.0, half_life_days="inf")


def at(day: int, hour: int = 0) -> str:
    return f"2026-01-{day:02d}T{hour:02d}:00:00Z"


def config(model: str) -> dict[str, Any]:
    return {"cli": "c", "route": None, "model": model, "effort": None}


def tiny_events(rated: dict[int, dict[str, float]] | None = None, *, late: bool = True) -> list[dict[str, Any]]:
    """Task opened at day d 00:00, attempts at 01:00, ratings (gate pytest) at 02:00.

    ``late``: a reviewer rates y 0 on the learned task T02 on day 9, after the cutoff (day 8).
    """
    events: list[dict[str, Any]] = []
    for day, scores in (rated or RATED).items():
        task = f"T{day:02d}"
        events.append({"type": "task.opened", "task": task, "region": "r", "at": at(day), "id": f"open-{task}"})
        for model, score in scores.items():
            events.append(
                {
                    "type": "task.attempted",
                    "task": task,
                    "config": config(model),
                    "status": "success",
                    "cost_usd": COST[model],
                    "at": at(day, 1),
                    "id": f"att-{task}-{model}",
                }
            )
            events.append(
                {
                    "type": "task.rated",
                    "task": task,
                    "config": config(model),
                    "rater": {"kind": "gate", "name": "pytest"},
                    "score": score,
                    "at": at(day, 2),
                    "id": f"rate-{task}-{model}",
                }
            )
    if late:
        events.append(
            {
                "type": "task.rated",
                "task": "T02",
                "config": config("y"),
                "rater": {"kind": "reviewer", "name": "late"},
                "score": 0.0,
                "at": at(9, 5),
                "id": "late",
            }
        )
    return events


def make_home(root: Path, events: list[dict[str, Any]], shipped: dict[str, Any] | None = None) -> Path:
    if root.exists():
        shutil.rmtree(root)
    (root / "fits").mkdir(parents=True)
    (root / "fits" / "shipped.json").write_text(json.dumps(SHIPPED if shipped is None else shipped))
    append(root, events)
    return root


@pytest.fixture(scope="session")
def tiny_fit(tmp_path_factory) -> tuple[Path, FitResult]:
    """The hand-checkable store fitted once with every constant pinned."""
    home = make_home(tmp_path_factory.mktemp("tiny") / "home", tiny_events())
    return home, run_fit(home, PINNED)


@pytest.fixture(scope="session")
def fit_home(tmp_path_factory) -> Callable[..., tuple[Path, FitResult]]:
    """Build and fit a home from events (memoised per session by ``name``)."""
    done: dict[str, tuple[Path, FitResult]] = {}

    def build(
        name: str, events: list[dict[str, Any]], options: FitOptions = PINNED, shipped: dict[str, Any] | None = None
    ) -> tuple[Path, FitResult]:
        if name not in done:
            home = make_home(tmp_path_factory.mktemp(name) / "home", events, shipped)
            done[name] = (home, run_fit(home, options))
        return done[name]

    return build


def simulated(root: Path, *, tasks: int, seed: int, drift: bool = True, flat: bool = False) -> Path:
    """A simulated backlog home (pipeline.simulate, preset ``backlog``) with its truth.json, its tasks done by 1 to 3
    configs as independent second opinions (``SECOND_OPINIONS``): these fixtures judge what the fit finds when
    configs share tasks, not a dispatcher's one-config-per-task logs.

    ``flat``: every config has the same quality and cost in every region (regions carry no signal).
    """
    from pipeline.simulate import preset, simulate
    from pipeline.simulate.presets import SECOND_OPINIONS
    from pipeline.simulate.scenario import Scenario

    data = {**preset("backlog", tasks=tasks).model_dump(), **SECOND_OPINIONS}
    if not drift or flat:
        data["drift"] = None
    if flat:
        for spec in data["configs"]:
            mean = sum(spec["quality"].values()) / len(spec["quality"])
            spec["quality"] = dict.fromkeys(spec["quality"], mean)
        data["regions"] = [{**region, "cost_multiplier": 1.0} for region in data["regions"]]
    simulate(root, Scenario.model_validate(data), seed=seed)
    return root


@pytest.fixture(scope="session")
def sim_fit(tmp_path_factory) -> tuple[Path, FitResult]:
    """6,000 simulated tasks (about 21,000 ratings), no drift, every constant searched."""
    home = simulated(tmp_path_factory.mktemp("sim") / "home", tasks=6000, seed=1, drift=False)
    return home, run_fit(home, FitOptions())


@pytest.fixture(scope="session")
def flat_fit(tmp_path_factory) -> tuple[Path, FitResult]:
    """2,000 simulated tasks where regions carry no signal; constants pinned (calibration is what matters)."""
    home = simulated(tmp_path_factory.mktemp("flat") / "home", tasks=2000, seed=3, flat=True)
    return home, run_fit(
        home, FitOptions(prior_source="shipped", prior_weight=3, exploration=0.0, half_life_days="inf")
    )


@pytest.fixture(scope="session")
def drift_fit(tmp_path_factory) -> tuple[Path, FitResult]:
    """3,000 simulated tasks with the backlog's drift (Kimi gets better at research); half-life searched."""
    home = simulated(tmp_path_factory.mktemp("drift") / "home", tasks=3000, seed=2)
    return home, run_fit(home, FitOptions(prior_source="shipped", prior_weight=3, exploration=0.0))
