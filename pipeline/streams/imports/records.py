"""Reading the records of an export file: JSON (one document, an array, or an API page ``{"data": [...]}``), JSONL,
CSV or Parquet, gzip'd or not, as dicts (docs/design.md, Imports). Shared by the OTLP, Langfuse and LangSmith
sources; a folder is read file by file (sorted by name)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from .longtable import reading

#: Files of a folder an export source reads.
SUFFIXES = (".json", ".jsonl", ".ndjson", ".csv", ".parquet", ".json.gz", ".jsonl.gz", ".ndjson.gz", ".csv.gz")


def files_of(paths: list[Path]) -> list[Path]:
    """The files of ``paths`` (a folder: its readable files, sorted by name)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(SUFFIXES))
        else:
            out.append(path)
    return out


def _text(path: Path) -> io.TextIOWrapper:
    """The file as text (UTF-8, a byte order mark skipped), gunzipped when its name ends in ``.gz``; the caller
    closes it (``with``)."""
    raw = gzip.open(path, "rb") if path.name.lower().endswith(".gz") else path.open("rb")  # noqa: SIM115
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(number, record)`` of every object of ``path`` (1-based; a JSON document's items, a JSONL line, a CSV or
    Parquet row); a value that is not an object is :class:`InvalidEvent` naming it."""
    name = path.name.lower().removesuffix(".gz")
    with reading(path):
        if name.endswith(".parquet"):
            yield from _parquet(path)
        elif name.endswith(".csv"):
            with _text(path) as handle:
                yield from enumerate(csv.DictReader(handle), start=1)
        else:
            yield from _json(path)


def _parquet(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow.parquet as pq

    n = 0
    with pq.ParquetFile(path) as table:
        for batch in table.iter_batches(batch_size=10_000):
            for row in batch.to_pylist():
                n += 1
                yield n, row


def _json(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with _text(path) as handle:
        first = handle.read(1)
        while first.isspace():
            first = handle.read(1)
        if first == "[" or (first == "{" and not _is_jsonl(path)):
            document = json.loads(first + handle.read())
            items = document if isinstance(document, list) else document.get("data", [document])
            if isinstance(document, dict) and not isinstance(items, list):
                items = [document]
            for n, item in enumerate(items, start=1):
                yield n, _object(path, n, item)
            return
        rest = first + handle.readline()
        n = 0
        while rest:
            n += 1
            if rest.strip():
                try:
                    value = json.loads(rest)
                except ValueError as exc:
                    raise InvalidEvent(f"not valid JSON: {exc}", line=n, source=str(path)) from None
                yield n, _object(path, n, value)
            rest = handle.readline()


def _is_jsonl(path: Path) -> bool:
    """A file whose first line is a whole JSON object and that has a second line: JSON Lines."""
    with _text(path) as handle:
        first = handle.readline()
        second = handle.readline()
    if not second.strip():
        return False
    try:
        json.loads(first)
    except ValueError:
        return False
    return True


def _object(path: Path, n: int, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidEvent(f"expected a JSON object, got {type(value).__name__}", line=n, source=str(path))
    return value


def field(record: dict[str, Any], *names: str) -> Any:
    """The first of ``names`` the record holds with a value (exports spell fields camelCase or snake_case)."""
    for name in names:
        value = record.get(name)
        if value is not None and value != "":
            return value
    return None


def json_value(value: Any) -> Any:
    """A JSON-encoded column of a CSV or Parquet export (``metadata``, ``extra``) as its value; else as is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
