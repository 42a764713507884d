"""Events of schema v1 (docs/design.md, Events): the one spec of each event type, and the one line parser.

The models below are the spec. A field's annotation is its JSON type and bounds, its default the value a line
that omits it means, a :class:`Column` marker the store column it fills when that column has another name; the
class names its ``family`` (the store's partition and view) and its ``stream``. Everything else that knows the
schema is derived from them (:mod:`pipeline.streams.spec`): the fast batch validator, the compactor's Arrow
schema and its per-event rows, the store's columns and defaults, the JSON Schema and the simulator's lines. To
add a field, add it here.

Every model is built lazily (``defer_build``): appending one rating builds the
rating model only, which keeps the CLI's start-up small. Unknown fields are
kept (``extra="allow"``); an unknown ``type`` becomes an :class:`OtherEvent`
(family ``other``), kept and ignored by the fit.

Validation is strict: ``"1"`` is not a number and ``true`` is not an int.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic_core import to_json

from ..errors import InvalidEvent
from ..utc import utc_timestamp
from ..workspace import EVENTS_SCHEMA_FILE

SCHEMA_VERSION = 1
DEFAULT_MAX_LINE_BYTES = 1 << 20  # 1 MiB (docs/design.md, Events)
MAX_NESTING = 64  # deeper JSON is rejected before it can exhaust the stack

# Numbers are bounded where they enter (docs/design.md, events): generous for any real task, and small enough
# that no sum or product in the fit overflows a 64-bit float (1e6 weights x 1e6 costs x millions of ratings).
MAX_WEIGHT = 1e6  # precision, confidence (<= 1 anyway), importance, a rejection's weight
MAX_COST_USD = 1e6  # cost of one attempt
MAX_COUNT = 10**12  # durations in ms and trace counts

#: An id of this form is what the compactor gives an id-less line (``[<writer>:]<stream>@<byte offset>``):
#: reserved, so that an explicit id can never collide with one.
RESERVED_ID = re.compile(r"(?:[^:]+:)?(?:tasks|ratings)@[0-9]+")

Timestamp = Annotated[str, AfterValidator(utc_timestamp), WithJsonSchema({"type": "string", "format": "date-time"})]
NonEmpty = Annotated[str, Field(min_length=1)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveUnit = Annotated[float, Field(gt=0.0, le=1.0)]
Weight = Annotated[float, Field(ge=0.0, le=MAX_WEIGHT)]
CostUsd = Annotated[float, Field(ge=0.0, le=MAX_COST_USD)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


def is_reserved_id(value: str) -> bool:
    """Whether ``value`` has the form the compactor gives to id-less lines (refused as an explicit id)."""
    return "@" in value and RESERVED_ID.fullmatch(value) is not None


def free_id(value: str) -> str:
    if is_reserved_id(value):
        raise ValueError(
            f"id {value!r} has the form <stream>@<offset> that the compactor gives to lines without an id; choose "
            "another id (a ULID or UUID) or leave it out"
        )
    return value


def known_major(value: int) -> int:
    if value != SCHEMA_VERSION:
        raise ValueError(
            f"schema version {value} is not one this reader knows (it reads v{SCHEMA_VERSION}); "
            "upgrade the pipeline to read it"
        )
    return value


EventId = Annotated[str, Field(min_length=1), AfterValidator(free_id)]
Filled = Literal["id", "at"]
#: The fields ``append`` fills, in the order it records them.
FILLABLE: tuple[Filled, ...] = ("id", "at")
MajorVersion = Annotated[int, Field(ge=1, json_schema_extra={"maximum": SCHEMA_VERSION}), AfterValidator(known_major)]

_STRICT = ConfigDict(strict=True, frozen=True, defer_build=True, allow_inf_nan=False)


@dataclass(frozen=True)
class Column:
    """The store column a field fills, when its name is not the field's (``Annotated[..., Column("name")]``)."""

    name: str


# --------------------------------------------------------------------------- config key
def _encode_part(part: str | None) -> str:
    if part is None:
        return "-"
    if part == "-":
        return "%2D"
    return part.replace("%", "%25").replace("/", "%2F")


def _decode_part(text: str) -> str | None:
    if text == "-":
        return None
    return re.sub(r"%(25|2F|2f|2D|2d)", lambda m: {"25": "%", "2F": "/", "2D": "-"}[m.group(1).upper()], text)


class Config(BaseModel):
    """A configuration: which CLI, route, model and effort did the work."""

    model_config = ConfigDict(strict=True, frozen=True, defer_build=True, extra="forbid")

    cli: NonEmpty
    route: str | None = None
    model: NonEmpty
    effort: str | None = None

    @property
    def key(self) -> str:
        """``cli/route/model/effort``; ``%`` and ``/`` percent-encoded, null as ``-``, a part ``-`` as ``%2D``."""
        return config_key(self.cli, self.route, self.model, self.effort)

    @classmethod
    def from_key(cls, key: str) -> Config:
        parts = key.split("/")
        if len(parts) != 4:
            raise ValueError(f"config key {key!r} must have 4 parts separated by '/', found {len(parts)}")
        cli, route, model, effort = (_decode_part(p) for p in parts)
        return cls.model_validate({"cli": cli, "route": route, "model": model, "effort": effort})


def config_key(cli: str, route: str | None, model: str, effort: str | None) -> str:
    """The one implementation of the config key (docs/design.md, Events), shared with the vectorised compactor."""
    return "/".join(_encode_part(p) for p in (cli, route, model, effort))


class Rater(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, defer_build=True, extra="allow")

    kind: Literal["gate", "reviewer", "human"]
    name: NonEmpty


# --------------------------------------------------------------------------- events
class Event(BaseModel):
    """Fields every event has. ``id`` and ``at`` are filled by ``append`` when absent."""

    model_config = ConfigDict(**_STRICT, extra="allow")

    #: The store family (partition and view) of the type; ``other`` for a type v1 does not know.
    family: ClassVar[str] = "other"
    #: The stream the type is appended to.
    stream: ClassVar[Literal["tasks", "ratings"]] = "tasks"

    def __init_subclass__(
        cls, *, family: str = "other", stream: Literal["tasks", "ratings"] = "tasks", **kwargs: Any
    ) -> None:
        """An event type names its family and stream in its class line: ``class TaskRated(Event,
        family="ratings", stream="ratings")``."""
        super().__init_subclass__(**kwargs)
        cls.family, cls.stream = family, stream

    id: EventId | None = None
    type: NonEmpty
    at: Timestamp | None = None
    v: MajorVersion = SCHEMA_VERSION
    #: The common fields ``append`` filled in (it draws an ``id`` and takes the time of the append as ``at``): a
    #: retry of the same event is recognised by its id although its filled ``at`` differs (docs/design.md, Storage).
    filled: list[Filled] | None = None

    @property
    def extra(self) -> dict[str, Any]:
        """Fields the schema does not know, kept as they came."""
        return dict(self.__pydantic_extra__ or {})


class TaskOpened(Event, family="tasks"):
    type: Literal["task.opened"] = "task.opened"
    task: NonEmpty
    region: NonEmpty = "general"
    title: str | None = None
    labels: dict[str, str] | None = None
    thread: str | None = None


AttemptStatus = Literal["success", "failure", "vacuous", "blocked", "escalated", "unknown"]


class TaskAttempted(Event, family="attempts"):
    type: Literal["task.attempted"] = "task.attempted"
    task: NonEmpty
    config: Config
    status: AttemptStatus
    cost_usd: CostUsd | None = None
    duration_ms: Count | None = None
    node: str | None = None
    prompt_version: str | None = None
    reviewer_verdict: str | None = None
    tool_calls: Count | None = None
    files_read: Count | None = None
    files_written: Count | None = None


class RouteDecided(Event, family="decisions"):
    type: Literal["route.decided"] = "route.decided"
    task: NonEmpty
    policy: NonEmpty
    chosen: NonEmpty
    candidates: list[NonEmpty]
    propensity: PositiveUnit
    table: Annotated[str | None, Column("table_version")] = None  # TABLE is an SQL keyword
    explored: bool = False
    reason: str = ""
    predicted_quality: Unit | None = None
    # The configs that had already failed on the task when it was decided (an escalation: its outcome is evidence
    # about failed tasks only, docs/design.md, Evidence gate); null or absent for a first decision. AFTER is an
    # SQL keyword: the store column is after_failed.
    after: Annotated[list[NonEmpty] | None, Column("after_failed")] = None


class TaskClosed(Event, family="closures"):
    type: Literal["task.closed"] = "task.closed"
    task: NonEmpty
    outcome: Literal["done", "escalated", "abandoned"]


class Judgment(Event):
    """What a rater said of one config's work on one task: a rating or a rejection (not a type of its own)."""

    task: NonEmpty
    config: Config
    rater: Rater


class TaskRated(Judgment, family="ratings", stream="ratings"):
    type: Literal["task.rated"] = "task.rated"
    score: Unit
    precision: PositiveUnit = 1.0
    confidence: PositiveUnit = 1.0
    importance: Weight = 1.0


class TaskRejected(Judgment, family="rejections", stream="ratings"):
    type: Literal["task.rejected"] = "task.rejected"
    claim: NonEmpty
    evidence: list[str]
    weight: Weight = 1.0


class RatingRetracted(Event, family="retractions", stream="ratings"):
    type: Literal["rating.retracted"] = "rating.retracted"
    rating: NonEmpty
    reason: NonEmpty


class OtherEvent(Event):
    """An event of a type v1 does not know: kept, stored in family ``other``, ignored by the fit."""


#: The v1 types and their models, in the order of the JSON Schema's branches.
KNOWN: dict[str, type[Event]] = {
    model.model_fields["type"].default: model
    for model in (TaskOpened, TaskAttempted, RouteDecided, TaskClosed, TaskRated, TaskRejected, RatingRetracted)
}

#: Types no event may have: they name the frame lines around a batch (``pipeline.streams.scan``).
RESERVED_TYPES = frozenset({"batch.begin", "batch.end"})

#: Which stream each type is appended to (the model's ``stream``). Unknown types go to ``tasks``.
RATING_TYPES = frozenset(t for t, model in KNOWN.items() if model.stream == "ratings")

#: Store family per type (the model's ``family``; docs/design.md, Storage). Unknown types: ``other``.
FAMILY: dict[str, str] = {t: model.family for t, model in KNOWN.items()}

AnyEvent = (
    TaskOpened | TaskAttempted | RouteDecided | TaskClosed | TaskRated | TaskRejected | RatingRetracted | OtherEvent
)


def stream_of(event_type: str) -> str:
    return "ratings" if event_type in RATING_TYPES else "tasks"


def model_for(event_type: str) -> type[Event]:
    return KNOWN.get(event_type, OtherEvent)


def edit_distance(a: str, b: str) -> int:
    """Edits (insert, delete, replace one character, or swap two neighbours) that turn ``a`` into ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            cost = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            current.append(cost)
        previous2, previous = previous, current
    return previous[-1]


def nearest_type(event_type: str) -> tuple[int, str] | None:
    """The v1 type closest to an unknown ``event_type`` (edits, name) when it is at most two edits away.

    Letters are compared without their case, and a type that differs from a v1 type only in case is one edit away
    (``Task.Opened``: a typo of ``task.opened``), so ``append`` refuses it like any other typo."""
    if event_type in KNOWN:
        return None
    folded = event_type.lower()
    distance, name = min((max(edit_distance(folded, known), 1), known) for known in KNOWN)
    return (distance, name) if distance <= 2 else None


# --------------------------------------------------------------------------- parsing
# Cheap scans that rule a rare problem out for almost every line; only a line they flag gets the full check.
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # an escaped UTF-16 surrogate
_LONGEST_INT = sys.int_info.default_max_str_digits  # json.loads refuses integers with more digits (4300)


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not allowed (JSON numbers must be finite)")


def _finite_float(text: str) -> float:
    """``float`` for ``json.loads``, which would turn 1e999 into infinity. Called once per float token."""
    value = float(text)
    if value - value != 0.0:  # only an infinity gives NaN here
        raise ValueError(f"number {text[:24]}{'...' if len(text) > 24 else ''} does not fit a 64-bit float")
    return value


def _too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def decode_line(raw: bytes | str, *, max_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Any:
    """The byte-level half of :func:`parse_line`: the JSON value of one line, or :class:`InvalidEvent`.

    Rejects lines over ``max_bytes`` (the trailing newline not counted), invalid UTF-8,
    invalid JSON, NaN/Infinity and numbers too large for a float, nesting deeper than
    ``MAX_NESTING`` and escaped lone surrogates (not Unicode text, so not storable).
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    elif not isinstance(raw, bytes):
        raw = bytes(raw)
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if len(raw) > max_bytes:
        raise InvalidEvent(f"line is {len(raw)} bytes, over the limit of {max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidEvent(f"not valid UTF-8 at byte {exc.start}") from None
    if not text or text.isspace():  # isspace stops at the first other character; strip would copy
        raise InvalidEvent("empty line")
    try:
        obj = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise InvalidEvent(f"JSON nested deeper than {MAX_NESTING} levels") from None
    except json.JSONDecodeError as exc:
        raise InvalidEvent(f"not valid JSON: {exc}") from None
    except ValueError as exc:  # our NaN/Infinity/huge-float rejections, Python's 4300-digit int limit
        raise InvalidEvent(str(exc)) from None
    if raw.count(b"{") + raw.count(b"[") > MAX_NESTING and _too_deep(obj):
        raise InvalidEvent(f"JSON nested deeper than {MAX_NESTING} levels")
    if "\\u" in text and _MAYBE_SURROGATE.search(text) and _has_lone_surrogate(obj):
        raise InvalidEvent("contains an escaped lone UTF-16 surrogate (\\ud800-\\udfff), which is not text")
    return obj


def _field_path(loc: tuple) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.startswith(("function-", "literal[")))]
    return ".".join(parts) or "-"


#: At most this many problems of one line are named; a count of the others follows them.
MAX_PROBLEMS = 10


def validate_object(obj: Any) -> AnyEvent:
    """Validate one decoded JSON value as an event, or raise :class:`InvalidEvent` (no location yet).

    The reason names every problem pydantic finds, ``field: reason`` joined by ``; `` (the first field is the
    error's ``field``), at most :data:`MAX_PROBLEMS` of them and a count of the rest.
    """
    if not isinstance(obj, dict):
        raise InvalidEvent(f"expected a JSON object, got {_json_kind(obj)}")
    event_type = obj.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise InvalidEvent("required: a non-empty string naming the event type", field="type")
    if event_type in RESERVED_TYPES:
        raise InvalidEvent(
            f"{event_type!r} is reserved for the frame lines a writer puts around a batch; it is not an event type",
            field="type",
        )
    model = KNOWN.get(event_type, OtherEvent)
    try:
        return model.model_validate(obj)  # type: ignore[return-value]  # KNOWN maps each type to its model
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        problems = tuple(
            (_field_path(e["loc"]), "required field is missing" if e["type"] == "missing" else e["msg"]) for e in errors
        )
        problems = tuple((field, reason.removeprefix("Value error, ")) for field, reason in problems)
        named = problems[:MAX_PROBLEMS]
        reason = "; ".join([named[0][1], *(f"{field}: {why}" for field, why in named[1:])])
        if len(problems) > MAX_PROBLEMS:
            more = len(problems) - MAX_PROBLEMS
            reason += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise InvalidEvent(reason, field=named[0][0], problems=named) from None


def _json_kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def parse_line(
    raw: bytes | str, *, line: int | None = None, source: str = "<input>", max_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> AnyEvent:
    """Parse one raw line (without or with its trailing newline) into an event.

    Raises :class:`InvalidEvent` naming ``source:line``, the field and the reason for
    every way a line can be wrong: too long, not UTF-8, not JSON, NaN/Infinity,
    too deeply nested, not an object, wrong type, value out of range.
    """
    try:
        return validate_object(decode_line(raw, max_bytes=max_bytes))
    except InvalidEvent as exc:
        if line is not None:
            raise exc.located(source=source, line=line) from None
        raise InvalidEvent(exc.reason, field=exc.field, source=source, problems=exc.problems) from None


def with_head(
    data: dict[str, Any],
    *,
    type: str,
    v: int,
    id: str | None,
    at: str | None,
    filled: list[str] | None = None,
) -> dict[str, Any]:
    """``data`` (a validated event's fields) with the common fields first: ``id``, ``type``, ``at``, ``v``, and
    ``filled`` when ``append`` filled some of them (``filled``: every field it filled, the event's own included).

    ``at`` is the normalised time (or the one ``append`` filled); a ``None`` id or time is left out.
    """
    out: dict[str, Any] = {"id": id, "type": type, "at": at, "v": v, **({"filled": filled} if filled else {}), **data}
    # a key of ``data`` keeps the position given above; its value is replaced by the normalised one
    out["id"], out["type"], out["at"], out["v"] = id, type, at, v
    if filled:
        out["filled"] = filled
    if id is None:
        del out["id"]
    if at is None:
        del out["at"]
    return out


def encode_line(data: dict[str, Any], *, max_bytes: int = DEFAULT_MAX_LINE_BYTES) -> bytes:
    """One NDJSON line (compact UTF-8 JSON, ``\\n``-terminated) that :func:`decode_line` reads back.

    Raises :class:`InvalidEvent` for what a reader would reject (NaN, over-long, too deep,
    lone surrogates) or what is not JSON at all, so a writer never leaves an unreadable line.
    """
    try:
        body = to_json(data, inf_nan_mode="constants")
    except (ValueError, TypeError, RecursionError) as exc:  # PydanticSerializationError is a ValueError
        raise InvalidEvent(f"not serialisable as JSON: {exc}") from None
    if len(body) > max_bytes:
        raise InvalidEvent(f"line is {len(body)} bytes, over the limit of {max_bytes}")
    if (
        b"NaN" in body
        or b"Infinity" in body
        or body.count(b"{") + body.count(b"[") > MAX_NESTING
        or (len(body) > _LONGEST_INT and len(body) - len(body.translate(None, b"0123456789")) > _LONGEST_INT)
    ):
        decode_line(body, max_bytes=max_bytes)  # the reader's own checks decide
    return body + b"\n"


def to_json_line(event: Event, *, max_bytes: int = DEFAULT_MAX_LINE_BYTES) -> bytes:
    """Serialise an event as one NDJSON line: compact, UTF-8, ``\\n``-terminated, common fields first.

    Only fields that were set (or filled by ``append``) are written, so a line reads
    back as the same event and unknown fields survive.
    """
    data = event.model_dump(mode="json", exclude_unset=True)
    return encode_line(with_head(data, type=event.type, v=event.v, id=event.id, at=event.at), max_bytes=max_bytes)


# --------------------------------------------------------------------------- JSON Schema
def events_json_schema() -> dict[str, Any]:
    """JSON Schema of a v1 line, generated from the models: one ``oneOf`` branch per known type,
    and one for any other type (kept, ignored by the fit). ``type`` is required in every branch."""
    from pydantic import TypeAdapter

    models: tuple[type[Event], ...] = (*KNOWN.values(), OtherEvent)
    schema = TypeAdapter(Union[models]).json_schema(mode="validation")  # type: ignore[arg-type]  # noqa: UP007
    defs = schema["$defs"]
    for model in models:
        branch = defs[model.__name__]
        branch["required"] = ["type", *(name for name in branch.get("required", []) if name != "type")]
    defs["OtherEvent"]["properties"]["type"]["not"] = {"enum": sorted(KNOWN)}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": EVENTS_SCHEMA_FILE,
        "title": "ratings pipeline events, schema v1",
        "description": "One JSON object per line (UTF-8, newline-terminated, at most 1 MiB). Unknown fields are "
        "kept; an event of an unknown type is kept and ignored by the fit.",
        "oneOf": schema["anyOf"],
        "$defs": defs,
    }


def events_schema_text() -> str:
    """The canonical text of ``streams/events-v1.schema.json``: sorted keys, indent 2, trailing newline."""
    return json.dumps(events_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_events_schema(home: str | os.PathLike[str] = ".") -> Path:
    """Write ``streams/events-v1.schema.json`` of the home (``make schema`` / ``python -m pipeline.streams.events``)."""
    from ..workspace import Workspace

    ws = Workspace.resolve(home)
    ws.write(ws.events_schema, events_schema_text().encode("utf-8"))
    return ws.events_schema


if __name__ == "__main__":
    print(write_events_schema(sys.argv[1] if len(sys.argv) > 1 else "."))
