"""The append-only streams (DESIGN 4): all-or-nothing batches, routing, locking, torn tails, faults."""

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

from pipeline import streams
from pipeline.errors import InvalidBatch
from pipeline.events import TaskOpened, parse_line
from pipeline.home import Home
from pipeline.streams import append, new_id, read, read_lines, repair

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
    assert all(str(e).startswith(f"batch.ndjson:{n}: ") for e, n in zip(info.value.errors, lines))
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


def test_new_ids_sort_by_time_and_are_unique():
    assert new_id(0).startswith("0" * 10) and new_id((1 << 48) - 1).startswith("7ZZZZZZZZZ")
    assert new_id(1_000) < new_id(2_000)
    ids = {new_id() for _ in range(10_000)}
    assert len(ids) == 10_000 and all(ULID.fullmatch(i) for i in ids)


def test_new_ids_are_unique_across_threads_and_forks(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(streams.time, "time", lambda: 1_700_000_000.0)  # one millisecond for every id

    with ThreadPoolExecutor(4) as pool:
        ids = [i for chunk in pool.map(lambda _: [new_id() for _ in range(5_000)], range(4)) for i in chunk]
    reader, writer = os.pipe()
    new_id()  # the parent's sequence is under way when it forks
    child = os.fork()
    if child == 0:
        os.write(writer, "".join(new_id() for _ in range(100)).encode())
        os._exit(0)
    ids += [new_id() for _ in range(100)]
    os.waitpid(child, 0)
    os.close(writer)
    with os.fdopen(reader, "rb") as handle:
        raw = handle.read().decode()
    ids += [raw[i : i + 26] for i in range(0, len(raw), 26)]
    assert len(ids) == len(set(ids)) == 20_200


def test_bad_fsync_policy(home):
    with pytest.raises(ValueError, match="fsync must be"):
        append(home, [OPENED], fsync="sometimes")


@pytest.mark.parametrize(
    "policy, lines, fsyncs",
    [
        ("never", 3, 0),
        ("batch", 3, 1),
        ("always", 3, 3),
    ],
)
def test_fsync_policy(home, monkeypatch, policy, lines, fsyncs):
    append(home, [OPENED], fsync="never")  # the stream exists: no directory fsync
    calls = []
    real = os.fsync
    monkeypatch.setattr(streams.os, "fsync", lambda fd: calls.append(fd) or real(fd))
    append(home, [OPENED] * lines, fsync=policy)
    assert len(calls) == fsyncs


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
    moved = repair(home)
    assert sorted(Path(p).read_bytes() for p in moved) == sorted([b'{"ty', b"\xff\xfe"])
    assert stream_bytes(home, "tasks").endswith(b"\n") and stream_bytes(home, "ratings").endswith(b"\n")
    assert repair(home) == []


def test_read_lines_offsets_and_long_lines(home):
    big = {**OPENED, "pad": "p" * 1_500_000}  # spans read chunks
    append(home, [OPENED, big, OPENED], fsync="never", max_bytes=2_000_000)
    content = stream_bytes(home, "tasks")
    got = list(read_lines(home, "tasks"))
    assert [(r.line_no, content[r.offset : r.offset + len(r.raw)]) for r in got] == [
        (i + 1, r.raw) for i, r in enumerate(got)
    ]
    assert b"\n".join(r.raw for r in got) + b"\n" == content
    assert [r.line_no for r in read_lines(home, "tasks", start=got[2].offset, start_line=3)] == [3]


def test_read_raises_or_skips_invalid_lines(home):
    (home / "streams").mkdir()
    (home / "streams" / "tasks.jsonl").write_bytes(b'{"type":"x"}\nnot json\n{"type":"y"}\n')
    assert [e.type for e in read(home, "tasks", errors="skip")] == ["x", "y"]
    with pytest.raises(Exception, match=r"tasks.jsonl:2: -: not valid JSON"):
        list(read(home, "tasks"))


# --------------------------------------------------------------------------- faults (disk full)
def _failing_write(fail_at: int, short_first: bool):
    """``os.write`` that fails with ENOSPC on call ``fail_at`` (after a short write on the call before, if asked)."""
    real = os.write
    calls = [0]

    def write(fd, data):
        calls[0] += 1
        if short_first and calls[0] == fail_at - 1:
            return real(fd, bytes(data)[: max(1, len(data) // 2)])
        if calls[0] == fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    return write


@pytest.mark.parametrize(
    "fail_at, short_first, whole_lines",
    [
        (1, False, 0),  # the first line fails outright
        (3, False, 2),  # two lines in, the third fails
        (2, True, 0),  # the first line is written short, finishing it fails
        (5, True, 3),  # three lines, the fourth short then failing
    ],
)
def test_disk_full_leaves_whole_lines(home, monkeypatch, fail_at, short_first, whole_lines):
    append(home, [{**OPENED, "task": "before"}], fsync="never")
    before = stream_bytes(home, "tasks")
    monkeypatch.setattr(streams.os, "write", _failing_write(fail_at, short_first))
    with pytest.raises(OSError) as info:
        append(home, [{**OPENED, "task": f"T-{i}"} for i in range(6)], fsync="batch")
    assert info.value.errno == errno.ENOSPC
    assert f"{whole_lines} of the 6 line(s)" in info.value.__notes__[0]
    monkeypatch.undo()
    content = stream_bytes(home, "tasks")
    assert content.startswith(before) and content.endswith(b"\n")
    assert [e.task for e in read(home, "tasks")] == ["before", *[f"T-{i}" for i in range(whole_lines)]]
    append(home, [{**OPENED, "task": "after"}], fsync="never")
    assert [e.task for e in read(home, "tasks")][-1] == "after" and fragments(home) == []


def test_disk_full_while_quarantining_keeps_the_tail_for_next_time(home, monkeypatch):
    append(home, [OPENED], fsync="never")
    with open(home / "streams" / "tasks.jsonl", "ab") as handle:
        handle.write(b'{"torn')
    monkeypatch.setattr(streams.os, "write", _failing_write(1, False))
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
    assert Home.resolve(home).quarantine.exists() == bool(seen_fragments)
