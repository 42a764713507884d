"""Which source a path is (``--format auto``), and opening it as that source (docs/design.md, Imports)."""

from __future__ import annotations

from pathlib import Path

from ...errors import InvalidEvent
from ...home import Home
from .long import LongSource
from .options import ImportOptions
from .run import Source
from .values import Clock


def open_source(paths: list[Path], options: ImportOptions, clock: Clock, home: Home) -> tuple[Source, bool]:
    """The source of ``paths`` by ``options.fmt`` (detected when ``auto``), and whether it was detected."""
    if not paths:
        raise InvalidEvent("nothing to import: name a file, a database or an export folder")
    fmt, detected = options.fmt, False
    if fmt == "auto":
        fmt, detected = "long", True
    if fmt == "long":
        if len(paths) != 1:
            raise InvalidEvent(f"a long table is one file; got {len(paths)} paths", source=str(paths[0]))
        return LongSource(paths[0], options, clock), detected
    raise InvalidEvent(f"format {fmt!r} is not built yet", source=str(paths[0]))
