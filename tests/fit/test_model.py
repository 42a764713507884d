"""The model (docs/design.md, Fit) on the hand-worked example of ``fixtures_fit.worked_events``.

Sums (w = precision*confidence*importance; the rejection is score 0 with w 2):
    A implement: W = 1 + 1 + 0.5 = 2.5, S = 1.0 + 0.5 + 0.4 = 1.9, n = 3
    A review:    W = 1, S = 0.2, n = 1            A all: W = 3.5, S = 2.1 -> measured 0.6
    B implement: W = 2 + 1 = 3, S = 0 + 0.6 = 0.6, n = 2
    B review:    W = 1, S = 1.0, n = 1            B all: W = 4, S = 1.6 -> measured 0.4
    global: W = 7.5, S = 3.7 -> 0.493333...
Costs cost_t,c (known only when every attempt has a cost): t1 A 0.40, t1 B 1.00, t2 B 2.00, t3 A 0.20;
t2 A (attempt without cost) and t3 B (no attempt) are unknown.
    cost(A, implement) = 0.40 (t1 only)   cost(A, review) = 0.20   cost(A, *) = (0.40 + 0.20) / 2 = 0.30
    cost(B, implement) = (1 + 2) / 2 = 1.5   cost(B, review): none in review -> B's mean 1.5
    a config never rated: the global mean (0.4 + 1 + 2 + 0.2) / 4 = 0.9
"""

from __future__ import annotations

import json
from fractions import Fraction

import polars as pl
import pytest
from fixtures_fit import A, B, C, attempted, context, named, opened, rated, worked_events

from pipeline.errors import FitError
from pipeline.fit.context import Part
from pipeline.fit.model import GLOBAL, MEMBER_COLUMNS, fit_values, load_shipped, static_choice
from pipeline.fit.shipped import Shipped
from pipeline.fit.table_build import build_table
from pipeline.routing.router import Router
from pipeline.routing.table import Constants, Static

MEASURED = Constants(prior_source="measured", prior_weight=3)


@pytest.fixture(scope="module")
def worked():
    return worked_events()


def fit_model(events, constants, shipped, objective="quality_per_dollar", part=Part.FULL, **spec):
    """The model of ``events`` fitted on ``part`` (the recency sums of the constants' half-life included)."""
    lives = () if constants.half_life_days is None else (constants.half_life_days,)
    ctx = context(*events, shipped=shipped, objective=objective, half_lives=lives, **spec)
    return ctx.model(part, constants)


def member(model, region, config) -> dict:
    rows = model.members.filter((pl.col("region") == region) & (pl.col("config_key") == config))
    assert rows.height == 1
    return rows.row(0, named=True)


def test_measured_prior_and_posterior_quality(worked):
    model = fit_model(worked, MEASURED, Shipped())
    assert tuple(model.members.columns) == MEMBER_COLUMNS
    assert model.members.select("region", "config_key").rows() == [
        (GLOBAL, A),
        (GLOBAL, B),
        ("implement", A),
        ("implement", B),
        ("review", A),
        ("review", B),
    ]
    # measured prior in a region: c's quality over all regions shrunk to g = 3.7 / 7.5 by k = 3 pseudo-ratings,
    # p(A) = (3g + 2.1) / (3 + 3.5) = 3.58 / 6.5, p(B) = (3g + 1.6) / (3 + 4) = 3.08 / 7 = 0.44; in '*' p = g.
    g, p_a, p_b = 3.7 / 7.5, 3.58 / 6.5, 0.44
    # q(A, implement) = (3 * p(A) + 1.9) / (3 + 2.5)
    a_impl = member(model, "implement", A)
    assert (a_impl["prior"], a_impl["weight"], a_impl["n_ratings"]) == (pytest.approx(p_a), 2.5, 3)
    assert a_impl["quality"] == pytest.approx((3 * p_a + 1.9) / 5.5)
    assert member(model, "review", A)["quality"] == pytest.approx((3 * p_a + 0.2) / 4)
    # q(A, *) = (3g + 2.1) / 6.5: the prior of A's regions (a few ratings never decide alone, not even in '*')
    assert (member(model, GLOBAL, A)["prior"], member(model, GLOBAL, A)["quality"]) == (
        pytest.approx(g),
        pytest.approx(p_a),
    )
    assert member(model, "implement", B)["quality"] == pytest.approx((3 * p_b + 0.6) / 6)  # 0.32
    assert member(model, "review", B)["quality"] == pytest.approx((3 * p_b + 1.0) / 4)  # 0.58
    assert member(model, GLOBAL, B)["n_ratings"] == 3
    assert model.global_quality == pytest.approx(3.7 / 7.5)


def test_unseen_pairs_fall_back_to_the_prior_and_the_global_mean(worked):
    model = fit_model(worked, MEASURED, Shipped())
    # C was never rated: prior = global mean 3.7 / 7.5; with W = 0, q = (3p + 0) / 3 = p
    assert model.quality(C, "implement") == pytest.approx(3.7 / 7.5)
    assert model.prior(C, "nowhere") == pytest.approx(3.7 / 7.5)
    # A in a region it never saw: q = p = A's measured prior (3g + 2.1) / 6.5
    assert model.quality(A, "research") == pytest.approx(3.58 / 6.5)
    assert model.n(A, "research") == 0 and model.n(A, "implement") == 3
    # k = 0 and W = 0: q = p = A's weighted mean 2.1 / 3.5 (nothing shrinks)
    assert fit_model(worked, MEASURED.model_copy(update={"prior_weight": 0}), Shipped()).quality(
        A, "research"
    ) == pytest.approx(0.6)
    # k = 0 and W > 0: q = S / W = 1.9 / 2.5
    assert fit_model(worked, MEASURED.model_copy(update={"prior_weight": 0}), Shipped()).quality(
        A, "implement"
    ) == pytest.approx(0.76)


def test_shipped_prior_most_specific_selector_then_region_then_file_order(worked):
    shipped = Shipped.model_validate(
        {
            "priors": [
                {"selector": "a", "region": "*", "quality": 0.9},
                {"selector": "a/-", "region": "implement", "quality": 0.1},
                {"selector": "a/-/m1", "region": "*", "quality": 0.3},
                {"selector": "a/-/m1", "region": "review", "quality": 0.7},
                {"selector": B, "region": "*", "quality": 0.2},
                {"selector": B, "region": "*", "quality": 0.99},
            ]
        }
    )
    model = fit_model(worked, Constants(prior_source="shipped", prior_weight=3), shipped)
    # A implement: 'a/-/m1' (3 segments, '*') beats 'a/-' (2 segments, exact region): p = 0.3
    assert member(model, "implement", A)["prior"] == pytest.approx(0.3)
    assert member(model, "implement", A)["quality"] == pytest.approx((0.9 + 1.9) / 5.5)
    # A review: two 3-segment priors; the one for 'review' beats '*': p = 0.7, q = (2.1 + 0.2) / 4
    assert member(model, "review", A)["prior"] == pytest.approx(0.7)
    assert member(model, "review", A)["quality"] == pytest.approx(0.575)
    # the global pool only takes priors for '*'
    assert member(model, GLOBAL, A)["prior"] == pytest.approx(0.3)
    # two identical selectors: the first in the file wins
    assert member(model, "implement", B)["prior"] == pytest.approx(0.2)
    # no matching prior: the measured one (C never rated: the global mean)
    assert model.prior(C, "implement") == pytest.approx(3.7 / 7.5)
    assert model.prior("a/r/m1/-", "review") == pytest.approx(0.9)  # only 'a' matches this key
    # source measured ignores shipped priors
    assert fit_model(worked, MEASURED, shipped).prior(A, "review") == pytest.approx(3.58 / 6.5)


def test_cost_means_fallbacks_floor_and_unknown_cost_estimate(worked):
    model = fit_model(worked, MEASURED, Shipped())
    assert model.cost_known
    assert member(model, "implement", A)["cost_usd"] == pytest.approx(0.40)
    assert member(model, "review", A)["cost_usd"] == pytest.approx(0.20)
    assert member(model, GLOBAL, A)["cost_usd"] == pytest.approx(0.30)
    assert member(model, "implement", B)["cost_usd"] == pytest.approx(1.5)
    assert member(model, "review", B)["cost_usd"] == pytest.approx(1.5)  # B's mean over all regions
    assert model.cost(C, "implement") == pytest.approx(0.9)  # the global mean
    # floored at cost_floor_usd
    assert fit_model(worked, MEASURED.model_copy(update={"cost_floor_usd": 1.0}), Shipped()).cost(A, "implement") == 1.0
    # cost_t,c = known costs + unknown attempts * cost(c, r): t2 A = 0 + 1 * 0.40, t3 B = 0 + 1 * 1.5
    costs = named(model.task_costs(context(*worked).values(Part.FULL)), worked)
    cost_t = {(r["task"], r["config_key"]): r["cost_t"] for r in costs.iter_rows(named=True)}
    assert cost_t == pytest.approx(
        {("t1", A): 0.4, ("t1", B): 1.0, ("t2", A): 0.4, ("t2", B): 2.0, ("t3", A): 0.2, ("t3", B): 1.5}
    )


def test_objectives_and_greedy_choice(worked):
    qpd = fit_model(worked, MEASURED, Shipped())
    # p(A) = 3.58 / 6.5, p(B) = 0.44 (test_measured_prior_and_posterior_quality); q(A, implement) = 0.6459,
    # q(A, review) = 0.4631, q(B, implement) = 0.32, q(B, review) = 0.58.
    # implement: A 0.6459 / 0.4 = 1.615 beats B 0.32 / 1.5; review: A 0.4631 / 0.2 = 2.315 beats B 0.58 / 1.5
    q_a = (3 * 3.58 / 6.5 + 1.9) / 5.5
    assert member(qpd, "implement", A)["value"] == pytest.approx(q_a / 0.4)
    assert qpd.choose("implement", [A, B]) == A and qpd.choose("review", [B, A]) == A
    utility = fit_model(worked, MEASURED.model_copy(update={"lambda_": 2.0}), Shipped(), "utility")
    # utility = lambda * q - cost: A implement 2 * 0.6459 - 0.4, B review 2 * 0.58 - 1.5 = -0.34
    assert member(utility, "implement", A)["value"] == pytest.approx(2 * q_a - 0.4)
    assert member(utility, "review", B)["value"] == pytest.approx(-0.34)
    quality = fit_model(worked, MEASURED, Shipped(), "quality")
    assert quality.choose("review", [A, B]) == B  # 0.58 > 0.4631, costs ignored
    # C unseen in implement: q = g = 0.4933 beats B's 0.32 and loses to A's 0.6459
    assert quality.choose("implement", [B, C]) == C and quality.choose("implement", [A, B, C]) == A
    with pytest.raises(FitError, match="lambda"):
        fit_model(worked, MEASURED, Shipped(), "utility")
    with pytest.raises(FitError, match="unknown objective"):
        fit_model(worked, MEASURED, Shipped(), "speed")


def test_choice_ties_higher_quality_then_lower_cost_then_key_order():
    # Four configs on separate tasks, all in 'general', k = 0 so q = the task value:
    #   P: q 0.8 cost 2.0 -> qpd 0.4;  Q: q 0.4 cost 1.0 -> 0.4;  R: q 0.4 cost 1.0 -> 0.4;  S: q 0.2 cost 0.5 -> 0.4
    keys = {"P": "p/-/m/-", "Q": "q/-/m/-", "R": "r/-/m/-", "S": "s/-/m/-"}
    spec = {"P": (0.8, 2.0), "Q": (0.4, 1.0), "R": (0.4, 1.0), "S": (0.2, 0.5)}
    events = []
    for i, (name, (score, cost)) in enumerate(spec.items()):
        events += [attempted(f"x{i}", f"t{i}", keys[name], i, cost), rated(f"r{i}", f"t{i}", keys[name], score, i)]
    model = fit_model(events, Constants(prior_source="measured", prior_weight=0), Shipped())
    all_four = [keys[n] for n in "SRQP"]
    assert model.choose("general", all_four) == keys["P"]  # equal value: higher quality wins
    assert model.choose("general", [keys["S"], keys["R"]]) == keys["R"]  # equal value: 0.4 > 0.2
    assert model.choose("general", [keys["R"], keys["Q"]]) == keys["Q"]  # equal everything: key order
    quality = fit_model(events, Constants(prior_source="measured", prior_weight=0), Shipped(), "quality")
    assert quality.choose("general", [keys["R"], keys["Q"], keys["S"]]) == keys["Q"]
    frame = pl.DataFrame(
        {
            "task": ["u", "u", "v", "v", "w"],
            "region": ["general"] * 5,
            "config_key": [keys["S"], keys["P"], keys["R"], keys["Q"], keys["S"]],
        }
    )
    assert model.choose_frame(frame).rows() == [("u", keys["P"]), ("v", keys["Q"]), ("w", keys["S"])]
    with pytest.raises(ValueError, match="empty"):
        model.choose("general", [])


def test_lower_cost_breaks_a_tie_of_value_and_quality():
    # objective quality: X and Y have q 0.5 each; Y is cheaper
    events = [
        attempted("x1", "t1", "x/-/m/-", 0, 2.0),
        rated("r1", "t1", "x/-/m/-", 0.5),
        attempted("x2", "t2", "y/-/m/-", 0, 1.0),
        rated("r2", "t2", "y/-/m/-", 0.5),
    ]
    model = fit_model(events, MEASURED, Shipped(), "quality")
    assert model.choose("general", ["x/-/m/-", "y/-/m/-"]) == "y/-/m/-"


def test_no_costs_at_all_degrades_to_quality():
    events = [
        opened("t1", "implement"),
        rated("r1", "t1", A, 0.9),
        rated("r2", "t1", B, 0.6),
        attempted("x1", "t1", A, 0.5, None),
    ]
    model = fit_model(events, MEASURED, Shipped())
    assert not model.cost_known and model.effective_objective == "quality"
    assert model.members["cost_usd"].null_count() == model.members.height
    assert model.members["value"].to_list() == model.members["quality"].to_list()
    assert model.cost(A, "implement") is None
    assert model.task_costs(context(*events).values(Part.FULL))["cost_t"].null_count() == 2
    assert json.dumps(model.members.to_dicts(), allow_nan=False)  # no NaN anywhere


def test_recency_weighting_in_the_model():
    # one config, scores 1.0 (10 days before the newest event) and 0.0 (the newest): H = 10 days
    # w = 0.5 and 1: W = 1.5, S = 0.5; measured prior = 1/3; k = 3: q = (1 + 0.5) / 4.5 = 1/3
    inputs = [rated("r1", "t1", A, 1.0, 0), rated("r2", "t2", A, 0.0, 240)]
    model = fit_model(inputs, MEASURED.model_copy(update={"half_life_days": 10.0}), Shipped())
    row = member(model, "general", A)
    assert row["weight"] == pytest.approx(1.5) and row["quality"] == pytest.approx(1 / 3)
    assert member(fit_model(inputs, MEASURED, Shipped()), "general", A)["quality"] == pytest.approx(0.5)


def test_fit_on_a_part_uses_that_part_only(worked):
    # split 2/3: t1, t2 learned (every event of theirs is before t3's, the cutoff)
    ctx = context(*worked, fraction=Fraction(2, 3))
    model = ctx.model(Part.LEARNED, MEASURED)
    assert set(model.members["region"]) == {GLOBAL, "implement"}
    # over t1, t2 only: A S = 1.9, W = 2.5; B S = 0.6, W = 3; g = 2.5 / 5.5; p(A) = (3g + 1.9) / 5.5
    p_a = (3 * 2.5 / 5.5 + 1.9) / 5.5
    assert member(model, "implement", A)["quality"] == pytest.approx((3 * p_a + 1.9) / 5.5)
    assert fit_values(ctx.values(Part.LEARNED), MEASURED, Shipped(found=False)).members.equals(model.members)


def test_static_choice_roles_default_and_most_rated(worked):
    model = fit_model(worked, MEASURED, Shipped())
    hybrid = Static(cheap_config=A, frontier_config=B, default_config=C, pinned={"reviewer": C})
    assert static_choice(hybrid, "implementer") == A and static_choice(hybrid, "researcher") == A
    assert static_choice(hybrid, "reviewer") == C  # pinned wins
    assert static_choice(hybrid.model_copy(update={"pinned": {}}), "reviewer") == B
    assert static_choice(Static(cheap_config=A, default_config=C), "reviewer") == C  # no frontier: default
    # nothing named: the config with the most fitted ratings (A: 4 ratings, B: 3)
    assert static_choice(Static(), "implementer", model) == A
    assert static_choice(Static(), None, None) is None


def test_load_shipped_defaults_constants_and_errors(tmp_path):
    assert load_shipped(None) == load_shipped(tmp_path / "absent.json") == Shipped(found=False)
    constants = load_shipped(None).to_constants()
    assert (constants.prior_weight, constants.exploration, constants.min_samples) == (3.0, 0.3, 3)
    path = tmp_path / "shipped.json"
    path.write_text(
        json.dumps(
            {
                "constants": {"prior_weight": 5, "exploration": 0.1, "objective": "quality"},
                "cheap_config": A,
                "frontier_config": B,
                "pinned": {"reviewer": B},
                "priors": [{"selector": "a", "region": "review", "quality": 0.4}],
            }
        )
    )
    shipped = load_shipped(path)
    assert shipped.to_constants().prior_weight == 5 and shipped.constants.objective == "quality"
    assert shipped.to_constants(exploration=0.0, lambda_=2.0).model_dump(by_alias=True)["lambda"] == 2.0
    assert shipped.static == Static(cheap_config=A, frontier_config=B, pinned={"reviewer": B})
    assert shipped.priors[0].segments == 1
    path.write_text('{"priors": [{"selector": "a", "quality": 1.5}]}')
    with pytest.raises(FitError, match=r"priors\.0\.quality"):
        load_shipped(path)
    path.write_text("{not json")
    with pytest.raises(FitError, match="not valid JSON"):
        load_shipped(path)


def test_a_fit_without_ratings_has_no_members_and_answers_from_shipped_priors():
    model = fit_model(
        [],
        Constants(),
        Shipped.model_validate({"priors": [{"selector": "b", "quality": 0.7}]}),
    )
    assert model.members.height == 0 and not model.cost_known and model.global_quality is None
    # B: q = (3 * 0.7 + 0) / 3 = 0.7; A: nothing known at all
    assert model.quality(B, "x") == pytest.approx(0.7) and model.quality(A, "x") is None
    assert model.choose("x", [A, B]) == B and model.most_rated() is None


def test_prices_are_the_cost_of_a_member_without_a_known_cost_in_its_region(worked):
    # docs/design.md, Cost prior. B has no known cost in review (before: B's mean over all regions, 1.5) and C never
    # ran (before: the global mean, 0.9). A token-priced: in 1, out 3 $/Mtok; so its known costs imply the tokens of
    # each region: implement 1e6 * 0.40 / (1 + 3) = 100,000, review 1e6 * 0.20 / 4 = 50,000,
    # * 1e6 * 0.30 / 4 = 75,000 (A's mean over all regions).
    prices = [
        {"selector": "a", "input_usd_per_mtok": 1.0, "output_usd_per_mtok": 3.0},
        {"selector": "b/-/m2", "usd_per_task": 0.7},
        {"selector": "c", "input_usd_per_mtok": 2.0, "output_usd_per_mtok": 6.0},
    ]
    model = fit_model(worked, MEASURED, Shipped.model_validate({"prices": prices}))
    assert model.mean_tokens == pytest.approx({"implement": 1e5, "review": 5e4, GLOBAL: 7.5e4})
    assert member(model, "implement", A)["cost_usd"] == pytest.approx(0.40)  # a known cost wins over a price
    assert member(model, "implement", B)["cost_usd"] == pytest.approx(1.5)
    assert member(model, "review", B)["cost_usd"] == pytest.approx(0.7)  # its price, not its mean elsewhere
    # C at 1e5 tokens each way in implement: (1e5 * 2 + 1e5 * 6) / 1e6 = 0.8; review 0.4; an unknown region: *'s 0.6
    assert model.cost(C, "implement") == pytest.approx(0.8)
    assert model.cost(C, "review") == pytest.approx(0.4)
    assert model.cost(C, "elsewhere") == pytest.approx(0.6)
    # a config without a price keeps the old fallbacks
    assert model.cost("d/-/m4/-", "implement") == pytest.approx(0.9)
    # the routing table publishes the prices and the tokens, so a dispatcher's Router prices an unknown config alike
    table = build_table(model, constants_source="shipped", static=Static(), source={}, fitted_at=None)
    assert [r.mean_tokens for r in table.regions.values()] == pytest.approx([7.5e4, 1e5, 5e4])
    router = Router(table.with_version())
    assert router.view("implement").row("c/x/m9/-").cost_usd == pytest.approx(0.8)
    assert router.view("elsewhere").row("c/x/m9/-").cost_usd == pytest.approx(0.6)
    assert router.view("review").row("d/-/m4/-").cost_usd == pytest.approx((0.3 + 1.5) / 2)  # the * members' mean
    # without prices nothing is published: the bytes of a table fitted without prices do not move
    plain = build_table(
        fit_model(worked, MEASURED, Shipped()), constants_source="shipped", static=Static(), source={}, fitted_at=None
    )
    assert "prices" not in plain.to_json_dict() and "mean_tokens" not in plain.to_json_dict()["regions"]["review"]
