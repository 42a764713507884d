"""Decision tables for the ``ratings import`` items of issue 26 (mistakes accepted silently), and a fuzz of the
long table's cells: every case gives exit 0 with what it says, or exit 2 in one clear line, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.cli import cli
from pipeline.streams.events import parse_line

HEADER = "task_id,config,score,cost_usd,region,at"
AT = "2026-01-01T00:00:00Z"


def _run(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["import", "--home", str(home), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def _table(tmp_path: Path, body: str, *, header: str = HEADER, name: str = "t.csv", prefix: bytes = b"") -> Path:
    path = tmp_path / name
    path.write_bytes(prefix + (header + "\n" + body).encode())
    return path


def _configs(home: Path) -> list[str]:
    lines = (home / "streams" / "ratings.jsonl").read_bytes().splitlines()
    return [parse_line(x).config.key for x in lines if not x.startswith(b'{"type":"batch.')]


# --------------------------------------------------------------------------- config strings that are not keys
@pytest.mark.parametrize(
    "cells, options, exit_code, expect",
    [
        # auto (the default): no cell is a valid 4-part key -> model names, and the summary says so
        (["codex/openai/gpt-5-codex"], [], 0, ["import/-/codex%2Fopenai%2Fgpt-5-codex/-"]),
        (["a/b/c/d/e"], [], 0, ["import/-/a%2Fb%2Fc%2Fd%2Fe/-"]),
        (["c/r/m/-", "c/-/m/high"], [], 0, ["c/r/m/-", "c/-/m/high"]),
        # auto: keys and other names mixed -> refused with an example of each
        (["c/r/m/-", "codex/openai/gpt-5-codex"], [], 2, "mixes config keys (row 1: 'c/r/m/-') and other names (row 2"),
        (["a/b/c/d/e", "c/r/m/-"], [], 2, "mixes config keys (row 2: 'c/r/m/-') and other names (row 1: 'a/b/c/d/e')"),
        # key: every cell must be a 4-part key
        (
            ["codex/openai/gpt-5-codex"],
            ["--config-column-format", "key"],
            2,
            "is not a config key cli/route/model/effort",
        ),
        (["c/r/m/-"], ["--config-column-format", "key"], 0, ["c/r/m/-"]),
        # model: every cell is a model name, also one that looks like a key
        (["c/r/m/-"], ["--config-column-format", "model"], 0, ["import/-/c%2Fr%2Fm%2F-/-"]),
        # a 4-part cell that is not a valid key (no cli) is a bad row, not a model name
        (["/r/m/e"], [], 2, "config:"),
    ],
)
def test_config_column_format(home, tmp_path, cells, options, exit_code, expect):
    body = "".join(f"T{i},{c},1,0.1,r,{AT}\n" for i, c in enumerate(cells))
    code, out, err = _run(home, _table(tmp_path, body).as_posix(), *options)
    assert code == exit_code, err
    if exit_code:
        assert expect in err and "Traceback" not in err
    else:
        assert sorted(set(_configs(home))) == sorted(expect)
        model_names = any(not c.startswith(("c/",)) and "/" in c for c in cells) and not options
        assert ("config column read as plain model names" in out) == model_names


def test_config_map_names_win_and_a_mapped_column_is_not_mixed(home, tmp_path):
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"gpt-5-codex": "codex/openai/gpt-5-codex/high"}))
    body = f"T1,gpt-5-codex,1,0.1,r,{AT}\nT2,c/r/m/-,0,0.1,r,{AT}\n"
    code, _, err = _run(home, str(_table(tmp_path, body)), "--config-map", str(mapping))
    assert code == 0, err
    assert sorted(_configs(home)) == ["c/r/m/-", "codex/openai/gpt-5-codex/high"]


# --------------------------------------------------------------------------- --skip-bad skips every bad row
BAD_CELLS = {
    "cost 1e308": f"T9,m,1,1e308,r,{AT}",
    "cost -1": f"T9,m,1,-1,r,{AT}",
    "cost inf": f"T9,m,1,inf,r,{AT}",
    "score 7": f"T9,m,7,0.1,r,{AT}",
    "score text": f"T9,m,good,0.1,r,{AT}",
    "score -inf": f"T9,m,-inf,0.1,r,{AT}",
    "no task": f",m,1,0.1,r,{AT}",
    "no config": f"T9,,1,0.1,r,{AT}",
    "bad time": "T9,m,1,0.1,r,yesterday",
    "future time": "T9,m,1,0.1,r,2999-01-01T00:00:00Z",
    "everything": ",,2,-1,r,never",
}


@pytest.mark.parametrize("case", sorted(BAD_CELLS))
def test_skip_bad_skips_every_kind_of_bad_row(home, tmp_path, case):
    body = f"T1,m,1,0.1,r,{AT}\n{BAD_CELLS[case]}\nT2,m,0,0.2,r,{AT}\n"
    path = _table(tmp_path, body)
    code, _, err = _run(home, str(path))
    assert code == 2 and "row:2:" in err and "Traceback" not in err and not (home / "streams").exists()
    code, out, err = _run(home, str(path), "--skip-bad", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["imported_rows"], summary["bad_rows"], summary["appended"]) == (2, 1, 6)
    [letter] = [json.loads(x) for x in Path(summary["deadletter"]).read_text().splitlines()]
    assert letter["row"] == 2 and letter["kind"] == "bad" and letter["raw"]["task_id"] == BAD_CELLS[case].split(",")[0]
    if case == "everything":  # every problem of the row is named, as append names them
        assert [p["field"] for p in letter["problems"]] == ["task_id", "config", "score", "cost_usd", "at"]


# --------------------------------------------------------------------------- BOM, delimiters
@pytest.mark.parametrize(
    "prefix, separator, name, note",
    [
        (b"\xef\xbb\xbf", ",", "t.csv", None),
        (b"", ";", "t.csv", "separated by ';'"),
        (b"\xef\xbb\xbf", "\t", "t.tsv", "separated by '\\t'"),
        (b"", "|", "t.csv", "separated by '|'"),
    ],
)
def test_a_bom_and_other_delimiters_are_read(home, tmp_path, prefix, separator, name, note):
    header = HEADER.replace(",", separator)
    body = f"T1{separator}m{separator}1{separator}0.1{separator}r{separator}{AT}\n"
    code, out, err = _run(
        home, str(_table(tmp_path, body, header=header, name=name, prefix=prefix)), "--format", "long"
    )
    assert code == 0, err
    assert "appended 3 event(s)" in out
    assert (note is None) or note in out


def test_a_header_read_as_one_column_names_the_delimiter(home, tmp_path):
    path = _table(tmp_path, "T1:m:1\n", header="task_id:config:score")
    code, _, err = _run(home, str(path), "--format", "long")
    assert code == 2 and "missing column(s)" in err and len(err.splitlines()) == 1


# --------------------------------------------------------------------------- NaN is the same in every format
@pytest.mark.parametrize("fmt", ["csv", "parquet", "parquet-null"])
def test_nan_is_a_blank_in_every_format(home, tmp_path, fmt):
    rows = {
        "task_id": ["T1", "T2"],
        "config": ["m", "m"],
        "score": [float("nan"), 1.0],
        "cost_usd": [0.1, float("nan")],
        "region": ["r", "r"],
        "at": [AT, AT],
    }
    if fmt == "csv":
        path = _table(tmp_path, f"T1,m,NaN,0.1,r,{AT}\nT2,m,1,nan,r,{AT}\n")
    else:
        if fmt == "parquet-null":
            rows["score"], rows["cost_usd"] = [None, 1.0], [0.1, None]
        path = tmp_path / "t.parquet"
        pq.write_table(pa.table(rows), path)
    code, out, err = _run(home, str(path), "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["skipped_blank_score"], summary["imported_rows"], summary["costs"]) == (1, 1, {"unknown": 1})


# --------------------------------------------------------------------------- --json errors
def test_json_errors_are_json_and_name_every_problem_of_every_row(home, tmp_path):
    path = _table(tmp_path, f",m,2,-1,r,{AT}\nT2,m,1,0.1,r,never\n")
    code, out, err = _run(home, str(path), "--json")
    assert code == 2 and err == ""
    payload = json.loads(out)
    assert payload["appended"] == 0 and payload["invalid"] == 2
    first, second = payload["errors"]
    assert first["line"] == 1 and [p["field"] for p in first["problems"]] == ["task_id", "score", "cost_usd"]
    assert second["line"] == 2 and [p["field"] for p in second["problems"]] == ["at"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format", "mini-ork"], "not a mini-ork source: it is a long table"),
        (["--format", "otlp"], "not a otlp source: it is a long table"),
        (["--score-range", "5:1"], "--score-range '5:1': LO and HI must be finite numbers with LO < HI"),
        (["--score-range", "x"], "--score-range 'x': expected LO:HI"),
        (["--config-map", "/nonexistent/map.json"], "no such file (--config-map)"),
    ],
)
def test_wrong_formats_and_options_are_one_line(home, tmp_path, args, message):
    path = _table(tmp_path, f"T1,m,1,0.1,r,{AT}\n")
    code, _out, err = _run(home, str(path), *args)
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not (home / "streams").exists()


def test_score_range_maps_a_scale_and_refuses_what_lies_outside(home, tmp_path):
    path = _table(tmp_path, f"T1,m,5,0.1,r,{AT}\nT2,m,3,0.1,r,{AT}\nT3,m,6,0.1,r,{AT}\n")
    code, out, err = _run(home, str(path), "--score-range", "1:5", "--skip-bad", "--json")
    assert code == 0, err
    assert json.loads(out)["bad"] == {"score": 1}
    lines = (home / "streams" / "ratings.jsonl").read_bytes().splitlines()
    scores = sorted(parse_line(x).score for x in lines if not x.startswith(b'{"type":"batch.'))
    assert scores == [0.5, 1.0]


# --------------------------------------------------------------------------- fuzz: no traceback, ever
CELL = st.one_of(
    st.sampled_from(
        [
            "",
            "nan",
            "NaN",
            "inf",
            "-1",
            "0",
            "1",
            "0.5",
            "1e308",
            "7",
            "x",
            "2026-01-01T00:00:00Z",
            "c/r/m/-",
            "a/b/c",
            "a/b/c/d/e",
            "/r/m/e",
            '"',
            "é",
        ]
    ),
    st.text(max_size=6),
)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(CELL, min_size=6, max_size=6), min_size=1, max_size=4), skip=st.booleans())
def test_any_cells_give_exit_0_or_a_clear_exit_2(tmp_path_factory, rows, skip):
    root = tmp_path_factory.mktemp("fuzz")
    body = "".join(
        ",".join(c.replace(",", ";").replace("\n", " ").replace("\r", " ") for c in row) + "\n" for row in rows
    )
    path = _table(root, body)
    code, out, err = _run(root / "home", str(path), "--format", "long", "--json", *(["--skip-bad"] if skip else []))
    assert code in (0, 2), (code, out, err)
    json.loads(out)  # --json: the result or the errors, as JSON, in every case
