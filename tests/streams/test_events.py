"""Events v1: models, the config key, the one line parser and its error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pipeline.errors import InvalidEvent
from pipeline.streams.events import (
    FAMILY,
    KNOWN,
    MAX_NESTING,
    Config,
    OtherEvent,
    RatingRetracted,
    RouteDecided,
    TaskAttempted,
    TaskClosed,
    TaskOpened,
    TaskRated,
    TaskRejected,
    config_key,
    decode_line,
    encode_line,
    events_schema_text,
    parse_line,
    stream_of,
    to_json_line,
    validate_object,
)
from pipeline.workspace import Workspace

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"cli": "claude-code", "route": "anthropic", "model": "opus", "effort": "high"}
RATER = {"kind": "gate", "name": "pytest"}

#: one minimal valid event of every known type
MINIMAL = {
    "task.opened": {"type": "task.opened", "task": "T-1"},
    "task.attempted": {"type": "task.attempted", "task": "T-1", "config": CONFIG, "status": "success", "cost_usd": 0.5},
    "route.decided": {
        "type": "route.decided",
        "task": "T-1",
        "policy": "greedy",
        "chosen": "a/-/m/-",
        "candidates": ["a/-/m/-", "b/-/m/-"],
        "propensity": 1,
    },
    "task.closed": {"type": "task.closed", "task": "T-1", "outcome": "done"},
    "task.rated": {"type": "task.rated", "task": "T-1", "config": CONFIG, "rater": RATER, "score": 0.75},
    "task.rejected": {
        "type": "task.rejected",
        "task": "T-1",
        "config": CONFIG,
        "rater": RATER,
        "claim": "tests fail",
        "evidence": ["log line 3"],
    },
    "rating.retracted": {"type": "rating.retracted", "rating": "01ABC", "reason": "wrong task"},
}
MODEL = {
    "task.opened": TaskOpened,
    "task.attempted": TaskAttempted,
    "route.decided": RouteDecided,
    "task.closed": TaskClosed,
    "task.rated": TaskRated,
    "task.rejected": TaskRejected,
    "rating.retracted": RatingRetracted,
}


def line(obj) -> bytes:
    return json.dumps(obj).encode()


# --------------------------------------------------------------------------- models
@pytest.mark.parametrize("event_type", sorted(MINIMAL))
def test_every_type_parses_into_its_model_and_stream(event_type):
    event = parse_line(line(MINIMAL[event_type]))
    assert type(event) is MODEL[event_type] is KNOWN[event_type]
    assert event.type == event_type and event.v == 1 and event.id is None and event.at is None
    assert stream_of(event_type) == (
        "ratings" if event_type in ("task.rated", "task.rejected", "rating.retracted") else "tasks"
    )
    assert event_type in FAMILY


def test_defaults_of_design_3():
    opened = parse_line(line(MINIMAL["task.opened"]))
    assert opened.region == "general"
    rated = parse_line(line(MINIMAL["task.rated"]))
    assert (rated.precision, rated.confidence, rated.importance) == (1.0, 1.0, 1.0)
    assert parse_line(line(MINIMAL["task.rejected"])).weight == 1.0
    decided = parse_line(line(MINIMAL["route.decided"]))
    assert decided.explored is False and decided.table is None and decided.propensity == 1.0


def test_events_are_frozen():
    event = parse_line(line(MINIMAL["task.rated"]))
    with pytest.raises(ValidationError):
        event.score = 0.1


@pytest.mark.parametrize(
    "given, stored",
    [
        ("2026-01-31T12:00:00Z", "2026-01-31T12:00:00Z"),
        ("2026-01-31T14:00:00+02:00", "2026-01-31T12:00:00Z"),
        ("2026-01-31t12:00:00.5z", "2026-01-31T12:00:00.500000Z"),
        ("2026-01-31 12:00:00.123456789-00:30", "2026-01-31T12:30:00.123456Z"),
        ("0999-01-01T00:00:00Z", "0999-01-01T00:00:00Z"),
    ],
)
def test_times_are_normalised_to_utc(given, stored):
    assert parse_line(line({**MINIMAL["task.closed"], "at": given})).at == stored


def test_unknown_fields_are_kept_and_written_back():
    raw = {**MINIMAL["task.rated"], "rater": {**RATER, "version": "3.1"}, "trace": {"spans": [1, 2]}, "note": None}
    event = parse_line(line(raw))
    assert event.extra == {"trace": {"spans": [1, 2]}, "note": None}
    assert event.rater.__pydantic_extra__ == {"version": "3.1"}
    written = json.loads(to_json_line(event))
    assert written["trace"] == {"spans": [1, 2]} and written["note"] is None
    assert written["rater"] == {"kind": "gate", "name": "pytest", "version": "3.1"}
    assert parse_line(to_json_line(event)) == event


def test_unknown_type_becomes_other_event_in_tasks_stream():
    event = parse_line(b'{"type":"deploy.finished","env":"prod","v":1}')
    assert type(event) is OtherEvent and event.extra == {"env": "prod"} and event.v == 1
    assert stream_of(event.type) == "tasks"
    assert event.type not in FAMILY  # family "other"
    assert json.loads(to_json_line(event)) == {"type": "deploy.finished", "v": 1, "env": "prod"}


@pytest.mark.parametrize("event_type", ["task.rated", "deploy.finished"])
def test_a_major_version_the_reader_does_not_know_is_refused(event_type):
    with pytest.raises(InvalidEvent) as info:
        parse_line(json.dumps({**MINIMAL.get(event_type, {"type": event_type}), "v": 2}), line=3, source="<stdin>")
    assert info.value.message() == (
        "<stdin>:3: v: schema version 2 is not one this reader knows (it reads v1); upgrade the pipeline to read it"
    )


@pytest.mark.parametrize("event_id", ["tasks@0", "ratings@1234", "host-a:tasks@0", "w:ratings@9"])
def test_an_id_of_the_compactors_own_form_is_reserved(event_id):
    with pytest.raises(InvalidEvent, match="has the form <stream>@<offset> that the compactor gives") as info:
        parse_line(json.dumps({**MINIMAL["task.opened"], "id": event_id}))
    assert info.value.field == "id"


@pytest.mark.parametrize("event_id", ["tasks@x", "T-1@0", "01J0000000000000000000000", "tasks@"])
def test_ids_that_only_look_alike_are_free(event_id):
    assert parse_line(json.dumps({**MINIMAL["task.opened"], "id": event_id})).id == event_id


@pytest.mark.parametrize(
    "field, value, ok",
    [
        ("importance", 1e6, True),
        ("importance", 1.0000001e6, False),
        ("importance", 5e-324, True),  # subnormal: tiny but valid
        ("precision", 5e-324, True),
    ],
)
def test_rating_weights_are_bounded(field, value, ok):
    data = {**MINIMAL["task.rated"], field: value}
    if ok:
        assert getattr(parse_line(json.dumps(data)), field) == value
    else:
        with pytest.raises(InvalidEvent, match="less than or equal to 1000000"):
            parse_line(json.dumps(data))


@pytest.mark.parametrize(
    "event_type, field, top",
    [
        ("task.attempted", "cost_usd", 1e6),
        ("task.attempted", "duration_ms", 10**12),
        ("task.attempted", "tool_calls", 10**12),
        ("task.rejected", "weight", 1e6),
    ],
)
def test_costs_durations_and_counts_are_bounded(event_type, field, top):
    assert getattr(parse_line(json.dumps({**MINIMAL[event_type], field: top})), field) == top
    over = top * 2
    with pytest.raises(InvalidEvent) as info:
        parse_line(json.dumps({**MINIMAL[event_type], field: over}))
    assert info.value.field == field


def test_to_json_line_is_compact_utf8_with_common_fields_first():
    event = parse_line(
        line({**MINIMAL["task.opened"], "title": "Grüße", "at": "2026-01-01T01:00:00+01:00", "id": "e1"})
    )
    assert (
        to_json_line(event)
        == (
            '{"id":"e1","type":"task.opened","at":"2026-01-01T00:00:00Z","v":1,"task":"T-1","title":"Grüße"}\n'
        ).encode()
    )


# --------------------------------------------------------------------------- config key
@pytest.mark.parametrize(
    "config, key",
    [
        (("claude-code", "anthropic", "opus", "high"), "claude-code/anthropic/opus/high"),
        (("qwen", None, "480B/A35B", None), "qwen/-/480B%2FA35B/-"),
        (("c", "-", "m", "50%"), "c/%2D/m/50%25"),
        (("c", "", "m%2F", "a-b"), "c//m%252F/a-b"),
    ],
)
def test_config_key_examples(config, key):
    cli, route, model, effort = config
    assert config_key(cli, route, model, effort) == key
    parsed = Config(cli=cli, route=route, model=model, effort=effort)
    assert parsed.key == key and Config.from_key(key) == parsed


@given(cli=st.text(min_size=1), route=st.none() | st.text(), model=st.text(min_size=1), effort=st.none() | st.text())
@example(cli="%", route="-", model="/", effort="%2D")
@example(cli="-a", route="%2F", model="--", effort="")
def test_config_key_round_trip(cli, route, model, effort):
    config = Config(cli=cli, route=route, model=model, effort=effort)
    assert len(config.key.split("/")) == 4
    assert Config.from_key(config.key) == config


@pytest.mark.parametrize("key", ["a/b/c", "a/b/c/d/e", "-/-/m/-"])
def test_config_from_bad_key(key):
    with pytest.raises(ValueError):
        Config.from_key(key)


# --------------------------------------------------------------------------- invalid lines: exact messages
RATED = MINIMAL["task.rated"]
INVALID = [
    # (raw line, field, reason)
    (b"[1, 2]", "-", "expected a JSON object, got an array"),
    (b'"text"', "-", "expected a JSON object, got a string"),
    (b"null", "-", "expected a JSON object, got null"),
    (b'{"type":"task.closed","task":"T"} {}', "-", "not valid JSON: Extra data: line 1 column 35 (char 34)"),
    (b'{"type":', "-", "not valid JSON: Expecting value: line 1 column 9 (char 8)"),
    (b"", "-", "empty line"),
    (b"   ", "-", "empty line"),
    (b'{"task":"T"}', "type", "required: a non-empty string naming the event type"),
    (b'{"type":7}', "type", "required: a non-empty string naming the event type"),
    (line({"type": "task.closed", "outcome": "done"}), "task", "required field is missing"),
    (line({"type": "task.closed", "task": 5, "outcome": "done"}), "task", "Input should be a valid string"),
    (line({"type": "task.closed", "task": "", "outcome": "done"}), "task", "String should have at least 1 character"),
    (
        line({"type": "task.closed", "task": "T", "outcome": "won"}),
        "outcome",
        "Input should be 'done', 'escalated' or 'abandoned'",
    ),
    (line({**RATED, "score": 1.5}), "score", "Input should be less than or equal to 1"),
    (line({**RATED, "score": "0.5"}), "score", "Input should be a valid number"),
    (line({**RATED, "score": True}), "score", "Input should be a valid number"),
    (line({**RATED, "precision": 0}), "precision", "Input should be greater than 0"),
    (line({**RATED, "importance": -1}), "importance", "Input should be greater than or equal to 0"),
    (
        line({**RATED, "rater": {"kind": "bot", "name": "x"}}),
        "rater.kind",
        "Input should be 'gate', 'reviewer' or 'human'",
    ),
    (line({**RATED, "config": {**CONFIG, "gpu": "a100"}}), "config.gpu", "Extra inputs are not permitted"),
    (
        line({**RATED, "config": "claude-code/anthropic/opus/high"}),
        "config",
        "Input should be a valid dictionary or instance of Config",
    ),
    (
        line({**RATED, "score": 2, "precision": 2}),
        "score",
        "Input should be less than or equal to 1; precision: Input should be less than or equal to 1",
    ),
    (line({**MINIMAL["route.decided"], "propensity": 0}), "propensity", "Input should be greater than 0"),
    (
        line({**MINIMAL["route.decided"], "candidates": ["a", ""]}),
        "candidates.1",
        "String should have at least 1 character",
    ),
    (line({**MINIMAL["task.attempted"], "tool_calls": -1}), "tool_calls", "Input should be greater than or equal to 0"),
    (
        line({**MINIMAL["task.attempted"], "duration_ms": 1 << 63}),
        "duration_ms",
        "Input should be less than or equal to 1000000000000",
    ),
    (line({**MINIMAL["task.attempted"], "cost_usd": -0.01}), "cost_usd", "Input should be greater than or equal to 0"),
    (line({**MINIMAL["task.opened"], "labels": {"a": 1}}), "labels.a", "Input should be a valid string"),
    (line({**MINIMAL["task.opened"], "v": 0}), "v", "Input should be greater than or equal to 1"),
    (line({**MINIMAL["task.opened"], "id": ""}), "id", "String should have at least 1 character"),
    (
        line({**MINIMAL["task.opened"], "at": "2026-01-31"}),
        "at",
        "not an RFC 3339 timestamp with a time zone (e.g. 2026-01-31T12:00:00Z)",
    ),
    (
        line({**MINIMAL["task.opened"], "at": "2026-02-30T00:00:00Z"}),
        "at",
        "not a valid date or time: day is out of range for month",
    ),
    (
        line({**MINIMAL["task.opened"], "at": "9999-12-31T23:00:00-02:00"}),
        "at",
        "the time in UTC is outside the years 1 to 9999",
    ),
    (b'{"type":"task.rated","score":NaN}', "-", "NaN is not allowed (JSON numbers must be finite)"),
    (b'{"type":"x","big":-Infinity}', "-", "-Infinity is not allowed (JSON numbers must be finite)"),
    (b'{"type":"x","big":1e999}', "-", "number 1e999 does not fit a 64-bit float"),
    (
        b'{"type":"x","s":"\\udc00"}',
        "-",
        "contains an escaped lone UTF-16 surrogate (\\ud800-\\udfff), which is not text",
    ),
    (b'{"type":"x","s":"\xff"}', "-", "not valid UTF-8 at byte 17"),
    (b'{"type":"x","s":"\xed\xa0\x80"}', "-", "not valid UTF-8 at byte 17"),  # an encoded surrogate
    (
        b'{"type":"x","deep":' + b"[" * MAX_NESTING + b"]" * MAX_NESTING + b"}",
        "-",
        f"JSON nested deeper than {MAX_NESTING} levels",
    ),
    (b"[" * 100_000 + b"]" * 100_000, "-", f"JSON nested deeper than {MAX_NESTING} levels"),
    (
        b'{"type":"x","pad":"' + b"x" * (1 << 20) + b'"}',
        "-",
        f"line is {(1 << 20) + 21} bytes, over the limit of {1 << 20}",
    ),
]


def test_every_problem_of_a_line_is_named_up_to_ten():
    bad = {"type": "task.attempted", "status": "lost", "cost_usd": -1, "duration_ms": -1, "id": "tasks@1", "v": 2}
    bad |= dict.fromkeys(("tool_calls", "files_read", "files_written"), "x")
    bad |= dict.fromkeys(("node", "prompt_version", "reviewer_verdict"), 1)
    with pytest.raises(InvalidEvent) as info:
        parse_line(line(bad), line=3, source="<stdin>")
    fields = [field for field, _ in info.value.problems]
    assert fields == [
        *("id", "v", "task", "config", "status", "cost_usd", "duration_ms", "node", "prompt_version"),
        "reviewer_verdict",
    ]
    message = str(info.value)
    assert message.startswith("<stdin>:3: id: id 'tasks@1' has the form <stream>@<offset>")
    assert (
        "; v: schema version 2 is not one this reader knows" in message
        and "; task: required field is missing;" in message
    )
    assert message.endswith("; reviewer_verdict: Input should be a valid string (and 3 more problems)")


@pytest.mark.parametrize("raw, field, reason", INVALID, ids=[f"{r[1]}:{r[2][:40]}" for r in INVALID])
def test_invalid_line_message(raw, field, reason):
    with pytest.raises(InvalidEvent) as info:
        parse_line(raw, line=7, source="streams/tasks.jsonl")
    assert str(info.value) == f"streams/tasks.jsonl:7: {field}: {reason}"
    assert (info.value.line, info.value.field, info.value.reason) == (7, field, reason)


def test_line_limit_is_configurable_and_excludes_the_newline():
    raw = line(MINIMAL["task.opened"])
    assert parse_line(raw + b"\n", max_bytes=len(raw)).task == "T-1"
    with pytest.raises(InvalidEvent, match=f"line is {len(raw)} bytes, over the limit of {len(raw) - 1}"):
        parse_line(raw, max_bytes=len(raw) - 1)


def test_nesting_up_to_the_limit_is_fine():
    depth = MAX_NESTING - 1  # the event object itself is level 1
    event = parse_line(b'{"type":"x","deep":' + b"[" * depth + b"]" * depth + b"}")
    assert isinstance(event, OtherEvent)


def test_a_message_without_line_names_the_source():
    with pytest.raises(InvalidEvent) as info:
        parse_line(b"[]", source="<arg>")
    assert str(info.value) == "<arg>: -: expected a JSON object, got an array"


# --------------------------------------------------------------------------- fuzz: parse or InvalidEvent, never else
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
field_names = st.sampled_from(sorted({name for m in MODEL.values() for name in m.model_fields} | {"rater", "x"}))


def _mutated(base: dict, field: str, value) -> bytes:
    return json.dumps({**base, field: value}, allow_nan=True).encode()


raw_lines = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v, allow_nan=True).encode()),
    st.builds(_mutated, st.sampled_from(list(MINIMAL.values())), field_names, json_values),
    st.builds(
        lambda base, cut, junk: line(base)[:cut] + junk + line(base)[cut:],
        st.sampled_from(list(MINIMAL.values())),
        st.integers(0, 60),
        st.binary(min_size=1, max_size=4),
    ),
    st.integers(1, 3000).map(lambda n: b'{"type":"x","d":' + b"[" * n + b"]" * n + b"}"),
    st.integers(1, 400).map(lambda n: b'{"type":"x","f":1' + b"0" * n + b".5}"),
)


def _parses_or_is_rejected(raw: bytes, max_bytes: int):
    try:
        event = parse_line(raw, line=1, source="fuzz", max_bytes=max_bytes)
    except InvalidEvent as exc:
        assert str(exc).startswith("fuzz:1: ") and exc.reason
        return None
    # what was accepted is written back as a line that reads as the same event; the written line carries the
    # common fields ("v" at least), so under a tight limit it may be the written line that is too long: then
    # writing it is refused with that reason, never a line a reader would refuse
    written = to_json_line(event)
    assert parse_line(written) == event
    if len(written) - 1 > max_bytes:
        with pytest.raises(InvalidEvent, match="over the limit of"):
            to_json_line(event, max_bytes=max_bytes)
    else:
        assert to_json_line(event, max_bytes=max_bytes) == written
    return event


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=raw_lines)
def test_fuzz_lines_parse_or_are_rejected(raw):
    _parses_or_is_rejected(raw, max_bytes=1 << 20)


@settings(max_examples=60, deadline=None)
@given(raw=raw_lines, max_bytes=st.integers(1, 200))
@example(raw=b'{"type":" ","":[]}', max_bytes=18)  # accepted at 18 bytes; written back with "v":1 it is 24
def test_fuzz_small_line_limits(raw, max_bytes):
    event = _parses_or_is_rejected(raw, max_bytes)
    if event is not None:
        assert len(raw.rstrip(b"\n")) <= max_bytes


@settings(max_examples=150, deadline=None)
@given(
    obj=json_values | st.dictionaries(st.text(max_size=8), json_values, max_size=6).map(lambda d: {"type": "x", **d})
)
def test_fuzz_objects_validate_or_are_rejected(obj):
    """The dict path (what a dispatcher passes): validate, then encode, never anything but InvalidEvent."""
    try:
        event = validate_object(obj)
        data = encode_line(event.model_dump(mode="json", exclude_unset=True))
    except InvalidEvent:
        return
    assert decode_line(data) == event.model_dump(mode="json", exclude_unset=True)


# --------------------------------------------------------------------------- JSON Schema
def test_committed_schema_is_in_sync():
    committed = Workspace.resolve(ROOT).events_schema.read_text(encoding="utf-8")
    assert committed == events_schema_text(), (
        "streams/events-v1.schema.json is out of date: run `make schema` (python -m pipeline.streams.events)"
    )


def test_schema_has_one_branch_per_type_and_one_for_the_rest():
    schema = json.loads(events_schema_text())
    branches = [schema["$defs"][ref["$ref"].rsplit("/", 1)[1]] for ref in schema["oneOf"]]
    consts = [b["properties"]["type"].get("const") for b in branches]
    assert set(consts) == {*MINIMAL, None} and len(consts) == len(MINIMAL) + 1
    other = branches[consts.index(None)]
    assert other["properties"]["type"]["not"] == {"enum": sorted(MINIMAL)}
    assert all(b["required"][0] == "type" for b in branches)
    assert branches[0]["properties"]["at"]["anyOf"][0] == {"format": "date-time", "type": "string"}
