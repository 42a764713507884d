"""The old manifest store (format v1: ``store/_manifests/``, Parquet per family, an id index), moved aside on the
first compaction so that ``store/events/`` is rebuilt from the streams (docs/design.md, Storage). May be dropped
in 0.2.0 (:mod:`pipeline.compat`): a store of that format is then rebuilt after ``ratings compact --rebuild``.

The old store moves to ``store.v1-<time>/`` beside ``store/`` with the dead letters it wrote; what is moved is
kept, never deleted.
"""

from __future__ import annotations

from ..store.upgrade import move, move_deadletters
from ..utc import stamp
from ..workspace import TABLE, Workspace, fsync_dir

#: The folder that marks a store of format v1.
MANIFESTS = "_manifests"


def upgrade(ws: Workspace) -> list[str]:
    """Move an old manifest store out of ``store/`` (only the home's own store); a one-line note when it did."""
    if ws.store.local != ws.home_store or not (ws.home_store / MANIFESTS).is_dir():
        return []
    aside = ws.root / f"store.v1-{stamp()}"
    keep = {ws.compact_lock.name, ws.writer_file.name, TABLE}  # this home's lock and identity, the new table
    moved = [p for p in sorted(ws.home_store.iterdir()) if p.name not in keep]
    for path in moved:
        move(ws, path, aside / path.name)
    move_deadletters(ws, aside)
    fsync_dir(ws.home_store)
    fsync_dir(ws.root)
    return [
        f"upgraded the store: the old manifest store (format v1) moved to {aside.name}/ with its dead letters; "
        f"{ws.home_store.name}/{TABLE}/ is rebuilt from the streams"
    ]
