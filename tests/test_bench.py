"""``python -m bench`` runs the named benchmarks in their own processes and counts the failures."""

from __future__ import annotations

from bench.__main__ import SMALL, main


def test_runs_a_benchmark_and_prints_its_ratio(capfd):
    assert main(["route", "--events", "2000"]) == 0
    out = capfd.readouterr().out
    assert "== bench.route: -m bench.route --decisions 2000" in out and "x dict lookup" in out
    assert "== bench.route: ok in" in out


def test_every_benchmark_module_is_listed():
    from pathlib import Path

    modules = {p.stem for p in (Path(__file__).parents[1] / "bench").glob("*.py") if not p.stem.startswith("_")}
    assert set(SMALL) == modules
