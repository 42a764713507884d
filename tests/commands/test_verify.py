"""``ratings verify``: passes on an honest store, names every problem and how to recover, exits 1."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.commands.verify import verify
from pipeline.compact import compact
from pipeline.streams.log import append
from tests.fixtures_store import live_files, opened, rating


@pytest.fixture
def store_home(home):
    append(home, [opened(1), rating(1), rating(1), rating(2, day=2)])
    with open(home / "streams" / "ratings.jsonl", "ab") as handle:
        handle.write(b"not json\n")
    compact(home)
    append(home, [rating(3, day=3)])
    compact(home)
    return home


def test_an_honest_store_verifies(store_home):
    result = verify(store_home)
    assert result.ok and result.problems == [] and result.commits == 2 and result.version == 2
    out = CliRunner().invoke(cli, ["verify", "--home", str(store_home)])
    assert out.exit_code == 0 and out.output.startswith("ok: version 2, 2 compaction commit(s)")


def test_an_empty_home_verifies(home):
    assert verify(home).ok


def _problems(home):
    out = CliRunner().invoke(cli, ["verify", "--home", str(home), "--json"])
    assert out.exit_code == 1
    problems = json.loads(out.output)["problems"]
    assert "`ratings compact --rebuild`" in problems[-1] and "from the streams" in problems[-1]
    return problems


def test_a_changed_stream_byte_is_named(store_home):
    stream = store_home / "streams" / "ratings.jsonl"
    data = bytearray(stream.read_bytes())
    data[10] ^= 1
    stream.write_bytes(bytes(data))
    assert any(p.startswith("version 1 (") and "ratings): sha256 of bytes 0.." in p for p in _problems(store_home))


def test_a_truncated_stream_is_named(store_home):
    stream = store_home / "streams" / "ratings.jsonl"
    stream.write_bytes(stream.read_bytes()[:-5])
    assert any("the store consumed up to" in p for p in _problems(store_home))


def test_a_missing_or_changed_data_file_is_named(store_home):
    files = live_files(store_home)
    files[0].unlink()
    files[1].write_bytes(files[1].read_bytes()[:-1])
    problems = _problems(store_home)
    root = store_home / "store" / "events"
    assert any(f"file {files[0].relative_to(root).as_posix()} is missing" in p for p in problems)
    assert any(f"file {files[1].relative_to(root).as_posix()} has" in p and "the log says" in p for p in problems)


def test_lost_dead_letters_are_named(store_home):
    (store_home / "deadletter" / "ratings.jsonl").write_bytes(b"")
    assert any("deadletter/ratings.jsonl is shorter" in p for p in _problems(store_home))


def test_a_damaged_log_is_one_problem_with_the_remedy(store_home):
    log = store_home / "store" / "events" / "_delta_log" / f"{2:020d}.json"
    log.write_text("garbage{")
    problems = _problems(store_home)
    assert len(problems) == 1 and "is damaged" in problems[0] and "ratings compact --rebuild" in problems[0]


def test_after_a_power_loss_the_store_is_rebuilt_from_the_streams(store_home, snapshot):
    before = snapshot(store_home)
    for path in live_files(store_home):
        path.unlink()  # the store's files did not survive; the streams did
    assert not verify(store_home).ok
    out = CliRunner().invoke(cli, ["compact", "--home", str(store_home), "--rebuild", "-q"])
    assert out.exit_code == 0, out.output
    assert "rebuilt the table from the streams; moved the old table aside to" in out.output
    assert verify(store_home).ok and snapshot(store_home) == before
