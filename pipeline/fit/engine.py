"""Where the fit's aggregation runs (:mod:`pipeline.fit.aggregate`): an engine that executes its SQL statements
and hands their rows back as Arrow, and the few spellings that differ between engines.

DuckDB over the store's views is the engine here (:class:`DuckDBEngine`); Spark SQL over the same Delta table is
the other (the ``spark`` branch, docs/design.md, Storage): one more :class:`Engine` with :data:`SPARK`'s dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa


class Engine(Protocol):
    """Where the statements run: DuckDB here (:class:`DuckDBEngine`), Spark SQL on a cluster."""

    dialect: Dialect

    def execute(self, sql: str) -> None:
        """Run a statement that creates a temporary table or view."""
        ...

    def fetch(self, sql: str) -> pa.Table:
        """Run a query; its rows as Arrow."""
        ...


@dataclass(frozen=True)
class Dialect:
    """The spellings that differ between engines: the microseconds of a timestamp, the rows of a list, a
    temporary table; and whether a relation one statement reads more than once is made an engine-side table first
    (``materialize``: Spark inlines a CTE at every reference and computes it again each time; DuckDB computes a CTE
    read twice once)."""

    micros: str = "epoch_us"
    explode: str = "unnest"
    temp_table: str = "CREATE OR REPLACE TEMP TABLE"
    drop: str = "DROP TABLE IF EXISTS"
    materialize: bool = False


DUCKDB = Dialect()
SPARK = Dialect(
    micros="unix_micros",
    explode="explode",
    temp_table="CREATE OR REPLACE TEMP VIEW",
    drop="DROP VIEW IF EXISTS",
    materialize=True,
)


class DuckDBEngine:
    """A DuckDB connection with the store's views (``pipeline.store.open_store(...).con``, or one a caller filled
    with views of its own rows under the same names and columns: :mod:`pipeline.store.families`)."""

    dialect = DUCKDB

    def __init__(self, con: Any, *, threads: int | None = None):
        self.con = getattr(con, "con", con)
        # Each family is scanned more than once: keep the Parquet footers of a store of many small files in memory.
        self.con.execute("SET parquet_metadata_cache = true")
        if threads is not None:
            self.con.execute(f"SET threads = {int(threads)}")

    def execute(self, sql: str) -> None:
        self.con.execute(sql)

    def fetch(self, sql: str) -> pa.Table:
        return self.con.sql(sql).to_arrow_table()
