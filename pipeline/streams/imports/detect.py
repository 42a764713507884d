"""Which source a path is (``--format auto``), and opening it as that source (docs/design.md, Imports).

By content, never by name alone: a SQLite file with mini-ork's tables is mini-ork; JSON or JSONL (also gzip'd)
whose first object has ``resourceSpans`` or ``resourceLogs`` is OTLP; records with Langfuse's fields (a score's
``dataType``, an observation's ``traceId`` and ``startTime``, or their snake_case export names) are Langfuse; with
LangSmith's (a run's ``run_type``, feedback's ``feedback_source`` or ``key`` with ``run_id``) LangSmith; a table
with ``task_id`` and ``config`` columns is a long table. A file of the wrong format is refused in one line.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from ...errors import InvalidEvent
from .options import ImportOptions
from .prices import Pricer
from .run import Source
from .values import Clock

SQLITE_MAGIC = b"SQLite format 3\x00"
PARQUET_MAGIC = b"PAR1"


def _head(path: Path, n: int = 65536) -> bytes:
    with path.open("rb") as handle:
        head = handle.read(n)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as handle:
                return handle.read(n)
        except (OSError, EOFError):
            return head
    return head


def _first_object(head: bytes) -> dict[str, Any] | None:
    """The first JSON object of a JSON or JSONL head: a whole object, the first line, or an array's first item."""
    text = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if not text.startswith(("{", "[")):
        return None
    decoder = json.JSONDecoder()
    try:
        if text.startswith("["):
            value, _ = decoder.raw_decode(text[1:].lstrip())
        else:
            value, _ = decoder.raw_decode(text)
    except ValueError:
        first = text.splitlines()[0] if text else ""
        try:
            value = json.loads(first)
        except ValueError:
            return None
    if isinstance(value, dict) and isinstance(value.get("data"), list) and value["data"]:
        value = value["data"][0]  # an API page: {"data": [...], "meta": ...}
    return value if isinstance(value, dict) else None


def sniff(path: Path) -> tuple[str | None, str]:
    """(the format of ``path`` or None, what it looks like, for the messages)."""
    if path.is_dir():
        for child in sorted(path.iterdir()):
            if child.is_file() and not child.name.startswith("."):
                fmt, seen = sniff(child)
                if fmt is not None:
                    return fmt, f"a folder of {seen}"
        return None, "a folder without a file this command reads"
    head = _head(path)
    if head.startswith(SQLITE_MAGIC):
        return "mini-ork", "a SQLite database"
    if head.startswith(PARQUET_MAGIC):
        return _parquet_format(path), "a Parquet file"
    record = _first_object(head)
    if record is not None:
        return _record_format(record), "JSON"
    first_line = head.decode("utf-8", "replace").lstrip("\ufeff").split("\n", 1)[0]
    columns = {c.strip().strip('"') for sep in (",", ";", "\t", "|") for c in first_line.split(sep)}
    if {"task_id", "config"} <= columns:
        return "long", "a long table"
    if columns & {"data_type", "dataType"} or {"trace_id", "observation_id"} <= columns:
        return "langfuse", "a CSV export of Langfuse"
    if {"run_type", "trace_id"} <= columns or {"feedback_source", "key"} <= columns:
        return "langsmith", "a CSV export of LangSmith"
    if path.name.lower().endswith((".csv", ".csv.gz", ".tsv", ".parquet")):
        return "long", "a table by its name"  # the reader says what is wrong with it
    return None, f"a text file starting {first_line[:40]!r}"


def _record_format(record: dict[str, Any]) -> str | None:
    keys = set(record)
    if keys & {"resourceSpans", "resourceLogs", "resource_spans"}:
        return "otlp"
    if keys & {"run_type", "feedback_source"} or {"key", "run_id"} <= keys or "child_run_ids" in keys:
        return "langsmith"
    langfuse = {
        "dataType",
        "data_type",
        "traceId",
        "observationId",
        "observation_id",
        "calculatedTotalCost",
        "usageDetails",
        "usage_details",
        "provided_model_name",
        "startTime",
        "start_time",
    }
    if keys & langfuse or ({"id", "timestamp", "name"} <= keys and ("sessionId" in keys or "session_id" in keys)):
        return "langfuse"
    if {"task_id", "config"} <= keys:
        return "long"
    return None


def _parquet_format(path: Path) -> str | None:
    try:
        import pyarrow.parquet as pq

        names = set(pq.read_schema(path).names)
    except (OSError, ValueError):
        return None
    return _record_format(dict.fromkeys(names))


def open_source(paths: list[Path], options: ImportOptions, clock: Clock, pricer: Pricer) -> tuple[Source, bool]:
    """The source of ``paths`` by ``options.fmt`` (detected when ``auto``), and whether it was detected."""
    if not paths:
        raise InvalidEvent("nothing to import: name a file, a database or an export folder")
    for path in paths:
        if not path.exists():
            raise InvalidEvent("no such file or folder", source=str(path))
    fmt, detected = options.fmt, False
    seen = {path: sniff(path) for path in paths}
    if fmt == "auto":
        found = {f for f, _ in seen.values()}
        if None in found or len(found) != 1:
            path, (_, looks) = next((p, s) for p, s in seen.items() if s[0] is None or len(found) != 1)
            raise InvalidEvent(
                f"cannot tell which source this is ({looks}); name it with --format long, mini-ork, otlp, "
                "langfuse or langsmith",
                source=str(path),
            )
        fmt, detected = found.pop(), True  # type: ignore[assignment]
    else:
        for path, (found_fmt, looks) in seen.items():
            if (found_fmt is not None and found_fmt != fmt) or (found_fmt is None and fmt == "mini-ork"):
                hint = f": is it {found_fmt}? try --format {found_fmt} (or auto)" if found_fmt else ""
                raise InvalidEvent(f"not a {fmt} source: it is {looks}{hint}", source=str(path))
    return _open(fmt, paths, options, clock, pricer), detected


def _open(fmt: str, paths: list[Path], options: ImportOptions, clock: Clock, pricer: Pricer) -> Source:
    if fmt in ("long", "mini-ork") and len(paths) != 1:
        raise InvalidEvent(f"a {fmt} source is one file; got {len(paths)} paths", source=str(paths[0]))
    if fmt == "long":
        from .long import LongSource

        return LongSource(paths[0], options, clock)
    if fmt == "mini-ork":
        from .miniork import MiniOrkSource

        return MiniOrkSource(paths[0], options, clock, pricer)
    if fmt == "otlp":
        from .otlp import OtlpSource

        return OtlpSource(paths, options, clock, pricer)
    if fmt == "langfuse":
        from .langfuse import LangfuseSource

        return LangfuseSource(paths, options, clock, pricer)
    from .langsmith import LangSmithSource

    return LangSmithSource(paths, options, clock, pricer)
