"""The queryable store: DuckDB views over one version of the events table (docs/design.md, Storage).

A reader opens the table once, at one version (the newest, or ``--as-of``), and reads exactly the files that
version lists, never a glob: files of a crashed run, or of a version vacuum has not yet removed, stay
invisible. Each view of :data:`pipeline.store.families.VIEWS` is its family's partition with the family's columns
(also when the family has no rows), ``at`` as a naive UTC ``TIMESTAMP``. Views hold one row per id: when two
writers committed one id at the same moment, the row written first by ``(_writer, _stream, _offset)`` order is
kept (``ratings verify`` lists such ids). Retractions are NOT applied (the fitter applies them).

A local store is read with DuckDB's Parquet reader over the file list; an object store through delta-rs and
Arrow (a dataset DuckDB scans), so no DuckDB network extension is needed.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from ..errors import MachineFailure, PipelineError, StoreCorrupt
from ..utc import format_timestamp
from ..workspace import StoreLocation, StrPath, Workspace
from .commits import METADATA_KEY, CommitRecord
from .families import COLUMNS, RESERVED_COLUMNS, VIEWS, empty_select
from .table import RECOVER, fail, open_table, store_errors

_SQL_TYPES = {"TIMESTAMP": "TIMESTAMP"}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class Store:
    """A DuckDB connection with one view per family, pinned to one version of the events table."""

    def __init__(self, location: StoreLocation, table: Any, con: duckdb.DuckDBPyConnection):
        self.location = location
        self.table = table  # deltalake.DeltaTable at the pinned version, or None before the first compaction
        self.con = con
        self._actions: Any = None

    @property
    def version(self) -> int | None:
        """The table version every view reads (None before the first compaction)."""
        return self.table.version() if self.table is not None else None

    def actions(self) -> Any:
        """The live files of the pinned version (a ``pyarrow.Table``: path, size_bytes, num_records, partition.*)."""
        import pyarrow as pa

        if self._actions is None:
            self._actions = (
                pa.table(self.table.get_add_actions(flatten=True)) if self.table is not None else pa.table({})
            )
        return self._actions

    def files(self, family: str | None = None) -> list[str]:
        """URIs (absolute paths for a local store) of the live data files (of one family, or all)."""
        actions = self.actions()
        if not actions.num_rows:
            return []
        paths = actions["path"].to_pylist()
        families = actions["partition.family"].to_pylist()
        root = self.location.table_uri.rstrip("/")
        return sorted(f"{root}/{p}" for p, f in zip(paths, families, strict=True) if family in (None, f))

    def event_counts(self) -> dict[str, int]:
        """Rows per view (one per id), for the fit's ``source.events``."""
        return {family: int(self.con.execute(f'SELECT count(*) FROM "{family}"').fetchall()[0][0]) for family in VIEWS}

    def inputs_sha256(self) -> str | None:
        """sha256 of what the pinned version holds, named by the stream bytes it consumed, not its files.

        One line ``<stream> <start> <end> <sha256 of those bytes>`` per committed range, sorted; two stores that
        consumed the same stream bytes (a clone on another host, a rebuild, a local copy of a shared store) give
        the same hash whatever their writer names, file names, optimizations or commit numbers.
        """
        if self.table is None:
            return None
        from .table import commits

        lines = []
        for commit in commits(self.table, self.location):
            if METADATA_KEY in commit:
                record = CommitRecord.model_validate(commit[METADATA_KEY])
                for stream, rng in record.streams.items():
                    lines.append(f"{stream} {rng.start} {rng.end} {rng.sha256}\n")
        return hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()

    def damage(self) -> str | None:
        """The first live file of the pinned version that is missing, of another size than the log records, or
        whose Parquet footer does not parse (None: every file reads). Run when a query failed reading a file, to
        tell a damaged store from an error in the query."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.table is None or self.location.local is None:  # an object store's table was read whole at open
            return None
        actions = self.actions()
        root = self.location.table_uri.rstrip("/")
        for relative, size in zip(actions["path"].to_pylist(), actions["size_bytes"].to_pylist(), strict=True):
            path = f"{root}/{relative}"
            try:
                found = os.stat(path).st_size
                if found != size:
                    return f"{path} has {found} bytes, the log records {size}"
                pq.read_metadata(path)
            except FileNotFoundError:
                return f"{path} is missing"
            except (OSError, pa.ArrowException) as exc:
                return f"{path}: {_one_line(exc)}"
        return None

    def unknown_retractions(self) -> list[str]:
        """The ids that retractions name and no rating or rejection holds (sorted): such a retraction retracts
        nothing (a typo of an id, or a rating not compacted yet)."""
        rows = self.con.execute(
            "SELECT DISTINCT rating FROM retractions WHERE rating NOT IN "
            "(SELECT id FROM ratings UNION ALL SELECT id FROM rejections) ORDER BY rating"
        ).fetchall()
        return [r[0] for r in rows]

    def configs(self) -> set[str]:
        """Every config key the store has seen (attempts, ratings, rejections)."""
        rows = self.con.execute(
            "SELECT config_key FROM attempts UNION SELECT config_key FROM ratings "
            "UNION SELECT config_key FROM rejections"
        ).fetchall()
        return {r[0] for r in rows if r[0] is not None}

    def after(self, latest: str) -> tuple[int, str | None]:
        """How many events are dated after ``latest`` (a normalised time), and the latest of them."""
        union = " UNION ALL ".join(f'SELECT "at" FROM "{view}"' for view in VIEWS)
        limit = latest[:19].replace("T", " ")
        n, newest = self.con.execute(
            f'SELECT count(*), max("at") FROM ({union}) WHERE "at" > TIMESTAMP \'{limit}\''
        ).fetchall()[0]
        return int(n), plain(newest)

    def raise_damage(self, exc: BaseException) -> None:
        """:class:`StoreCorrupt` with the remedy when a live file is damaged (:meth:`damage`); else return, and
        ``exc`` (which DuckDB raised reading the store) is not the store's fault."""
        damage = self.damage()
        if damage is not None:
            raise StoreCorrupt(f"the store {self.location.describe()} cannot be read ({damage}); {RECOVER}") from None

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows of one query."""
        cursor = self.con.execute(sql)
        names = [d[0] for d in cursor.description] if cursor.description else []
        return names, cursor.fetchall()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _columns(family: str) -> str:
    cols = []
    for name, sql in COLUMNS[family]:
        value = f"timezone('UTC', \"{name}\")" if sql == "TIMESTAMP" else f'"{name}"'
        cols.append(f'CAST({value} AS {sql}) AS "{name}"')
    return ", ".join(cols)


def _source(store: Store, family: str | None) -> str | None:
    """The FROM clause of a family's rows (all families when None); None when there are none."""
    if store.location.local is None:
        where = f" WHERE family = {_quote(family)}" if family else ""
        return f"(SELECT * FROM _events{where})"
    files = store.files(family)
    if not files:
        return None
    # union_by_name: a file written before a column was added to the spec (an additive field, such as
    # route.decided's after) reads as null in that column.
    return f"read_parquet([{', '.join(_quote(f) for f in files)}], hive_partitioning = false, union_by_name = true)"


def _create_views(store: Store) -> None:
    con = store.con
    if store.location.local is None and store.table is not None and store.actions().num_rows:
        # An object store is read whole through delta-rs and Arrow at open (one pass, the files in parallel):
        # DuckDB scanning the dataset lazily would stop scans half way on LIMIT, leaving Arrow threads behind.
        con.register("_events", store.table.to_pyarrow_dataset().to_table())
    everything = _source(store, None) if store.table is not None else None
    losers = ""
    if everything is not None:
        dupes = con.execute(f"SELECT count(*) FROM (SELECT _id_hash FROM {everything} GROUP BY 1 HAVING count(*) > 1)")
        if dupes.fetchall()[0][0]:
            con.execute(
                "CREATE TEMP TABLE _losers AS SELECT _writer, _stream, _offset FROM ("
                "SELECT _writer, _stream, _offset, row_number() OVER "
                "(PARTITION BY id ORDER BY _writer, _stream, _offset) AS k "
                f"FROM {everything} WHERE _id_hash IN "
                f"(SELECT _id_hash FROM {everything} GROUP BY 1 HAVING count(*) > 1)) WHERE k > 1"
            )
            losers = " ANTI JOIN _losers USING (_writer, _stream, _offset)"
    for family in VIEWS:
        source = _source(store, family) if store.table is not None else None
        select = empty_select(family) if source is None else f"SELECT {_columns(family)} FROM {source}{losers}"
        con.execute(f'CREATE VIEW "{family}" AS {select}')


def open_store(
    home: Workspace | StrPath | None = None,
    as_of: str | int | None = None,
    *,
    read_only: bool = False,
    threads: int | None = None,
) -> Store:
    """Open the store at ``as_of`` (a version or a time; default the workspace's ``--as-of``, else the newest).

    With no table yet the views exist with no rows and ``version`` is None. ``read_only`` locks the connection
    down for untrusted SQL: DuckDB may read exactly the table's live files (``allowed_paths``) and nothing
    else, cannot write files (``enable_external_access = false``) and never spills to a temp directory
    (``temp_directory = ''``: DuckDB would otherwise allow its ``.tmp`` folder in the current directory).
    """
    ws = Workspace.of(home)
    location = ws.store
    table = open_table(location, as_of if as_of is not None else ws.as_of)
    settings: dict[str, Any] = {"temp_directory": ""} if read_only else {}
    if threads is not None:
        settings["threads"] = threads
    con = duckdb.connect(":memory:", config=settings)
    store = Store(location, table, con)
    try:
        _create_views(store)
        if read_only:
            allowed = ", ".join(_quote(f) for f in store.files()) if location.local is not None else ""
            con.execute(f"SET allowed_paths = [{allowed}]")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
    except duckdb.Error as exc:  # only our own SQL runs here: a file it cannot read is missing or damaged
        con.close()
        store.raise_damage(exc)
        raise
    except store_errors() as exc:  # delta-rs and Arrow reading an object store's table
        con.close()
        fail(exc, location, "read")
    except BaseException:
        con.close()
        raise
    return store


#: What DuckDB raises when a data file it reads is missing (IOException), or does not parse (InvalidInputException,
#: or its base class ``Error`` for a broken footer): the classes a damaged store gives, also in a user's query.
_READING = (duckdb.IOException, duckdb.InvalidInputException)


def _reading_error(exc: BaseException) -> bool:
    return isinstance(exc, _READING) or type(exc) is duckdb.Error


@contextmanager
def reading(store: Store) -> Iterator[None]:
    """Turn a failure while our own SQL reads the views (a missing or corrupt file) into one line that says how to
    recover; an out-of-memory is the machine's failure."""
    try:
        yield
    except duckdb.OutOfMemoryException as exc:
        raise MachineFailure(f"cannot read the store {store.location.describe()}: {_one_line(exc)}") from None
    except duckdb.Error as exc:  # our own SQL: a missing or damaged file, else a bug of ours (re-raised)
        store.raise_damage(exc)
        raise


def _one_line(exc: BaseException) -> str:
    """DuckDB's message on one line: its sentences joined, the ``LINE n:`` echo of the query and its caret dropped."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [line for line in lines if line and not line.startswith("LINE ") and set(line) != {"^"}]
    return " ".join(kept) or type(exc).__name__


def _duration(value: Any) -> str:
    """A ``timedelta`` as an ISO 8601 duration (``P1DT2H3M4.5S``, ``-PT1S``, ``PT0S``)."""
    total = value.total_seconds()
    sign = "-" if total < 0 else ""
    days, rest = divmod(abs(total), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    date_part = f"{int(days)}D" if days else ""
    time_part = "".join(
        f"{n:g}{unit}" for n, unit in ((int(hours), "H"), (int(minutes), "M"), (round(seconds, 6), "S")) if n
    )
    if not date_part and not time_part:
        time_part = "0S"
    return f"{sign}P{date_part}" + (f"T{time_part}" if time_part else "")


def plain(value: Any) -> Any:
    """A query value as JSON: times as RFC 3339 (UTC, ``Z``), NaN/inf as null, decimals as floats, UUIDs as text,
    intervals as ISO 8601 durations, bytes as hex; any other value as its text."""
    import datetime as dt
    import decimal
    import math
    import uuid

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, dt.datetime):
        return format_timestamp(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _duration(value)
    if isinstance(value, decimal.Decimal):
        value = float(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


#: How long ``ratings sql`` lets one query run (``--timeout``).
DEFAULT_TIMEOUT_S = 60.0
#: The statements ``ratings sql`` runs: one query (``SELECT``, ``WITH``, ``FROM``, ``VALUES``, ``DESCRIBE``,
#: ``SHOW``, ``SUMMARIZE`` are all SELECTs to DuckDB), or ``EXPLAIN [ANALYZE]`` of one.
_READ_ONLY = ("SELECT",)
_EXPLAIN = re.compile(r"\s*EXPLAIN(\s+ANALYZE)?\s", re.IGNORECASE)


def one_query(sql: str) -> str:
    """``sql`` if it is one read-only statement; else :class:`PipelineError` (exit 2) saying what it is."""
    if not sql.strip().strip(";").strip():
        raise PipelineError('empty query: give one SQL statement, e.g. "SELECT count(*) FROM ratings"')
    con = duckdb.connect(":memory:")
    try:
        statements = con.extract_statements(sql)
        explained = _EXPLAIN.match(sql)
        inner = con.extract_statements(sql[explained.end() :]) if explained and len(statements) == 1 else statements
    except duckdb.Error as exc:
        raise PipelineError(f"query failed: {_one_line(exc)}{_hint(exc, sql)}") from None
    finally:
        con.close()
    if len(statements) != 1:
        raise PipelineError(
            f"give one SQL statement: found {len(statements)} (ratings sql runs one read-only query at a time)"
        )
    kind = str(inner[0].type).rsplit(".", 1)[-1] if len(inner) == 1 else "MULTI"
    if kind not in _READ_ONLY:
        raise PipelineError(
            f"ratings sql runs one read-only query (SELECT, WITH, FROM, DESCRIBE, SHOW, EXPLAIN); this is a {kind} "
            "statement, and the store's views cannot be changed"
        )
    return sql


def run_sql(
    home: Workspace | StrPath | None,
    sql: str,
    *,
    as_of: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Run one read-only query on a read-only store (``ratings sql``); one JSON-ready dict per row.

    Raises :class:`pipeline.errors.PipelineError` (exit 2) for anything but one read-only statement, for a query
    that runs over ``timeout_s`` seconds and for every error DuckDB finds in it, with DuckDB's message (including
    any attempt to write a file or to read one that is not a live file of the table). When the query fails
    reading a file, the store's live files are checked: a missing or damaged one is :class:`StoreCorrupt`.
    """
    one_query(sql)
    if not timeout_s > 0 or not math.isfinite(timeout_s):
        raise PipelineError(f"--timeout {timeout_s}: give a positive number of seconds")
    with open_store(home, as_of, read_only=True) as store:
        if store.version is None:  # the answer would come from empty views: most likely the wrong --home
            raise PipelineError(
                f"no store at {store.location.describe()} yet: run `ratings compact` (or `fit-routing`) first, "
                "or give the home with --home"
            )
        timer = threading.Timer(timeout_s, store.con.interrupt)
        timer.daemon = True
        timer.start()
        try:
            names, rows = store.query(sql)
        except duckdb.InterruptException:
            raise PipelineError(
                f"query stopped after {timeout_s:g} s (--timeout): narrow it, or give a longer --timeout"
            ) from None
        except duckdb.OutOfMemoryException as exc:
            raise MachineFailure(f"query failed: {_one_line(exc)}: out of memory") from None
        except duckdb.Error as exc:  # the user's SQL: DuckDB's own message says what is wrong with it
            if _reading_error(exc):
                store.raise_damage(exc)
            raise PipelineError(f"query failed: {_one_line(exc)}{_hint(exc, sql)}") from None
        finally:
            timer.cancel()
    return [{name: plain(value) for name, value in zip(names, row, strict=True)} for row in rows]


def _hint(exc: BaseException, sql: str) -> str:
    """A hint when a query that DuckDB cannot parse names a column DuckDB reserves (``at``) unquoted: quote it."""
    if not isinstance(exc, duckdb.ParserException):
        return ""
    for name in sorted(RESERVED_COLUMNS):
        if re.search(rf'(?<!["\w]){name}(?![\w"])', sql, flags=re.IGNORECASE):
            return f'; hint: {name} is a reserved word in DuckDB, so the column must be quoted: "{name}"'
    return ""
