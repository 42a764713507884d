"""Routing policies: each is a function ``(router, view, pool, role, failures) -> (config, reason, explorable)``.

``pool`` is never empty and already has the failed configurations removed (see
:mod:`pipeline.routing.router`); the result must be a member of it.
``explorable`` says whether the router may replace the choice by an
epsilon-exploration draw. A team adds its own with :func:`register_policy`.

Named static configurations (``cheap_config``, ``frontier_config``,
``default_config``) outside the pool give way to a pool member chosen by the
same idea: the cheapest (lowest cost, then higher quality), the highest
quality (then lower cost), or the static fallback of DESIGN 5.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .view import GLOBAL, RegionView, RouterLike

Policy = Callable[[RouterLike, RegionView, tuple[str, ...], str | None, tuple[str, ...]], tuple[str, str, bool]]

POLICIES: dict[str, Policy] = {}


def register_policy(name: str, fn: Policy) -> Policy:
    """Make ``fn`` available as ``route(..., policy=name)`` (replacing a policy of that name).

    ``fn(router, view, pool, role, failures) -> (config, reason, explorable)`` must be a pure function
    of its arguments and the table: the router memoises its result per (region, pool, role, failures).
    """
    if not name or not callable(fn):
        raise ValueError("register_policy needs a name and a callable (router, view, pool, role, failures)")
    POLICIES[name] = fn
    return fn


def _passes(view: RegionView, config: str, min_samples: int) -> bool:
    """Evidence gate for (c, r): n(c, r) >= min_samples AND relative_advantage(c, r) > 0.

    A row the region does not list itself has n(c, r) = 0; a null relative
    advantage (no signal fitted) is not > 0, so it never passes.
    """
    row = view.rows[config]
    ra = row.relative_advantage
    return row.source == view.name and row.n_ratings >= min_samples and ra is not None and ra > 0.0


def _why_not(view: RegionView, config: str, min_samples: int) -> str:
    """Why (c, r) fails the gate, in words for the decision's reason."""
    row = view.rows[config]
    if row.source != view.name:
        return f"{config} has no ratings in {view.name}"
    if row.n_ratings < min_samples:
        return f"{config} has n {row.n_ratings} < {min_samples}"
    if row.relative_advantage is None:
        return f"{config} has no relative advantage (null)"
    return f"{config} has relative advantage {row.relative_advantage:.4g} <= 0"


def learning_governed(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    """DESIGN 5 evidence gate: learned choice in r if it passes, else in ``*`` if it passes, else static."""
    pinned = router.static.pinned.get(role) if role else None
    if pinned is not None and pinned in pool:
        return pinned, f"role {role} is pinned to {pinned}", False
    ms = router.min_samples
    misses: list[str] = []
    for level in (view, router.star) if view is not router.star else (view,):  # the region, then the global pool
        learned = level.best(pool)
        if _passes(level, learned, ms):
            row = level.rows[learned]
            return (
                learned,
                "".join(f"{m}; " for m in misses)
                + (
                    f"learned choice in {level.name}: n {row.n_ratings} >= {ms}, "
                    f"relative advantage {row.relative_advantage:.4g} > 0"
                ),
                True,
            )
        misses.append(f"{'gate not met in ' if not misses else 'in '}{level.name}: {_why_not(level, learned, ms)}")
    config, static_why = router.static_choice(view, pool, role)
    return config, f"{'; '.join(misses)}; static: {static_why}", True


def quality_per_dollar(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    """Greedy by quality / max(cost, floor) in the region (quality alone when costs are unknown)."""
    config = view.best_qpd(pool)
    row = view.rows[config]
    cost = "unknown cost" if row.cost_usd is None else f"cost {row.cost_usd:.4g}"
    return config, f"best quality per dollar in {view.name}: quality {row.quality:.4g}, {cost}", True


def ladder(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    """The next rung after the last failed one (region ladder, else the ``*`` ladder).

    No ladder, or no rung left in the pool: quality_per_dollar, and the reason says so.
    """
    own = view.ladder
    chosen_ladder, where = (own, view.name) if own is not None else (router.star.ladder, GLOBAL)
    if chosen_ladder is None:
        config, why, _ = quality_per_dollar(router, view, pool, role, failures)
        return config, f"no ladder for {view.name} or *; {why}", False
    rungs = chosen_ladder.rungs
    failed = [i for i, c in enumerate(rungs) if c in failures]
    start = failed[-1] + 1 if failed else 0
    for i in range(start, len(rungs)):
        if rungs[i] in pool:
            return rungs[i], f"ladder {where} rung {i + 1}/{len(rungs)}", False
    config, why, _ = quality_per_dollar(router, view, pool, role, failures)
    return config, f"ladder {where} has no rung left in the pool; {why}", False


def _cheapest(router: RouterLike, view: RegionView, pool: tuple[str, ...]) -> str:
    return view.best_by(pool, lambda r: (math.inf if r.cost_usd is None else r.cost_usd, -r.quality))


def _highest_quality(router: RouterLike, view: RegionView, pool: tuple[str, ...]) -> str:
    return view.best_by(pool, lambda r: (-r.quality, math.inf if r.cost_usd is None else r.cost_usd))


def _named(
    router: RouterLike,
    view: RegionView,
    pool: tuple[str, ...],
    name: str,
    config: str | None,
    fallback: Callable[[RouterLike, RegionView, tuple[str, ...]], str],
    fallback_label: str,
) -> tuple[str, str]:
    if config is not None and config in pool:
        return config, f"{name} {config}"
    chosen = fallback(router, view, pool)
    missing = "not named" if config is None else f"{config} not in pool"
    return chosen, f"{name} {missing}; {fallback_label} pool member {chosen}"


def cheap_only(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    config, why = _named(router, view, pool, "cheap_config", router.static.cheap_config, _cheapest, "cheapest")
    return config, why, False


def frontier_only(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    config, why = _named(
        router, view, pool, "frontier_config", router.static.frontier_config, _highest_quality, "highest-quality"
    )
    return config, why, False


def static_hybrid(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    """Cheap for implementer, researcher and any other role; frontier for reviewer."""
    if role == "reviewer":
        config, why, _ = frontier_only(router, view, pool, role, failures)
        return config, f"reviewer: {why}", False
    config, why, _ = cheap_only(router, view, pool, role, failures)
    return config, f"{role or 'no role'}: {why}", False


def trace_governed(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    """Cheap first; frontier once any configuration has failed on the task."""
    if failures:
        config, why, _ = frontier_only(router, view, pool, role, failures)
        return config, f"after {len(failures)} failure(s): {why}", False
    config, why, _ = cheap_only(router, view, pool, role, failures)
    return config, f"first attempt: {why}", False


def workflow_default(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    config = router.static.default_config
    if config is not None and config in pool:
        return config, f"default_config {config}", False
    chosen, why = router.static_choice(view, pool, role)
    missing = "not named" if config is None else f"{config} not in pool"
    return chosen, f"default_config {missing}; {why}", False


for _name, _fn in (
    ("learning_governed", learning_governed),
    ("quality_per_dollar", quality_per_dollar),
    ("ladder", ladder),
    ("workflow_default", workflow_default),
    ("frontier_only", frontier_only),
    ("cheap_only", cheap_only),
    ("static_hybrid", static_hybrid),
    ("trace_governed", trace_governed),
):
    register_policy(_name, _fn)

BUILTIN = tuple(POLICIES)


def gate_checks(router: RouterLike, view: RegionView, pool: Sequence[str], role: str | None) -> dict[str, Any]:
    """The learning_governed checks spelled out for ``--explain`` (the same tests as :func:`learning_governed`)."""
    pool = tuple(pool)

    def test(v: RegionView) -> dict[str, Any]:
        c = v.best(pool)
        row = v.rows[c]
        ra = row.relative_advantage
        return {
            "region": v.name,
            "learned": c,
            "row_source": row.source,
            "n_ratings": row.n_ratings,
            "min_samples": router.min_samples,
            "n_ok": row.source == v.name and row.n_ratings >= router.min_samples,
            "relative_advantage": ra,
            "advantage_ok": ra is not None and ra > 0.0,
            "passes": _passes(v, c, router.min_samples),
        }

    pinned = router.static.pinned.get(role) if role else None
    static, why = router.static_choice(view, pool, role)
    return {
        "pinned": pinned,
        "region_test": test(view),
        "global_test": test(router.star) if view is not router.star else None,
        "static": {"config": static, "why": why},
    }
