"""One import (pipeline/streams/imports/run.py, ledger.py, detect.py): a dry run writes nothing, a crash between
an appended chunk and its ledger run loses nothing, the ledger's runs merge, two imports into one home wait for
each other (one that another beat to a new home runs again), and --format auto tells every source apart (a file
of the wrong format is one line)."""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from pipeline.compact import compact
from pipeline.errors import InvalidEvent
from pipeline.store import open_store
from pipeline.streams.imports import ImportOptions, import_source, import_table
from pipeline.streams.imports.detect import sniff

DATA = Path(__file__).parents[2] / "data"
HEADER = "task_id,config,score,cost_usd,region,at"


def _table(tmp_path: Path, rows: int, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(
        HEADER
        + "\n"
        + "".join(f"T{i % 7},m{i % 3},{i % 2},0.1,r,2026-01-01T00:{i % 60:02d}:00Z\n" for i in range(rows))
    )
    return path


def test_a_dry_run_writes_nothing_and_counts_what_it_would_append(tmp_path):
    home = tmp_path / "new-home"
    path = _table(tmp_path, 25)
    dry = import_table(home, path, dry_run=True)
    assert not home.exists()
    real = import_table(home, path)
    assert (dry.dry_run, dry.appended, dry.events) == (True, real.appended, real.events)
    again = import_table(home, path, dry_run=True)
    assert (again.appended, again.unchanged) == (0, real.appended)
    assert sorted(p.name for p in (home / "imports" / "ledger").iterdir()) == ["imp.00000000.npy"]


def test_a_crash_after_a_chunk_and_before_its_ledger_run_loses_nothing(home, tmp_path, monkeypatch):
    from pipeline.streams.imports import ledger, run

    monkeypatch.setattr(run, "CHUNK_ROWS", 10)
    path = _table(tmp_path, 35)
    real, calls = ledger.Ledger.append, [0]

    def crash_on_the_second(self, *args):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt  # the process dies: the second chunk is appended, its ledger run is not
        return real(self, *args)

    monkeypatch.setattr(ledger.Ledger, "append", crash_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        import_table(home, path)
    monkeypatch.setattr(ledger.Ledger, "append", real)
    rerun = import_table(home, path)
    assert rerun.unchanged == 10 * 2 + 7  # the first chunk's events and its openings (every task opens in it)
    result = compact(home)
    assert result.streams["ratings"].duplicate == 10  # the second chunk again: dropped by compaction
    with open_store(home) as store:
        counts = store.event_counts()
    assert (counts["ratings"], counts["attempts"], counts["tasks"]) == (35, 35, 7)
    assert not list((home / "imports").glob(".spool-*"))


def test_the_ledgers_runs_merge_and_lookups_see_them_all(home, tmp_path, monkeypatch):
    from pipeline.streams.imports import ledger, run

    monkeypatch.setattr(run, "CHUNK_ROWS", 4)
    monkeypatch.setattr(ledger, "MERGE_AT", 2)
    for n, runs in ((10, 1), (20, 2), (30, 1)):  # each a newer export holding the older
        result = import_table(home, _table(tmp_path, n))
        assert result.events.get("task.rated", 0) == 10
        # an import's own runs merge into one at its end; all of them once there are more than MERGE_AT
        assert len(list((home / "imports" / "ledger").glob("imp.*.npy"))) == runs
    assert import_table(home, _table(tmp_path, 30)).appended == 0


def _rows_of(home: Path) -> tuple[int, int, int]:
    compact(home)
    with open_store(home) as store:
        counts = store.event_counts()
    return counts["tasks"], counts["attempts"], counts["ratings"]


def test_a_first_import_that_another_beat_to_the_home_runs_again_and_adds_what_it_would_after_it(tmp_path, monkeypatch):
    """b (rows 10 to 29 of a: each task's earliest row is later than in a) reads the new home's empty ledger, then
    a lands before b's lock: b's comparison is stale (it would open every task a second time, at other times), so
    b runs again under the lock and appends what it appends after a in turn: nothing."""
    from pipeline.streams.imports import run

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    a = _table(tmp_path / "a", 30)
    b = tmp_path / "b" / a.name  # the same rater (the file's name)
    b.write_text("\n".join([HEADER, *a.read_text().splitlines()[11:]]) + "\n")
    in_turn = tmp_path / "in-turn"
    import_table(in_turn, a)
    after_a = import_table(in_turn, b)
    real_lock, landed = run.Run._lock, []

    def a_lands_first(self):  # type: ignore[no-untyped-def]
        if not landed:  # between b's read of the ledger and its lock
            landed.append(True)
            import_table(tmp_path / "raced", a)
        real_lock(self)

    monkeypatch.setattr(run.Run, "_lock", a_lands_first)
    raced = import_table(tmp_path / "raced", b)
    assert (after_a.appended, after_a.unchanged, after_a.changed_kept) == (0, 40, 7)
    assert landed and raced.model_dump(exclude={"deadletter"}) == after_a.model_dump(exclude={"deadletter"})
    assert Path(raced.deadletter).read_bytes() == Path(after_a.deadletter).read_bytes()  # the 7 openings kept
    assert _rows_of(tmp_path / "raced") == _rows_of(in_turn) == (7, 30, 30)


def test_an_import_waits_for_another_into_the_same_home_and_then_lands(tmp_path, monkeypatch):
    from pipeline.streams.imports import run
    from pipeline.workspace import Workspace

    home = tmp_path / "home"
    import_table(home, _table(tmp_path, 5, "first.csv"))  # the home has imported: the lock is taken at the start
    waiting = threading.Event()
    monkeypatch.setattr(run, "waiting_for_import", lambda ws: waiting.set())
    other = os.open(Workspace.of(home).import_lock, os.O_RDWR)
    fcntl.flock(other, fcntl.LOCK_EX)  # another import holds the home
    out: dict[str, object] = {}
    worker = threading.Thread(target=lambda: out.update(result=import_table(home, _table(tmp_path, 30))))
    worker.start()
    try:
        assert waiting.wait(60)  # it found the lock held ...
        assert worker.is_alive() and not out  # ... and waits (no exit 3)
    finally:
        os.close(other)  # the other import ends
    worker.join(60)
    assert out["result"].appended > 0 and _rows_of(home) == (7, 30, 35)  # 5 ratings of first.csv


def _gz(path: Path) -> Path:
    out = path.with_name(path.name + ".gz")
    out.write_bytes(gzip.compress(path.read_bytes()))
    return out


@pytest.mark.parametrize(
    "make, fmt",
    [
        (lambda t: _table(t, 3), "long"),
        (lambda t: _gz(_table(t, 3)), "long"),
        (lambda t: shutil.copy(DATA / "livecodebench-sample.csv", t / "x.csv"), "long"),
        (lambda t: shutil.copy(DATA / "imports" / "otlp-genai.json", t / "x.json"), "otlp"),
        (lambda t: _gz(Path(shutil.copy(DATA / "imports" / "otlp-evaluations.jsonl", t / "e.jsonl"))), "otlp"),
        (lambda t: shutil.copytree(DATA / "imports" / "langfuse", t / "lf"), "langfuse"),
        (lambda t: shutil.copy(DATA / "imports" / "langfuse" / "scores.json", t / "s.json"), "langfuse"),
        (lambda t: shutil.copytree(DATA / "imports" / "langsmith", t / "ls"), "langsmith"),
        (lambda t: shutil.copy(DATA / "imports" / "langsmith" / "feedback.json", t / "f.json"), "langsmith"),
    ],
)
def test_auto_tells_every_source_apart(tmp_path, make, fmt):
    assert sniff(Path(make(tmp_path)))[0] == fmt


@pytest.mark.parametrize(
    "content, fmt, message",
    [
        (b"hello world\n", "auto", "cannot tell which source this is (a text file starting 'hello world')"),
        (json.dumps({"resourceSpans": []}).encode(), "langfuse", "not a langfuse source: it is JSON: is it otlp?"),
        (b"task_id,config\n", "otlp", "not a otlp source: it is a long table: is it long?"),
        (json.dumps({"something": 1}).encode(), "otlp", "not OTLP/JSON: no resourceSpans or resourceLogs"),
        (b"", "auto", "cannot tell which source this is"),
    ],
)
def test_a_file_of_the_wrong_format_is_one_line(home, tmp_path, content, fmt, message):
    path = tmp_path / "in.json"
    path.write_bytes(content)
    with pytest.raises(InvalidEvent) as caught:
        import_source(home, [path], ImportOptions(fmt=fmt))  # type: ignore[arg-type]
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert not (home / "streams").exists()
