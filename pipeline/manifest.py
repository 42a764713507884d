"""Store manifests (DESIGN 4): which stream bytes were consumed and which Parquet files make the store.

A manifest is ``store/_manifests/<20 digits>.json``, created put-if-absent (the
content is written to a private temp file, fsync'd, then ``os.link``-ed to its
final name: the link fails when another compactor won the number). Readers take
the newest number and read exactly the files it lists, never a glob.

This module imports no heavy library: the router and the CLI check the newest
manifest number cheaply.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import StoreConflict, StoreCorrupt
from .home import Home, fsync_dir, write_synced
from .jsonfile import first_problem

MANIFEST_SCHEMA = "store-manifest/v1"
_DIGITS = 20


class Outcomes(BaseModel):
    """What happened to the lines of one stream range."""

    model_config = ConfigDict(extra="forbid")

    lines: int = 0
    stored: int = 0
    duplicate: int = 0  # same id and same payload as an event already kept: dropped
    conflict: int = 0  # same id, different payload: dead-lettered
    invalid: int = 0  # not a valid v1 event: dead-lettered
    frames: int = 0  # batch frame lines (pipeline.framing): not events, neither stored nor dead-lettered


class StreamRange(BaseModel):
    """The bytes ``[start, end)`` of a stream consumed by one compaction, and what became of them."""

    model_config = ConfigDict(extra="forbid")

    start: int = 0
    end: int = 0
    sha256: str = ""  # of the bytes [start, end)
    line_start: int = 1  # line number of the first line of the range (1-based)
    outcomes: Outcomes = Field(default_factory=Outcomes)
    deadletter_bytes: int = 0  # size of deadletter/<stream>.jsonl after this compaction

    @property
    def next_line(self) -> int:
        return self.line_start + self.outcomes.lines


class FileEntry(BaseModel):
    """One Parquet file of the store (``path`` relative to ``store/``)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    family: str  # a store family, or ``_index`` for the id index
    partition: str  # ``YYYY-MM-DD``, ``none`` for events without a time, ``-`` for the index
    rows: int
    bytes: int
    sha256: str


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_: str = Field(MANIFEST_SCHEMA, alias="schema")
    number: int
    event_schema_version: int
    streams: dict[str, StreamRange]  # the range consumed by THIS compaction, per stream
    files: list[FileEntry]  # every Parquet file of the store, in a fixed order
    index: list[FileEntry]  # the id index segments
    rows: dict[str, int]  # rows per family over all files
    merged: list[str] = Field(default_factory=list)  # files this compaction replaced by a merged one

    def to_json(self) -> bytes:
        return (json.dumps(self.model_dump(mode="json", by_alias=True), indent=1, sort_keys=False) + "\n").encode()


def file_sha256(path: Path) -> str:
    """SHA-256 of a whole file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def manifest_path(home: Home, number: int) -> Path:
    return home.manifests / f"{number:0{_DIGITS}d}.json"


def manifest_numbers(home: str | os.PathLike | Home | None) -> list[int]:
    """All manifest numbers present, ascending."""
    directory = Home.resolve(home).manifests
    if not directory.is_dir():
        return []
    return sorted(
        int(p.name[:-5])
        for p in directory.iterdir()
        if p.name.endswith(".json") and len(p.name) == _DIGITS + 5 and p.name[:-5].isdigit()
    )


def newest_manifest_number(home: str | os.PathLike | Home | None) -> int | None:
    """The newest manifest number, or None when nothing was compacted yet (no DuckDB, no Parquet)."""
    numbers = manifest_numbers(home)
    return numbers[-1] if numbers else None


def load_manifest(home: str | os.PathLike | Home | None, number: int | None = None) -> Manifest | None:
    """Manifest ``number`` (the newest when None); None when there is none at all."""
    home = Home.resolve(home)
    if number is None:
        number = newest_manifest_number(home)
        if number is None:
            return None
    path = manifest_path(home, number)
    if not path.exists():
        raise StoreCorrupt(f"manifest {number} does not exist ({path})")
    try:
        return Manifest.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise StoreCorrupt(f"manifest {path} is not a valid {MANIFEST_SCHEMA}: {first_problem(exc)}") from None


def create_manifest(home: Home, manifest: Manifest) -> Path:
    """Put-if-absent: write a private temp file, fsync, ``os.link`` it to the final name, fsync the directory.

    Raises :class:`StoreConflict` when the number already exists (another compactor won).
    """
    home.manifests.mkdir(parents=True, exist_ok=True)
    final = manifest_path(home, manifest.number)
    tmp = home.manifests / f".{final.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    write_synced(tmp, manifest.to_json(), os.O_CREAT | os.O_EXCL)
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise StoreConflict(
            f"manifest {manifest.number} was created by another compactor; nothing of this run is visible, rerun compact"
        ) from None
    finally:
        os.unlink(tmp)
    fsync_dir(home.manifests)
    return final
