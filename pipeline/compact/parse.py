"""Turn a chunk of stream lines into store rows per family, and the reasons of the invalid lines.

:func:`parse_lines_slow` validates line by line with :func:`pipeline.events.parse_line`
(the reference: its reason text is the one dead letters carry).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from ..errors import InvalidEvent
from ..events import parse_line
from .rows import event_row, table_of


@dataclass
class Chunk:
    """Complete lines of one stream: ``raw[i]`` starts at byte ``offsets[i]`` and is line ``first_line + i``."""

    stream: str
    raw: list[bytes]
    offsets: list[int]
    first_line: int


@dataclass
class ParsedChunk:
    #: family -> rows of the valid lines, with a ``_line`` column (index into the chunk), in line order
    tables: dict[str, pa.Table] = field(default_factory=dict)
    #: (index into the chunk, reason) of every invalid line
    invalid: list[tuple[int, str]] = field(default_factory=list)


def fallback_id(stream: str, offset: int) -> str:
    """The id of an event that came without one: its position, unique and stable."""
    return f"{stream}@{offset}"


def parse_lines_slow(chunk: Chunk, indices: list[int], max_line_bytes: int) -> ParsedChunk:
    """Validate the given lines of ``chunk`` one by one."""
    rows: dict[str, list[dict]] = {}
    out = ParsedChunk()
    source = f"streams/{chunk.stream}.jsonl"
    for i in indices:
        try:
            event = parse_line(chunk.raw[i], line=chunk.first_line + i, source=source, max_bytes=max_line_bytes)
        except InvalidEvent as exc:
            out.invalid.append((i, f"{exc.field}: {exc.reason}"))
            continue
        family, row = event_row(event, fallback_id(chunk.stream, chunk.offsets[i]))
        row["_line"] = i
        rows.setdefault(family, []).append(row)
    for family, items in rows.items():
        lines = pa.array([r.pop("_line") for r in items], pa.int64())
        out.tables[family] = table_of(family, items).append_column("_line", lines)
    return out


def parse_chunk(chunk: Chunk, max_line_bytes: int) -> ParsedChunk:
    """Rows and invalid lines of a whole chunk."""
    return parse_lines_slow(chunk, list(range(len(chunk.raw))), max_line_bytes)
