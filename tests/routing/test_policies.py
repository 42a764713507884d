"""Each built-in policy on one small table, and register_policy."""

from __future__ import annotations

import random

import pytest
from fixtures_routing import A, B, C, D, build_table, member

from pipeline.routing import Router, register_policy
from pipeline.routing.policies import POLICIES

# A frontier (quality 0.9, cost 1.0), B middle, C cheap (0.05), D cheapest but poor.
MEMBERS = [member(A, 0.9, 1.0), member(B, 0.7, 0.2), member(C, 0.6, 0.05), member(D, 0.2, 0.01)]


@pytest.fixture
def router():
    return Router(
        build_table(
            {"r": MEMBERS, "*": MEMBERS},
            static={"cheap_config": C, "frontier_config": A, "default_config": B},
            ladders={"*": [C, B, A]},
        )
    )


@pytest.mark.parametrize(
    "policy,role,failures,expected,words",
    [
        ("quality_per_dollar", None, (), D, "best quality per dollar"),  # 0.2 / 0.01 = 20 > 0.6 / 0.05 = 12
        ("workflow_default", None, (), B, "default_config"),
        ("frontier_only", None, (), A, "frontier_config"),
        ("cheap_only", None, (), C, "cheap_config"),
        ("static_hybrid", "implementer", (), C, "implementer"),
        ("static_hybrid", "researcher", (), C, "researcher"),
        ("static_hybrid", "reviewer", (), A, "reviewer"),
        ("trace_governed", None, (), C, "first attempt"),
        ("trace_governed", None, (C,), A, "after 1 failure"),
        ("ladder", None, (), C, "ladder * rung 1/3"),
        ("ladder", None, (C,), B, "ladder * rung 2/3"),
        ("ladder", None, (C, B), A, "ladder * rung 3/3"),
        ("ladder", None, (B,), A, "rung 3/3"),  # next rung after the last failed one
        ("ladder", None, (C, B, A), D, "no rung left"),
        # a first attempt outside the ladder (an exploration draw) failed: it stood in for rung 1
        ("ladder", None, (D,), B, f"rung 2/3 ({D} failed in place of rung 1)"),
    ],
    ids=str,
)
def test_builtin_policies(router, policy, role, failures, expected, words):
    decision = router.route("r", role=role, failures=failures, policy=policy)
    assert (decision.config, decision.policy) == (expected, policy)
    assert words in decision.reason


def test_region_ladder_wins_over_the_global_one():
    router = Router(build_table({"r": MEMBERS, "*": MEMBERS}, ladders={"r": [B, A], "*": [C, A]}))
    assert router.route("r", policy="ladder").config == B
    assert router.route("other", policy="ladder").config == C


def test_a_ladder_explores_its_first_rung_only():
    # Exploration share 1 (epsilon): every first attempt is a uniform draw among the other members, with its
    # propensity 1 / 3; an escalation is never drawn (the next rung, propensity 1), so the logs show each explored
    # member as a first rung followed by the ladder's second.
    table = build_table({"*": MEMBERS}, ladders={"*": [C, B, A]}, exploration=1.0)
    router, rng = Router(table), random.Random(7)
    first = [router.route("*", policy="ladder", rng=rng) for _ in range(30)]
    assert {d.config for d in first} == {A, B, D} and all(d.explored and d.propensity == 1 / 3 for d in first)
    after = router.route("*", policy="ladder", failures=(D,), rng=rng)
    assert (after.config, after.explored, after.propensity, after.after) == (B, False, 1.0, (D,))


def test_no_ladder_falls_back_to_quality_per_dollar_and_says_so():
    decision = Router(build_table({"*": MEMBERS})).route("*", policy="ladder")
    assert decision.config == D and decision.reason.startswith("no ladder for * or *; best quality per dollar")


def test_named_configs_outside_the_pool_give_way():
    router = Router(build_table({"*": MEMBERS}, static={"cheap_config": C, "frontier_config": A}))
    assert router.route("*", pool=[A, B], policy="cheap_only").config == B  # cheapest in the pool
    assert router.route("*", pool=[B, C], policy="frontier_only").config == B  # highest quality in the pool
    assert "not in pool" in router.route("*", pool=[A, B], policy="cheap_only").reason
    assert router.route("*", pool=[B, D], policy="workflow_default").reason.startswith("default_config not named")


def test_register_policy_adds_a_team_policy():
    def alphabetical(router, view, pool, role, failures):
        return min(pool), "first key", False

    register_policy("alphabetical_test", alphabetical)
    try:
        decision = Router(build_table({"*": MEMBERS})).route("*", pool=[D, B], policy="alphabetical_test")
        assert (decision.config, decision.reason) == (B, "first key")
    finally:
        POLICIES.pop("alphabetical_test")


def test_a_policy_choosing_outside_the_pool_is_refused():
    from pipeline.errors import RoutingError

    register_policy("rogue_test", lambda router, view, pool, role, failures: ("not/in/the/pool", "", False))
    try:
        with pytest.raises(RoutingError, match="not in the pool"):
            Router(build_table({"*": MEMBERS})).route("*", policy="rogue_test")
    finally:
        POLICIES.pop("rogue_test")
