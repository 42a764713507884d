"""Batch framing: frame lines, the reference scanner, recovery from every state a crash can leave, the consistent cut.

The disk states are built by hand (a batch cut short at every byte, with and without the note a writer leaves in the
lock file), then recovered and read: every batch is seen wholly or not at all, and nothing appended before it moves.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from pipeline.streams import events, framing
from pipeline.streams.framing import consistent_cut
from pipeline.streams.log import append, read, read_lines, repair
from pipeline.streams.scan import BEGIN, END, BatchBegin, BatchEnd, Then, Verdict, frame_of, scan_bytes
from pipeline.workspace import Workspace

FORK = multiprocessing.get_context("fork")


def ev(name: str, **extra: object) -> bytes:
    """One event line (a task.opened named ``name``), newline included."""
    return (
        json.dumps({"id": name, "type": "task.opened", "task": name, **extra}, separators=(",", ":")).encode() + b"\n"
    )


def part(batch: str, lines: list[bytes], then: int | None = None) -> bytes:
    """A whole part: begin, lines, end."""
    size = sum(len(x) for x in lines)
    begin = BatchBegin(id=batch, lines=len(lines), bytes=size, then=Then(ratings=then) if then is not None else None)
    return begin.line() + b"".join(lines) + BatchEnd(id=batch).line()


def label(raw: bytes) -> str:
    """``begin X`` / ``end X`` for a frame line, the id of an event line, else the line's first 12 bytes."""
    frame = frame_of(raw)
    if frame is not None:
        return f"{frame.type.split('.')[1]} {frame.id}"
    try:
        return json.loads(raw)["id"]
    except (ValueError, KeyError):
        return raw[:12].decode()


def verdicts(data: bytes) -> tuple[list[tuple[str, str]], int]:
    """(label, verdict) of each line and where the scan stopped."""
    scan = scan_bytes(data)
    out = [(label(line.raw), line.verdict.value) for line in scan]
    return out, scan.stop


# --------------------------------------------------------------------------- frame lines
def test_the_reserved_types_are_the_frame_types():
    assert {BEGIN, END} == events.RESERVED_TYPES


@pytest.mark.parametrize(
    "raw, frame",
    [
        (b'{"type":"batch.begin","id":"B1","lines":2,"bytes":30}', BatchBegin(id="B1", lines=2, bytes=30)),
        (
            b'{"type":"batch.begin","id":"B1","lines":2,"bytes":30,"then":{"ratings":0}}',
            BatchBegin(id="B1", lines=2, bytes=30, then=Then(ratings=0)),
        ),
        (b'{"type":"batch.end","id":"B1"}', BatchEnd(id="B1")),
        # only the exact form is a frame; anything else of a reserved type is an (invalid) event line
        (b'{"type": "batch.end", "id": "B1"}', None),
        (b'{"id":"B1","type":"batch.end"}', None),
        (b'{"type":"batch.end","id":"B1","x":1}', None),
        (b'{"type":"batch.begin","id":"B1","lines":0,"bytes":30}', None),
        (b'{"type":"batch.begin","id":"B1","lines":2,"bytes":030}', None),
        (b'{"type":"batch.begin","id":"B1","lines":2}', None),
        (b'{"type":"batch.end","id":"a b"}', None),
        (b'{"type":"batch.end","id":"a\\u0062"}', None),
        (b'{"type":"batch.end","id":""}', None),
        (b'{"type":"task.opened","task":"batch.end"}', None),
    ],
)
def test_frame_of_takes_only_the_exact_form(raw, frame):
    assert frame_of(raw) == frame
    if frame is not None:
        assert frame.line() == raw + b"\n"


def test_the_event_parser_refuses_the_reserved_types():
    for raw in (b'{"type": "batch.end", "id": "B1"}', b'{"type":"batch.begin"}'):
        with pytest.raises(events.InvalidEvent, match=r"'batch\.(begin|end)' is reserved for the frame lines") as info:
            events.parse_line(raw)
        assert info.value.field == "type"


# --------------------------------------------------------------------------- the reference scanner
A, B, C, D = ev("a"), ev("b"), ev("c"), ev("d")
WHOLE = part("X", [A, B])
BIG = BatchBegin(id="H", lines=3, bytes=10_000).line()  # claims far more bytes than follow


@pytest.mark.parametrize(
    "data, expected",
    [
        ("plain", [("a", "take"), ("b", "take")]),
        ("whole", [("c", "take"), ("begin X", "frame"), ("a", "take"), ("b", "take"), ("end X", "frame")]),
        ("two whole parts", [("begin X", "frame"), ("a", "take"), ("b", "take"), ("end X", "frame")] * 2),
        ("with then", [("begin T", "frame"), ("a", "take"), ("end T", "frame")]),
        ("unfinished: lines missing", [("c", "take")]),
        ("unfinished: only the end missing", [("c", "take")]),
        ("torn end line", [("c", "take")]),
        ("end without begin", [("c", "take"), ("end X", "broken")]),
        ("count wrong", [("begin X", "broken"), ("a", "broken"), ("b", "broken"), ("end X", "broken"), ("c", "take")]),
        (
            "bytes cross a line",  # c starts within the B bytes: it is part of the broken part
            [("begin X", "broken"), ("a", "broken"), ("b", "broken"), ("c", "broken"), ("d", "take")],
        ),
        ("end missing, a line instead", [("begin X", "broken"), ("a", "broken"), ("b", "broken"), ("c", "take")]),
        (
            "a frame inside: the later batch is not swallowed",
            [
                ("begin H", "broken"),
                ("a", "broken"),
                ("begin X", "frame"),
                ("a", "take"),
                ("b", "take"),
                ("end X", "frame"),
                ("c", "take"),
            ],
        ),
        ("a frame-like line that is not a frame", [("Q", "take")]),
    ],
)
def test_scanner_decides_every_line(data, expected):
    streams = {
        "plain": A + B,
        "whole": C + WHOLE + b'{"torn',
        "two whole parts": WHOLE + WHOLE,
        "with then": part("T", [A], then=42),
        "unfinished: lines missing": C + WHOLE[: len(WHOLE) - len(B) - 30],
        "unfinished: only the end missing": C + WHOLE[: WHOLE.rindex(b'{"type":"batch.end')],
        "torn end line": C + WHOLE[:-3],
        "end without begin": C + BatchEnd(id="X").line(),
        "count wrong": BatchBegin(id="X", lines=3, bytes=len(A + B)).line() + A + B + BatchEnd(id="X").line() + C,
        "bytes cross a line": BatchBegin(id="X", lines=2, bytes=len(A + B) + 3).line() + A + B + C + D,
        "end missing, a line instead": BatchBegin(id="X", lines=2, bytes=len(A + B)).line() + A + B + C,
        "a frame inside: the later batch is not swallowed": BIG + A + WHOLE + C,
        "a frame-like line that is not a frame": b'{"type": "batch.begin", "id": "Q"}\n',
    }
    got, stop = verdicts(streams[data])
    assert got == expected
    if data.startswith(("unfinished", "torn end")):
        assert stop == len(C)  # stopped before the unfinished part's begin


def test_broken_lines_carry_the_reason_and_numbers_count_every_line():
    data = C + BatchBegin(id="X", lines=2, bytes=len(A + B)).line() + A + B + C
    scan = scan_bytes(data, base=1000, start_line=10)
    lines = list(scan)
    assert [(x.line_no, x.offset) for x in lines] == [
        (10, 1000),
        (11, 1000 + len(C)),
        (12, 1000 + len(C) + len(data[len(C) :].split(b"\n")[0]) + 1),
        (13, 1000 + len(data) - len(C) - len(B)),
        (14, 1000 + len(data) - len(C)),
    ]
    assert {x.reason for x in lines if x.verdict is Verdict.BROKEN} == {
        "part of batch X, whose batch.end is missing: a batch is all or nothing"
    }
    assert scan.stop == 1000 + len(data) and scan.stop_line == 15


# --------------------------------------------------------------------------- recovery, built by hand
def write_home(home: Path, tasks: bytes, ratings: bytes, notes: dict[str, bytes]) -> Workspace:
    (home / "streams").mkdir(parents=True, exist_ok=True)
    (home / "streams" / "tasks.jsonl").write_bytes(tasks)
    (home / "streams" / "ratings.jsonl").write_bytes(ratings)
    for stream, note in notes.items():
        (home / "streams" / f".{stream}.lock").write_bytes(note)
    return Workspace.of(home)


def quarantined(home: Path) -> dict[str, bytes]:
    folder = home / "quarantine"
    return (
        {p.name.split(".")[0] + "." + p.suffix[1:]: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}
    )


R1, R2 = ev("r1"), ev("r2")
OLD = ev("old")  # appended (and acknowledged) before the batch
TPART = part("X", [A, B], then=len(OLD))
RPART = part("X", [R1, R2])
T_LINES = TPART[: TPART.rindex(b'{"type":"batch.end')]


@pytest.mark.parametrize(
    "case, tasks, ratings, notes, after_tasks, after_ratings, moved",
    [
        ("clean", OLD, OLD, {}, OLD, OLD, {}),
        ("torn tail", OLD + b'{"ty', OLD, {}, OLD, OLD, {"tasks.fragment": b'{"ty'}),
        ("whole batch, notes left", OLD + TPART, OLD + RPART, "both", OLD + TPART, OLD + RPART, {}),
        ("note, nothing written", OLD, OLD, "both", OLD, OLD, {}),
        ("garbled note", OLD, OLD, {"tasks": b"X 1"}, OLD, OLD, {}),
        ("stale note: another line at O", OLD + C, OLD, {"tasks": f"X {len(OLD)}\n".encode()}, OLD + C, OLD, {}),
        (
            "tasks lines whole, end missing, ratings whole: roll forward",
            OLD + T_LINES,
            OLD + RPART,
            "both",
            OLD + TPART,
            OLD + RPART,
            {},
        ),
        (
            "tasks lines whole, ratings cut: roll both back",
            OLD + T_LINES,
            OLD + RPART[:-5],
            "both",
            OLD,
            OLD,
            {
                "tasks.batch": T_LINES,
                "ratings.batch": RPART[: RPART.rindex(b"\n", 0, len(RPART) - 5) + 1],
                "ratings.fragment": RPART[RPART.rindex(b"\n", 0, len(RPART) - 5) + 1 : -5],
            },
        ),
        ("tasks cut mid-line", OLD + T_LINES[:-7], OLD, "both", OLD, OLD, "tasks cut"),
    ],
)
def test_recovery_decision_table(home, case, tasks, ratings, notes, after_tasks, after_ratings, moved):
    if notes == "both":
        notes = {s: f"X {len(OLD)}\n".encode() for s in ("tasks", "ratings")}
    write_home(home, tasks, ratings, notes)
    done = repair(home)
    assert (home / "streams" / "tasks.jsonl").read_bytes() == after_tasks
    assert (home / "streams" / "ratings.jsonl").read_bytes() == after_ratings
    assert all((home / "streams" / f".{s}.lock").read_bytes() == b"" for s in notes)
    got = quarantined(home)
    if moved == "tasks cut":  # the torn line goes to a fragment, the rest of the part to a batch file
        cut = T_LINES[:-7]
        keep = cut.rindex(b"\n") + 1
        moved = {"tasks.fragment": cut[keep:], "tasks.batch": cut[:keep]}
    assert got == moved
    assert len(done.quarantined) == len(moved)
    assert done.completed == (["tasks:X"] if "roll forward" in case else [])


def test_a_batch_left_unfinished_without_a_note_stops_readers_until_repair(home):
    write_home(home, OLD + T_LINES, OLD, {})
    assert [r.raw for r in read_lines(home, "tasks")] == [OLD[:-1]]
    assert repair(home).quarantined and quarantined(home) == {"tasks.batch": T_LINES}
    assert (home / "streams" / "tasks.jsonl").read_bytes() == OLD


# --------------------------------------------------------------------------- power loss at every byte
def _writes(old_tasks: bytes, old_ratings: bytes) -> list[tuple[str, bytes]]:
    """The writer's bytes in the order it writes them, for a two-stream batch after some acknowledged lines."""
    tpart = part("P", [A, B, C], then=len(old_ratings))
    rpart = part("P", [R1, R2])
    t_end = BatchEnd(id="P").line()
    return [("tasks", tpart[: -len(t_end)]), ("ratings", rpart), ("tasks", t_end)]


def _state_at(cut: int, writes: list[tuple[str, bytes]]) -> dict[str, bytes]:
    """What each stream holds when the power fails ``cut`` bytes into the batch."""
    out = {"tasks": b"", "ratings": b""}
    for stream, data in writes:
        take = min(cut, len(data))
        out[stream] += data[:take]
        cut -= take
    return out


def _seen(home: Path) -> dict[str, list[str]]:
    return {s: [e.task for e in read(home, s)] for s in ("tasks", "ratings")}


@pytest.mark.parametrize("with_note", [True, False])
def test_power_loss_at_every_byte_of_a_two_stream_batch(tmp_path, with_note):
    old = {"tasks": OLD, "ratings": ev("rold")}
    writes = _writes(old["tasks"], old["ratings"])
    total = sum(len(data) for _, data in writes)
    whole = {"tasks": ["old", "a", "b", "c"], "ratings": ["rold", "r1", "r2"]}
    before = {"tasks": ["old"], "ratings": ["rold"]}
    outcomes = {"whole": 0, "none": 0}
    for cut in range(total + 1):
        home = tmp_path / f"cut-{cut}"
        state = _state_at(cut, writes)
        notes = {s: f"P {len(old[s])}\n".encode() for s in old} if with_note else {}
        write_home(home, old["tasks"] + state["tasks"], old["ratings"] + state["ratings"], notes)
        # a reader that takes no lock never sees a prefix of a stream's part
        for stream in ("tasks", "ratings"):
            seen = [e.task for e in read(home, stream)]
            assert seen in (before[stream], whole[stream]), (cut, stream, seen)
        # after recovery (the cut compaction takes), the batch is in both streams or in neither
        consistent_cut(home)
        if not with_note:
            repair(home)  # only repair looks back for a batch left without its note
        got = _seen(home)
        assert got in (before, whole), (cut, got)
        outcomes["whole" if got == whole else "none"] += 1
        if cut == total:
            assert got == whole  # the writer finished: nothing acknowledged is lost
        # the next append lands after whatever recovery left, and nothing before it moved
        append(home, [{"type": "task.opened", "task": "next", "id": "next"}], fsync="never")
        assert _seen(home)["tasks"] == got["tasks"] + ["next"]
    # Once the ratings part is whole, only the tasks end is missing: recovery rolls forward (the finished batch
    # and every cut inside the tasks end line); every earlier cut rolls back.
    assert outcomes["whole"] == 1 + len(BatchEnd(id="P").line())
    assert outcomes["whole"] + outcomes["none"] == total + 1
    print(f"\npower loss at every byte, note {'kept' if with_note else 'lost'}: {total + 1} states, {outcomes}")


# --------------------------------------------------------------------------- the consistent cut, under a live writer
def _two_stream_writer(home: str, batches: int) -> None:
    """Append two-stream batches; pause (a slow disk) before each tasks end, when the ratings part is whole."""
    real = framing._write_chunked

    def slow_end(held, pieces, fsync):
        if held.stream == "tasks" and len(pieces) == 1 and frame_of(pieces[0][:-1]) is not None:
            time.sleep(0.002)
        real(held, pieces, fsync)

    framing._write_chunked = slow_end
    for n in range(batches):
        batch = [{"type": "task.opened", "task": f"B{n}", "k": i} for i in range(3)]
        batch += [
            {
                "type": "task.rated",
                "task": f"B{n}",
                "config": {"cli": "c", "model": "m"},
                "rater": {"kind": "gate", "name": "g"},
                "score": 1,
                "k": i,
            }
            for i in range(2)
        ]
        append(home, batch, fsync="never")


@pytest.mark.slow
def test_consistent_cut_never_splits_a_batch(home):
    proc = FORK.Process(target=_two_stream_writer, args=(str(home), 300))
    proc.start()
    cuts: list[dict[str, int]] = []
    while proc.is_alive() or not cuts:
        cut = consistent_cut(home)
        counts: dict[str, dict[str, int]] = {"tasks": {}, "ratings": {}}
        for stream in ("tasks", "ratings"):
            for line in read_lines(home, stream, end=cut[stream]):
                task = json.loads(line.raw)["task"]
                counts[stream][task] = counts[stream].get(task, 0) + 1
        assert set(counts["tasks"]) == set(counts["ratings"])
        assert set(counts["tasks"].values()) <= {3} and set(counts["ratings"].values()) <= {2}
        cuts.append(cut)
    proc.join(20)
    assert proc.exitcode == 0
    assert len({c["tasks"] for c in cuts}) >= 3  # cuts were taken while batches were being written


def _hold_and_die(home: str, ready: multiprocessing.Event) -> None:
    """Write a two-stream batch's tasks lines, then die holding the locks (a SIGKILL mid-batch)."""
    real = framing._write_chunked
    calls = [0]

    def write_then_die(held, pieces, fsync):
        real(held, pieces, fsync)
        calls[0] += 1
        if calls[0] == 1:
            ready.set()
            time.sleep(60)

    framing._write_chunked = write_then_die
    append(home, [{"type": "task.opened", "task": "T"}, {"type": "rating.retracted", "rating": "r", "reason": "x"}])


def test_a_writer_killed_holding_both_locks_is_recovered_by_the_cut(home):
    ready = FORK.Event()
    proc = FORK.Process(target=_hold_and_die, args=(str(home), ready))
    proc.start()
    assert ready.wait(20)
    assert [r.raw for r in read_lines(home, "tasks")] == []  # a reader stops before the unfinished part
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(20)
    assert consistent_cut(home) == {"tasks": 0, "ratings": 0}
    assert sorted(p.name.split(".")[-1] for p in (home / "quarantine").iterdir()) == ["batch"]


def test_the_cut_waits_for_a_writer_that_holds_the_locks_before_the_streams_exist(home, monkeypatch):
    """A writer (in any language) takes both locks, then creates the streams: the cut must not see the missing
    tasks stream as empty while the ratings part lands, or it splits the very first batch (tasks 0, ratings
    whole). It takes the tasks lock anyway and finds the stream only once the writer is done. The writer
    goes on only once the cut is waiting on the tasks lock (the framing's wait hook says so)."""
    import threading

    from pipeline.streams import framing

    streams = home / "streams"
    streams.mkdir()
    locked, cut_waits = threading.Event(), threading.Event()
    waited: list[str] = []

    def waiting_for(stream: str) -> None:
        waited.append(stream)
        cut_waits.set()

    monkeypatch.setattr(framing, "waiting_for", waiting_for)
    tasks_part = part("b1", [ev("task.opened", task="T")], then=0)
    ratings_part = part("b1", [ev("rating.retracted", rating="r", reason="x")])
    tasks_lines, tasks_end = tasks_part[: -len(BatchEnd(id="b1").line())], BatchEnd(id="b1").line()

    def writer() -> None:
        import fcntl

        fds = [os.open(streams / f".{s}.lock", os.O_RDWR | os.O_CREAT) for s in ("tasks", "ratings")]
        for fd in fds:
            fcntl.flock(fd, fcntl.LOCK_EX)
        locked.set()
        assert cut_waits.wait(10)  # the cut is blocked on the tasks lock: finish the batch under it
        (streams / "tasks.jsonl").write_bytes(tasks_lines)
        (streams / "ratings.jsonl").write_bytes(ratings_part)
        with open(streams / "tasks.jsonl", "ab") as handle:
            handle.write(tasks_end)
        for fd in fds:
            os.close(fd)

    thread = threading.Thread(target=writer)
    thread.start()
    assert locked.wait(10)
    cut = consistent_cut(home)
    thread.join(10)
    assert waited == ["tasks"]  # it waited on the tasks lock; the ratings lock was free by then
    assert cut == {"tasks": len(tasks_part), "ratings": len(ratings_part)}
