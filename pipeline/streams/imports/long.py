"""Long tables (``--format long``): one row per (task, config) result, ``task_id, config, score, cost_usd,
region, at``; any other column becomes a task label (docs/design.md, Imports, Long tables).

Rules:

- ``score`` in [0, 1] (or mapped by ``--score-range``); the attempt's status is ``success`` when ``score >= 0.5``,
  else ``failure``. A blank or NaN score was not measured: the row gives no events and is counted.
- blank or NaN ``cost_usd`` is an unknown cost (null, never 0); blank ``region`` is ``general``.
- ``config``: ``--config-column-format key`` (every cell a 4-part config key ``cli/route/model/effort``), ``model``
  (every cell a model name, ``{"cli": "import", "model": <cell>}``) or ``auto`` (the default: a column with no
  valid 4-part key is read as model names, and the summary says so; a column that mixes keys and names is
  refused with an example of each). ``--config-map`` names win over both.
- CSV (a UTF-8 byte order mark is skipped; the delimiter is ``,``, or ``;``, tab or ``|`` when the header reads
  only that way), CSV.gz or Parquet, streamed.
- ids are the digests of the row's events (the ids every earlier import gave); a row is identified, for updates,
  by its task, config, rater and time.

:func:`read_long_table` is the reader alone (typed rows in chunks), for other commands that read long tables.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import gzip
import io
import json
import math
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from hashlib import blake2b, sha256
from pathlib import Path
from typing import Any, NamedTuple

from pydantic_core import to_json

from ...errors import InvalidBatch, InvalidEvent
from ..events import MAX_COST_USD, Config, format_timestamp
from .ledger import KINDS
from .mapping import Cfg, Line, Opened, Prepared, Rendered, Unit, canonical, config_of, digest24
from .options import ConfigColumnFormat, ImportOptions, Maps, ScoreRange
from .values import Clock, Problem, rfc3339

REQUIRED = ("task_id", "config", "score", "cost_usd", "region", "at")
#: Optional columns that describe the row's attempt, not its task: each becomes a field of its task.attempted (and
#: enters its id; a row without one keeps the id it always had). Terminal-Bench's ``failure_mode`` (agent_timeout...).
ATTEMPT_COLUMNS = ("failure_mode",)
IMPORT_CLI = "import"
CHUNK_ROWS = 10_000  # rows per chunk read (and per Parquet batch)
DELIMITERS = (",", ";", "\t", "|")

#: A string as the canonical JSON writes it (json's own C encoder, as ``ensure_ascii=False`` uses it).
_quoted = json.encoder.encode_basestring


class LongRow(NamedTuple):
    """One checked row of a long table."""

    row: int  # 1-based, the header not counted
    task: str
    config: Cfg
    score: float
    cost_usd: float | None
    region: str
    at: str
    labels: dict[str, str]
    attempt: dict[str, str] | None = None  # ATTEMPT_COLUMNS present and not blank


# What reading a file that is not the table it claims to be raises: gzip's BadGzipFile (an OSError), a
# truncated gzip (EOFError), bytes that are not UTF-8 (UnicodeDecodeError, a ValueError), pyarrow's
# ArrowInvalid (a ValueError) for a file that is not Parquet, csv.Error for a NUL byte.
_UNREADABLE = (OSError, EOFError, ValueError, csv.Error)


@contextlib.contextmanager
def reading(path: Path) -> Iterator[None]:
    """A file that cannot be read as a table becomes one :class:`InvalidEvent` (exit 2), not a traceback."""
    try:
        yield
    except _UNREADABLE as exc:
        if isinstance(exc, InvalidEvent):
            raise
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InvalidEvent(f"cannot read the table: {reason}", source=str(path)) from None


def _text(value: Any) -> str | None:
    """A Parquet cell as the text a CSV would hold (None for a missing value: null or NaN)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return format_timestamp(value if value.tzinfo else value.replace(tzinfo=UTC))
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)


def _is_parquet(path: Path) -> bool:
    return path.name.lower().endswith(".parquet")


def _opener(path: Path) -> Callable[..., Any]:
    return gzip.open if path.name.lower().endswith(".gz") else open


def _header(path: Path) -> tuple[list[str], str]:
    """The column names and the delimiter (the one that reads every required column; ``,`` otherwise)."""
    if _is_parquet(path):
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names), ","
    with _opener(path)(path, "rb") as raw:
        first = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="").readline()
    for delimiter in DELIMITERS:
        names = next(csv.reader([first], delimiter=delimiter), [])
        if set(REQUIRED) <= {n.strip() for n in names}:
            return [n.strip() for n in names], delimiter
    return [n.strip() for n in next(csv.reader([first]), [])], ","


def _cells(path: Path, width: int, delimiter: str) -> Iterator[Sequence[str | None]]:
    """The data rows as text cells in column order (None for a missing value), streamed."""
    if _is_parquet(path):
        import pyarrow.parquet as pq

        with pq.ParquetFile(path) as table:
            for batch in table.iter_batches(batch_size=CHUNK_ROWS):
                columns = [[_text(v) for v in column.to_pylist()] for column in batch.columns]
                yield from (list(cells) for cells in zip(*columns, strict=True))
        return
    with _opener(path)(path, "rb") as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8-sig", newline=""), delimiter=delimiter)
        if next(reader, None) is None:
            return
        for cells in reader:
            if len(cells) != width:
                if len(cells) > width:
                    raise InvalidEvent(
                        f"{len(cells) - width} more cell(s) than the header has columns",
                        line=reader.line_num - 1,
                        source=str(path),
                    )
                yield [*cells, *([None] * (width - len(cells)))]
            else:
                yield cells


class _Column(NamedTuple):
    """What a config cell is: a config key, a model name, a mapped name, or a problem."""

    kind: str  # "key", "model", "mapped" or "bad"
    config: Cfg | None
    reason: str | None


class ConfigColumn:
    """The config column's cells, read by ``--config-column-format`` and ``--config-map``; in ``auto`` the
    kinds seen are remembered with an example each, so that :meth:`verdict` can refuse a mixed column."""

    def __init__(self, fmt: ConfigColumnFormat, maps: Maps) -> None:
        self.fmt, self.maps = fmt, maps
        self.examples: dict[str, tuple[int, str]] = {}
        self.cell = functools.lru_cache(maxsize=65536)(self._cell)

    def _cell(self, text: str) -> _Column:
        mapped = self.maps.config(text)
        if mapped is not None:
            return _Column("mapped", mapped, None)
        parts = text.split("/")
        if self.fmt == "model" or (self.fmt == "auto" and len(parts) != 4):
            return _Column("model", config_of(IMPORT_CLI, None, text, None), None)
        if len(parts) != 4:
            return _Column(
                "bad", None, f"{text!r} is not a config key cli/route/model/effort (found {len(parts)} part(s))"
            )
        try:
            config = Config.from_key(text)
        except ValueError as exc:
            return _Column("bad", None, str(exc).splitlines()[0])
        return _Column("key", config_of(config.cli, config.route, config.model, config.effort), None)

    def read(self, text: str, row: int) -> Cfg:
        kind, config, reason = self.cell(text)
        if kind == "bad":
            raise Problem("config", reason or "not a config")
        if kind not in self.examples:
            self.examples[kind] = (row, text)
        return config  # type: ignore[return-value]  # set for every kind but "bad"

    def verdict(self, source: str) -> list[str]:
        """The notes of the column, or :class:`InvalidEvent` when ``auto`` met both keys and names."""
        keys, names = self.examples.get("key"), self.examples.get("model")
        if self.fmt == "auto" and keys and names:
            raise InvalidEvent(
                f"the config column mixes config keys (row {keys[0]}: {keys[1]!r}) and other names (row {names[0]}: "
                f"{names[1]!r}); say which it holds with --config-column-format key or model, or map the names "
                "with --config-map FILE",
                field="config",
                source=source,
            )
        if self.fmt == "auto" and names:
            example = config_of(IMPORT_CLI, None, names[1], None).key
            return [
                f"config column read as plain model names (no cell is a 4-part key cli/route/model/effort): "
                f"{names[1]!r} became {example}; give --config-column-format key to refuse such cells, or "
                "--config-map FILE to map them to your config keys"
            ]
        return []


class LongTable:
    """A long table read row by row: typed rows, blank scores and problems (see the module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        config_column_format: ConfigColumnFormat = "auto",
        maps: Maps | None = None,
        score_range: ScoreRange | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise InvalidEvent("no such file", source=str(self.path))
        with reading(self.path):
            self.names, self.delimiter = _header(self.path)
        missing = [c for c in REQUIRED if c not in self.names]
        if missing:
            hint = ""
            if len(self.names) == 1 and any(d in self.names[0] for d in DELIMITERS[1:]):
                hint = f" (the header reads as one column {self.names[0][:60]!r}: is the delimiter one of , ; tab |?)"
            raise InvalidEvent(
                f"missing column(s) {', '.join(missing)}; the long format needs {', '.join(REQUIRED)}{hint}",
                source=str(self.path),
            )
        self.positions = tuple(self.names.index(name) for name in REQUIRED)
        self.extra = [(name, i) for i, name in enumerate(self.names) if name not in (*REQUIRED, *ATTEMPT_COLUMNS)]
        self.attempt_columns = [(name, i) for i, name in enumerate(self.names) if name in ATTEMPT_COLUMNS]
        self.column = ConfigColumn(config_column_format, maps or Maps())
        self.score_range = score_range
        self.clock = clock or Clock()
        self.rows_read = 0
        self.stamp = self._stamp()

    def _stamp(self) -> tuple[int, int]:
        info = self.path.stat()
        return info.st_size, info.st_mtime_ns

    def record(self, cells: Sequence[str | None]) -> dict[str, str | None]:
        return dict(zip(self.names, cells, strict=True))

    def rows(self) -> Iterator[tuple[int, LongRow | None, list[tuple[str, str]], Sequence[str | None]]]:
        """``(row number, row or None for a blank score, problems, cells)`` of every data row."""
        with reading(self.path):
            for number, cells in enumerate(_cells(self.path, len(self.names), self.delimiter), start=1):
                self.rows_read = number
                row, problems = self.check(number, cells)
                yield number, row, problems, cells

    def check(self, number: int, cells: Sequence[str | None]) -> tuple[LongRow | None, list[tuple[str, str]]]:
        """A checked row (None for a blank score) and every problem of it."""
        i_task, i_config, i_score, i_cost, i_region, i_at = self.positions
        score_text = (cells[i_score] or "").strip()
        if not score_text or score_text.lower() == "nan":
            return None, []
        problems: list[tuple[str, str]] = []
        task = (cells[i_task] or "").strip()
        if not task:
            problems.append(("task_id", "must not be blank"))
        config_text = (cells[i_config] or "").strip()
        config = None
        if not config_text:
            problems.append(("config", "must not be blank"))
        else:
            try:
                config = self.column.read(config_text, number)
            except Problem as exc:
                problems.append((exc.field, exc.reason))
        score = _score(score_text, self.score_range, problems)
        cost = _cost((cells[i_cost] or "").strip(), problems)
        at_text = (cells[i_at] or "").strip()
        at = None
        if not at_text:
            problems.append(("at", "must not be blank"))
        else:
            try:
                at = self.clock.check(rfc3339(at_text), "at")
            except Problem as exc:
                problems.append((exc.field, exc.reason))
            except ValueError as exc:
                problems.append(("at", str(exc)))
        if problems:
            return None, problems
        labels = {name: value for name, i in self.extra if (value := cells[i]) not in (None, "")} if self.extra else {}
        region = (cells[i_region] or "").strip() or "general"
        attempt = {n: v.strip() for n, i in self.attempt_columns if (v := cells[i]) and v.strip()} or None
        return LongRow(number, task, config, score, cost, region, at, labels, attempt), []  # type: ignore[arg-type]

    def finish(self) -> list[str]:
        """After the last row: the column's notes; :class:`InvalidEvent` when the file changed meanwhile or the
        config column is mixed."""
        if self._stamp() != self.stamp:
            raise InvalidEvent(
                "the file changed while it was imported (nothing was appended): import it again",
                source=str(self.path),
            )
        notes = self.column.verdict(str(self.path))
        if self.delimiter != ",":
            notes.append(f"the table is separated by {self.delimiter!r} (read from its header)")
        return notes


def _score(text: str, scale: ScoreRange | None, problems: list[tuple[str, str]]) -> float:
    try:
        value = float(text)
    except ValueError:
        problems.append(("score", f"{text!r} is not a number"))
        return 0.0
    if not math.isfinite(value):
        problems.append(("score", f"{text!r} is not a finite number"))
        return 0.0
    if scale is not None:
        unit = scale.unit(value)
        if unit is None:
            problems.append(("score", f"{value:g} is outside --score-range {scale.low:g}:{scale.high:g}"))
            return 0.0
        return unit
    if not 0.0 <= value <= 1.0:
        problems.append(("score", f"{value:g} is not in [0, 1] (give the scale with --score-range LO:HI)"))
    return value


def _cost(text: str, problems: list[tuple[str, str]]) -> float | None:
    if not text or text.lower() == "nan":
        return None
    try:
        value = float(text)
    except ValueError:
        problems.append(("cost_usd", f"{text!r} is not a number"))
        return None
    if not math.isfinite(value):
        problems.append(("cost_usd", f"{text!r} is not a finite number"))
    elif value < 0:
        problems.append(("cost_usd", f"{value:g} is not >= 0"))
    elif value > MAX_COST_USD:
        problems.append(("cost_usd", f"{value:g} is over the bound of {MAX_COST_USD:g} USD for one attempt"))
    return value


def read_long_table(
    path: str | Path,
    *,
    config_column_format: ConfigColumnFormat = "auto",
    maps: Maps | None = None,
    score_range: ScoreRange | None = None,
    skip_bad: bool = False,
    chunk_rows: int = CHUNK_ROWS,
) -> Iterator[list[LongRow]]:
    """The checked rows of a long table in chunks of ``chunk_rows`` (blank scores left out), streamed.

    Without ``skip_bad`` a bad row raises :class:`InvalidBatch` naming the first 100 (each with all its
    problems) once the table is read; with it, bad rows are left out. A mixed config column (``auto``) raises
    :class:`InvalidEvent` at the end too: consume the whole iterator before acting on its rows.
    """
    table = LongTable(path, config_column_format=config_column_format, maps=maps, score_range=score_range)
    named: list[InvalidEvent] = []
    bad = 0
    chunk: list[LongRow] = []
    for number, row, problems, _ in table.rows():
        if problems:
            bad += 1
            if len(named) < 100:
                reason = "; ".join([problems[0][1], *(f"{f}: {r}" for f, r in problems[1:])])
                named.append(InvalidEvent(reason, field=problems[0][0], line=number, source=f"{path} row"))
            continue
        if row is not None:
            chunk.append(row)
            if len(chunk) >= chunk_rows:
                yield chunk
                chunk = []
    if chunk:
        yield chunk
    table.finish()
    if named and not skip_bad:
        raise InvalidBatch(named, total=bad)


class LongSource:
    """A long table as an import source (pipeline/streams/imports/run.py, Source)."""

    format = "long"
    prefix = "imp"
    rater_kind = "gate"

    def __init__(self, path: Path, options: ImportOptions, clock: Clock) -> None:
        self.table = LongTable(
            path,
            config_column_format=options.config_column_format,
            maps=options.maps,
            score_range=options.score_range,
            clock=clock,
        )
        self.name = self.table.path.name
        self.where = f"{path} row"
        kind = options.rater_kind or self.rater_kind
        self.rater = {"kind": kind, "name": options.rater_name or self.table.path.name.split(".")[0]}
        self.rater_json = canonical(self.rater)
        self.thread = options.thread
        self.size = max(self.table.path.stat().st_size, 1)
        self.rows_by_table: dict[str, int] = {}
        self.earliest: dict[str, str] = {}

    def progress(self) -> float:
        return min(self.table.rows_read * 60 / self.size, 1.0)  # about 60 bytes a row: a hint, not a count

    def finish(self) -> list[str]:
        self.rows_by_table = {self.table.path.name: self.table.rows_read}
        return self.table.finish()

    def units(self) -> Iterator[Unit | Prepared]:
        """The table in chunks of the run's size, each checked and rendered in bulk (:class:`_Fast`)."""
        from .run import CHUNK_ROWS as chunk_rows

        fast = _Fast(self)
        block: list[Sequence[str | None]] = []
        start = 1
        with reading(self.table.path):
            table = self.table
            for cells in _cells(table.path, len(table.names), table.delimiter):
                block.append(cells)
                if len(block) == chunk_rows:
                    yield fast.chunk(start, block)
                    start += len(block)
                    table.rows_read = start - 1
                    block = []
            table.rows_read = start - 1 + len(block)
            if block:
                yield fast.chunk(start, block)

    def render_opened(self, record: Opened) -> Rendered:
        """A task's ``task.opened`` with the id every earlier import gave it (the digest of its canonical JSON),
        written from templates like the row's events."""
        at, task, region = _quoted(record.at), _quoted(record.task), _quoted(record.region)
        labels = "" if not record.labels else f'"labels":{canonical(record.labels)},'
        thread = "" if record.thread is None else f',"thread":{_quoted(record.thread)}'
        digest = digest24(f'[{{"at":{at},{labels}"region":{region},"task":{task}{thread},"type":"task.opened"}}]')
        body = {"task": record.task, "region": record.region}
        if record.labels:
            body["labels"] = record.labels  # type: ignore[assignment]
        if record.thread is not None:
            body["thread"] = record.thread
        line = to_json({"id": f"imp-{digest}", "type": "task.opened", "at": record.at, "v": 1, **body}) + b"\n"
        return Rendered("task.opened", f"imp-{digest}", line)


class _Fast:
    """A chunk of a long table checked and rendered at once (:meth:`chunk`). Each distinct cell text is parsed once
    (scores, costs, times, configs, tasks repeat), so a row costs its hashes and its lines. A row whose cells are
    not all plainly valid goes to :meth:`LongTable.check`, the reference, which names its problems (or reads a
    blank score): this lane only ever accepts what the reference accepts (tested row by row)."""

    LIMIT = 65_536  # distinct texts remembered per cache (then it starts again: memory stays bounded)

    def __init__(self, source: LongSource) -> None:
        self.source, self.table = source, source.table
        self.scores: dict[str | None, Any] = {}
        self.costs: dict[str | None, Any] = {}
        self.times: dict[str | None, Any] = {}
        self.configs: dict[str | None, Any] = {}
        self.tasks: dict[str | None, Any] = {}
        self.rater = source.rater
        self.rater_json, self.rater_line = source.rater_json, to_json(source.rater).decode()
        self.rater_hash = _hash(source.rater["name"])

    # Per distinct text: the parsed value, or _SLOW (the reference decides).
    def _score(self, text: str | None) -> Any:
        cleaned = (text or "").strip()
        if not cleaned or cleaned.lower() == "nan":
            return _BLANK
        problems: list[tuple[str, str]] = []
        value = _score(cleaned, self.table.score_range, problems)
        return _SLOW if problems else (value, float.__repr__(value), to_json(value).decode())

    def _cost(self, text: str | None) -> Any:
        try:
            value = float(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            cleaned = (text or "").strip()
            return (None, "null", "null") if not cleaned or cleaned.lower() == "nan" else _SLOW
        if not 0.0 <= value <= MAX_COST_USD:  # NaN, infinities, negatives, too large: the reference decides
            return (None, "null", "null") if math.isnan(value) and (text or "").strip().lower() == "nan" else _SLOW
        return value, float.__repr__(value), to_json(value).decode()

    def _time(self, text: str | None) -> Any:
        cleaned = (text or "").strip()
        try:
            at = self.table.clock.check(rfc3339(cleaned), "at") if cleaned else None
        except ValueError:
            return _SLOW
        return _SLOW if at is None else _part(at)

    def _config(self, text: str | None, number: int) -> Any:
        cleaned = (text or "").strip()
        try:
            return self.table.column.read(cleaned, number) if cleaned else _SLOW
        except Problem:
            return _SLOW

    def _task(self, text: str | None) -> Any:
        cleaned = (text or "").strip()
        return _part(cleaned) if cleaned else _SLOW

    @staticmethod
    def _remember(cache: dict[str | None, Any], text: str | None, value: Any) -> Any:
        if len(cache) >= _Fast.LIMIT:
            cache.clear()
        cache[text] = value
        return value

    def chunk(self, start: int, block: list[Sequence[str | None]]) -> Prepared:
        table, source, remember = self.table, self.source, self._remember
        i_task, i_config, i_score, i_cost, i_region, i_at = table.positions
        scores, costs, times, configs, tasks = self.scores, self.costs, self.times, self.configs, self.tasks
        earliest, thread = source.earliest, source.thread
        items: list[tuple[Any, ...]] = []
        opened: list[tuple[int, Opened]] = []
        bad: list[Unit] = []
        blank = unknown = 0
        for number, cells in enumerate(block, start=start):
            text = cells[i_score]
            score = scores.get(text) or remember(scores, text, self._score(text))
            if score is _BLANK:
                blank += 1
                continue
            text = cells[i_cost]
            cost = costs.get(text) or remember(costs, text, self._cost(text))
            text = cells[i_at]
            at = times.get(text) or remember(times, text, self._time(text))
            text = cells[i_config]
            config = configs.get(text) or remember(configs, text, self._config(text, number))
            text = cells[i_task]
            task = tasks.get(text) or remember(tasks, text, self._task(text))
            attempt = table.attempt_columns and any((cells[i] or "").strip() for _, i in table.attempt_columns)
            if attempt or score is _SLOW or cost is _SLOW or at is _SLOW or config is _SLOW or task is _SLOW:
                row, problems = table.check(number, cells)
                if problems:
                    bad.append(Unit(number, [], problems, [], functools.partial(table.record, cells)))
                    continue
                assert row is not None  # a blank score was read above
                if row.attempt:  # an attempt column: the row's own path (rare: such tables are small)
                    self._candidate(row, cells, items, opened)
                    items += [
                        (_STREAM[e.type], e.line, e.id, e.key, 0, KINDS[e.type])
                        for e in _row_events(row, self.rater, self.rater_json)
                    ]
                    unknown += row.cost_usd is None
                    continue
                score, cost = self._score(cells[i_score]), self._cost(cells[i_cost])
                at, config, task = _part(row.at), row.config, _part(row.task)
            best = earliest.get(task[0])
            if best is None or at[0] < best:  # only a row earlier than every one before can open its task
                earliest[task[0]] = at[0]
                labels = {n: v for n, i in table.extra if (v := cells[i]) not in (None, "")} if table.extra else None
                region = (cells[i_region] or "").strip() or "general"
                opened.append((len(items), Opened(task[0], task[0], region, at[0], labels or None, thread)))
            if cost[0] is None:
                unknown += 1
            self._render(items, task, config, score, cost, at)
        rows = len(block)
        imported = rows - blank - len(bad)
        costs_from = {"unknown": unknown, "source": imported - unknown}
        return Prepared(rows, imported, items, opened, bad, {"blank score": blank} if blank else {},
                        {k: v for k, v in costs_from.items() if v})  # fmt: skip

    def _candidate(self, row: LongRow, cells: Sequence[str | None], items: list[Any], opened: list[Any]) -> None:
        """The row's task opening, when it is the earliest row of its task so far."""
        best = self.source.earliest.get(row.task)
        if best is None or row.at < best:
            self.source.earliest[row.task] = row.at
            opened.append(
                (len(items), Opened(row.task, row.task, row.region, row.at, row.labels or None, self.source.thread))
            )

    def _render(self, items: list[tuple[Any, ...]], task: Any, config: Cfg, score: Any, cost: Any, at: Any) -> None:
        """The row's ``task.attempted`` and ``task.rated``, with the ids every earlier import gave them: the digest
        of each event's canonical JSON. Both the hashed JSON and the lines are written here from templates; the
        tests check them against the generic digest and against ``to_json`` of the events (the bytes every
        earlier import wrote)."""
        status = "success" if score[0] >= 0.5 else "failure"
        at_q, task_q = at[1], task[1]
        attempted = sha256(
            f'[{{"at":{at_q},"config":{config.canonical},"cost_usd":{cost[1]},"status":"{status}","task":{task_q},'
            '"type":"task.attempted"}]'.encode("utf-8", "surrogatepass")
        ).hexdigest()[:24]  # mapping.digest24, inlined
        rated = sha256(
            f'[{{"at":{at_q},"config":{config.canonical},"rater":{self.rater_json},"score":{score[1]},'
            f'"task":{task_q},"type":"task.rated"}}]'.encode("utf-8", "surrogatepass")
        ).hexdigest()[:24]
        key = _identity(task[2], _hash(config.key), self.rater_hash, at[2])
        head = f'","at":{at_q},"v":1,"task":{task_q},"config":{config.line},'
        attempt = f'{{"id":"imp-{attempted}","type":"task.attempted{head}"status":"{status}","cost_usd":{cost[2]}}}\n'
        rating = f'{{"id":"imp-{rated}","type":"task.rated{head}"rater":{self.rater_line},"score":{score[2]}}}\n'
        items.append(("tasks", attempt.encode("utf-8", "surrogatepass"), f"imp-{attempted}", key, 0, _ATTEMPTED))
        items.append(("ratings", rating.encode("utf-8", "surrogatepass"), f"imp-{rated}", key, 0, _RATED))


_SLOW, _BLANK = object(), object()
_STREAM = {"task.attempted": "tasks", "task.rated": "ratings"}
_MASK = (1 << 64) - 1


@functools.lru_cache(maxsize=65536)
def _hash(text: str) -> int:
    """A 64-bit hash of a text (blake2b): a part of a row's identity."""
    return int.from_bytes(blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def _part(text: str) -> tuple[str, str, int]:
    """A text of a row's identity (a task, a time): itself, as JSON, and its hash."""
    return text, _quoted(text), _hash(text)


def _identity(task: int, config: int, rater: int, at: int) -> int:
    """A long-table row's identity for the ledger (its task, config, rater and time), from the parts' hashes: each
    multiplied by its own odd constant and folded, modulo 2**64 (the parts are hashed once per distinct text)."""
    return (
        task * 0x9E3779B97F4A7C15 ^ config * 0xC2B2AE3D27D4EB4F ^ rater * 0x165667B19E3779F9 ^ at * 0xD6E8FEB86659FD93
    ) & _MASK


_ATTEMPTED, _RATED = KINDS["task.attempted"], KINDS["task.rated"]


def _row_events(row: LongRow, rater: dict[str, str], rater_json: str) -> list[Any]:
    """The events of one checked row, as the bulk lane renders them (for callers with one row at a time); a row
    with attempt columns (:data:`ATTEMPT_COLUMNS`) has them in its attempt and its attempt's id."""
    fake = _Fast.__new__(_Fast)
    fake.rater, fake.rater_json, fake.rater_line = rater, rater_json, to_json(rater).decode()
    fake.rater_hash = _hash(rater["name"])
    fake.table = None  # type: ignore[assignment]
    items: list[tuple[Any, ...]] = []
    cost = (
        (None, "null", "null")
        if row.cost_usd is None
        else (row.cost_usd, float.__repr__(row.cost_usd), to_json(row.cost_usd).decode())
    )
    score = (row.score, float.__repr__(row.score), to_json(row.score).decode())
    fake._render(items, _part(row.task), row.config, score, cost, _part(row.at))
    cost_from = "unknown" if row.cost_usd is None else "source"
    attempt = Line("task.attempted", items[0][2], items[0][1], items[0][3], cost_from)
    if row.attempt:
        status = "success" if row.score >= 0.5 else "failure"
        body = {"task": row.task, "config": row.config.obj, "status": status, "cost_usd": row.cost_usd}
        digest = digest24(canonical([{**body, "at": row.at, "type": "task.attempted", **row.attempt}]))
        line = to_json({"id": f"imp-{digest}", "type": "task.attempted", "at": row.at, "v": 1, **body, **row.attempt})
        attempt = attempt._replace(id=f"imp-{digest}", line=line + b"\n")
    return [attempt, Line("task.rated", items[1][2], items[1][1], items[1][3])]
