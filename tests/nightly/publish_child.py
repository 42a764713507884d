"""A fit that SIGKILLs itself at one publishing write (run as a child process by test_publish.py).

``python publish_child.py HOME N WHEN``: the N-th atomic write under ``fits/`` or ``case-studies/`` kills the
process ``before-rename`` (its temp file written and fsync'd, not renamed) or ``after-rename`` (renamed and the
directory fsync'd). Compaction and the lock file are not publishing writes and are not counted.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pipeline.confine as home_module
from pipeline.nightly.job import run_fit
from pipeline.nightly.options import FitOptions

HOME, N, WHEN = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
written = [0]  # publishing writes so far
write_synced, fsync_dir = home_module.write_synced, home_module.fsync_dir


def publishing(path: Path) -> bool:
    rel = path.relative_to(HOME).parts
    return rel[0] in ("fits", "case-studies")


def counted_write(path: Path, data: bytes, flags: int) -> None:
    write_synced(path, data, flags)
    if publishing(path):
        written[0] += 1
        if WHEN == "before-rename" and written[0] == N:
            os.kill(os.getpid(), signal.SIGKILL)


def counted_fsync_dir(path: Path) -> None:
    fsync_dir(path)
    if WHEN == "after-rename" and written[0] == N and publishing(path / "x"):
        os.kill(os.getpid(), signal.SIGKILL)


home_module.write_synced = counted_write
home_module.fsync_dir = counted_fsync_dir
run_fit(HOME, FitOptions(prior_source="shipped", prior_weight=1, exploration=0.0, half_life_days="inf"))
print(f"finished after {written[0]} publishing write(s)")
