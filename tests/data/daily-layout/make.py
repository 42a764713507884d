"""How ``home/`` was made: a store of the layout before files near a target size (partitioned by family and event
date), written by the pipeline of revision 8d0589c, with new events waiting in its streams. Run from the repository:

    git archive 8d0589c pipeline tests/fixtures_store.py | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/data/daily-layout/make.py tests/data/daily-layout/home

It is kept as it was written (no test regenerates it): tests/test_compact_layout.py migrates copies of it.
"""

import shutil
import sys
from pathlib import Path

from pipeline.compact import compact
from pipeline.streams.log import append
from pipeline.workspace import Workspace
from tests.fixtures_store import CONFIG, opened, rating


def day(d: int) -> list[dict]:
    events: list[dict] = []
    for i in range(10 * d, 10 * d + 4):
        attempt = {
            "id": f"A-{i}",
            "type": "task.attempted",
            "at": f"2026-01-{d:02d}T09:30:00Z",
            "task": f"T-{i}",
            "config": CONFIG,
            "status": "success",
            "cost_usd": 0.25,
        }
        events += [
            opened(i, day=d),
            attempt,
            rating(i, day=d, score=0.5 + i % 2 / 2),
            rating(i + 100, day=d, task=f"T-{i}"),
        ]
    return events


home = Path(sys.argv[1])
shutil.rmtree(home, ignore_errors=True)
append(
    home,
    day(1)
    + day(2)
    + [{"id": "X-1", "type": "rating.retracted", "at": "2026-01-02T12:00:00Z", "rating": "R-10", "reason": "typo"}],
)
with open(home / "streams" / "ratings.jsonl", "ab") as handle:
    handle.write(b'{"type":"task.rated","task":"T"}\n')  # an invalid line: a dead letter
compact(Workspace.resolve(home, writer="old-host"))
closed = {"id": "C-30", "type": "task.closed", "at": "2026-01-03T18:00:00Z", "task": "T-30", "outcome": "done"}
append(home, [*day(3), {"id": "Z-1", "type": "custom.kind", "at": "2026-01-03T08:00:00Z", "note": "kept"}, closed])
compact(home)
append(home, [*day(4), rating(40, day=4)])  # new events for the new code, and a conflict (R-40, another score)
