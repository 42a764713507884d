"""Long tables as an import source (``--format long``; the reader and its rules: :mod:`.longtable`).

ids are the digests of the row's events (the ids every earlier import gave); a row is identified, for updates, by
its task, config, rater and time. A chunk is checked and rendered in bulk (:class:`_Fast`), a row it does not
plainly accept by the reference (:meth:`.LongTable.check`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator, Sequence
from hashlib import blake2b, sha256
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from ...utc import is_plain_time
from ..events import MAX_COST_USD
from .ledger import KINDS
from .longtable import LongRow, LongTable, read_cells, reading, score_cell
from .mapping import Cfg, Line, Opened, Prepared, Rendered, Unit, canonical, digest24
from .options import ImportOptions
from .values import Clock, Problem, rfc3339

#: A string as the canonical JSON writes it (json's own C encoder, as ``ensure_ascii=False`` uses it).
_quoted = json.encoder.encode_basestring


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
            for cells in read_cells(table.path, len(table.names), table.delimiter):
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
    def score_cell(self, text: str | None) -> Any:
        cleaned = (text or "").strip()
        if not cleaned or cleaned.lower() == "nan":
            return _BLANK
        problems: list[tuple[str, str]] = []
        value = score_cell(cleaned, self.table.score_range, problems)
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
        try:  # the commonest times need no normalising (is_plain_time), the others the events' rule
            at = (
                self.table.clock.check(cleaned if is_plain_time(cleaned) else rfc3339(cleaned), "at")
                if cleaned
                else None
            )
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
            score = scores.get(text) or remember(scores, text, self.score_cell(text))
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
                score, cost = self.score_cell(cells[i_score]), self._cost(cells[i_cost])
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
    with attempt columns (:data:`.longtable.ATTEMPT_COLUMNS`) has them in its attempt and its attempt's id."""
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
