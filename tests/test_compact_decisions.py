"""Decision tables of compaction for issue 26: a retry recognised by its id whatever ``at`` the append filled in,
lines dated past the skew dead-lettered, and a rebuild that cannot finish leaving the store as it was."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.compact import compact
from pipeline.compact import run as run_module
from pipeline.streams.batch import prepare
from pipeline.streams.log import append, write
from pipeline.workspace import Workspace
from tests.fixtures_store import CONFIG, opened, rating, store_snapshot

RATER = {"kind": "gate", "name": "pytest"}


def _append_at(home, events, now):
    """Append as ``ratings append`` would at the moment ``now`` (which fills ``at`` with it)."""
    write(Workspace.of(home), prepare(events, now=now), "never")


def _rated(score=1.0, **head):
    return {"type": "task.rated", "task": "T1", "config": CONFIG, "rater": RATER, "score": score, **head}


# first event, second event (each appended at its own moment) -> what compaction makes of the second
T5, T6 = "2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z"
RETRIES = [
    ("no at, twice: the documented retry", _rated(id="R1"), _rated(id="R1"), "duplicate"),
    ("the first without at, the retry with one", _rated(id="R1"), _rated(id="R1", at=T5), "duplicate"),
    ("the first with at, the retry without", _rated(id="R1", at=T5), _rated(id="R1"), "duplicate"),
    ("both with their own, other at", _rated(id="R1", at=T5), _rated(id="R1", at=T6), "conflict"),
    ("no at, another score", _rated(id="R1"), _rated(0.0, id="R1"), "conflict"),
    ("the same at, the same bytes", _rated(id="R1", at=T5), _rated(id="R1", at=T5), "duplicate"),
]


@pytest.mark.parametrize("between", ["one run", "two runs"])
@pytest.mark.parametrize("case,first,second,outcome", RETRIES, ids=[r[0] for r in RETRIES])
def test_a_retry_is_recognised_by_id_outside_the_fields_append_filled(home, case, first, second, outcome, between):
    _append_at(home, [first], "2026-01-10T00:00:00Z")
    if between == "two runs":  # the second meets the stored row (read back from this home's stream)
        compact(home)
    _append_at(home, [second], "2026-01-10T00:00:01Z")  # a second later: another filled at
    result = compact(home)
    outcomes = result.streams["ratings"]
    assert (outcomes.duplicate, outcomes.conflict) == ((1, 0) if outcome == "duplicate" else (0, 1)), case
    letters = (home / "deadletter" / "ratings.jsonl").read_bytes().splitlines()
    assert len(letters) == (outcome == "conflict")
    with open_store_rows(home) as rows:
        assert len(rows) == 1 and rows[0]["id"] == "R1"  # the first one is kept


class open_store_rows:
    def __init__(self, home):
        from pipeline.store import open_store

        self.store = open_store(home)

    def __enter__(self):
        names, rows = self.store.query("SELECT * FROM ratings")
        return [dict(zip(names, r, strict=True)) for r in rows]

    def __exit__(self, *exc):
        self.store.close()


def test_the_cli_retry_of_the_issue_is_one_event(home):
    """Two ``ratings append '{"id":"R1","type":"task.opened","task":"T1"}'`` a second apart: one event, no dead
    letter (issue 26, item 6; before, compaction dead-lettered the second as a conflict)."""
    line = '{"id":"R1","type":"task.opened","task":"T1"}'
    for now in ("2026-01-10T00:00:00Z", "2026-01-10T00:00:01Z"):
        _append_at(home, [line], now)
    written = (home / "streams" / "tasks.jsonl").read_text().splitlines()
    assert [json.loads(x)["filled"] for x in written] == [["at"], ["at"]]  # append recorded what it filled
    result = compact(home)
    assert result.streams["tasks"].stored == 1 and result.streams["tasks"].duplicate == 1
    assert not (home / "deadletter" / "tasks.jsonl").read_bytes()


# --------------------------------------------------------------------------- the skew at compaction
# the line's time, compact's option -> stored or dead-lettered (another writer wrote it without append's check)
SKEW = [
    ("2026-01-01T00:00:00Z", [], "stored"),
    ("9999-12-31T23:59:59Z", [], "dead-lettered"),
    ("9999-12-31T23:59:59Z", ["--allow-future"], "stored"),
    ("9999-12-31T23:59:59Z", ["--skew", "3650d"], "dead-lettered"),
]


@pytest.mark.parametrize("at,options,outcome", SKEW)
def test_compaction_dead_letters_a_line_past_the_skew(home, at, options, outcome):
    (home / "streams").mkdir()
    (home / "streams" / "tasks.jsonl").write_text(
        json.dumps({"id": "far", "type": "task.opened", "task": "T", "at": at}) + "\n"
    )
    out = CliRunner().invoke(cli, ["compact", "--home", str(home), "--json", *options])
    assert out.exit_code == 0, out.output
    tasks = json.loads(out.output)["streams"]["tasks"]
    assert (tasks["stored"], tasks["invalid"]) == ((1, 0) if outcome == "stored" else (0, 1))
    if outcome == "dead-lettered":
        record = json.loads((home / "deadletter" / "tasks.jsonl").read_text())
        assert record["reason"].startswith(f"at: {at} is more than ")
        assert "after this compaction" in record["reason"] and "--allow-future" in record["reason"]


# --------------------------------------------------------------------------- a rebuild that cannot finish
def _stored(home):
    append(home, [opened(1), rating(1), rating(2, day=2)])
    with open(home / "streams" / "ratings.jsonl", "ab") as handle:
        handle.write(b"not json\n")  # a dead letter to keep
    compact(home)
    return store_snapshot(home)


@pytest.mark.parametrize("step", ["after-files", "before-commit", "after-commit"])
def test_a_rebuild_that_fails_leaves_the_store_as_it_was(home, monkeypatch, step):
    before = _stored(home)
    store = sorted(p.name for p in (home / "store").iterdir())
    letters = sorted(p.name for p in (home / "deadletter").iterdir())

    def fail(at):
        if at == step:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_module, "fault_hook", fail)
    out = CliRunner().invoke(cli, ["compact", "--home", str(home), "--rebuild", "-q"])
    assert out.exit_code == 4 and out.output.startswith("error: cannot compact") and "disk is full" in out.output
    monkeypatch.undo()
    assert store_snapshot(home) == before  # the old table and dead letters, untouched
    assert sorted(p.name for p in (home / "store").iterdir()) == store  # no temporary table left
    assert sorted(p.name for p in (home / "deadletter").iterdir()) == letters


def test_a_rebuild_killed_part_way_is_cleared_by_the_next(home):
    before = _stored(home)
    (home / "store" / ".rebuild-20260101T000000Z" / "events").mkdir(parents=True)  # what a SIGKILL left
    (home / "deadletter" / ".rebuild-20260101T000000Z").mkdir()
    out = CliRunner().invoke(cli, ["compact", "--home", str(home), "--rebuild", "-q"])
    assert out.exit_code == 0, out.output
    assert "rebuilt the table from the streams; moved the old table aside to" in out.output
    assert store_snapshot(home) == before
    names = sorted(p.name for p in (home / "store").iterdir())
    assert [n for n in names if n.startswith(".rebuild-")] == [] and any(n.startswith("events.rebuilt-") for n in names)
    aside = next((home / "store").glob("events.rebuilt-*"))
    assert (aside / "deadletter" / "ratings.jsonl").read_bytes() == (home / "deadletter" / "ratings.jsonl").read_bytes()


def test_a_rebuild_refuses_a_linked_dead_letter_folder_before_moving_anything(home, tmp_path):
    """Issue 26, item 3: with deadletter/ linked outside, the rebuild moved the table aside, moved the outside files
    into the home, made an empty version 0 and exited 2, leaving an empty store."""
    before = _stored(home)
    outside = tmp_path / "outside"
    shutil.move(home / "deadletter", outside)
    (outside / "mine.txt").write_text("a file of the user's")
    (home / "deadletter").symlink_to(outside)
    files = sorted(p.name for p in outside.iterdir())
    out = CliRunner().invoke(cli, ["compact", "--home", str(home), "--rebuild", "-q"])
    assert out.exit_code == 2 and out.output.startswith(f"error: refusing {home / 'deadletter'}")
    assert sorted(p.name for p in outside.iterdir()) == files
    (home / "deadletter").unlink()
    shutil.move(outside, home / "deadletter")
    assert store_snapshot(home) == before
