"""One import, from any source (docs/design.md, Imports): map and check every row, then append.

1. **Map** (nothing written yet): every source row becomes a :class:`~.mapping.Unit`; its records are rendered as
   event lines; each chunk of :data:`CHUNK_ROWS` rows is compared with the ledger (what earlier imports
   appended: unchanged records are left out, a rating the source changed is retracted and replaced, another
   changed record keeps its first import) and spooled to ``imports/.spool-*.tmp`` in the home. Each task's
   ``task.opened`` is its earliest candidate, known at the end. A bad row is named (the first
   :data:`MAX_NAMED`; nothing is appended) or, with ``skip_bad``, dead-lettered.
2. **Append**: each spooled chunk as one framed batch (all or nothing for readers), its task openings in place,
   then its ledger run; the retractions last. A crash leaves whole chunks and a ledger that lags them: run the
   import again and compaction keeps each event once.

Memory is bounded by the chunk, plus one opening per task and, when re-importing, 32 bytes per re-imported
rating (to find the ratings the source no longer holds).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel

from ...errors import InvalidBatch, InvalidEvent
from ...workspace import Workspace
from ..batch import Batch, collector_paused
from ..events import stream_of
from ..log import FsyncPolicy, write
from .block import Block
from .deadletters import DeadLetters
from .ledger import KINDS, RATED, Ledger, content64, key64
from .mapping import Line, Opened, Prepared, Rendered, Unit, render, retraction
from .options import ImportOptions
from .values import Clock

CHUNK_ROWS = 10_000  # source rows per appended batch
SPOOL_MEMORY = 64 << 20  # bytes of mapped chunks held in memory before they go to a spool file in the home
MAX_NAMED = 100  # bad rows named in an error; the count says how many there are
_MIX = 0x9E3779B97F4A7C15  # to fold (key, id digest) into one 64-bit value
_TYPES = {kind: name for name, kind in KINDS.items()}
_STREAMS = {kind: stream_of(name) for name, kind in KINDS.items()}


class Raced(Exception):
    """Another import appended into this home between this one's read of the ledger and its lock (a first import
    takes the lock only when it writes): this one's comparison with the ledger is stale, so the caller runs it
    again, under the lock from the start (:func:`pipeline.streams.imports.import_source`)."""


def waiting_for_import(ws: Workspace) -> None:
    """Called when an import finds the home's import lock held by another import, before it waits for it.

    Does nothing; tests replace it to observe the wait instead of assuming it by sleeping.
    """


class Source(Protocol):
    """What a source module gives the run (pipeline/streams/imports/long.py is the simplest)."""

    format: str  # as --format names it
    prefix: str  # of its event ids, and its ledger namespace
    name: str  # for the dead-letter file: deadletter/import-<name>.jsonl
    where: str  # how messages name its rows: "<path> row"
    rater_kind: str  # the default kind of its ratings

    def units(self) -> Iterator[Unit | Prepared]: ...
    def progress(self) -> float: ...  # the share of the source read, 0 to 1
    def finish(self) -> list[str]: ...  # after the last unit: notes, or InvalidEvent for a whole-source refusal


class ImportResult(BaseModel):
    """The import summary (``ratings import --json``): what was read, appended, left out, and why."""

    source: str
    format: str
    detected: bool = False  # the format was detected (--format auto)
    dry_run: bool = False
    rows: int  # source rows read
    rows_by_table: dict[str, int] = {}
    imported_rows: int  # rows that gave events (appended now or by an earlier import)
    skipped_blank_score: int  # long tables: rows with a blank score
    bad_rows: int
    tasks: int
    appended: int  # events appended
    streams: dict[str, int] = {}
    events: dict[str, int] = {}  # appended, by type
    unchanged: int = 0  # events an earlier import already appended
    retracted: int = 0  # ratings the source changed: retracted, and their new versions appended
    changed_kept: int = 0  # other records the source changed: the first import stands (dead-lettered)
    skipped: dict[str, int] = {}  # rows or records left out on purpose, by reason
    bad: dict[str, int] = {}  # bad rows by the field that made them bad
    costs: dict[str, int] = {}  # attempts by where their cost came from: source, tokens, price, unknown
    notes: list[str] = []
    deadletter: str | None = None

    def summary(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class _Item(NamedTuple):
    """An event ready to append: its stream, line, id, ledger identity, content digest and ledger kind."""

    stream: str
    line: bytes
    id: str
    key: int
    content: int
    kind: int


class _Chunk:
    """The events of one chunk of source rows: the generic lane's as tuples (fields of :class:`_Item`) until the
    chunk is complete (:meth:`seal`), a bulk lane's as a :class:`~.block.Block`; then ``block``, and ``keep``:
    False for each event an earlier import already appended (positions stay, for the task openings)."""

    __slots__ = ("block", "keep", "pending")

    def __init__(self) -> None:
        self.block = Block()
        self.pending: list[tuple[Any, ...]] = []
        self.keep: Any = None

    def __len__(self) -> int:
        return len(self.block) + len(self.pending)

    def add(self, item: _Item | tuple[Any, ...]) -> None:
        self.pending.append(tuple(item))

    def extend(self, block: Block) -> None:
        self.block = Block.cat([self.block, Block.of(self.pending), block])
        self.pending = []

    def seal(self) -> _Chunk:
        import numpy as np

        self.extend(Block())
        self.keep = np.ones(len(self.block), dtype=bool)
        return self

    def with_openings(self, openings: tuple[list[int], Block]) -> None:
        """Insert these events, each at its position (positions of the chunk as it was mapped)."""
        positions, added = openings
        if not len(added):
            return
        import numpy as np

        self.block, order = self.block.with_inserted(positions, added)
        self.keep = np.concatenate([self.keep, np.ones(len(added), dtype=bool)])[order]

    def item(self, i: int) -> _Item:
        return self.item_of(self.block, i)

    @staticmethod
    def item_of(b: Block, i: int) -> _Item:
        """Event ``i`` of ``b``, whole."""
        kind = int(b.kinds[i])
        return _Item(_STREAMS[kind], b.lines[i], b.ids[i], int(b.keys[i]), int(b.contents[i]), kind)


def _count(counter: Counter[str], kinds: Any) -> None:
    """Count events by type, types in the order they first occur (the summary's order)."""
    import numpy as np

    found, first, counts = np.unique(kinds, return_index=True, return_counts=True)
    for i in np.argsort(first, kind="stable"):
        counter[_TYPES[int(found[i])]] += int(counts[i])


class _Candidate(NamedTuple):
    at: str
    chunk: int
    position: int
    record: Opened


@dataclass
class _Tally:
    rows: int = 0
    imported: int = 0
    bad_rows: int = 0
    unchanged: int = 0
    changed: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    bad: Counter[str] = field(default_factory=Counter)
    costs: Counter[str] = field(default_factory=Counter)
    named: list[InvalidEvent] = field(default_factory=list)


def _pairs(keys: Any, ids: Any) -> Any:
    """(key, id digits) pairs folded into one uint64 each, for vectorised membership (``ids``: an S24 array; its
    first 16 hex digits, parsed vectorised, are 64 bits of the id's digest)."""
    import numpy as np

    digits = np.frombuffer(np.ascontiguousarray(ids, dtype="S24").tobytes(), dtype=np.uint8).reshape(-1, 24)[:, :16]
    nibbles = (digits - 48 - 39 * (digits > 57)).astype(np.uint64)  # '0'-'9' -> 0-9, 'a'-'f' -> 10-15
    head = np.zeros(len(digits), dtype=np.uint64)
    for column in range(16):
        head = (head << np.uint64(4)) | nibbles[:, column]
    return np.asarray(keys, dtype=np.uint64) ^ (head * np.uint64(_MIX))


class Run:
    """One import into the workspace ``ws`` (see the module docstring)."""

    def __init__(
        self,
        ws: Workspace,
        source: Source,
        options: ImportOptions,
        *,
        fsync: FsyncPolicy = "batch",
        progress: Callable[[int, int], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.ws, self.source, self.options, self.fsync, self.progress = ws, source, options, fsync, progress
        self.clock = clock or Clock(future=options.future)  # the source's: one "now" per import
        self.tally = _Tally()
        self.candidates: dict[str, _Candidate] = {}
        self.seen_keys: list[Any] = []  # arrays, per chunk: re-imported ratings (their keys and id digits)
        self.seen_ids: list[Any] = []
        self.chunks = 0
        self.tasks = 0
        self.would = Counter[str]()  # a dry run's count of what it would append
        self.spool: _Spool

    # ----------------------------------------------------------------- the whole import
    def execute(self) -> ImportResult:
        self.ledger = Ledger(self.ws, self.source.prefix, writable=not self.options.dry_run)
        letters_path = self.ws.import_dead_letters(Path(self.source.name))
        self.letters_path = None if self.options.dry_run else letters_path
        with self._locked(), self._spooled(), DeadLetters(self.ws, self.letters_path) as self.letters:
            with collector_paused():  # the chunks are many short-lived acyclic objects: its passes reclaim nothing
                self._map()
            notes = self.source.finish()
            if self.tally.named:
                raise InvalidBatch(
                    self.tally.named,
                    total=self.tally.bad_rows,
                    what="bad row(s)",
                    remedy=f"; fix them, or import the rest with --skip-bad (the bad rows go to {letters_path})",
                )
            openings = self._openings()
            retractions = self._retractions()
            if not self.options.dry_run:
                appended = self._append(openings, retractions)
                self.ledger.finish(dropped=[(k, d) for k, d, _ in retractions])
            else:  # what would be appended
                appended = self.would
                for n in sorted(openings):
                    _count(appended, self._opened(openings[n])[1].kinds)
                appended.update("rating.retracted" for _ in retractions)
        return self._result(appended, len(retractions), notes)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One import at a time per home (``imports/.import.lock``), from the start when the home has imported
        before (its ledger is read), else from the append on (:meth:`_lock`); a dry run takes no lock."""
        self._lock_fd = -1
        self._read_ledger: list[Path] | None = None  # the ledger's runs as read before a late lock
        try:
            if not self.options.dry_run and self.ws.imports.is_dir():
                self._lock()
            else:
                self._read_ledger = self.ledger.paths()
            yield
        finally:
            if self._lock_fd >= 0:
                os.close(self._lock_fd)

    def _lock(self) -> None:
        if self._lock_fd >= 0:
            return
        self.ws.root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = self.ws.open(self.ws.import_lock, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another import into this home: wait for it (never exit 3: imports queue)
            waiting_for_import(self.ws)
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        if self._read_ledger is not None and self.ledger.paths() != self._read_ledger:
            raise Raced
        for stale in self.ws.import_spools():  # left by an import that died: ours now
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()

    @contextlib.contextmanager
    def _spooled(self) -> Iterator[None]:
        """The mapped chunks: in memory up to :data:`SPOOL_MEMORY` bytes, then in ``imports/.spool-*.tmp``."""
        self.spool = _Spool(self)
        try:
            yield
        finally:
            self.spool.close()

    # ----------------------------------------------------------------- 1. map
    def _map(self) -> None:
        chunk = _Chunk()
        for unit in self.source.units():
            if isinstance(unit, Prepared):  # a whole chunk of rows at once (it ends where a chunk ends)
                self._prepared(unit, chunk)
                self._flush(chunk)
                chunk = _Chunk()
                continue
            self.tally.rows += 1
            if unit.problems:
                self._bad(unit)
            else:
                self._take(unit, chunk)
            if self.tally.rows % CHUNK_ROWS == 0:
                self._flush(chunk)
                chunk = _Chunk()
        self._flush(chunk)

    def _prepared(self, prepared: Prepared, chunk: _Chunk) -> None:
        tally = self.tally
        tally.rows += prepared.rows
        tally.imported += prepared.imported
        tally.skipped.update(prepared.skipped)
        tally.costs.update(prepared.costs)
        for unit in prepared.bad:
            self._bad(unit)
        base = len(chunk)
        chunk.extend(prepared.items)
        for position, record in prepared.opened:
            self._candidate(record, base + position)

    def _bad(self, unit: Unit) -> None:
        tally = self.tally
        tally.bad_rows += 1
        tally.bad[unit.problems[0][0]] += 1
        field_, reason = unit.problems[0]
        text = "; ".join([reason, *(f"{f}: {r}" for f, r in unit.problems[1:])])
        if self.options.skip_bad:
            raw = unit.raw() if callable(unit.raw) else unit.raw
            self.letters.write(
                {
                    "source": self.source.where,
                    "row": unit.row,
                    "kind": "bad",
                    "field": field_,
                    "reason": text,
                    "problems": [{"field": f, "reason": r} for f, r in unit.problems],
                    "raw": raw,
                }
            )
        elif len(tally.named) < MAX_NAMED:
            line, where = (
                (unit.row, self.source.where)
                if isinstance(unit.row, int)
                else (None, f"{self.source.where} {unit.row}")
            )
            tally.named.append(InvalidEvent(text, field=field_, line=line, source=where, problems=tuple(unit.problems)))

    def _take(self, unit: Unit, chunk: _Chunk) -> None:
        tally = self.tally
        if unit.skipped:
            tally.skipped.update(unit.skipped)
        if unit.records:
            tally.imported += 1
        for record in unit.records:
            if isinstance(record, Line):
                kind = KINDS[record.type]
                chunk.add((_STREAMS[kind], record.line, record.id, record.key, 0, kind))  # 0: the id dates it
                if record.cost_from is not None:
                    tally.costs[record.cost_from] += 1
            elif isinstance(record, Opened) and not record.final:
                self._candidate(record, len(chunk))
            else:
                cost_from = getattr(record, "cost_from", None)
                if cost_from is not None:
                    tally.costs[cost_from] += 1
                self.tasks += isinstance(record, Opened)  # a final opening: counted here, never held
                rendered = render(record, self.source.prefix)
                chunk.add(self._item(rendered, record.key, dated_by_id=record.id is not None))

    def _item(self, rendered: Rendered, key: str, *, dated_by_id: bool = False) -> _Item:
        """The spooled form of an event. Its ``content`` (what tells a changed record) is its line's digest,
        except for ratings and ids derived from the content (``dated_by_id``), where the id tells."""
        kind = KINDS[rendered.type]
        content = 0 if kind == RATED or dated_by_id else content64(rendered.line)
        return _Item(stream_of(rendered.type), rendered.line, rendered.id, key64(key), content, kind)

    def _candidate(self, record: Opened, position: int) -> None:
        best = self.candidates.get(record.task)
        if best is None or record.at < best.at:  # normalised times compare as text (years 1000 to 9999)
            self.candidates[record.task] = _Candidate(record.at, self.chunks, position, record)

    def _flush(self, chunk: _Chunk) -> None:
        """Compare a chunk with the ledger and spool it."""
        self._diff(chunk.seal())
        if not self.options.dry_run:
            self.spool.add(chunk)
        else:
            _count(self.would, chunk.block.kinds[chunk.keep])
        self.chunks += 1
        if self.progress is not None:
            self.progress(int(1000 * self.source.progress()), 2000)

    def _diff(self, chunk: _Chunk) -> None:
        """Mark each event an earlier import already appended (or whose change must not be appended)."""
        if self.ledger.empty or not len(chunk):
            return
        import numpy as np

        block = chunk.block
        keys, ids, kinds = block.keys, block.digits(), block.kinds
        known, same, of_kind = self.ledger.match(keys, ids, block.contents, kinds)
        rated = known & (kinds == RATED)
        self.seen_keys.append(keys[rated])
        self.seen_ids.append(ids[rated])
        self.tally.unchanged += int(same.sum())
        changed = known & ~same & of_kind & (kinds != RATED)
        for i in np.flatnonzero(changed):
            self._changed(chunk.item(int(i)))
        chunk.keep &= ~(same | changed)

    def _changed(self, item: _Item) -> None:
        self.tally.changed += 1
        self.letters.write(
            {
                "source": self.source.where,
                "row": item.id,
                "kind": "changed",
                "field": "-",
                "reason": "the source changed this record after an earlier import appended it; an event of this "
                "type cannot be retracted, so the first import stands (this is the version left out)",
                "raw": item.line.decode("utf-8", "replace").rstrip("\n"),
            }
        )

    # ----------------------------------------------------------------- openings and retractions
    def _openings(self) -> dict[int, list[_Candidate]]:
        """Each task's earliest candidate, by the chunk it goes to (rendered only when that chunk is appended)."""
        by_chunk: dict[int, list[_Candidate]] = {}
        for candidate in self.candidates.values():
            by_chunk.setdefault(candidate.chunk, []).append(candidate)
        self.tasks, self.candidates = self.tasks + len(self.candidates), {}
        return by_chunk

    def _opened(self, candidates: list[_Candidate]) -> tuple[list[int], Block]:
        """The openings of one chunk, rendered and compared with the ledger: their positions and events, to append
        (an opening an earlier import appended is left out; a changed one keeps its first version)."""
        import numpy as np

        own = getattr(self.source, "render_openings", None)  # a source's own rendering (long tables: their ids)
        if own is not None:
            block = own([c.record for c in candidates])
        else:
            prefix = self.source.prefix
            block = Block.of([self._item(render(c.record, prefix), c.record.key) for c in candidates])
        positions = [c.position for c in candidates]
        if self.ledger.empty or not candidates:
            return positions, block
        _, same, of_kind = self.ledger.match(block.keys, block.digits(), block.contents, block.kinds)
        self.tally.unchanged += int(same.sum())
        for i in np.flatnonzero(of_kind & ~same):
            self._changed(_Chunk.item_of(block, int(i)))
        new = np.flatnonzero(~of_kind)
        return [positions[i] for i in new], block.take(new)

    def _retractions(self) -> list[tuple[int, bytes, _Item]]:
        """The earlier ratings of every re-imported key that this import no longer holds: retracted."""
        import numpy as np

        if not sum(len(k) for k in self.seen_keys):
            return []
        keys, ids = np.concatenate(self.seen_keys), np.concatenate(self.seen_ids)
        old_keys, old_ids = self.ledger.ratings_of(np.unique(keys))
        gone = np.flatnonzero(~np.isin(_pairs(old_keys, old_ids), _pairs(keys, ids)))
        prefix = self.source.prefix
        reason = f"updated at the source ({self.source.format}): replaced by its new version on import"
        out = []
        for i in gone:
            key, digest = int(old_keys[i]), bytes(old_ids[i])
            rendered = retraction(f"{prefix}-{digest.decode()}", prefix, self.clock.now_text, reason)
            out.append((key, digest, self._item(rendered, f"retract:{digest.decode()}")))
        return out

    # ----------------------------------------------------------------- 2. append
    def _append(
        self, openings: dict[int, list[_Candidate]], retractions: list[tuple[int, bytes, _Item]]
    ) -> Counter[str]:
        appended = Counter[str]()
        self.streams = Counter[str]()
        self._lock()
        for n, chunk in enumerate(self.spool.chunks()):
            chunk.with_openings(self._opened(openings.pop(n, [])))
            self._write(chunk, appended)
            if self.progress is not None:
                self.progress(1000 + int(1000 * (n + 1) / max(self.chunks, 1)), 2000)
        last = _Chunk()
        for _, _, item in retractions:
            last.add(item)
        self._write(last.seal(), appended)
        return appended

    def _write(self, chunk: _Chunk, appended: Counter[str]) -> None:
        import numpy as np

        block = chunk.block if chunk.keep.all() else chunk.block.take(np.flatnonzero(chunk.keep))
        if not len(block):
            return
        to_ratings = block.ratings()
        streams = {
            "ratings": list(compress(block.lines, to_ratings)),
            "tasks": list(compress(block.lines, ~to_ratings)),
        }
        first = "ratings" if to_ratings[0] else "tasks"  # the streams in the order their events first occur
        by_stream = {s: streams[s] for s in (first, *streams) if streams[s]}
        result = write(self.ws, Batch(lines=by_stream, ids=block.ids), self.fsync)
        self.streams.update(result.streams)
        _count(appended, block.kinds)
        sourced = block.kinds != KINDS["rating.retracted"]  # retractions are no records of a source: not in the ledger
        if not sourced.all():
            block = block.take(np.flatnonzero(sourced))
        self.ledger.append(block.keys, block.digits(), block.contents, block.kinds)

    # ----------------------------------------------------------------- the summary
    def _result(self, appended: Counter[str], retracted: int, notes: list[str]) -> ImportResult:
        tally = self.tally
        return ImportResult(
            source=self.source.where.removesuffix(" row"),
            format=self.source.format,
            dry_run=self.options.dry_run,
            rows=tally.rows,
            rows_by_table=getattr(self.source, "rows_by_table", {}),
            imported_rows=tally.imported,
            skipped_blank_score=tally.skipped.get("blank score", 0),
            bad_rows=tally.bad_rows,
            tasks=self.tasks,
            appended=sum(appended.values()),
            streams=dict(getattr(self, "streams", {})),
            events=dict(appended),
            unchanged=tally.unchanged,
            retracted=retracted,
            changed_kept=tally.changed,
            skipped=dict(tally.skipped),
            bad=dict(tally.bad),
            costs=dict(tally.costs),
            notes=notes,
            deadletter=str(self.letters_path) if self.letters.written and self.letters_path else None,
        )


class _Spool:
    """Mapped chunks: held as they are while their lines total under :data:`SPOOL_MEMORY` bytes, then pickled to a
    file of the home (``imports/.spool-*.tmp``, deleted at the end)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.held: list[_Chunk] = []
        self.size = 0
        self.file: Any = None
        self.path: Any = None

    def add(self, chunk: _Chunk) -> None:
        if self.file is None:
            self.size += sum(map(len, chunk.block.lines)) + 64 * len(chunk)
            self.held.append(chunk)
            if self.size <= SPOOL_MEMORY:
                return
            self.run._lock()
            ws = self.run.ws
            self.path = ws.import_spool(f"{os.getpid()}-{os.urandom(4).hex()}")
            self.file = os.fdopen(ws.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL), "w+b")
            chunks, self.held = self.held, []
        else:
            chunks = [chunk]
        for held in chunks:
            pickler = pickle.Pickler(self.file, protocol=pickle.HIGHEST_PROTOCOL)
            pickler.fast = True  # no memo: a chunk is lists of bytes and strings, none shared, no cycle
            pickler.dump(held)

    def chunks(self) -> Iterator[_Chunk]:
        if self.file is None:
            yield from self.held
            return
        end = self.file.tell()
        self.file.seek(0)
        while self.file.tell() < end:
            yield pickle.load(self.file)  # our own spool

    def close(self) -> None:
        self.held = []
        if self.file is not None:
            self.file.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
