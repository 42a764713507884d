"""The fit's aggregation on Spark (pipeline/fit/spark.py) gives DuckDB's rows, and ``fit-routing --engine spark``
publishes the bytes the DuckDB engine publishes (tests/data/published). One local Spark session (local[2]) for the
module; it skips, with the reason, only where pyspark or a Java runtime is missing."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.compact import compact
from pipeline.fit.aggregate import DuckDBEngine, Spec, aggregate
from pipeline.fit.spark import SparkEngine
from pipeline.store import open_store
from pipeline.store.spark import register_views
from tests.fixtures_nightly import make_home, tiny_events
from tests.fixtures_spark import spark  # noqa: F401 - the module's session
from tests.nightly.published_fits import PUBLISHED, fit_case

#: The recency sums: a rating's weight exp(-ln 2 age / H) is the one number the engines compute with their own
#: libm (Java's Math.exp against the C library's), which may differ in the last bit of a term.
RECENCY = ("w0_", "s0_", "w1_", "s1_")


def _plain(table: pa.Table) -> list[dict]:
    """Rows with integers as int (DuckDB sums BIGINT into HUGEINT, Spark into BIGINT: the same integers)."""
    return [
        {k: int(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, float) else v for k, v in r.items()}
        for r in table.to_pylist()
    ]


def _value(row: dict, name: str) -> float:
    return row[f"{name}hi"] * 2.0**-21 + row[f"{name}mid"] * 2.0**-64 + row[f"{name}lo"] * 2.0**-107


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory) -> Path:
    home = make_home(tmp_path_factory.mktemp("tiny") / "home", tiny_events())
    compact(home)
    return home


def test_the_aggregation_on_spark_gives_the_rows_of_duckdb(spark, tiny_store):  # noqa: F811
    spec = Spec(prm=True, half_lives=(3.0, 30.0), fraction=Fraction(7, 10))
    with open_store(tiny_store) as store:
        ours = aggregate(DuckDBEngine(store), spec)
        register_views(spark, store.location, store.table)
        theirs = aggregate(SparkEngine(spark), spec)
    for name in ("counts", "newest", "bounds", "split"):
        assert getattr(theirs, name) == getattr(ours, name), name
    for name in ("configs", "tasks", "scores", "decisions", "candidates", "closures"):
        assert _plain(getattr(theirs, name)) == _plain(getattr(ours, name)), name
    assert ours.pairs.num_rows == theirs.pairs.num_rows > 0
    for a, b in zip(_plain(ours.pairs), _plain(theirs.pairs), strict=True):
        exact = {k: v for k, v in a.items() if not k.startswith(RECENCY)}
        assert {k: b[k] for k in exact} == exact
        for name in RECENCY:
            if a[f"{name}hi"] is not None:
                assert math.isclose(_value(a, name), _value(b, name), rel_tol=2**-50), (name, a, b)


@pytest.mark.parametrize("case", ["routerbench-sample", "livecodebench-sample"])
def test_fit_routing_on_spark_publishes_the_bytes_of_duckdb(spark, tmp_path, case):  # noqa: F811
    published = fit_case(case, tmp_path, engine="spark")
    for name, body in published.items():
        assert body == (PUBLISHED / case / name).read_bytes(), name
