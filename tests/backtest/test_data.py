"""The full-information table a backtest replays, read from a long table as ``ratings import`` reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.backtest.data import BacktestInputError, read_file, read_home
from pipeline.backtest.refit import scratch_home
from pipeline.workspace import Workspace

HEADER = "task_id,config,score,cost_usd,region,at\n"


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "table.csv"
    path.write_text(HEADER + body, encoding="utf-8")
    return path


def test_rows_tasks_and_costs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        # task c is the earliest; a has one row each; c has two trials of m1 (in time order) and an m2 row with
        # no cost; b lacks m2 and is dropped
        "a,m1,1,0.10,easy,2026-01-02T00:00:00Z\n"
        "a,m2,0,0.30,easy,2026-01-02T00:00:00Z\n"
        "b,m1,1,0.10,easy,2026-01-03T00:00:00Z\n"
        "c,m1,0,0.20,hard,2026-01-01T00:00:00Z\n"
        "c,m1,1,0.40,hard,2026-01-01T00:01:00Z\n"
        "c,m2,1,,hard,2026-01-01T00:00:00Z\n",
    )
    table = read_file(path, scratch_home(tmp_path / "scratch"))
    assert table.tasks == ("c", "a")
    assert table.region_of == ("hard", "easy")
    assert table.regions == ("easy", "hard")
    assert table.configs == ("import/-/m1/-", "import/-/m2/-")
    assert table.dropped_tasks == 1
    m1, m2 = table.rows[0]
    assert [(o.score, o.cost_usd) for o in m1] == [(0.0, 0.2), (1.0, 0.4)]
    # m2's row on c has no cost: logged as unknown, realized at m2's mean known cost (0.30, its row of a)
    assert [(o.score, o.cost_usd, o.logged_cost_usd) for o in m2] == [(1.0, 0.3, None)]
    assert table.filled_costs == 1 and table.cost_known and table.several_rows
    # first rows (what a single run reveals) and the configs' means over tasks of their means over rows
    assert table.quality.tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert table.mean_quality.tolist() == pytest.approx([(0.5 + 1.0) / 2, (1.0 + 0.0) / 2])
    assert table.mean_cost.tolist() == pytest.approx([(0.3 + 0.1) / 2, (0.3 + 0.3) / 2])


def test_a_table_without_full_information_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "a,m1,1,,r,2026-01-01T00:00:00Z\nb,m2,1,,r,2026-01-01T00:00:00Z\n")
    with pytest.raises(BacktestInputError, match="full-information table"):
        read_file(path, scratch_home(tmp_path / "scratch"))


def test_a_home_is_read_from_its_store_as_it_is(tmp_path: Path) -> None:
    from pipeline.compact import compact
    from pipeline.streams.imports import import_table

    path = write(tmp_path, "a,m1,1,0.1,r,2026-01-01T00:00:00Z\na,m2,0,0.2,r,2026-01-01T00:00:00Z\n")
    home = Workspace(tmp_path / "team")
    import_table(home, path)
    compact(home)
    before = sorted(p.relative_to(home.root) for p in home.root.rglob("*"))
    table = read_home(home)
    assert table.tasks == ("a",) and table.quality.tolist() == [[1.0, 0.0]]
    assert sorted(p.relative_to(home.root) for p in home.root.rglob("*")) == before  # nothing written there
