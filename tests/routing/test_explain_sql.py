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
    explained = json.loads(CliRunner().invoke(cli, ["route", "--home", home, "--region", region, "--explain"]).output)
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
