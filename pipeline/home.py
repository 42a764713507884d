"""Where a home keeps things (DESIGN 2): one place that knows the layout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import PipelineError

STREAMS = ("tasks", "ratings")


@dataclass(frozen=True)
class Home:
    """A home directory: ``streams/``, ``quarantine/``, ``deadletter/``, ``store/``, ``fits/``, ``case-studies/``."""

    root: Path

    @classmethod
    def resolve(cls, home: str | os.PathLike | Home | None = None) -> Home:
        """``--home`` if given, else ``$RATINGS_HOME``, else the current directory."""
        if isinstance(home, Home):
            return home
        chosen = home if home is not None else os.environ.get("RATINGS_HOME") or "."
        return cls(Path(chosen).absolute())

    @property
    def streams(self) -> Path:
        return self.root / "streams"

    def stream(self, name: str) -> Path:
        return self.streams / f"{name}.jsonl"

    def stream_lock(self, name: str) -> Path:
        return self.streams / f".{name}.lock"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @property
    def deadletter(self) -> Path:
        return self.root / "deadletter"

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def manifests(self) -> Path:
        return self.store / "_manifests"

    @property
    def fits(self) -> Path:
        return self.root / "fits"

    @property
    def case_studies(self) -> Path:
        return self.root / "case-studies"

    def case_study(self, name: str) -> Path:
        return self.case_studies / case_study_name(name)


def case_study_name(name: str) -> str:
    """``name`` if it names one directory under ``case-studies/``; else :class:`PipelineError` (exit 2).

    Without this check ``--case-study ../../x`` would write stats.json and the page outside the home.
    """
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise PipelineError(
            f"case study {name!r}: a name is one directory under case-studies/ (no '/', not '.' or '..')"
        )
    return name


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes, flags: int) -> None:
    """Open ``path`` with ``O_WRONLY | flags``, write all of ``data`` (finishing short writes), fsync, close."""
    fd = os.open(path, os.O_WRONLY | flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync it, rename it over ``path``, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write_synced(tmp, data, os.O_CREAT | os.O_TRUNC)
    os.replace(tmp, path)
    fsync_dir(path.parent)
