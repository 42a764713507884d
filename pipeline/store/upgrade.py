"""Moving a store aside: the old manifest format (v1) on the first compaction, and ``ratings compact --rebuild``.

The streams are the source of truth (docs/design.md, Storage): a store is always rebuilt from them, and what is
moved aside is kept, never deleted, so that nothing an operator might still want is lost.

- An old store (``store/_manifests/``, Parquet per family, an id index) moves to ``store.v1-<time>/`` beside
  ``store/``, with the dead letters it wrote; the first compaction then builds ``store/events/`` from the streams.
- ``--rebuild`` builds a new table beside the old one and, once it is whole, moves the local table to
  ``<store>/events.rebuilt-<time>/`` (and the dead letters of the streams into it): :class:`Rebuild`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..errors import PipelineError
from ..home import STREAMS, Home, fsync_dir, write_synced
from .location import TABLE, Location

_KEEP = {".compact.lock", "writer.json", TABLE}  # what stays in store/: this home's lock and identity, the new table


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _move(home: Home, source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, creating its directory (inside the home: never through a link out of it)."""
    if target.is_relative_to(home.root):
        home.confine(target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(source, target)


def _move_deadletters(home: Home, aside: Path) -> None:
    if home.deadletter.is_dir():
        for path in sorted(home.deadletter.glob("*.jsonl")):
            _move(home, path, aside / "deadletter" / path.name)
        fsync_dir(home.deadletter)


def upgrade_if_old(home: Home, location: Location) -> list[str]:
    """Move an old manifest store out of ``store/`` (only the home's own store); a one-line note when it did."""
    if location.local != home.store or not (home.store / "_manifests").is_dir():
        return []
    aside = home.root / f"store.v1-{_stamp()}"
    moved = [p for p in sorted(home.store.iterdir()) if p.name not in _KEEP]
    for path in moved:
        _move(home, path, aside / path.name)
    _move_deadletters(home, aside)
    fsync_dir(home.store)
    fsync_dir(home.root)
    return [
        f"upgraded the store: the old manifest store (format v1) moved to {aside.name}/ with its dead letters; "
        f"{home.store.name}/{TABLE}/ is rebuilt from the streams"
    ]


_REBUILD = ".rebuild-"  # the temporary table of a rebuild: <store>/.rebuild-<time>/events, dead letters beside


@dataclass
class Rebuild:
    """``ratings compact --rebuild``: a new table built from the streams beside the old one
    (``<store>/.rebuild-<time>/events``, its dead letters in ``deadletter/.rebuild-<time>/``); only once it is
    whole (:meth:`finish`) do the old table and dead letters move aside (``<store>/events.rebuilt-<time>/``) and
    the new ones take their place. A rebuild that cannot finish (:meth:`abandon`) leaves the store as it was;
    one killed part way leaves its temporary folders, which the next rebuild removes."""

    home: Home
    location: Location  # the old table's
    stamp: str
    build: Location  # the new table's
    letters: Path  # the new dead letters' folder

    @classmethod
    def start(cls, home: Home, location: Location) -> Rebuild:
        """Check everything the rebuild will touch before touching anything, then make its temporary folders."""
        if location.table_path is None or location.local is None:
            raise PipelineError(
                f"--rebuild works on a local store; {location.describe()} is shared by other writers: rebuilding it "
                "from this home's streams would drop theirs"
            )
        location.check_table()  # the old table moves aside whole: no link in it
        home.folder(home.deadletter)  # dead letters move inside the home only (a link out of it is refused)
        for stream in STREAMS:
            home.confine(home.deadletter / f"{stream}.jsonl", create=False)
        _remove_stale(home, location)
        stamp = _stamp()
        root = location.local / f"{_REBUILD}{stamp}"
        root.mkdir()
        build = Location(home=home, root=str(root), storage_options={}, local=root, bounds=location.bounds)
        return cls(home, location, stamp, build, home.folder(home.deadletter / f"{_REBUILD}{stamp}"))

    def abandon(self) -> None:
        """Remove the new table and dead letters (this rebuild's own folders); the old ones were never moved."""
        assert self.build.local is not None
        shutil.rmtree(self.build.local, ignore_errors=True)
        shutil.rmtree(self.letters, ignore_errors=True)

    def finish(self) -> list[str]:
        """Move the old table and dead letters aside and the new ones in place; a one-line note of where."""
        table, new = self.location.table_path, self.build.table_path
        assert table is not None and new is not None and self.build.local is not None
        aside = table.with_name(f"{TABLE}.rebuilt-{self.stamp}")
        done: list[tuple[Path, Path]] = []
        try:
            if table.exists():
                _rename(table, aside, done)
            moves = [(self.home.deadletter / f"{s}.jsonl", aside / "deadletter" / f"{s}.jsonl") for s in STREAMS]
            for old, kept in moves:
                if old.exists():
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    _rename(old, kept, done)
            for stream in STREAMS:
                staged = self.letters / f"{stream}.jsonl"
                if staged.exists():
                    _rename(staged, self.home.deadletter / staged.name, done)
            _rename(new, table, done)
        except OSError:
            for source, target in reversed(done):  # put back what moved: the store as it was
                with contextlib.suppress(OSError):
                    _rename(target, source, [])
            self.abandon()
            raise
        self.build.local.rmdir()
        self.letters.rmdir()
        for folder in (table.parent, self.home.deadletter, *([aside, aside / "deadletter"] if aside.exists() else [])):
            if folder.is_dir():
                fsync_dir(folder)
        where = f"moved the old table aside to {aside} (with the dead letters)" if aside.exists() else "no old table"
        return [f"rebuilt the table from the streams; {where}"]


def _rename(source: Path, target: Path, done: list[tuple[Path, Path]]) -> None:
    """Move ``source`` to ``target`` (a copy, fsync'd, then the unlink, when they lie on two file systems)."""
    try:
        os.rename(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV or not source.is_file():
            raise
        with open(source, "rb") as handle:
            write_synced(target, handle.read(), os.O_CREAT | os.O_EXCL)
        source.unlink()
    done.append((source, target))


def _remove_stale(home: Home, location: Location) -> None:
    """The temporary folders of rebuilds killed part way (this one holds the home's compaction lock)."""
    assert location.local is not None
    for folder in (location.local, home.deadletter):
        if folder.is_dir():
            for stale in sorted(folder.glob(f"{_REBUILD}*")):
                if stale.is_dir() and not stale.is_symlink():
                    location.bounds.check_tree(stale)  # no link in it: nothing outside is removed
                    shutil.rmtree(stale)
