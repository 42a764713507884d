"""Publishing order and the agreement of table, stats and history, after a crash at any publishing step.

The order is history, stats, schema, table (the commit point). Every state a crash can leave is either the
previous set, the new set, or stats and history one fit ahead of the table, which ``ratings doctor`` names
(the table is stale) and ``ratings pin --latest`` or the next fit completes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures_nightly import PINNED, make_home, tiny_events

from pipeline.cli import cli
from pipeline.nightly.job import run_fit
from pipeline.nightly.publish import consistency
from pipeline.routing.table import load
from pipeline.streams.log import append
from pipeline.workspace import Workspace

CHILD = Path(__file__).with_name("publish_child.py")
#: history, stats.json, routing-table.schema.json, routing-table.json
PUBLISHING_WRITES = 4


def _state(home: Path) -> tuple[str, str | None, bool]:
    """(live table version, the version the stats describe, whether the table's history copy exists)."""
    table = load(home / "fits" / "routing-table.json")
    stats = json.loads((home / "case-studies" / "routing-by-rating" / "stats.json").read_text())
    return table.version, stats.get("table_version"), (home / "fits" / "history" / f"{table.version}.json").exists()


def _check(home: Path):
    table = load(home / "fits" / "routing-table.json")
    pin = home / "fits" / "pin.json"
    pinned = json.loads(pin.read_text())["version"] if pin.exists() else None
    return consistency(Workspace.of(home), table, pinned=pinned)


def _new_evidence() -> list[dict]:
    """Two more tasks (days 11 and 12), so the next fit publishes a new version."""
    return [
        e
        for e in tiny_events({11: {"x": 0.0, "y": 1.0}, 12: {"x": 0.0, "y": 1.0}}, late=False)
        if e["task"] in ("T11", "T12")
    ]


@pytest.fixture()
def fitted(tmp_path) -> tuple[Path, str]:
    home = make_home(tmp_path / "home", tiny_events())
    return home, run_fit(home, PINNED).table.version


def test_a_complete_fit_agrees_and_doctor_says_so(fitted):
    home, version = fitted
    assert _state(home) == (version, version, True)
    check = _check(home)
    assert check.ok and check.stale is None
    assert check.detail == f"table, case-studies/routing-by-rating/stats.json and fits/history/ describe fit {version}"


def test_stats_ahead_of_the_table_name_the_table_stale_and_pin_latest_completes(fitted):
    home, old = fitted
    table_bytes = (home / "fits" / "routing-table.json").read_bytes()
    append(home, _new_evidence())
    new = run_fit(home, PINNED).table.version
    (home / "fits" / "routing-table.json").write_bytes(table_bytes)  # the state of a kill before the table's rename
    check = _check(home)
    assert (check.ok, check.stale) == (False, "table")
    assert check.detail == (
        f"the table is stale: case-studies/routing-by-rating/stats.json and fits/history/ describe fit {new}, but "
        f"fits/routing-table.json is {old} (a fit stopped while publishing); `ratings pin --latest` publishes it, "
        "or run `fit-routing`"
    )
    doctor = CliRunner().invoke(cli, ["doctor", "--home", str(home)])
    assert doctor.exit_code == 1 and "[LIVE] fail   table, stats and history agree: the table is stale" in doctor.output
    assert CliRunner().invoke(cli, ["pin", "--latest", "--home", str(home)]).exit_code == 0
    assert _check(home).ok and _state(home) == (new, new, True)


@pytest.mark.parametrize(
    "damage,stale,detail",
    [
        ("no-history", "history", "fits/history/ has no copy of the live table {v}; run `fit-routing` again"),
        ("no-stats", "stats", "case-studies/routing-by-rating/stats.json is missing; run `fit-routing`"),
        (
            "old-stats",
            "stats",
            "case-studies/routing-by-rating/stats.json names no table version (written by an older fit); "
            "run `fit-routing`",
        ),
        (
            "unknown-stats",
            "stats",
            "case-studies/routing-by-rating/stats.json describes fit 0123456789abcdef, which is not in "
            "fits/history/; the table is {v}; run `fit-routing`",
        ),
    ],
)
def test_which_output_is_stale(fitted, damage, stale, detail):
    home, version = fitted
    stats_path = home / "case-studies" / "routing-by-rating" / "stats.json"
    if damage == "no-history":
        (home / "fits" / "history" / f"{version}.json").unlink()
    elif damage == "no-stats":
        stats_path.unlink()
    else:
        data = json.loads(stats_path.read_text())
        data["table_version"] = None if damage == "old-stats" else "0123456789abcdef"
        stats_path.write_text(json.dumps(data))
    check = _check(home)
    assert (check.ok, check.stale, check.detail) == (False, stale, detail.format(v=version))


def test_a_pinned_table_with_newer_stats_agrees(fitted):
    home, old = fitted
    assert CliRunner().invoke(cli, ["pin", old, "--home", str(home)]).exit_code == 0
    append(home, _new_evidence())
    new = run_fit(home, PINNED).table.version
    assert _state(home) == (old, new, True)
    check = _check(home)
    assert check.ok and "pinned to" in check.detail and new in check.detail


def test_killing_the_fit_at_every_publishing_write_leaves_a_set_that_agrees_or_a_named_stale_table(tmp_path):
    """SIGKILL a child fit at each of the 4 publishing writes, before and after its rename (8 kills).

    The home each child fits (the tiny store fitted once, then the new evidence appended) is built once and
    copied for each kill: the fit is deterministic, so each copy holds the table, stats and history a fit of its
    own would leave, and the point is each publishing write, not the fit before it."""
    outcomes: dict[str, int] = {"previous": 0, "new": 0, "stale table": 0}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), *sys.path])}
    before = make_home(tmp_path / "before", tiny_events())
    old = run_fit(before, PINNED).table.version
    append(before, _new_evidence())
    for n in range(1, PUBLISHING_WRITES + 1):
        for when in ("before-rename", "after-rename"):
            home = tmp_path / f"{n}-{when}"
            shutil.copytree(before, home)
            child = subprocess.run(
                [sys.executable, str(CHILD), str(home), str(n), when],
                check=False,
                env=env,
                capture_output=True,
                timeout=120,
            )
            assert child.returncode == -9, child.stderr.decode()[-2000:]  # killed, not finished
            table, described, in_history = _state(home)
            check = _check(home)
            if check.ok:
                assert in_history and table == described
                outcomes["previous" if table == old else "new"] += 1
            else:
                assert check.stale == "table" and table == old and described != old
                outcomes["stale table"] += 1
                assert CliRunner().invoke(cli, ["pin", "--latest", "--home", str(home)]).exit_code == 0
                assert _check(home).ok and _state(home) == (described, described, True)
            # Whatever the kill left, the next fit publishes a complete set (no temp file is in the way).
            rerun = run_fit(home, PINNED).table.version
            assert _check(home).ok and _state(home) == (rerun, rerun, True)
    print(f"publishing kills: {sum(outcomes.values())}; what survived: {outcomes}")
    # history (2 kills) and stats before its rename: the previous set; the table's rename done: the new set
    assert outcomes == {"previous": 3, "new": 1, "stale table": 4}
