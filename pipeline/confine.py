"""Keeping every path inside its roots (the home, and a local store), and writing files there safely.

:class:`pipeline.workspace.Workspace` confines every path a command reads, writes or deletes to its
:class:`Bounds` (the home's root and a local store's, each resolved once: folders on the way checked, a symbolic
link that leads out of every root refused), opens files with :data:`NOFOLLOW` and writes them atomically (temp
file beside, fsync, rename, fsync the folder). :meth:`Bounds.check_tree` refuses any link in a tree before
delta-rs, which follows links, reads, writes or deletes there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import OutsideHome


@dataclass(frozen=True)
class Bounds:
    """The roots a command may read, write or delete in: the home, and a local store given with ``--store``.

    Each root is kept as given and resolved once (``real``), when the command starts: a path is inside the bounds
    when it lies under a root, and every symbolic link on the way leads into a root's real path. So a store given
    as ``--store team/store`` with ``team/store -> /big/disk`` works (its root is ``/big/disk``), while a link
    inside the home or the store that leads anywhere else is refused (:class:`OutsideHome`, exit 2). This is the
    one place that decides what a command may touch; the home's files, the streams, the store's files and the
    deltalake table (:meth:`check_tree` before delta-rs reads, writes or deletes there) are all checked here.
    """

    roots: tuple[tuple[Path, Path], ...]  # (as given, absolute; resolved once)

    @classmethod
    def of(cls, *roots: Path) -> Bounds:
        return cls(tuple((Path(r).absolute(), Path(r).absolute().resolve()) for r in roots))

    def with_root(self, root: Path) -> Bounds:
        """These bounds and one more root (a local store outside the home)."""
        return Bounds.of(*(given for given, _ in self.roots), root)

    @property
    def real_roots(self) -> tuple[Path, ...]:
        return tuple(real for _, real in self.roots)

    def names(self) -> str:
        """The roots for a message: ``the home H`` or ``the home H and the store S``."""
        given = [str(g) for g, _ in self.roots]
        return f"the home {given[0]}" + "".join(f" and the store {g}" for g in given[1:])

    def inside(self, real: Path) -> bool:
        """Whether a resolved path lies under one of the roots' real paths."""
        return any(real.is_relative_to(root) for root in self.real_roots)

    def _root_of(self, path: Path) -> Path | None:
        """The root ``path`` lies under (as given or as resolved), the longest if several."""
        under = [r for pair in self.roots for r in pair if path.is_relative_to(r)]
        return max(under, key=lambda r: len(r.parts)) if under else None

    def confine(self, path: Path, *, create: bool = True, directory: bool = False) -> Path:
        """``path``, checked to stay inside the bounds; its missing directories are created when ``create``.

        Raises :class:`OutsideHome` (exit 2) when ``path`` is not under a root, when a directory on the way is
        a symbolic link that resolves outside every root (a link that stays inside is harmless), or when ``path``
        itself is a symbolic link: the pipeline writes, reads and deletes only regular files of its own
        (``directory``: ``path`` is a folder, checked and created like the ones above it). Callers open the file
        with :data:`NOFOLLOW` as well, so a link created after this check is refused by the kernel.
        """
        path = Path(path).absolute()
        root = self._root_of(path)
        if root is None:
            raise OutsideHome(f"refusing {path}: it is not inside {self.names()}")
        rel = path.relative_to(root)
        if ".." in rel.parts:
            raise OutsideHome(f"refusing {path}: '..' would leave {self.names()}")
        current = root
        for part in rel.parts if directory else rel.parts[:-1]:
            current = current / part
            if current.is_symlink():
                target = current.resolve()
                if not self.inside(target):
                    raise OutsideHome(
                        f"refusing {path}: {current} is a symbolic link to {target}, outside {self.names()}; keep "
                        "the home's folders inside it (a store elsewhere is given with --store)"
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
                f"refusing {path}: it is a symbolic link (to {os.readlink(path)}); the pipeline writes, reads and "
                "deletes only regular files of its own"
            )
        return path

    def check_tree(self, top: Path) -> None:
        """Refuse a symbolic link anywhere under ``top`` (``top`` itself included) before a library that follows
        links (delta-rs) reads, writes or deletes there: a table holds only its own files and folders, so a link
        in it would let a vacuum delete, or a commit write, wherever it leads. ``top`` must be inside the bounds.
        """
        self.confine(top, create=False, directory=True)
        if not top.exists():
            return
        stack = [top]
        while stack:
            folder = stack.pop()
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        raise OutsideHome(
                            f"refusing {entry.path}: a symbolic link inside the store's table (to "
                            f"{os.readlink(entry.path)}); a table holds only its own files and folders, and a link "
                            "would let a vacuum delete, or a commit write, where it leads: put the files in its place"
                        )
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        """``os.open`` of ``path`` after :meth:`confine`, with :data:`NOFOLLOW`; a link is :class:`OutsideHome`."""
        self.confine(path, create=bool(flags & os.O_CREAT))
        try:
            return os.open(path, flags | NOFOLLOW, mode)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OutsideHome(
                    f"refusing {path}: it is a symbolic link; the pipeline writes, reads and deletes only regular "
                    "files of its own"
                ) from None
            raise

    def read(self, path: Path) -> bytes:
        """The bytes of a file inside the bounds (never through a link); :class:`FileNotFoundError` when missing."""
        fd = self.open(path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def write(self, path: Path, data: bytes) -> None:
        """:func:`atomic_write` of a file inside the bounds."""
        self.confine(path)
        _replace(path, data)

    def remove_stale_temps(self, folder: Path) -> list[str]:
        """Remove the temp files :func:`atomic_write` left in ``folder`` when its process was killed (their name,
        ``.<file>.<pid>.<8 hex>.tmp``, and a pid that no longer runs: a live writer's are kept); their names."""
        if not folder.is_dir():
            return []
        self.confine(folder, create=False, directory=True)
        removed = []
        for path in sorted(folder.iterdir()):
            match = TEMP.fullmatch(path.name)
            if match is None or path.is_symlink() or not path.is_file() or _running(int(match["pid"])):
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path.name)
        return removed


def confine(root: Path, path: Path, *, create: bool = True, directory: bool = False) -> Path:
    """``path`` checked to stay inside the home ``root`` (:meth:`Bounds.confine` of that one root)."""
    return Bounds.of(root).confine(path, create=create, directory=directory)


#: Flags that make ``os.open`` refuse a symbolic link as the last component (ELOOP) and not leak into children.
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def open_confined(root: Path, path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` of ``path`` inside the home ``root`` (:meth:`Bounds.open` of that one root)."""
    return Bounds.of(root).open(path, flags, mode)


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


def temp_beside(path: Path, tag: str = "") -> Path:
    """A hidden temporary name beside ``path`` (this process's, random): ``.<name>.<tag.><pid>.<hex>.tmp``."""
    return path.with_name(f".{path.name}.{tag + '.' if tag else ''}{os.getpid()}.{os.urandom(4).hex()}.tmp")


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
    _replace(path, data)


#: The temp files of :func:`temp_beside`: ``.<name>.[<tag>.]<pid>.<8 hex digits>.tmp`` beside the file.
TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]+)\.[0-9a-f]{8}\.tmp")


def _running(pid: int) -> bool:
    """Whether a process ``pid`` runs (a pid of another user's process counts: it may be a writer)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _replace(path: Path, data: bytes) -> None:
    """The temp file beside ``path``, written and fsync'd, renamed over it, the folder fsync'd."""
    tmp = temp_beside(path)
    try:
        write_synced(tmp, data, os.O_CREAT | os.O_EXCL)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
