"""The queryable store: DuckDB views over exactly the Parquet files a manifest lists (DESIGN 4).

Never a glob: files of a crashed or losing compactor stay invisible. Every view
of :data:`pipeline.families.VIEWS` exists with its columns even when its family
has no rows. Views are one row per event; retractions are NOT applied (the
fitter applies them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb

from .families import COLUMNS, VIEWS, empty_select
from .home import Home
from .manifest import Manifest, load_manifest, manifest_numbers, newest_manifest_number

__all__ = ["Store", "newest_manifest_number", "open_store"]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class Store:
    """A DuckDB connection with one view per family, pinned to one manifest."""

    def __init__(self, home: Home, manifest: Manifest | None, con: duckdb.DuckDBPyConnection):
        self.home = home
        self._manifest = manifest
        self.con = con

    @property
    def manifest_number(self) -> int | None:
        return self._manifest.number if self._manifest else None

    @property
    def manifest(self) -> dict[str, Any] | None:
        """The manifest as a dict (None before the first compaction)."""
        return self._manifest.model_dump(mode="json", by_alias=True) if self._manifest else None

    def files(self, family: str | None = None) -> list[Path]:
        """Absolute paths of the store's Parquet files (of one family, or all)."""
        if not self._manifest:
            return []
        return [self.home.store / e.path for e in self._manifest.files if family in (None, e.family)]

    def event_counts(self) -> dict[str, int]:
        """Rows per family, as the manifest records them."""
        rows = self._manifest.rows if self._manifest else {}
        return {family: int(rows.get(family, 0)) for family in VIEWS}

    def query(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Column names and rows of one query."""
        cursor = self.con.execute(sql)
        names = [d[0] for d in cursor.description] if cursor.description else []
        return names, cursor.fetchall()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def family_select(family: str, paths: list[Path]) -> str:
    """``SELECT`` of the family's columns (in contract order) from the given Parquet files."""
    if not paths:
        return empty_select(family)
    cols = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in COLUMNS[family])
    files = ", ".join(_quote(str(p)) for p in paths)
    return f"SELECT {cols} FROM read_parquet([{files}], hive_partitioning = false)"


def open_store(
    home: str | os.PathLike | Home | None = None,
    manifest: int | None = None,
    *,
    read_only: bool = False,
    threads: int | None = None,
) -> Store:
    """Open the store at manifest ``manifest`` (the newest when None).

    With no manifest at all the views exist with no rows and ``manifest_number`` is None.
    ``read_only`` locks the connection down for untrusted SQL: DuckDB may read exactly the
    store's files (``allowed_paths``) and nothing else, and cannot write files
    (``enable_external_access = false``).
    """
    home = Home.resolve(home)
    chosen = load_manifest(home, manifest)
    config: dict[str, Any] = {}
    if threads is not None:
        config["threads"] = threads
    con = duckdb.connect(":memory:", config=config)
    try:
        store = Store(home, chosen, con)
        for family in VIEWS:
            con.execute(f'CREATE VIEW "{family}" AS {family_select(family, store.files(family))}')
        if read_only:
            allowed = ", ".join(_quote(str(p)) for p in store.files())
            con.execute(f"SET allowed_paths = [{allowed}]")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return store


def _one_line(exc: Exception) -> str:
    """DuckDB's message on one line: its sentences joined, the ``LINE n:`` echo of the query and its caret dropped."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [line for line in lines if line and not line.startswith("LINE ") and set(line) != {"^"}]
    return " ".join(kept) or type(exc).__name__


def _plain(value: Any) -> Any:
    """A query value as JSON: timestamps as RFC 3339 (UTC, ``Z``), NaN/inf as null, decimals as floats."""
    import datetime as dt
    import decimal
    import math

    if isinstance(value, dt.datetime):
        moment = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
        return moment.isoformat(timespec="microseconds" if moment.microsecond else "seconds") + "Z"
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


def run_sql(home: str | os.PathLike | Home | None, sql: str, *, manifest: int | None = None) -> list[dict[str, Any]]:
    """Run one query on a read-only store (``ratings sql``); one JSON-ready dict per row.

    Raises :class:`pipeline.errors.PipelineError` (exit 2) for SQL DuckDB rejects, including any attempt to
    write a file or read one outside the store.
    """
    from .errors import PipelineError

    if manifest is not None and manifest not in manifest_numbers(home):
        # A number the user typed is bad input (exit 2), not a corrupt store (load_manifest's StoreCorrupt, exit 1).
        newest = newest_manifest_number(home)
        raise PipelineError(
            f"no manifest {manifest} in this store "
            f"({'nothing compacted yet' if newest is None else f'newest: {newest}'})"
        )
    with open_store(home, manifest, read_only=True) as store:
        try:
            names, rows = store.query(sql)
        except duckdb.Error as exc:
            raise PipelineError(f"query failed: {_one_line(exc)}") from None
    return [{name: _plain(value) for name, value in zip(names, row)} for row in rows]
