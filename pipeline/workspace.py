"""Where things live (docs/design.md, Layout): the one place that names the files of a home and the store.

A :class:`Workspace` is resolved once, at the edge (the CLI, or a library function given a path), and passed
down: the home root, the store (a local path or an object-store URI, with its storage options), the writer name
asked for, the version to read (``--as-of``) and every file name of the layout. No other module builds a path
of the home from a name (``tests/test_layout.py`` checks it).

Confinement lives here too: every path a command reads, writes or deletes goes through :meth:`Workspace.confine`,
:meth:`Workspace.open` or :meth:`Workspace.write`, which keep it inside the home, or inside a local store that
lies outside the home, and refuse a symbolic link that leads out (exit 2).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from .confine import NOFOLLOW, atomic_write, confine, fsync_dir, open_confined, temp_beside, write_synced
from .errors import PipelineError, StoreConflict

__all__ = [
    "NOFOLLOW",
    "STREAMS",
    "StoreLocation",
    "StrPath",
    "Workspace",
    "atomic_write",
    "case_study_name",
    "confine",
    "fsync_dir",
    "open_confined",
    "parse_storage_options",
    "temp_beside",
    "write_synced",
]

STREAMS = ("tasks", "ratings")

#: Object-store schemes delta-rs writes to (S3 and compatible, Google Cloud Storage, Azure).
REMOTE_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "adl"})
#: The events table under the store root, and Delta's log inside a table.
TABLE = "events"
DELTA_LOG = "_delta_log"
#: Names of the layout that files carry too (a JSON Schema's ``$id`` is its file name).
EVENTS_SCHEMA_FILE = "events-v1.schema.json"
TABLE_SCHEMA_FILE = "routing-table.schema.json"
STATS_SCHEMA_FILE = "stats.schema.json"

StrPath = str | os.PathLike[str]


@dataclass(frozen=True)
class StoreLocation:
    """Where the store lives: its root (as the user gave it; a local root is an absolute path), the events
    table under it, and for an object store the storage options (never shown: they may hold secrets)."""

    root: str
    local: Path | None  # the root directory of a local store
    storage_options: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def table_uri(self) -> str:
        return str(self.local / TABLE) if self.local is not None else f"{self.root.rstrip('/')}/{TABLE}"

    @property
    def table_path(self) -> Path | None:
        """The local table directory (None for an object store)."""
        return self.local / TABLE if self.local is not None else None

    @property
    def options(self) -> dict[str, str] | None:
        """Storage options for delta-rs (None for a local store)."""
        return dict(self.storage_options) if self.local is None else None

    def describe(self) -> str:
        """The store's name for messages: its URI, never its options."""
        return self.table_uri


@dataclass(frozen=True)
class Workspace:
    """A home and its store: ``streams/``, ``quarantine/``, ``deadletter/``, ``store/``, ``fits/``,
    ``case-studies/`` (and ``imports/`` once ``ratings import`` ran) under :attr:`root`; the events table at
    :attr:`store` (``<root>/store`` unless ``--store``)."""

    root: Path
    store_uri: str | None = None  # --store (or $RATINGS_STORE): None for <root>/store
    storage_options: dict[str, str] = field(default_factory=dict, repr=False, compare=False)  # may hold secrets
    writer: str | None = None  # the writer name asked for (--writer); store.writer resolves this home's
    as_of: str | None = None  # the table version (digits) or time (RFC 3339 or a date) to read

    # ----------------------------------------------------------------------------------- resolving, once
    @classmethod
    def resolve(
        cls,
        home: StrPath | None = None,
        *,
        store: str | None = None,
        storage_options: dict[str, str] | None = None,
        writer: str | None = None,
        as_of: str | None = None,
    ) -> Workspace:
        """``home`` (else ``$RATINGS_HOME``, else the current directory) with the store ``store`` (else
        ``$RATINGS_STORE``, else ``<home>/store``): a local path, ``file://`` path or object-store URI."""
        root = Path(home if home is not None else os.environ.get("RATINGS_HOME") or ".").absolute()
        uri = store or os.environ.get("RATINGS_STORE") or None
        return cls(root, uri, dict(storage_options or {}), writer, as_of)

    @classmethod
    def of(cls, home: Workspace | StrPath | None) -> Workspace:
        """The edge of a library function: a workspace as it is, a path (or None) resolved with the defaults."""
        return home if isinstance(home, Workspace) else cls.resolve(home)

    @functools.cached_property
    def store(self) -> StoreLocation:
        """Where the events table lives, resolved on first use (a command that never reads the store never
        checks it). A URI with an unknown scheme is bad input (exit 2); a local store inside the home whose
        folder is a symbolic link out of it is refused (:class:`~pipeline.errors.OutsideHome`)."""
        location = _store_location(self.home_store, self.store_uri, self.storage_options)
        if location.local is not None and location.local.is_relative_to(self.root):
            self.check_folder(location.local / TABLE)
        return location

    # ----------------------------------------------------------------------------------- the layout
    @property
    def folders(self) -> tuple[Path, ...]:
        """The folders ``ratings init`` creates, in the order it reports them (``store/`` appears with the first
        compaction)."""
        return (self.streams, self.quarantine, self.deadletter, self.fits, self.case_studies)

    @property
    def streams(self) -> Path:
        return self.root / "streams"

    def stream(self, name: str) -> Path:
        return self.streams / f"{name}.jsonl"

    def stream_lock(self, name: str) -> Path:
        return self.streams / f".{name}.lock"

    @property
    def events_schema(self) -> Path:
        return self.streams / EVENTS_SCHEMA_FILE

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    def quarantined(self, stream: str, offset: int, unique: str, kind: str) -> Path:
        """Where the bytes of ``stream`` from ``offset`` that a recovery moved out go (``kind``: fragment, batch)."""
        return self.quarantine / f"{stream}.{offset:020d}.{unique}.{kind}"

    @property
    def deadletter(self) -> Path:
        return self.root / "deadletter"

    def dead_letters(self, stream: str) -> Path:
        """The invalid lines and id conflicts compaction found in ``stream``."""
        return self.deadletter / f"{stream}.jsonl"

    def import_dead_letters(self, source: Path) -> Path:
        """The rows ``ratings import --skip-bad`` left out of the file ``source``."""
        return self.deadletter / f"import-{source.name}.jsonl"

    @property
    def imports(self) -> Path:
        """What ``ratings import`` keeps between runs: its ledger, its lock, the spool of a running import."""
        return self.root / "imports"

    @property
    def import_lock(self) -> Path:
        return self.imports / ".import.lock"

    def import_spool(self, unique: str) -> Path:
        """Where a running import spools its mapped chunks (deleted at its end; a stale one at the next)."""
        return self.imports / f".spool-{unique}.tmp"

    def import_spools(self) -> list[Path]:
        """The spools left by imports that crashed."""
        return sorted(self.imports.glob(".spool-*.tmp")) if self.imports.is_dir() else []

    @property
    def import_ledger(self) -> Path:
        """The ledger: what earlier imports appended, per source record (docs/design.md, Imports)."""
        return self.imports / "ledger"

    def ledger_run(self, namespace: str, n: int) -> Path:
        """The ``n``-th run of the ledger of one source format."""
        return self.import_ledger / f"{namespace}.{n:08d}.npy"

    @property
    def home_store(self) -> Path:
        """The home's ``store/`` folder: the default store root, and this home's writer file and compaction
        lock also when the store lives elsewhere."""
        return self.root / "store"

    @property
    def writer_file(self) -> Path:
        return self.home_store / "writer.json"

    @property
    def compact_lock(self) -> Path:
        return self.home_store / ".compact.lock"

    def rebuilt_aside(self, stamp: str) -> Path:
        """Where ``ratings compact --rebuild`` moves a local table (beside it, named by the time)."""
        table = self.store.table_path
        if table is None:
            raise PipelineError(f"{self.store.describe()}: only a local table is moved aside")
        return table.with_name(f"{TABLE}.rebuilt-{stamp}")

    @property
    def store_in_home(self) -> bool:
        """Whether the store lies inside the home (a local store under the home root)."""
        return self.store.local is not None and self.store.local.is_relative_to(self.root)

    @property
    def fits(self) -> Path:
        return self.root / "fits"

    @property
    def shipped(self) -> Path:
        return self.fits / "shipped.json"

    @property
    def table(self) -> Path:
        return self.fits / "routing-table.json"

    @property
    def table_schema(self) -> Path:
        return self.fits / TABLE_SCHEMA_FILE

    @property
    def history(self) -> Path:
        return self.fits / "history"

    def history_of(self, version: str) -> Path:
        """The copy of the table ``version`` in the history."""
        return self.history / f"{version}.json"

    @property
    def pin(self) -> Path:
        return self.fits / "pin.json"

    @property
    def fit_lock(self) -> Path:
        return self.fits / ".fit.lock"

    @property
    def case_studies(self) -> Path:
        return self.root / "case-studies"

    @property
    def stats_schema(self) -> Path:
        return self.case_studies / STATS_SCHEMA_FILE

    def case_study(self, name: str) -> Path:
        return self.case_studies / case_study_name(name)

    def stats(self, name: str) -> Path:
        """A case study's ``stats.json``."""
        return self.case_study(name) / "stats.json"

    def page(self, name: str, file: str) -> Path:
        """A file of a case study's page (``index.html``, ``README.md``, a figure): one name, no folders."""
        return self.case_study(name) / case_study_name(file)

    @property
    def truth(self) -> Path:
        """Where ``ratings simulate`` writes the truth behind its data by default (never read by the fit)."""
        return self.root / "truth.json"

    def relative(self, path: Path) -> str:
        """``path`` relative to the home for messages and records (as it is when it lies outside)."""
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)

    # ----------------------------------------------------------------------------------- confinement
    def _root_of(self, path: Path, *, create: bool = False) -> Path:
        """The root ``path`` is confined to: the home, or for the files of a local store outside it, that store
        (created when ``create``: the home's folders are created by the commands, a store's root by its first
        write)."""
        path = Path(path).absolute()
        if self.store_uri is None or path.is_relative_to(self.root):
            return self.root
        local = self.store.local
        if local is None or not path.is_relative_to(local):
            return self.root
        if create:
            local.mkdir(parents=True, exist_ok=True)
        return local

    def check_folder(self, folder: Path) -> None:
        """Refuse a folder (or one on the way to it) that is a symbolic link out of the home; nothing created."""
        confine(self._root_of(folder), folder / "-", create=False)  # "-": the folders up to it, not a file

    def confine(self, path: Path, *, create: bool = True) -> Path:
        """``path`` checked to stay inside this home (or its local store) (:func:`confine`); missing directories
        created."""
        return confine(self._root_of(path, create=create), path, create=create)

    def folder(self, path: Path) -> Path:
        """The folder ``path`` inside this home, created if missing (:func:`confine` with ``directory``)."""
        return confine(self._root_of(path, create=True), path, directory=True)

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        """``os.open`` of a file inside this home, refusing symbolic links (:func:`open_confined`)."""
        return open_confined(self._root_of(path, create=bool(flags & os.O_CREAT)), path, flags, mode)

    def write(self, path: Path, data: bytes) -> None:
        """:func:`atomic_write` of a file inside this home."""
        atomic_write(path, data, root=self._root_of(path, create=True))

    @contextlib.contextmanager
    def lock(self, path: Path, *, busy: str | None = None) -> Iterator[None]:
        """An exclusive ``flock`` on the lock file ``path`` (created, never deleted) for the block. It waits for
        another holder; with ``busy`` it does not, and raises :class:`StoreConflict` with that message."""
        fd = self.open(path, os.O_RDWR | os.O_CREAT)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if busy is None else fcntl.LOCK_NB))
            except BlockingIOError:
                raise StoreConflict(busy) from None
            yield
        finally:
            os.close(fd)  # closing releases the lock


def _store_location(default: Path, uri: str | None, storage_options: dict[str, str]) -> StoreLocation:
    """The store ``uri`` names (``default``, the home's ``store/``, when there is none)."""
    if uri is None:
        return StoreLocation(root=str(default), local=default)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and uri[1:2] == ":"):  # a path (or file://path)
        path = Path(parts.path if scheme == "file" else uri).expanduser().absolute()
        return StoreLocation(root=str(path), local=path)
    if scheme not in REMOTE_SCHEMES:
        raise PipelineError(
            f"store {uri!r}: unknown scheme {scheme!r}; give a local path or s3://, gs://, az:// (or abfss://) URI"
        )
    if not parts.netloc:
        raise PipelineError(f"store {uri!r}: no bucket or container after {scheme}://")
    return StoreLocation(root=uri.rstrip("/"), local=None, storage_options=dict(storage_options))


def parse_storage_options(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings to a dict; a pair without ``=`` or with an empty key is bad input (exit 2)."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PipelineError(f"--storage-option {key.strip() or pair!r}: expected KEY=VALUE")
        options[key.strip()] = value
    return options


def case_study_name(name: str) -> str:
    """``name`` if it names one directory under ``case-studies/``; else :class:`PipelineError` (exit 2).

    Without this check ``--case-study ../../x`` would write stats.json and the page outside the home.
    """
    if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise PipelineError(
            f"case study {name!r}: a name is one directory under case-studies/ (no '/', not '.' or '..')"
        )
    return name
