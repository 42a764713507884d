"""Compaction consumes whole batches only, and decides every line as the reference scanner does
(``pipeline.streams.scan.StreamScan``): frames of whole parts are not events, lines of broken parts are dead letters
with the reason, an unfinished part ends the range before its begin."""

from __future__ import annotations

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.commands.verify import verify
from pipeline.compact import compact
from pipeline.compact.frames import plan_frames
from pipeline.store import open_store
from pipeline.streams.scan import BatchBegin, BatchEnd, Verdict, scan_bytes


def _event(n: int) -> bytes:
    return (
        f'{{"id":"F-{n}","type":"task.rated","at":"2026-01-01T00:00:00Z","task":"T","config":{{"cli":"c",'
        f'"model":"m"}},"rater":{{"kind":"gate","name":"g"}},"score":1}}'
    ).encode()


@st.composite
def stream_bytes(draw: st.DrawFn) -> bytes:
    """Event lines, whole parts, parts broken every way a writer can break them, stray ends, maybe an unfinished
    part at the end."""
    counter = iter(range(10_000))
    out: list[bytes] = []
    for k in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["event", "whole", "count", "bytes", "no-end", "inner", "stray", "other-end"]))
        lines = [_event(next(counter)) + b"\n" for _ in range(draw(st.integers(1, 4)))]
        size = sum(len(x) for x in lines)
        batch = f"B{k}"
        if kind == "event":
            out += lines
            continue
        if kind == "stray":
            out.append(BatchEnd(id=batch).line())
            continue
        n, b = len(lines), size
        if kind == "count":
            n += draw(st.sampled_from([-1, 1])) if n > 1 else 1
        if kind == "bytes":
            b += draw(st.sampled_from([-3, 5]))
        out.append(BatchBegin(id=batch, lines=max(1, n), bytes=max(1, b)).line())
        out += lines
        if kind == "inner":
            out.insert(len(out) - 1, BatchBegin(id=batch + "x", lines=1, bytes=9).line())
        if kind == "no-end":
            continue
        out.append(BatchEnd(id=batch if kind != "other-end" else batch + "z").line())
    if draw(st.booleans()):  # a part still being written
        head = [_event(next(counter)) + b"\n" for _ in range(3)]
        out.append(BatchBegin(id="LIVE", lines=3, bytes=sum(len(x) for x in head)).line())
        out += head[: draw(st.integers(0, 3))]
    return b"".join(out)


def _reference(data: bytes) -> tuple[dict[int, tuple[Verdict, str | None]], int]:
    scan = scan_bytes(data)
    verdicts = {s.offset: (s.verdict, s.reason) for s in scan}
    return verdicts, scan.stop


@settings(max_examples=300, deadline=None)
@given(stream_bytes())
def test_the_frame_plan_decides_every_line_as_the_reference_scanner(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("frames") / "ratings.jsonl"
    path.write_bytes(data)
    expected, stop = _reference(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        plan = plan_frames(fd, 0, len(data))
    finally:
        os.close(fd)
    assert plan.end == stop
    got = {
        int(o): (Verdict.FRAME if f else Verdict.BROKEN, r)
        for o, f, r in zip(plan.offsets, plan.is_frame, plan.reasons, strict=True)
    }
    special = {o: v for o, v in expected.items() if v[0] != Verdict.TAKE}
    assert got == special


def test_compaction_stores_whole_batches_dead_letters_broken_ones_and_waits_for_unfinished(home, snapshot):
    stream = home / "streams" / "ratings.jsonl"
    stream.parent.mkdir(parents=True)
    whole = [_event(1) + b"\n", _event(2) + b"\n"]
    broken = [_event(3) + b"\n", _event(4) + b"\n"]
    live = [_event(5) + b"\n", _event(6) + b"\n"]
    live_begin = BatchBegin(id="LIVE", lines=2, bytes=sum(map(len, live))).line()
    data = (
        BatchBegin(id="W", lines=2, bytes=sum(map(len, whole))).line()
        + b"".join(whole)
        + BatchEnd(id="W").line()
        + BatchBegin(id="X", lines=3, bytes=sum(map(len, broken))).line()  # counts 3 lines, holds 2
        + b"".join(broken)
        + BatchEnd(id="X").line()
        + _event(7)
        + b"\n"
        + BatchEnd(id="nobody").line()
        + live_begin
        + live[0]
    )
    stream.write_bytes(data)
    first = compact(home)
    assert first.streams["ratings"].model_dump() == {
        "lines": 10,
        "stored": 3,
        "duplicate": 0,
        "conflict": 0,
        "invalid": 5,  # the broken part's begin and two lines, then its end (now without a begin), a stray end
        "frames": 2,
    }
    with open_store(home) as store:
        assert store.con.execute("SELECT id FROM ratings ORDER BY id").fetchall() == [("F-1",), ("F-2",), ("F-7",)]
    letters = [json.loads(x) for x in (home / "deadletter" / "ratings.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in letters] == [
        "-: part of batch X, whose lines do not match its batch.begin (3 line(s), "
        f"{sum(map(len, broken))} bytes): a batch is all or nothing",
    ] * 3 + [
        "-: a batch.end of batch X without its batch.begin: a batch is all or nothing",
        "-: a batch.end of batch nobody without its batch.begin: a batch is all or nothing",
    ]
    assert verify(home).ok
    # the live part completes: the next run takes it, whole
    with open(stream, "ab") as handle:
        handle.write(live[1] + BatchEnd(id="LIVE").line())
    second = compact(home)
    assert second.streams["ratings"].stored == 2 and second.streams["ratings"].frames == 2
    assert verify(home).ok and snapshot(home)["counts"]["ratings"] == 5


def test_a_two_stream_batch_is_never_seen_as_tasks_without_its_ratings(home):
    """A batch with task events and ratings is appended as one unit; a cut during the write leaves neither half."""
    from pipeline.streams.log import append

    events = [
        {"id": "O-1", "type": "task.opened", "task": "T-1", "at": "2026-01-01T00:00:00Z"},
        {"id": "R-1", "type": "task.rated", "task": "T-1", "at": "2026-01-01T00:00:00Z", "score": 1,
         "config": {"cli": "c", "model": "m"}, "rater": {"kind": "gate", "name": "g"}},
    ]  # fmt: skip
    append(home, events)
    tasks = home / "streams" / "tasks.jsonl"
    whole = tasks.read_bytes()
    tasks.write_bytes(whole[: whole.rindex(b'{"type":"batch.end"')])  # as if the writer died before the tasks end
    result = compact(home)
    assert {s: o.stored for s, o in result.streams.items()} == {"tasks": 0, "ratings": 0}  # the ratings wait too
    tasks.write_bytes(whole)  # the end arrives: both halves land together
    again = compact(home)
    assert {s: o.stored for s, o in again.streams.items()} == {"tasks": 1, "ratings": 1}
    assert verify(home).ok
