"""``fit-routing --engine spark`` (pipeline/fit/spark.py) on the tiny store of tests/fixtures_nightly.py, against
the DuckDB engine on the same store: the aggregation's rows are the same, every column of every row (the recency
sums too: both engines compute ``2^-x`` with ``+``, ``-``, ``*`` only, pipeline/fit/halving.py), and the published
table and stats are the same bytes (the stats but the command line they record). One Spark aggregation, in
the run's one local session (tests/fixtures_spark.py); it skips, with the reason, only where pyspark or a
Java runtime is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.fit import context
from pipeline.fit.aggregate import Aggregate, Engine, Spec, aggregate
from pipeline.nightly.job import run_fit
from pipeline.nightly.options import FitOptions
from pipeline.workspace import Workspace
from tests.fixtures_nightly import make_home, tiny_events


def _plain(table: Any) -> list[dict]:
    """Rows with integers as int (DuckDB sums BIGINT into HUGEINT, Spark into BIGINT: the same integers)."""
    return [
        {k: int(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, float) else v for k, v in r.items()}
        for r in table.to_pylist()
    ]


def _fit(home: Path, engine: str) -> dict[str, Any]:
    """Fit ``home`` on ``engine``: the rows its aggregation gave the fit, the bytes it published, the command."""
    rows: list[Aggregate] = []

    def kept(on: Engine, spec: Spec) -> Aggregate:
        rows.append(aggregate(on, spec))
        return rows[-1]

    options = FitOptions(engine=engine, spark_master="local[2]" if engine == "spark" else None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(context, "aggregate", kept)
        run_fit(home, options)
    ws = Workspace.resolve(home)
    stats = ws.stats(options.case_study).read_bytes()
    (row,) = rows
    command = json.loads(stats)["source"]["command"]
    return {"rows": row, "table": ws.table.read_bytes(), "stats": stats, "command": command}


def test_fit_routing_on_spark_aggregates_the_rows_and_publishes_the_bytes_of_duckdb(spark, tmp_path):
    """One Spark fit (its aggregation is the slow part of the suite's Spark tests): rows, then bytes."""
    ours, theirs = (_fit(make_home(tmp_path / e / "home", tiny_events()), e) for e in ("duckdb", "spark"))
    mine, other = ours["rows"], theirs["rows"]
    assert other.spec == mine.spec and mine.spec.half_lives  # the recency sums are in the rows
    for name in ("counts", "newest", "bounds", "split"):
        assert getattr(other, name) == getattr(mine, name), name
    assert mine.pairs.num_rows > 0
    for name in ("configs", "tasks", "pairs", "scores", "decisions", "candidates", "closures"):
        assert _plain(getattr(other, name)) == _plain(getattr(mine, name)), name

    assert theirs["table"] == ours["table"]
    assert "--engine spark" in theirs["command"] and "--engine" not in ours["command"]
    same_command = ours["stats"].replace(json.dumps(ours["command"]).encode(), json.dumps(theirs["command"]).encode())
    assert same_command != ours["stats"] and same_command == theirs["stats"]
