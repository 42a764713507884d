"""Fixtures of the store area: event factories and a snapshot of a whole store's content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CONFIG = {"cli": "claude-code", "route": "anthropic", "model": "opus", "effort": "high"}


def rating(i: int, *, task: str | None = None, score: float = 1.0, day: int = 1, **extra: Any) -> dict[str, Any]:
    """A valid ``task.rated`` event with id ``R-<i>``."""
    return {
        "id": f"R-{i}",
        "type": "task.rated",
        "at": f"2026-01-{day:02d}T10:00:{i % 60:02d}Z",
        "task": task or f"T-{i}",
        "config": CONFIG,
        "rater": {"kind": "gate", "name": "pytest"},
        "score": score,
        **extra,
    }


def opened(i: int, *, day: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"O-{i}",
        "type": "task.opened",
        "at": f"2026-01-{day:02d}T09:00:00Z",
        "task": f"T-{i}",
        "region": "implement",
        **extra,
    }


def store_snapshot(home: Path) -> dict[str, Any]:
    """Every view's rows ordered by id, the event counts and the dead letters: equal snapshots, equal stores."""
    from pipeline.families import VIEWS
    from pipeline.store import open_store

    with open_store(home) as store:
        views = {v: store.con.execute(f'SELECT * FROM "{v}" ORDER BY id').fetchall() for v in VIEWS}
        counts = store.event_counts()
    letters = {p.name: p.read_bytes() for p in sorted((home / "deadletter").glob("*.jsonl"))}
    return {"views": views, "counts": counts, "deadletter": letters}


@pytest.fixture
def snapshot():
    return store_snapshot


def table_version(home: Path) -> int | None:
    """The newest version of the home's events table (None when there is none)."""
    from pipeline.store.location import resolve
    from pipeline.store.table import open_table

    table = open_table(resolve(home))
    return table.version() if table is not None else None


def live_files(home: Path, family: str | None = None) -> list[Path]:
    """The data files the newest version lists (of one family, or all)."""
    from pipeline.store import open_store

    with open_store(home) as store:
        return [Path(f) for f in store.files(family)]
