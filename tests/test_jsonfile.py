"""Reading a person's JSON file into a model: the same messages for shipped.json, scenarios and tables."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from pipeline.errors import FitError, TableSchemaError
from pipeline.jsonfile import read_json, validate


class Point(BaseModel):
    x: int


@pytest.mark.parametrize(
    "text, missing, error, message",
    [
        (None, "no such file here", TableSchemaError, "{path}: no such file here"),
        ("{nope", None, FitError, "{path}: not valid JSON: Expecting property name enclosed in double quotes"),
        ('{"x": "a"}', None, FitError, "{path}: x: Input should be a valid integer"),
        ("[1]", None, FitError, "{path}: -: Input should be a valid dictionary or instance of Point"),
    ],
)
def test_bad_files_raise_the_callers_error_naming_path_and_field(tmp_path, text, missing, error, message):
    path = tmp_path / "f.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(error) as info:
        validate(Point, read_json(path, error, missing=missing), path, error)
    assert str(info.value).startswith(message.format(path=path))


def test_a_missing_file_without_a_message_is_left_to_the_caller(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json", FitError)
    path = tmp_path / "ok.json"
    path.write_text('{"x": 3}')
    assert validate(Point, read_json(path, FitError), path, FitError) == Point(x=3)


@pytest.mark.parametrize(
    "command, file, content, message",
    [
        (
            ["compare", "--stats", "{tmp}/s.json"],
            "s.json",
            '{"name": 3}',
            "error: {tmp}/s.json: not a case-study-stats/v1 file: name: Input should be a valid string",
        ),
        (
            ["case-study", "x"],
            "case-studies/x/stats.json",
            '{"name": "x"',
            "error: {tmp}/case-studies/x/stats.json: not a case-study-stats/v1 file: Expecting",
        ),
    ],
)
def test_cli_names_the_first_problem_of_a_broken_file_on_one_line(tmp_path, command, file, content, message):
    from click.testing import CliRunner

    from pipeline.cli import cli

    path = tmp_path / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    (tmp_path / "fits").mkdir()  # the --home given is a home
    result = CliRunner().invoke(cli, [c.format(tmp=tmp_path) for c in command] + ["--home", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(message.format(tmp=tmp_path)) and len(result.output.splitlines()) == 1


def test_a_broken_pin_record_is_one_line(tmp_path):
    from pipeline.nightly.publish import read_pin
    from pipeline.workspace import Workspace

    (tmp_path / "fits").mkdir()
    (tmp_path / "fits" / "pin.json").write_text('{"pinned": 3}')
    with pytest.raises(TableSchemaError) as info:
        read_pin(Workspace.of(tmp_path))
    assert str(info.value) == f"{tmp_path}/fits/pin.json: not a valid pin record: version: Field required"
