"""``ratings import``: ratings from where they already live, as v1 events (docs/design.md, Imports).

Sources, one module each: long tables (:mod:`.long`; its reader, which other commands call, :mod:`.longtable`),
mini-ork's ``state.db`` (:mod:`.miniork`), OpenTelemetry GenAI traces as OTLP/JSON (:mod:`.otlp`), Langfuse
exports (:mod:`.langfuse`) and LangSmith exports (:mod:`.langsmith`); ``auto`` detects which (:mod:`.detect`).
Every source maps its rows to the records of :mod:`.mapping`, the one mapping to v1 events; :mod:`.run` checks,
compares with the ledger of earlier imports (:mod:`.ledger`) and appends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...workspace import StrPath, Workspace
from ..log import FsyncPolicy
from .longtable import REQUIRED, LongRow, LongTable, read_long_table
from .options import FORMATS, ConfigColumnFormat, ImportOptions, Maps, ScoreRange, load_maps
from .prices import PriceLike, Pricer
from .run import CHUNK_ROWS, ImportResult, Raced, Run
from .values import Clock

#: How a long table's ``config`` cells are read (``--config-column-format``; the name other commands use).
ConfigFormat = ConfigColumnFormat

__all__ = [
    "CHUNK_ROWS",
    "FORMATS",
    "REQUIRED",
    "ConfigFormat",
    "ImportOptions",
    "ImportResult",
    "LongRow",
    "LongTable",
    "Maps",
    "ScoreRange",
    "import_source",
    "import_table",
    "load_maps",
    "read_long_table",
]


def import_source(
    home: Workspace | StrPath | None,
    paths: Sequence[StrPath],
    options: ImportOptions | None = None,
    *,
    prices: Sequence[PriceLike] | Callable[[], Sequence[PriceLike]] = (),
    fsync: FsyncPolicy = "batch",
    progress: Callable[[int, int], None] | None = None,
) -> ImportResult:
    """Import ``paths`` (one source: a file, a database, or the files of one export) into ``home``; token counts
    become costs at ``prices`` (the home's ``fits/shipped.json`` ``prices``, or a function that reads them, called
    when a first cost needs a price: the stream stage does not read the fit's files)."""
    from .detect import open_source

    options = options or ImportOptions()
    ws = Workspace.of(home)
    clock = Clock(future=options.future)
    pricer = Pricer(prices)
    source, detected = open_source([Path(p) for p in paths], options, clock, pricer)
    try:
        result = Run(ws, source, options, fsync=fsync, progress=progress, clock=clock).execute()
    except Raced:  # another first import landed before this one's lock: again, under the lock from the start
        source, detected = open_source([Path(p) for p in paths], options, clock, pricer)
        result = Run(ws, source, options, fsync=fsync, progress=progress, clock=clock).execute()
    return result.model_copy(update={"detected": detected})


def import_table(
    home: Workspace | StrPath | None,
    path: StrPath,
    *,
    fmt: str = "long",
    rater_kind: str = "gate",
    rater_name: str | None = None,
    thread: str | None = None,
    skip_bad: bool = False,
    fsync: FsyncPolicy = "batch",
    progress: Callable[[int, int], None] | None = None,
    config_format: ConfigColumnFormat = "auto",
    **more: Any,
) -> ImportResult:
    """A long table (or another source, ``fmt``) imported with these options: the library's short form
    (``config_format`` is ``--config-column-format``)."""
    options = ImportOptions(
        config_column_format=config_format,
        fmt=fmt,  # type: ignore[arg-type]  # ImportOptions checks it
        rater_kind=rater_kind,  # type: ignore[arg-type]
        rater_name=rater_name,
        thread=thread,
        skip_bad=skip_bad,
        **more,
    )
    return import_source(home, [path], options, fsync=fsync, progress=progress)
