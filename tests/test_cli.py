"""The ``ratings`` CLI: append and repair through click's runner, help of every command, a light start-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.streams import read

OPENED = '{"type":"task.opened","task":"T-1","region":"implement"}'
RATED = (
    '{"type":"task.rated","task":"T-1","config":{"cli":"claude-code","route":"anthropic","model":"opus",'
    '"effort":"high"},"rater":{"kind":"gate","name":"pytest"},"score":1}'
)
HEAVY = ("polars", "duckdb", "pyarrow", "scipy", "matplotlib")


def run(*args: str, stdin: str | bytes | None = None, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin, env=env, catch_exceptions=False)


# --------------------------------------------------------------------------- append
def test_append_arguments(home):
    result = run("append", "--home", str(home), OPENED, RATED)
    assert result.exit_code == 0, result.output
    assert result.stdout == "appended 2 event(s): 1 to tasks, 1 to ratings\n"
    assert [e.task for e in read(home, "tasks")] == ["T-1"] and len(list(read(home, "ratings"))) == 1


def test_append_notes_an_unknown_type_on_stderr(home):
    """A typo in ``type`` is a valid event of an unknown type (kept, ignored by the fit): say so."""
    result = run("append", "--home", str(home), '{"type":"task.rate","task":"T-1"}')
    assert result.exit_code == 0
    assert result.stdout == "appended 1 event(s): 1 to tasks\n"
    assert result.stderr == (
        "note: 1 event(s) of type 'task.rate', which v1 does not know: kept (family 'other'), ignored by the fit\n"
    )


@pytest.mark.parametrize(
    "stdin, expected",
    [
        (f"{OPENED}\n{RATED}\n", {"appended": 2, "streams": {"tasks": 1, "ratings": 1}}),
        (f"{RATED}\n{RATED}", {"appended": 2, "streams": {"ratings": 2}}),  # no final newline
        (f"{OPENED}\r\n", {"appended": 1, "streams": {"tasks": 1}}),  # CRLF
        ("", {"appended": 0, "streams": {}}),
    ],
)
def test_append_stdin_json(home, stdin, expected):
    result = run("append", "--home", str(home), "--json", stdin=stdin)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == expected


def test_append_uses_ratings_home(home):
    result = run("append", OPENED, env={"RATINGS_HOME": str(home)})
    assert result.exit_code == 0 and len(list(read(home, "tasks"))) == 1


@pytest.mark.parametrize(
    "args, stdin, errors",
    [
        (
            (),
            f"{OPENED}\nnot json\n{RATED}\n[]\n",
            [
                "<stdin>:2: -: not valid JSON: Expecting value: line 1 column 1 (char 0)",
                "<stdin>:4: -: expected a JSON object, got an array",
            ],
        ),
        ((), f"{OPENED}\n\n", ["<stdin>:2: -: empty line"]),
        ((), b'{"type":"x","s":"\xff"}\n', ["<stdin>:1: -: not valid UTF-8 at byte 17"]),
        (
            (OPENED, '{"type":"task.rated","task":"T","score":2}'),
            None,
            ["<arg>:2: config: required field is missing (and 2 more problems)"],
        ),
        (("--max-line-bytes", "140", OPENED, RATED), None, ["<arg>:2: -: line is 166 bytes, over the limit of 140"]),
    ],
)
def test_append_bad_lines_exit_2_and_append_nothing(home, args, stdin, errors):
    result = run("append", "--home", str(home), *args, stdin=stdin)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [*errors, f"nothing appended: {len(errors)} invalid event(s)"]
    assert result.stdout == "" and not (home / "streams" / "tasks.jsonl").exists()


def test_append_bad_option_is_a_usage_error(home):
    result = run("append", "--home", str(home), "--fsync", "sometimes", OPENED)
    assert result.exit_code == 2 and "'sometimes' is not one of" in result.stderr


# --------------------------------------------------------------------------- repair
def test_repair(home):
    assert run("append", "--home", str(home), OPENED).exit_code == 0
    with open(home / "streams" / "tasks.jsonl", "ab") as handle:
        handle.write(b'{"type":"task.op')
    result = run("repair", "--home", str(home), "--json")
    assert result.exit_code == 0
    moved = json.loads(result.stdout)["quarantined"]
    assert [Path(p).read_bytes() for p in moved] == [b'{"type":"task.op']
    assert run("repair", "--home", str(home)).stdout == "nothing to repair: no torn tail, no batch cut short\n"
    with open(home / "streams" / "ratings.jsonl", "ab") as handle:
        handle.write(b"torn")
    out = run("repair", "--home", str(home)).stdout
    assert out.startswith(f"quarantined {home / 'quarantine'}/ratings.00000000000000000000.") and out.count("\n") == 1


# --------------------------------------------------------------------------- every command
def _commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))


def test_every_command_has_help_with_an_example():
    paths = list(_commands(cli))
    assert ("append",) in paths and ("repair",) in paths
    missing = []
    for path in paths:
        result = CliRunner().invoke(cli, [*path, "--help"])
        if result.exit_code != 0 or "Example" not in result.stdout:
            missing.append(" ".join(path))
    assert missing == [], f"commands whose --help has no Example: {missing}"
    assert "Example" in CliRunner().invoke(cli, ["--help"]).stdout


# --------------------------------------------------------------------------- start-up stays light
def test_import_and_one_append_load_no_heavy_library(home):
    code = f"""
import json, sys
import pipeline.cli
after_import = sorted(m for m in {HEAVY!r} if m in sys.modules)
sys.argv = ["ratings", "append", "--home", {str(home)!r}, {RATED!r}]
try:
    pipeline.cli.main()
except SystemExit as exc:
    assert exc.code in (0, None), exc.code
after_append = sorted(m for m in {HEAVY!r} if m in sys.modules)
print(json.dumps([after_import, after_append]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [[], []]
    assert len(list(read(home, "ratings"))) == 1


def test_fit_with_a_missing_shipped_file_is_a_usage_error(home, tmp_path):
    """A mistyped --shipped must not fall back to the code defaults silently (a missing fits/shipped.json may)."""
    result = CliRunner().invoke(cli, ["fit", "--home", str(home), "--shipped", str(tmp_path / "nope.json")])
    assert result.exit_code == 2
    assert f"Invalid value for '--shipped': File '{tmp_path / 'nope.json'}' does not exist." in result.output


def test_fit_routing_takes_dash_h_like_every_other_command():
    """``fit-routing -h`` is the fit command's help (the entry point is not the group, which sets -h)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv = ['fit-routing', '-h']; from pipeline.cli import "
            "fit_routing_main; fit_routing_main()",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: fit-routing [OPTIONS]\n\n  Fit routing from the ratings")
