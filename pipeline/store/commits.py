"""The record each compaction commits (docs/design.md, Storage): per (writer, stream), the bytes consumed and
what became of their lines. Compaction writes it; the views hash it (``inputs_sha256``) and ``ratings verify``
checks the store against it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

METADATA_KEY = "ratings.compaction"  # the commit metadata a compaction writes


class Outcomes(BaseModel):
    """What happened to the lines of one stream range."""

    model_config = ConfigDict(extra="forbid")

    lines: int = 0
    stored: int = 0
    duplicate: int = 0  # same id and same payload as an event already stored: dropped
    conflict: int = 0  # same id, different payload: dead-lettered
    invalid: int = 0  # not a valid v1 event (or a line of a broken batch): dead-lettered
    frames: int = 0  # batch frame lines (pipeline.streams.framing): not events, neither stored nor dead-lettered


class StreamRange(BaseModel):
    """The bytes ``[start, end)`` of one writer's stream consumed by one commit, and what became of them."""

    model_config = ConfigDict(extra="forbid")

    start: int = 0
    end: int = 0
    sha256: str = ""  # of the bytes [start, end)
    line_start: int = 1  # line number of the first line of the range (1-based)
    outcomes: Outcomes = Field(default_factory=Outcomes)
    deadletter: tuple[int, int] = (0, 0)  # bytes of deadletter/<stream>.jsonl written for this range

    @property
    def next_line(self) -> int:
        return self.line_start + self.outcomes.lines


class CommitRecord(BaseModel):
    """The commit metadata of one compaction (``ratings.compaction`` in the commit info)."""

    model_config = ConfigDict(extra="forbid")

    writer: str
    read_version: int | None  # the table version the run deduplicated against
    event_schema_version: int
    streams: dict[str, StreamRange]
