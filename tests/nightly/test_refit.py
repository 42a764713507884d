"""``fit-routing --no-evaluate``: the table refit on every task with the current constants, no held-out evaluation
(docs/design.md, Refit without evaluation), on the hand-checkable tiny store of tests/nightly/test_job.py."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fixtures_nightly import PINNED, make_home, tiny_events

from pipeline.cli import cli
from pipeline.errors import PipelineError
from pipeline.nightly.job import run_fit
from pipeline.nightly.options import FitOptions
from pipeline.nightly.stats import RefitStats, load_stats

REFIT = FitOptions(evaluate=False)


def test_without_a_table_the_refit_takes_the_shipped_constants_and_says_no_evaluation_ran(tmp_path):
    home = make_home(tmp_path / "home", tiny_events())
    result = run_fit(home, REFIT)
    table, stats = result.table, result.stats
    assert result.evaluation is None and isinstance(stats, RefitStats)
    # shipped.json has no constants: the code defaults
    c = table.constants
    assert (c.prior_weight, c.exploration, c.half_life_days, c.prior_source) == (3.0, 0.3, None, "shipped")
    assert table.constants_source == "shipped" and set(table.constants_provenance.values()) == {"shipped"}
    assert table.evaluation["protocol"].startswith("refit on every task with the current constants")
    written = json.loads((home / "case-studies" / "routing-by-rating" / "stats.json").read_text())
    assert written["evaluated"] is False and "routing" not in written and written["table_version"] == table.version
    assert any(note.startswith("No held-out evaluation ran (fit-routing --no-evaluate)") for note in stats.notes)
    assert isinstance(load_stats(home / "case-studies" / "routing-by-rating" / "stats.json"), RefitStats)
    assert not (home / "case-studies" / "routing-by-rating" / "index.html").exists()  # no page without figures
    # every task is fitted: x rated on 9 tasks, y on 8 (the late reviewer rating on T02 included)
    star = {m.config: m.n_ratings for m in table.regions["*"].members}
    assert star == {"c/-/x/-": 9, "c/-/y/-": 8}


def test_after_an_evaluated_fit_the_refit_keeps_the_live_tables_constants_unless_pinned(tmp_path):
    home = make_home(tmp_path / "home", tiny_events())
    evaluated = run_fit(home, PINNED)  # every constant pinned: k 1, eps 0, no recency
    refit = run_fit(home, REFIT)
    assert refit.table.constants == evaluated.table.constants
    assert refit.table.constants_provenance == evaluated.table.constants_provenance
    # the same constants on the same tasks: the same members, choices and gate tests (the ladders are chosen on
    # every task here, on the learned tasks there)
    for name, region in evaluated.table.regions.items():
        assert refit.table.regions[name].members == region.members and refit.table.regions[name].choice == region.choice
    pinned = run_fit(home, REFIT.model_copy(update={"prior_weight": 5.0}))
    assert pinned.table.constants.prior_weight == 5.0 and pinned.table.constants_provenance["prior_weight"] == "pinned"
    assert pinned.table.constants.exploration == 0.0  # the live table's


def test_the_refit_from_the_command_line_and_a_page_refused(tmp_path):
    home = make_home(tmp_path / "home", tiny_events())
    runner = CliRunner()
    out = runner.invoke(cli, ["fit", "--home", str(home), "--no-evaluate", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["evaluated"] is False and data["source"]["command"].endswith("--no-evaluate")
    text = runner.invoke(cli, ["fit", "--home", str(home), "--no-evaluate", "--no-compact"])
    assert text.exit_code == 0 and "No held-out evaluation ran" in text.output
    from pipeline.casestudy import render_case_study

    with pytest.raises(PipelineError, match="refit without evaluation"):
        render_case_study(home, "routing-by-rating")


def test_a_utility_refit_without_lambda_takes_the_scale_of_every_task(tmp_path):
    home = make_home(tmp_path / "home", tiny_events())
    table = run_fit(home, REFIT.model_copy(update={"objective": "utility"})).table
    # every task: known costs 9 x 0.1 (x) + 7 x 0.2 (y; T02 y was rated late, without an attempt) over 16 pairs;
    # values 6.5 (x) + 6 (y, the late 0 included) over 17 pairs: lambda = mean cost / mean value
    assert table.objective == "utility"
    assert table.constants.lambda_ == pytest.approx((2.3 / 16) / (12.5 / 17), abs=1e-9)
