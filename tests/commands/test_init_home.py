"""``ratings init``: the folders of a home and a shipped.json template the fit reads safely."""

from __future__ import annotations

import json

from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.fit.shipped import TEMPLATE, ShippedConstants, load_shipped, placeholder_note


def test_init_creates_the_folders_and_the_template(tmp_path):
    home = tmp_path / "team"
    result = CliRunner().invoke(cli, ["init", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"home {home}: created streams/, quarantine/, deadletter/, fits/, case-studies/; wrote fits/shipped.json, "
        "a template: replace its <...> placeholders with your config keys (until then the fit ignores them and "
        "says so)\n"
        "next: append events (ratings append), then run the nightly job (fit-routing) and read the table "
        "(ratings table)\n"
    )
    assert sorted(p.name for p in home.iterdir()) == ["case-studies", "deadletter", "fits", "quarantine", "streams"]
    assert json.loads((home / "fits" / "shipped.json").read_text()) == TEMPLATE


def test_the_template_names_every_constant_a_team_can_ship():
    names = {field.alias or name for name, field in ShippedConstants.model_fields.items()}
    assert set(TEMPLATE["constants"]) == names
    ShippedConstants.model_validate(TEMPLATE["constants"])  # and every value is valid as it stands


def test_init_twice_keeps_what_is_there(tmp_path):
    (tmp_path / "fits").mkdir()
    (tmp_path / "fits" / "shipped.json").write_text('{"constants": {"exploration": 0.1}}')
    result = CliRunner().invoke(cli, ["init", "--home", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "home": str(tmp_path),
        "created": ["streams", "quarantine", "deadletter", "case-studies"],
        "shipped": "kept",
    }
    assert (tmp_path / "fits" / "shipped.json").read_text() == '{"constants": {"exploration": 0.1}}'


def test_init_refuses_a_folder_linked_outside_the_home(tmp_path):
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    (home / "fits").symlink_to(elsewhere)
    result = CliRunner().invoke(cli, ["init", "--home", str(home)])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: refusing {home / 'fits'}: {home / 'fits'} is a symbolic link to ")
    assert list(elsewhere.iterdir()) == []


def test_the_template_routes_like_no_file_and_names_every_placeholder(tmp_path):
    path = tmp_path / "shipped.json"
    path.write_text(json.dumps(TEMPLATE))
    shipped = load_shipped(path)
    assert shipped.placeholders == [
        "default_config",
        "cheap_config",
        "frontier_config",
        "pinned.reviewer",
        "priors[0]",
        "prices[0]",
    ]
    assert (shipped.static, shipped.priors, shipped.to_constants()) == (
        load_shipped(None).static,
        [],
        load_shipped(None).to_constants(),
    )
    assert shipped.found and not load_shipped(tmp_path / "absent.json").found
    assert placeholder_note(shipped, "fits/shipped.json") == (
        "fits/shipped.json still holds template placeholders at default_config, cheap_config, frontier_config, "
        "pinned.reviewer, priors[0], prices[0]: they are ignored, as if absent; replace each with a config key of "
        "yours "
        '(ratings sql "SELECT DISTINCT config_key FROM attempts") or delete it'
    )


def test_a_filled_in_value_is_kept():
    filled = {**TEMPLATE, "default_config": "codex/openai/gpt-5/medium", "pinned": {"reviewer": "a/-/b/-"}}
    from pipeline.fit.shipped import _without_placeholders

    left: list[str] = []
    out = _without_placeholders(filled, left)
    assert out["default_config"] == "codex/openai/gpt-5/medium" and out["pinned"] == {"reviewer": "a/-/b/-"}
    assert left == ["cheap_config", "frontier_config", "priors[0]", "prices[0]"]
