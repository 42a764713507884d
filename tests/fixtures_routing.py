"""Hand-built routing tables for the router, policy, doctor and pin tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pipeline.routing.table import Constants, Evidence, Ladder, Member, Region, RoutingTable, Source, Static

A, B, C, D = "claude-code/anthropic/opus/high", "codex/openai/gpt-5/medium", "kimi/moonshot/k2/-", "glm/zai/glm-4.6/-"


def member(
    config: str,
    quality: float,
    cost: float | None = 0.1,
    n: int = 10,
    ra: float | None = 0.5,
    wr: float | None = None,
    weight: float | None = None,
    gate: dict[str, tuple[int, float | None, float | None]] | None = None,
    min_samples: int = 3,
) -> Member:
    """A member whose value is quality per dollar q / cost (quality alone without cost).

    ``gate``: static choice -> (shared tasks, paired difference, lower bound) of its evidence gate test; it
    passes as the fit would publish it: at least ``min_samples`` shared tasks and a lower bound above 0.
    """
    value = quality if cost is None else quality / cost
    return Member(
        config=config,
        quality=quality,
        cost_usd=cost,
        value=round(value, 9),
        weight=float(n) if weight is None else weight,
        n_ratings=n,
        relative_advantage=ra,
        win_rate=wr,
        gate=None
        if gate is None
        else {
            s: Evidence(
                shared_tasks=n_s, difference=d, lower=lo, passes=n_s >= min_samples and lo is not None and lo > 0
            )
            for s, (n_s, d, lo) in gate.items()
        },
    )


def build_table(
    regions: dict[str, list[Member]],
    *,
    static: dict[str, Any] | None = None,
    ladders: dict[str, list[str]] | None = None,
    schema: str | None = None,
    **constants: Any,
) -> RoutingTable:
    ladders = ladders or {}
    regions = dict(regions)
    regions.setdefault("*", [])
    table = RoutingTable(
        **({"schema": schema} if schema else {}),
        fitted_at="2026-01-01T00:00:00Z",
        source=Source(version=1, events={"tasks": 1, "ratings": 1}),
        objective="quality_per_dollar",
        # hand-built tables explore the epsilon way unless a test asks for Thompson draws (test_thompson.py)
        constants=Constants(**{"exploration": 0.0, "exploration_mode": "epsilon", "min_samples": 3, **constants}),
        constants_source="shipped",
        static=Static(**(static or {})),
        regions={
            name: Region(members=ms, choice=None, ladder=Ladder(rungs=ladders[name]) if name in ladders else None)
            for name, ms in regions.items()
        },
    )
    return table.with_version()


@pytest.fixture
def make_table() -> Callable[..., RoutingTable]:
    return build_table


#: Every constant pinned, so a fit runs no grid search (fast) and the table is the shipped constants' refit.
PINNED_FIT = {"prior_source": "shipped", "prior_weight": 3.0, "exploration": 0.3, "half_life_days": "inf"}


@pytest.fixture(scope="session")
def fitted_sim_home(tmp_path_factory):
    """A simulated backlog of 100 tasks (seed 1), fitted once with pinned constants. Copy it before changing it."""
    from pipeline.nightly.job import run_fit
    from pipeline.nightly.options import FitOptions
    from pipeline.simulate import preset, simulate

    home = tmp_path_factory.mktemp("routing") / "team"
    simulate(home, preset("backlog", tasks=100), seed=1)
    run_fit(home, FitOptions(**PINNED_FIT))
    return home
