"""Moving a store aside: the old manifest format (v1) on the first compaction, and ``ratings compact --rebuild``.

The streams are the source of truth (docs/design.md, Storage): a store is always rebuilt from them, and what is
moved aside is kept, never deleted, so that nothing an operator might still want is lost.

- An old store (``store/_manifests/``, Parquet per family, an id index) moves to ``store.v1-<time>/`` beside
  ``store/``, with the dead letters it wrote; the first compaction then builds ``store/events/`` from the streams.
- ``--rebuild`` moves a local table to ``<store>/events.rebuilt-<time>/`` (and the dead letters beside it).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from ..errors import PipelineError
from ..workspace import TABLE, Workspace, fsync_dir

_KEEP = {".compact.lock", "writer.json", TABLE}  # what stays in store/: this home's lock and identity, the new table


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _move(ws: Workspace, source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, creating its directory (inside the home or the store: never through a link
    out of it)."""
    os.rename(source, ws.confine(target))


def _move_deadletters(ws: Workspace, aside: Path) -> None:
    if ws.deadletter.is_dir():
        for path in sorted(ws.deadletter.glob("*.jsonl")):
            _move(ws, path, aside / "deadletter" / path.name)
        fsync_dir(ws.deadletter)


def upgrade_if_old(ws: Workspace) -> list[str]:
    """Move an old manifest store out of ``store/`` (only the home's own store); a one-line note when it did."""
    if ws.store.local != ws.home_store or not (ws.home_store / "_manifests").is_dir():
        return []
    aside = ws.root / f"store.v1-{_stamp()}"
    moved = [p for p in sorted(ws.home_store.iterdir()) if p.name not in _KEEP]
    for path in moved:
        _move(ws, path, aside / path.name)
    _move_deadletters(ws, aside)
    fsync_dir(ws.home_store)
    fsync_dir(ws.root)
    return [
        f"upgraded the store: the old manifest store (format v1) moved to {aside.name}/ with its dead letters; "
        f"{ws.home_store.name}/{TABLE}/ is rebuilt from the streams"
    ]


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
    aside = table.with_name(f"{TABLE}.rebuilt-{_stamp()}")
    _move(ws, table, aside)
    _move_deadletters(ws, aside)
    fsync_dir(table.parent)
    return [f"moved the table aside to {aside} (with the dead letters); rebuilding it from the streams"]
