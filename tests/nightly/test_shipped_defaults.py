"""A home without fits/shipped.json, or with the template's placeholders left, says so in one sentence, and the
same sentence everywhere: the fit's summary, the page and ``ratings compare``."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.fit.shipped import TEMPLATE
from tests.fixtures_nightly import make_home, tiny_events

DEFAULTS = "no shipped constants: code defaults k 3, exploration 0.3 (thompson), min samples 3"


def _fit(home, *args: str) -> str:
    result = CliRunner().invoke(cli, ["fit", "--home", str(home), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_no_shipped_file_is_named_in_the_summary_the_page_and_compare(tmp_path):
    home = make_home(tmp_path / "home", tiny_events())
    (home / "fits" / "shipped.json").unlink()
    lines = _fit(home).splitlines()
    assert "(constants: code defaults;" in lines[0]
    assert DEFAULTS in lines
    page = (home / "case-studies" / "routing-by-rating" / "README.md").read_text()
    assert "No shipped constants: code defaults k 3, exploration 0.3 (thompson), min samples 3." in page
    assert "_The published routing table uses the code defaults (no shipped.json)._" in page
    stats = json.loads((home / "case-studies" / "routing-by-rating" / "stats.json").read_text())
    assert stats["constants"]["shipped_from"] == "code defaults" and DEFAULTS in stats["notes"]
    compared = CliRunner().invoke(cli, ["compare", "--home", str(home)])
    assert compared.exit_code == 0, compared.output
    assert (
        "Note: No shipped constants: code defaults k 3, exploration 0.3 (thompson), min samples 3." in compared.output
    )


def test_a_shipped_file_says_nothing_of_defaults(tmp_path):
    home = make_home(tmp_path / "home", tiny_events())
    out = _fit(home)
    assert "code defaults" not in out and "(constants: shipped;" in out.splitlines()[0]


def test_a_template_left_with_placeholders_fits_and_names_them(tmp_path):
    home = make_home(tmp_path / "home", tiny_events(), shipped=TEMPLATE)
    out = _fit(home)
    assert (
        "fits/shipped.json still holds template placeholders at default_config, cheap_config, frontier_config, "
        "pinned.reviewer, priors[0], prices[0]: they are ignored, as if absent; replace each with a config key of "
        "yours "
        '(ratings sql "SELECT DISTINCT config_key FROM attempts") or delete it'
    ) in out.splitlines()
    shutil.rmtree(home)
