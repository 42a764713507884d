"""``ratings verify``: passes on an honest store, names every mismatch and exits 1."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.compact import compact
from pipeline.manifest import load_manifest
from pipeline.streams import append
from pipeline.verify import verify
from tests.fixtures_store import opened, rating


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
    assert result.ok and result.problems == [] and result.manifests == 2
    out = CliRunner().invoke(cli, ["verify", "--home", str(store_home)])
    assert out.exit_code == 0 and out.output.startswith("ok: 2 manifest(s)")


def test_an_empty_home_verifies(home):
    assert verify(home).ok


def _problems(home):
    out = CliRunner().invoke(cli, ["verify", "--home", str(home), "--json"])
    assert out.exit_code == 1
    return json.loads(out.output)["problems"]


def test_a_changed_stream_byte_is_named(store_home):
    stream = store_home / "streams" / "ratings.jsonl"
    data = bytearray(stream.read_bytes())
    data[10] ^= 1
    stream.write_bytes(bytes(data))
    assert any("manifest 1 stream ratings: sha256 of bytes 0.." in p for p in _problems(store_home))


def test_a_truncated_stream_is_named(store_home):
    stream = store_home / "streams" / "ratings.jsonl"
    stream.write_bytes(stream.read_bytes()[:-5])
    assert any("the manifest consumed up to" in p for p in _problems(store_home))


def test_a_missing_or_changed_parquet_file_is_named(store_home):
    files = load_manifest(store_home).files
    (store_home / "store" / files[0].path).unlink()
    target = store_home / "store" / files[1].path
    target.write_bytes(target.read_bytes()[:-1] + b"X")
    problems = _problems(store_home)
    assert any(f"file {files[0].path} is missing" in p for p in problems)
    assert any(f"file {files[1].path} does not have the sha256" in p for p in problems)


def test_lost_dead_letters_are_named(store_home):
    (store_home / "deadletter" / "ratings.jsonl").write_bytes(b"")
    assert any("deadletter/ratings.jsonl is shorter" in p for p in _problems(store_home))


def test_a_missing_manifest_number_is_named(store_home):
    (store_home / "store" / "_manifests" / f"{1:020d}.json").unlink()
    problems = _problems(store_home)
    assert any("manifest numbers are not 1..1" in p for p in problems)
