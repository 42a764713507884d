"""Policies keep their word: a decision table per rule, for every built-in policy (docs/design.md, Escalation;
docs/design.md, Routing).

1. Every policy honours the quality floor; exploration draws only among members at or above it.
2. After a failure no policy chooses a member whose published quality is below the failed configs' while one
   above remains; when none remains above, the highest quality left.
3. A failed key that is not in the pool is refused, the pool listed.
"""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner
from fixtures_routing import A, B, C, D, build_table, member

from pipeline.cli import cli
from pipeline.errors import RoutingError
from pipeline.routing import Router
from pipeline.routing.policies import BUILTIN
from pipeline.routing.table import publish

# Region r (quality, cost; value = quality per dollar):
#   A 0.9 at 1.00 -> 0.9    B 0.7 at 0.20 -> 3.5    C 0.6 at 0.05 -> 12    D 0.2 at 0.01 -> 20
# Static: cheap C, frontier A, default D. Ladder C > B > A.
MEMBERS = [member(A, 0.9, 1.0), member(B, 0.7, 0.2), member(C, 0.6, 0.05), member(D, 0.2, 0.01)]
QUALITY = {A: 0.9, B: 0.7, C: 0.6, D: 0.2}
STATIC = {"cheap_config": C, "frontier_config": A, "default_config": D}


def router(**constants) -> Router:
    return Router(build_table({"r": MEMBERS, "*": MEMBERS}, static=STATIC, ladders={"*": [C, B, A]}, **constants))


# ------------------------------------------------------------------ 1. the quality floor
# Floor 0.65: C (0.6) and D (0.2) are below it. A choice below gives way to the best member at or above it in the
# greedy order: B (3.5 per dollar) before A (0.9).
FLOOR = [
    # policy, role, its choice without a floor, with the floor 0.65
    ("learning_governed", None, C, B),  # the static choice C (cheap, both named) is below the floor
    ("quality_per_dollar", None, D, B),  # its own ranking puts the members below the floor last
    ("ladder", None, C, B),  # the first rung C is below the floor
    ("workflow_default", None, D, B),  # default_config D
    ("frontier_only", None, A, A),  # A is above: kept
    ("cheap_only", None, C, B),
    ("static_hybrid", None, C, B),
    ("static_hybrid", "reviewer", A, A),  # the frontier for a reviewer: kept
    ("trace_governed", None, C, B),  # cheap first
]


def test_the_floor_table_covers_every_builtin_policy() -> None:
    assert {row[0] for row in FLOOR} == set(BUILTIN)


@pytest.mark.parametrize(("policy", "role", "without", "with_floor"), FLOOR, ids=[f"{r[0]}-{r[1]}" for r in FLOOR])
def test_every_policy_honours_the_quality_floor(policy: str, role: str | None, without: str, with_floor: str) -> None:
    assert router().route("r", role=role, policy=policy).config == without
    decision = router(min_quality=0.65).route("r", role=role, policy=policy)
    assert decision.config == with_floor
    if with_floor != without and policy != "quality_per_dollar":  # the router replaced a choice below the floor
        assert f"{without} is below the quality floor 0.65" in decision.reason


def test_a_floor_nobody_reaches_leaves_the_choice_and_says_so() -> None:
    decision = router(min_quality=0.95).route("r", policy="workflow_default")
    assert decision.config == D and "every member is below the quality floor 0.95" in decision.reason


def test_a_pinned_role_keeps_its_config_below_the_floor() -> None:
    table = build_table({"*": MEMBERS}, static={**STATIC, "pinned": {"reviewer": D}}, min_quality=0.65)
    assert Router(table).route("*", role="reviewer").config == D


def test_exploration_draws_only_above_the_floor() -> None:
    # Floor 0.65, exploration 0.5: the greedy choice B, the only other member at or above the floor A; C and D are
    # never drawn. Propensity 0.5 / 1 for each.
    r = router(min_quality=0.65, exploration=0.5)
    seen = {
        (d.config, d.propensity)
        for d in (r.route("r", policy="quality_per_dollar", rng=random.Random(s)) for s in range(40))
    }
    assert seen == {(B, 0.5), (A, 0.5)}


# ------------------------------------------------------------------ 2. after a failure
# failed configs -> what every policy may choose: the members above the failed configs' highest quality while any
# remain (then each policy's own rule among them), else the highest-quality member left.
FAILED = [
    ((C,), {A, B}),  # above 0.6: A, B
    ((D,), {A, B, C}),  # above 0.2: all the others
    ((B,), {A}),  # above 0.7: A alone
    ((A,), {B}),  # nothing above 0.9: the highest quality left, B (never the cheaper, weaker C or D)
    ((B, A), {C}),  # nothing above 0.9: C (0.6) before D (0.2)
    ((D, C, B), {A}),
]


@pytest.mark.parametrize("policy", BUILTIN)
@pytest.mark.parametrize(("failures", "allowed"), FAILED, ids=[",".join(q[0]) for q in FAILED])
def test_after_a_failure_no_policy_chooses_a_weaker_member(policy: str, failures: tuple, allowed: set) -> None:
    decision = router().route("r", failures=failures, policy=policy)
    assert decision.config in allowed, decision.reason
    if len(allowed) == 1 and all(QUALITY[c] <= max(QUALITY[f] for f in failures) for c in allowed):
        assert "the highest-quality member left" in decision.reason


@pytest.mark.parametrize(
    ("policy", "failures", "expected"),
    [
        ("ladder", (C,), B),  # the next rung
        ("ladder", (C, B), A),
        ("ladder", (B,), A),  # the rung after the last failed one
        ("trace_governed", (C,), A),  # the frontier
        ("quality_per_dollar", (C,), B),  # the best per dollar above 0.6
        ("quality_per_dollar", (A,), B),  # the highest quality left (the issue: it chose the weakest)
        ("cheap_only", (D,), C),  # the cheap config, above 0.2
    ],
)
def test_each_policy_follows_its_own_rule_among_the_members_allowed(
    policy: str, failures: tuple, expected: str
) -> None:
    assert router().route("r", failures=failures, policy=policy).config == expected


def test_when_every_member_has_failed_they_are_chosen_among_again() -> None:
    decision = router().route("r", failures=(A, B, C, D), policy="trace_governed")
    assert decision.config == A and decision.reason.startswith("every candidate has failed")


# ------------------------------------------------------------------ 3. a failed key not in the pool
def test_a_failed_key_not_in_the_pool_is_refused() -> None:
    with pytest.raises(RoutingError, match=rf"not in the pool.*the pool: {A}, {B}"):
        router().route("r", pool=[A, B], failures=[C])
    with pytest.raises(RoutingError, match="x/y/z/- not in the pool"):
        router().route("r", failures=["x/y/z/-"])


def test_ratings_route_refuses_an_unknown_failed_key_with_exit_2(home) -> None:
    publish(build_table({"r": MEMBERS, "*": MEMBERS}, static=STATIC), home / "fits" / "routing-table.json")
    result = CliRunner().invoke(cli, ["route", "--home", str(home), "--region", "r", "--failed", "nope/x/y/-"])
    assert result.exit_code == 2
    assert "nope/x/y/- not in the pool" in result.output and all(c in result.output for c in (A, B, C, D))
