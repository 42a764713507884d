"""The long-table reader (docs/design.md, Imports, Long tables): one row per (task, config) result, ``task_id,
config, score, cost_usd, region, at``; any other column becomes a task label. :func:`read_long_table` (a path and
options in, typed rows in chunks out) is the reader for every command that reads long tables; :class:`LongTable`
checks one row (the reference every faster lane agrees with).

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
"""

from __future__ import annotations

import contextlib
import csv
import functools
import gzip
import io
import math
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from ...errors import InvalidBatch, InvalidEvent
from ...utc import format_timestamp
from ..events import MAX_COST_USD, Config
from .mapping import Cfg, config_of
from .options import ConfigColumnFormat, Maps, ScoreRange
from .values import Clock, Problem, rfc3339

REQUIRED = ("task_id", "config", "score", "cost_usd", "region", "at")
#: Optional columns that describe the row's attempt, not its task: each becomes a field of its task.attempted (and
#: enters its id; a row without one keeps the id it always had). Terminal-Bench's ``failure_mode`` (agent_timeout...).
ATTEMPT_COLUMNS = ("failure_mode",)
IMPORT_CLI = "import"
CHUNK_ROWS = 10_000  # rows per chunk read (and per Parquet batch)
DELIMITERS = (",", ";", "\t", "|")


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


def read_cells(path: Path, width: int, delimiter: str) -> Iterator[Sequence[str | None]]:
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
            for number, cells in enumerate(read_cells(self.path, len(self.names), self.delimiter), start=1):
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
        score = score_cell(score_text, self.score_range, problems)
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


def score_cell(text: str, scale: ScoreRange | None, problems: list[tuple[str, str]]) -> float:
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
