"""The evidence gate, escalation after failures and the quality floor, on hand-made tables.

Each case states the table's numbers and works the expected choice out in its comment.
"""

from __future__ import annotations

import random

import pytest
from fixtures_routing import A, B, C, D, build_table, member

from pipeline.routing import Router

# The members of region "implement" (quality, cost; value = quality per dollar):
#   A frontier 0.9 at 1.00 -> 0.9     B middle 0.7 at 0.20 -> 3.5
#   C cheap    0.6 at 0.05 -> 12      D cheapest 0.3 at 0.01 -> 30
# Greedy order by quality per dollar: D (30) > C (12) > B (3.5) > A (0.9).
# Static: cheap_config C, frontier_config A, so static_hybrid gives C to every role but reviewer (A).
STATIC = {"cheap_config": C, "frontier_config": A, "default_config": B}


def gate_table(region_tests: dict, global_tests: dict, **constants) -> Router:
    """``*_tests``: config -> {static choice: (shared tasks, difference, lower bound)} in implement / in ``*``."""

    def members(tests: dict) -> list:
        return [
            member(A, 0.9, 1.0, n=40, gate=tests.get(A, {})),
            member(B, 0.7, 0.2, n=40, gate=tests.get(B, {})),
            member(C, 0.6, 0.05, n=40, gate=tests.get(C, {})),
            member(D, 0.3, 0.01, n=40, gate=tests.get(D, {})),
        ]

    return Router(
        build_table({"implement": members(region_tests), "*": members(global_tests)}, static=STATIC, **constants)
    )


PASS = (40, 8.0, 2.5)  # 40 shared tasks, difference +8 per dollar, one-sided 95% lower bound +2.5 > 0: passes
NOISY = (40, 3.0, -1.0)  # a positive difference whose lower bound is below 0: the evidence is not enough
FEW = (2, 9.0, 4.0)  # a large difference on 2 shared tasks < min_samples 3: not enough tasks

GATE = [
    # D ranks first and beats the static choice C in implement: D, by the region's test.
    ("region test passes", {D: {C: PASS}}, {}, None, D, "learned choice in implement"),
    # D's region test has too few tasks; in the global pool D beats C on 40 tasks: D, by the global test.
    ("region too few, global passes", {D: {C: FEW}}, {D: {C: PASS}}, None, D, "learned choice in *"),
    # D's lower bound is below 0 in both: nothing ranked above C passes, so the static choice C.
    ("noisy in both: static", {D: {C: NOISY}}, {D: {C: NOISY}}, None, C, "static: static_hybrid cheap"),
    # No test published at all (D never shared a task with C): the static choice C.
    ("no evidence: static", {}, {}, None, C, "has no published test against"),
    # For a reviewer the static choice is the frontier A, ranked last: B, C and D rank above it. D has no test
    # against A, C's test against A passes: C (the first member above A whose test passes, D lacking evidence).
    ("reviewer: tested against A", {C: {A: PASS}}, {}, "reviewer", C, "1 member(s) ranked above it lack"),
]


@pytest.mark.parametrize("case,region,star,role,expected,words", GATE, ids=[g[0] for g in GATE])
def test_the_gate_asks_whether_the_learned_choice_beats_the_static_one(case, region, star, role, expected, words):
    decision = gate_table(region, star).route("implement", role=role)
    assert decision.config == expected
    assert words in decision.reason


def test_the_reason_carries_the_numbers_of_the_test_that_decided():
    decision = gate_table({D: {C: FEW}}, {D: {C: PASS}}).route("implement")
    assert decision.reason == (
        f"gate not met in implement: {D} vs {C}: 2 shared tasks < min_samples 3; "
        f"learned choice in *: quality per dollar (total quality / total cost) of {D} vs {C} on 40 shared tasks: "
        "difference +8, one-sided 95% lower bound +2.5 > 0"
    )
    static = gate_table({D: {C: NOISY}}, {D: {C: NOISY}}).route("implement")
    assert static.reason == (
        f"gate not met in implement: {D} vs {C} on 40 shared tasks: difference +3, one-sided 95% lower bound -1 <= 0; "
        f"in *: {D} vs {C} on 40 shared tasks: difference +3, one-sided 95% lower bound -1 <= 0; "
        f"static: static_hybrid cheap {C}"
    )


def test_the_static_choice_ranked_first_is_the_learned_choice_too():
    # Pool {A, B, C}: C (12 per dollar) ranks first and is the static choice: C, no test needed.
    decision = gate_table({}, {}).route("implement", pool=[A, B, C])
    assert decision.config == C
    assert decision.reason == f"learned choice in implement is the static choice: static_hybrid cheap {C}"


def test_a_v1_table_keeps_the_gate_it_was_published_with():
    # A v1 table publishes no tests: the learned choice D passes on n 40 >= 3 and relative advantage 0.5 > 0.
    members = [member(A, 0.9, 1.0, n=40), member(C, 0.6, 0.05, n=40), member(D, 0.3, 0.01, n=40, ra=0.5)]
    router = Router(build_table({"implement": members, "*": members}, static=STATIC, schema="routing-table/v1"))
    decision = router.route("implement")
    assert (decision.config, decision.reason) == (
        D,
        "learned choice in implement: n 40 >= 3, relative advantage 0.5 > 0",
    )


# ------------------------------------------------------------------ escalation that escalates
def test_after_the_cheap_config_fails_the_gate_tests_the_members_above_it():
    # The case: C (cheap, static) failed. The pool narrows to the members of quality above C's 0.6:
    # A (0.9) and B (0.7); D (0.3) is weaker and left out. The static choice among them: C is not in the pool,
    # so the most-rated pool member (a tie at n 40: key order, A). B ranks above A (3.5 > 0.9 per dollar) and its
    # test against A passes: B.
    router = gate_table({B: {A: PASS}}, {})
    decision = router.route("implement", failures=[C])
    assert decision.config == B
    assert decision.reason.startswith("escalating above the failed configs' quality 0.6: learned choice in implement")


def test_other_policies_given_failures_escalate_to_stronger_members():
    # quality_per_dollar alone would pick D (30 per dollar) after C failed; D's quality 0.3 is below C's 0.6,
    # so it picks the best per dollar among A and B: B (3.5 > 0.9).
    router = gate_table({}, {})
    assert router.route("implement", failures=[C], policy="quality_per_dollar").config == B
    # Nothing above the failed A (0.9): the highest-quality member left, B (0.7), never the cheaper, weaker D.
    decision = router.route("implement", failures=[A], policy="quality_per_dollar")
    assert decision.config == B
    assert decision.reason.startswith("no member left above the failed configs' quality 0.9: the highest-quality")


def test_the_ladder_goes_to_the_highest_quality_member_after_its_last_rung():
    # Ladder C > B. Both failed: left are A (0.9) and D (0.3); the highest quality is A, never the cheaper D.
    members = [member(A, 0.9, 1.0), member(B, 0.7, 0.2), member(C, 0.6, 0.05), member(D, 0.3, 0.01)]
    router = Router(build_table({"implement": members, "*": members}, static=STATIC, ladders={"*": [C, B]}))
    assert router.route("implement", failures=[C], policy="ladder").config == B
    decision = router.route("implement", failures=[C, B], policy="ladder")
    assert decision.config == A
    assert decision.reason == (
        f"escalating above the failed configs' quality 0.7: ladder * has no rung left in the pool; highest-quality "
        f"member left {A} (0.9)"
    )


def test_trace_governed_after_the_frontier_failed_takes_the_strongest_left():
    # trace_governed: cheap C first, frontier A after a failure. A failed too: no member left is above A's 0.9,
    # so B and D both stay; the frontier A is not among them, so the highest quality left wins: B (0.7), not D.
    router = gate_table({}, {})
    assert router.route("implement", failures=[C], policy="trace_governed").config == A
    assert router.route("implement", failures=[C, A], policy="trace_governed").config == B


def test_no_exploration_draw_once_a_task_has_a_failure():
    router = gate_table({D: {C: PASS}}, {}, exploration=0.9)
    rng = random.Random(5)
    first = [router.route("implement", rng=rng) for _ in range(40)]
    assert any(d.explored for d in first)  # exploration 0.9 explores a first attempt
    after = [router.route("implement", failures=[D], rng=rng) for _ in range(40)]
    assert {(d.explored, d.propensity) for d in after} == {(False, 1.0)}


# ------------------------------------------------------------------ the quality floor
def test_the_quality_floor_takes_the_best_per_dollar_among_good_enough_members():
    members = [member(A, 0.9, 1.0), member(B, 0.7, 0.2), member(C, 0.6, 0.05), member(D, 0.3, 0.01)]

    def route(floor: float | None) -> str:
        table = build_table({"implement": members, "*": members}, min_quality=floor)
        return Router(table).route("implement", policy="quality_per_dollar").config

    assert route(None) == D  # no floor: 30 per dollar
    assert route(0.5) == C  # C (0.6), B (0.7), A (0.9) reach 0.5; the best per dollar among them is C (12)
    assert route(0.65) == B  # B and A reach 0.65: B (3.5 > 0.9)
    assert route(0.95) == A  # nobody reaches 0.95: the highest quality, A


def test_the_quality_floor_orders_the_gate_too():
    # Floor 0.65: the greedy order is B (3.5), A (0.9), then the members below the floor by quality: C, D.
    # The static choice C now ranks third: B and A rank above it. B's test against C passes: B.
    members = [
        member(A, 0.9, 1.0),
        member(B, 0.7, 0.2, gate={C: PASS}),
        member(C, 0.6, 0.05),
        member(D, 0.3, 0.01, gate={C: PASS}),
    ]
    table = build_table({"implement": members, "*": members}, static=STATIC, min_quality=0.65)
    assert Router(table).route("implement").config == B
