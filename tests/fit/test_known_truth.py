"""Known truth: on simulated data the fit finds what the simulator hid."""

from __future__ import annotations

import json

import polars as pl

from pipeline.fit.aggregate import DuckDBEngine, Spec
from pipeline.fit.context import FitContext, Part
from pipeline.fit.model import load_shipped
from pipeline.routing.table import Constants
from pipeline.store import open_store


def truth(home) -> dict:
    return json.loads((home / "truth.json").read_text())


def refit(home, constants: dict, objective: str = "quality_per_dollar"):
    """The model of ``constants`` on all tasks, as the published table would hold it."""
    shipped = load_shipped(home / "fits" / "shipped.json")
    fixed = Constants.model_validate(constants)
    spec = Spec(half_lives=() if fixed.half_life_days is None else (fixed.half_life_days,))
    with open_store(home) as store:
        ctx = FitContext.build(DuckDBEngine(store), spec, shipped=shipped, objective=objective)
    return ctx.model(Part.FULL, fixed)


def region_choices(model) -> dict[str, str]:
    members = model.members.filter(pl.col("region") != "*")
    chosen = model.choose_frame(members.select(task="region", region="region", config_key="config_key"))
    return dict(chosen.iter_rows())


def test_published_choice_matches_the_truth_in_nine_regions_of_ten(sim_fit):
    home, result = sim_fit
    assert result.stats.ratings.total >= 20_000
    best = truth(home)["best"]["after"]
    published = {name: region.choice for name, region in result.table.regions.items() if name != "*"}
    matches = sum(published[r] == best[r] for r in best)
    assert matches / len(best) >= 0.9, (published, best)


def test_calibration_beats_the_plain_mean(sim_fit):
    cal = sim_fit[1].stats.calibration
    assert cal.regions_mse < cal.plain_mean_mse
    assert cal.difference_ci95[1] < 0 and cal.recommendation == "adopt"
    assert "regions carry a signal" in cal.reason


def test_search_chose_on_validation_and_the_grid_is_complete(sim_fit):
    stats = sim_fit[1].stats
    assert set(stats.constants.selected_on.values()) == {"validation"}
    greedy = [r for r in stats.grid if r.kind == "greedy_hit_rate"]
    assert len(greedy) == 2 * 9 * 4 and all(r.validation is not None for r in greedy)
    chosen = stats.constants.fitted
    top = max(r.validation for r in greedy)
    row = next(
        r
        for r in greedy
        if (r.prior_source, r.prior_weight, r.half_life_days)
        == (chosen.prior_source, chosen.prior_weight, chosen.half_life_days)
    )
    assert row.validation == top
    assert stats.routing.recommendation in ("adopt", "keep", "insufficient-evidence") and stats.routing.reason


def test_no_signal_regions_are_not_adopted_in_words(flat_fit):
    cal = flat_fit[1].stats.calibration
    assert cal.recommendation in ("keep", "insufficient-evidence")
    assert "no reliable signal" in cal.reason or "predict worse than the plain mean" in cal.reason


def test_drift_a_fitted_half_life_follows_the_change(drift_fit):
    home, result = drift_fit
    fitted = result.stats.constants.fitted
    assert result.stats.constants.selected_on["half_life_days"] == "validation"
    assert fitted.half_life_days is not None  # recency weighting chosen on validation
    # Kimi's research quality rose after the drift; the recency-weighted fit sees more of it.
    kimi = truth(home)["drift"]["config"]
    q = {
        h: refit(home, {**fitted.model_dump(by_alias=True), "half_life_days": h}).quality(kimi, "research")
        for h in (None, fitted.half_life_days)
    }
    assert q[fitted.half_life_days] > q[None]
