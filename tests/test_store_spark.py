"""The store's views in Spark (pipeline/store/spark.py) hold exactly the rows of the store's DuckDB views: every
family, one row per id when two writers landed one id, either layout; a table Spark cannot read as its files is
refused in one line. One local Spark session for the module (local[2])."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.compact import compact
from pipeline.errors import PipelineError
from pipeline.store import open_store
from pipeline.store.families import COLUMNS, VIEWS
from pipeline.store.spark import check_protocol, register_views
from pipeline.store.table import open_table
from pipeline.streams.log import append
from pipeline.workspace import Workspace
from tests.fixtures_store import CONFIG, opened, rating
from tests.test_compact_layout import DAILY_HOME


def _rows(query: str, run) -> list[tuple]:
    """Rows of ``query`` as tuples, times as naive UTC (Spark's session is UTC; DuckDB's views are naive UTC)."""
    rows = run(query)
    return [tuple(v.replace(tzinfo=None) if hasattr(v, "tzinfo") and v.tzinfo else v for v in r) for r in rows]


def _same_views(spark, home: Path) -> int:
    location = Workspace.of(home).store
    register_views(spark, location, open_table(location))
    compared = 0
    with open_store(home) as store:
        for view in VIEWS:
            cols = ", ".join(f'"{c}"' for c, _ in COLUMNS[view])
            query = f'SELECT {cols} FROM "{view}"'
            ours = sorted(_rows(query, lambda q: store.con.execute(q).fetchall()), key=repr)
            theirs = sorted(_rows(query, lambda q: [tuple(r) for r in spark.sql(q).collect()]), key=repr)
            assert theirs == ours, view
            compared += len(ours)
    return compared


@pytest.fixture
def busy(home):
    """Every family, and one id landed twice by two writers (the row of the first writer is the one kept)."""
    attempt = {"type": "task.attempted", "task": "T-1", "config": CONFIG, "status": "success", "cost_usd": 0.5}
    decision = {"type": "route.decided", "task": "T-1", "policy": "p", "chosen": "c/-/m/-", "propensity": 0.5}
    rejection = {"type": "task.rejected", "task": "T-1", "config": CONFIG, "rater": {"kind": "gate", "name": "g"}}
    append(
        home,
        [
            *(opened(i, day=1 + i % 3) for i in range(4)),
            *(rating(i, day=1 + i % 3, score=i / 4) for i in range(4)),
            {**attempt, "id": "A-1", "at": "2026-01-01T09:30:00Z"},
            {**decision, "id": "D-1", "at": "2026-01-02T00:00:00Z", "candidates": ["c/-/m/-", "d/-/m/-"]},
            {**rejection, "id": "J-1", "at": "2026-01-02T00:00:00Z", "claim": "x", "evidence": ["e", "f"]},
            {"id": "X-1", "type": "custom.kind", "at": "2026-01-02T00:00:00Z", "n": [1, 2]},
        ],
    )
    untimed = {**rating(9), "task": "T-1"}
    del untimed["at"]  # a writer that bypassed append: stored with a null time
    with open(home / "streams" / "ratings.jsonl", "a") as handle:
        handle.write(json.dumps(untimed) + "\n")
    compact(home)
    _land_again(home, "R-1", writer="zz-second-host")  # sorts after the first writer
    return home


def _land_again(home: Path, event_id: str, *, writer: str) -> None:
    """The row of ``event_id`` committed once more by another writer with another payload (two writers racing)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import write_deltalake

    table = open_table(Workspace.of(home).store)
    rows = table.to_pyarrow_dataset().to_table()
    row = rows.filter(pc.equal(rows["id"], event_id))
    row = row.set_column(row.schema.get_field_index("_writer"), "_writer", pa.array([writer]))
    row = row.set_column(row.schema.get_field_index("score"), "score", pa.array([0.125]))
    write_deltalake(table, row, mode="append")


def test_spark_views_hold_the_rows_of_the_store_views_one_per_id(spark, busy):
    with open_store(busy) as store:
        assert store.con.execute("SELECT score FROM ratings WHERE id = 'R-1'").fetchall() == [(0.25,)]
    assert _same_views(spark, busy) == 13


def test_spark_reads_a_store_of_the_daily_layout_as_it_is(spark, tmp_path):
    home = tmp_path / "daily"
    shutil.copytree(DAILY_HOME, home)
    assert _same_views(spark, home) > 40


def test_a_table_that_needs_a_reader_feature_is_refused_in_one_line():
    location = Workspace.of("/nonexistent").store
    table = SimpleNamespace(protocol=lambda: SimpleNamespace(min_reader_version=3, reader_features=["deletionVectors"]))
    with pytest.raises(PipelineError, match=r"reader protocol 3 \(features: deletionVectors\): fit it with --engine"):
        check_protocol(table, location)
    check_protocol(
        SimpleNamespace(protocol=lambda: SimpleNamespace(min_reader_version=1, reader_features=None)), location
    )


def test_a_session_writes_only_under_the_scratch_it_is_given(spark):
    """Spark's SQL warehouse (else ``spark-warehouse`` in the current directory) and its block and spill files
    (else the system's temporary folder) both sit under the session's scratch folder (tests/fixtures_spark.py)."""
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    local = Path(spark.sparkContext.getConf().get("spark.local.dir"))
    assert warehouse.name == "warehouse" and local.name == "local"
    assert warehouse.parent == local.parent and warehouse.parent.name.startswith("spark-scratch")
    assert not (Path.cwd() / "spark-warehouse").exists()
