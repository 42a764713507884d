"""Validate and render a batch of events for ``append``: the verdicts of :func:`~pipeline.streams.events.parse_line`,
fast.

Per event, most of the cost of the per-line path is building pydantic model instances in Python. A batch is
instead validated with one call into pydantic-core per chunk of lines, against :func:`fast_validator`: the same
field schemas as the event models (taken from the models' own core schemas, so there is one definition of each
rule), as plain dicts, with unknown fields refused. That *fast lane* only ever accepts: an item it does not plainly
accept (an unknown field or type, a time not in the normalised form, a line not compact, anything invalid) goes to
the *slow lane*, which is the per-line path (:func:`pipeline.streams.events.decode_line` and
:func:`pipeline.streams.events.validate_object`) and gives every verdict and reason. So a batch is accepted, refused and
explained exactly as its lines are one by one (``tests/streams/test_batch.py`` checks it on thousands of mutated lines).

Rendering: a raw line that arrives valid, compact and complete (its own ``id`` and a normalised ``at``) is
written as its own bytes; one missing ``id`` or ``at`` gets them spliced in front; a mapping is rendered as the
per-line path renders it (``with_head`` then ``encode_line``); ids are drawn in bulk.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic_core import SchemaValidator, ValidationError, core_schema

from ..errors import InvalidBatch, InvalidEvent
from ..utc import CANONICAL_TIME, format_timestamp, utc_timestamp
from ..utc import now as utc_now
from ..workspace import STREAMS
from .events import (
    DEFAULT_MAX_LINE_BYTES,
    FILLABLE,
    KNOWN,
    SCHEMA_VERSION,
    AnyEvent,
    Event,
    decode_line,
    encode_line,
    free_id,
    is_reserved_id,
    known_major,
    nearest_type,
    stream_of,
    validate_object,
    with_head,
)
from .future import MAX_FUTURE, future_reason, latest_time
from .ulid import new_id, new_ids

Item = AnyEvent | Mapping[str, Any] | bytes | str

#: Batches smaller than this take the slow lane only (building the fast validator costs a few milliseconds,
#: which one ``ratings append EVENT`` does not pay).
FAST_FROM = 64
_CHUNK = 4_096  # items per call into pydantic-core (bounds the memory of its output; measured best)

#: Whitespace next to a structural character: the line may not be compact (it may also be inside a string).
_LOOSE = rb"[:,\[{][ \t\r]|[ \t\r][:,\]}]"  # compiled on first use (re's cache)
_WHITESPACE = (b" ", b"\t", b"\r")


@functools.cache
def fast_validator() -> SchemaValidator:
    """A list of events of the v1 types, each validated with its model's field schemas into a plain dict.

    Built from the models' own core schemas: every ``model`` node becomes a ``typed-dict`` with the same fields,
    defaults and validators, refusing unknown fields. A tagged union on ``type`` picks the schema. The three
    validators written in Python, which would cost a call back into Python per event, accept exactly what these
    native checks accept together with :func:`accepted` (run on the few fields afterwards):

    - ``at`` (:func:`utc_timestamp`): a string in the normalised form, and
      :func:`~pipeline.utc.is_canonical_time` after (a time in any other form takes the slow lane, which
      normalises it);
    - ``id`` (:func:`free_id`): the field's own string schema, and not :func:`is_reserved_id` after;
    - ``v`` (:func:`known_major`): an integer from the known major version to the known major version.
    """
    substitutes: dict[Any, Any] = {
        utc_timestamp: lambda node: core_schema.str_schema(pattern=f"^{CANONICAL_TIME}$"),
        free_id: lambda node: as_dict(node["schema"]),
        known_major: lambda node: core_schema.int_schema(ge=SCHEMA_VERSION, le=SCHEMA_VERSION),
    }

    def as_dict(node: Any) -> Any:
        if isinstance(node, list):
            return [as_dict(x) for x in node]
        if not isinstance(node, dict):
            return node
        if node.get("type") == "function-after" and node["function"]["function"] in substitutes:
            return substitutes[node["function"]["function"]](node)
        if node.get("type") == "model":
            fields = node["schema"]["fields"]
            return core_schema.typed_dict_schema(
                {
                    name: core_schema.typed_dict_field(
                        as_dict(spec["schema"]), required=spec["schema"]["type"] != "default"
                    )
                    for name, spec in fields.items()
                },
                extra_behavior="forbid",
                config={**node.get("config", {}), "extra_fields_behavior": "forbid"},
            )
        return {key: as_dict(value) for key, value in node.items() if key not in ("ref", "metadata")}

    choices = {}
    for event_type, model in KNOWN.items():
        model.model_rebuild()
        choices[event_type] = as_dict(model.__pydantic_core_schema__)
    return SchemaValidator(core_schema.list_schema(core_schema.tagged_union_schema(choices, discriminator="type")))


def accepted(fields: dict[str, Any]) -> bool:
    """The checks of :func:`fast_validator` that run after it, on its output: the rest of
    :func:`~pipeline.utc.is_canonical_time` (the form was checked natively) and :func:`is_reserved_id`."""
    at, event_id = fields["at"], fields["id"]
    if at is not None:
        if at.endswith(".000000Z"):
            return False
        try:
            datetime.fromisoformat(at[:-1])
        except ValueError:
            return False
    return event_id is None or not is_reserved_id(event_id)


def _validate(items: list[Any], *, as_json: bool) -> list[dict[str, Any] | None]:
    """The fast lane's verdict on each item: its validated fields, or None (the slow lane decides)."""
    out: list[dict[str, Any] | None] = [None] * len(items)
    todo = list(range(len(items)))
    validator = fast_validator()
    while todo:
        batch = [items[i] for i in todo]
        try:
            done = (
                validator.validate_json(b"[" + b",".join(batch) + b"]") if as_json else validator.validate_python(batch)
            )
        except ValidationError as exc:
            failed = {e["loc"][0] for e in exc.errors(include_url=False) if e["loc"] and isinstance(e["loc"][0], int)}
            if not failed:  # not JSON at all: no item can be named, so each is tried alone
                for i in todo:
                    with contextlib.suppress(ValidationError):
                        fields = validator.validate_json(b"[" + items[i] + b"]")[0]
                        out[i] = fields if accepted(fields) else None
                return out
            todo = [i for k, i in enumerate(todo) if k not in failed]
            continue
        for i, fields in zip(todo, done, strict=True):
            if accepted(fields):
                out[i] = fields
        break
    return out


@dataclass
class Batch:
    """A validated batch: the lines to write per stream, and the id of every event in input order (blank lines,
    skipped, are counted in ``blank``)."""

    lines: dict[str, list[bytes]] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)
    unknown_types: dict[str, int] = field(default_factory=dict)
    blank: int = 0

    def __len__(self) -> int:
        return sum(len(todo) for todo in self.lines.values())


class Rendered:
    """Per item of a batch: its stream, line and id, or its error (:func:`render`)."""

    def __init__(self, n: int, latest: str | None = None, skew: timedelta = MAX_FUTURE) -> None:
        self.stream: list[str | None] = [None] * n
        self.line: list[bytes | None] = [None] * n
        self.id: list[str | None] = [None] * n
        self.errors: dict[int, InvalidEvent] = {}
        self.unknown: dict[str, int] = {}
        self.blank: set[int] = set()  # blank lines (raw items of only whitespace): skipped, counted
        self.latest = latest  # the latest time an event may carry (None: any)
        self.skew = skew

    def future(self, at: str | None) -> InvalidEvent | None:
        """The error of an event time past :attr:`latest` (None: none, or any time allowed)."""
        if at is None or self.latest is None:
            return None
        reason = future_reason(at, self.latest, self.skew)
        return InvalidEvent(reason, field="at") if reason is not None else None


def render(
    events: Iterable[Item],
    *,
    source: str = "<input>",
    max_bytes: int = DEFAULT_MAX_LINE_BYTES,
    now: str | None = None,
    allow_types: Iterable[str] = (),
    fast_from: int = FAST_FROM,
    future: timedelta | None = MAX_FUTURE,
) -> Rendered:
    """Validate and render every item (see :func:`prepare`), keeping each item's outcome. Batches of at least
    ``fast_from`` items take the fast lane first."""
    items: list[Any] = list(events)  # a copy: str items are encoded in place
    now = now or format_timestamp(utc_now())
    latest = latest_time(datetime.fromisoformat(now[:-1]), future) if future is not None else None
    out = Rendered(len(items), latest, future if future is not None else MAX_FUTURE)
    slow: list[int] = []
    if len(items) >= fast_from:
        with collector_paused():
            slow = _fast_lanes(items, out, max_bytes, now, source)
    else:
        slow = list(range(len(items)))
    allowed = frozenset(allow_types)
    for i in slow:
        if _is_blank(items[i]):
            out.blank.add(i)
            continue
        _slow_lane(items[i], i, out, max_bytes, now, source, allowed)
    return out


def _is_blank(item: Any) -> bool:
    """A raw line of nothing but whitespace (a trailing newline, a blank line between events): skipped."""
    if isinstance(item, str):
        return not item.strip()
    return isinstance(item, (bytes, bytearray, memoryview)) and not bytes(item).strip()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the fast lanes build many short-lived, acyclic dicts: its
    passes over them cost a third of the validation time (measured), and reclaim nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _fast_lanes(items: list[Any], out: Rendered, max_bytes: int, now: str, source: str) -> list[int]:
    """Run the raw and mapping lanes over ``items``; return the items left to the slow lane, in order."""
    slow: list[int] = []
    raw: list[int] = []
    maps: list[int] = []
    for i, item in enumerate(items):
        kind = type(item)
        if kind is bytes:
            raw.append(i)
        elif kind is dict:
            maps.append(i)
        elif kind is str:
            items[i] = item.encode("utf-8", "surrogatepass")
            raw.append(i)
        else:
            slow.append(i)
    for start in range(0, len(raw), _CHUNK):
        slow += _raw_lane(items, raw[start : start + _CHUNK], out, max_bytes, now)
    for start in range(0, len(maps), _CHUNK):
        slow += _map_lane(items, maps[start : start + _CHUNK], out, max_bytes, now, source)
    return sorted(slow)


def prepare(
    events: Iterable[Item],
    *,
    source: str = "<input>",
    max_bytes: int = DEFAULT_MAX_LINE_BYTES,
    now: str | None = None,
    allow_types: Iterable[str] = (),
    future: timedelta | None = MAX_FUTURE,
) -> Batch:
    """Validate a whole batch and render its lines; raise :class:`InvalidBatch` with every bad item.

    An item is an event model, a mapping (what a dispatcher passes) or one raw JSON line (bytes or str). Item
    ``i`` (1-based) is reported as ``source:i``; a raw line of only whitespace is skipped and counted. ``id`` and
    ``at`` are filled when absent (and named in ``filled``), ``at`` is normalised to UTC, unknown fields are kept
    as given. An unknown type one edit away from a v1 type (a case apart included) is refused (a typo) unless
    ``allow_types`` names it; a time more than ``future`` after ``now`` is refused (None: any time).
    """
    out = render(events, source=source, max_bytes=max_bytes, now=now, allow_types=allow_types, future=future)
    if out.errors:
        raise InvalidBatch([out.errors[i] for i in sorted(out.errors)])
    lines: dict[str, list[bytes]] = {stream: [] for stream in STREAMS}
    for i, (stream, line) in enumerate(zip(out.stream, out.line, strict=True)):
        if i not in out.blank:
            lines[stream].append(line)  # type: ignore[index,arg-type]
    return Batch(
        lines={stream: todo for stream, todo in lines.items() if todo},
        ids=[event_id for i, event_id in enumerate(out.id) if i not in out.blank],  # type: ignore[misc]
        unknown_types=out.unknown,
        blank=len(out.blank),
    )


def _raw_lane(items: list[Any], chunk: Sequence[int], out: Rendered, max_bytes: int, now: str) -> list[int]:
    """Raw lines: validate the plainly valid ones in one call; return the items left to the slow lane."""
    slow: list[int] = []
    candidates: list[int] = []
    for i in chunk:
        line = items[i]
        if len(line) <= max_bytes and line.startswith(b"{") and line.endswith(b"}"):
            candidates.append(i)
        else:
            slow.append(i)
    lines = [items[i] for i in candidates]
    fields = _validate(lines, as_json=True)
    blob = b"".join(lines)
    loose = any(ws in blob for ws in _WHITESPACE)  # some line may not be compact: check the lines with whitespace
    fresh = iter(new_ids(len(lines)))
    filled_at = b'"at":"' + now.encode() + b'",'
    for i, line, valid in zip(candidates, lines, fields, strict=True):
        if valid is None or (loose and any(ws in line for ws in _WHITESPACE) and re.search(_LOOSE, line)):
            slow.append(i)
            continue
        event_id, at = valid["id"], valid["at"]
        head = b"{"
        if event_id is None:
            if b'"id"' in line:  # an explicit null, or a field value that looks like the key
                slow.append(i)
                continue
            event_id = next(fresh)
            head += b'"id":"' + event_id.encode() + b'",'
        if at is None:
            if b'"at"' in line:
                slow.append(i)
                continue
            head += filled_at
        elif line.count(b'"at":') != 1 or f'"at":"{at}"'.encode() not in line:
            slow.append(i)  # its time is not written in the normalised form (an escape, a second key)
            continue
        elif out.future(at) is not None:
            slow.append(i)  # the per-line path names the problem
            continue
        if len(head) > 1:
            if valid["filled"] is not None or b'"filled"' in line:
                slow.append(i)  # filled fields to merge with the ones it names
                continue
            head += _FILLED[(valid["id"] is None, at is None)]
        if len(head) == 1:
            written = line + b"\n"  # valid, compact and complete: its own bytes
        else:
            written = head + line[1:] + b"\n"
            if len(written) - 1 > max_bytes:
                slow.append(i)  # the slow lane names the length of the line as it would be stored
                continue
        out.stream[i], out.line[i], out.id[i] = stream_of(valid["type"]), written, event_id
    return slow


#: The ``filled`` field ``append`` records, by (id filled, at filled).
_FILLED = {
    (True, True): b'"filled":["id","at"],',
    (True, False): b'"filled":["id"],',
    (False, True): b'"filled":["at"],',
}


def filled_fields(given: Sequence[str] | None, id_filled: bool, at_filled: bool) -> list[str] | None:
    """The ``filled`` an appended line records: the fields it named as filled and those this append filled."""
    now = {"id": id_filled, "at": at_filled}
    names: list[str] = [name for name in FILLABLE if now[name] or (given is not None and name in given)]
    if not id_filled and not at_filled:
        return list(given) if given is not None else None
    return names


def _map_lane(
    items: list[Any], chunk: Sequence[int], out: Rendered, max_bytes: int, now: str, source: str
) -> list[int]:
    """Mappings: validate in one call, render each as the per-line path does; return the items left over."""
    slow: list[int] = []
    maps = [items[i] for i in chunk]
    fields = _validate(maps, as_json=False)
    fresh = iter(new_ids(len(maps)))
    for i, data, valid in zip(chunk, maps, fields, strict=True):
        if valid is None:
            slow.append(i)
            continue
        event_id = valid["id"] or next(fresh)
        problem = out.future(valid["at"])
        try:
            if problem is not None:
                raise problem
            line = encode_line(
                with_head(
                    data,
                    type=valid["type"],
                    v=valid["v"],
                    id=event_id,
                    at=valid["at"] or now,
                    filled=filled_fields(valid["filled"], valid["id"] is None, valid["at"] is None),
                ),
                max_bytes=max_bytes,
            )
        except InvalidEvent as exc:
            out.errors[i] = exc.located(source=source, line=i + 1)
            continue
        out.stream[i], out.line[i], out.id[i] = stream_of(valid["type"]), line, event_id
    return slow


def _slow_lane(
    item: Any, i: int, out: Rendered, max_bytes: int, now: str, source: str, allowed: frozenset[str]
) -> None:
    """The per-line path: every verdict and reason, unknown types and their typos."""
    event: Event
    try:
        if type(item) is dict:
            data = item
            event = validate_object(data)
        elif isinstance(item, Event):
            event, data = item, item.model_dump(mode="json", exclude_unset=True)
        else:
            if isinstance(item, (bytes, bytearray, memoryview, str)):
                data = decode_line(item if isinstance(item, (bytes, str)) else bytes(item), max_bytes=max_bytes)
            else:
                data = dict(item) if isinstance(item, Mapping) else item
            event = validate_object(data)
        if event.type not in KNOWN:
            _check_type(event.type, allowed)
        problem = out.future(event.at)
        if problem is not None:
            raise problem
        event_id = event.id or new_id()
        filled = filled_fields(event.filled, event.id is None, event.at is None)
        line = encode_line(
            with_head(data, type=event.type, v=event.v, id=event_id, at=event.at or now, filled=filled),
            max_bytes=max_bytes,
        )
    except InvalidEvent as exc:
        out.errors[i] = exc.located(source=source, line=i + 1)
        return
    out.stream[i], out.line[i], out.id[i] = stream_of(event.type), line, event_id
    if event.type not in KNOWN:
        out.unknown[event.type] = out.unknown.get(event.type, 0) + 1


def _check_type(event_type: str, allowed: frozenset[str]) -> None:
    """Refuse an unknown type one edit away from a v1 type (a typo), unless it is allowed by name."""
    near = nearest_type(event_type)
    if near is not None and near[0] == 1 and event_type not in allowed:
        raise InvalidEvent(
            f"{event_type!r} is not a v1 event type: did you mean {near[1]}? "
            f"(to keep it as a type of its own, allow it: --allow-type {event_type})",
            field="type",
        )
