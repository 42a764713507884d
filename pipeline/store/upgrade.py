"""``ratings compact --rebuild`` (and moving an old manifest store aside: :mod:`pipeline.compat`).

The streams are the source of truth (docs/design.md, Storage): a store is always rebuilt from them, and what is
moved aside is kept, never deleted, so that nothing an operator might still want is lost. A rebuild builds the new
table beside the old one and, once it is whole, moves the local table to ``<store>/events.rebuilt-<time>/`` (and
the dead letters of the streams into it): :class:`Rebuild`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ..errors import PipelineError
from ..utc import stamp
from ..workspace import REBUILDING, STREAMS, StoreLocation, Workspace, fsync_dir, write_synced


def move(ws: Workspace, source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, creating its directory (inside the home or the store: never through a link
    out of it)."""
    os.rename(source, ws.confine(target))


def move_deadletters(ws: Workspace, aside: Path) -> None:
    if ws.deadletter.is_dir():
        for path in sorted(ws.deadletter.glob("*.jsonl")):
            move(ws, path, aside / ws.deadletter.name / path.name)
        fsync_dir(ws.deadletter)


T = TypeVar("T")
_REBUILD = ".rebuild-"  # the temporary table of a rebuild: <store>/.rebuild-<time>/events, dead letters beside


@dataclass
class Rebuild:
    """``ratings compact --rebuild``: a new table built from the streams beside the old one
    (``<store>/.rebuild-<time>/events``, its dead letters in ``deadletter/.rebuild-<time>/``); only once it is
    whole (:meth:`finish`) do the old table and dead letters move aside (``<store>/events.rebuilt-<time>/``) and
    the new ones take their place. A rebuild that cannot finish (:meth:`abandon`) leaves the store as it was;
    one killed part way leaves its temporary folders, which the next rebuild removes."""

    ws: Workspace
    location: StoreLocation  # the old table's
    stamp: str
    build: StoreLocation  # the new table's
    letters: Path  # the new dead letters' folder

    @classmethod
    def start(cls, ws: Workspace) -> Rebuild:
        """Check everything the rebuild will touch before touching anything, then make its temporary folders."""
        location = ws.store
        if location.table_path is None or location.local is None:
            raise PipelineError(
                f"--rebuild works on a local store; {location.describe()} is shared by other writers: rebuilding it "
                "from this home's streams would drop theirs"
            )
        location.check_table()  # the old table moves aside whole: no link in it
        ws.folder(ws.deadletter)  # dead letters move inside the home only (a link out of it is refused)
        for stream in STREAMS:
            ws.confine(ws.dead_letters(stream), create=False)
        _remove_stale(ws, location)
        when = stamp()
        root, letters = ws.rebuild_folders(when)
        return cls(ws, location, when, location.at(ws.folder(root)), ws.folder(letters))

    @staticmethod
    def around(rebuild: Rebuild | None, build: Callable[[], T]) -> tuple[T, list[str]]:
        """Run ``build`` (the compaction, of the new table when ``rebuild``) and finish the rebuild; abandon it when
        ``build`` fails (the old table and dead letters were never moved: the store is as it was). Its result and
        the notes."""
        if rebuild is None:
            return build(), []
        try:
            out = build()
        except BaseException:
            rebuild.abandon()
            raise
        return out, rebuild.finish()

    def abandon(self) -> None:
        """Remove the new table and dead letters (this rebuild's own folders); the old ones were never moved."""
        assert self.build.local is not None
        shutil.rmtree(self.build.local, ignore_errors=True)
        shutil.rmtree(self.letters, ignore_errors=True)

    def finish(self) -> list[str]:
        """Move the old table and dead letters aside and the new ones in place; a one-line note of where."""
        table, new = self.location.table_path, self.build.table_path
        assert table is not None and new is not None and self.build.local is not None
        aside = self.ws.rebuilt_aside(self.stamp)
        done: list[tuple[Path, Path]] = []
        try:
            if table.exists():
                _rename(table, aside, done)
            moves = [(self.ws.dead_letters(s), self.ws.rebuilt_dead_letters(aside, s)) for s in STREAMS]
            for old, kept in moves:
                if old.exists():
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    _rename(old, kept, done)
            for stream in STREAMS:
                staged = self.letters / self.ws.dead_letters(stream).name
                if staged.exists():
                    _rename(staged, self.ws.deadletter / staged.name, done)
            _rename(new, table, done)
        except OSError:
            for source, target in reversed(done):  # put back what moved: the store as it was
                with contextlib.suppress(OSError):
                    _rename(target, source, [])
            self.abandon()
            raise
        self.build.local.rmdir()
        self.letters.rmdir()
        kept = self.ws.rebuilt_dead_letters(aside, STREAMS[0]).parent
        for folder in (table.parent, self.ws.deadletter, *([aside, kept] if aside.exists() else [])):
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


def _remove_stale(ws: Workspace, location: StoreLocation) -> None:
    """The temporary folders of rebuilds killed part way (this one holds the home's compaction lock)."""
    assert location.local is not None
    for folder in (location.local, ws.deadletter):
        if folder.is_dir():
            for stale in sorted(folder.glob(f"{REBUILDING}*")):
                if stale.is_dir() and not stale.is_symlink():
                    ws.bounds.check_tree(stale)  # no link in it: nothing outside is removed
                    shutil.rmtree(stale)
