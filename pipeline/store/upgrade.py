"""Moving a table aside for ``ratings compact --rebuild`` (an old manifest store: :mod:`pipeline.compat`).

The streams are the source of truth (docs/design.md, Storage): a store is always rebuilt from them, and what is
moved aside is kept, never deleted, so that nothing an operator might still want is lost. ``--rebuild`` moves a
local table to ``<store>/events.rebuilt-<time>/`` (and the dead letters beside it).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import PipelineError
from ..utc import stamp
from ..workspace import Workspace, fsync_dir


def move(ws: Workspace, source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, creating its directory (inside the home or the store: never through a link
    out of it)."""
    os.rename(source, ws.confine(target))


def move_deadletters(ws: Workspace, aside: Path) -> None:
    if ws.deadletter.is_dir():
        for path in sorted(ws.deadletter.glob("*.jsonl")):
            move(ws, path, aside / ws.deadletter.name / path.name)
        fsync_dir(ws.deadletter)


def move_aside_for_rebuild(ws: Workspace) -> list[str]:
    """Move a local table (and the dead letters) aside so that the compaction rebuilds it from the streams."""
    location = ws.store
    if location.table_path is None:
        raise PipelineError(
            f"--rebuild works on a local store; {location.describe()} is shared by other writers: rebuilding it "
            "from this home's streams would drop theirs"
        )
    table = location.table_path
    if not table.exists():
        return [f"nothing to move aside: {table} does not exist; building it from the streams"]
    aside = ws.rebuilt_aside(stamp())
    move(ws, table, aside)
    move_deadletters(ws, aside)
    fsync_dir(table.parent)
    return [f"moved the table aside to {aside} (with the dead letters); rebuilding it from the streams"]
