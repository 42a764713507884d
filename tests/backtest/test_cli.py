"""``ratings backtest``: JSON for programs in the stated shape, a table for people, bad input exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.nightly.backtest import SIMULATION_NOTE

TABLE = (
    "task_id,config,score,cost_usd,region,at\n"
    "t1,a,1,0.1,r,2026-01-01T00:00:00Z\nt1,b,0,0.2,r,2026-01-01T00:00:00Z\n"
    "t2,a,0,0.1,r,2026-01-01T00:01:00Z\nt2,b,1,0.2,r,2026-01-01T00:01:00Z\n"
)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(TABLE, encoding="utf-8")
    return path


def run(*args: str):
    return CliRunner().invoke(cli, ["backtest", *args])


def test_json_has_the_stated_shape(tmp_path: Path, table: Path) -> None:
    # One night of both tasks (no refit): every run is the start config.
    result = run(str(table), "--out", str(tmp_path / "out"), "--night-size", "2", "--seeds", "2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"runs", "references", "about"}
    run_ = data["runs"][0]
    assert {"policy", "objective", "start", "whole", "second_half", "nights"} <= set(run_)
    s = {"mean_quality", "mean_cost_usd", "configs_per_task", "value", "vs_region_best", "vs_full_information", "lift"}
    assert s | {"p5", "p95"} <= set(run_["whole"]) and s <= set(run_["nights"][0])
    assert data["about"]["note"] == SIMULATION_NOTE
    assert json.loads((tmp_path / "out" / "backtest.json").read_text()) == data


def test_a_table_for_people_says_it_is_a_simulation(tmp_path: Path, table: Path) -> None:
    result = run(str(table), "--out", str(tmp_path / "out"), "--night-size", "2", "--seeds", "1")
    assert result.exit_code == 0, result.output
    assert SIMULATION_NOTE in result.stdout and "% region best [p5, p95]" in result.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--policy", "nope"], "unknown policy nope"),
        (["--start", "shipped"], "--start shipped needs a shipped.json"),
        (["--gate-noise", "2"], "--gate-noise"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, table: Path, args: list[str], words: str) -> None:
    result = run(str(table), "--out", str(tmp_path / "out"), "--seeds", "1", *args)
    assert result.exit_code == 2 and words in result.output, result.output


def test_a_table_or_a_home_not_both(tmp_path: Path, table: Path) -> None:
    assert run("--out", str(tmp_path / "o")).exit_code == 2
    assert run(str(table), "--home", str(tmp_path), "--out", str(tmp_path / "o")).exit_code == 2
