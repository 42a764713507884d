"""The one mapping from source records to v1 events (docs/design.md, Imports): what every source yields, the
ids, and the lines.

A source maps each of its rows to a :class:`Unit`: the records it gives (:class:`Opened`, :class:`Attempt`,
:class:`Rating`, :class:`Rejection`, :class:`Closure`), the problems that make it a bad row, and what it skips on
purpose (a blank score, a run still in flight). Records carry typed, checked values only (pipeline/streams/
imports/values.py checks them against the events' bounds), so their lines are rendered without a second
validation; ``tests/streams/imports`` parses every line a source renders with the events' own parser.

Ids are ``<prefix>-<24 hex digits>`` (never the reserved ``<writer>:<stream>@<offset>`` form): the SHA-256 of
the JSON of the record's type and *key* (the source's own identifier of what it describes, e.g. a trace id), and
for a rating of its fields too (written in one fixed order), so that a rating edited at the source
gets a new id and the old one is retracted (Imports, Updates). Long tables keep the ids they always had (the
digest of the row's content: pipeline/streams/imports/long.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, NamedTuple

from pydantic_core import to_json

from ..events import SCHEMA_VERSION, config_key
from ..spec import FIELDS


class Cfg(NamedTuple):
    """A configuration: its key, its JSON object (``cli, route, model, effort``), and that object's JSON twice:
    as the lines write it (``line``) and canonical (``canonical``, sorted keys: what ids are hashed from)."""

    key: str
    obj: dict[str, str | None]
    line: str
    canonical: str


@functools.lru_cache(maxsize=65536)
def config_of(cli: str, route: str | None, model: str, effort: str | None) -> Cfg:
    """A checked configuration; :class:`ValueError` when ``cli`` or ``model`` is blank."""
    if not cli or not cli.strip() or not model or not model.strip():
        raise ValueError(f"a configuration needs a cli and a model (got cli {cli!r}, model {model!r})")
    obj = {"cli": cli, "route": route, "model": model, "effort": effort}
    return Cfg(config_key(cli, route, model, effort), obj, to_json(obj).decode(), canonical(obj))


class Opened(NamedTuple):
    """A task: the earliest candidate of each task is its one ``task.opened`` (ties: the first). ``final``: the
    source knows no other candidate can come (its task is the row itself): written at once, not held to the end."""

    key: str
    task: str
    region: str
    at: str
    labels: dict[str, str] | None = None
    thread: str | None = None
    title: str | None = None
    ref: str | None = None
    id: str | None = None
    final: bool = False


#: The optional fields of ``task.attempted`` an :class:`Attempt` may carry in ``details``, in the order of the line:
#: every field of the event spec after ``cost_usd`` (which every attempt line writes, null when unknown).
_ATTEMPTED = [f.name for f in FIELDS["task.attempted"]]
DETAILS = tuple(_ATTEMPTED[_ATTEMPTED.index("cost_usd") + 1 :])
_DETAIL_NAMES = frozenset(DETAILS)


class Attempt(NamedTuple):
    """A ``task.attempted``. ``details``: the event's optional fields after ``cost_usd`` that the source knows, by
    their names in the event spec (:data:`DETAILS`; ``None`` values are left out of the line)."""

    key: str
    task: str
    config: Cfg
    status: str
    cost_usd: float | None
    cost_from: str  # 'source', 'tokens', 'price', or 'unknown' (Imports, Costs)
    at: str
    details: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None
    ref: str | None = None
    id: str | None = None


class Rating(NamedTuple):
    key: str
    task: str
    config: Cfg
    rater: dict[str, str]
    score: float
    at: str
    extra: dict[str, Any] | None = None
    ref: str | None = None
    id: str | None = None


class Rejection(NamedTuple):
    key: str
    task: str
    config: Cfg
    rater: dict[str, str]
    claim: str
    evidence: list[str]
    at: str
    ref: str | None = None
    id: str | None = None


class Closure(NamedTuple):
    key: str
    task: str
    outcome: str
    at: str
    ref: str | None = None
    id: str | None = None


class Line(NamedTuple):
    """An event a source rendered itself (long tables, for speed): its line, id and ledger identity.
    ``cost_from`` is set for an attempt (Imports, Costs)."""

    type: str
    id: str
    line: bytes  # with its newline
    key: int  # the ledger's 64-bit identity (pipeline/streams/imports/ledger.py, key64)
    cost_from: str | None = None


Mapped = Opened | Attempt | Rating | Rejection | Closure  # what render() writes
Record = Mapped | Line


class Unit(NamedTuple):
    """What one source row gives: its records, or the problems that make it bad (``(field, reason)``), and what it
    skipped on purpose (a short phrase each, counted in the summary)."""

    row: int | str  # the row's number or the source's id of it, as the messages name it
    records: list[Record]
    problems: list[tuple[str, str]]
    skipped: list[str]
    raw: Any = None  # the source row (for the dead letters); a callable is called only when needed

    @property
    def bad(self) -> bool:
        return bool(self.problems)


class Prepared(NamedTuple):
    """A chunk of rows a source checked and rendered itself, in bulk (long tables, for speed): the events as columns
    (a :class:`~.block.Block`), each task-opening candidate at its position among them, and the rows that are bad,
    as units of their own. ``rows`` counts every row it covers."""

    rows: int
    imported: int
    items: Any  # a Block (pipeline/streams/imports/block.py)
    opened: list[tuple[int, Opened]]
    bad: list[Unit]
    skipped: dict[str, int]
    costs: dict[str, int]


def canonical(value: Any) -> str:
    """The JSON text ids are hashed from: sorted keys, no spaces, UTF-8 as is."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def digest24(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _body(record: Mapped) -> tuple[str, dict[str, Any]]:
    """The event type and its fields (without ``id``, ``type``, ``at``, ``v``), in the order lines are written."""
    if isinstance(record, Attempt):
        body: dict[str, Any] = {
            "task": record.task,
            "config": record.config.obj,
            "status": record.status,
            "cost_usd": record.cost_usd,
        }
        if record.details:  # in the spec's order; a name it does not know is our bug
            if not record.details.keys() <= _DETAIL_NAMES:
                raise KeyError(f"task.attempted has no field {sorted(record.details.keys() - _DETAIL_NAMES)}")
            for name in DETAILS:
                if (value := record.details.get(name)) is not None:
                    body[name] = value
        if record.extra:
            body.update(record.extra)
        return "task.attempted", body
    if isinstance(record, Rating):
        body = {"task": record.task, "config": record.config.obj, "rater": record.rater, "score": record.score}
        if record.extra:
            body.update(record.extra)
        return "task.rated", body
    if isinstance(record, Opened):
        body = {"task": record.task, "region": record.region}
        for name in ("labels", "thread", "title"):
            if (value := getattr(record, name)) is not None:
                body[name] = value
        return "task.opened", body
    if isinstance(record, Rejection):
        return "task.rejected", {
            "task": record.task,
            "config": record.config.obj,
            "rater": record.rater,
            "claim": record.claim,
            "evidence": record.evidence,
        }
    return "task.closed", {"task": record.task, "outcome": record.outcome}


class Rendered(NamedTuple):
    type: str
    id: str
    line: bytes  # with its newline


def render(record: Mapped, prefix: str) -> Rendered:
    """The event line of ``record``. Its id: the record's own (long tables), else ``<prefix>-<digest>`` of the
    key (and, for a rating, of its content too: Imports, Updates)."""
    kind, body = _body(record)
    if record.ref is not None:
        body["source_ref"] = record.ref
    fields = to_json(body)  # '{"task":...}': written once, hashed and spliced into the line
    event_id = record.id
    if event_id is None:  # the JSON of [type, key(, fields)]: fields in the fixed order of _body, so deterministic
        head = to_json([kind, record.key])
        hashed = head[:-1] + b"," + fields + b"]" if kind == "task.rated" else head
        event_id = f"{prefix}-{hashlib.sha256(hashed).hexdigest()[:24]}"
    # the line as to_json of {"id", "type", "at", "v", **fields} writes it (the id, the type and a normalised time
    # need no escaping in JSON)
    start = f'{{"id":"{event_id}","type":"{kind}","at":"{record.at}","v":{SCHEMA_VERSION},'.encode()
    return Rendered(kind, event_id, start + fields[1:] + b"\n")


def retraction(rating_id: str, prefix: str, at: str, reason: str) -> Rendered:
    """The ``rating.retracted`` of an old rating; its id depends on the rating alone (a repeat is a duplicate)."""
    event_id = f"{prefix}-{digest24(canonical(['rating.retracted', rating_id]))}"
    line = to_json(
        {
            "id": event_id,
            "type": "rating.retracted",
            "at": at,
            "v": SCHEMA_VERSION,
            "rating": rating_id,
            "reason": reason,
        }
    )
    return Rendered("rating.retracted", event_id, line + b"\n")
