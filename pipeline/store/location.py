"""Where the store lives: a local path (default ``<home>/store``) or an object store URI, and how to reach it.

``--store URI`` (or ``$RATINGS_STORE``) names the store's root; the events table is ``<root>/events``.
Credentials and endpoints come from the standard environment variables that delta-rs reads
(``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_ACCOUNT_NAME``,
...) and from ``--storage-option KEY=VALUE``. Option values are never printed, logged or recorded: only the
URI is (docs/design.md, Storage).

The CLI sets the configuration once per command with :func:`configured`; library callers that pass nothing
(the fit calls ``open_store(home)`` and ``compact(home)``) get it from there, else from the environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from ..errors import PipelineError
from ..home import Bounds, Home

#: Object-store schemes delta-rs writes to (S3 and compatible, Google Cloud Storage, Azure).
REMOTE_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "adl"})
TABLE = "events"


class StoreConfig(BaseModel):
    """What the user said about the store: ``--store``, ``--storage-option``, ``--writer``, ``--as-of``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    uri: str | None = None
    storage_options: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold secrets: never shown
    writer: str | None = None
    as_of: str | None = None  # a table version (digits) or a time (RFC 3339 or a date)


_CONFIG: ContextVar[StoreConfig | None] = ContextVar("store_config", default=None)


@contextmanager
def configured(config: StoreConfig) -> Iterator[None]:
    """Make ``config`` the store configuration of everything called inside (the CLI wraps each command)."""
    token = _CONFIG.set(config)
    try:
        yield
    finally:
        _CONFIG.reset(token)


def current_config() -> StoreConfig:
    return _CONFIG.get() or StoreConfig()


def parse_storage_options(pairs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings to a dict; a pair without ``=`` or with an empty key is bad input (exit 2)."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise PipelineError(f"--storage-option {key.strip() or pair!r}: expected KEY=VALUE")
        options[key.strip()] = value
    return options


@dataclass(frozen=True)
class Location:
    """A resolved store: its root URI, the events table's URI, and for a local store the paths and the bounds.

    A local store's root is resolved once, here: every path the store's commands read, write or delete is then
    checked against the home and that root (:class:`pipeline.home.Bounds`), so ``--store team/store`` with
    ``team/store -> /big/disk`` works while a link inside either that leads elsewhere is refused.
    """

    home: Home
    root: str  # as the user gave it (local: the resolved absolute path)
    storage_options: dict[str, str] = field(repr=False, compare=False)
    local: Path | None  # the root directory of a local store (resolved once)
    bounds: Bounds = field(repr=False, compare=False)  # the home and the local store's root

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
        (:meth:`pipeline.home.Bounds.check_tree`), so that nothing outside the bounds is touched through one."""
        if self.table_path is not None:
            self.bounds.check_tree(self.table_path)


def resolve(home: str | os.PathLike | Home | None = None, config: StoreConfig | None = None) -> Location:
    """The store of ``home`` under ``config`` (default: :func:`configured`'s, then ``$RATINGS_STORE``)."""
    home = Home.resolve(home)
    config = config if config is not None else current_config()
    uri = config.uri or os.environ.get("RATINGS_STORE") or None
    if uri is None:
        local = home.store
        home.confine(local / TABLE / "x", create=False)  # the home's own store/: a link out of the home is refused
        return Location(home=home, root=str(local), storage_options={}, local=local, bounds=home.bounds)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in ("", "file") or (len(scheme) == 1 and uri[1:2] == ":"):  # a path (or file://path)
        path = Path(parts.path if scheme == "file" else uri).expanduser().absolute().resolve()  # resolved once
        if path.exists() and not path.is_dir():
            raise PipelineError(f"store {uri!r}: {path} is not a folder; give the folder of the store")
        return Location(home=home, root=str(path), storage_options={}, local=path, bounds=home.bounds.with_root(path))
    if scheme not in REMOTE_SCHEMES:
        raise PipelineError(
            f"store {uri!r}: unknown scheme {scheme!r}; give a local path or s3://, gs://, az:// (or abfss://) URI"
        )
    if not parts.netloc:
        raise PipelineError(f"store {uri!r}: no bucket or container after {scheme}://")
    return Location(
        home=home, root=uri.rstrip("/"), storage_options=dict(config.storage_options), local=None, bounds=home.bounds
    )
