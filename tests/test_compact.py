"""Compaction: incremental, idempotent, deduplicating, crash- and fault-safe (DESIGN 4)."""
from __future__ import annotations

import base64
import json

from pipeline.compact import compact
from pipeline.manifest import load_manifest, manifest_numbers
from pipeline.store import open_store
from pipeline.streams import append
from tests.fixtures_store import CONFIG, opened, rating


def _files(home):
    return {p.relative_to(home).as_posix(): p.read_bytes() for p in sorted((home / "store").rglob("*")) if p.is_file()}


def test_compact_twice_without_new_input_changes_nothing(home):
    append(home, [opened(1), rating(1), rating(2, day=2)])
    first = compact(home)
    assert first.created and first.manifest == 1
    before = _files(home)
    second = compact(home)
    assert not second.created and second.manifest == 1 and second.files_written == 0
    assert _files(home) == before


def test_incremental_equals_one_compaction(tmp_path, snapshot):
    batches = [[opened(i), rating(i, day=1 + i % 3)] for i in range(6)]
    one, inc = tmp_path / "one", tmp_path / "inc"
    for batch in batches:
        append(one, batch)
        append(inc, batch)
        compact(inc)
    compact(one)
    assert manifest_numbers(inc) == list(range(1, 7)) and manifest_numbers(one) == [1]
    assert snapshot(inc) == snapshot(one)


def test_rows_are_partitioned_by_event_date(home):
    append(home, [rating(1, day=1), rating(2, day=2), rating(3, day=2)])
    compact(home)
    manifest = load_manifest(home)
    parts = sorted((e.partition, e.rows) for e in manifest.files if e.family == "ratings")
    assert parts == [("2026-01-01", 1), ("2026-01-02", 2)]
    assert all(e.path.startswith(f"ratings/date={e.partition}/") for e in manifest.files if e.family == "ratings")


def test_duplicates_are_dropped_once_and_conflicts_dead_lettered(home):
    append(home, [rating(1), rating(1), rating(2)])  # duplicate within a batch
    result = compact(home)
    assert result.streams["ratings"].duplicate == 1 and result.streams["ratings"].stored == 2
    append(home, [rating(1), rating(2, score=0.0)])  # duplicate across runs, and a conflict
    result = compact(home)
    assert result.streams["ratings"].model_dump() == {"lines": 2, "stored": 0, "duplicate": 1, "conflict": 1,
                                                      "invalid": 0}
    with open_store(home) as store:
        assert store.con.execute("SELECT id, score FROM ratings ORDER BY id").fetchall() == [("R-1", 1.0),
                                                                                             ("R-2", 1.0)]
    letters = [json.loads(x) for x in (home / "deadletter" / "ratings.jsonl").read_text().splitlines()]
    assert [(d["line_no"], d["reason"].split(":")[0:2]) for d in letters] == [(5, ["id", " conflict"])]


def test_invalid_lines_go_to_the_dead_letters_with_position_and_raw_bytes(home):
    append(home, [rating(1)])
    stream = home / "streams" / "ratings.jsonl"
    good = stream.read_bytes()
    bad = [b'{"type":"task.rated","task":"T"}', b"not json", b'{"type":"task.rated","score":NaN}', b"\xff\xfe"]
    stream.write_bytes(good + b"".join(b + b"\n" for b in bad))
    result = compact(home)
    assert result.streams["ratings"].invalid == 4 and result.streams["ratings"].stored == 1
    letters = [json.loads(x) for x in (home / "deadletter" / "ratings.jsonl").read_text().splitlines()]
    assert [d["line_no"] for d in letters] == [2, 3, 4, 5]
    assert [base64.b64decode(d["raw_b64"]) for d in letters] == bad
    assert letters[0]["byte_offset"] == len(good) and letters[0]["stream"] == "ratings"
    assert letters[0]["reason"].startswith("config: required field is missing")
    assert "UTF-8" in letters[3]["reason"]


def test_unknown_fields_and_types_are_kept(home):
    append(home, [rating(1, note={"why": "x"}), {"id": "X-1", "type": "custom.event", "at": "2026-01-01T00:00:00Z",
                                                  "payload": [1, 2]}])
    compact(home)
    with open_store(home) as store:
        assert store.con.execute("SELECT extra FROM ratings").fetchone() == ('{"note":{"why":"x"}}',)
        assert store.con.execute("SELECT type, extra FROM other").fetchone() == ("custom.event", '{"payload":[1,2]}')


def test_a_torn_tail_is_not_consumed(home):
    append(home, [rating(1)])
    stream = home / "streams" / "ratings.jsonl"
    with open(stream, "ab") as handle:
        handle.write(b'{"id":"R-9","type":"task.rat')
    result = compact(home)
    assert result.streams["ratings"].lines == 1
    assert load_manifest(home).streams["ratings"].end == stream.stat().st_size - len(b'{"id":"R-9","type":"task.rat')


def test_small_files_are_merged(home, snapshot):
    for i in range(5):
        append(home, [rating(i)])
        compact(home, merge_threshold=3)
    manifest = load_manifest(home)
    assert len([e for e in manifest.files if e.family == "ratings"]) <= 3
    with open_store(home) as store:
        assert store.con.execute("SELECT count(*) FROM ratings").fetchone() == (5,)


def test_config_columns_are_flattened_with_the_key(home):
    config = {"cli": "a/b", "route": None, "model": "480B/A35B", "effort": "-"}
    append(home, [{**rating(1), "config": config}])
    compact(home)
    with open_store(home) as store:
        row = store.con.execute("SELECT cli, route, model, effort, config_key FROM ratings").fetchone()
    assert row == ("a/b", None, "480B/A35B", "-", "a%2Fb/-/480B%2FA35B/%2D")
