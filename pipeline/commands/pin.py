"""``ratings pin``: roll the published routing table back to a fit in ``fits/history/``, or follow the newest again.

A pin is recorded in ``fits/pin.json`` (``{"version", "pinned_at", "history"}``);
``ratings doctor`` reports a pinned table as pinned, not stale, and
:func:`pinned_version` lets the fitter keep a pinned table in place (a fit
still writes its history copy). ``--latest`` removes the pin and publishes the
newest table in the history (the most recently written file, ties by name).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..errors import PipelineError, TableSchemaError
from ..home import Home, fsync_dir
from ..jsonfile import first_problem, parse_json
from ..routing.table import canonical_json, load, table_json_schema
from ..streams.events import format_timestamp

PIN_FILE = "pin.json"
TABLE_FILE = "routing-table.json"


class Pin(BaseModel):
    """What ``fits/pin.json`` records."""

    model_config = ConfigDict(frozen=True, extra="allow")

    version: str
    pinned_at: str
    history: str  # the history file the table came from, relative to fits/


def history_dir(home: Home) -> Path:
    return home.fits / "history"


def read_pin(home: str | os.PathLike | Home | None) -> Pin | None:
    """The recorded pin, or None when the table follows the newest fit."""
    path = Home.resolve(home).fits / PIN_FILE
    try:
        return Pin.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise TableSchemaError(f"{path}: not a valid pin record: {first_problem(exc)}") from None


def pinned_version(home: str | os.PathLike | Home | None) -> str | None:
    """The pinned table version, or None (for the fitter: publish the live table only when this is None)."""
    pin = read_pin(home)
    return pin.version if pin else None


def _history(home: Home) -> list[Path]:
    directory = history_dir(home)
    if not directory.is_dir():
        return []
    return sorted(
        (p for p in directory.iterdir() if p.suffix == ".json" and not p.name.startswith(".")),
        key=lambda p: (p.stat().st_mtime_ns, p.name),
    )


def _find(home: Home, version: str) -> Path:
    """The history file of ``version``: ``<version>.json``, else any history file whose table has that version."""
    direct = history_dir(home) / f"{version}.json"
    if direct.exists():
        return direct
    for path in _history(home):
        try:
            if _version_in(path) == version:
                return path
        except ValueError:
            continue
    known = ", ".join(sorted({_version_of(p) for p in _history(home)})) or "none"
    raise PipelineError(f"no fit with version {version!r} in {history_dir(home)} (known: {known})")


def _version_in(path: Path) -> str | None:
    """The ``version`` a history file names (None when it names none); :class:`ValueError` when not JSON."""
    data = parse_json(path.read_bytes())
    version = data.get("version") if isinstance(data, dict) else None
    return str(version) if version else None


def _version_of(path: Path) -> str:
    try:
        return _version_in(path) or path.stem
    except ValueError:
        return path.stem


def versions(home: str | os.PathLike | Home | None) -> list[dict[str, Any]]:
    """Every fit in ``fits/history/``, oldest first (``ratings pin`` without a version): its version, when it
    was fitted, from which store version, its constants, and whether it is the live table or the pinned one."""
    home = Home.resolve(home)
    pin = read_pin(home)
    try:
        live = _version_in(home.fits / TABLE_FILE)
    except (FileNotFoundError, ValueError):
        live = None
    rows = []
    for path in _history(home):
        try:
            data = parse_json(path.read_bytes())
        except ValueError:
            data = {}
        data = data if isinstance(data, dict) else {}
        source = data.get("source")
        source = source if isinstance(source, dict) else {}
        version = str(data.get("version") or path.stem)
        rows.append(
            {
                "version": version,
                "fitted_at": data.get("fitted_at"),
                "store_version": source.get("version"),
                "constants": data.get("constants_source"),
                "live": version == live,
                "pinned": pin is not None and version == pin.version,
                "history": str(path.relative_to(home.fits)),
            }
        )
    return rows


def _publish_copy(home: Home, source: Path) -> str:
    """Validate a history table and publish it (its bytes, atomically) with the schema beside it."""
    table = load(source)
    home.write(home.fits / "routing-table.schema.json", canonical_json(table_json_schema()))
    home.write(home.fits / TABLE_FILE, source.read_bytes())  # last: the commit point
    return table.version


def pin(home: str | os.PathLike | Home | None, version: str | None = None, *, latest: bool = False) -> dict[str, Any]:
    """Pin ``version`` (publish it from the history and record the pin) or, with ``latest``, unpin.

    Returns ``{"pinned": version | None, "table": published version, "history": file}``.
    """
    home = Home.resolve(home)
    home.remove_stale_temps(home.fits)  # what a killed pin or fit left
    if latest == (version is not None):
        raise PipelineError("give either a VERSION or --latest")
    if version is None:  # --latest: the check above refused both and neither
        files = _history(home)
        if not files:
            raise PipelineError(f"no fit in {history_dir(home)}; run `fit-routing` first")
        published = _publish_copy(home, files[-1])
        pin_path = home.fits / PIN_FILE
        if pin_path.exists():
            pin_path.unlink()
            fsync_dir(home.fits)
        return {"pinned": None, "table": published, "history": str(files[-1].relative_to(home.fits))}
    source = _find(home, version)
    published = _publish_copy(home, source)
    record = Pin(
        version=published,
        pinned_at=format_timestamp(datetime.now(UTC)),
        history=str(source.relative_to(home.fits)),
    )
    home.write(home.fits / PIN_FILE, canonical_json(record.model_dump(mode="json")))
    return {"pinned": published, "table": published, "history": record.history}
