"""The append-only streams: all-or-nothing batches, routing, locking, torn tails, faults, crashes."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import random
import re
import signal
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import InvalidBatch
from pipeline.streams import framing
from pipeline.streams import log as streams
from pipeline.streams.events import TaskOpened, parse_line
from pipeline.streams.framing import consistent_cut
from pipeline.streams.log import append, read, read_lines, repair
from pipeline.streams.scan import BatchBegin, BatchEnd, Then, frame_of
from pipeline.workspace import Workspace

CONFIG = {"cli": "claude-code", "route": None, "model": "opus", "effort": "high"}
OPENED = {"type": "task.opened", "task": "T-1"}
RATED = {"type": "task.rated", "task": "T-1", "config": CONFIG, "rater": {"kind": "gate", "name": "ci"}, "score": 1}
ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
FORK = multiprocessing.get_context("fork")


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def stream_bytes(home: Path, stream: str) -> bytes:
    path = home / "streams" / f"{stream}.jsonl"
    return path.read_bytes() if path.exists() else b""


def fragments(home: Path) -> list[Path]:
    return sorted((home / "quarantine").glob("*.fragment")) if (home / "quarantine").exists() else []


# --------------------------------------------------------------------------- batches
@pytest.mark.parametrize(
    "batch, tasks, ratings",
    [
        ([OPENED], 1, 0),
        ([RATED], 0, 1),
        ([OPENED, RATED, {"type": "rating.retracted", "rating": "r1", "reason": "typo"}], 1, 2),
        (
            [
                {
                    "type": "task.rejected",
                    "task": "T",
                    "config": CONFIG,
                    "rater": {"kind": "human", "name": "ana"},
                    "claim": "c",
                    "evidence": [],
                }
            ],
            0,
            1,
        ),
        (
            [
                {
                    "type": "route.decided",
                    "task": "T",
                    "policy": "p",
                    "chosen": "a/-/m/-",
                    "candidates": ["a/-/m/-"],
                    "propensity": 0.5,
                },
                {"type": "task.closed", "task": "T", "outcome": "done"},
            ],
            2,
            0,
        ),
        ([{"type": "deploy.finished"}], 1, 0),  # unknown types go to tasks
    ],
)
def test_events_are_routed_by_type(home, batch, tasks, ratings):
    result = append(home, batch, fsync="never")
    assert result.summary() == {
        "appended": tasks + ratings,
        "streams": {k: n for k, n in (("tasks", tasks), ("ratings", ratings)) if n},
        "blank_lines": 0,
    }
    assert [e.type for e in read(home, "tasks")] == [
        e["type"] for e in batch if e["type"] not in ("task.rated", "task.rejected", "rating.retracted")
    ]
    assert len(list(read(home, "ratings"))) == ratings


@pytest.mark.parametrize(
    "bad_items, lines",
    [
        ([{"type": "task.rated", "task": "T"}], [2]),
        (["[1]", {"type": "task.closed", "task": "T", "outcome": "lost"}], [2, 3]),
        ([b'{"type":"x","n":NaN}'], [2]),
        ([42], [2]),
        ([{"type": "x", "n": 10**4400}], [2]),  # a line the reader could not read back
        ([{"type": "x", "deep": nested(70)}], [2]),  # deeper than the reader accepts
    ],
)
def test_a_bad_item_appends_nothing_and_names_every_bad_item(home, bad_items, lines):
    append(home, [OPENED], fsync="never")
    before = stream_bytes(home, "tasks")
    with pytest.raises(InvalidBatch) as info:
        append(home, [RATED, *bad_items, OPENED], fsync="never", source="batch.ndjson")
    assert [e.line for e in info.value.errors] == lines
    assert all(str(e).startswith(f"batch.ndjson:{n}: ") for e, n in zip(info.value.errors, lines, strict=True))
    assert stream_bytes(home, "tasks") == before and stream_bytes(home, "ratings") == b""


def test_id_and_at_are_assigned_when_absent_and_kept_when_given(home):
    given_event = {**OPENED, "id": "mine-1", "at": "2026-01-01T02:00:00+02:00"}
    started = time.time()
    result = append(home, [OPENED, given_event], fsync="never")
    first, second = read(home, "tasks")
    assert ULID.fullmatch(first.id) and result.ids == [first.id, "mine-1"]
    stamped = first.at.replace("Z", "+00:00")
    from datetime import datetime

    assert started - 1 <= datetime.fromisoformat(stamped).timestamp() <= time.time() + 1
    assert (second.id, second.at) == ("mine-1", "2026-01-01T00:00:00Z")


def test_every_kind_of_item_is_accepted(home):
    model = TaskOpened(task="T-9", region="ops")
    append(home, [model, OPENED, json.dumps(OPENED), json.dumps(OPENED).encode() + b"\n"], fsync="never")
    events = list(read(home, "tasks"))
    assert [e.task for e in events] == ["T-9", "T-1", "T-1", "T-1"] and events[0].region == "ops"
    assert len({e.id for e in events}) == 4


def test_unknown_fields_survive_the_dict_path(home):
    append(
        home,
        [{**RATED, "trace": {"steps": [1, {"a": None}]}, "rater": {"kind": "gate", "name": "ci", "v": 2}}],
        fsync="never",
    )
    line = json.loads(stream_bytes(home, "ratings"))
    assert line["trace"] == {"steps": [1, {"a": None}]} and line["rater"]["v"] == 2
    assert list(line)[:4] == ["id", "type", "at", "v"]


def test_bad_fsync_policy(home):
    with pytest.raises(ValueError, match="fsync must be"):
        append(home, [OPENED], fsync="sometimes")


@pytest.mark.parametrize(
    "policy, batch, fsyncs",
    [
        ("never", [OPENED], 0),
        ("never", [OPENED] * 3, 0),
        ("never", [OPENED, RATED], 0),
        ("batch", [OPENED], 1),  # one line: no frame, no note
        ("batch", [OPENED] * 3, 2),  # the note, then the stream
        ("batch", [OPENED, RATED], 5),  # two notes; tasks lines, ratings part, tasks end (the order on disk)
        ("always", [OPENED], 1),
        ("always", [OPENED] * 3, 2),  # one write call: nothing between writes to fsync
    ],
)
def test_fsync_policy(home, monkeypatch, policy, batch, fsyncs):
    append(home, [OPENED, RATED], fsync="never")  # both streams exist: no directory fsync
    calls = []
    real = os.fsync
    monkeypatch.setattr(streams.os, "fsync", lambda fd: calls.append(fd) or real(fd))
    append(home, batch, fsync=policy)
    assert len(calls) == fsyncs


def test_always_fsyncs_between_the_write_calls_of_a_large_batch(home, monkeypatch):
    append(home, [OPENED], fsync="never")
    monkeypatch.setattr(framing, "_WRITE", 100)  # a write call per line or so
    calls = []
    real = os.fsync
    monkeypatch.setattr(streams.os, "fsync", lambda fd: calls.append(fd) or real(fd))
    append(home, [OPENED] * 5, fsync="always")
    assert len(calls) >= 5


# --------------------------------------------------------------------------- batch framing
def test_a_batch_is_framed_and_readers_never_see_the_frames(home):
    append(home, [OPENED], fsync="never")
    single = stream_bytes(home, "tasks")
    assert b"batch" not in single  # one event carries no frame
    result = append(home, [{**OPENED, "task": f"T-{i}"} for i in range(3)], fsync="never")
    lines = stream_bytes(home, "tasks")[len(single) :].splitlines(keepends=True)
    begin, end = frame_of(lines[0][:-1]), frame_of(lines[-1][:-1])
    assert (begin.id, begin.lines, begin.bytes, begin.then) == (result.batch, 3, sum(map(len, lines[1:-1])), None)
    assert end.id == result.batch and len(lines) == 5
    assert [e.task for e in read(home, "tasks")] == ["T-1", "T-0", "T-1", "T-2"]
    assert [r.line_no for r in read_lines(home, "tasks")] == [1, 3, 4, 5]  # numbers count the frame lines


def test_a_two_stream_batch_names_where_its_ratings_part_begins(home):
    append(home, [RATED], fsync="never")
    ratings_before = len(stream_bytes(home, "ratings"))
    result = append(home, [OPENED, RATED, OPENED], fsync="never")
    tasks = stream_bytes(home, "tasks").splitlines()
    ratings = stream_bytes(home, "ratings")[ratings_before:].splitlines()
    assert frame_of(tasks[0]) == BatchBegin(
        id=result.batch, lines=2, bytes=sum(len(x) + 1 for x in tasks[1:3]), then=Then(ratings=ratings_before)
    )
    assert frame_of(ratings[0]).then is None and frame_of(ratings[-1]) == frame_of(tasks[-1]) == BatchEnd(
        id=result.batch
    )
    assert result.summary() == {"appended": 3, "streams": {"tasks": 2, "ratings": 1}, "blank_lines": 0}


def test_the_same_events_give_the_same_bytes_in_any_home(tmp_path):
    batch = [{**OPENED, "id": f"o{i}", "at": "2026-01-01T00:00:00Z"} for i in range(3)]
    for name in ("a", "b"):
        append(tmp_path / name, batch, fsync="never")
    assert stream_bytes(tmp_path / "a", "tasks") == stream_bytes(tmp_path / "b", "tasks")


@pytest.mark.parametrize("frame_type", ["batch.begin", "batch.end"])
def test_append_refuses_the_frame_types(home, frame_type):
    with pytest.raises(InvalidBatch) as info:
        append(home, [OPENED, {"type": frame_type, "id": "X", "lines": 1, "bytes": 5}], fsync="never")
    assert [str(e) for e in info.value.errors] == [
        f"<input>:2: type: '{frame_type}' is reserved for the frame lines a writer puts around a batch; "
        "it is not an event type"
    ]
    assert not (home / "streams" / "tasks.jsonl").exists()


# --------------------------------------------------------------------------- torn tails
@pytest.mark.parametrize(
    "initial, fragment",
    [
        (b"", None),
        (b'{"type":"x"}\n', None),
        (b'{"type":"x"}\n{"type":"y","pad":"abc', b'{"type":"y","pad":"abc'),
        (b'{"type":"x","pad":"abc', b'{"type":"x","pad":"abc'),
        (b'{"type":"x"}\n' + b"z" * 200_000, b"z" * 200_000),  # longer than one read chunk
    ],
)
def test_append_quarantines_a_torn_tail_and_starts_on_a_fresh_line(home, initial, fragment):
    (home / "streams").mkdir()
    (home / "streams" / "tasks.jsonl").write_bytes(initial)
    keep = initial[: initial.rfind(b"\n") + 1]
    assert [r.raw for r in read_lines(home, "tasks")] == keep.splitlines()  # readers stop at the last newline
    result = append(home, [OPENED], fsync="batch")
    content = stream_bytes(home, "tasks")
    assert content.startswith(keep) and parse_line(content[len(keep) :]).task == "T-1"
    found = fragments(home)
    assert [p.read_bytes() for p in found] == ([fragment] if fragment else [])
    assert result.quarantined == [str(p) for p in found]
    if fragment:
        assert found[0].name.startswith(f"tasks.{len(keep):020d}.")


def test_repair_quarantines_torn_tails_of_every_stream(home):
    append(home, [OPENED, RATED], fsync="never")
    for stream, tail in (("tasks", b'{"ty'), ("ratings", b"\xff\xfe")):
        with open(home / "streams" / f"{stream}.jsonl", "ab") as handle:
            handle.write(tail)
    moved = repair(home).quarantined
    assert sorted(Path(p).read_bytes() for p in moved) == sorted([b'{"ty', b"\xff\xfe"])
    assert stream_bytes(home, "tasks").endswith(b"\n") and stream_bytes(home, "ratings").endswith(b"\n")
    assert repair(home).quarantined == []


def test_read_lines_offsets_and_long_lines(home):
    big = {**OPENED, "pad": "p" * 1_500_000}  # spans read chunks
    append(home, [OPENED, big, OPENED], fsync="never", max_bytes=2_000_000)
    content = stream_bytes(home, "tasks")
    got = list(read_lines(home, "tasks"))
    assert [(r.line_no, content[r.offset : r.offset + len(r.raw)]) for r in got] == [
        (i + 2, r.raw)
        for i, r in enumerate(got)  # line 1 is the batch's begin
    ]
    assert b"\n".join(r.raw for r in got) + b"\n" == b"".join(content.splitlines(keepends=True)[1:-1])
    assert [r.line_no for r in read_lines(home, "tasks", start=got[2].offset, start_line=4)] == [4]


def test_read_raises_or_skips_invalid_lines(home):
    (home / "streams").mkdir()
    (home / "streams" / "tasks.jsonl").write_bytes(b'{"type":"x"}\nnot json\n{"type":"y"}\n')
    assert [e.type for e in read(home, "tasks", errors="skip")] == ["x", "y"]
    with pytest.raises(Exception, match=r"tasks.jsonl:2: -: not valid JSON"):
        list(read(home, "tasks"))


# --------------------------------------------------------------------------- faults (disk full)
def _failing(real, fail_at: int, *, short_first: bool = False):
    """``real`` (os.write, os.pwrite or os.fsync) failing with ENOSPC on call ``fail_at``; with ``short_first``
    an ``os.write`` before it writes only half of its bytes."""
    calls = [0]

    def call(fd, data=None, *rest):
        calls[0] += 1
        if short_first and calls[0] == fail_at - 1:
            return real(fd, bytes(data)[: max(1, len(data) // 2)], *rest)
        if calls[0] == fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, *(() if data is None else (data,)), *rest)

    return call


BIG = [{**OPENED, "task": f"T-{i}", "pad": "p" * 300} for i in range(6)]
TWO = [*BIG[:3], *({**RATED, "task": f"T-{i}", "pad": "p" * 300} for i in range(3)), BIG[3]]


@pytest.mark.parametrize(
    "batch, call, fail_at, short_first",
    [
        ([OPENED], "write", 1, False),  # a single line fails outright
        ([OPENED], "write", 2, True),  # a single line written short, finishing it fails
        (BIG, "write", 1, False),  # the first write call of a batch
        (BIG, "write", 3, False),  # the third, the part half written
        (BIG, "write", 4, True),  # a short write, then the rest fails
        (BIG, "pwrite", 1, False),  # the note in the lock file
        (BIG, "fsync", 1, False),  # the note's fsync
        (BIG, "fsync", 2, False),  # the stream's fsync, every byte written
        (TWO, "write", 2, False),  # two streams: inside the tasks part
        (TWO, "write", 5, False),  # inside the ratings part
        (TWO, "write", 8, False),  # the tasks end: the ratings part is whole by now
        (TWO, "pwrite", 2, False),  # the ratings note, the tasks note written
        (TWO, "fsync", 4, False),  # after the tasks lines
        (TWO, "fsync", 5, False),  # after the ratings part
    ],
)
def test_disk_full_appends_nothing(home, monkeypatch, batch, call, fail_at, short_first):
    append(home, [{**OPENED, "task": "before"}, {**RATED, "task": "before"}], fsync="never")
    before = {s: stream_bytes(home, s) for s in ("tasks", "ratings")}
    monkeypatch.setattr(framing, "_WRITE", 400)  # about one write call per line
    real = getattr(os, call)
    monkeypatch.setattr(os, call, _failing(real, fail_at, short_first=short_first))
    with pytest.raises(OSError) as info:
        append(home, batch, fsync="batch")
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSPC
    if len(batch) > 1:
        assert "the batch was rolled back: nothing of it was appended" in info.value.__notes__
    assert {s: stream_bytes(home, s) for s in before} == before
    assert all((home / "streams" / f".{s}.lock").read_bytes() == b"" for s in before)
    append(home, [{**OPENED, "task": "after"}, {**RATED, "task": "after"}], fsync="never")
    assert [e.task for e in read(home, "tasks")] == ["before", "after"]
    assert [e.task for e in read(home, "ratings")] == ["before", "after"] and fragments(home) == []


def test_a_batch_that_cannot_be_rolled_back_is_recovered_by_the_next_append(home, monkeypatch):
    append(home, [{**OPENED, "task": "before"}], fsync="never")
    before = stream_bytes(home, "tasks")
    monkeypatch.setattr(framing, "_WRITE", 400)
    monkeypatch.setattr(os, "write", _failing(os.write, 3))
    real_truncate = os.ftruncate

    def truncate(fd: int, size: int) -> None:
        if size == len(before):  # the roll-back of the stream (the note's own truncation goes through)
            raise OSError(errno.EIO, "Input/output error")
        real_truncate(fd, size)

    monkeypatch.setattr(os, "ftruncate", truncate)
    with pytest.raises(OSError) as info:
        append(home, BIG, fsync="batch")
    monkeypatch.undo()
    assert any("could not be rolled back" in note for note in info.value.__notes__)
    assert [e.task for e in read(home, "tasks")] == ["before"]  # readers stop before the unfinished batch
    result = append(home, [{**OPENED, "task": "after"}], fsync="never")
    assert [Path(p).suffix for p in result.quarantined] == [".batch"]
    assert stream_bytes(home, "tasks").startswith(before) and [e.task for e in read(home, "tasks")] == [
        "before",
        "after",
    ]


def test_disk_full_while_quarantining_keeps_the_tail_for_next_time(home, monkeypatch):
    append(home, [OPENED], fsync="never")
    with open(home / "streams" / "tasks.jsonl", "ab") as handle:
        handle.write(b'{"torn')
    monkeypatch.setattr(os, "write", _failing(os.write, 1))
    with pytest.raises(OSError):
        append(home, [OPENED], fsync="never")
    monkeypatch.undo()
    assert stream_bytes(home, "tasks").endswith(b'{"torn') and fragments(home) == []
    append(home, [OPENED], fsync="never")
    assert [p.read_bytes() for p in fragments(home)] == [b'{"torn'] and len(list(read(home, "tasks"))) == 2


# --------------------------------------------------------------------------- fuzz: never corrupts the stream
raw_items = st.one_of(
    st.binary(max_size=200),
    st.dictionaries(
        st.sampled_from(["type", "task", "score", "config", "rater", "at", "id", "x"]),
        st.none()
        | st.booleans()
        | st.floats()
        | st.integers()
        | st.text(max_size=10)
        | st.just(CONFIG)
        | st.just("task.rated")
        | st.just("task.opened"),
        max_size=6,
    ),
    st.builds(
        lambda base, key, value: {**base, key: value},
        st.sampled_from([OPENED, RATED]),
        st.sampled_from(["score", "task", "at", "extra", "id", "v"]),
        st.floats() | st.integers() | st.text(max_size=30) | st.lists(st.integers(), max_size=3),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(item=raw_items)
def test_fuzz_append_never_corrupts(home, item):
    before = {s: stream_bytes(home, s) for s in ("tasks", "ratings")}
    try:
        append(home, [item], fsync="never")
    except InvalidBatch as exc:
        assert len(exc.errors) == 1 and str(exc.errors[0]).startswith("<input>:1: ")
        assert {s: stream_bytes(home, s) for s in before} == before
        return
    grown = [s for s in before if stream_bytes(home, s) != before[s]]
    if isinstance(item, (bytes, str)) and not item.strip():  # a blank line: skipped, nothing written
        assert grown == []
        return
    assert len(grown) == 1
    new = stream_bytes(home, grown[0])
    assert (
        new.startswith(before[grown[0]])
        and new.endswith(b"\n")
        and new.count(b"\n") == before[grown[0]].count(b"\n") + 1
    )
    parse_line(new[len(before[grown[0]]) :])


# --------------------------------------------------------------------------- concurrency
WRITERS, PER_WRITER = 8, 500


def _writer(home: str, writer: int) -> None:
    rng = random.Random(writer)
    for seq in range(PER_WRITER):
        event = {**RATED, "task": f"W{writer}"} if seq % 3 else {**OPENED, "task": f"W{writer}"}
        event = {**event, "writer": writer, "seq": seq}
        if seq % 60 == 7:  # some lines up to ~1 MB
            event["pad"] = "x" * rng.randint(100_000, 1_000_000)
        append(home, [event], fsync="never")


@pytest.mark.slow
def test_concurrent_writers_interleave_whole_lines(home):
    procs = [FORK.Process(target=_writer, args=(str(home), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    seen: dict[int, list[int]] = {w: [] for w in range(WRITERS)}
    for stream in ("tasks", "ratings"):
        assert stream_bytes(home, stream).endswith(b"\n")
        per_stream: dict[int, list[int]] = {w: [] for w in range(WRITERS)}
        for event in read(home, stream):  # raises on any unparsable line
            per_stream[event.extra["writer"]].append(event.extra["seq"])
        for w, seqs in per_stream.items():
            assert seqs == sorted(seqs), f"writer {w} out of order in {stream}"
            seen[w] += seqs
    assert all(sorted(seqs) == list(range(PER_WRITER)) for seqs in seen.values())
    assert fragments(home) == []


# --------------------------------------------------------------------------- crash safety
def _crashing_appender(home: str, torn: multiprocessing.Event | None) -> None:
    """Append big lines forever. With ``torn``: write half of a line, say so, and hang there."""
    if torn is not None:
        real = os.write

        def half_then_hang(fd, data):
            if len(data) > 10_000:
                real(fd, data[: len(data) // 2])
                torn.set()
                time.sleep(60)
            return real(fd, data)

        streams.os.write = half_then_hang
    rng = random.Random(os.getpid())
    while True:
        append(
            home,
            [{**OPENED, "task": f"T-{rng.randrange(10**6)}", "pad": "y" * rng.randint(20_000, 400_000)}],
            fsync="never",
        )


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, rounds",
    [
        ("torn", 12),  # killed while holding the lock with half a line written: a torn tail every time
        ("random", 8),  # killed at a random moment of a real append loop: a torn tail sometimes
    ],
)
def test_sigkill_mid_write_many_times(home, mode, rounds):
    rng = random.Random(5)
    stream = home / "streams" / "tasks.jsonl"
    prefix = b""
    seen_fragments: list[Path] = []
    for round_no in range(rounds):
        torn = FORK.Event() if mode == "torn" else None
        proc = FORK.Process(target=_crashing_appender, args=(str(home), torn))
        proc.start()
        if torn is not None:
            assert torn.wait(20)
        else:
            time.sleep(rng.uniform(0.02, 0.08))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(20)
        assert proc.exitcode == -signal.SIGKILL
        content = stream.read_bytes() if stream.exists() else b""
        assert content.startswith(prefix), "the valid prefix changed"
        whole = content[: content.rfind(b"\n") + 1]
        tail = content[len(whole) :]
        if mode == "torn":
            assert tail, "the torn writer left no torn tail"
        assert all(parse_line(r.raw) for r in read_lines(home, "tasks", start=len(prefix)))
        # the next writer (here: this process) quarantines the tail and starts on a fresh line
        if round_no % 2:
            append(home, [{**OPENED, "task": f"after-{round_no}"}], fsync="batch")
        else:
            repair(home)
        new_fragments = [p for p in fragments(home) if p not in seen_fragments]
        assert [p.read_bytes() for p in new_fragments] == ([tail] if tail else [])
        seen_fragments += new_fragments
        content = stream.read_bytes() if stream.exists() else b""
        assert content.startswith(whole) and (content == b"" or content.endswith(b"\n"))
        if round_no % 2:
            assert parse_line(content[len(whole) :]).task == f"after-{round_no}"
        prefix = content
    assert len(list(read(home, "tasks"))) == prefix.count(b"\n")
    assert Workspace.of(home).quarantine.exists() == bool(seen_fragments)


# --------------------------------------------------------------------------- crash safety of batches
#: (tasks lines, ratings lines) of each batch, per shape
SHAPES = {"one stream": (0, 5), "two streams": (3, 4)}
KILL_LOG: list[str] = []


def _batch(shape: str, n: int) -> list[dict]:
    tasks, ratings = SHAPES[shape]
    out = [{**OPENED, "task": f"B{n}", "k": k} for k in range(tasks)]
    return out + [{**RATED, "task": f"B{n}", "k": k, "pad": "r" * (k * 37)} for k in range(ratings)]


def _batch_appender(home: str, shape: str, first: int, target: int, ready, ack_fd: int) -> None:
    """Append batches ``first, first+1, ...`` (fsync=batch), writing each acknowledged number to ``ack_fd``.

    With ``target`` > 0: count the calls of os.write, os.pwrite, os.ftruncate and os.fsync (recovery's own
    included) and, at call ``target``, hang there (an os.write having written half of its bytes) for the parent
    to SIGKILL; so every step of the writer and of recovery is a kill point. Parts are written a few lines per
    write call."""
    real_write = os.write
    framing._WRITE = 120
    if target:
        calls = [0]

        def hook(name: str):
            real = getattr(os, name)

            def call(fd, *args):
                calls[0] += 1
                if calls[0] == target:
                    if name == "write":
                        real(fd, bytes(args[0])[: max(1, len(args[0]) // 2)])
                    ready.set()
                    time.sleep(60)
                return real(fd, *args)

            return call

        for name in ("write", "pwrite", "ftruncate", "fsync"):
            setattr(os, name, hook(name))
    n = first
    while True:
        append(home, _batch(shape, n), fsync="batch")
        real_write(ack_fd, f"{n}\n".encode())
        n += 1


def _counts(home: Path, stream: str) -> dict[int, int]:
    counts: dict[int, int] = {}
    for event in read(home, stream):
        if event.task.startswith("B"):
            counts[int(event.task[1:])] = counts.get(int(event.task[1:]), 0) + 1
    return counts


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_sigkill_mid_batch_at_every_step(home, shape):
    """Kill a batch writer at its k-th write/pwrite/ftruncate/fsync (k = 1..45, so every step of a batch, of
    the recovery that follows the previous kill, and of the next batches), then at random moments. After each
    kill a reader sees each stream's part of a batch wholly or not at all; after recovery (the consistent cut
    compaction takes) each batch is in both streams or in neither, and every acknowledged batch is whole."""
    rng = random.Random(11)
    tasks_n, ratings_n = SHAPES[shape]
    targets = list(range(1, 46)) + [0] * 10  # 0: no hook, a kill at a random moment
    acked: set[int] = set()
    tally = {"kills": 0, "acknowledged": 0, "visible": 0, "killed batch whole": 0, "killed batch absent": 0}
    for round_no, target in enumerate(targets):
        ready = FORK.Event()
        read_fd, write_fd = os.pipe()
        first = round_no * 1000
        proc = FORK.Process(target=_batch_appender, args=(str(home), shape, first, target, ready, write_fd))
        proc.start()
        os.close(write_fd)
        if target:
            assert ready.wait(30), f"kill point {target} never reached"
        else:
            time.sleep(rng.uniform(0.005, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(20)
        assert proc.exitcode == -signal.SIGKILL
        tally["kills"] += 1
        with os.fdopen(read_fd, "rb") as pipe:
            this_round = {int(x) for x in pipe.read().split()}
        assert this_round == set(range(first, first + len(this_round)))
        acked |= this_round
        # a reader that takes no lock: each stream's part whole or absent
        assert set(_counts(home, "tasks").values()) <= {tasks_n}
        assert set(_counts(home, "ratings").values()) <= {ratings_n}
        # recovery, then both streams: each batch whole in both or in neither; acknowledged ones whole
        consistent_cut(home)
        tasks, ratings = _counts(home, "tasks"), _counts(home, "ratings")
        started = range(first, first + 1000)
        for n in started:
            assert (tasks.get(n, 0), ratings.get(n, 0)) in ((0, 0), (tasks_n, ratings_n)), (target, n)
        assert all(ratings.get(n) == ratings_n for n in acked)
        killed = first + len(this_round)  # the batch in flight when the kill came (maybe not begun)
        assert not any(ratings.get(n) for n in started if n > killed)
        tally["killed batch whole" if ratings.get(killed) else "killed batch absent"] += 1
        tally["visible"] += sum(1 for n in started if ratings.get(n))
    tally["acknowledged"] = len(acked)
    left = [p.suffix for p in (home / "quarantine").iterdir()] if (home / "quarantine").exists() else []
    tally["quarantined batch parts"] = left.count(".batch")
    tally["quarantined fragments"] = left.count(".fragment")
    KILL_LOG.append(f"{shape}: {tally}")
    print(f"\nSIGKILL of batch appends, {shape}: {tally}")
    assert tally["kills"] == len(targets) and tally["acknowledged"] > 0
    assert tally["visible"] == tally["acknowledged"] + tally["killed batch whole"]
