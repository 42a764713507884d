"""The SQL that ``route --explain`` prints recomputes the table's rows from the store, through ``ratings sql``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.routing import Router

COLUMNS = ("n_ratings", "weight", "quality", "cost_usd", "relative_advantage", "value")


@pytest.mark.parametrize("region", ["implement", "review", "*"])
def test_ratings_sql_reproduces_the_explained_rows(fitted_sim_home, region):
    home = str(fitted_sim_home)
    explained = json.loads(
        CliRunner().invoke(cli, ["route", "--home", home, "--region", region, "--explain", "--json"]).output
    )
    result = CliRunner().invoke(cli, ["sql", "--home", home, "--json", explained["sql"]])
    assert result.exit_code == 0, result.output
    recomputed = {row["config"]: row for row in json.loads(result.output)}
    table = Router.load(fitted_sim_home / "fits" / "routing-table.json").table
    members = table.regions[region].members
    assert set(recomputed) == {m.config for m in members}
    for m in members:
        row = recomputed[m.config]
        for column in COLUMNS:
            assert row[column] == pytest.approx(getattr(m, column), abs=1e-8), (m.config, column)
    assert {r["config"] for r in explained["rows"]} == set(recomputed)


def test_the_query_follows_half_life_measured_priors_and_cost_fallbacks(fitted_sim_home, tmp_path):
    """A table refit with a half-life of 30 days, measured priors and k = 5: the rows still match."""
    import shutil

    from pipeline.compact import compact
    from pipeline.fit.aggregate import DuckDBEngine, Spec
    from pipeline.fit.context import FitContext, Part
    from pipeline.fit.model import load_shipped
    from pipeline.fit.signals import member_signals
    from pipeline.fit.table_build import build_table
    from pipeline.routing.table import publish
    from pipeline.store import open_store
    from pipeline.streams.events import Config
    from pipeline.streams.log import append

    home = tmp_path / "team"
    shutil.copytree(fitted_sim_home, home)
    path = home / "fits" / "routing-table.json"
    published = Router.load(path).table
    # A new region whose only task was rated without any attempt: its cost falls back to the config's mean.
    config = published.regions["*"].members[0].config
    cfg = Config.from_key(config).model_dump()
    append(
        home,
        [
            {"type": "task.opened", "task": "DOC-1", "region": "docs", "at": "2026-12-01T00:00:00Z"},
            {
                "type": "task.rated",
                "task": "DOC-1",
                "config": cfg,
                "score": 0.7,
                "rater": {"kind": "human", "name": "lead"},
                "at": "2026-12-01T01:00:00Z",
            },
        ],
    )
    compact(home)
    shipped = load_shipped(home / "fits" / "shipped.json")
    with open_store(home) as store:
        ctx = FitContext.build(DuckDBEngine(store), Spec(half_lives=(30.0,)), shipped=shipped)
    constants = published.constants.model_copy(
        update={"half_life_days": 30.0, "prior_source": "measured", "prior_weight": 5.0}
    )
    model = ctx.model(Part.FULL, constants, published.objective)
    table = publish(
        build_table(
            model,
            constants_source="fitted",
            static=published.static,
            source=published.source,
            fitted_at=ctx.newest_of(Part.FULL),
            signals=member_signals(ctx.values(Part.FULL), ctx.newest_of(Part.FULL)),
        ),
        path,
    )
    assert table.regions["docs"].members[0].cost_usd is not None  # the fallback, not a missing cost
    router = Router(table)
    with open_store(home, read_only=True) as store:
        for region in ("docs", "clean-up", "*"):
            content = table.regions[region]
            names, rows = store.query(router.describe(router.route(region), region)["sql"])
            recomputed = {row[0]: dict(zip(names, row, strict=True)) for row in rows}
            for m in content.members:
                for column in COLUMNS:
                    assert recomputed[m.config][column] == pytest.approx(getattr(m, column), abs=1e-8), (
                        region,
                        m.config,
                        column,
                    )
