"""Keeping every path inside its root (the home, or a local store), and writing files there safely.

:class:`pipeline.workspace.Workspace` confines every path a command reads, writes or deletes through
:func:`confine` (folders on the way checked, a symbolic link that leads out refused), opens files with
:data:`NOFOLLOW` and writes them with :func:`atomic_write` (temp file beside, fsync, rename, fsync the folder).
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from .errors import OutsideHome


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
    tmp = temp_beside(path)
    try:
        write_synced(tmp, data, os.O_CREAT | os.O_EXCL)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
