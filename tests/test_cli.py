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
from pipeline.streams.log import read

OPENED = '{"type":"task.opened","task":"T-1","region":"implement"}'
RATED = (
    '{"type":"task.rated","task":"T-1","config":{"cli":"claude-code","route":"anthropic","model":"opus",'
    '"effort":"high"},"rater":{"kind":"gate","name":"pytest"},"score":1}'
)
HEAVY = ("polars", "duckdb", "pyarrow", "scipy", "matplotlib", "deltalake", "numba", "pyspark")


def run(*args: str, stdin: str | bytes | None = None, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin, env=env, catch_exceptions=False)


# --------------------------------------------------------------------------- append
def test_append_arguments(home):
    result = run("append", "--home", str(home), OPENED, RATED)
    assert result.exit_code == 0, result.output
    assert result.stdout == "appended 2 event(s): 1 to tasks, 1 to ratings\n"
    assert [e.task for e in read(home, "tasks")] == ["T-1"] and len(list(read(home, "ratings"))) == 1


NOTE = "note: 1 event(s) of type {!r}, which v1 does not know: kept (family 'other'), ignored by the fit"


@pytest.mark.parametrize(
    "event_type, allow, exit_code, stderr",
    [
        (
            "task.rate",
            (),
            2,
            [
                "<arg>:1: type: 'task.rate' is not a v1 event type: did you mean task.rated? (to keep it as a type "
                "of its own, allow it: --allow-type task.rate)",
                "nothing appended: 1 invalid event(s)",
            ],
        ),
        (
            "task.opend",
            (),
            2,
            [
                "<arg>:1: type: 'task.opend' is not a v1 event type: did you mean task.opened? (to keep it as a "
                "type of its own, allow it: --allow-type task.opend)",
                "nothing appended: 1 invalid event(s)",
            ],
        ),
        ("task.opend", ("--allow-type", "task.opend"), 0, [NOTE.format("task.opend")]),
        ("task.opnd", (), 0, [NOTE.format("task.opnd") + "; did you mean task.opened?"]),  # two edits away
        ("task.reopened", (), 0, [NOTE.format("task.reopened") + "; did you mean task.opened?"]),
        ("deploy.finished", (), 0, [NOTE.format("deploy.finished")]),
    ],
)
def test_append_unknown_types_typos_and_allowed_types(home, event_type, allow, exit_code, stderr):
    result = run("append", "--home", str(home), *allow, f'{{"type":"{event_type}","task":"T-1"}}')
    assert result.exit_code == exit_code
    assert result.stderr.splitlines() == stderr
    assert result.stdout == ("appended 1 event(s): 1 to tasks\n" if exit_code == 0 else "")
    assert (home / "streams" / "tasks.jsonl").exists() == (exit_code == 0)


def test_append_json_reports_errors_as_json(home):
    result = run("append", "--home", str(home), "--json", stdin=f'{OPENED}\n{{"type":"task.rated","score":2}}\n[]\n')
    assert result.exit_code == 2 and result.stderr == ""
    assert json.loads(result.stdout) == {
        "appended": 0,
        "errors": [
            {
                "source": "<stdin>",
                "line": 2,
                "problems": [
                    {"field": "task", "reason": "required field is missing"},
                    {"field": "config", "reason": "required field is missing"},
                    {"field": "rater", "reason": "required field is missing"},
                    {"field": "score", "reason": "Input should be less than or equal to 1"},
                ],
            },
            {
                "source": "<stdin>",
                "line": 3,
                "problems": [{"field": "-", "reason": "expected a JSON object, got an array"}],
            },
        ],
        "invalid": 2,
    }
    assert not (home / "streams" / "tasks.jsonl").exists()


@pytest.mark.parametrize(
    "stdin, expected",
    [
        (f"{OPENED}\n{RATED}\n", {"appended": 2, "streams": {"tasks": 1, "ratings": 1}, "blank_lines": 0}),
        (f"{RATED}\n{RATED}", {"appended": 2, "streams": {"ratings": 2}, "blank_lines": 0}),  # no final newline
        (f"{OPENED}\r\n", {"appended": 1, "streams": {"tasks": 1}, "blank_lines": 0}),  # CRLF
        ("", {"appended": 0, "streams": {}, "blank_lines": 0}),
        (f"{OPENED}\n\n  \n{RATED}\n\n", {"appended": 2, "streams": {"tasks": 1, "ratings": 1}, "blank_lines": 3}),
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
        ((), b'{"type":"x","s":"\xff"}\n', ["<stdin>:1: -: not valid UTF-8 at byte 17"]),
        (
            (OPENED, '{"type":"task.rated","task":"T","score":2}'),
            None,
            [
                "<arg>:2: config: required field is missing; rater: required field is missing; "
                "score: Input should be less than or equal to 1"
            ],
        ),
        (("--max-line-bytes", "160", OPENED, RATED), None, ["<arg>:2: -: line is 166 bytes, over the limit of 160"]),
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
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
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


# --------------------------------------------------------------------------- nothing leaves the home
TORN = b'{"type":"task.opened","task":"T-0"}\n{"type":"task.op'


def _victim(tmp_path: Path) -> Path:
    """A file outside the home that a link inside it points at (a system file, in an attack)."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"root:x:0:0\npartial")  # no final newline: a writer would quarantine the 'torn tail'
    return victim


def _link(home: Path, relative: str, target: Path) -> None:
    (home / relative).parent.mkdir(parents=True, exist_ok=True)
    (home / relative).unlink(missing_ok=True)
    (home / relative).symlink_to(target)


@pytest.mark.parametrize(
    "linked, command, refused",
    [
        ("streams/tasks.jsonl", ("append", OPENED), "streams/tasks.jsonl: it is a symbolic link"),
        ("streams/tasks.jsonl", ("append", OPENED, RATED), "streams/tasks.jsonl: it is a symbolic link"),
        ("streams/tasks.jsonl", ("repair",), "streams/tasks.jsonl: it is a symbolic link"),
        ("streams/ratings.jsonl", ("append", RATED), "streams/ratings.jsonl: it is a symbolic link"),
        ("streams/.tasks.lock", ("append", OPENED), "streams/.tasks.lock: it is a symbolic link"),
        ("streams/.ratings.lock", ("repair",), "streams/.ratings.lock: it is a symbolic link"),
        ("streams", ("append", OPENED), "streams is a symbolic link to"),
        ("quarantine", ("append", OPENED), "quarantine is a symbolic link to"),
        ("quarantine", ("repair",), "quarantine is a symbolic link to"),
        ("deadletter", ("import", "--skip-bad", "{table}"), "deadletter is a symbolic link to"),
        ("deadletter/import-table.csv.jsonl", ("import", "--skip-bad", "{table}"), "it is a symbolic link"),
        ("imports", ("import", "--skip-bad", "{table}"), "imports is a symbolic link to"),
        ("imports/.import.lock", ("import", "--skip-bad", "{table}"), "it is a symbolic link"),
    ],
)
def test_a_link_out_of_the_home_is_refused_in_one_line(home, tmp_path, linked, command, refused):
    """A stream, lock file, quarantine or dead-letter file or folder linked out of the home: exit 2, one line,
    the target untouched (never truncated, appended to, or copied into quarantine/ or deadletter/)."""
    victim = _victim(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tasks.jsonl").write_bytes(TORN)
    is_folder = "." not in Path(linked).name
    if linked != "streams":
        (home / "streams").mkdir(exist_ok=True)
        (home / "streams" / "tasks.jsonl").write_bytes(TORN)  # a torn tail: recovery would move it
        (home / "streams" / "ratings.jsonl").write_bytes(b"")
    _link(home, linked, elsewhere if is_folder else victim)
    table = tmp_path / "table.csv"
    table.write_text("task_id,config,score,cost_usd,region,at\nT1,m,7,0.1,code,2026-01-01T00:00:00Z\n")
    before = {p: p.read_bytes() for p in [victim, *elsewhere.iterdir()]}
    result = run(command[0], "--home", str(home), *(c.replace("{table}", str(table)) for c in command[1:]))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: refusing ") and refused in result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""
    assert {p: p.read_bytes() for p in [victim, *elsewhere.iterdir()]} == before
    if linked != "quarantine":
        assert not (home / "quarantine").exists() or list((home / "quarantine").iterdir()) == []


def test_a_linked_stream_is_not_read():
    """Readers refuse a stream linked out of the home too (its bytes would become events, or dead letters)."""
    import tempfile

    from pipeline.errors import OutsideHome
    from pipeline.streams.log import read_lines

    with tempfile.TemporaryDirectory() as tmp:
        home, victim = Path(tmp) / "home", _victim(Path(tmp))
        _link(home, "streams/tasks.jsonl", victim)
        with pytest.raises(OutsideHome, match="it is a symbolic link"):
            list(read_lines(home, "tasks"))


# --------------------------------------------------------------------------- one line, never a traceback
def _fail_os(monkeypatch, name: str, code: int, *, when=lambda *args: True) -> None:
    import errno as errno_
    import os

    real = getattr(os, name)

    def failing(*args, **kwargs):
        if when(*args):
            raise OSError(code, os.strerror(code), *([str(args[0])] if name == "open" else []))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, failing)
    assert errno_.errorcode[code]


def _in_home(home: Path):
    return lambda path, *rest: str(path).startswith(str(home)) and not str(path).endswith(".csv")


@pytest.mark.parametrize(
    "command, fault, message",
    [
        (("append", OPENED), ("open", 13), "error: Permission denied: {home}/streams/.tasks.lock"),
        (("append", OPENED, RATED), ("open", 30), "error: Read-only file system: {home}/streams/.tasks.lock"),
        (("repair",), ("open", 13), "error: Permission denied: {home}/streams/.tasks.lock"),
        (("import", "{table}"), ("open", 13), "error: Permission denied: {home}/imports/.import.lock"),
        (("append", OPENED), ("write", 28), "error: No space left on device (while appending 1 event(s) to"),
        (
            ("append", OPENED, OPENED),
            ("write", 28),
            "error: No space left on device (the batch was rolled back: nothing of it was appended; while appending",
        ),
        (("import", "{table}"), ("write", 28), "error: No space left on device (the batch was rolled back"),
        (("repair",), ("write", 28), "error: No space left on device"),
    ],
)
def test_an_unwritable_home_or_a_full_disk_is_one_line(home, tmp_path, monkeypatch, command, fault, message):
    (home / "streams").mkdir()
    content = TORN if command[0] == "repair" else TORN[: TORN.index(b"\n") + 1]  # repair has a tail to move
    (home / "streams" / "tasks.jsonl").write_bytes(content)
    (home / "streams" / "ratings.jsonl").write_bytes(b"")
    table = tmp_path / "table.csv"
    table.write_text("task_id,config,score,cost_usd,region,at\nT1,m,1,0.1,code,2026-01-01T00:00:00Z\n")
    name, code = fault
    _fail_os(monkeypatch, name, code, when=_in_home(home) if name == "open" else lambda *args: True)
    result = run(command[0], "--home", str(home), *(c.replace("{table}", str(table)) for c in command[1:]))
    monkeypatch.undo()
    assert result.exit_code == 4, result.output  # a machine failure
    assert result.stderr.startswith(message.format(home=home)), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output
    assert (home / "streams" / "tasks.jsonl").read_bytes() == content  # nothing appended, nothing moved


def test_a_home_under_a_file_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    result = run("append", "--home", str(tmp_path / "file" / "home"), OPENED)
    assert result.exit_code == 2 and result.stderr.startswith(f"error: no home at --home {tmp_path}/file/home: ")
    assert len(result.stderr.splitlines()) == 1
    result = run("append", "--home", str(tmp_path / "file"), OPENED)
    assert (
        result.exit_code == 2
        and result.stderr == f"error: --home {tmp_path}/file is not a folder: give the folder of a home\n"
    )


def test_append_json_reports_an_io_error_as_json(home, monkeypatch):
    _fail_os(monkeypatch, "write", 28)
    result = run("append", "--home", str(home), "--json", OPENED)
    monkeypatch.undo()
    assert result.exit_code == 4
    out = json.loads(result.stdout)
    assert out["appended"] == 0 and out["error"].startswith("No space left on device (while appending 1 event(s)")


# --------------------------------------------------------------------------- times in the future (issue 26, item 2)
def _in(days: float) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


# the event's time, the options -> appended, or the start of the refusal
FUTURE = [
    (lambda: "9999-12-31T23:59:59Z", [], "at: 9999-12-31T23:59:59Z is more than 1 day after now"),
    (lambda: _in(365), [], "is more than 1 day after now"),  # next year, without a word before
    (lambda: _in(0.5), [], None),  # a writer's clock a little ahead
    (lambda: _in(0.5), ["--skew", "1h"], "is more than 1 h after now"),
    (lambda: _in(365), ["--skew", "400d"], None),
    (lambda: "9999-12-31T23:59:59Z", ["--allow-future"], None),
    (lambda: "2020-01-01T00:00:00Z", [], None),  # the past is never refused
]


@pytest.mark.parametrize("at, options, refusal", FUTURE, ids=[f"{i}" for i in range(len(FUTURE))])
def test_append_refuses_a_time_past_the_skew_with_the_reason(home, at, options, refusal):
    event = json.dumps({"type": "task.opened", "task": "T-1", "at": at()})
    result = run("append", "--home", str(home), *options, event)
    if refusal is None:
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2 and not (home / "streams" / "tasks.jsonl").exists()
    assert result.stderr.startswith("<arg>:1: at: ") and refusal in result.stderr, result.stderr
    assert "fix the writer's clock, or pass --allow-future" in result.stderr


def test_a_bad_skew_is_a_usage_error(home):
    for skew in ("1", "0d", "1y", "3651d"):
        result = run("append", "--home", str(home), "--skew", skew, OPENED)
        assert result.exit_code == 2 and "--skew" in result.stderr, (skew, result.stderr)


def test_import_checks_the_skew_of_every_row_before_appending_any(home, tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(
        f"task_id,config,score,cost_usd,region,at\nT1,c/-/m/-,1,0.1,r,2026-01-01T00:00:00Z\nT2,c/-/m/-,1,0.1,r,{_in(30)}\n"
    )
    result = run("import", "--home", str(home), str(table))
    assert result.exit_code == 2 and "row:2: at: " in result.stderr and "more than 1 day after now" in result.stderr
    assert not (home / "streams").exists() or not (home / "streams" / "tasks.jsonl").exists()
    assert run("import", "--home", str(home), "--allow-future", str(table)).exit_code == 0
