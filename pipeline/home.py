"""Where a home keeps things (docs/design.md, Layout): one place that knows the layout."""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import OutsideHome, PipelineError

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
    def fits(self) -> Path:
        return self.root / "fits"

    @property
    def case_studies(self) -> Path:
        return self.root / "case-studies"

    def case_study(self, name: str) -> Path:
        return self.case_studies / case_study_name(name)

    def confine(self, path: Path, *, create: bool = True) -> Path:
        """``path`` checked to stay inside this home (:func:`confine`); missing directories created."""
        return confine(self.root, path, create=create)

    def folder(self, path: Path) -> Path:
        """The folder ``path`` inside this home, created if missing (:func:`confine` with ``directory``)."""
        return confine(self.root, path, directory=True)

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        """``os.open`` of a file inside this home, refusing symbolic links (:func:`open_confined`)."""
        return open_confined(self.root, path, flags, mode)

    def write(self, path: Path, data: bytes) -> None:
        """:func:`atomic_write` of a file inside this home."""
        atomic_write(path, data, root=self.root)


def case_study_name(name: str) -> str:
    """``name`` if it names one directory under ``case-studies/``; else :class:`PipelineError` (exit 2).

    Without this check ``--case-study ../../x`` would write stats.json and the page outside the home.
    """
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise PipelineError(
            f"case study {name!r}: a name is one directory under case-studies/ (no '/', not '.' or '..')"
        )
    return name


def confine(root: Path, path: Path, *, create: bool = True, directory: bool = False) -> Path:
    """``path``, checked to stay inside the home ``root``; its missing directories are created when ``create``.

    Raises :class:`OutsideHome` (exit 2) when ``path`` is not under ``root``, when a directory between them is a
    symbolic link that resolves outside ``root`` (a link that stays inside is harmless), or when ``path`` itself
    is a symbolic link: the pipeline writes and reads as streams only regular files of its own (``directory``:
    ``path`` is a folder, checked and created like the ones above it). ``root`` may
    itself be a symbolic link (a symlinked ``--home`` is fine). Callers open the file with :data:`NOFOLLOW`
    as well, so a link created after this check is refused by the kernel.
    """
    root = Path(root).absolute()
    path = Path(path).absolute()
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise OutsideHome(f"refusing {path}: it is not inside the home {root}") from None
    if ".." in rel.parts:
        raise OutsideHome(f"refusing {path}: '..' would leave the home {root}")
    real_root = root.resolve()
    current = root
    for part in rel.parts if directory else rel.parts[:-1]:
        current = current / part
        if current.is_symlink():
            target = current.resolve()
            if not target.is_relative_to(real_root):
                raise OutsideHome(
                    f"refusing {path}: {current} is a symbolic link to {target}, outside the home "
                    f"{root}; keep the home's folders inside it (a store elsewhere is configuration)"
                )
        elif not current.exists():
            if not create:
                break
            with contextlib.suppress(FileExistsError):  # created by another process meanwhile: checked below
                current.mkdir(mode=0o755)
            if current.is_symlink():
                raise OutsideHome(f"refusing {path}: {current} became a symbolic link while it was being created")
        if current.exists() and not current.is_dir():
            raise OutsideHome(f"refusing {path}: {current} is not a directory")
    if path.is_symlink():
        raise OutsideHome(
            f"refusing {path}: it is a symbolic link (to {os.readlink(path)}); the pipeline writes "
            "and reads as streams only regular files inside the home"
        )
    return path


#: Flags that make ``os.open`` refuse a symbolic link as the last component (ELOOP) and not leak into children.
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def open_confined(root: Path, path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of ``path`` after :func:`confine`, with :data:`NOFOLLOW`; a symbolic link is :class:`OutsideHome`."""
    confine(root, path, create=bool(flags & os.O_CREAT))
    try:
        return os.open(path, flags | NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutsideHome(
                f"refusing {path}: it is a symbolic link; the pipeline writes and reads as streams "
                "only regular files inside the home"
            ) from None
        raise


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes, flags: int) -> None:
    """Open ``path`` with ``O_WRONLY | flags`` (never following a symbolic link), write all of ``data`` (finishing
    short writes), fsync, close."""
    fd = os.open(path, os.O_WRONLY | flags | NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, root: Path | None = None) -> None:
    """Write ``data`` to a temp file beside ``path``, fsync it, rename it over ``path``, fsync the directory.

    With ``root`` (the home), ``path`` must stay inside it (:func:`confine`). The temp file is created
    exclusively (a planted file or link in its place is an error, never followed), and the rename replaces a
    link at ``path`` rather than writing through it.
    """
    if root is not None:
        confine(root, path)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        write_synced(tmp, data, os.O_CREAT | os.O_EXCL)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
