"""Publishing one fit so that a crash at any point leaves a set of outputs a reader can trust.

A fit publishes three things that must agree: ``fits/history/<version>.json`` (the table, kept for ``ratings
pin`` and ``ratings compare --previous``), the case study's ``stats.json`` (which names the table version it
describes, ``table_version``) and ``fits/routing-table.json`` (with its JSON Schema beside it). Each is written
atomically (temp file, fsync, rename, fsync of the directory) through
:meth:`pipeline.workspace.Workspace.write`, in this order: history, stats, schema, table. The table is the
commit point (docs/design.md, Storage):

- a crash before the stats' rename leaves the previous table and stats, which agree (a new history file is
  harmless: history is append-only);
- a crash after it and before the table's rename leaves stats and history one fit ahead of the table:
  :func:`consistency` says that the table is stale and how to finish (``ratings pin --latest`` publishes the
  history copy, which is the table the stats describe, or the next ``fit-routing``);
- after the table's rename the new set is complete.

:func:`consistency` is what ``ratings doctor`` runs on a home.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..errors import PipelineError, TableSchemaError
from ..jsonfile import first_problem, parse_json
from ..routing.table import RoutingTable, canonical_json, table_json_schema
from ..workspace import Workspace
from .options import DEFAULT_CASE_STUDY
from .stats import AnyStats


def publish_fit(ws: Workspace, table: RoutingTable, stats: AnyStats, stats_path: Path, *, live: bool) -> None:
    """Write history, stats, schema and (when ``live``, i.e. no pin holds the table) the table, in that order.

    ``table`` carries its version and ``stats.table_version`` names it.
    """
    if stats.table_version != table.version:
        raise ValueError(f"stats describe table {stats.table_version}, not {table.version}")
    for folder in (ws.fits, ws.history, stats_path.parent):  # what killed fits left (under the fit lock)
        ws.remove_stale_temps(folder)
    body = canonical_json(table.to_json_dict())
    ws.write(ws.history_of(table.version), body)
    ws.write(stats_path, canonical_json(stats.to_json_dict()))
    ws.write(ws.table_schema, canonical_json(table_json_schema()))
    if live:
        ws.write(ws.table, body)


class Pin(BaseModel):
    """What ``fits/pin.json`` records."""

    model_config = ConfigDict(frozen=True, extra="allow")

    version: str
    pinned_at: str
    history: str  # the history file the table came from, relative to fits/


def read_pin(ws: Workspace) -> Pin | None:
    """The recorded pin (``fits/pin.json``, written by ``ratings pin``), or None when the table follows the
    newest fit."""
    path = ws.pin
    try:
        return Pin.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise TableSchemaError(f"{path}: not a valid pin record: {first_problem(exc)}") from None


def pinned_version(ws: Workspace) -> str | None:
    """The pinned table version, or None (for the fitter: publish the live table only when this is None)."""
    pin = read_pin(ws)
    return pin.version if pin else None


def publish_table(ws: Workspace, table: RoutingTable, *, live: bool) -> None:
    """A table without stats (a refit with no held-out evaluation): history, schema and (when ``live``) the
    table, in that order."""
    body = canonical_json(table.to_json_dict())
    ws.write(ws.history_of(table.version), body)
    ws.write(ws.table_schema, canonical_json(table_json_schema()))
    if live:
        ws.write(ws.table, body)


class Consistency(BaseModel):
    """Whether the published table, its history copy and the stats describe one fit; ``stale`` names the one
    that is behind (None when they agree)."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    stale: Literal["table", "stats", "history"] | None
    detail: str


def consistency(ws: Workspace, table: RoutingTable, *, pinned: str | None) -> Consistency:
    """Check that ``table`` (the live one) is in ``fits/history/`` and that the stats its evaluation names
    describe it (or, when the table is ``pinned``, describe a fit in the history)."""
    if not ws.history_of(table.version).exists():
        return Consistency(
            ok=False,
            stale="history",
            detail=f"fits/history/ has no copy of the live table {table.version}; run `fit-routing` again",
        )
    stats_path = stats_path_of(ws, table)
    try:
        data = parse_json(stats_path.read_bytes())
        described = data.get("table_version") if isinstance(data, dict) else None
    except FileNotFoundError:
        return Consistency(ok=False, stale="stats", detail=f"{ws.relative(stats_path)} is missing; run `fit-routing`")
    except ValueError as exc:
        return Consistency(ok=False, stale="stats", detail=f"{ws.relative(stats_path)} is not JSON: {exc}")
    where = ws.relative(stats_path)
    if described == table.version:
        return Consistency(ok=True, stale=None, detail=f"table, {where} and fits/history/ describe fit {table.version}")
    if not isinstance(described, str):
        return Consistency(
            ok=False,
            stale="stats",
            detail=f"{where} names no table version (written by an older fit); run `fit-routing`",
        )
    if not ws.history_of(described).exists():
        return Consistency(
            ok=False,
            stale="stats",
            detail=f"{where} describes fit {described}, which is not in fits/history/; the table is "
            f"{table.version}; run `fit-routing`",
        )
    if pinned == table.version:
        return Consistency(
            ok=True,
            stale=None,
            detail=f"the table is pinned to {table.version}; {where} describes the newest fit {described} "
            "(in fits/history/)",
        )
    return Consistency(
        ok=False,
        stale="table",
        detail=f"the table is stale: {where} and fits/history/ describe fit {described}, but "
        f"fits/routing-table.json is {table.version} (a fit stopped while publishing); `ratings pin --latest` "
        "publishes it, or run `fit-routing`",
    )


def stats_path_of(ws: Workspace, table: RoutingTable | None) -> Path:
    """The stats file the table's evaluation names (``stats``, relative to the home, or ``case_study``), else
    the default case study's."""
    evaluation = table.evaluation if table is not None else {}
    named = evaluation.get("stats")
    if isinstance(named, str):
        path = Path(named)
        return path if path.is_absolute() else ws.root / path
    name = evaluation.get("case_study") or evaluation.get("name")
    try:
        return ws.stats(name if isinstance(name, str) else DEFAULT_CASE_STUDY)
    except PipelineError:  # a name that is not one directory: the default
        return ws.stats(DEFAULT_CASE_STUDY)
