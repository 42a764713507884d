"""``ratings pin``: roll back to a fit in fits/history/, record the pin, follow the newest again."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from fixtures_routing import A, B, build_table, member

from pipeline.cli import cli
from pipeline.nightly.publish import pinned_version, read_pin
from pipeline.routing.table import publish
from pipeline.workspace import Workspace


@pytest.fixture
def history(home):
    """Two fits in the history, the second one newer and published."""
    versions = []
    for i, quality in enumerate((0.5, 0.8)):
        table = publish(
            build_table({"*": [member(A, quality, 0.1), member(B, 0.6, 0.1)]}), home / "fits" / "routing-table.json"
        )
        path = home / "fits" / "history" / f"{table.version}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((home / "fits" / "routing-table.json").read_bytes())
        os.utime(path, ns=(10**18 + i, 10**18 + i))
        versions.append(table.version)
    return versions


def run(*args):
    return CliRunner().invoke(cli, list(args))


def live_version(home):
    return json.loads((home / "fits" / "routing-table.json").read_text())["version"]


def test_pin_rolls_back_and_latest_follows_the_newest_again(home, history):
    old, new = history
    result = run("pin", "--home", str(home), old)
    assert result.exit_code == 0, result.output
    assert result.output == f"pinned routing table {old} (from fits/history/{old}.json)\n"
    assert live_version(home) == old and pinned_version(Workspace.of(home)) == old
    assert (home / "fits" / "routing-table.json").read_bytes() == (
        home / "fits" / "history" / f"{old}.json"
    ).read_bytes()
    result = run("pin", "--home", str(home), "--latest", "--json")
    assert json.loads(result.output) == {"pinned": None, "table": new, "history": f"history/{new}.json"}
    assert live_version(home) == new and read_pin(Workspace.of(home)) is None


@pytest.mark.parametrize(
    "args,message",
    [
        (["nope"], "error: no fit with version 'nope'"),
        (["--latest", "x"], "give either VERSION or --latest"),
    ],
)
def test_pin_errors(home, history, args, message):
    result = run("pin", "--home", str(home), *args)
    assert result.exit_code == 2 and message in result.output


def test_pin_without_a_version_lists_the_fits_it_can_pin(home, history):
    old, new = history
    listed = json.loads(run("pin", "--home", str(home), "--json").output)
    assert [(r["version"], r["live"], r["pinned"]) for r in listed] == [(old, False, False), (new, True, False)]
    run("pin", "--home", str(home), old)
    text = run("pin", "--home", str(home)).output.splitlines()
    assert text[0].split() == ["version", "fitted_at", "store", "version", "constants"]
    assert text[2].startswith(old) and text[2].endswith("live pinned") and text[3].startswith(new)
    assert text[-1].startswith("pin one with `ratings pin VERSION`")
    table = run("table", "--home", str(home)).output.splitlines()
    assert table[1].startswith(f"pinned: `ratings pin` holds this table (from fits/history/{old}.json) since ")
    assert json.loads(run("table", "--home", str(home), "--json").output)["pinned"]["version"] == old
    run("pin", "--home", str(home), "--latest")
    assert "pinned" not in run("table", "--home", str(home)).output.splitlines()[1]


def test_a_pin_and_a_fit_remove_the_temp_files_killed_writers_left(home, history):
    dead = 2**22 + 12345  # above the kernel's default pid_max: no process has it
    stale = home / "fits" / f".routing-table.json.{dead}.0123abcd.tmp"
    mine = home / "fits" / f".routing-table.json.{os.getpid()}.0123abcd.tmp"  # a live writer's: kept
    other = home / "fits" / "notes.tmp"  # not a temp file of ours: kept
    for path in (stale, mine, other):
        path.write_text("x")
    assert run("pin", "--home", str(home), "--latest").exit_code == 0
    assert not stale.exists() and mine.exists() and other.exists()


def test_pin_finds_a_version_whatever_the_history_file_is_called(home, history):
    old = history[0]
    (home / "fits" / "history" / f"{old}.json").rename(home / "fits" / "history" / "0001-fit.json")
    assert run("pin", "--home", str(home), old).exit_code == 0
    assert read_pin(Workspace.of(home)).history == "history/0001-fit.json"
