"""Thompson exploration (pipeline.routing.thompson): the logged propensity against a brute-force count of draws."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pipeline.routing import Router
from pipeline.routing.thompson import posterior_sd, win_probability
from tests.fixtures_routing import A, B, C, D, build_table, member

# Four members of region r under quality per dollar. A: quality 0.9 at $1.00 (0.9 per dollar, many ratings: a
# narrow posterior); B: 0.6 at $0.50 (1.2 per dollar, 12 ratings); C: 0.3 at $0.20 (1.5 per dollar, 4 ratings:
# wide); D: 0.5 at $0.40 (1.25 per dollar, 2 ratings: widest). The greedy choice is C; draws favour C and the
# uncertain D, rarely A.
MEMBERS = [member(A, 0.9, 1.0, n=200), member(B, 0.6, 0.5, n=12), member(C, 0.3, 0.2, n=4), member(D, 0.5, 0.4, n=2)]


def router(exploration: float) -> Router:
    return Router(build_table({"r": MEMBERS}, exploration=exploration, exploration_mode="thompson"))


def test_the_propensities_are_a_distribution_and_match_a_brute_force_count():
    rt = router(1.0)  # every task a Thompson draw
    rows = [rt.view("r").row(c) for c in (A, B, C, D)]
    exact = {c: win_probability(rows, c, "quality_per_dollar", rt.constants) for c in (A, B, C, D)}
    assert sum(exact.values()) == pytest.approx(1.0, abs=1e-6)
    rng = random.Random(7)
    n = 20_000
    decisions = [rt.route("r", rng=rng) for _ in range(n)]
    counts = Counter(d.config for d in decisions)
    for c, p in exact.items():
        # binomial standard error sqrt(p (1 - p) / n) <= 0.0036: four of them stay within 4 of it
        assert counts[c] / n == pytest.approx(p, abs=4 * max((p * (1 - p) / n) ** 0.5, 1e-4))
        logged = {d.propensity for d in decisions if d.config == c}
        assert all(x == pytest.approx(p) for x in logged)
    assert counts[C] > counts[A]


def test_a_share_of_draws_mixes_with_the_greedy_choice():
    # exploration 0.2 under the default policy: its choice is the static choice A (the most-rated member: the table
    # publishes no gate evidence), a draw on 20% of tasks. P(A) = 0.8 + 0.2 * P_draw(A), P(C) = 0.2 * P_draw(C).
    rt = router(0.2)
    rows = [rt.view("r").row(c) for c in (A, B, C, D)]
    rng = random.Random(3)
    by_config = {}
    for _ in range(2000):
        d = rt.route("r", rng=rng)
        by_config[d.config] = d
    p_draw = {c: win_probability(rows, c, "quality_per_dollar", rt.constants) for c in (A, C)}
    assert by_config[A].propensity == pytest.approx(0.8 + 0.2 * p_draw[A])
    assert by_config[C].propensity == pytest.approx(0.2 * p_draw[C])
    assert by_config[C].explored and "Thompson draw" in by_config[C].reason


def test_no_draw_after_a_failure_and_the_spread_narrows_with_weight():
    rt = router(1.0)
    d = rt.route("r", failures=[C], rng=random.Random(0))
    assert d.propensity == 1.0 and not d.explored
    assert posterior_sd(rt.view("r").row(A), 3.0) < posterior_sd(rt.view("r").row(D), 3.0)
