"""Has the home ever seen a task? (``ratings route --log --task ID`` warns when it has not.)

A dispatcher usually logs a decision right after appending the task's ``task.opened``, before any compaction, so
the uncompacted tail of the streams is read first (the bytes after what this home's writer committed; only lines that
mention the id are parsed); the store (every family with a ``task`` column) is asked only when the tail has
nothing. A task seen by neither has no event at all: a logged decision for it can never be resolved.
"""

from __future__ import annotations

import json

from ..store.table import consumed_offsets
from ..streams.log import read_lines
from ..workspace import STREAMS, Workspace

#: Families of the store whose rows name a task.
TASK_FAMILIES = ("tasks", "attempts", "ratings", "rejections", "decisions", "closures")


def task_seen(ws: Workspace, task: str) -> bool:
    """True when any event of the streams' uncompacted tail or of the store names ``task``."""
    consumed = consumed_offsets(ws)
    needle = json.dumps(task, ensure_ascii=False)[1:-1].encode("utf-8")  # the id as it appears inside a JSON string
    for stream in STREAMS:
        for line in read_lines(ws, stream, start=(consumed or {}).get(stream, 0)):
            if needle in line.raw and _names(line.raw, task):
                return True
    if consumed is None:
        return False
    from ..store import open_store

    with open_store(ws, read_only=True) as store:
        union = " UNION ALL ".join(f'SELECT 1 FROM "{f}" WHERE task = $task' for f in TASK_FAMILIES)
        return store.con.execute(f"SELECT 1 FROM ({union}) LIMIT 1", {"task": task}).fetchone() is not None


def _names(raw: bytes, task: str) -> bool:
    try:
        event = json.loads(raw)
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("task") == task
