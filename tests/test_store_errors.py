"""Every failure an operator can cause in a store command is one line, exit 1 or 2, never a traceback; where the
store is damaged the line says how to recover. A decision table: (situation, command) -> exit code and line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.compact import compact
from pipeline.streams.log import append
from tests.fixtures_store import READ_ONLY_SKIP, live_files, mount_read_only, opened, rating

RECOVER = "`ratings compact --rebuild`"


@pytest.fixture
def store_home(home):
    append(home, [opened(1), rating(1), rating(2, day=2)])
    compact(home)
    return home


def _run(args: list[str]) -> tuple[int, str]:
    out = CliRunner().invoke(cli, args)
    assert "Traceback" not in out.output, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)
    return out.exit_code, out.output


def _one_line(args: list[str], code: int, *needles: str) -> str:
    exit_code, output = _run(args)
    assert exit_code == code, output
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("query", ["", ";", "   ", " ; ;  "])
def test_an_empty_query_is_one_line(store_home, query):
    _one_line(["sql", "--home", str(store_home), query], 2, "error: empty query")


@pytest.mark.parametrize(
    "query, value",
    [
        (
            "SELECT uuid() IS NOT NULL AS ok, '6ba7b810-9dad-11d1-80b4-00c04fd430c8'::UUID AS u",
            "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        ),
        ("SELECT INTERVAL 90 MINUTE AS u", "PT1H30M"),
        ("SELECT INTERVAL '1 day 2 seconds' AS u", "P1DT2S"),
        ("SELECT 'nan'::DOUBLE AS u", None),
        ("SELECT 12.50::DECIMAL(6, 2) AS u", 12.5),
        ("SELECT '\\x00\\x01'::BLOB AS u", "0001"),
        ("SELECT {'a': [1, 2]} AS u", {"a": [1, 2]}),
        ("SELECT TIME '10:00:01' AS u", "10:00:01"),
        ("SELECT 340282366920938463463374607431768211455::UHUGEINT AS u", 340282366920938463463374607431768211455),
    ],
)
def test_sql_json_holds_every_value(store_home, query, value):
    code, output = _run(["sql", "--home", str(store_home), "--json", query])
    assert code == 0, output
    assert json.loads(output)[0]["u"] == value


def test_sql_json_of_uuid_function(store_home):
    code, output = _run(["sql", "--home", str(store_home), "--json", "SELECT uuid() AS u, uuid()::VARCHAR AS t"])
    row = json.loads(output)[0]
    assert code == 0 and len(row["u"]) == 36 and row["u"].count("-") == 4


@pytest.mark.parametrize(
    "query, message",
    [
        ("COPY (SELECT 1) TO '.tmp/x.csv'", "this is a COPY statement"),
        ("SELECT * FROM read_csv('.tmp/secret.csv')", "query failed: Permission Error"),
        ("SELECT * FROM glob('.tmp/*')", "query failed: Permission Error"),
    ],
)
def test_sql_cannot_use_duckdbs_temp_directory(store_home, tmp_path, monkeypatch, query, message):
    """DuckDB allows its temp directory (<cwd>/.tmp) even with external access off, unless spilling is disabled."""
    work = tmp_path / "cwd"
    (work / ".tmp").mkdir(parents=True)
    (work / ".tmp" / "secret.csv").write_text("secret\n1\n")
    monkeypatch.chdir(work)
    _one_line(["sql", "--home", str(store_home), query], 2, message)
    assert sorted(p.name for p in (work / ".tmp").iterdir()) == ["secret.csv"]


def _damage_missing(home: Path) -> None:
    live_files(home, "ratings")[0].unlink()


def _damage_corrupt(home: Path) -> None:
    target = live_files(home, "ratings")[0]
    target.write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")


@pytest.mark.parametrize("damage", [_damage_missing, _damage_corrupt], ids=["missing file", "corrupt parquet"])
@pytest.mark.parametrize(
    "command", [["sql", "SELECT count(*) FROM ratings"], ["fit", "--no-render", "--quiet"], ["verify"]]
)
def test_a_damaged_store_is_one_line_with_the_remedy(store_home, damage, command):
    damage(store_home)
    code, output = _run([command[0], "--home", str(store_home), *command[1:]])
    assert code in (1, 2), output
    lines = [line for line in output.strip().splitlines() if line.startswith(("error:", "problem:"))]
    assert lines and any(RECOVER in line for line in lines), output
    if command[0] != "verify":
        assert len(output.strip().splitlines()) == 1, output


@pytest.mark.parametrize("damage", [_damage_missing, _damage_corrupt], ids=["missing file", "corrupt parquet"])
def test_doctor_names_a_damaged_store_with_the_remedy(store_home, damage):
    damage(store_home)
    code, output = _run(["doctor", "--home", str(store_home)])
    assert code == 1
    views = [line for line in output.splitlines() if "store views exist" in line]
    assert views and views[0].startswith("[LIVE] fail") and RECOVER in views[0], output


def test_a_damaged_log_is_one_line_with_the_remedy(store_home):
    (store_home / "store" / "events" / "_delta_log" / f"{1:020d}.json").write_text("{not json")
    for command in (["sql", "SELECT 1"], ["compact"], ["vacuum"]):
        _one_line([command[0], "--home", str(store_home), *command[1:]], 1, "is damaged", RECOVER)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--store", "ftp://host/x"], "unknown scheme 'ftp'"),
        (["--store", "s3://"], "no bucket or container after s3://"),
        (["--storage-option", "NOEQUALS"], "--storage-option 'NOEQUALS': expected KEY=VALUE"),
        (["--writer", "bad:name"], "writer name 'bad:name'"),
    ],
)
def test_bad_store_options_are_one_line_and_write_nothing(home, args, message):
    append(home, [rating(1)])
    before = sorted(p.relative_to(home).as_posix() for p in home.rglob("*"))
    _one_line(["compact", "--home", str(home), *args], 2, message)
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == before


@pytest.mark.parametrize("command", [["compact"], ["vacuum", "--retain-hours", "0"]])
def test_an_unwritable_home_is_one_line(store_home, command):
    append(store_home, [rating(3)])
    if not mount_read_only(store_home):
        pytest.skip(READ_ONLY_SKIP)
    try:
        _one_line([command[0], "--home", str(store_home), *command[1:]], 4, "read-only file system")
    finally:
        subprocess.run(["umount", "-l", str(store_home)], check=False)  # -l: a reader may still hold a file


def test_an_unquoted_reserved_column_gets_a_hint_to_quote_it(store_home):
    line = _one_line(["sql", "--home", str(store_home), "SELECT at FROM tasks"], 2)
    assert line == (
        'error: query failed: Parser Error: syntax error at or near "FROM"; hint: at is a reserved word in DuckDB, '
        'so the column must be quoted: "at"'
    )
    # other parse errors get no such hint, and a quoted "at" needs none
    assert "hint" not in _one_line(["sql", "--home", str(store_home), "SELECT count(*) FRM tasks"], 2)
    assert _run(["sql", "--home", str(store_home), "--json", 'SELECT "at" FROM tasks'])[0] == 0


def test_every_example_in_sql_help_runs_as_printed(store_home, tmp_path, monkeypatch):
    """The examples of ``ratings sql --help`` are copied into a shell as they are: each must run."""
    import shlex

    monkeypatch.chdir(tmp_path)
    (tmp_path / "explain.sql").write_text("SELECT count(*) AS n FROM ratings\n")  # the file an example reads

    help_text = _run(["sql", "--help"])[1]
    examples = [line.strip() for line in help_text.split("Example:")[1].split("Options:")[0].splitlines()]
    examples = [line for line in examples if line.startswith("ratings sql")]
    assert len(examples) >= 4
    for line in examples:
        args = shlex.split(line)[1:]
        args[1:1] = ["--home", str(store_home)]
        if "--as-of" in args:  # a time before the first commit has no table yet; the example's version exists
            args[args.index("--as-of") + 1] = "0"
        code, output = _run(args)
        assert code == 0, (line, output)


def test_sql_schema_lists_every_view_and_column_without_a_store(tmp_path):
    from pipeline.store.families import COLUMNS, VIEWS

    assert _run(["sql", "--home", str(tmp_path), "--schema"])[0] == 2  # a --home given must be a home
    (tmp_path / "streams").mkdir()  # a home that never compacted: the schema needs no store
    code, output = _run(["sql", "--home", str(tmp_path), "--schema", "--json"])
    assert code == 0
    rows = json.loads(output)
    assert rows[0] == {"view": "tasks", "column": "id", "type": "VARCHAR"}
    assert [r["view"] for r in rows] == [v for v in VIEWS for _ in COLUMNS[v]]
    assert {"view": "ratings", "column": "config_key", "type": "VARCHAR"} in rows
    code, output = _run(["sql", "--schema"])
    assert output.splitlines()[0].split() == ["view", "column", "type"]
    assert _run(["sql"])[0] == 2 and _run(["sql", "--schema", "SELECT 1"])[0] == 2


def test_sql_where_no_store_was_compacted_says_so_instead_of_answering_from_empty_views(tmp_path):
    (tmp_path / "streams").mkdir()  # a home, never compacted
    out = CliRunner().invoke(cli, ["sql", "--home", str(tmp_path), "SELECT count(*) AS n FROM tasks"])
    assert out.exit_code == 2
    assert out.output == (
        f"error: no store at {tmp_path / 'store' / 'events'} yet: run `ratings compact` (or `fit-routing`) "
        "first, or give the home with --home\n"
    )


# --------------------------------------------------------------------------- a user's SQL error is bad input
@pytest.mark.parametrize(
    "query, message",
    [
        ("SELECT error('boom')", "error: query failed: Invalid Input Error: boom"),
        ("SELECT json_extract('{','$')", "error: query failed: Invalid Input Error: Malformed JSON"),
        ("SELECT strptime('x','%Y')", "error: query failed: Invalid Input Error: Could not parse string"),
        ("SELECT regexp_matches('a','(')", "error: query failed: Invalid Input Error: missing )"),
        ("SELECT 1/0::INT, 'x'::INT", "error: query failed: Conversion Error"),
        ("SELECT * FROM nope", "error: query failed: Catalog Error"),
        ("SET enable_external_access=true", "this is a SET statement"),
        ("SET VARIABLE x = 1", "this is a SET statement"),
        ("CREATE TABLE t(a INT)", "this is a CREATE statement"),
        ("ATTACH 'x.db'", "this is a ATTACH statement"),
        ("PRAGMA version", "this is a PRAGMA statement"),
        ("SELECT 1; SELECT 2", "give one SQL statement: found 2"),
        ("EXPLAIN COPY (SELECT 1) TO 'x.csv'", "this is a COPY statement"),
    ],
)
def test_a_users_sql_error_is_bad_input_with_duckdbs_message(store_home, query, message):
    """Issue 26, item 4: these were called store damage (exit 1, "run ratings verify ... rebuild")."""
    line = _one_line(["sql", "--home", str(store_home), query], 2)
    assert line.startswith(message) or message in line, line
    assert "rebuild" not in line


@pytest.mark.parametrize("query", ["SELECT 42 AS n", "EXPLAIN SELECT count(*) FROM ratings", "DESCRIBE ratings"])
def test_one_read_only_statement_runs(store_home, query):
    assert _run(["sql", "--home", str(store_home), "--json", query])[0] == 0


def test_a_long_query_comes_from_a_file_or_stdin_and_a_slow_one_stops_at_the_timeout(store_home, tmp_path):
    union = " UNION ALL ".join(f"SELECT {i} AS n" for i in range(3000))  # longer than a command line may be
    (tmp_path / "q.sql").write_text(f"SELECT count(*) AS n FROM ({union})")
    code, out = _run(["sql", "--home", str(store_home), "--json", "--file", str(tmp_path / "q.sql")])
    assert code == 0 and json.loads(out) == [{"n": 3000}]
    piped = CliRunner().invoke(cli, ["sql", "--home", str(store_home), "--json", "-"], input="SELECT 7 AS n")
    assert piped.exit_code == 0 and json.loads(piped.output) == [{"n": 7}]
    slow = "SELECT count(*) FROM range(100000000000) a"
    line = _one_line(["sql", "--home", str(store_home), "--timeout", "0.3", slow], 2)
    assert line == "error: query stopped after 0.3 s (--timeout): narrow it, or give a longer --timeout"
    assert _run(["sql", "--home", str(store_home), "--file", str(tmp_path / "q.sql"), "SELECT 1"])[0] == 2


# --------------------------------------------------------------------------- store errors by class, not by text
def _classified(exc, local=True):
    from deltalake.exceptions import DeltaError  # noqa: F401 - the classes below come from it

    from pipeline.errors import Busy, MachineFailure, StoreCorrupt
    from pipeline.store.table import fail
    from pipeline.workspace import Workspace

    location = Workspace.resolve(Path("/tmp/h"), store=None if local else "s3://bucket/store").store
    try:
        fail(exc, location, "read")
    except (Busy, MachineFailure, StoreCorrupt) as raised:
        return type(raised).__name__, raised.exit_code
    except Exception as raised:  # noqa: BLE001 - the bug class: re-raised as it was
        return f"re-raised {type(raised).__name__}", None


def _errors():
    import errno

    import pyarrow as pa
    from deltalake.exceptions import CommitFailedError, DeltaError, DeltaProtocolError

    return [
        ("a full disk (errno)", OSError(errno.ENOSPC, "No space left on device"), True, ("MachineFailure", 4)),
        ("full (delta-rs text)", OSError("LocalFileSystem error: x (os error 28)"), True, ("MachineFailure", 4)),
        ("read-only (delta-rs text)", OSError("Generic error (os error 30)"), True, ("MachineFailure", 4)),
        ("a missing data file", FileNotFoundError("Object at location x not found"), True, ("StoreCorrupt", 1)),
        ("a log that does not parse", DeltaError("Kernel error: Json error"), True, ("StoreCorrupt", 1)),
        ("a protocol this reader lacks", DeltaProtocolError("reader version 9"), True, ("StoreCorrupt", 1)),
        ("a corrupt Parquet file", pa.ArrowInvalid("Parquet magic bytes not found"), True, ("StoreCorrupt", 1)),
        ("commits that kept losing", CommitFailedError("version 7 already exists"), True, ("Busy", 3)),
        ("an object store failing", OSError("Generic S3 error: connection refused"), False, ("MachineFailure", 4)),
        ("a bug of ours", ValueError("could not convert"), True, ("re-raised ValueError", None)),
        ("another bug", KeyError("x"), True, ("re-raised KeyError", None)),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(11))
def test_the_store_sorts_errors_by_class(case):
    what, exc, local, expected = _errors()[case]
    assert _classified(exc, local) == expected, what
