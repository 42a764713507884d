"""One validator: the vectorised compaction path and ``pipeline.streams.events.parse_line`` give every line the same
verdict and reason, whatever its neighbours and whatever the JSON form a writer chose (compact as ``append`` writes,
or as ``json.dumps`` writes: spaced separators, keys in any order, escaped unicode). A differential fuzz test:
thousands of mutated lines, each alone, among valid lines of its type, and among other mutated lines; and every
valid line in every form is taken by the vectorised path."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.compact.parse import Chunk, parse_chunk, parse_lines_slow

CONFIG = {"cli": "codex", "route": "openai", "model": "gpt-5", "effort": None}
RATER = {"kind": "gate", "name": "pytest"}
SEEDS: list[dict[str, Any]] = [
    {
        "id": "E-1",
        "type": "task.opened",
        "at": "2026-01-01T00:00:00Z",
        "v": 1,
        "task": "T",
        "region": "r",
        "title": "t",
    },
    {
        "id": "E-2",
        "type": "task.attempted",
        "at": "2026-01-01T00:00:01.5Z",
        "task": "T",
        "config": CONFIG,
        "status": "success",
        "cost_usd": 0.25,
        "duration_ms": 1200,
        "tool_calls": 3,
    },
    {
        "id": "E-3",
        "type": "route.decided",
        "at": "2026-01-01T00:00:02Z",
        "task": "T",
        "policy": "p",
        "chosen": "a/-/b/-",
        "candidates": ["a/-/b/-", "c/-/d/-"],
        "propensity": 0.5,
        "explored": False,
        "reason": "",
    },
    {"id": "E-4", "type": "task.closed", "at": "2026-01-01T00:00:03Z", "task": "T", "outcome": "done"},
    {
        "id": "E-5",
        "type": "task.rated",
        "at": "2026-01-01T00:00:04Z",
        "task": "T",
        "config": CONFIG,
        "rater": RATER,
        "score": 0.75,
        "precision": 0.9,
    },
    {
        "id": "E-6",
        "type": "task.rejected",
        "at": "2026-01-01T00:00:05Z",
        "task": "T",
        "config": CONFIG,
        "rater": RATER,
        "claim": "c",
        "evidence": ["e"],
        "weight": 2,
    },
    {"id": "E-7", "type": "rating.retracted", "at": "2026-01-01T00:00:06Z", "rating": "E-5", "reason": "typo"},
]
ODD_VALUES = [
    "",
    " ",
    None,
    0,
    -1,
    1,
    0.5,
    1.5,
    1e6,
    1e6 + 1,
    1e12,
    -0.0,
    True,
    False,
    "x",
    "é",
    [],
    [""],
    ["a", None],
    {},
    {"a": 1},
    "2026-02-30T00:00:00Z",
    "2026-01-01T00:00:00+02:00",
    "2026-01-01 00:00:00Z",
    "2026-01-01T24:00:00Z",
    "tasks@1",
    "w:ratings@2",
    "done",
    "success",
    "gate",
    "bot",
]
BOUNDARY = ["", None, 0, -1, 1.5, "x", [], {}]  # drawn half the time: the values most rules are about
RAW_VALUES = ["NaN", "Infinity", "1e400", "-1e400", "00", "1.0e-400", '"\\ud800"', "[" * 70 + "]" * 70]
KEYS = ["id", "type", "at", "v", "task", "region", "config", "rater", "score", "precision", "importance", "status",
        "cost_usd", "duration_ms", "candidates", "propensity", "reason", "rating", "claim", "evidence", "weight",
        "outcome", "explored", "labels", "extra_field"]  # fmt: skip
SUBKEYS = ["cli", "route", "model", "effort", "kind", "name", "x"]
#: The separators of the forms a writer may use: ``append``'s, ``json.dumps``'s default, and other JSON whitespace.
SEPARATORS = [(",", ":"), (", ", ": "), (",", ": "), (" , ", " : "), (",\t", ":\t"), (",  ", ":    ")]


def dumps(event: dict[str, Any], separators: tuple[str, str], ensure_ascii: bool) -> str:
    return json.dumps(event, separators=separators, ensure_ascii=ensure_ascii)


def reordered(value: Any, order: random.Random) -> Any:
    """``value`` with the keys of every object (nested ones too) in a shuffled order."""
    if not isinstance(value, dict):
        return value
    items = [(k, reordered(v, order)) for k, v in value.items()]
    order.shuffle(items)
    return dict(items)


@st.composite
def mutated_line(draw: st.DrawFn) -> bytes:
    event = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    raw_patch: tuple[str, str] | None = None
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["drop", "set", "set", "set", "nested", "raw", "retype"]))
        own = [k for k in event if k != "type"]
        key = draw(st.sampled_from(own)) if own and draw(st.booleans()) else draw(st.sampled_from(KEYS))
        if kind == "drop":
            event.pop(key, None)
        elif kind == "set":
            event[key] = draw(st.sampled_from(BOUNDARY) if draw(st.booleans()) else st.sampled_from(ODD_VALUES))
        elif kind == "nested":
            parent = draw(st.sampled_from(["config", "rater"]))
            if isinstance(event.get(parent), dict):
                event[parent][draw(st.sampled_from(SUBKEYS))] = draw(st.sampled_from(ODD_VALUES))
        elif kind == "raw":
            raw_patch = (key, draw(st.sampled_from(RAW_VALUES)))
        else:
            event["type"] = draw(st.sampled_from([s["type"] for s in SEEDS] + ["custom.kind", "batch.begin"]))
    if draw(st.booleans()):  # keys in another order than the seed's (append writes the common fields first)
        event = reordered(event, random.Random(draw(st.integers(0, 1 << 16))))
    text = dumps(event, draw(st.sampled_from(SEPARATORS)), ensure_ascii=draw(st.booleans()))
    if raw_patch is not None:
        key, value = raw_patch
        text = text[:-1] + ("," if len(event) else "") + f'"{key}":{value}' + "}"
    data = text.encode()
    ending = draw(st.sampled_from(["", "", "", "cut", "dup", "bad-utf8", "trailing"]))
    if ending == "cut":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif ending == "dup":  # a key given twice: JSON keeps the last
        data = data[:-1] + b',"task":"T2"}'
    elif ending == "bad-utf8":
        data = data[:-1] + b',"title":"\xff"}'
    elif ending == "trailing":
        data += b" x"
    return data.replace(b"\n", b" ")


def _verdicts(lines: list[bytes], fast: bool) -> list[tuple[str, Any]]:
    """Per line: ("invalid", reason) or ("row", family, row) by the compaction path (fast) or line by line."""
    block = b"".join(line + b"\n" for line in lines)
    chunk = Chunk.of("tasks", block, 1000, 1, "w")
    parsed = parse_chunk(chunk, 1 << 20) if fast else parse_lines_slow(chunk, list(range(len(chunk))), 1 << 20)
    out: list[tuple[str, Any]] = [("missing", None)] * len(chunk)
    for i, reason in parsed.invalid:
        out[i] = ("invalid", reason)
    for family, table in parsed.tables.items():
        for row in table.to_pylist():
            out[row.pop("_line")] = ("row", (family, row))
    return out


VALID = [json.dumps(seed, separators=(",", ":")).encode() for seed in SEEDS]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated_line(), min_size=1, max_size=8), st.randoms(use_true_random=False))
def test_every_line_gets_the_parsers_verdict_alone_and_among_any_neighbours(lines, random):
    """The per-line parser's verdict does not depend on neighbours (only an id-less line's id names its offset), so
    the fast path must equal it on each line alone and on any mix of them with valid lines of every type."""
    for line in lines:
        alone = _verdicts([line], fast=True)
        assert alone == _verdicts([line], fast=False), line
        assert alone[0][0] != "missing"
    neighbours = [VALID[k % len(VALID)].replace(b'"E-', f'"N{k}-'.encode()) for k in range(40)]
    mixed = neighbours + lines
    random.shuffle(mixed)
    assert _verdicts(mixed, fast=True) == _verdicts(mixed, fast=False)


def _single_mutations() -> dict[tuple[int, str, int], bytes]:
    """Every seed with one field (its own or any known key) dropped, set to each odd value or written as each raw
    value: a few thousand lines, keyed by (seed, field, mutation); mutation 0 drops the field, 1 to 31 set the odd
    values, 32 to 39 write the raw values."""
    out = {}
    for s, seed in enumerate(SEEDS):
        for key in dict.fromkeys([*seed, *KEYS]):
            lines = [json.dumps({k: v for k, v in seed.items() if k != key}, separators=(",", ":")).encode()]
            lines += [json.dumps({**seed, key: value}, separators=(",", ":")).encode() for value in ODD_VALUES]
            lines += [
                json.dumps(seed, separators=(",", ":")).encode()[:-1] + f',"{key}":{raw}}}'.encode()
                for raw in RAW_VALUES
            ]
            out.update(((s, key, m), line) for m, line in enumerate(lines))
    return out


def _alone_sample(mutations: dict[tuple[int, str, int], bytes], rng: random.Random) -> list[bytes]:
    """A seeded sample of the single mutations that still has every field under every mutation (on a seed drawn
    for the pair among the seeds it applies to) and every seed with every field (under a drawn mutation)."""
    by_pair: dict[tuple[str, int], list[int]] = {}
    by_field: dict[tuple[int, str], list[int]] = {}
    for s, key, m in mutations:
        by_pair.setdefault((key, m), []).append(s)
        by_field.setdefault((s, key), []).append(m)
    picked = {(rng.choice(seeds), key, m) for (key, m), seeds in by_pair.items()}
    picked |= {(s, key, rng.choice(kinds)) for (s, key), kinds in by_field.items()}
    return [mutations[k] for k in sorted(picked)]


def test_every_single_field_mutation_gets_the_parsers_verdict_alone_and_in_chunks():
    """All the single mutations (about 7,200 lines) together and in chunks of 16 random neighbours; alone (each
    line the only one of its chunk, the slow part), a sample seeded with 0 of about 1,300 of them that keeps every
    field under every mutation kind (drop, each odd value, each raw value) and every seed with every field."""
    mutations = _single_mutations()
    lines = list(mutations.values())
    assert len(lines) > 5000
    alone = _alone_sample(mutations, random.Random(0))
    sampled = set(alone)
    assert {(k, m) for _, k, m in mutations} == {(k, m) for (_, k, m), line in mutations.items() if line in sampled}
    for line in alone:  # alone: the vectorised path sees one line of its type
        assert _verdicts([line], fast=True) == _verdicts([line], fast=False), line
    shuffled = lines[:]
    random.Random(0).shuffle(shuffled)
    assert _verdicts(shuffled, fast=True) == _verdicts(shuffled, fast=False)  # all together, valid and invalid
    for start in range(0, len(shuffled), 16):  # in chunks of 16 random neighbours
        chunk = shuffled[start : start + 16]
        assert _verdicts(chunk, fast=True) == _verdicts(chunk, fast=False)


def test_a_retraction_with_an_empty_reason_is_refused_whatever_its_neighbours():
    empty = b'{"id":"X","type":"rating.retracted","at":"2026-01-01T00:00:00Z","rating":"R","reason":""}'
    ok = [f'{{"id":"X{k}","type":"rating.retracted","rating":"R","reason":"r"}}'.encode() for k in range(50)]
    for lines in ([empty], [*ok, empty], [empty, *ok]):
        verdicts = _verdicts(lines, fast=True)
        assert verdicts[lines.index(empty)] == ("invalid", "reason: String should have at least 1 character")


def test_the_fast_path_takes_the_bulk_of_valid_lines():
    from pipeline.compact.fastpath import lines_array, parse_fast

    lines = [VALID[k % len(VALID)].replace(b'"E-', f'"N{k}-'.encode()) for k in range(700)]
    block = b"".join(line + b"\n" for line in lines)
    chunk = Chunk.of("tasks", block, 0, 1, "w")
    fast = parse_fast(lines_array(chunk.block, chunk.starts), np.arange(len(chunk)), "w:tasks", chunk.offsets, block)
    assert sum(len(s) for s in fast.slow) == 0


def _written_every_way(k: int, seed: dict[str, Any]) -> list[bytes]:
    """One valid event in each writer's form: each separator, keys as given, sorted and shuffled (nested too),
    with and without escaped unicode, and with its doubles written as floats (``1.0``)."""
    event = {**seed, "id": f"W{k}-é", **({"task": "T-ü"} if "task" in seed else {})}
    event = {key: float(v) if key in ("weight", "propensity") else v for key, v in event.items()}
    orders = [event, dict(sorted(event.items())), reordered(event, random.Random(k))]
    return [
        dumps(form, separators, ensure_ascii).encode()
        for form in orders
        for separators in SEPARATORS
        for ensure_ascii in (False, True)
    ]


def test_every_valid_line_in_any_writers_form_takes_the_fast_path_with_the_parsers_rows():
    """A dispatcher writing its own lines under the lock protocol (``json.dumps``: spaced separators, its own key
    order, escaped unicode, floats like ``1.0``) compacts as fast as ``append``'s lines: none is left to the parser,
    and the rows are the parser's."""
    from pipeline.compact.fastpath import lines_array, parse_fast

    lines = [line for k, seed in enumerate(SEEDS) for line in _written_every_way(k, seed)]
    block = b"".join(line + b"\n" for line in lines)
    chunk = Chunk.of("tasks", block, 0, 1, "w")
    fast = parse_fast(lines_array(chunk.block, chunk.starts), np.arange(len(chunk)), "w:tasks", chunk.offsets, block)
    assert sum(len(s) for s in fast.slow) == 0
    verdicts = _verdicts(lines, fast=True)
    assert verdicts == _verdicts(lines, fast=False)
    assert {v[0] for v in verdicts} == {"row"}
    per_event = [verdicts[i : i + len(lines) // len(SEEDS)] for i in range(0, len(lines), len(lines) // len(SEEDS))]
    assert all(len({str(v) for v in rows}) == 1 for rows in per_event)  # every form of an event: the same row
