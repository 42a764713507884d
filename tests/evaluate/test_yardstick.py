"""One yardstick: the oracle, cheapest and best-single points of the baselines table and of the frontier figure
are one number each, and they are what a direct computation over the store's held-out tasks gives."""

from __future__ import annotations

from fractions import Fraction

import polars as pl
import pytest

from pipeline.casestudy.points import frontier_points
from pipeline.evaluate.metrics import eligible
from pipeline.evaluate.search import Pins, half_lives_of
from pipeline.fit.aggregate import DuckDBEngine, Spec
from pipeline.fit.context import FitContext, Part
from pipeline.fit.learning import costed_targets
from pipeline.fit.model import load_shipped
from pipeline.nightly.stats import load_stats
from pipeline.store import open_store


@pytest.fixture(scope="module")
def stats(fitted_sim_home):
    return load_stats(fitted_sim_home / "case-studies" / "routing-by-rating" / "stats.json")


def by_hand(home) -> dict[str, tuple[float, float, int]]:
    """The three points recomputed from the store, written here without the yardstick's code: the eligible
    held-out tasks (two or more configs, some value > 0), realized costs with unknown attempts at the learned
    fit's estimate; a single over the tasks it did; the oracle's pick on each task the highest quality among
    the best per dollar, then the lower cost, then key order."""
    shipped = load_shipped(home / "fits" / "shipped.json")
    spec = Spec(half_lives=half_lives_of(shipped.to_constants(), Pins()), fraction=Fraction(7, 10))
    with open_store(home) as store:
        ctx = FitContext.build(DuckDBEngine(store), spec, shipped=shipped)
    model = ctx.model(Part.LEARNED, shipped.to_constants())
    held_out = ctx.values(Part.HELD_OUT, real=True)
    rows = costed_targets(held_out, model).filter(pl.col("value").is_not_null())
    keep = (
        rows.group_by("task")
        .agg(n=pl.len(), top=pl.col("value").max())
        .filter((pl.col("n") >= 2) & (pl.col("top") > 0))
    )
    rows = rows.join(keep.select("task"), on="task")
    per_dollar = pl.col("value") / pl.max_horizontal("cost_usd", pl.lit(1e-6))
    best = rows.filter(per_dollar == per_dollar.max().over("task"))
    oracle = (
        best.sort(["task", "value", "cost_usd", "config_key"], descending=[False, True, False, False])
        .group_by("task", maintain_order=True)
        .first()
    )
    points = {"oracle": (oracle["value"].mean(), oracle["cost_usd"].mean(), oracle.height)}
    for config in rows["config_key"].cast(pl.String).unique().to_list():
        mine = rows.filter(pl.col("config_key") == config)
        points[config] = (mine["value"].mean(), mine["cost_usd"].mean(), mine.height)
    assert rows["task"].n_unique() == eligible(costed_targets(held_out, model))["task"].n_unique()
    return points


def test_table_figure_and_store_agree_on_the_oracle_cheapest_and_best_single(fitted_sim_home, stats):
    b, f = stats.baselines, stats.frontier
    hand = by_hand(fitted_sim_home)
    singles = {s.config: s for s in f.singles}
    for name, row in (("best_single", b.best_single), ("cheapest", b.cheapest)):
        point = singles[row.config]
        # the baselines table and the frontier figure's data: one number each
        assert (row.mean_quality, row.mean_cost_usd) == (point.quality, point.cost_usd), name
        assert (row.tasks, row.coverage) == (point.tasks, point.coverage), name
        # ... and what the store gives
        assert (row.mean_quality, row.mean_cost_usd, point.tasks) == pytest.approx(hand[row.config]), name
    assert (b.oracle.mean_quality, b.oracle.mean_cost_usd) == (f.oracle.quality, f.oracle.cost_usd)
    assert (b.oracle.mean_quality, b.oracle.mean_cost_usd, f.oracle.tasks) == pytest.approx(hand["oracle"])
    # the figure draws exactly these points
    drawn = {(p.kind, p.label): (p.quality, p.cost) for p in frontier_points(stats)}
    assert drawn[("oracle", "oracle")] == (b.oracle.mean_quality, b.oracle.mean_cost_usd)
    assert drawn[("single", b.best_single.config)] == (b.best_single.mean_quality, b.best_single.mean_cost_usd)


def test_every_held_out_section_counts_the_same_eligible_tasks(stats):
    n = stats.split.eligible_held_out
    assert stats.frontier.held_out_tasks == n
    assert {p.tasks for p in stats.frontier.router} == {n}
    assert {r.n for r in stats.policies.policies.values()} == {n}
    assert stats.frontier.oracle.tasks == n
    # a single did only some of them on this logged backlog: its coverage says how many
    assert all(s.coverage == pytest.approx(s.tasks / n) for s in stats.frontier.singles)
    assert any(s.coverage < 1 for s in stats.frontier.singles)
    assert stats.ladders.summary is None or stats.ladders.held_out_tasks_compared <= n
