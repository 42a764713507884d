"""Router: the gate of v1 tables as a decision table, pools, exploration, properties (the v1.1 gate: test_gate)."""

from __future__ import annotations

import random

import pytest
from fixtures_routing import A, B, C, D, build_table, member
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import RoutingError
from pipeline.routing import Router

STATIC = {"default_config": A}

# The learned choice in "implement" is always C (best quality per dollar: 0.6/0.05 = 12).
# Rows: (n of C in implement, its relative advantage there, n of C in *, its advantage in *, role,
#        expected config, expected words in the reason).
GATE = [
    ("below min_samples, no global evidence", 2, 0.8, 2, 0.8, None, A, "static"),
    ("enough samples, advantage 0", 5, 0.0, 2, 0.8, None, A, "static"),
    ("enough samples, advantage negative", 5, -0.3, 2, 0.8, None, A, "static"),
    ("enough samples, advantage null", 5, None, 2, None, None, A, "static"),
    ("both met in region", 3, 0.2, 0, None, None, C, "learned choice in implement"),
    ("region fails, global passes", 1, 0.2, 9, 0.1, None, C, "learned choice in *"),
    ("global samples but advantage <= 0", 1, 0.2, 9, 0.0, None, A, "static"),
    ("pinned role keeps its config", 9, 0.9, 9, 0.9, "reviewer", B, "pinned"),
    ("unpinned role follows the gate", 9, 0.9, 9, 0.9, "implementer", C, "learned choice in implement"),
]


@pytest.mark.parametrize("case,n_r,ra_r,n_g,ra_g,role,expected,words", GATE, ids=[g[0] for g in GATE])
def test_evidence_gate(case, n_r, ra_r, n_g, ra_g, role, expected, words):
    table = build_table(
        {
            "implement": [
                member(A, 0.9, 0.5, n=20, ra=0.5),
                member(B, 0.7, 0.2, n=20, ra=0.5),
                member(C, 0.6, 0.05, n=n_r, ra=ra_r),
            ],
            "*": [
                member(A, 0.9, 0.5, n=40, ra=0.5),
                member(B, 0.7, 0.2, n=40, ra=0.5),
                member(C, 0.6, 0.05, n=n_g, ra=ra_g),
            ],
        },
        static={"default_config": A, "pinned": {"reviewer": B}},
        min_samples=3,
        schema="routing-table/v1",
    )
    decision = Router(table).route("implement", role=role)
    assert decision.config == expected
    assert words in decision.reason
    assert decision.policy == "learning_governed"
    assert decision.propensity == 1.0 and not decision.explored
    assert decision.table_version == table.version


def test_static_choice_prefers_hybrid_then_default_then_most_rated():
    members = {
        "r": [member(A, 0.2, 0.5, n=1, ra=None), member(B, 0.1, 0.5, n=1, ra=None)],
        "*": [member(A, 0.2, 0.5, n=2, ra=None), member(B, 0.1, 0.5, n=7, ra=None)],
    }
    hybrid = Router(build_table(members, static={"cheap_config": B, "frontier_config": A, "default_config": A}))
    assert hybrid.route("r", role="implementer").config == B
    assert hybrid.route("r", role="reviewer").config == A
    assert Router(build_table(members, static={"default_config": A})).route("r").config == A
    assert Router(build_table(members)).route("r").config == B  # most fitted ratings in *


def test_unknown_region_uses_global_pool():
    table = build_table({"r": [member(A, 0.9, 0.1)], "*": [member(B, 0.9, 0.1), member(C, 0.1, 0.1)]})
    decision = Router(table).route("never-seen")
    assert decision.config == B
    assert set(decision.candidates) == {B, C}


def test_empty_pool_is_an_error():
    router = Router(build_table({"r": [member(A, 0.9, 0.1)], "*": [member(A, 0.9, 0.1)]}))
    with pytest.raises(RoutingError, match="empty pool"):
        router.route("r", pool=[])


def test_unknown_policy_is_an_error_naming_the_known_ones():
    router = Router(build_table({"*": [member(A, 0.9, 0.1)]}))
    with pytest.raises(RoutingError, match="unknown policy 'nope'; known: cheap_only"):
        router.route("*", policy="nope")


def test_pool_member_absent_from_the_region_takes_global_then_prior_row():
    table = build_table(
        {
            "r": [member(A, 0.5, 1.0, n=4, weight=4)],
            "*": [member(A, 0.5, 1.0, n=4, weight=4), member(B, 0.8, 1.0, n=1, weight=1)],
        }
    )
    router = Router(table)
    view = router.view("r")
    assert view.row(B).source == "*" and view.row(B).quality == 0.8
    prior = view.row("new/x/y/z")
    # prior row: weighted mean quality (4*0.5 + 1*0.8) / 5 = 0.56, mean known cost 1.0, never passes the gate
    assert (prior.source, prior.quality, prior.cost_usd, prior.n_ratings) == ("prior", 0.56, 1.0, 0)
    decision = router.route("r", pool=["new/x/y/z", B], policy="quality_per_dollar")
    assert decision.config == B


def test_failures_leave_the_pool_unless_every_member_failed():
    router = Router(build_table({"*": [member(A, 0.9, 0.1), member(B, 0.5, 0.1)]}, static=STATIC))
    assert router.route("*", failures=[A], policy="quality_per_dollar").config == B
    again = router.route("*", pool=[A], failures=[A], policy="quality_per_dollar")
    assert again.config == A and again.reason.startswith("every candidate has failed")


def test_seeded_exploration_is_reproducible_and_propensities_sum_to_one():
    members = [member(A, 0.9, 0.1), member(B, 0.5, 0.1), member(C, 0.4, 0.1), member(D, 0.3, 0.1)]
    router = Router(build_table({"*": members}, exploration=0.3))
    runs = [[router.route("*", rng=random.Random(7)) for _ in range(1)] for _ in range(2)]
    assert runs[0] == runs[1]
    seq1 = [router.route("*", rng=rng) for rng in [random.Random(11)] for _ in range(300)]
    rng = random.Random(11)
    seq2 = [router.route("*", rng=rng) for _ in range(300)]
    assert seq1 == seq2
    # Propensity of each possible choice: greedy 1 - eps, every other eps / (m - 1); they sum to 1.
    propensity = {d.config: d.propensity for d in seq1}
    assert set(propensity) == {A, B, C, D}
    assert propensity[A] == pytest.approx(0.7)
    assert sum(propensity.values()) == pytest.approx(1.0)
    assert all(d.explored == (d.config != A) for d in seq1)
    share = sum(d.explored for d in seq1) / len(seq1)
    assert 0.2 < share < 0.4


def test_pinned_role_is_never_explored():
    router = Router(
        build_table(
            {"*": [member(A, 0.9, 0.1), member(B, 0.5, 0.1)]}, static={"pinned": {"reviewer": B}}, exploration=0.9
        )
    )
    rng = random.Random(1)
    decisions = [router.route("*", role="reviewer", rng=rng) for _ in range(50)]
    assert {(d.config, d.propensity, d.explored) for d in decisions} == {(B, 1.0, False)}


def test_decision_logs_as_a_valid_route_decided_event():
    from pipeline.streams.events import validate_object

    router = Router(build_table({"*": [member(A, 0.9, 0.1), member(B, 0.5, 0.1)]}, exploration=0.2))
    event = validate_object(router.route("*", rng=random.Random(3)).to_event("T-1"))
    assert event.type == "route.decided" and event.chosen in (A, B) and 0 < event.propensity <= 1


def test_explain_lists_rows_and_gate_checks():
    # Static choice: the default B. A ranks above it (0.9 vs 0.5 at the same cost); its test against B in r has
    # 2 shared tasks (< 3), in * 12 with a lower bound above 0: A, by the global test.
    table = build_table(
        {
            "r": [member(A, 0.9, 0.5, n=2, gate={B: (2, 0.4, 0.1)}), member(B, 0.5, 0.5, n=9)],
            "*": [member(A, 0.9, 0.5, gate={B: (12, 0.4, 0.2)}), member(B, 0.5, 0.5)],
        },
        static={"default_config": B},
    )
    router = Router(table)
    out = router.describe(router.route("r"), "r")
    assert [row["config"] for row in out["rows"]] == [A, B]
    assert out["gate"]["region_test"] == {
        "region": "r",
        "learned": A,
        "against": B,
        "tests": [
            {
                "config": A,
                "row_source": "r",
                "test": {"shared_tasks": 2, "difference": 0.4, "lower": 0.1, "passes": False},
            }
        ],
    }
    assert out["gate"]["global_test"]["tests"][0]["test"]["passes"] is True
    assert out["config"] == A and "learned choice in *" in out["reason"]


# ------------------------------------------------------------------ properties
CONFIGS = [A, B, C, D, "x/-/y/-", "new/-/unknown/-"]
member_st = st.builds(
    lambda cfg, q, cost, n, ra, gate: member(cfg, q, cost, n=n, ra=ra, gate=gate),
    st.sampled_from(CONFIGS[:5]),
    st.floats(0, 1),
    st.one_of(st.none(), st.floats(0.001, 10)),
    st.integers(0, 20),
    st.one_of(st.none(), st.floats(-2, 2)),
    st.one_of(  # the gate's tests against some static choices: (shared tasks, difference, lower bound)
        st.none(),
        st.dictionaries(
            st.sampled_from(CONFIGS),
            st.tuples(st.integers(0, 50), st.floats(-5, 5), st.one_of(st.none(), st.floats(-5, 5))),
            max_size=3,
        ),
    ),
)


def _unique(ms):
    return list({m.config: m for m in ms}.values())


table_st = st.builds(
    lambda regions, star, static, eps: build_table(
        {**{f"r{i}": _unique(ms) for i, ms in enumerate(regions)}, "*": _unique(star)}, static=static, exploration=eps
    ),
    st.lists(st.lists(member_st, max_size=5), max_size=3),
    st.lists(member_st, min_size=1, max_size=5),
    st.fixed_dictionaries(
        {},
        optional={
            "default_config": st.sampled_from(CONFIGS),
            "cheap_config": st.sampled_from(CONFIGS),
            "frontier_config": st.sampled_from(CONFIGS),
            "pinned": st.dictionaries(st.sampled_from(["reviewer", "implementer"]), st.sampled_from(CONFIGS)),
        },
    ),
    st.sampled_from([0.0, 0.3]),
)

POLICY_NAMES = [
    "learning_governed",
    "quality_per_dollar",
    "ladder",
    "workflow_default",
    "frontier_only",
    "cheap_only",
    "static_hybrid",
    "trace_governed",
]


@settings(max_examples=150, deadline=None)
@given(
    table=table_st,
    pool=st.lists(st.sampled_from(CONFIGS), min_size=1, max_size=6),
    region=st.sampled_from(["r0", "r1", "r2", "*", "elsewhere"]),
    role=st.sampled_from([None, "reviewer", "implementer"]),
    policy=st.sampled_from(POLICY_NAMES),
    failures=st.lists(st.sampled_from(CONFIGS), max_size=2),
    seed=st.integers(0, 3),
)
def test_decision_is_in_the_pool_and_deterministic_without_exploration(
    table, pool, region, role, policy, failures, seed
):
    router = Router(table)
    outside = [f for f in failures if f not in pool]
    if outside:  # a failed config must be in the pool (its quality is what escalation compares with)
        with pytest.raises(RoutingError, match="not in the pool"):
            router.route(region, pool=pool, role=role, failures=failures, policy=policy)
        failures = [f for f in failures if f in pool]
    decision = router.route(region, pool=pool, role=role, failures=failures, policy=policy)
    assert decision.config in pool
    assert decision.propensity == 1.0 and not decision.explored
    fresh = Router(table).route(region, pool=pool, role=role, failures=failures, policy=policy)
    assert fresh == decision
    explored = router.route(region, pool=pool, role=role, failures=failures, policy=policy, rng=random.Random(seed))
    assert explored.config in pool and 0 < explored.propensity <= 1
    if table.constants.exploration == 0.0:
        assert explored == decision
