"""Where things live (docs/design.md, Layout): the one place that names the files of a home and the store.

A :class:`Workspace` is resolved once, at the edge (the CLI, or a library function given a path), and passed
down: the home root, the store (a local path or an object-store URI, with its storage options), the writer name
asked for, the version to read (``--as-of``) and every file name of the layout. No other module builds a path
of the home from a name (``tests/test_layout.py`` checks it).

Confinement lives here too: every path a command reads, writes or deletes goes through :meth:`Workspace.confine`,
:meth:`Workspace.open`, :meth:`Workspace.read` or :meth:`Workspace.write`, which keep it inside the workspace's
:class:`~pipeline.confine.Bounds` (the home's root and a local store's, each resolved once, so ``--store team/store``
with ``team/store -> /big/disk`` works) and refuse a symbolic link that leads out of them (exit 2); before delta-rs
touches a local table, :meth:`StoreLocation.check_table` refuses any link in it. And the home rules: what a command
may do with the folder it is given (:meth:`Workspace.check_home`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from .confine import NOFOLLOW, Bounds, atomic_write, confine, fsync_dir, open_confined, temp_beside, write_synced
from .errors import Busy, NotAHome, PipelineError

__all__ = [
    "NOFOLLOW",
    "STREAMS",
    "BacktestOut",
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
#: The temporary folders of a rebuild (``<store>/.rebuild-<time>/``, ``deadletter/.rebuild-<time>/``).
REBUILDING = ".rebuild-"
#: Names of the layout that files carry too (a JSON Schema's ``$id`` is its file name).
EVENTS_SCHEMA_FILE = "events-v1.schema.json"
TABLE_SCHEMA_FILE = "routing-table.schema.json"
STATS_SCHEMA_FILE = "stats.schema.json"

StrPath = str | os.PathLike[str]

#: A folder is a home when it holds one of these (``ratings init`` makes all of them).
MARKERS = ("streams", "fits")

#: What a command may do with the folder it is given as its home (:meth:`Workspace.check_home`): ``home`` an
#: existing home only; ``append`` also an existing empty folder it is named (``--home``, ``$RATINGS_HOME``), which
#: becomes one; ``create`` also a missing or empty folder (``import``, ``simulate --out``, ``backtest --out``); ``init``
#: any folder (``ratings init``).
HomeRule = Literal["home", "append", "create", "init"]


@dataclass(frozen=True)
class SparkScratch:
    """The folders a Spark session may write on this machine (:func:`pipeline.store.spark.session`): its SQL
    warehouse (else ``spark-warehouse`` in the current directory) and its block and spill files (else the system's
    temporary folder)."""

    warehouse: Path
    local: Path

    @classmethod
    def under(cls, root: Path) -> SparkScratch:
        return cls(root / "warehouse", root / "local")


@dataclass(frozen=True)
class StoreLocation:
    """Where the store lives: its root (as the user gave it; a local root is an absolute path), the events
    table under it, and for an object store the storage options (never shown: they may hold secrets)."""

    root: str
    local: Path | None  # the root directory of a local store (resolved once)
    storage_options: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    bounds: Bounds | None = field(default=None, repr=False, compare=False)  # the workspace's (home and store roots)

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

    def check_table(self) -> None:
        """Before delta-rs reads, writes or deletes in a local table: no symbolic link anywhere in it
        (:meth:`pipeline.confine.Bounds.check_tree`), so that nothing outside the bounds is touched through one."""
        if self.table_path is not None:
            (self.bounds or Bounds.of(self.table_path.parent)).check_tree(self.table_path)

    def at(self, local: Path) -> StoreLocation:
        """This store rooted at another local folder inside its bounds (a rebuild's new table beside the old)."""
        return StoreLocation(root=str(local), local=local, bounds=self.bounds)


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
    named: str | None = field(default=None, compare=False)  # what named the home: "--home", "$RATINGS_HOME" or None

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
        named = "--home" if home is not None else "$RATINGS_HOME" if os.environ.get("RATINGS_HOME") else None
        return cls(root, uri, dict(storage_options or {}), writer, as_of, named)

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
        if self.store_uri is None:  # the home's own store/: a link out of the home is refused (--store names one)
            self.check_folder(location.local / TABLE)  # type: ignore[operator]  # a default store is local
        return dataclasses.replace(location, bounds=self.bounds)

    @functools.cached_property
    def bounds(self) -> Bounds:
        """The roots every path of this workspace is confined to: the home, and a local store given with
        ``--store`` (its root resolved once, here)."""
        local = _local_root(self.store_uri)
        return Bounds.of(self.root) if local is None else Bounds.of(self.root).with_root(local)

    # ----------------------------------------------------------------------------------- the home rules
    def check_home(self, rule: HomeRule = "home") -> Workspace:
        """The home a command was given (:meth:`resolve`), checked against what the command may do with it.

        A home is a folder with ``streams/`` or ``fits/``. Every command needs one (``home``), except that
        ``append`` makes one of a folder that exists and is empty when it is named (``--home`` or
        ``$RATINGS_HOME``, never the current folder), ``import``, ``simulate --out`` and ``backtest --out``
        (``create``) may also create a missing folder or fill an empty one, and ``ratings init`` (``init``) makes
        a home of any folder. Anything else is :class:`NotAHome` (exit 2) with the remedy; nothing is created.
        """
        named, found, root = self.named, self, self.root
        what = f"{named} {root}" if named else f"the current folder {root}"
        if is_home(root):
            return found
        if root.exists() and not root.is_dir():
            raise NotAHome(f"{what} is not a folder: give the folder of a home")
        owner = _layout_owner(root)
        if owner is not None:  # streams/ or fits/ of a home (or below): never a home of its own
            raise NotAHome(f"{what} is inside the home {owner}, one of its folders: give --home {owner}")
        empty = root.is_dir() and not any(root.iterdir())
        if rule == "init" or (rule == "create" and (empty or not root.exists())):
            return found
        if rule == "append" and named and empty:
            return found
        if not root.exists():
            remedy = f"start one with `ratings init --home {root}`, or give the right --home"
            if rule == "append":
                remedy = f"create it (`ratings init --home {root}`), or give the right --home"
            raise NotAHome(f"no home at {what}: the folder does not exist; {remedy}")
        parent = next((p for p in root.parents if is_home(p)), None)
        where = f"; it is inside the home {parent}: give --home {parent}" if parent is not None else ""
        start = f"start one with `ratings init --home {root}`" + (
            " (or name an empty folder with --home)" if rule == "append" else ""
        )
        if rule == "create":
            raise NotAHome(
                f"{what} is not empty and not a home (no streams/ or fits/){where}; give a new or empty folder, "
                "or a home"
            )
        raise NotAHome(f"{what} is not a home (no streams/ or fits/){where or '; ' + start + ', or give --home'}")

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

    def rebuild_folders(self, stamp: str) -> tuple[Path, Path]:
        """Where ``ratings compact --rebuild`` builds the new table (``<store>/.rebuild-<time>/``, the table
        ``events/`` in it) and writes its dead letters (``deadletter/.rebuild-<time>/``) until they replace the
        old ones."""
        local = self.store.local
        if local is None:
            raise PipelineError(f"{self.store.describe()}: only a local table is rebuilt beside itself")
        return local / f"{REBUILDING}{stamp}", self.deadletter / f"{REBUILDING}{stamp}"

    def rebuilt_dead_letters(self, aside: Path, stream: str) -> Path:
        """Where a rebuild keeps the old dead letters of ``stream``: in the old table moved aside."""
        return aside / self.deadletter.name / self.dead_letters(stream).name

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
    def spark_scratch(self) -> SparkScratch:
        """What ``fit-routing --engine spark`` lets Spark write on this machine: kept inside the home."""
        return SparkScratch.under(self.fits / ".spark")

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
    def check_folder(self, folder: Path) -> None:
        """Refuse a folder (or one on the way to it) that is a symbolic link out of the bounds; nothing created."""
        self.bounds.confine(folder, create=False, directory=True)

    def confine(self, path: Path, *, create: bool = True) -> Path:
        """``path`` checked to stay inside the bounds (:meth:`~pipeline.confine.Bounds.confine`); missing
        directories created (a local store's root too: its first write makes it)."""
        self._make_store_root(path, create)
        return self.bounds.confine(path, create=create)

    def folder(self, path: Path) -> Path:
        """The folder ``path`` inside the bounds, created if missing."""
        self._make_store_root(path, True)
        return self.bounds.confine(path, directory=True)

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        """``os.open`` of a file inside the bounds, refusing symbolic links (:meth:`~pipeline.confine.Bounds.open`)."""
        self._make_store_root(path, bool(flags & os.O_CREAT))
        return self.bounds.open(path, flags, mode)

    def read(self, path: Path) -> bytes:
        """The bytes of a file inside the bounds, never read through a link."""
        return self.bounds.read(path)

    def write(self, path: Path, data: bytes) -> None:
        """:func:`atomic_write` of a file inside the bounds."""
        self._make_store_root(path, True)
        self.bounds.write(path, data)

    def remove_stale_temps(self, folder: Path) -> list[str]:
        """The temp files killed writers left in ``folder`` (:meth:`~pipeline.confine.Bounds.remove_stale_temps`)."""
        return self.bounds.remove_stale_temps(folder)

    def _make_store_root(self, path: Path, create: bool) -> None:
        """A local store given with ``--store`` outside the home is created by its first write (the home's folders
        are created by the commands)."""
        local = _local_root(self.store_uri)
        if create and local is not None and Path(path).absolute().is_relative_to(local) and not local.exists():
            local.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def lock(self, path: Path, *, busy: str | None = None) -> Iterator[None]:
        """An exclusive ``flock`` on the lock file ``path`` (created, never deleted) for the block. It waits for
        another holder; with ``busy`` it does not, and raises :class:`~pipeline.errors.Busy` (exit 3) with that
        message."""
        fd = self.open(path, os.O_RDWR | os.O_CREAT)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if busy is None else fcntl.LOCK_NB))
            except BlockingIOError:
                raise Busy(busy) from None
            yield
        finally:
            os.close(fd)  # closing releases the lock


#: The folders of a home's layout (a folder inside one of them is never a home of its own).
LAYOUT = ("streams", "quarantine", "deadletter", "store", "fits", "case-studies")


def _layout_owner(root: Path) -> Path | None:
    """The home whose layout folder ``root`` is, or lies in (``team`` for ``team/streams/x``); else None."""
    for folder in (root, *root.parents):
        if folder.name in LAYOUT and is_home(folder.parent):
            return folder.parent
    return None


def is_home(path: Path) -> bool:
    """Whether ``path`` is a home: a folder holding ``streams/`` or ``fits/``."""
    return any((Path(path) / marker).is_dir() for marker in MARKERS)


def _local_root(uri: str | None) -> Path | None:
    """The root of a local store ``uri`` names, resolved (None: no store given, an object store, or not a URI)."""
    if uri is None:
        return None
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and uri[1:2] == ":"):
        return Path(parts.path if scheme == "file" else uri).expanduser().absolute().resolve()
    return None


def _store_location(default: Path, uri: str | None, storage_options: dict[str, str]) -> StoreLocation:
    """The store ``uri`` names (``default``, the home's ``store/``, when there is none)."""
    if uri is None:
        return StoreLocation(root=str(default), local=default)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and uri[1:2] == ":"):  # a path (or file://path): resolved once
        path = _local_root(uri)
        assert path is not None
        if path.exists() and not path.is_dir():
            raise PipelineError(f"store {uri!r}: {path} is not a folder; give the folder of the store")
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


@dataclass(frozen=True)
class BacktestOut:
    """The ``--out`` directory of ``ratings backtest`` (docs/design.md, Backtest): its outputs, and the scratch
    homes of its loops under ``homes/`` (each a home of its own, its store inside it)."""

    root: Path

    @property
    def report(self) -> Path:
        """``backtest.json``: what ``--json`` prints."""
        return self.root / "backtest.json"

    @property
    def text(self) -> Path:
        """``backtest.txt``: the report for people."""
        return self.root / "backtest.txt"

    def figure(self, name: str) -> Path:
        return self.root / case_study_name(name)

    @property
    def homes(self) -> Path:
        return self.root / "homes"

    @property
    def input_home(self) -> Path:
        """Where a TABLE file is imported to be read back."""
        return self.homes / "input"

    def informed_home(self, objective: str, start: str) -> Path:
        """The full-information loop's home of (objective, start), shared by every policy and seed."""
        return self.homes / "full-information" / f"{objective}-{start}"

    def loop_home(self, policy: str, objective: str, start: str, seed: int) -> Path:
        return self.homes / "loops" / f"{policy}-{objective}-{start}" / f"seed-{seed}"
