"""Off-policy estimates on hand-made logs (pipeline/evaluate/logged.py; docs/design.md, Verdicts on logged data).

The store: 14 learned tasks on which A and B both ran (A scores 1 on the first 10 and 0 on the last 4, B 0
everywhere: A's quality is 10/14 = 5/7 with the measured prior, B's 0, so every greedy table routes to A), then 6
held-out tasks, each logged as a dispatcher would (candidates A and B):

| task | chosen | propensity | score | weight of the greedy target (A) = 1[A] / max(p, 0.05) |
|---|---|---|---|---|
| H1 | A | 0.8  | 1 | 1.25 |
| H2 | A | 0.5  | 0 | 2 |
| H3 | B | 0.2  | 1 | 0 |
| H4 | A | 0.01 | 1 | 20 (the clip: 1 / 0.05) |
| H5 | B | 0.5  | 0 | 0 |
| H6 | no decision: A (1) and B (0) both ran, p = 1 | | | 1 (A's run) |

SNIPS(greedy) = (1.25 + 20 + 1) / (1.25 + 2 + 20 + 1) = 22.25 / 24.25; ESS = 24.25^2 / (1.25^2 + 2^2 + 20^2 + 1).
Its direct term is 5/7 on every task, so the self-normalized DR equals SNIPS (DR = q^ + (SNIPS - q^)).
"""

from __future__ import annotations

import math

import pytest
from fixtures_fit import A, B, context, decided, opened, rated

from pipeline.evaluate.logged import LoggedParts, Target, compare, logged_actions, objective_of, side, task_sums
from pipeline.fit.aggregate import Fraction
from pipeline.fit.context import Part
from pipeline.routing.table import Constants

HELD = {  # task -> (chosen by a decision or None, propensity, {config: score})
    "H1": (A, 0.8, {A: 1.0}),
    "H2": (A, 0.5, {A: 0.0}),
    "H3": (B, 0.2, {B: 1.0}),
    "H4": (A, 0.01, {A: 1.0}),
    "H5": (B, 0.5, {B: 0.0}),
    "H6": (None, None, {A: 1.0, B: 0.0}),
}


def _events(decisions: bool = True) -> list:
    events = []
    for i in range(14):
        task = f"L{i:02d}"
        events += [opened(task, hours=i), rated(f"{task}a", task, A, 1.0 if i < 10 else 0.0, hours=i + 0.5)]
        events.append(rated(f"{task}b", task, B, 0.0, hours=i + 0.5))
    for j, (task, (chosen, p, scores)) in enumerate(HELD.items()):
        hours = 100 + j
        events.append(opened(task, hours=hours))
        if chosen is not None and decisions:
            events.append(decided(f"d{task}", task, chosen, [A, B], hours=hours, propensity=p))
        events += [rated(f"{task}{c[0]}", task, c, s, hours=hours + 0.5) for c, s in scores.items()]
    return events


@pytest.fixture(scope="module")
def logged_case():
    ctx = context(*_events(), objective="quality", fraction=Fraction(7, 10))
    model = ctx.model(Part.LEARNED, Constants(prior_source="measured"), "quality")
    return ctx, model, logged_actions(ctx, Part.HELD_OUT, model)


def test_the_greedy_target_by_hand(logged_case):
    _, model, logged = logged_case
    assert model.choose("general", [A, B]) == A and logged.tasks == 6 and logged.weighted and logged.decisions == 5
    figures = side(task_sums(Target(model), logged, model), objective_of(model))
    assert figures["snips"] == pytest.approx(22.25 / 24.25)
    assert figures["dr"] == pytest.approx(22.25 / 24.25)  # a constant direct term: DR = SNIPS
    assert figures["effective_samples"] == pytest.approx(24.25**2 / (1.25**2 + 4 + 400 + 1))
    assert figures["matched"] == 4  # H1, H2, H4, H6


def test_an_exploring_target_weights_every_candidate(logged_case):
    """Epsilon 0.2 over two candidates: pi(A) = 0.8, pi(B) = 0.2. Weights pi / max(p, 0.05): H1 1, H2 1.6, H3 1,
    H4 16, H5 0.4, H6 0.8 (A) and 0.2 (B); SNIPS = (1 + 1 + 16 + 0.8) / 21 = 18.8 / 21.
    DR: the direct term 0.8 * 5/7 + 0.2 * 0 = 4/7 on every task; the correction sum w (q - q^(a)) / sum w =
    ((2 - 8 + 32 + 1.6) / 7 + 1) / 21 (H3's B scored 1 against q^(B) = 0); DR = 4/7 + that."""
    _, model, logged = logged_case
    figures = side(task_sums(Target(model, 0.2, "epsilon"), logged, model), objective_of(model))
    assert figures["snips"] == pytest.approx(18.8 / 21)
    assert figures["dr"] == pytest.approx(4 / 7 + (27.6 / 7 + 1) / 21)
    thompson = side(task_sums(Target(model, 0.2, "thompson"), logged, model), objective_of(model))
    # a Thompson draw almost never picks B (posterior 0 against 5/7 with 14 ratings each): close to greedy
    assert thompson["snips"] == pytest.approx(22.25 / 24.25, abs=2e-3)


def test_without_propensities_the_estimate_is_unweighted():
    """No decision logged: every run has p = 1 and the greedy target's SNIPS is A's mean score over the held-out
    tasks A ran: H1 1, H2 0, H4 1, H6 1 -> 3/4."""
    ctx = context(*_events(decisions=False), objective="quality", fraction=Fraction(7, 10))
    model = ctx.model(Part.LEARNED, Constants(prior_source="measured"), "quality")
    logged = logged_actions(ctx, Part.HELD_OUT, model)
    assert not logged.weighted and logged.decisions == 0
    assert side(task_sums(Target(model), logged, model), objective_of(model))["snips"] == pytest.approx(0.75)


def test_the_paired_interval_is_seeded_and_zero_for_one_policy(logged_case):
    _, model, logged = logged_case
    greedy, explorer = (task_sums(t, logged, model) for t in (Target(model), Target(model, 0.3, "epsilon")))
    same = compare(greedy, greedy, objective_of(model), seed=1)
    assert same["snips"] == {"value": 0.0, "ci95": (0.0, 0.0)}
    one, two = (compare(explorer, greedy, objective_of(model), seed=1) for _ in range(2))
    assert one == two  # deterministic
    low, high = one["snips"]["ci95"]
    assert low <= one["snips"]["value"] <= high and one["snips"]["value"] < 0  # exploring costs on these logs
    assert math.isfinite(one["dr"]["value"])


def test_logged_parts_name_how_they_were_weighted(logged_case):
    ctx, model, _ = logged_case
    parts = LoggedParts.of(ctx, lambda part: ctx.model(part, Constants(prior_source="measured"), "quality"))
    figures = parts.compare(Target(model), Target(model, 0.3, "epsilon"), seed=0)
    assert figures["weighted"] and figures["propensity_clip"] == 0.05 and figures["tasks"] == 6
