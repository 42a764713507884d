"""Crashes and faults that reach delta-rs's own I/O: compactions in spawned child processes.

delta-rs writes the commit log in Rust, where patching ``os.write`` never reaches; so each fault is made at the
process level, as a decision table (one row per situation, its expected outcome):

- SIGKILL at each durable step of a run, and after a series of delays that land anywhere in it;
- a full disk: a file-size limit (``RLIMIT_FSIZE``, SIGXFSZ ignored so a write fails with EFBIG) at sizes that
  stop the dead letters, the data files or the commit;
- a read-only store (a read-only bind mount; needs root, as CI has).

After each: ``verify`` passes (nothing of the run is visible) or names the damage, readers still read, and a
rerun converges to the store a clean run makes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.commands.verify import verify
from pipeline.compact import compact
from pipeline.streams.log import append
from tests.fixtures_store import READ_ONLY_SKIP, mount_read_only, opened, rating

_CHILD = """
import os, resource, signal, sys
import pipeline.compact.run as run
step, fsize = sys.argv[1], int(sys.argv[2])
if step != "-":
    def hook(at):
        if at == step:
            os.kill(os.getpid(), signal.SIGKILL)
    run.fault_hook = hook
if fsize:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
if os.environ.get("CHUNK_BYTES"):  # read the streams a few lines at a time
    import functools, pipeline.compact as package
    package.compact = functools.partial(package.compact, chunk_bytes=int(os.environ["CHUNK_BYTES"]))
from pipeline.cli import main
sys.argv = ["ratings", "compact", "--home", sys.argv[3], "-q", "--merge-threshold", "2", *sys.argv[4:]]
main()
"""


def _child(
    home: Path, *, step: str = "-", fsize: int = 0, chunk_bytes: int = 0, extra: tuple[str, ...] = ()
) -> subprocess.Popen:
    """A compaction of ``home`` in a child process, with the options ``extra``; ``chunk_bytes``: read (and with
    ``--buffer-rows 1``, write) a file for every few lines."""
    options = ("--buffer-rows", "1") if chunk_bytes else ()
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_CHILD), step, str(fsize), str(home), *options, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CHUNK_BYTES": str(chunk_bytes or "")},
    )


def _backlog(home: Path, first: int, count: int) -> None:
    events = []
    for i in range(first, first + count):
        events += [opened(i, day=1 + i % 5), rating(i, day=1 + i % 5), rating(i, day=1 + i % 5)]  # a duplicate too
    append(home, events)
    with open(home / "streams" / "ratings.jsonl", "ab") as handle:
        handle.write(b'{"type":"task.rated","task":"T"}\n')


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A home with one compaction done and 6,000 events waiting; and the store a clean run makes of it."""
    root = tmp_path_factory.mktemp("crash")
    home = root / "base"
    _backlog(home, 0, 200)
    compact(home, merge_threshold=2)
    _backlog(home, 200, 2000)
    reference = root / "reference"
    shutil.copytree(home, reference)
    compact(reference, merge_threshold=2)
    from tests.fixtures_store import store_snapshot

    return home, store_snapshot(reference)


def _converges(home: Path, expected: dict) -> None:
    from tests.fixtures_store import store_snapshot

    result = verify(home)
    assert result.ok, result.problems
    compact(home, merge_threshold=2)
    assert verify(home).ok
    assert store_snapshot(home) == expected


@pytest.mark.slow
@pytest.mark.parametrize("step", ["after-files", "before-commit", "after-commit", "after-optimize"])
def test_sigkill_at_each_step(base, tmp_path, step):
    _killed_at_step(base, tmp_path / step, step)


def _killed_at_step(fixture: tuple[Path, dict], home: Path, step: str) -> None:
    """A copy of the fixture's home whose run is killed at ``step``: the rerun converges on the fixture's store."""
    home_base, expected = fixture
    shutil.copytree(home_base, home)
    child = _child(home, step=step)
    child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL
    _converges(home, expected)


def _killed_after_delays(
    fixture: tuple[Path, dict], root: Path, delays: list[float], check: Callable[[Path], None] = lambda home: None
) -> list[int]:
    """A copy of the fixture's home per delay, its run killed after that many seconds (unless it finished first);
    ``check`` looks at what the kill left, then the rerun converges. The runs' return codes."""
    home_base, expected = fixture
    outcomes = []
    for k, delay in enumerate(delays):
        home = root / f"kill-{k}"
        shutil.copytree(home_base, home)
        child = _child(home)
        try:
            child.communicate(timeout=delay)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGKILL)
            child.communicate()
        outcomes.append(child.returncode)
        check(home)
        _converges(home, expected)
    return outcomes


@pytest.mark.slow
def test_sigkill_after_delays_that_land_anywhere_in_a_run(base, tmp_path):
    """Kills at 0.05 s steps through a run (imports included): whatever was cut, the rerun converges."""
    outcomes = _killed_after_delays(base, tmp_path, [0.3, 0.5, 0.7, 0.9, 1.1, 1.3, 1.6, 2.0])
    assert -signal.SIGKILL in outcomes  # at least one kill landed inside a run


@pytest.fixture(scope="module")
def daily(tmp_path_factory):
    """A store of the layout partitioned by event date too, with new events waiting (tests/test_compact_layout.py);
    and the store a clean run makes of it (migrated, then compacted)."""
    from tests.test_compact_layout import DAILY_HOME

    root = tmp_path_factory.mktemp("daily")
    home, reference = root / "base", root / "reference"
    shutil.copytree(DAILY_HOME, home)
    shutil.copytree(DAILY_HOME, reference)
    compact(reference, merge_threshold=2)
    from tests.fixtures_store import store_snapshot

    return home, store_snapshot(reference)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["before-migration", "after-migration"])
def test_sigkill_around_the_migration_of_an_old_layout(daily, tmp_path, step):
    _killed_at_step(daily, tmp_path / step, step)


@pytest.mark.slow
def test_sigkill_anywhere_in_a_migration_leaves_either_layout_and_the_rerun_converges(daily, tmp_path):
    """Kills through a run that migrates (its files written by delta-rs, then its one commit): the store is the
    old layout or the new one, never a mix, and the rerun lands the waiting events once."""
    from pipeline.compat.daily_layout import DAILY
    from pipeline.store.table import open_table
    from pipeline.workspace import Workspace

    def one_layout(home: Path) -> None:
        columns = list(open_table(Workspace.of(home).store).metadata().partition_columns)
        assert columns in (DAILY, ["family"])

    outcomes = _killed_after_delays(daily, tmp_path, [0.6, 0.9, 1.2, 1.5, 1.8, 2.2], one_layout)
    assert -signal.SIGKILL in outcomes  # at least one kill landed inside a run


@pytest.fixture(scope="module")
def spread(tmp_path_factory):
    """A home with 300 new ratings, compacted a line at a time (a chunk of a line, ``--buffer-rows 1``: 300 small
    files, a commit of 300 files): a limit between the two sizes lets every data file through and stops the commit
    log."""
    root = tmp_path_factory.mktemp("spread")
    home = root / "base"
    append(home, [rating(0)])
    compact(home)
    append(home, [rating(1 + d) for d in range(300)])
    reference = root / "reference"
    shutil.copytree(home, reference)
    compact(reference, merge_threshold=2)
    from tests.fixtures_store import store_snapshot

    return home, store_snapshot(reference)


# fsize -> what it stops: the dead letters (a few hundred bytes), the data files (~16 KB), the commit (~300 KB)
FULL_DISK = [("base", 300, "dead letters"), ("base", 4_000, "data files"), ("spread", 100_000, "commit log")]


@pytest.mark.slow
@pytest.mark.parametrize("which, fsize, stops", FULL_DISK, ids=[row[2] for row in FULL_DISK])
def test_a_full_disk_is_one_line_and_leaves_the_store_as_it_was(request, tmp_path, which, fsize, stops):
    home_base, expected = request.getfixturevalue(which)
    home = tmp_path / f"full-{fsize}"
    shutil.copytree(home_base, home)
    before = verify(home)
    child = _child(home, fsize=fsize, chunk_bytes=200 if which == "spread" else 0)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 4, err  # a machine failure
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ")
    after = verify(home)
    assert after.ok and after.version == before.version  # nothing of the failed run is visible
    _converges(home, expected)


@pytest.mark.slow
def test_a_read_only_store_refuses_compaction_in_one_line_and_still_answers_queries(base, tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import cli

    home_base, expected = base
    home = tmp_path / "ro"
    shutil.copytree(home_base, home)
    table = home / "store" / "events"
    if not mount_read_only(table):
        pytest.skip(READ_ONLY_SKIP)
    try:
        child = _child(home)
        _, err = child.communicate(timeout=120)
        assert child.returncode == 4 and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 and "read-only file system: make it writable" in err, err
        out = CliRunner().invoke(cli, ["sql", "--home", str(home), "--json", "SELECT count(*) AS n FROM ratings"])
        assert out.exit_code == 0 and json.loads(out.output) == [{"n": 200}]
        assert verify(home).ok
    finally:
        subprocess.run(["umount", "-l", str(table)], check=False)  # -l: a reader may still hold a file
    _converges(home, expected)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["after-commit"])  # the new table whole, the swap not begun: the latest kill
def test_sigkill_in_a_rebuild_leaves_the_old_store_and_the_next_rebuild_converges(base, tmp_path, step):
    from tests.fixtures_store import store_snapshot

    home_base, expected = base
    home = tmp_path / step
    shutil.copytree(home_base, home)
    compact(home, merge_threshold=2)  # the store a clean run makes: what a rebuild must give back
    before = store_snapshot(home)
    child = _child(home, step=step, extra=("--rebuild",))
    child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL
    assert verify(home).ok and store_snapshot(home) == before  # the old table and dead letters, untouched
    assert list((home / "store").glob(".rebuild-*"))  # the killed build's own folder, left for the next
    rebuilt = _child(home, extra=("--rebuild",))
    _, err = rebuilt.communicate(timeout=120)
    assert rebuilt.returncode == 0, err
    assert not list((home / "store").glob(".rebuild-*")) and verify(home).ok
    assert store_snapshot(home) == expected == before
