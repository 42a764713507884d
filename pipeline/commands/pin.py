"""``ratings pin``: roll the published routing table back to a fit in ``fits/history/``, or follow the newest again.

A pin is recorded in ``fits/pin.json`` (``{"version", "pinned_at", "history"}``);
``ratings doctor`` reports a pinned table as pinned, not stale, and
:func:`pipeline.nightly.publish.pinned_version` lets the fitter keep a pinned
table in place (a fit still writes its history copy). ``--latest`` removes the pin and publishes the
newest table in the history (the most recently written file, ties by name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import PipelineError
from ..jsonfile import parse_json
from ..nightly.publish import Pin, read_pin
from ..routing.table import canonical_json, load, table_json_schema
from ..utc import format_timestamp, now
from ..workspace import StrPath, Workspace, fsync_dir


def _history(ws: Workspace) -> list[Path]:
    directory = ws.history
    if not directory.is_dir():
        return []
    return sorted(
        (p for p in directory.iterdir() if p.suffix == ".json" and not p.name.startswith(".")),
        key=lambda p: (p.stat().st_mtime_ns, p.name),
    )


def _find(ws: Workspace, version: str) -> Path:
    """The history file of ``version``: ``<version>.json``, else any history file whose table has that version."""
    direct = ws.history_of(version)
    if direct.exists():
        return direct
    for path in _history(ws):
        try:
            if _version_in(path) == version:
                return path
        except ValueError:
            continue
    known = ", ".join(sorted({_version_of(p) for p in _history(ws)})) or "none"
    raise PipelineError(f"no fit with version {version!r} in {ws.history} (known: {known})")


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


def versions(home: Workspace | StrPath | None) -> list[dict[str, Any]]:
    """Every fit in ``fits/history/``, oldest first (``ratings pin`` without a version): its version, when it
    was fitted, from which store version, its constants, and whether it is the live table or the pinned one."""
    ws = Workspace.of(home)
    pin = read_pin(ws)
    try:
        live = _version_in(ws.table)
    except (FileNotFoundError, ValueError):
        live = None
    rows = []
    for path in _history(ws):
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
                "history": str(path.relative_to(ws.fits)),
            }
        )
    return rows


def _publish_copy(ws: Workspace, source: Path) -> str:
    """Validate a history table and publish it (its bytes, atomically) with the schema beside it."""
    table = load(source)
    ws.write(ws.table_schema, canonical_json(table_json_schema()))
    ws.write(ws.table, source.read_bytes())  # last: the commit point
    return table.version


def pin(home: Workspace | StrPath | None, version: str | None = None, *, latest: bool = False) -> dict[str, Any]:
    """Pin ``version`` (publish it from the history and record the pin) or, with ``latest``, unpin.

    Returns ``{"pinned": version | None, "table": published version, "history": file}``.
    """
    ws = Workspace.of(home)
    ws.remove_stale_temps(ws.fits)  # what a killed pin or fit left
    if latest == (version is not None):
        raise PipelineError("give either a VERSION or --latest")
    if version is None:  # --latest: the check above refused both and neither
        files = _history(ws)
        if not files:
            raise PipelineError(f"no fit in {ws.history}; run `fit-routing` first")
        published = _publish_copy(ws, files[-1])
        pin_path = ws.pin
        if pin_path.exists():
            pin_path.unlink()
            fsync_dir(ws.fits)
        return {"pinned": None, "table": published, "history": str(files[-1].relative_to(ws.fits))}
    source = _find(ws, version)
    published = _publish_copy(ws, source)
    record = Pin(
        version=published,
        pinned_at=format_timestamp(now()),
        history=str(source.relative_to(ws.fits)),
    )
    ws.write(ws.pin, canonical_json(record.model_dump(mode="json")))
    return {"pinned": published, "table": published, "history": record.history}
