"""The fit's aggregation on Spark (``fit-routing --engine spark``; docs/design.md, Fit, Spark): the statements of
:mod:`pipeline.fit.aggregate` run as Spark SQL over the store's views (:mod:`pipeline.store.spark`), and their
rows go to the same :class:`~pipeline.fit.context.FitContext` as DuckDB's, so the published table and stats are
the same bytes.

Each engine-side table of the aggregation is computed once, when it is made, and kept on the executors as a DataFrame
without lineage (``localCheckpoint``), registered as a temporary view. Its plan is then one scan of those blocks:
a view created by SQL keeps its text, and a cached DataFrame its whole analysed plan, so every statement that reads
either would optimise the chain of plans under it again (the recency factors' expressions in each of them: the
pairs statement spent 13 s of 21 in the optimiser on the tiny store), and the view would be computed again at every
use. Dropping it drops the view and the last reference to its blocks, which Spark's cleaner then removes. Rows come
back as Arrow, times as naive UTC as DuckDB gives them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine import SPARK

if TYPE_CHECKING:
    import pyarrow as pa

    from ..workspace import SparkScratch


class SparkEngine:
    """:class:`pipeline.fit.engine.Engine` over a Spark session whose views are the store's
    (:func:`pipeline.store.spark.register_views`)."""

    dialect = SPARK

    def __init__(self, spark: Any):
        self.spark = spark
        self.tables: dict[str, Any] = {}

    def execute(self, sql: str) -> None:
        statement = sql.lstrip()
        if statement.startswith(self.dialect.drop):
            name = statement[len(self.dialect.drop) :].split()[0]
            self.tables.pop(name, None)
            self.spark.catalog.dropTempView(name)
            return
        if not statement.startswith(self.dialect.temp_table):
            raise ValueError(f"not a statement of the aggregation: {statement[:60]!r}")
        name, query = statement[len(self.dialect.temp_table) :].split(maxsplit=1)
        if not query.startswith("AS "):
            raise ValueError(f"not a statement of the aggregation: {statement[:60]!r}")
        frame = self.spark.sql(query[3:]).localCheckpoint(eager=True)
        frame.createOrReplaceTempView(name)
        self.tables[name] = frame

    def fetch(self, sql: str) -> pa.Table:
        import pyarrow as pa

        table = self.spark.sql(sql).toArrow()
        fields = [
            f.with_type(pa.timestamp(f.type.unit)) if pa.types.is_timestamp(f.type) and f.type.tz else f
            for f in table.schema
        ]
        return table.cast(pa.schema(fields))


def spark_engine(store: Any, master: str | None, scratch: SparkScratch) -> SparkEngine:
    """A :class:`SparkEngine` over the version ``store`` (:class:`pipeline.store.views.Store`) is pinned to: a
    session at ``master`` (None: local mode on every core) with the store's views, writing on this machine only
    under ``scratch`` (:func:`pipeline.store.spark.session`)."""
    from ..store.spark import DEFAULT_MASTER, register_views, session

    spark = session(scratch, master or DEFAULT_MASTER)
    register_views(spark, store.location, store.table)
    return SparkEngine(spark)
