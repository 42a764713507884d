"""Backfill: a long table of past results becomes events on the normal append path (``ratings import``).

The long format: one row per (task, config) result with columns ``task_id, config,
score, cost_usd, region, at``; any other column becomes a task label (as a string).
Each row gives a ``task.attempted`` and a ``task.rated`` event; each task gets one
``task.opened`` (region, labels and time of its earliest row).

Rules:

- ``score`` in [0, 1]; the attempt's status is ``success`` when ``score >= 0.5``, else ``failure``.
- a row with a **blank score** was not measured: it gives no events and is counted
  (``skipped_blank_score``), never an error.
- blank ``cost_usd`` is an unknown cost (null); blank ``region`` is ``general``.
- ``config`` is a config key (``cli/route/model/effort``, exactly four ``/``-parts) or
  else a model name, which becomes ``{"cli": "import", "route": null, "model": <name>, "effort": null}``.
- ids are derived from the row content (SHA-256), so importing the same file again
  appends lines that compaction drops as duplicates: the store gains nothing.
- a bad row is an error naming its row (1-based, the header not counted) and column;
  nothing is appended. With ``skip_bad`` the bad rows go to
  ``deadletter/import-<file name>.jsonl`` and the good ones are imported.
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
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError

from .errors import InvalidBatch, InvalidEvent
from .events import Config, Timestamp, format_timestamp
from .home import Home, write_synced
from .streams import FsyncPolicy, append

REQUIRED = ("task_id", "config", "score", "cost_usd", "region", "at")
IMPORT_CLI = "import"


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


def _rows(path: Path) -> Iterator[dict[str, str | None]]:
    """The table's rows as text (None for a missing value), from CSV, gzip'd CSV or Parquet."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        for row in table.to_pylist():
            yield {k: _text(v) for k, v in row.items()}
        return
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        reader = csv.DictReader(text)
        if reader.fieldnames is None:
            return
        for row in reader:
            if None in row:
                raise InvalidEvent(
                    f"{len(row[None])} more cell(s) than the header has columns",
                    line=reader.line_num - 1,
                    source=str(path),
                )
            yield row


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


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return format_timestamp(moment)
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
    """A deterministic id suffix from content: SHA-256 of the parts' JSON, 24 hex digits (96 bits)."""
    data = json.dumps(parts, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:24]


@functools.lru_cache(maxsize=4096)
def _config(text: str) -> Config:
    if len(text.split("/")) == 4:
        return Config.from_key(text)
    return Config(cli=IMPORT_CLI, route=None, model=text, effort=None)


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


class _Row(BaseModel):
    task: str
    config: Config
    score: float
    cost_usd: float | None
    region: str
    at: str
    labels: dict[str, str]


def _check(row: dict[str, str | None], extra_columns: list[str]) -> _Row | None:
    """A validated row, None for a blank score; :class:`ValueError` with ``column: reason`` when bad."""

    def cell(column: str) -> str:
        return (row.get(column) or "").strip()

    def fail(column: str, reason: str) -> ValueError:
        return ValueError(column, reason)

    if not cell("score"):
        return None
    task = cell("task_id")
    if not task:
        raise fail("task_id", "must not be blank")
    if not cell("config"):
        raise fail("config", "must not be blank")
    try:
        config = _config(cell("config"))
    except ValueError as exc:
        raise fail("config", str(exc).splitlines()[0]) from None
    values: dict[str, Any] = {}
    for column, low, high in (("score", 0.0, 1.0), ("cost_usd", 0.0, None)):
        text = cell(column)
        if not text:
            values[column] = None
            continue
        try:
            values[column] = _number(text, low=low, high=high)
        except ValueError as exc:
            raise fail(column, str(exc) if "is not" in str(exc) else f"{text!r} is not a number") from None
    if not cell("at"):
        raise fail("at", "must not be blank")
    try:
        at = _timestamp(cell("at"))
    except ValueError as exc:
        raise fail("at", str(exc)) from None
    labels = {c: row[c] for c in extra_columns if row.get(c) not in (None, "")}
    return _Row(
        task=task,
        config=config,
        score=values["score"],
        cost_usd=values["cost_usd"],
        region=cell("region") or "general",
        at=at,
        labels=labels,
    )


def _moment(at: str) -> datetime:
    return datetime.fromisoformat(at.replace("Z", "+00:00"))


def import_table(
    home: str | os.PathLike | Home | None,
    path: str | os.PathLike,
    *,
    fmt: Literal["long"] = "long",
    rater_kind: str = "gate",
    rater_name: str | None = None,
    thread: str | None = None,
    skip_bad: bool = False,
    fsync: FsyncPolicy = "batch",
) -> ImportResult:
    """Import a long table (CSV, CSV.gz or Parquet) as events; see the module docstring for the rules."""
    if fmt != "long":
        raise InvalidEvent(f"unknown import format {fmt!r} (known: long)", source=str(path))
    home = Home.resolve(home)
    path = Path(path)
    if not path.is_file():
        raise InvalidEvent("no such file", source=str(path))
    stem = path.name.split(".")[0]
    rater = {"kind": rater_kind, "name": rater_name or stem}
    with _reading(path):
        columns = _columns(path)
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise InvalidEvent(
            f"missing column(s) {', '.join(missing)}; the long format needs {', '.join(REQUIRED)}", source=str(path)
        )
    extra_columns = [c for c in columns if c not in REQUIRED]
    good: list[_Row] = []
    bad: list[tuple[int, str, str, dict]] = []
    blank = total = 0
    with _reading(path):
        for number, row in enumerate(_rows(path), start=1):
            total += 1
            try:
                checked = _check(row, extra_columns)
            except ValueError as exc:
                column, reason = exc.args
                bad.append((number, column, reason, row))
                continue
            if checked is None:
                blank += 1
            else:
                good.append(checked)
    if bad and not skip_bad:
        raise InvalidBatch(
            [InvalidEvent(reason, field=column, line=number, source=f"{path} row") for number, column, reason, _ in bad]
        )
    events = _events(good, rater, thread)
    letters = _dead_letter(home, path, bad) if bad else None
    result = append(home, events, fsync=fsync, source=str(path)) if events else None
    return ImportResult(
        source=str(path),
        rows=total,
        imported_rows=len(good),
        skipped_blank_score=blank,
        bad_rows=len(bad),
        tasks=len({r.task for r in good}),
        appended=result.appended if result else 0,
        streams=result.streams if result else {},
        deadletter=str(letters) if letters else None,
    )


def _events(rows: list[_Row], rater: dict[str, str], thread: str | None) -> list[dict[str, Any]]:
    first: dict[str, _Row] = {}
    for row in rows:
        seen = first.get(row.task)
        if seen is None or _moment(row.at) < _moment(seen.at):
            first[row.task] = row
    events: list[dict[str, Any]] = []
    for task, row in first.items():
        opened = {"type": "task.opened", "task": task, "region": row.region, "at": row.at}
        if row.labels:
            opened["labels"] = row.labels
        if thread is not None:
            opened["thread"] = thread
        events.append({"id": f"imp-{_digest(opened)}", **opened})
    for row in rows:
        config = row.config.model_dump()
        attempted = {
            "type": "task.attempted",
            "task": row.task,
            "config": config,
            "status": "success" if row.score >= 0.5 else "failure",
            "cost_usd": row.cost_usd,
            "at": row.at,
        }
        rated = {
            "type": "task.rated",
            "task": row.task,
            "config": config,
            "rater": rater,
            "score": row.score,
            "at": row.at,
        }
        events.append({"id": f"imp-{_digest(attempted)}", **attempted})
        events.append({"id": f"imp-{_digest(rated)}", **rated})
    return events


def _dead_letter(home: Home, path: Path, bad: list[tuple[int, str, str, dict]]) -> Path:
    """Append the bad rows to ``deadletter/import-<file name>.jsonl``: ``{source, row, column, reason, raw}``."""
    home.deadletter.mkdir(parents=True, exist_ok=True)
    target = home.deadletter / f"import-{path.name}.jsonl"
    lines = b"".join(
        (
            json.dumps(
                {"source": str(path), "row": n, "column": c, "reason": r, "raw": raw},
                ensure_ascii=False,
                separators=(",", ":"),
            )
            + "\n"
        ).encode("utf-8")
        for n, c, r, raw in bad
    )
    write_synced(target, lines, os.O_APPEND | os.O_CREAT)
    return target
