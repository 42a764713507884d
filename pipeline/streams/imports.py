"""Backfill: a long table of past results becomes events on the normal append path (``ratings import``).

The long format: one row per (task, config) result with columns ``task_id, config,
score, cost_usd, region, at``; an optional ``failure_mode`` column (the harness's label of how
the attempt ended, as Terminal-Bench's ``agent_timeout``) goes with the row's attempt; any other
column becomes a task label (as a string).
Each row gives a ``task.attempted`` and a ``task.rated`` event; each task gets one
``task.opened`` (region, labels and time of its earliest row).

Rules:

- ``score`` in [0, 1]; the attempt's status is ``success`` when ``score >= 0.5``, else ``failure``.
- a row with a **blank score** was not measured: it gives no events and is counted
  (``skipped_blank_score``), never an error.
- blank ``cost_usd`` is an unknown cost (null); blank ``region`` is ``general``.
- ``config`` is a config key (``cli/route/model/effort``, exactly four ``/``-parts) or
  else a model name, which becomes ``{"cli": "import", "route": null, "model": <name>, "effort": null}``
  (``config_format`` ``key`` or ``model`` says which, whatever the parts).
- ids are derived from the row content (SHA-256), so importing the same file again
  appends lines that compaction drops as duplicates: the store gains nothing.
- a bad row is an error naming its row (1-based, the header not counted) and column
  (the first :data:`MAX_NAMED` bad rows, and how many there are); nothing is appended. With
  ``skip_bad`` the bad rows go to ``deadletter/import-<file name>.jsonl`` and the good ones are imported.

The table is streamed, in bounded memory whatever its length: a first pass checks every row and finds
each task's earliest row (memory: one entry per task); a second pass appends the events of each chunk of
:data:`CHUNK_ROWS` rows as one framed batch (all or nothing for readers), a task's ``task.opened``
with its earliest row. An import cut short (a crash, a full disk) leaves whole chunks: run it again, and
compaction keeps each event once.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import gzip
import hashlib
import io
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..errors import InvalidBatch, InvalidEvent
from ..utc import format_timestamp, parse_timestamp
from ..utc import now as utc_now
from ..workspace import StrPath, Workspace
from .events import Config, Timestamp
from .future import MAX_FUTURE, future_reason, latest_time
from .log import FsyncPolicy, append

REQUIRED = ("task_id", "config", "score", "cost_usd", "region", "at")
#: Optional columns that describe the row's attempt, not the task: each becomes a field of its task.attempted.
ATTEMPT_COLUMNS = ("failure_mode",)
IMPORT_CLI = "import"
CHUNK_ROWS = 10_000  # rows per appended batch (and per Parquet read)
MAX_NAMED = 100  # bad rows named in an error; the count says how many there are


class ImportResult(BaseModel):
    source: str
    rows: int  # data rows read
    imported_rows: int  # rows that became events
    skipped_blank_score: int
    bad_rows: int  # dead-lettered (only with skip_bad)
    tasks: int
    appended: int  # events appended (duplicates of earlier imports included: compaction drops them)
    streams: dict[str, int]
    deadletter: str | None = None

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _rows(path: Path, width: int) -> Iterator[Sequence[str | None]]:
    """The table's data rows as text cells in column order (None for a missing value), from CSV, gzip'd CSV or
    Parquet, streamed. ``width``: the number of columns of the header."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        with pq.ParquetFile(path) as table:
            for batch in table.iter_batches(batch_size=CHUNK_ROWS):
                columns = [[_text(v) for v in column.to_pylist()] for column in batch.columns]
                yield from (list(cells) for cells in zip(*columns, strict=True))
        return
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rb") as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline=""))
        if next(reader, None) is None:
            return
        for row in reader:
            if len(row) > width:
                raise InvalidEvent(
                    f"{len(row) - width} more cell(s) than the header has columns",
                    line=reader.line_num - 1,
                    source=str(path),
                )
            yield [*row, *([None] * (width - len(row)))] if len(row) < width else row


# What reading a file that is not the table it claims to be raises: gzip's BadGzipFile (an OSError), a
# truncated gzip (EOFError), bytes that are not UTF-8 (UnicodeDecodeError, a ValueError), pyarrow's
# ArrowInvalid (a ValueError) for a file that is not Parquet, csv.Error for a NUL byte.
_UNREADABLE = (OSError, EOFError, ValueError, csv.Error)


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    """A file that cannot be read as a table becomes one :class:`InvalidEvent` (exit 2), not a traceback."""
    try:
        yield
    except _UNREADABLE as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InvalidEvent(f"cannot read the table: {reason}", source=str(path)) from None


def _numbered_rows(path: Path, width: int) -> Iterator[tuple[int, Sequence[str | None]]]:
    """``(row number, cells)`` of every data row; only reading errors become :func:`_reading`'s (what the caller
    does with a row between two reads, such as appending, raises its own errors)."""
    with _reading(path):
        yield from enumerate(_rows(path, width), start=1)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return format_timestamp(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def _columns(path: Path) -> list[str]:
    if path.name.lower().endswith(".parquet"):
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as raw:
        header = next(csv.reader(io.TextIOWrapper(raw, encoding="utf-8", newline="")), None)
    return list(header or [])


def _digest(*parts: Any) -> str:
    """A deterministic id suffix from content: SHA-256 of the parts' canonical JSON, 24 hex digits (96 bits)."""
    return _hashed(_canonical(parts))


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


#: How a ``config`` cell is read: ``key`` a config key, ``model`` a model name, ``auto`` a key when it has exactly
#: four ``/``-parts, else a model name.
ConfigFormat = Literal["auto", "key", "model"]


@functools.lru_cache(maxsize=4096)
def _config(text: str, fmt: ConfigFormat = "auto") -> tuple[dict[str, str | None], str]:
    """The config of a ``config`` cell, and its canonical JSON (for the rows' ids)."""
    as_key = fmt == "key" or (fmt == "auto" and len(text.split("/")) == 4)
    config = (Config.from_key(text) if as_key else Config(cli=IMPORT_CLI, model=text)).model_dump()
    return config, _canonical(config)


def _canonical(value: Any) -> str:
    """The JSON text the ids are hashed from: sorted keys, no spaces, UTF-8 as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _number(text: str, *, low: float, high: float | None) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    if value < low or (high is not None and value > high):
        bound = f"in [{low:g}, {high:g}]" if high is not None else f">= {low:g}"
        raise ValueError(f"{value:g} is not {bound}")
    return value


@functools.cache
def _timestamp_adapter() -> TypeAdapter:
    return TypeAdapter(Timestamp)


@functools.lru_cache(maxsize=65536)
def _timestamp(text: str) -> str:
    """The events' own timestamp rule (RFC 3339 with a zone, normalised to UTC ``Z``)."""
    try:
        return _timestamp_adapter().validate_python(text)
    except ValidationError as exc:
        raise ValueError(exc.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")) from None


class _Row(NamedTuple):
    task: str
    config: dict[str, str | None]
    config_json: str
    score: float
    cost_usd: float | None
    region: str
    at: str
    labels: dict[str, str]
    attempt: dict[str, str]  # ATTEMPT_COLUMNS present and not blank


class _Columns(NamedTuple):
    """Where each required column is, and the other columns (task labels)."""

    names: list[str]
    at: dict[str, int]  # required column -> position
    extra: list[tuple[str, int]]  # task labels
    attempt: list[tuple[str, int]]  # ATTEMPT_COLUMNS present
    latest: str | None = None  # the latest time a row may carry (None: any; docs/design.md, Bounds)
    skew: timedelta = MAX_FUTURE

    @classmethod
    def of(cls, names: list[str], future: timedelta | None = MAX_FUTURE) -> _Columns:
        at = {name: names.index(name) for name in REQUIRED}
        latest = latest_time(utc_now(), future) if future is not None else None
        known = (*REQUIRED, *ATTEMPT_COLUMNS)
        return cls(
            names,
            at,
            [(name, i) for i, name in enumerate(names) if name not in known],
            [(name, i) for i, name in enumerate(names) if name in ATTEMPT_COLUMNS],
            latest,
            future or MAX_FUTURE,
        )

    def record(self, cells: Sequence[str | None]) -> dict[str, str | None]:
        return dict(zip(self.names, cells, strict=True))


def _check(cells: Sequence[str | None], columns: _Columns, fmt: ConfigFormat = "auto") -> _Row | None:
    """A validated row, None for a blank score; :class:`ValueError` with ``column: reason`` when bad."""
    at_ = columns.at
    text = {column: (cells[at_[column]] or "").strip() for column in REQUIRED}
    if not text["score"]:
        return None
    if not text["task_id"]:
        raise ValueError("task_id", "must not be blank")
    if not text["config"]:
        raise ValueError("config", "must not be blank")
    try:
        config, config_json = _config(text["config"], fmt)
    except ValueError as exc:
        raise ValueError("config", str(exc).splitlines()[0]) from None
    values: dict[str, float | None] = {"cost_usd": None}
    for column, low, high in (("score", 0.0, 1.0), ("cost_usd", 0.0, None)):
        if not text[column]:
            continue
        try:
            values[column] = _number(text[column], low=low, high=high)
        except ValueError as exc:
            reason = str(exc) if "is not" in str(exc) else f"{text[column]!r} is not a number"
            raise ValueError(column, reason) from None
    if not text["at"]:
        raise ValueError("at", "must not be blank")
    try:
        at = _timestamp(text["at"])
    except ValueError as exc:
        raise ValueError("at", str(exc)) from None
    late = future_reason(at, columns.latest, columns.skew) if columns.latest is not None else None
    if late is not None:
        raise ValueError("at", late)
    labels = {name: value for name, i in columns.extra if (value := cells[i]) not in (None, "")}
    attempt = {name: value.strip() for name, i in columns.attempt if (value := cells[i]) and value.strip()}
    score = values["score"]
    assert score is not None
    return _Row(
        text["task_id"],
        config,
        config_json,
        score,
        values["cost_usd"],
        text["region"] or "general",
        at,
        labels,
        attempt,
    )


class _Checked(NamedTuple):
    """What the first pass learns: every row checked, and where each task's ``task.opened`` comes from."""

    rows: int
    blank: int
    bad: int
    opened_rows: frozenset[int]  # the row number of each task's earliest row (ties: the first in the file)


def import_table(
    home: Workspace | StrPath | None,
    path: str | os.PathLike,
    *,
    fmt: Literal["long"] = "long",
    rater_kind: str = "gate",
    rater_name: str | None = None,
    thread: str | None = None,
    skip_bad: bool = False,
    fsync: FsyncPolicy = "batch",
    progress: Callable[[int, int], None] | None = None,
    config_format: ConfigFormat = "auto",
    future: timedelta | None = MAX_FUTURE,
) -> ImportResult:
    """Import a long table (CSV, CSV.gz or Parquet) as events (the module docstring's rules; a row dated more than
    ``future`` after now is bad). ``progress`` gets the rows done and the rows in all after each chunk;
    ``config_format`` says how a ``config`` cell is read (:data:`ConfigFormat`)."""
    if fmt != "long":
        raise InvalidEvent(f"unknown import format {fmt!r} (known: long)", source=str(path))
    ws = Workspace.of(home)
    path = Path(path)
    if not path.is_file():
        raise InvalidEvent("no such file", source=str(path))
    rater = {"kind": rater_kind, "name": rater_name or path.name.split(".")[0]}
    with _reading(path):
        columns = _columns(path)
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise InvalidEvent(
            f"missing column(s) {', '.join(missing)}; the long format needs {', '.join(REQUIRED)}", source=str(path)
        )
    table = _Columns.of(columns, future)
    stamp = _stamp(path)
    letters = ws.import_dead_letters(path)
    checked = _first_pass(ws, path, table, letters if skip_bad else None, config_format)
    rater_json = _canonical(rater)
    appended, streams = 0, dict[str, int]()
    events: list[dict[str, Any]] = []
    done = 0

    def flush(rows: int) -> None:
        nonlocal appended, events
        if events:
            result = append(ws, events, fsync=fsync, source=str(path), future=None)  # rows checked first
            appended += result.appended
            for stream, count in result.streams.items():
                streams[stream] = streams.get(stream, 0) + count
        if progress is not None:
            progress(rows, checked.rows)
        events = []

    for number, cells in _numbered_rows(path, len(columns)):
        try:
            good = _check(cells, table, config_format)
        except ValueError:
            good = None  # dead-lettered by the first pass
        if good is not None:
            if number in checked.opened_rows:
                events.append(_opened(good, thread))
            events += _row_events(good, rater, rater_json)
        if number % CHUNK_ROWS == 0:
            flush(number)
        done = number
    flush(done)
    if _stamp(path) != stamp:
        raise InvalidEvent(
            f"the file changed while it was imported ({appended} event(s) appended): import it again (the ids come "
            "from the row content, so compaction keeps each event once)",
            source=str(path),
        )
    imported = checked.rows - checked.blank - checked.bad
    return ImportResult(
        source=str(path),
        rows=checked.rows,
        imported_rows=imported,
        skipped_blank_score=checked.blank,
        bad_rows=checked.bad,
        tasks=len(checked.opened_rows),
        appended=appended,
        streams=streams,
        deadletter=str(letters) if checked.bad else None,
    )


def _stamp(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_size, info.st_mtime_ns


def _first_pass(
    ws: Workspace, path: Path, table: _Columns, letters: Path | None, config_format: ConfigFormat = "auto"
) -> _Checked:
    """Check every row; dead-letter the bad ones (``letters``) or raise :class:`InvalidBatch` naming them."""
    first: dict[str, tuple[datetime, int]] = {}
    named: list[InvalidEvent] = []
    rows = blank = bad = 0
    with _DeadLetters(ws, letters) as dead:
        for number, cells in _numbered_rows(path, len(table.names)):
            rows += 1
            try:
                good = _check(cells, table, config_format)
            except ValueError as exc:
                column, reason = exc.args
                bad += 1
                if letters is not None:
                    raw = table.record(cells)
                    dead.write({"source": str(path), "row": number, "column": column, "reason": reason, "raw": raw})
                elif len(named) < MAX_NAMED:
                    named.append(InvalidEvent(reason, field=column, line=number, source=f"{path} row"))
                continue
            if good is None:
                blank += 1
                continue
            moment = parse_timestamp(good.at)
            seen = first.get(good.task)
            if seen is None or moment < seen[0]:
                first[good.task] = (moment, number)
    if named:
        raise InvalidBatch(named, total=bad)
    return _Checked(rows, blank, bad, frozenset(number for _, number in first.values()))


def _opened(row: _Row, thread: str | None) -> dict[str, Any]:
    opened: dict[str, Any] = {"type": "task.opened", "task": row.task, "region": row.region, "at": row.at}
    if row.labels:
        opened["labels"] = row.labels
    if thread is not None:
        opened["thread"] = thread
    return {"id": f"imp-{_digest(opened)}", **opened}


def _row_events(row: _Row, rater: dict[str, str], rater_json: str) -> list[dict[str, Any]]:
    """The row's ``task.attempted`` and ``task.rated``, ids hashed as :func:`_digest` would (its canonical JSON
    written directly for these two fixed shapes: the ids of every import ever made stay the same)."""
    status = "success" if row.score >= 0.5 else "failure"
    cost = "null" if row.cost_usd is None else float.__repr__(row.cost_usd)
    at, task = _quoted(row.at), _quoted(row.task)
    if row.attempt:  # rows with attempt columns hash them too; every other row keeps the id it always had
        attempted_id = _digest(
            {
                "at": row.at,
                "config": row.config,
                "cost_usd": row.cost_usd,
                "status": status,
                "task": row.task,
                "type": "task.attempted",
                **row.attempt,
            }
        )
    else:
        attempted_id = _hashed(
            f'[{{"at":{at},"config":{row.config_json},"cost_usd":{cost},"status":"{status}","task":{task},'
            '"type":"task.attempted"}]'
        )
    rated_id = _hashed(
        f'[{{"at":{at},"config":{row.config_json},"rater":{rater_json},"score":{float.__repr__(row.score)},'
        f'"task":{task},"type":"task.rated"}}]'
    )
    common = {"task": row.task, "config": row.config}
    return [
        {
            "id": f"imp-{attempted_id}",
            "type": "task.attempted",
            **common,
            "status": status,
            "cost_usd": row.cost_usd,
            "at": row.at,
            **row.attempt,
        },
        {"id": f"imp-{rated_id}", "type": "task.rated", **common, "rater": rater, "score": row.score, "at": row.at},
    ]


#: A string as the canonical JSON writes it (json's own C encoder, as ``ensure_ascii=False`` uses it).
_quoted = json.encoder.encode_basestring


class _DeadLetters:
    """``deadletter/import-<file name>.jsonl``, appended ``{source, row, column, reason, raw}`` records (opened
    inside the home only, on the first record; fsync'd when closed)."""

    def __init__(self, ws: Workspace, path: Path | None) -> None:
        self.ws, self.path, self.fd = ws, path, -1
        self.buffer: list[bytes] = []

    def __enter__(self) -> _DeadLetters:
        return self

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        self.buffer.append(line.encode("utf-8"))
        if len(self.buffer) >= 1024:
            self._drain()

    def _drain(self) -> None:
        if not self.buffer or self.path is None:
            return
        if self.fd < 0:
            self.fd = self.ws.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        view = memoryview(b"".join(self.buffer))
        while view:
            view = view[os.write(self.fd, view) :]
        self.buffer = []

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self._drain()
                if self.fd >= 0:
                    os.fsync(self.fd)
        finally:
            if self.fd >= 0:
                os.close(self.fd)
