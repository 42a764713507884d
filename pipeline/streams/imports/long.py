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
from hashlib import sha256
from itertools import islice, repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from pydantic_core import to_json

from ...utc import PLAIN_TIME
from ..events import MAX_COST_USD
from .block import Block, pick
from .ledger import KINDS, key64, keys64
from .longtable import LongRow, LongTable, read_cells, reading, score_cell
from .mapping import Line, Opened, Prepared, Unit, canonical, digest24
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
        start = 1
        with reading(self.table.path):
            table = self.table
            rows = read_cells(table.path, len(table.names), table.delimiter)
            while block := list(islice(rows, chunk_rows)):
                table.rows_read = start - 1 + len(block)
                yield fast.chunk(start, block)
                start += len(block)

    def render_openings(self, records: list[Opened]) -> Block:
        """Tasks' ``task.opened`` with the ids every earlier import gave them (the digest of each one's canonical
        JSON), written from templates like the rows' events, joined by Arrow."""
        import pyarrow as pa

        labels = {}  # the labels' JSON (canonical, and as lines write it), per distinct labels
        for record in records:
            key = tuple(record.labels.items()) if record.labels else ()
            if key not in labels:
                labels[key] = (
                    (f'"labels":{canonical(record.labels)},', f',"labels":{to_json(record.labels).decode()}')
                    if record.labels
                    else ("", "")
                )
        chosen = [labels[tuple(r.labels.items()) if r.labels else ()] for r in records]
        at, task, region = (
            pa.array([f(r) for r in records], pa.string())
            for f in (lambda r: r.at, lambda r: _quoted(r.task), lambda r: _quoted(r.region))
        )
        canonical_labels, line_labels = (pa.array([c[i] for c in chosen], pa.string()) for i in (0, 1))
        thread = "" if self.thread is None else f',"thread":{_quoted(self.thread)}'
        ids = _ids('[{"at":"', at, '",', canonical_labels, '"region":', region, ',"task":', task, thread,
                   ',"type":"task.opened"}]')  # fmt: skip
        lines = _joined('{"id":"', pa.array(ids, pa.string()), '","type":"task.opened","at":"', at, '","v":1,"task":',
                        task, ',"region":', region, line_labels, thread, "}\n")  # fmt: skip
        keys = _hashes(pa.array([r.key for r in records], pa.string()))
        return Block(lines, ids, keys, np.zeros(len(records), np.uint64), np.full(len(records), KINDS["task.opened"]))


class _Cells(NamedTuple):
    """A column of a chunk: the parsed value of each distinct text (then of each row the reference read), and per
    row the index of its value."""

    values: list[Any]
    codes: Any  # numpy integers, one per row


class _Fast:
    """A chunk of a long table checked and rendered at once (:meth:`chunk`), column by column: each distinct cell
    text is parsed once (scores, costs, configs, tasks repeat; the commonest times are checked by one pattern over
    the column), and the rows' ids, lines and ledger keys are written by Arrow and numpy over the chunk
    (:func:`_render`), so a row costs little more than its two SHA-256 digests. A row whose cells are not all
    plainly valid goes to :meth:`LongTable.check`, the reference, which names its problems (or reads a blank
    score): this lane only ever accepts what the reference accepts (tested row by row)."""

    LIMIT = 65_536  # distinct texts remembered per cache (then it starts again: memory stays bounded)

    def __init__(self, source: LongSource) -> None:
        self.source, self.table = source, source.table
        self.scores: dict[str | None, Any] = {}
        self.costs: dict[str | None, Any] = {}
        self.configs: dict[str | None, Any] = {}
        self.tasks: dict[str | None, Any] = {}
        self.rater = _Rater.of(source.rater)

    # Per distinct text: the parsed value, or _SLOW (the reference decides).
    def score_cell(self, text: str | None) -> Any:
        cleaned = (text or "").strip()
        if not cleaned or cleaned.lower() == "nan":
            return _BLANK
        problems: list[tuple[str, str]] = []
        value = score_cell(cleaned, self.table.score_range, problems)
        return _SLOW if problems else _score(value)

    def _cost(self, text: str | None) -> Any:
        try:
            value = float(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            cleaned = (text or "").strip()
            return _NO_COST if not cleaned or cleaned.lower() == "nan" else _SLOW
        if not 0.0 <= value <= MAX_COST_USD:  # NaN, infinities, negatives, too large: the reference decides
            return _NO_COST if math.isnan(value) and (text or "").strip().lower() == "nan" else _SLOW
        return _cost_of(value)

    def _time(self, text: str | None) -> Any:
        cleaned = (text or "").strip()
        try:  # the events' rule (the commonest times are checked over the whole column: :meth:`_times`)
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

    def _cells(self, column: Any, cache: dict[str | None, Any], parse: Any) -> _Cells:
        """The column's values, each distinct text parsed once (and remembered)."""
        encoded = column.dictionary_encode(null_encoding="encode")
        texts = encoded.dictionary.to_pylist()
        if len(cache) + len(texts) > self.LIMIT:
            cache.clear()
        values = []
        for text in texts:
            value = cache.get(text)
            if value is None:
                value = cache[text] = parse(text)
            values.append(value)
        return _Cells(values, encoded.indices.to_numpy().astype(np.int64))

    def _times(self, column: Any) -> _Cells:
        """The time column: times in the commonest form (:data:`~pipeline.utc.PLAIN_TIME`, no later than the latest
        time an event may carry) checked by one pattern over the distinct texts, the others one by one."""
        import pyarrow.compute as pc

        encoded = column.dictionary_encode(null_encoding="encode")
        texts = encoded.dictionary
        plain = pc.and_(
            pc.match_substring_regex(texts, pattern=f"^{PLAIN_TIME}$"), pc.invert(pc.starts_with(texts, "0000"))
        )
        latest = self.table.clock.latest
        if latest is not None:  # future_reason: compared to the second, as text
            plain = pc.and_(plain, pc.less_equal(pc.utf8_slice_codeunits(texts, 0, 19), latest[:19]))
        values: list[Any] = list(zip(texts.to_pylist(), repeat(""), _hashes(texts).tolist()))
        for i in np.flatnonzero(~plain.fill_null(False).to_numpy(zero_copy_only=False)).tolist():
            values[i] = self._time(values[i][0])
        return _Cells(values, encoded.indices.to_numpy().astype(np.int64))

    def _configs(self, column: Any, live: Any, start: int) -> _Cells:
        """As :meth:`_cells`, each new text read at its first row with a score (the config column remembers a row
        of each kind of cell, for its verdict on a mixed column; rows with a blank score are never read)."""
        encoded = column.dictionary_encode(null_encoding="encode")
        texts, codes = encoded.dictionary.to_pylist(), encoded.indices.to_numpy().astype(np.int64)
        used, first = np.unique(codes[live], return_index=True)
        cache = self.configs
        if len(cache) + len(texts) > self.LIMIT:
            cache.clear()
        values: list[Any] = [_SLOW] * len(texts)
        for i in np.argsort(first, kind="stable"):  # in the order of their first rows
            text = texts[used[i]]
            value = cache.get(text)
            if value is None:
                value = cache[text] = self._config(text, start + int(live[first[i]]))
            values[used[i]] = value
        return _Cells(values, codes)

    def chunk(self, start: int, block: list[Sequence[str | None]]) -> Prepared:
        import pyarrow as pa

        table = self.table
        i_task, i_config, i_score, i_cost, _, i_at = table.positions

        def column(i: int) -> Any:
            return pa.array(list(map(itemgetter(i), block)), pa.string())

        score = self._cells(column(i_score), self.scores, self.score_cell)
        blank = _marked(score, _BLANK, _FILLERS[0])
        live = np.flatnonzero(~blank)
        parts = [
            score,
            self._cells(column(i_cost), self.costs, self._cost),
            self._times(column(i_at)),
            self._configs(column(i_config), live, start),
            self._cells(column(i_task), self.tasks, self._task),
        ]
        slow = self._attempts(block)
        for part, filler in zip(parts, _FILLERS, strict=True):
            slow |= _marked(part, _SLOW, filler)
        good = ~blank
        bad: list[Unit] = []
        attempts: list[tuple[int, LongRow]] = []  # rows with attempt columns
        for r in np.flatnonzero(slow & good).tolist():  # the reference: bad rows named, good ones read from their row
            row, problems = table.check(start + r, block[r])
            if problems:
                bad.append(Unit(start + r, [], problems, [], functools.partial(table.record, block[r])))
                good[r] = False
                continue
            assert row is not None  # a blank score was read above
            if row.attempt:
                attempts.append((r, row))
            for part, value in zip(parts, _row_parts(row), strict=True):
                part.codes[r] = len(part.values)
                part.values.append(value)
        rows = np.flatnonzero(good)
        items = _render(self.rater, [part.values for part in parts], [part.codes[rows] for part in parts])
        position = {r: k for k, r in enumerate(rows.tolist())} if attempts else {}
        for r, row in attempts:  # their attempt: the row's own line and id (rare: such tables are small)
            items.lines[2 * position[r]], items.ids[2 * position[r]] = _attempted(row)
        tasks, times = (pick(parts[i].values, parts[i].codes[rows]) for i in (4, 2))
        opened = self._openings(block, rows.tolist(), tasks, times)
        unknown = int(np.count_nonzero(np.array([v[0] is None for v in parts[1].values], bool)[parts[1].codes[rows]]))
        imported = len(rows)
        costs_from = {"unknown": unknown, "source": imported - unknown}
        skipped = {"blank score": len(block) - len(live)} if len(live) < len(block) else {}
        return Prepared(len(block), imported, items, opened, bad, skipped,
                        {k: v for k, v in costs_from.items() if v})  # fmt: skip

    def _attempts(self, block: list[Sequence[str | None]]) -> Any:
        """Per row: whether it has a value in an attempt column (such rows take the reference's way)."""
        out = np.zeros(len(block), dtype=bool)
        for _, i in self.table.attempt_columns:
            out |= np.array([bool((cells[i] or "").strip()) for cells in block])
        return out

    def _openings(
        self, block: list[Sequence[str | None]], rows: list[int], tasks: list[Any], times: list[Any]
    ) -> list[tuple[int, Opened]]:
        """Each row earlier than every row of its task before it: a candidate to open its task, at the position of
        its events (``rows``: the good rows' positions in ``block``)."""
        table, earliest, thread = self.table, self.source.earliest, self.source.thread
        i_region = table.positions[4]
        opened = []
        for k, (row, task, at) in enumerate(zip(rows, tasks, times, strict=True)):
            best = earliest.get(task[0])
            if best is None or at[0] < best:  # only a row earlier than every one before can open its task
                earliest[task[0]] = at[0]
                cells = block[row]
                labels = {n: v for n, i in table.extra if (v := cells[i]) not in (None, "")} if table.extra else None
                region = (cells[i_region] or "").strip() or "general"
                opened.append((2 * k, Opened(task[0], task[0], region, at[0], labels or None, thread)))
        return opened


class _Rater(NamedTuple):
    """The rater of a table's ratings: its canonical JSON (hashed), its JSON as lines write it, its name's hash."""

    canonical: str
    line: str
    hash: int

    @classmethod
    def of(cls, rater: dict[str, str]) -> _Rater:
        return cls(canonical(rater), to_json(rater).decode(), key64(rater["name"]))


def _score(value: float) -> tuple[float, str, str]:
    """A score: its value, its text in the hashed JSON (``repr``) and in the line (``to_json``)."""
    return value, repr(value), to_json(value).decode()


def _cost_of(value: float | None) -> tuple[float | None, str, str]:
    return _NO_COST if value is None else (value, repr(value), to_json(value).decode())


def _row_parts(row: LongRow) -> tuple[Any, ...]:
    """A checked row as the parts :func:`_render` takes: score, cost, time, config, task."""
    return _score(row.score), _cost_of(row.cost_usd), _part(row.at), row.config, _part(row.task)


def _render(rater: _Rater, values: list[list[Any]], codes: list[Any]) -> Block:
    """The rows' ``task.attempted`` and ``task.rated`` (in turn), with the ids every earlier import gave them: the
    digest of each event's canonical JSON. ``values``: per part (score, cost, time, config, task) its distinct
    values; ``codes``: per part, each row's value. Both the hashed JSON and the lines are written here from
    templates, joined by Arrow over the rows (a normalised time needs no escaping in JSON); the tests check them
    against the generic digest and against ``to_json`` of the events (the bytes every earlier import wrote). Ledger
    keys: the row's identity (:func:`_identity`)."""
    import pyarrow as pa

    def field(part: int, i: int) -> Any:  # one field of a part's values, per row
        return pa.array(list(map(itemgetter(i), values[part])), pa.string()).take(codes[part])

    score_text, score_json, cost_text, cost_json = field(0, 1), field(0, 2), field(1, 1), field(1, 2)
    at, config_canonical, config_line, task = field(2, 0), field(3, 3), field(3, 2), field(4, 1)
    status = pa.array([("failure", "success")[v[0] >= 0.5] for v in values[0]]).take(codes[0])

    attempted = _ids('[{"at":"', at, '","config":', config_canonical, ',"cost_usd":', cost_text, ',"status":"',
                     status, '","task":', task, ',"type":"task.attempted"}]')  # fmt: skip
    rated = _ids('[{"at":"', at, '","config":', config_canonical, ',"rater":', rater.canonical, ',"score":',
                 score_text, ',"task":', task, ',"type":"task.rated"}]')  # fmt: skip
    n = len(attempted)
    both: list[Any] = [None] * (2 * n)
    both[0::2], both[1::2] = attempted, rated
    lines: list[Any] = [None] * (2 * n)
    lines[0::2] = _joined('{"id":"', pa.array(attempted, pa.string()), '","type":"task.attempted","at":"', at,
                          '","v":1,"task":', task, ',"config":', config_line, ',"status":"', status, '","cost_usd":',
                          cost_json, "}\n")  # fmt: skip
    lines[1::2] = _joined('{"id":"', pa.array(rated, pa.string()), '","type":"task.rated","at":"', at,
                          '","v":1,"task":', task, ',"config":', config_line, ',"rater":', rater.line, ',"score":',
                          score_json, "}\n")  # fmt: skip

    def hashes(part: int) -> Any:
        return np.fromiter(map(itemgetter(2), values[part]), np.uint64, len(values[part]))[codes[part]]

    configs = np.array([key64(config[0]) for config in values[3]], dtype=np.uint64)[codes[3]]
    keys = _identity(hashes(4), configs, rater.hash, hashes(2))
    return Block(lines, both, np.repeat(keys, 2), np.zeros(2 * n, np.uint64), np.tile(_KINDS, n))


def _joined(*pieces: Any) -> list[bytes]:
    """Per row, the UTF-8 bytes of its pieces (Arrow string arrays, or texts the same for every row) joined."""
    import pyarrow as pa
    import pyarrow.compute as pc

    joined = pc.binary_join_element_wise(*(pa.scalar(p) if isinstance(p, str) else p for p in pieces), "")
    return joined.cast(pa.binary()).to_pylist()


def _ids(*pieces: Any) -> list[str]:
    """Per row, ``imp-<mapping.digest24>`` of its pieces joined (:func:`_joined`)."""
    return ["imp-" + sha256(text).hexdigest()[:24] for text in _joined(*pieces)]


_SLOW, _BLANK = object(), object()
#: What stands for _SLOW and _BLANK among the values of each part (score, cost, time, config, task) once their rows
#: are marked (no good row refers to it): a value of the part's shape.
_FILLERS = ((0.0, "", ""), (None, "", ""), ("", "", 0), ("", None, "", ""), ("", "", 0))


def _marked(cells: _Cells, sentinel: object, filler: tuple[Any, ...]) -> Any:
    """Per row: whether its value is ``sentinel``; such values are replaced by ``filler`` (for :func:`_render`)."""
    found = [i for i, value in enumerate(cells.values) if value is sentinel]
    for i in found:
        cells.values[i] = filler
    return np.isin(cells.codes, found)


_NO_COST = (None, "null", "null")  # a blank cost: unknown
_MASK = (1 << 64) - 1


def _hashes(texts: Any) -> Any:
    """:func:`~.ledger.key64` of each text of an Arrow string array (a uint64 array), in bulk."""
    import pyarrow as pa

    return keys64(texts.fill_null("").cast(pa.binary()).to_pylist())


def _part(text: str) -> tuple[str, str, int]:
    """A text of a row's identity (a task, a time): itself, as JSON, and its hash."""
    return text, _quoted(text), key64(text)


def _identity(task: Any, config: Any, rater: int, at: Any) -> Any:
    """Long-table rows' identities for the ledger (task, config, rater and time), from the parts' hashes (uint64
    arrays): each multiplied by its own odd constant and folded, modulo 2**64 (the parts are hashed once per
    distinct text)."""
    return (
        task * np.uint64(0x9E3779B97F4A7C15)
        ^ config * np.uint64(0xC2B2AE3D27D4EB4F)
        ^ np.uint64(rater * 0x165667B19E3779F9 & _MASK)
        ^ at * np.uint64(0xD6E8FEB86659FD93)
    )


_KINDS = (KINDS["task.attempted"], KINDS["task.rated"])


def _attempted(row: LongRow) -> tuple[bytes, str]:
    """The line and id of the ``task.attempted`` of a row with attempt columns (they enter its id)."""
    status = "success" if row.score >= 0.5 else "failure"
    body = {"task": row.task, "config": row.config.obj, "status": status, "cost_usd": row.cost_usd}
    digest = digest24(canonical([{**body, "at": row.at, "type": "task.attempted", **(row.attempt or {})}]))
    line = to_json(
        {"id": f"imp-{digest}", "type": "task.attempted", "at": row.at, "v": 1, **body, **(row.attempt or {})}
    )
    return line + b"\n", f"imp-{digest}"


def _row_events(row: LongRow, rater: dict[str, str], rater_json: str) -> list[Line]:
    """The events of one checked row, as the bulk lane renders them (for callers with one row at a time); a row
    with attempt columns (:data:`.longtable.ATTEMPT_COLUMNS`) has them in its attempt and its attempt's id."""
    rater_ = _Rater(rater_json, to_json(rater).decode(), key64(rater["name"]))
    items = _render(rater_, [[p] for p in _row_parts(row)], [np.zeros(1, dtype=np.int64)] * 5)
    cost_from = "unknown" if row.cost_usd is None else "source"
    attempt = Line("task.attempted", items.ids[0], items.lines[0], int(items.keys[0]), cost_from)
    if row.attempt:
        line, event_id = _attempted(row)
        attempt = attempt._replace(id=event_id, line=line)
    return [attempt, Line("task.rated", items.ids[1], items.lines[1], int(items.keys[1]))]
