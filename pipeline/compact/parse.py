"""Turn a chunk of stream lines into store rows per family, and the reasons of the invalid lines.

:func:`parse_lines_slow` validates line by line with :func:`pipeline.streams.events.parse_line`
(the reference: its reason text is the one dead letters carry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidEvent
from ..streams.events import parse_line
from ..streams.future import future_reason
from ..streams.scan import frame_of
from ..utc import format_timestamp
from .fastpath import lines_array, parse_fast
from .rows import event_row, table_of

if TYPE_CHECKING:
    from ..store.commits import Outcomes
    from .frames import FramePlan


@dataclass
class Chunk:
    """Complete lines of one stream.

    ``block`` holds them with their newlines; line ``i`` is ``block[starts[i]:starts[i+1]]``,
    starts at stream byte ``offsets[i]`` and is line number ``first_line + i``.
    """

    stream: str
    block: bytes
    starts: np.ndarray
    offsets: np.ndarray
    first_line: int
    id_prefix: str  # ``<writer>:<stream>``: an id-less line gets the id ``<id_prefix>@<offset>``

    @classmethod
    def of(cls, stream: str, block: bytes, offset: int, first_line: int, writer: str, end: int | None = None) -> Chunk:
        """The lines of ``block[:end]`` (which ends with a newline; ``end`` defaults to the whole block, and bytes
        past it are not this chunk's) found at stream byte ``offset`` of ``writer``'s stream."""
        starts = _line_starts(block, len(block) if end is None else end)
        return cls(
            stream=stream,
            block=block,
            starts=starts,
            offsets=starts[:-1] + offset,
            first_line=first_line,
            id_prefix=f"{writer}:{stream}",
        )

    def __len__(self) -> int:
        return len(self.starts) - 1

    def line(self, i: int) -> bytes:
        """Line ``i`` without its newline."""
        return self.block[self.starts[i] : self.starts[i + 1] - 1]


_SCAN = 1 << 20  # bytes compared at a time: the mask stays in cache


def _line_starts(block: bytes, end: int) -> np.ndarray:
    """0 and the offset after every newline of ``block[:end]`` (numpy, a piece at a time, without the GIL)."""
    data = np.frombuffer(block, np.uint8, end)
    parts = [np.zeros(1, np.int64)]
    for at in range(0, end, _SCAN):
        parts.append(np.flatnonzero(data[at : at + _SCAN] == 10) + (at + 1))
    return np.concatenate(parts)


@dataclass
class ParsedChunk:
    #: family -> rows of the valid lines, with a ``_line`` column (index into the chunk), in line order
    tables: dict[str, pa.Table] = field(default_factory=dict)
    #: (index into the chunk, reason) of every invalid line
    invalid: list[tuple[int, str]] = field(default_factory=list)
    #: batch frame lines (pipeline.streams.framing): not events, neither stored nor dead-lettered
    frames: int = 0


def fallback_id(id_prefix: str, offset: int) -> str:
    """The id of an event that came without one: ``<writer>:<stream>@<offset>``, its position, unique and stable
    across writers (the form :data:`pipeline.streams.events.RESERVED_ID` keeps from explicit ids)."""
    return f"{id_prefix}@{offset}"


def parse_lines_slow(chunk: Chunk, indices: list[int], max_line_bytes: int) -> ParsedChunk:
    """Validate the given lines of ``chunk`` one by one."""
    rows: dict[str, list[dict]] = {}
    out = ParsedChunk()
    source = f"streams/{chunk.stream}.jsonl"
    for i in indices:
        if frame_of(chunk.line(i)) is not None:
            out.frames += 1
            continue
        try:
            event = parse_line(chunk.line(i), line=chunk.first_line + i, source=source, max_bytes=max_line_bytes)
        except InvalidEvent as exc:
            out.invalid.append((i, f"{exc.field}: {exc.reason}"))
            continue
        family, row = event_row(event, fallback_id(chunk.id_prefix, int(chunk.offsets[i])))
        row["_line"] = i
        rows.setdefault(family, []).append(row)
    for family, items in rows.items():
        lines = pa.array([r.pop("_line") for r in items], pa.int64())
        out.tables[family] = table_of(family, items).append_column("_line", lines)
    return out


def parse_chunk(chunk: Chunk, max_line_bytes: int, lean: dict[str, bool] | None = None) -> ParsedChunk:
    """Rows and invalid lines of a whole chunk: the vectorised path first, line by line for what it leaves
    (``lean``: see :func:`pipeline.compact.fastpath.parse_fast`)."""
    lengths = np.diff(chunk.starts) - 1
    candidate = np.flatnonzero((lengths > 0) & (lengths <= max_line_bytes))
    lines = lines_array(chunk.block, chunk.starts)
    fast = parse_fast(lines, candidate, chunk.id_prefix, chunk.offsets, chunk.block, lean)
    left = np.flatnonzero((lengths == 0) | (lengths > max_line_bytes))
    slow_idx = np.sort(np.concatenate([left, *fast.slow])) if fast.slow else left
    out = parse_lines_slow(chunk, slow_idx.tolist(), max_line_bytes)
    for family, fast_tables in fast.tables.items():
        # the vectorised rows keep some columns dictionary-encoded (rows.ENCODED_SCHEMAS): the parser's alike
        tables = [*fast_tables, out.tables[family].cast(fast_tables[0].schema)] if family in out.tables else fast_tables
        table = pa.concat_tables(tables)
        out.tables[family] = table.take(pc.sort_indices(table["_line"])) if len(tables) > 1 else table
    return out


def apply_frames(
    chunk: Chunk, parsed: ParsedChunk, frames: FramePlan | None, outcomes: Outcomes
) -> tuple[ParsedChunk, list[tuple[int, str]]]:
    """The chunk's parse with the frame plan applied: frame lines counted (not events), the lines of a broken
    batch part taken out of the rows and the invalid lines, and returned as (line index, reason) dead letters."""
    index, is_frame = frames.lookup(chunk.offsets) if frames is not None else (np.full(len(chunk), -1), None)
    special = index >= 0
    if not special.any():
        return parsed, []
    assert frames is not None and is_frame is not None
    outcomes.frames += int(is_frame.sum())
    broken = [(int(i), f"-: {frames.reasons[int(index[i])]}") for i in np.flatnonzero(special & ~is_frame)]
    tables = {}
    for family, table in parsed.tables.items():
        keep = ~special[table["_line"].to_numpy()]
        if keep.any():
            tables[family] = table if keep.all() else table.filter(pa.array(keep))
    invalid = [(i, reason) for i, reason in parsed.invalid if not special[i]]
    return ParsedChunk(tables=tables, invalid=invalid), broken


def late_rows(parsed: ParsedChunk, latest: str, skew: timedelta) -> tuple[ParsedChunk, list[tuple[int, str]]]:
    """The chunk's rows without those dated after ``latest`` (this run's time plus the skew), and those as
    (line index, reason) dead letters: another writer wrote them without the check ``append`` makes."""
    limit = pa.scalar(datetime.fromisoformat(latest[:-1]) + timedelta(seconds=1), pa.timestamp("us"))
    late: list[tuple[int, str]] = []
    tables = {}
    for family, table in parsed.tables.items():
        after = np.asarray(pc.fill_null(pc.greater_equal(table["at"], limit), False).to_numpy(zero_copy_only=False))
        if after.any():
            rows = table.filter(pa.array(after))
            for line, at in zip(rows["_line"].to_pylist(), rows["at"].to_pylist(), strict=True):
                moment = format_timestamp(at.replace(tzinfo=UTC))
                late.append((int(line), f"at: {future_reason(moment, latest, skew, moment='this compaction')}"))
        kept = table.filter(pa.array(~after)) if after.any() else table
        if kept.num_rows:
            tables[family] = kept
    return (ParsedChunk(tables=tables, invalid=parsed.invalid), late) if late else (parsed, late)
