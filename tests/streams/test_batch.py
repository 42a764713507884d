"""The batch validator agrees with the per-line parser: same verdict, same reason, same event, for every line.

``pipeline.streams.batch`` validates a batch with one call into pydantic-core per chunk (its fast lane) and sends what
that does not plainly accept to the per-line path. Thousands of mutated lines, each alone and inside batches of valid
and invalid neighbours, as raw lines and as mappings, are judged by both and compared with ``parse_line``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import InvalidBatch, InvalidEvent
from pipeline.streams import batch
from pipeline.streams.events import KNOWN, nearest_type, parse_line, stream_of
from pipeline.streams.future import MAX_FUTURE, future_reason

NOW = "2026-03-01T12:00:00Z"
LATEST = "2026-03-02T12:00:00Z"  # NOW plus the default skew: a later event time is refused
ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
CONFIG = {"cli": "claude-code", "route": None, "model": "opus", "effort": "high"}
RATER = {"kind": "gate", "name": "pytest"}
SEEDS: list[dict[str, Any]] = [
    {"type": "task.opened", "task": "T-1"},
    {"type": "task.opened", "task": "T-1", "region": "implement", "labels": {"a": "b"}, "thread": "t", "title": "x y"},
    {"type": "task.attempted", "task": "T-1", "config": CONFIG, "status": "success", "cost_usd": 0.5, "tool_calls": 3},
    {
        "type": "route.decided",
        "task": "T-1",
        "policy": "greedy",
        "chosen": "a/-/m/-",
        "candidates": ["a/-/m/-"],
        "propensity": 1,
    },
    {"type": "task.closed", "task": "T-1", "outcome": "done"},
    {"type": "task.rated", "task": "T-1", "config": CONFIG, "rater": RATER, "score": 0.75},
    {"type": "task.rated", "task": "T-1", "config": CONFIG, "rater": RATER, "score": 1, "importance": 2},
    {"type": "task.rejected", "task": "T-1", "config": CONFIG, "rater": RATER, "claim": "c", "evidence": ["e"]},
    {"type": "rating.retracted", "rating": "01ABC", "reason": "wrong"},
    {"type": "deploy.finished", "env": "prod"},  # an unknown type: kept
]
HEAD = [
    {},
    {"id": "01J0000000000000000000000A", "at": "2026-01-02T03:04:05Z"},
    {"id": "e-1", "at": "2026-01-02T03:04:05.123456Z", "v": 1},
    {"at": "2026-01-02T03:04:05+02:00"},
    {"id": "e-2"},
    {"id": None},  # explicit nulls: nothing may be spliced in front of them
    {"at": None, "id": "e-3"},
    {"id": None, "at": "2026-01-02T03:04:05Z"},
    {"id": "e-4", "at": "2026-01-02T03:04:05Z", "filled": ["at"]},
    {"filled": ["id"]},
    {"id": "e-5", "at": "2099-01-01T00:00:00Z"},  # in the future of NOW: refused
]
VALUES = [
    None, True, False, 0, 1, -1, 2, 0.5, -0.0, 1e-400, 1e300, 10**12, 10**12 + 1, 10**30, "", "x", "a/b", "é",
    [], {}, ["x"], {"cli": "c", "model": "m"}, {"kind": "human", "name": "n"}, "2026-01-01T00:00:00Z",
]  # fmt: skip
TIMES = [
    "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.5Z", "2026-01-01t00:00:00z",
    "2026-01-01 00:00:00+01:00", "2026-01-01T00:00:00.123456789Z", "2026-02-30T00:00:00Z", "0000-01-01T00:00:00Z",
    "0001-01-01T00:30:00+01:00", "9999-12-31T23:59:59-01:00", "2026-01-01T23:59:60Z", "2026-01-01T24:00:00Z",
    "2026-01-01", "2026-01-01T00:00:00", "0999-12-31T23:59:59.999999Z",
]  # fmt: skip
IDS = ["tasks@5", "w:ratings@0", "ratings@x", "", "a" * 300, 5, None, "ok-id"]
TYPES = ["task.opend", "task.rate", "task.Rated", "batch.begin", "batch.end", "", 5, None, "x", "task.opened"]
TEXT_EDITS = [
    b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999", b"1" * 5000, b"\\ud800", b"\\udc00\\ud800", b"\\u00e9",
    b"\\u0000", b"\xff", b"\xc3\xa9", b" ", b"\t", b"\r", b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\",
    b"[" * 70, b'"x"', b"null", b"0", b"01", b"-", b"1.", b".5", b"1e5", b"true",
]  # fmt: skip
NEIGHBOURS_VALID = [json.dumps({**s, **h}).encode() for s in SEEDS[:9] for h in HEAD[:3]]
NEIGHBOURS_INVALID = [b"not json", b"[]", b'{"type":"task.rated"}', b"\xff", b"", b"   ", b'{"type":"batch.end"}']


def dump(obj: Any, compact: bool) -> bytes:
    if compact:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    return json.dumps(obj).encode()


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    """A seed event, then a few mutations of its fields and of its bytes."""
    obj = {**draw(st.sampled_from(HEAD)), **draw(st.sampled_from(SEEDS))}
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["set", "nested", "delete", "extra", "type", "at", "id", "v", "dup", "filled"]))
        keys = sorted(obj)
        if kind == "set" and keys:  # deletions may have emptied the object
            obj[draw(st.sampled_from(keys))] = draw(st.sampled_from(VALUES))
        elif kind == "nested" and isinstance(obj.get("config"), dict):
            obj["config"] = {
                **obj["config"],
                draw(st.sampled_from(["cli", "route", "gpu"])): draw(st.sampled_from(VALUES)),
            }
        elif kind == "nested" and isinstance(obj.get("rater"), dict):
            obj["rater"] = {**obj["rater"], draw(st.sampled_from(["kind", "name", "v"])): draw(st.sampled_from(VALUES))}
        elif kind == "delete" and keys:
            del obj[draw(st.sampled_from(keys))]
        elif kind == "extra":
            obj[draw(st.sampled_from(["trace", "score2", "id2"]))] = draw(st.sampled_from(VALUES))
        elif kind == "type":
            obj["type"] = draw(st.sampled_from(TYPES))
        elif kind == "at":
            obj["at"] = draw(st.sampled_from(TIMES))
        elif kind == "id":
            obj["id"] = draw(st.sampled_from(IDS))
        elif kind == "v":
            obj["v"] = draw(st.sampled_from([1, 2, 0, True, 1.0, "1", None]))
        elif kind == "filled":  # what an earlier append recorded (a stream copied into another home)
            obj["filled"] = draw(st.sampled_from([["at"], ["id", "at"], ["id"], [], ["x"], "at", [None], None]))
    line = dump(obj, draw(st.booleans()))
    if draw(st.booleans()) and len(obj) > 1:  # a duplicate key, the later one different
        key = draw(st.sampled_from(sorted(obj)))
        line = line[:-1] + b',"' + key.encode() + b'":' + dump(draw(st.sampled_from(VALUES)), True) + b"}"
    for _ in range(draw(st.integers(0, 2))):  # edits of the bytes themselves
        at = draw(st.integers(0, len(line)))
        cut = draw(st.integers(0, 3))
        line = line[:at] + draw(st.sampled_from(TEXT_EDITS)) + line[at + cut :]
    return line


def expected(line: bytes, number: int) -> tuple[str, Any]:
    """What the per-line parser says of ``line`` as item ``number`` of a batch from ``<batch>`` (and the append
    policy on top of it: a blank line is skipped, an unknown type one edit away from a v1 type is a typo, a time
    more than a day after now is refused)."""
    if not line.strip():
        return "blank", None
    try:
        event = parse_line(line, line=number, source="<batch>")
    except InvalidEvent as exc:
        return "error", str(exc)
    near = nearest_type(event.type)
    if near is not None and near[0] == 1:
        return "error", (
            f"<batch>:{number}: type: {event.type!r} is not a v1 event type: did you mean {near[1]}? "
            f"(to keep it as a type of its own, allow it: --allow-type {event.type})"
        )
    late = future_reason(event.at, LATEST, MAX_FUTURE) if event.at else None
    if late is not None:
        return "error", f"<batch>:{number}: at: {late}"
    return "ok", event


def judged(out: batch.Rendered, i: int) -> tuple[str, Any]:
    """What the batch made of item ``i``: the event its written line reads back as, or its error."""
    if i in out.errors:
        return "error", str(out.errors[i])
    if i in out.blank:
        return "blank", None
    line = out.line[i]
    assert line is not None and line.endswith(b"\n") and line.count(b"\n") == 1
    return "ok", (out.stream[i], out.id[i], parse_line(line))


def agree(line: bytes, want: tuple[str, Any], got: tuple[str, Any]) -> None:
    if want[0] in ("error", "blank"):
        assert got == want, line
        return
    assert got[0] == "ok", (line, got)
    stream, event_id, written = got[1]
    event = want[1]
    assert stream == stream_of(event.type)
    assert written.id == event_id and (event.id == event_id if event.id else ULID.fullmatch(event_id))
    assert written.at == (event.at or NOW)
    assert written.filled == batch.filled_fields(event.filled, event.id is None, event.at is None), line
    fields = {"id", "at", "filled"}
    assert written.model_dump(exclude=fields) == event.model_dump(exclude=fields), line
    assert type(written) is type(event)


def run(items: list[Any], fast_from: int = 1) -> batch.Rendered:
    return batch.render(items, source="<batch>", now=NOW, fast_from=fast_from)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(mutated_lines(), min_size=1, max_size=12), seed=st.randoms(use_true_random=False))
def test_the_batch_validator_judges_every_line_as_parse_line_does(lines, seed):
    # each line alone, through the fast lane
    for line in lines:
        agree(line, expected(line, 1), judged(run([line]), 0))
    # inside a batch of valid and invalid neighbours (past the fast lane's threshold)
    items: list[bytes] = [seed.choice(NEIGHBOURS_VALID + NEIGHBOURS_INVALID) for _ in range(batch.FAST_FROM)]
    places = sorted(seed.sample(range(len(items) + len(lines)), len(lines)))
    for place, line in zip(places, lines, strict=True):
        items.insert(place, line)
    out = run(items, fast_from=batch.FAST_FROM)
    for i, line in enumerate(items):
        agree(line, expected(line, i + 1), judged(out, i))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(mutated_lines(), min_size=1, max_size=12), seed=st.randoms(use_true_random=False))
def test_mappings_are_judged_and_rendered_as_by_the_per_item_path(lines, seed):
    maps = []
    for line in lines:
        try:
            maps.append(json.loads(line))
        except ValueError:
            continue
    items = [json.loads(x) for x in seed.sample(NEIGHBOURS_VALID, 8)] + maps + [{"type": "task.rated"}, [1], 3]
    fast, slow = run(items, fast_from=1), run(items, fast_from=len(items) + 1)
    assert {i: str(e) for i, e in fast.errors.items()} == {i: str(e) for i, e in slow.errors.items()}
    assert fast.blank == slow.blank  # a str item is a raw line: a blank one is skipped by both lanes
    for i in range(len(items)):
        if i in fast.errors or i in fast.blank:
            continue
        assert fast.stream[i] == slow.stream[i]
        a, b = fast.line[i], slow.line[i]
        if items[i].get("id") is None:  # ids drawn for the batch differ
            a, b = a.replace(fast.id[i].encode(), b"ID"), b.replace(slow.id[i].encode(), b"ID")
        assert a == b  # byte for byte what the per-item path writes


def test_every_seed_with_every_head_alone_and_together():
    """The unmutated corners systematically: each seed with each set of common fields, compact or not."""
    lines = [dump({**head, **seed}, compact) for head in HEAD for seed in SEEDS for compact in (True, False)]
    for line in lines:
        agree(line, expected(line, 1), judged(run([line]), 0))
    out = run(lines, fast_from=batch.FAST_FROM)
    for i, line in enumerate(lines):
        agree(line, expected(line, i + 1), judged(out, i))


@pytest.mark.parametrize(
    "line, written_as_given",
    [
        (b'{"id":"e-1","type":"task.closed","task":"T","outcome":"done","at":"2026-01-02T03:04:05Z"}', True),
        (b'{"id":"e-1","type":"task.closed","task":"T","outcome":"done","at":"2026-01-02T05:04:05+02:00"}', False),
        (b'{"id": "e-1", "type": "task.closed", "task": "T", "outcome": "done", "at": "2026-01-02T03:04:05Z"}', False),
        (b'{"id":"e-1","type":"task.opened","task":"T","title":"a b","at":"2026-01-02T03:04:05Z"}', True),
        # whitespace after a comma inside a string: the compactness check is conservative, so it is rendered
        (b'{"id":"e-1","type":"task.opened","task":"T","title":"a, b","at":"2026-01-02T03:04:05Z"}', False),
    ],
)
def test_a_valid_compact_complete_line_is_written_as_its_own_bytes(line, written_as_given):
    out = run([line])
    assert (out.line[0] == line + b"\n") is written_as_given
    assert parse_line(out.line[0]) == parse_line(line)


def test_a_line_without_id_or_at_gets_them_in_front():
    line = b'{"type":"task.closed","task":"T","outcome":"done"}'
    out = run([line] * 3)
    assert all(
        x.startswith(b'{"id":"' + i.encode() + b'","at":"' + NOW.encode() + b'",')
        for x, i in zip(out.line, out.id, strict=True)
    )
    assert all(x.endswith(line[1:] + b"\n") for x in out.line) and len(set(out.id)) == 3


def test_a_batch_with_errors_names_each_once_in_order():
    items = [json.dumps(SEEDS[0]).encode()] * 100
    items[7], items[50] = b"[]", b'{"type":"task.rated","score":2}'
    with pytest.raises(InvalidBatch) as info:
        batch.prepare(items, source="<stdin>")
    assert [str(e).split(": ")[0] for e in info.value.errors] == ["<stdin>:8", "<stdin>:51"]


def test_every_type_has_a_fast_schema():
    assert {fields["type"] for fields in batch.fast_validator().validate_python(SEEDS[:9])} == set(KNOWN)


@pytest.mark.parametrize("enabled_before", [True, False])
def test_the_collector_is_paused_only_while_a_batch_is_validated(enabled_before, monkeypatch):
    """The pause (bench.append measured it: 1.10x-1.19x the events/s of CPU time) ends with the batch, also when
    validation fails, and leaves a collector the caller had turned off as it was."""
    import gc

    seen: list[bool] = []
    real = batch._validate

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(batch, "_validate", spy)
    many = batch.FAST_FROM  # a batch this long takes the fast lanes
    (gc.enable if enabled_before else gc.disable)()
    try:
        batch.prepare([{"type": "task.opened", "task": "T-1"}] * many)
        with pytest.raises(InvalidBatch):
            batch.prepare([{"type": "task.opened"}] * many)
        assert seen and not any(seen) and gc.isenabled() == enabled_before
    finally:
        gc.enable()
