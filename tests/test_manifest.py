"""Manifests: a broken one is a failed check (exit 1) named on one line, not a pydantic report."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.compact import compact
from pipeline.errors import StoreCorrupt
from pipeline.home import Home
from pipeline.manifest import load_manifest, manifest_path
from pipeline.streams import append
from tests.fixtures_store import rating


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"{\n", "-: Invalid JSON: EOF while parsing an object at line 2 column 0"),
        (b'{"number": "x"}', "Input should be a valid integer"),
    ],
)
def test_a_broken_manifest_is_one_line(home, content, reason):
    append(home, [rating(1)])
    compact(home)
    path = manifest_path(Home.resolve(home), 1)
    path.write_bytes(content)
    with pytest.raises(StoreCorrupt, match=reason) as info:
        load_manifest(home)
    assert str(info.value).startswith(f"manifest {path} is not a valid store-manifest/v1: ")
    assert "\n" not in str(info.value)
    result = CliRunner().invoke(cli, ["sql", "--home", str(home), "SELECT 1"])
    assert result.exit_code == 1 and len(result.output.splitlines()) == 1
