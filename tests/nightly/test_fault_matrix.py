"""The command x fault matrix: every command of the CLI against every fault an operator (or a broken machine) can
put in a home. Whatever the cell, the command never prints a traceback, exits with a code of the table (README,
Exit codes), and writes or deletes nothing outside the home; the cells whose outcome is decided (a refusal, a
damage report) are pinned in :data:`EXPECTED`.

Each cell runs on a fresh copy of the tiny fitted home (tests/fixtures_nightly.py), beside an ``outside`` folder
(copies of whatever a fault links out of the home, and a file of the user's) whose bytes are compared after.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli

OPENED = '{"type":"task.opened","task":"T99","region":"r","at":"2026-02-01T00:00:00Z"}'

#: command -> its arguments (``{csv}``: a long table outside the home)
COMMANDS: dict[str, list[str]] = {
    "append": ["append", OPENED],
    "repair": ["repair"],
    "import": ["import", "{csv}"],
    "compact": ["compact", "-q"],
    "rebuild": ["compact", "--rebuild", "-q"],
    "vacuum": ["vacuum", "--retain-hours", "0"],
    "verify": ["verify"],
    "sql": ["sql", "SELECT count(*) AS n FROM ratings"],
    # the fit as the tiny home was fitted (every constant pinned: no search), without the page (case-study has it)
    "fit": ["fit", "--quiet", "--no-render", "--prior-source", "shipped", "--prior-weight", "1", "--exploration", "0"],
    "route": ["route", "--region", "r", "--log", "--task", "T01"],
    "table": ["table"],
    "compare": ["compare"],
    "case-study": ["case-study", "routing-by-rating"],
    "doctor": ["doctor"],
    "pin": ["pin", "--latest"],
    "init": ["init"],
}


def _link_out(relative: str) -> Callable[[Path, Path], None]:
    """A folder of the home replaced by a link to a copy of it outside."""

    def apply(home: Path, outside: Path) -> None:
        source = next(home.glob(relative)) if "*" in relative else home / relative
        target = outside / "linked"
        if source.exists():
            shutil.copytree(source, target)
            shutil.rmtree(source)
        else:
            target.mkdir()
        source.symlink_to(target)

    apply.__name__ = f"{relative} linked out"
    return apply


def _not_a_home(home: Path, outside: Path) -> None:
    shutil.rmtree(home)
    home.mkdir()
    (home / "notes.txt").write_text("a folder of the user's, not a home")


def _missing(home: Path, outside: Path) -> None:
    shutil.rmtree(home)


def _missing_file(home: Path, outside: Path) -> None:
    sorted((home / "store" / "events").rglob("*.parquet"))[0].unlink()


def _corrupt_log(home: Path, outside: Path) -> None:
    sorted((home / "store" / "events" / "_delta_log").glob("*.json"))[-1].write_text("{not json")


def _deep(relative: str) -> Callable[[Path, Path], None]:
    def apply(home: Path, outside: Path) -> None:
        (home / relative).write_text("[" * 100_000 + "]" * 100_000)

    apply.__name__ = f"{relative} nested 100k deep"
    return apply


def _shipped(text: str) -> Callable[[Path, Path], None]:
    def apply(home: Path, outside: Path) -> None:
        (home / "fits" / "shipped.json").write_text(text)

    apply.__name__ = f"shipped.json {text}"
    return apply


def _nan_table(home: Path, outside: Path) -> None:
    path = home / "fits" / "routing-table.json"
    text = path.read_text()
    at = text.index('"quality": ') + len('"quality": ')
    path.write_text(text[:at] + "NaN" + text[text.index(",", at) :])


def _future_line(home: Path, outside: Path) -> None:
    with open(home / "streams" / "tasks.jsonl", "a") as handle:  # another writer, who skipped append's check
        handle.write('{"id":"far","type":"task.opened","task":"T98","at":"9999-12-31T23:59:59Z"}\n')


FAULTS: list[Callable[[Path, Path], None]] = [
    _not_a_home,
    _missing,
    _link_out("streams"),
    _link_out("fits"),
    _link_out("deadletter"),
    _link_out("store/events/_delta_log"),
    _link_out("store/events/family=ratings"),
    _link_out("case-studies/routing-by-rating"),
    _missing_file,
    _corrupt_log,
    _deep("fits/routing-table.json"),
    _deep("case-studies/routing-by-rating/stats.json"),
    _nan_table,
    _shipped('{"constants": {"prior_weight": Infinity}}'),
    _shipped('{"constants": {"exploration": "0.3"}, "cheap_confg": "a/-/b/-"}'),
    _future_line,
]

# The machine failing every write of the home (Python's writes: delta-rs writes in Rust, which these cannot
# reach; tests/test_compact_crash.py makes those faults at the process level).
MACHINE = {"EACCES": errno.EACCES, "ENOSPC": errno.ENOSPC}

REFUSED = "error: refusing "
NOT_A_HOME = ("is not a home", "no home at")
DAMAGED = ("is damaged", "cannot be read")
#: (command, fault) -> (exit code, a text the output holds); the other cells keep the invariants only.
EXPECTED: dict[tuple[str, str], tuple[int, str | tuple[str, ...]]] = {
    **{(c, "_not_a_home"): (2, NOT_A_HOME) for c in COMMANDS if c not in ("init", "import")},
    **{(c, "_missing"): (2, NOT_A_HOME) for c in COMMANDS if c not in ("init", "import")},
    ("import", "_not_a_home"): (2, "not empty and not a home"),
    ("init", "_not_a_home"): (0, "created"),
    ("init", "_missing"): (0, "created"),
    ("import", "_missing"): (0, "appended 3 event(s)"),
    **{(c, "streams linked out"): (2, REFUSED) for c in ("append", "repair", "import", "compact", "rebuild", "route")},
    **{(c, "fits linked out"): (2, REFUSED) for c in ("fit", "pin")},
    **{(c, "deadletter linked out"): (2, REFUSED) for c in ("rebuild",)},
    **{
        (c, f): (2, REFUSED)
        for c in ("compact", "rebuild", "vacuum", "sql", "fit")
        for f in ("store/events/_delta_log linked out", "store/events/family=ratings linked out")
    },
    **{(c, "case-studies/routing-by-rating linked out"): (2, REFUSED) for c in ("fit", "case-study")},
    **{(c, "_missing_file"): (1, DAMAGED) for c in ("sql", "fit")},
    **{(c, "_corrupt_log"): (1, DAMAGED) for c in ("compact", "vacuum", "sql", "fit")},
    **{(c, "fits/routing-table.json nested 100k deep"): (2, "nested deeper than") for c in ("route", "table")},
    ("doctor", "fits/routing-table.json nested 100k deep"): (1, "nested deeper than"),
    ("case-study", "case-studies/routing-by-rating/stats.json nested 100k deep"): (2, "nested deeper than"),
    ("route", "_nan_table"): (2, "finite number"),
    ("fit", 'shipped.json {"constants": {"prior_weight": Infinity}}'): (2, "prior_weight: Input should be a finite"),
    ("fit", 'shipped.json {"constants": {"exploration": "0.3"}, "cheap_confg": "a/-/b/-"}'): (2, "cheap_confg"),
    ("compact", "_future_line"): (0, ""),
    ("doctor", 'shipped.json {"constants": {"exploration": "0.3"}, "cheap_confg": "a/-/b/-"}'): (1, "cheap_confg"),
}


def _snapshot(root: Path, skip: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` but ``skip`` (the home), with a file's bytes and a link's target."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents:
            continue
        rel = path.relative_to(root).as_posix()
        out[rel] = f"-> {os.readlink(path)}" if path.is_symlink() else path.read_bytes() if path.is_file() else "/"
    return out


@pytest.fixture(scope="module")
def fitted(tiny_fit, tmp_path_factory):
    """The tiny fitted home with a pinned-free history and a long table to import."""
    return tiny_fit[0]


def _run(fitted: Path, tmp_path: Path, command: str, fault: Callable[[Path, Path], None], machine: int | None = None):
    home, outside = tmp_path / "home", tmp_path / "outside"
    shutil.copytree(fitted, home, symlinks=True)
    outside.mkdir()
    (outside / "mine.txt").write_text("a file of the user's outside the home")
    csv = outside / "results.csv"
    csv.write_text("task_id,config,score,cost_usd,region,at\nT50,c/-/x/-,1,0.1,r,2026-01-20T00:00:00Z\n")
    fault(home, outside)
    before = _snapshot(tmp_path, home)
    args = [a.replace("{csv}", str(csv)) for a in COMMANDS[command]]
    if machine is not None:
        _fail_writes(home, machine)
    try:
        result = CliRunner().invoke(cli, [*args, "--home", str(home)])
    finally:
        os.open, os.mkdir = _OPEN, _MKDIR
    assert isinstance(result.exception, (SystemExit, type(None))), (command, fault.__name__, result.output)
    assert "Traceback" not in result.output, result.output
    assert result.exit_code in (0, 1, 2, 3, 4), result.output
    assert _snapshot(tmp_path, home) == before, (command, fault.__name__)  # nothing outside the home touched
    if result.exit_code not in (0,) and command not in ("verify", "doctor", "append", "import"):
        assert result.output.splitlines()[0].startswith(("error: ", "Usage:")), result.output
    return result


_OPEN, _MKDIR = os.open, os.mkdir


def _fail_writes(home: Path, code: int) -> None:
    def refuse_open(path, flags, *args, **kwargs):
        writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
        if writes and Path(path).absolute().is_relative_to(home):
            raise OSError(code, os.strerror(code), str(path))
        return _OPEN(path, flags, *args, **kwargs)

    def refuse_mkdir(path, *args, **kwargs):
        if Path(path).absolute().is_relative_to(home):
            raise OSError(code, os.strerror(code), str(path))
        return _MKDIR(path, *args, **kwargs)

    os.open, os.mkdir = refuse_open, refuse_mkdir


#: The slow commands meet only the faults in what they read or write (the others would only rerun them whole).
TOUCHES: dict[str, set[str]] = {
    "case-study": {"_not_a_home", "_missing", "case-studies/routing-by-rating linked out", "fits linked out"}
    | {"case-studies/routing-by-rating/stats.json nested 100k deep"},
    "fit": {"_not_a_home", "_missing", "fits linked out", "case-studies/routing-by-rating linked out"}
    | {"store/events/_delta_log linked out", "store/events/family=ratings linked out"}
    | {"_missing_file", "_corrupt_log", *(f.__name__ for f in FAULTS if f.__name__.startswith("shipped.json"))},
    "vacuum": {"_not_a_home", "_missing", "_missing_file", "_corrupt_log", "deadletter linked out"}
    | {"store/events/_delta_log linked out", "store/events/family=ratings linked out"},
}
CELLS = [(c, f) for f in FAULTS for c in COMMANDS if c not in TOUCHES or f.__name__ in TOUCHES[c]]


@pytest.mark.parametrize("command,fault", CELLS, ids=[f"{c}-{f.__name__}" for c, f in CELLS])
def test_no_traceback_and_nothing_outside_the_home(fitted, tmp_path, command, fault):
    result = _run(fitted, tmp_path, command, fault)
    expected = EXPECTED.get((command, fault.__name__))
    if expected is not None:
        code, text = expected
        assert result.exit_code == code, (command, fault.__name__, result.output)
        texts = text if isinstance(text, tuple) else (text,)
        assert any(t in result.output for t in texts), result.output


MACHINE_CELLS = [(command, name) for name in MACHINE for command in COMMANDS if command != "init"]


@pytest.mark.parametrize("command,fault", MACHINE_CELLS, ids=[f"{c}-{f}" for c, f in MACHINE_CELLS])
def test_a_machine_failure_is_exit_4_in_one_line(fitted, tmp_path, command, fault):
    result = _run(fitted, tmp_path, command, lambda home, outside: None, MACHINE[fault])
    if result.exit_code != 0:  # a command that writes nothing of Python's own succeeds
        assert result.exit_code == 4, (command, fault, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_the_matrix_is_the_size_the_report_gives():
    assert (len(COMMANDS), len(FAULTS), len(MACHINE)) == (16, 16, 2)
    assert (len(CELLS), len(MACHINE_CELLS)) == (13 * 16 + 5 + 10 + 7, 15 * 2)


def test_json_of_the_expected_cells_names_real_faults():
    names = {f.__name__ for f in FAULTS}
    assert {fault for _, fault in EXPECTED} <= names, json.dumps(sorted({f for _, f in EXPECTED} - names))
