"""The fit's aggregation on Spark (``fit-routing --engine spark``; docs/design.md, Fit, Spark): the statements of
:mod:`pipeline.fit.aggregate` run as Spark SQL over the store's views (:mod:`pipeline.store.spark`), and their
rows go to the same :class:`~pipeline.fit.context.FitContext` as DuckDB's, so the published table and stats are
the same bytes.

Each engine-side table of the aggregation is a temporary view Spark caches when it is created (Spark would
otherwise compute a view again at every use: the ratings scanned once per statement that reads ``fit_rated``)
and uncaches when the aggregation drops it. Rows come back as Arrow, times as naive UTC as DuckDB gives them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine import SPARK

if TYPE_CHECKING:
    import pyarrow as pa


class SparkEngine:
    """:class:`pipeline.fit.engine.Engine` over a Spark session whose views are the store's
    (:func:`pipeline.store.spark.register_views`)."""

    dialect = SPARK

    def __init__(self, spark: Any):
        self.spark = spark

    def execute(self, sql: str) -> None:
        statement = sql.lstrip()
        if statement.startswith(self.dialect.drop):
            name = statement[len(self.dialect.drop) :].split()[0]
            if self.spark.catalog.tableExists(name):
                self.spark.catalog.uncacheTable(name)
            self.spark.sql(statement)
            return
        self.spark.sql(statement)
        if statement.startswith(self.dialect.temp_table):
            self.spark.catalog.cacheTable(statement[len(self.dialect.temp_table) :].split()[0])

    def fetch(self, sql: str) -> pa.Table:
        import pyarrow as pa

        table = self.spark.sql(sql).toArrow()
        fields = [
            f.with_type(pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) and f.type.tz else f
            for f in table.schema
        ]
        return table.cast(pa.schema(fields))


def spark_engine(store: Any, master: str | None) -> SparkEngine:
    """A :class:`SparkEngine` over the version ``store`` (:class:`pipeline.store.views.Store`) is pinned to: a
    session at ``master`` (None: local mode on every core) with the store's views."""
    from ..store.spark import DEFAULT_MASTER, register_views, session

    spark = session(master or DEFAULT_MASTER)
    register_views(spark, store.location, store.table)
    return SparkEngine(spark)
