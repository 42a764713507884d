"""Building ``routing-table/v1`` from a fitted model, on the worked example of test_model.

docs/design.md, Routing table.
"""

from __future__ import annotations

import polars as pl
import pytest
from fixtures_fit import A, B, context, opened, rated, worked_events

from pipeline.errors import FitError
from pipeline.fit.context import Part
from pipeline.fit.shipped import Shipped
from pipeline.fit.table_build import build_table
from pipeline.routing.table import Ladder, RoutingTable, Static, canonical_json, publish
from pipeline.routing.table import load as load_table

MEASURED = {"prior_source": "measured", "prior_weight": 3}


@pytest.fixture(scope="module")
def worked():
    return context(*worked_events())


def table_of(ctx, objective="quality_per_dollar", **kw) -> RoutingTable:
    shipped = Shipped()
    model = ctx.model(Part.FULL, shipped.to_constants(**MEASURED), objective)
    return build_table(
        model,
        constants_source="shipped",
        static=Static(cheap_config=A, frontier_config=B),
        source={"version": 7, "events": {"ratings": 6}},
        fitted_at=ctx.newest_of(Part.FULL),
        **kw,
    )


def test_regions_members_choice_and_rounding(worked):
    table = table_of(worked)
    assert sorted(table.regions) == ["*", "implement", "review"]
    implement = table.regions["implement"]
    assert [m.config for m in implement.members] == [A, B]  # sorted by config key
    a = implement.members[0]
    # p = (3 * 3.7 / 7.5 + 2.1) / 6.5 = 0.550769230..., q = (3p + 1.9) / 5.5 = 0.645874125..., rounded to 9
    # decimals; value = q / 0.4 (tests/fit/test_model.py works the sums out)
    assert a.quality == 0.645874126 and a.cost_usd == 0.4 and a.value == 1.614685315
    assert (a.weight, a.n_ratings, a.prior) == (2.5, 3, 0.550769231)
    assert implement.choice == A and table.regions["review"].choice == A
    assert [m.config for m in table.regions["*"].members] == [A, B]
    assert table.regions["*"].members[1].n_ratings == 3
    assert table.fitted_at == "2026-01-01T21:00:00Z"  # the newest event: t3's ratings at hour 21
    assert table.objective == "quality_per_dollar" and table.source.version == 7
    assert table.constants.prior_source == "measured" and table.static.cheap_config == A


def test_quality_objective_chooses_by_quality(worked):
    assert table_of(worked, "quality").regions["review"].choice == B  # 0.58 > 0.463


def test_signals_and_ladders_are_attached(worked):
    signals = pl.DataFrame(
        {
            "config_key": [A, B],
            "region": ["implement", "*"],
            "relative_advantage": [0.25, -1 / 3],
            "win_rate": [1.0, None],
        }
    )
    ladder = Ladder(rungs=[A, B])
    table = table_of(worked, signals=signals, ladders={"implement": ladder})
    a = table.regions["implement"].members[0]
    assert (a.relative_advantage, a.win_rate) == (0.25, 1.0)
    assert table.regions["*"].members[1].relative_advantage == -0.333333333
    assert table.regions["review"].members[0].relative_advantage is None
    assert table.regions["implement"].ladder == ladder and table.regions["review"].ladder is None


def test_no_costs_publishes_null_costs_and_the_quality_objective():
    table = table_of(context(opened("t1", "implement"), rated("r1", "t1", A, 0.9), rated("r2", "t1", B, 0.6)))
    assert table.objective == "quality"
    assert all(m.cost_usd is None for region in table.regions.values() for m in region.members)
    assert table.regions["implement"].choice == A


def test_publish_round_trip_is_byte_identical(tmp_path, worked):
    first = publish(table_of(worked), tmp_path / "routing-table.json")
    again = publish(table_of(context(*worked_events())), tmp_path / "again.json")
    assert (tmp_path / "routing-table.json").read_bytes() == (tmp_path / "again.json").read_bytes()
    assert load_table(tmp_path / "routing-table.json") == first and first.version == again.version
    assert canonical_json(first.to_json_dict()).count(b"NaN") == 0


def test_no_weighted_rating_is_a_clear_error():
    with pytest.raises(FitError, match="carries weight"):
        table_of(context(rated("r1", "t1", A, 0.9, importance=0.0)))
