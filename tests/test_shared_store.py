"""Many hosts, one shared store on object storage: a deployment tested against moto's S3 server on 127.0.0.1.

Each home appends to its own streams and compacts into one bucket as its own writer; kills and reruns land every
acknowledged event once; readers (sql, verify, the fit) work on the bucket as on a local path; a wrong endpoint,
missing credentials, a missing bucket or an unknown scheme is one line, exit 2, and nothing is written.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.streams.log import append
from tests.fixtures_store import opened, rating


def _ratings(args: list[str]) -> tuple[int, str]:
    out = CliRunner().invoke(cli, args)
    assert "Traceback" not in out.output, out.output
    return out.exit_code, out.output


def _objects(bucket: str, endpoint: str | None = None) -> list[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint or os.environ["AWS_ENDPOINT_URL"])
    listing = client.list_objects_v2(Bucket=bucket[5:])
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_every_store_command_works_on_the_bucket(home, bucket, monkeypatch):
    store = f"{bucket}/team"
    append(home, [opened(1), rating(1), rating(2, day=2)])
    code, out = _ratings(["compact", "--home", str(home), "--store", store, "--writer", "ci-1", "-q"])
    assert code == 0 and "version 1 (writer ci-1)" in out, out
    assert any(k.startswith("team/events/_delta_log/") for k in _objects(bucket))
    assert not (home / "store" / "events").exists()  # the home keeps only its writer identity and lock
    monkeypatch.setenv("RATINGS_STORE", store)  # the same store through the environment
    append(home, [rating(3, day=3)])
    assert _ratings(["compact", "--home", str(home), "-q"])[0] == 0
    code, out = _ratings(["sql", "--home", str(home), "--json", "SELECT id FROM ratings ORDER BY id"])
    assert code == 0 and [r["id"] for r in json.loads(out)] == ["R-1", "R-2", "R-3"]
    code, out = _ratings(["sql", "--home", str(home), "--as-of", "1", "--json", "SELECT count(*) AS n FROM ratings"])
    assert code == 0 and json.loads(out) == [{"n": 2}]
    code, out = _ratings(["sql", "--home", str(home), "SELECT * FROM read_csv('/etc/passwd')"])
    assert code == 2 and "Permission Error" in out  # read-only there too
    code, out = _ratings(["verify", "--home", str(home), "--json"])
    assert code == 0 and json.loads(out)["ok"] and json.loads(out)["writer"] == "ci-1", out
    code, out = _ratings(["vacuum", "--home", str(home), "--retain-hours", "0", "--json"])
    assert code == 0 and json.loads(out)["bytes_after"] > 0


_COMPACT = [sys.executable, "-m", "pipeline.cli", "compact", "-q", "--json"]


def _compactor(home: Path, store: str, writer: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*_COMPACT, "--home", str(home), "--store", store, "--writer", writer],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_four_homes_compacting_at_once_with_kills_and_reruns_land_every_event_once(tmp_path, bucket):
    store = f"{bucket}/shared"
    homes = [tmp_path / f"host-{k}" for k in range(4)]
    acknowledged: set[str] = set()
    shared = [rating(900 + i, task=f"S-{i}") for i in range(3)]  # a retried dispatcher sends these via two hosts
    rng = random.Random(7)
    kills = 0
    for round_ in range(3):
        for k, home in enumerate(homes):
            base = 1000 * (k + 1) + 100 * round_
            events = [opened(base + i) for i in range(10)] + [rating(base + i, day=1 + i % 3) for i in range(10)]
            if round_ == 1 and k < 2:
                events += shared
            append(home, events)
            acknowledged |= {e["id"] for e in events}
        children = [_compactor(home, store, f"host-{k}") for k, home in enumerate(homes)]
        for child in rng.sample(children, 2):  # two of the four die somewhere in their run
            try:
                child.communicate(timeout=rng.uniform(0.6, 1.6))
            except subprocess.TimeoutExpired:
                child.send_signal(signal.SIGKILL)
                kills += 1
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode in (0, -signal.SIGKILL), err
    for k, home in enumerate(homes):  # reruns: each lands what its killed runs did not, nothing twice
        child = _compactor(home, store, f"host-{k}")
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
    code, out = _ratings(["sql", "--home", str(homes[0]), "--store", store, "--json",
                          "SELECT id FROM tasks UNION ALL SELECT id FROM ratings"])  # fmt: skip
    ids = [r["id"] for r in json.loads(out)]
    assert code == 0 and len(ids) == len(set(ids)) and set(ids) == acknowledged
    for home in homes:
        code, out = _ratings(["verify", "--home", str(home), "--store", store, "--json"])
        result = json.loads(out)
        assert code == 0 and result["ok"], result["problems"]
        assert set(result["duplicate_ids"]) <= {e["id"] for e in shared}  # only what two hosts sent
    assert kills >= 1


@pytest.mark.slow
def test_a_fit_on_the_bucket_equals_a_fit_on_a_local_copy(tmp_path, bucket):
    from pipeline.simulate import preset, simulate

    on_bucket, local = tmp_path / "bucket-home", tmp_path / "local-home"
    simulate(on_bucket, preset("backlog", tasks=120), seed=3)
    shutil.copytree(on_bucket, local)
    fit = ["fit", "--no-render", "--quiet", "--case-study", "shared"]
    code, out = _ratings([*fit, "--home", str(on_bucket), "--store", f"{bucket}/store", "--writer", "fit-host"])
    assert code == 0, out
    code, out = _ratings([*fit, "--home", str(local)])
    assert code == 0, out

    def published(home: Path) -> tuple[dict, dict]:
        table = json.loads((home / "fits" / "routing-table.json").read_text())
        stats = json.loads((home / "case-studies" / "shared" / "stats.json").read_text())
        return table, stats

    (table_b, stats_b), (table_l, stats_l) = published(on_bucket), published(local)
    for table in (table_b, table_l):
        table.pop("version"), table.pop("source")
    for stats in (stats_b, stats_l):
        stats.pop("source")
    assert table_b == table_l and stats_b == stats_l


@pytest.mark.parametrize("case", ["wrong endpoint", "missing credentials", "missing bucket", "unknown scheme"])
def test_a_store_that_cannot_be_reached_is_one_line_and_nothing_is_written(
    home, bucket, s3_server, monkeypatch, request, case
):
    append(home, [rating(1)])
    store = f"{bucket}/store"
    expected = {
        "wrong endpoint": "the endpoint cannot be reached",
        "missing credentials": "no credentials",
        "missing bucket": "the bucket does not exist",
        "unknown scheme": "unknown scheme 'hdfs'",
    }[case]
    if case == "wrong endpoint":  # a port held bound but not listening: refused, and no other server can take it
        held = socket.socket()
        held.bind(("127.0.0.1", 0))
        request.addfinalizer(held.close)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{held.getsockname()[1]}")
    elif case == "missing credentials":
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    elif case == "missing bucket":
        store = "s3://no-such-bucket-here/store"
    else:
        store = "hdfs://namenode/store"
    before = sorted(p.relative_to(home).as_posix() for p in home.rglob("*"))
    quick = ["--storage-option", "max_retries=1"]  # delta-rs retries 10 times by default (a few seconds)
    for command in (["compact"], ["sql", "SELECT 1"], ["verify"]):
        code, out = _ratings([command[0], "--home", str(home), "--store", store, *quick, *command[1:]])
        want = 2 if case == "unknown scheme" else 4  # bad input, or a store that cannot be reached
        assert code == want and len(out.strip().splitlines()) == 1 and expected in out, (command, out)
        assert "testing" not in out  # no credential ever appears in a message
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == before
    assert _objects(bucket, s3_server["AWS_ENDPOINT_URL"]) == []
