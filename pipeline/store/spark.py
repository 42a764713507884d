"""The store's views in a Spark session (docs/design.md, Storage, Spark): the same families, columns and one row
per id as :mod:`pipeline.store.views`, over the same version of the events table.

No jar is fetched at run time: Spark's Delta connector is a Maven download that neither PyPI's ``delta-spark`` nor
Debian ships. So the table is read as the Parquet files its Delta log lists at the version (deltalake's
``file_uris()``), with the table's schema and ``basePath`` for the partition values. That is the same as a Delta
read only when the table needs no reader feature (deletion vectors, column mapping): reader protocol 1 without
reader features is asserted, anything else refused in one line. A cluster that has the connector reads the same
rows with ``spark.read.format("delta").option("versionAsOf", v).load(uri)`` (docs/design.md says how to add it).

Spark's own settings that matter (:func:`session`): ``"at"`` is a string literal in Spark SQL unless
``spark.sql.ansi.doubleQuotedIdentifiers`` is on; the session time zone is UTC (a ``TIMESTAMP`` literal and the
views' ``at`` are UTC, as in DuckDB); and without ``spark.sql.sources.parallelPartitionDiscovery.threshold``
raised, reading a list of files starts a listing job per file.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from ..errors import PipelineError
from ..workspace import SparkScratch, StoreLocation
from .families import COLUMNS, VIEWS

#: DuckDB's types of :data:`pipeline.store.families.COLUMNS` in Spark SQL.
SPARK_TYPES = {
    "BIGINT": "BIGINT",
    "BOOLEAN": "BOOLEAN",
    "DOUBLE": "DOUBLE",
    "TIMESTAMP": "TIMESTAMP",
    "VARCHAR": "STRING",
    "VARCHAR[]": "ARRAY<STRING>",
}
#: Settings every session of the pipeline runs with (module docstring); a local master also gets few shuffle
#: partitions (Spark's default, 200, is for clusters: tiny tasks on 2 cores).
SETTINGS = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.ansi.doubleQuotedIdentifiers": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": str(1 << 20),
}
#: Settings of a session's start (no web UI, no progress bars on the terminal).
STARTUP = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
LOCAL_SETTINGS = {"spark.sql.shuffle.partitions": "8", "spark.default.parallelism": "8"}
DEFAULT_MASTER = "local[*]"
MISSING = (
    "the Spark engine needs pyspark and a Java runtime: pip install 'ratings-pipeline[spark]', and a JRE from the "
    "system's package manager (apt-get install default-jre-headless)"
)


def session(scratch: SparkScratch, master: str = DEFAULT_MASTER) -> Any:
    """A Spark session at ``master`` (``local[N]``, or a cluster's URL) with :data:`SETTINGS`; one already running
    in this process is reused, with the settings applied.

    ``scratch`` holds the folders a new session may write on this machine (the fit's are inside the home:
    :attr:`pipeline.workspace.Workspace.spark_scratch`)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise PipelineError(MISSING) from None
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise PipelineError(MISSING)
    spark = SparkSession.getActiveSession()
    if spark is None:
        builder = SparkSession.builder.master(master).appName("ratings")
        folders = {"spark.sql.warehouse.dir": str(scratch.warehouse), "spark.local.dir": str(scratch.local)}
        settings = {**STARTUP, **folders, **SETTINGS, **(LOCAL_SETTINGS if master.startswith("local") else {})}
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    for key, value in SETTINGS.items():  # a session that was already running gets them too (its others stand)
        spark.conf.set(key, value)
    return spark


def check_protocol(table: Any, location: StoreLocation) -> None:
    """Refuse a table whose files alone are not its rows (module docstring)."""
    protocol = table.protocol()
    if protocol.min_reader_version != 1 or protocol.reader_features:
        features = ", ".join(protocol.reader_features or []) or "none"
        raise PipelineError(
            f"the Spark engine reads the store {location.describe()} as the Parquet files its Delta log lists, which "
            f"needs reader protocol 1 without reader features; this table has reader protocol "
            f"{protocol.min_reader_version} (features: {features}): fit it with --engine duckdb, or read it with "
            "Spark's Delta connector"
        )


def _view(family: str, losers: bool, present: set[str]) -> str:
    # a column added to the schema since the table was written (additive) reads null, as the DuckDB views read it
    source = {c: f'"{c}"' if c in present else "NULL" for c, _ in COLUMNS[family]}
    cols = ", ".join(f'CAST({source[c]} AS {SPARK_TYPES[t]}) AS "{c}"' for c, t in COLUMNS[family])
    anti = " LEFT ANTI JOIN _losers USING (_writer, _stream, _offset)" if losers else ""
    return f"SELECT {cols} FROM (SELECT * FROM _events WHERE family = '{family}'){anti}"


def register_views(spark: Any, location: StoreLocation, table: Any) -> None:
    """The views of :data:`pipeline.store.families.VIEWS` in ``spark``, over ``table`` (a ``DeltaTable`` at the
    version to read, at ``location``), one row per id as the store's views keep it (the first by ``(_writer,
    _stream, _offset)``; only ids whose hash repeats are ranked, as :mod:`pipeline.store.views` does)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    check_protocol(table, location)
    schema = from_arrow_schema(pa.schema(table.schema().to_arrow()))
    uris = table.file_uris()
    if uris:
        events = spark.read.schema(schema).option("basePath", location.table_uri).parquet(*uris)
    else:
        events = spark.createDataFrame([], schema)
    events.createOrReplaceTempView("_events")
    repeated = "SELECT _id_hash FROM _events GROUP BY _id_hash HAVING count(*) > 1"
    losers = bool(spark.sql(f"SELECT count(*) AS n FROM ({repeated}) r").collect()[0]["n"])
    spark.sql("DROP VIEW IF EXISTS _losers")  # of a store registered before in this session (uncached with it)
    if losers:
        spark.sql(
            "CACHE TABLE _losers AS SELECT _writer, _stream, _offset FROM (SELECT _writer, _stream, _offset, "
            "row_number() OVER (PARTITION BY id ORDER BY _writer, _stream, _offset) AS k "
            f"FROM _events WHERE _id_hash IN ({repeated})) ranked WHERE k > 1"
        )
    for family in VIEWS:  # views of analysed plans (a view created by SQL is parsed again at every use)
        spark.sql(_view(family, losers, set(schema.fieldNames()))).createOrReplaceTempView(family)
