"""``ratings compare`` on homes built from hand-made stats, shipped files and routing tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.commands.compare import compare
from pipeline.commands.compare_text import comparison_text
from pipeline.errors import PipelineError
from pipeline.routing.table import Constants, Member, Region, RoutingTable, Source, Static, canonical_json, publish

SAMPLE = Path(__file__).parents[1] / "data" / "stats-sample.json"
OPUS, SONNET = "claude-code/anthropic/opus/high", "claude-code/anthropic/sonnet/medium"
DISAGREE = "The ratings disagree with the prior"


def sample() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def agreeing() -> dict[str, Any]:
    """The sample with every measured prior within 0.1 of the shipped one."""
    stats = sample()
    for row in stats["priors"]:
        if row["measured"] is not None:
            row["measured"] = round(row["shipped"] - 0.05, 9)
        row["disagrees"] = False
    return stats


def make_home(root: Path, stats: dict[str, Any] | None, *, shipped: dict[str, Any] | None = None) -> Path:
    if stats is not None:
        (root / "case-studies" / "routing-by-rating").mkdir(parents=True)
        (root / "case-studies" / "routing-by-rating" / "stats.json").write_text(json.dumps(stats))
    (root / "fits").mkdir(parents=True, exist_ok=True)
    if shipped is not None:
        (root / "fits" / "shipped.json").write_text(json.dumps(shipped))
    return root


def table(
    choice: str,
    *,
    fitted_at: str,
    value: float,
    ladder: list[str] | None = None,
    source: str = "fitted",
    evaluation: dict[str, Any] | None = None,
) -> RoutingTable:
    from pipeline.routing.table import Ladder

    members = [
        Member(config=OPUS, quality=0.86, cost_usd=0.4, value=2.15, weight=400, n_ratings=455),
        Member(config=SONNET, quality=0.78, cost_usd=0.1, value=value, weight=200, n_ratings=201),
    ]
    regions = {
        "*": Region(members=members, choice=choice, ladder=Ladder(rungs=ladder) if ladder else None),
        "implement": Region(members=members, choice=SONNET),
    }
    return RoutingTable(
        fitted_at=fitted_at,
        source=Source(version=3),
        objective="quality_per_dollar",
        constants=Constants(prior_weight=8, exploration=0.05, half_life_days=30),
        constants_source=source,
        static=Static(),
        regions=regions,
        evaluation=evaluation or {},
    )


def test_a_wrong_prior_is_flagged(tmp_path):
    result = compare(make_home(tmp_path, sample()))
    flagged = [(p.selector, p.region) for p in result.priors if p.disagrees]
    assert flagged == [("claude-code/anthropic/sonnet", "implement"), ("qwen-code", "*")]
    assert result.disagreements == 2
    text = comparison_text(result)
    assert (
        f"{DISAGREE} claude-code/anthropic/sonnet in implement: shipped 0.85, measured 0.702, weight 188.00, n 201."
    ) in text
    assert "Priors: 2 of 6 disagree with the ratings" in text
    # The gpt-5-mini prior is 0.29 off but rests on 2 ratings (< min samples 3): not flagged.
    mini = next(p for p in result.priors if p.selector == "codex/openai/gpt-5-mini")
    assert (mini.n, mini.disagrees) == (2, False)


def test_nothing_flagged_when_the_ratings_agree(tmp_path):
    result = compare(make_home(tmp_path, agreeing()))
    assert result.disagreements == 0 and not any(p.disagrees for p in result.priors)
    assert DISAGREE not in comparison_text(result)
    assert "Priors: 0 of 6 disagree with the ratings" in comparison_text(result)


def test_the_shipped_file_is_judged_against_the_fits_measurement(tmp_path):
    """An owner who edits shipped.json after the fit sees the edit judged against the same measured quality."""
    shipped = {
        "constants": {"exploration": 0.2},
        "priors": [
            {"selector": "claude-code/anthropic/opus", "region": "*", "quality": 0.5},
            {"selector": "claude-code/anthropic/sonnet", "region": "implement", "quality": 0.72},
            {"selector": "kimi-cli", "region": "*", "quality": 0.6},
        ],
    }
    result = compare(make_home(tmp_path, agreeing(), shipped=shipped))
    rows = {p.selector: p for p in result.priors}
    assert rows["claude-code/anthropic/opus"].disagrees  # 0.5 against 0.85 measured, n 455
    assert not rows["claude-code/anthropic/sonnet"].disagrees  # 0.72 against 0.80
    assert rows["kimi-cli"].measured is None and not rows["kimi-cli"].disagrees
    assert result.shipped_file == str(tmp_path / "fits" / "shipped.json")
    assert any("kimi-cli in * is not in the stats" in n for n in result.notes)
    assert any("shipped.json now sets exploration = 0.2, but the fit evaluated 0.3" in n for n in result.notes)


def test_side_by_side_constants_hit_rates_and_the_published_choice(tmp_path):
    home = make_home(tmp_path, sample())
    publish(table(SONNET, fitted_at="2026-11-01T00:00:00Z", value=7.8), home / "fits" / "routing-table.json")
    result = compare(home)
    assert (result.published, result.published_from) == ("fitted", "table")
    rows = {r.name: r for r in result.constants}
    assert (rows["prior_weight"].shipped, rows["prior_weight"].fitted, rows["prior_weight"].published) == (3, 8, 8)
    assert (rows["half_life_days"].shipped, rows["half_life_days"].fitted) == (None, 30)
    assert rows["min_samples"].selected_on == "not searched" and "lambda" not in rows
    assert (result.routing.fitted.hits, result.routing.fitted.n) == (268, 412)
    text = comparison_text(result)
    assert "the published table uses the fitted constants, from table" in text
    assert "fitted        65.0%  268 of 412  60.3%–69.5%" in text
    assert "shipped       56.1%  231 of 412  51.2%–60.8%" in text
    assert "Fitted minus shipped: +9.0 points (95% CI +4.1 to +13.8)" in text
    assert "Prior family (greedy hit rate): adopt." in text


def test_without_stats_the_tables_evaluation_is_used(tmp_path):
    home = make_home(tmp_path, None)
    evaluation = {
        "hit_rate": {"shipped": 0.5, "fitted": 0.6},
        "difference": {"value": 0.1, "ci95": [0.02, 0.18]},
        "eligible_held_out": 90,
        "recommendation": "adopt",
        "reason": "fitted wins",
        "fitted_constants": {"prior_weight": 8.0},
        "selected_on": {"prior_weight": "validation"},
        "calibration": "keep",
    }
    publish(
        table(OPUS, fitted_at="2026-11-01T00:00:00Z", value=7.8, evaluation=evaluation),
        home / "fits" / "routing-table.json",
    )
    result = compare(home)
    assert result.stats_file is None and result.routing is None and result.calibration is None
    assert result.evaluation == evaluation and result.priors == [] and result.policies is None
    assert "hit rates come from the table's evaluation" in result.notes[0]
    text = comparison_text(result)
    assert "fitted        60.0%  n = 90" in text and "Fitted minus shipped: +10.0 points (95% CI +2.0 to +18.0)" in text
    assert "Prior family (greedy hit rate): adopt. fitted wins" in text
    assert "Calibration against the plain mean: keep." in text


def test_previous_fit_shows_changed_regions_and_value_moves(tmp_path):
    home = make_home(tmp_path, sample())
    history = home / "fits" / "history"
    history.mkdir(parents=True)
    old = publish(table(OPUS, fitted_at="2026-10-01T00:00:00Z", value=7.0), history / "old.json")
    (history / f"{old.version}.json").write_bytes((history / "old.json").read_bytes())
    (history / "old.json").unlink()
    (history / "routing-table.schema.json").unlink()
    new = publish(
        table(SONNET, fitted_at="2026-11-01T00:00:00Z", value=7.8, ladder=[SONNET, OPUS]),
        home / "fits" / "routing-table.json",
    )
    (history / f"{new.version}.json").write_bytes(canonical_json(new.to_json_dict()))
    result = compare(home, previous=True)
    p = result.previous
    assert (p.previous_version, p.current_version, p.changed) == (old.version, new.version, 1)
    star, implement = p.regions
    assert (star.region, star.choice_before, star.choice_after, star.ladder_after) == (
        "*",
        OPUS,
        SONNET,
        [SONNET, OPUS],
    )
    assert (star.value_before, star.value_after, star.changed) == (2.15, 7.8, True)
    assert star.value_delta == pytest.approx(5.65)
    assert (implement.changed, implement.value_before, implement.value_delta) == (False, 7.0, pytest.approx(0.8))
    assert "1 region(s) changed" in comparison_text(result)


def test_previous_without_history_is_a_clear_error(tmp_path):
    home = make_home(tmp_path, sample())
    publish(table(OPUS, fitted_at="2026-11-01T00:00:00Z", value=7.8), home / "fits" / "routing-table.json")
    with pytest.raises(PipelineError, match=r"no previous fit in .*history"):
        compare(home, previous=True)


def test_cli_json_shape_is_stable_and_errors_exit_2(tmp_path):
    home = make_home(tmp_path, sample())
    result = CliRunner().invoke(cli, ["compare", "--home", str(home), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert list(data) == [
        "stats_file",
        "table_file",
        "shipped_file",
        "objective",
        "published",
        "published_from",
        "provenance",
        "constants",
        "routing",
        "calibration",
        "evaluation",
        "priors",
        "disagreements",
        "policies",
        "notes",
        "previous",
    ]
    assert data["disagreements"] == 2 and data["previous"] is None
    assert list(data["priors"][0]) == ["selector", "region", "shipped", "measured", "weight", "n", "disagrees"]
    text = CliRunner().invoke(cli, ["compare", "--home", str(home), "--stats", str(SAMPLE)])
    assert text.exit_code == 0 and DISAGREE in text.output
    (tmp_path / "nowhere" / "fits").mkdir(parents=True)  # a home with nothing fitted
    empty = CliRunner().invoke(cli, ["compare", "--home", str(tmp_path / "nowhere")])
    assert empty.exit_code == 2 and "nothing to compare" in empty.output


def test_compare_on_a_fitted_home(tiny_fit):
    """The fitter's own files: the flags match the stats' own ``disagrees``."""
    home, fit = tiny_fit
    result = compare(home)
    assert result.published == fit.table.constants_source
    assert [p.disagrees for p in result.priors] == [p.disagrees for p in fit.stats.priors]
    assert result.routing.fitted.n == fit.stats.routing.fitted.n
    assert result.stats_file == str(home / "case-studies" / "routing-by-rating" / "stats.json")  # the table's pointer
    assert result.policies is not None
    default = result.policies.policies["learning_governed"]
    assert (default.hit_rate, default.n, default.mean_cost_usd) == (pytest.approx(2 / 3), 3, pytest.approx(0.1))
    text = comparison_text(result)
    assert "Routing policies on the held-out tasks" in text and "learning_governed (default)" in text
