"""``ratings doctor``: is the loop closed? Code defaults ([CODE]) and the state of a home ([LIVE]).

The loop is closed when the defaults that make it learn are on (routing by
``learning_governed``, PRM fill-in scoring, decision writeback) and the home
shows it working: the streams parse, the store's views exist with ratings in
them, and the published routing table loads, matches its schema and was fitted
from the newest table version with nothing appended since (or is deliberately
pinned with ``ratings pin``). Any failed check opens the loop, with its reason.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import InvalidEvent, PipelineError
from ..jsonfile import parse_json
from ..workspace import STREAMS, StrPath, Workspace

Status = Literal["ok", "fail", "pinned", "warn"]  # warn: worth a look, the loop stays closed


class Check(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["CODE", "LIVE"]
    name: str
    status: Status
    detail: str

    @property
    def ok(self) -> bool:
        return self.status != "fail"


class DoctorReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    checks: list[Check]
    closed: bool
    reasons: list[str]
    stale_events: int | None = None  # events the published table has not seen (None: no table/store)


def _check(kind: Literal["CODE", "LIVE"], name: str, ok: bool, detail: str, *, pinned: bool = False) -> Check:
    return Check(kind=kind, name=name, status="pinned" if pinned else ("ok" if ok else "fail"), detail=detail)


def _warning(name: str, fine: bool, detail: str) -> Check:
    """A [LIVE] check that warns (and leaves the loop closed) when it is not ``fine``."""
    return Check(kind="LIVE", name=name, status="ok" if fine else "warn", detail=detail)


# ---------------------------------------------------------------------------------------------- [CODE]
def _code_checks() -> list[Check]:
    from ..nightly.options import FitOptions
    from ..routing import DEFAULT_POLICY, Router

    route_default = inspect.signature(Router.route).parameters["policy"].default
    options = FitOptions()
    return [
        _check(
            "CODE",
            "default policy is learning_governed",
            DEFAULT_POLICY == "learning_governed" and route_default is None,
            f"Router.route(policy=None) uses {DEFAULT_POLICY}",
        ),
        _check("CODE", "PRM scoring on by default", options.prm is True, f"FitOptions().prm = {options.prm}"),
        _check(
            "CODE",
            "decision writeback on by default",
            options.writeback is True,
            f"FitOptions().writeback = {options.writeback}",
        ),
    ]


# ---------------------------------------------------------------------------------------------- [LIVE]
def _consumed_offsets(ws: Workspace, table: Any) -> dict[str, int]:
    """Per stream, the byte offset up to which this home's writer committed it (0 when never)."""
    from ..store.table import consumed_offsets

    return (consumed_offsets(ws, table) or {}) if table is not None else {}


def _stream_check(ws: Workspace, offsets: dict[str, int]) -> tuple[Check, int]:
    """Parse every line not yet compacted; count dead letters and torn tails. Returns (check, pending lines)."""
    from ..streams.events import parse_line
    from ..streams.log import read_lines

    pending, bad, notes = 0, [], []
    for stream in STREAMS:
        path = ws.stream(stream)
        if not path.exists():
            continue
        for line in read_lines(ws, stream, start=offsets.get(stream, 0)):
            pending += 1
            try:
                parse_line(line.raw, line=line.line_no, source=str(path))
            except InvalidEvent as exc:
                bad.append(exc.message())
        size = path.stat().st_size
        with open(path, "rb") as handle:
            handle.seek(max(0, size - 1))
            if size and handle.read(1) != b"\n":
                notes.append(f"{stream}: torn tail (the next append or `ratings repair` quarantines it)")
        letters = ws.dead_letters(stream)
        if letters.exists():
            with open(letters, "rb") as handle:
                count = sum(1 for _ in handle)
            if count:
                notes.append(f"{stream}: {count} dead-lettered line(s) kept in {letters.name}")
    if bad:
        detail = f"{len(bad)} invalid line(s) not yet compacted, first: {bad[0]}"
    else:
        detail = f"{pending} line(s) not yet compacted, all valid"
    if notes:
        detail += "; " + "; ".join(notes)
    return _check("LIVE", "streams parse", not bad, detail), pending


def _store_checks(ws: Workspace) -> list[Check]:
    from ..store import open_store
    from ..store.families import VIEWS
    from ..store.views import reading

    try:
        store = open_store(ws, read_only=True)
    except PipelineError as exc:
        return [_check("LIVE", "store views exist", False, str(exc))]
    with store:
        counts = {}
        for view in VIEWS:
            try:
                with reading(store):
                    counts[view] = store.con.execute(f'SELECT count(*) FROM "{view}"').fetchall()[0][0]
            except PipelineError as exc:  # a missing or corrupt file: one line that says how to recover
                return [_check("LIVE", "store views exist", False, str(exc))]
        version = store.version
        where = f"table version {version}" if version is not None else "no table yet (run `ratings compact`)"
        checks = [_check("LIVE", "store views exist", True, f"{len(VIEWS)} views at {where}")]
        ratings = counts.get("ratings", 0)
        checks.append(_check("LIVE", "ratings has rows", ratings > 0, f"{ratings} rating row(s)"))
        checks += _data_warnings(ws, store)
    return checks


def _data_warnings(ws: Workspace, store: Any) -> list[Check]:
    """What the store holds that is allowed but probably a mistake: shipped configs it never saw, retractions of
    ids it does not hold, events dated after now (stored with --allow-future)."""
    from datetime import UTC, datetime

    from ..fit.shipped import load_shipped
    from ..streams.future import MAX_FUTURE, latest_time

    out: list[Check] = []
    try:
        shipped = load_shipped(ws.shipped)
    except PipelineError as exc:
        return [_check("LIVE", "shipped.json loads", False, str(exc))]
    named = {f"{role}": key for role, key in shipped.static.model_dump().items() if isinstance(key, str)}
    named |= {f"pinned.{role}": key for role, key in shipped.pinned.items()}
    seen = store.configs() if store.version is not None else set()
    unseen = sorted(f"{role} {key}" for role, key in named.items() if key not in seen)
    out.append(
        _warning(
            "shipped configs seen in the store",
            not unseen,
            f"{len(named)} config(s) named, all seen"
            if not unseen
            else f"never seen in the store: {', '.join(unseen)} (fine for a cold start; else a typo of a key: "
            'ratings sql "SELECT DISTINCT config_key FROM attempts")',
        )
    )
    unknown = store.unknown_retractions() if store.version is not None else []
    out.append(
        _warning(
            "retractions name stored ratings",
            not unknown,
            "every retraction names a stored rating or rejection"
            if not unknown
            else f"{len(unknown)} retraction(s) name an id no rating or rejection holds, and retract nothing: "
            + ", ".join(unknown[:5])
            + (" ..." if len(unknown) > 5 else ""),
        )
    )
    latest = latest_time(datetime.now(UTC), MAX_FUTURE)
    late, newest = store.after(latest) if store.version is not None else (0, None)
    out.append(
        _warning(
            "no event dated in the future",
            not late,
            "no stored event is dated after now"
            if not late
            else f"{late} stored event(s) dated more than a day after now (the latest {newest}): the fit measures "
            "ages from the newest event, so every other rating counts as old",
        )
    )
    return out


def _rows_at(table: Any, version: int | None) -> int:
    """Rows of the table at ``version`` by the commit statistics (0 when None or unknown)."""
    from ..store.table import family_rows, store_errors

    if table is None or version is None:
        return 0
    from deltalake import DeltaTable

    try:
        old = DeltaTable(table.table_uri, version=version, storage_options=table._storage_options)
    except store_errors():  # a version vacuumed away or never there: nothing to compare
        return 0
    return sum(family_rows(old).values())


def _table_checks(ws: Workspace, pending: int, table: Any) -> tuple[list[Check], int | None]:
    from ..nightly.publish import consistency, read_pin
    from ..routing.table import canonical_json, load, table_json_schema
    from ..store.table import family_rows

    path = ws.table
    if not path.exists():
        return [_check("LIVE", "routing table exists", False, f"{path} is missing; run `fit-routing`")], None
    checks = [_check("LIVE", "routing table exists", True, str(path))]
    try:
        routing = load(path)
    except PipelineError as exc:
        return [*checks, _check("LIVE", "routing table loads", False, str(exc))], None
    checks.append(_check("LIVE", "routing table loads", True, f"{routing.schema_} version {routing.version}"))
    schema_path = ws.table_schema
    expected = json.loads(canonical_json(table_json_schema()))
    try:
        schema_ok = parse_json(schema_path.read_bytes()) == expected
        schema_detail = (
            "routing-table.schema.json is the model's schema"
            if schema_ok
            else "routing-table.schema.json differs from the model's schema (republish with `fit-routing`)"
        )
    except (FileNotFoundError, ValueError) as exc:
        schema_ok, schema_detail = False, f"routing-table.schema.json unreadable: {exc}"
    version_ok = routing.version == routing.content_hash()
    checks.append(
        _check(
            "LIVE",
            "routing table matches its schema",
            schema_ok and version_ok,
            schema_detail
            + (
                ""
                if version_ok
                else f"; version {routing.version} is not the content hash {routing.content_hash()} "
                "(the file was edited)"
            ),
        )
    )
    pin = read_pin(ws)
    agree = consistency(ws, routing, pinned=pin.version if pin else None)
    checks.append(_check("LIVE", "table, stats and history agree", agree.ok, agree.detail))
    newest = table.version() if table is not None else None
    newest_rows = sum(family_rows(table).values()) if table is not None else 0
    fitted = routing.source.version
    fitted_rows = newest_rows if fitted == newest else _rows_at(table, fitted)
    stale = max(0, newest_rows - fitted_rows) + pending
    if pin is not None and pin.version == routing.version:
        checks.append(
            _check(
                "LIVE",
                "routing table is fresh",
                True,
                f"pinned to {pin.version} ({pin.history}) since {pin.pinned_at}; {stale} event(s) "
                "newer than it (`ratings pin --latest` follows the newest fit again)",
                pinned=True,
            )
        )
        return checks, stale
    fresh = fitted == newest and stale == 0
    if fresh:
        detail = f"fitted from table version {fitted}, the newest, nothing appended since"
    else:
        detail = (
            f"stale by {stale} event(s): fitted from table version {fitted}, newest is {newest}"
            + (f", {pending} line(s) not yet compacted" if pending else "")
            + "; run `fit-routing`"
        )
    if pin is not None:
        detail += f" (pin.json names {pin.version}, but the live table is {routing.version})"
    checks.append(_check("LIVE", "routing table is fresh", fresh, detail))
    return checks, stale


def _newest_table(ws: Workspace) -> Any:
    """The events table at its newest version (None when there is none or it cannot be opened)."""
    from ..store.table import open_table

    try:
        return open_table(ws.store)
    except PipelineError:
        return None


def doctor(home: Workspace | StrPath | None = None) -> DoctorReport:
    """Run every check; the loop is CLOSED when none fails."""
    ws = Workspace.of(home)
    checks = _code_checks()
    table = _newest_table(ws)
    offsets = _consumed_offsets(ws, table)
    stream_check, pending = _stream_check(ws, offsets)
    checks.append(stream_check)
    checks.extend(_store_checks(ws))
    table_checks, stale = _table_checks(ws, pending, table)
    checks.extend(table_checks)
    reasons = [f"[{c.kind}] {c.name}: {c.detail}" for c in checks if not c.ok]
    return DoctorReport(checks=checks, closed=not reasons, reasons=reasons, stale_events=stale)
