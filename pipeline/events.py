"""Events of schema v1 (DESIGN 3): frozen pydantic models and one line parser.

Every model is built lazily (``defer_build``): appending one rating builds the
rating model only, which keeps the CLI's start-up small. Unknown fields are
kept (``extra="allow"``); an unknown ``type`` becomes an :class:`OtherEvent`
(family ``other``), kept and ignored by the fit.

Validation is strict: ``"1"`` is not a number and ``true`` is not an int.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidEvent

SCHEMA_VERSION = 1
DEFAULT_MAX_LINE_BYTES = 1 << 20  # 1 MiB, DESIGN 3
MAX_NESTING = 64  # deeper JSON is rejected before it can exhaust the stack

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"
)


def _utc_timestamp(value: str) -> str:
    """Accept an RFC 3339 timestamp with a zone; return it in UTC as ``...Z``.

    Microsecond precision: finer digits are truncated, which keeps ordering.
    """
    if not _RFC3339.match(value):
        raise ValueError("not an RFC 3339 timestamp with a time zone (e.g. 2026-01-31T12:00:00Z)")
    text = value.replace("t", "T").replace(" ", "T").replace("z", "Z")
    frac = re.search(r"\.(\d+)", text)
    if frac and len(frac.group(1)) > 6:
        text = text.replace(frac.group(0), "." + frac.group(1)[:6])
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"not a valid date or time: {exc}") from None
    return format_timestamp(parsed)


def format_timestamp(moment: datetime) -> str:
    """The one textual form of a time in streams and outputs: UTC, ``Z``, micro-seconds when present."""
    moment = moment.astimezone(timezone.utc)
    if moment.microsecond:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


Timestamp = Annotated[str, AfterValidator(_utc_timestamp)]
NonEmpty = Annotated[str, Field(min_length=1)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]
PositiveUnit = Annotated[float, Field(gt=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
Count = Annotated[int, Field(ge=0)]

_STRICT = ConfigDict(strict=True, frozen=True, defer_build=True, allow_inf_nan=False)


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
    def from_key(cls, key: str) -> "Config":
        parts = key.split("/")
        if len(parts) != 4:
            raise ValueError(f"config key {key!r} must have 4 parts separated by '/', found {len(parts)}")
        cli, route, model, effort = (_decode_part(p) for p in parts)
        return cls(cli=cli, route=route, model=model, effort=effort)


def config_key(cli: str, route: str | None, model: str, effort: str | None) -> str:
    """The one implementation of the config key (DESIGN 3), shared with the vectorised compactor."""
    return "/".join(_encode_part(p) for p in (cli, route, model, effort))


class Rater(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, defer_build=True, extra="allow")

    kind: Literal["gate", "reviewer", "human"]
    name: NonEmpty


# --------------------------------------------------------------------------- events
class Event(BaseModel):
    """Fields every event has. ``id`` and ``at`` are filled by ``append`` when absent."""

    model_config = ConfigDict(**_STRICT, extra="allow")

    id: NonEmpty | None = None
    type: NonEmpty
    at: Timestamp | None = None
    v: Annotated[int, Field(ge=1)] = SCHEMA_VERSION

    @property
    def extra(self) -> dict[str, Any]:
        """Fields the schema does not know, kept as they came."""
        return dict(self.__pydantic_extra__ or {})


class TaskOpened(Event):
    type: Literal["task.opened"] = "task.opened"
    task: NonEmpty
    region: NonEmpty = "general"
    title: str | None = None
    labels: dict[str, str] | None = None
    thread: str | None = None


AttemptStatus = Literal["success", "failure", "vacuous", "blocked", "escalated", "unknown"]


class TaskAttempted(Event):
    type: Literal["task.attempted"] = "task.attempted"
    task: NonEmpty
    config: Config
    status: AttemptStatus
    cost_usd: NonNegative | None = None
    duration_ms: Count | None = None
    node: str | None = None
    prompt_version: str | None = None
    reviewer_verdict: str | None = None
    tool_calls: Count | None = None
    files_read: Count | None = None
    files_written: Count | None = None


class RouteDecided(Event):
    type: Literal["route.decided"] = "route.decided"
    task: NonEmpty
    policy: NonEmpty
    chosen: NonEmpty
    candidates: list[NonEmpty]
    propensity: PositiveUnit
    table: str | None = None
    explored: bool = False
    reason: str = ""
    predicted_quality: Unit | None = None


class TaskClosed(Event):
    type: Literal["task.closed"] = "task.closed"
    task: NonEmpty
    outcome: Literal["done", "escalated", "abandoned"]


class TaskRated(Event):
    type: Literal["task.rated"] = "task.rated"
    task: NonEmpty
    config: Config
    rater: Rater
    score: Unit
    precision: PositiveUnit = 1.0
    confidence: PositiveUnit = 1.0
    importance: NonNegative = 1.0


class TaskRejected(Event):
    type: Literal["task.rejected"] = "task.rejected"
    task: NonEmpty
    config: Config
    rater: Rater
    claim: NonEmpty
    evidence: list[str]
    weight: NonNegative = 1.0


class RatingRetracted(Event):
    type: Literal["rating.retracted"] = "rating.retracted"
    rating: NonEmpty
    reason: NonEmpty


class OtherEvent(Event):
    """An event of a type v1 does not know: kept, stored in family ``other``, ignored by the fit."""


KNOWN: dict[str, type[Event]] = {
    "task.opened": TaskOpened,
    "task.attempted": TaskAttempted,
    "route.decided": RouteDecided,
    "task.closed": TaskClosed,
    "task.rated": TaskRated,
    "task.rejected": TaskRejected,
    "rating.retracted": RatingRetracted,
}

#: Which stream each type is appended to. Unknown types go to ``tasks``.
RATING_TYPES = frozenset({"task.rated", "task.rejected", "rating.retracted"})

#: Store family per type (DESIGN 4 / compaction). Unknown types: ``other``.
FAMILY: dict[str, str] = {
    "task.opened": "tasks",
    "task.attempted": "attempts",
    "task.rated": "ratings",
    "task.rejected": "rejections",
    "rating.retracted": "retractions",
    "route.decided": "decisions",
    "task.closed": "closures",
}

AnyEvent = Union[TaskOpened, TaskAttempted, RouteDecided, TaskClosed, TaskRated, TaskRejected, RatingRetracted, OtherEvent]


def stream_of(event_type: str) -> str:
    return "ratings" if event_type in RATING_TYPES else "tasks"


def model_for(event_type: str) -> type[Event]:
    return KNOWN.get(event_type, OtherEvent)


# --------------------------------------------------------------------------- parsing
def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not allowed (JSON numbers must be finite)")


def _depth_ok(value: Any, limit: int = MAX_NESTING) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


def _field_path(loc: tuple) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.startswith(("function-", "literal[")))]
    return ".".join(parts) or "-"


def validate_object(obj: Any) -> AnyEvent:
    """Validate one decoded JSON value as an event, or raise :class:`InvalidEvent` (no location yet)."""
    if not isinstance(obj, dict):
        raise InvalidEvent(f"expected a JSON object, got {type(obj).__name__}")
    event_type = obj.get("type")
    if not isinstance(event_type, str) or not event_type:
        raise InvalidEvent("required: a non-empty string naming the event type", field="type")
    model = model_for(event_type)
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = _field_path(err["loc"])
        reason = err["msg"]
        if err["type"] == "missing":
            reason = "required field is missing"
        return _raise(InvalidEvent(reason, field=field))


def _raise(exc: Exception):
    raise exc


def parse_line(raw: bytes | str, *, line: int | None = None, source: str = "<input>",
               max_bytes: int = DEFAULT_MAX_LINE_BYTES) -> AnyEvent:
    """Parse one raw line (without or with its trailing newline) into an event.

    Raises :class:`InvalidEvent` naming ``source:line``, the field and the reason for
    every way a line can be wrong: too long, not UTF-8, not JSON, NaN/Infinity,
    too deeply nested, not an object, wrong type, value out of range.
    """
    try:
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if len(raw) > max_bytes:
            raise InvalidEvent(f"line is {len(raw)} bytes, over the limit of {max_bytes}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidEvent(f"not valid UTF-8 at byte {exc.start}") from None
        if not text.strip():
            raise InvalidEvent("empty line")
        try:
            obj = json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            raise InvalidEvent(f"JSON nested deeper than {MAX_NESTING} levels") from None
        except ValueError as exc:
            raise InvalidEvent(f"not valid JSON: {exc}") from None
        if not _depth_ok(obj):
            raise InvalidEvent(f"JSON nested deeper than {MAX_NESTING} levels")
        return validate_object(obj)
    except InvalidEvent as exc:
        raise exc.located(source=source, line=line) if line is not None else InvalidEvent(
            exc.reason, field=exc.field, source=source) from None


def to_json_line(event: Event) -> bytes:
    """Serialise an event as one canonical NDJSON line: compact, UTF-8, ``\\n``-terminated.

    Only fields that were set (or filled by ``append``) are written, so a line reads
    back as the same event and unknown fields survive.
    """
    data = event.model_dump(mode="json", exclude_unset=True, exclude_none=False)
    head = {"id": event.id, "type": event.type, "at": event.at, "v": event.v}
    data = {**{k: v for k, v in head.items() if v is not None}, **data}
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def events_json_schema() -> dict[str, Any]:
    """JSON Schema of every v1 event, one ``oneOf`` branch per known type (generated from the models)."""
    from pydantic import TypeAdapter

    adapter = TypeAdapter(Union[TaskOpened, TaskAttempted, RouteDecided, TaskClosed, TaskRated, TaskRejected, RatingRetracted])
    schema = adapter.json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "events-v1.schema.json"
    schema["title"] = "ratings pipeline events, schema v1"
    schema["description"] = (
        "One JSON object per line. Unknown fields are kept; an event of an unknown type is kept and ignored by the fit."
    )
    return schema
