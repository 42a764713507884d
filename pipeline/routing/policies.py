"""Routing policies: each is a function ``(router, view, pool, role, failures) -> (config, reason, explorable)``.

``pool`` is never empty and already has the failed configurations removed (see
:mod:`pipeline.routing.router`); the result must be a member of it.
``explorable`` says whether the router may replace the choice by an
epsilon-exploration draw. A team adds its own with :func:`register_policy`.

Named static configurations (``cheap_config``, ``frontier_config``,
``default_config``) outside the pool give way to a pool member chosen by the
same idea: the cheapest (lowest cost, then higher quality), the highest
quality (then lower cost), or the static fallback (docs/design.md, Static fallback).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..compat import routing_v1
from .view import GLOBAL, RegionView, RouterLike, levels

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


#: What the gate compares, per objective, in the words of a decision's reason.
OBJECTIVE_WORDS = {
    "quality_per_dollar": "quality per dollar (total quality / total cost)",
    "utility": "utility (mean lambda * quality - cost)",
    "quality": "quality (mean per task)",
}


def _evidence_words(view: RegionView, config: str, static: str, min_samples: int) -> str:
    """The gate's test of ``config`` against ``static`` in ``view``, in words with its numbers: which evidence
    decided (tasks both ran, single runs, weighted or not, escalations left out) and the bound."""
    ev = view.evidence.get((config, static))
    if ev is None:
        return f"{config} has no published test against {static} in {view.name}"
    shared = f"{ev.shared_tasks} shared task{'s' if ev.shared_tasks != 1 else ''}"
    if ev.effective_samples is None:  # a v1.1 test: tasks both ran only
        if ev.shared_tasks < min_samples:
            return f"{config} vs {static}: {shared} < min_samples {min_samples}"
        evidence = f"on {shared}"
    else:
        weighting = "weighted by 1/propensity" if ev.weighted else "unweighted (no logged propensities)"
        left_out = f", {ev.escalations} escalation outcome(s) left out" if ev.escalations else ""
        evidence = (
            f"on {ev.tasks} task(s) where both were candidates ({ev.shared_tasks} both ran; {ev.runs} run(s) of "
            f"{config}, {ev.static_runs} of {static}; {weighting}{left_out}; effective samples "
            f"{ev.effective_samples:.3g}"
        )
        if ev.effective_samples < min_samples - 1e-9:
            return f"{config} vs {static} {evidence} < min_samples {min_samples})"
        evidence += ")"
    lower = "undefined" if ev.lower is None else f"{ev.lower:+.4g}"
    relation = ">" if ev.passes else "<="
    level = "95%" if ev.level is None else f"{100 * (1 - ev.level):.4g}% (5% over the members tested)"
    return (
        f"{config} vs {static} {evidence}: difference {_signed(ev.difference)}, "
        f"one-sided {level} lower bound {lower} {relation} 0"
    )


def _signed(x: float | None) -> str:
    return "undefined" if x is None else f"{x:+.4g}"


def learning_governed(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    """The evidence gate (docs/design.md, Evidence gate): the learned choice overrides the static choice only
    when the evidence says it beats it on the objective.

    The static choice ``s`` is the table's static fallback for the task's pool and role (after a failure, among
    the members left: the router has removed the failed ones). In the region, then in the global pool: the pool
    members ranked above ``s`` in the greedy order, best first; the first whose published test against ``s``
    passes (at least ``min_samples`` shared tasks, lower end of the one-sided 95% interval of the paired
    difference above 0) is chosen. When ``s`` ranks first, it is the learned choice too. Else ``s``.
    A v1 table publishes no tests: its learned choice passes on n >= min_samples and relative advantage > 0.
    """
    pinned = router.static.pinned.get(role) if role else None
    if pinned is not None and pinned in pool:
        return pinned, f"role {role} is pinned to {pinned}", False
    if not router.gated:
        return routing_v1.learning_governed(router, view, pool, role)
    ms = router.min_samples
    static, static_why = router.static_choice(view, pool, role)
    misses: list[str] = []
    for level in levels(router, view):
        ranked = level.ranked(pool)
        if ranked[0] == static:
            return (
                static,
                "".join(f"{m}; " for m in misses)
                + (f"learned choice in {level.name} is the static choice: {static_why}"),
                True,
            )
        contenders = [c for c in ranked[: ranked.index(static)] if level.rows[c].source == level.name]
        for i, c in enumerate(contenders):
            ev = level.evidence.get((c, static))
            if ev is not None and ev.passes:
                return (
                    c,
                    "".join(f"{m}; " for m in misses)
                    + f"learned choice in {level.name}: {OBJECTIVE_WORDS[router.objective]} of "
                    + _evidence_words(level, c, static, ms)
                    + (f" ({i} member(s) ranked above it lack the evidence)" if i else ""),
                    True,
                )
        if contenders:
            rest = len(contenders) - 1
            miss = _evidence_words(level, contenders[0], static, ms) + (
                f"; {rest} other member(s) ranked above {static} fail too" if rest else ""
            )
        else:
            miss = f"no member rated in {level.name} ranks above {static}"
        misses.append(f"{'gate not met in ' if not misses else 'in '}{level.name}: {miss}")
    return static, f"{'; '.join(misses)}; static: {static_why}", True


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

    After the last rung has failed (no rung left in the pool): the highest-quality member left, never a cheaper,
    weaker one. No ladder at all: quality_per_dollar for a first attempt, the highest-quality member left after
    a failure. The reason says which.
    """
    own = view.ladder
    chosen_ladder, where = (own, view.name) if own is not None else (router.star.ladder, GLOBAL)
    if chosen_ladder is None:
        if failures:
            config = _highest_quality(router, view, pool)
            return (
                config,
                f"no ladder for {view.name} or *; after a failure: highest-quality member left {config}",
                False,
            )
        config, why, _ = quality_per_dollar(router, view, pool, role, failures)
        return config, f"no ladder for {view.name} or *; {why}", False
    rungs = chosen_ladder.rungs
    failed = [i for i, c in enumerate(rungs) if c in failures]
    start = failed[-1] + 1 if failed else 0
    for i in range(start, len(rungs)):
        if rungs[i] in pool:
            return rungs[i], f"ladder {where} rung {i + 1}/{len(rungs)}", False
    config = _highest_quality(router, view, pool)
    quality = view.row(config).quality
    return (
        config,
        f"ladder {where} has no rung left in the pool; highest-quality member left {config} ({quality:.4g})",
        False,
    )


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
    policy = frontier_only if role == "reviewer" else cheap_only
    config, why, _ = policy(router, view, pool, role, failures)
    return config, f"{role or 'no role'}: {why}", False


def trace_governed(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    """Cheap first; frontier once any configuration has failed on the task."""
    policy = frontier_only if failures else cheap_only
    config, why, _ = policy(router, view, pool, role, failures)
    return config, (f"after {len(failures)} failure(s): " if failures else "first attempt: ") + why, False


def workflow_default(
    router: RouterLike, view: RegionView, pool: tuple[str, ...], role: str | None, failures: tuple[str, ...]
) -> tuple[str, str, bool]:
    config = router.static.default_config
    if config is not None and config in pool:
        return config, f"default_config {config}", False
    chosen, why = router.static_choice(view, pool, role)
    missing = "not named" if config is None else f"{config} not in pool"
    return chosen, f"default_config {missing}; {why}", False


#: What each built-in policy routes to, in a reader's words (the case study's policies table).
MEANING: dict[str, str] = {}
for _name, _fn, _meaning in (
    (
        "learning_governed",
        learning_governed,
        "the learned choice where the evidence gate lets it override the static choice (default)",
    ),
    ("quality_per_dollar", quality_per_dollar, "the best quality per dollar in the table, no gate"),
    ("ladder", ladder, "the region's escalation ladder, next rung after each failure"),
    ("workflow_default", workflow_default, "the static default configuration"),
    ("frontier_only", frontier_only, "always the highest-quality configuration"),
    ("cheap_only", cheap_only, "always the cheapest configuration"),
    ("static_hybrid", static_hybrid, "cheap for implementers and researchers, frontier for reviewers"),
    ("trace_governed", trace_governed, "cheap first, frontier after a failure"),
):
    register_policy(_name, _fn)
    MEANING[_name] = _meaning

BUILTIN = tuple(POLICIES)
#: Policies a dispatcher runs again after a failed gate, reporting the failed configs (docs/design.md, Escalation);
#: every other policy runs once per task.
ESCALATES = frozenset({"ladder", "trace_governed"})


def gate_checks(router: RouterLike, view: RegionView, pool: Sequence[str], role: str | None) -> dict[str, Any]:
    """The learning_governed checks spelled out for ``--explain`` (the tests :func:`learning_governed` reads).

    Per level (the region, then ``'*'``): the static choice the members are tested against and, for each pool
    member ranked above it, its published test (``null`` when the table has none).
    """
    pool = tuple(pool)
    static, why = router.static_choice(view, pool, role)

    def test(v: RegionView) -> dict[str, Any]:
        ranked = v.ranked(pool)
        if not router.gated:
            return routing_v1.gate_check(v, ranked[0], router.min_samples)
        tests = []
        for c in ranked[: ranked.index(static)]:
            ev = v.evidence.get((c, static))
            test = ev.model_dump(exclude_defaults=True) if ev else None  # a v1.1 test without the v1.2 fields
            tests.append({"config": c, "row_source": v.rows[c].source, "test": test})
        return {"region": v.name, "learned": ranked[0], "against": static, "tests": tests}

    pinned = router.static.pinned.get(role) if role else None
    return {
        "pinned": pinned,
        "min_samples": router.min_samples,
        "objective": router.objective,
        "region_test": test(view),
        "global_test": test(router.star) if view is not router.star else None,
        "static": {"config": static, "why": why},
    }
