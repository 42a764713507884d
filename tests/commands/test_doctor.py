"""``ratings doctor``: each [LIVE] check on a hand-built home, OPEN when stale, pinned is not stale."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from fixtures_routing import A, build_table, member

from pipeline.cli import cli
from pipeline.commands.doctor import doctor
from pipeline.compact.run import compact
from pipeline.routing.table import Source, publish
from pipeline.streams.log import append
from tests.fixtures_store import table_version

CONFIG = {"cli": "claude-code", "route": "anthropic", "model": "opus", "effort": "high"}


def events(first: int, count: int) -> list[dict]:
    out = []
    for i in range(first, first + count):
        out.append(
            {
                "id": f"O-{i}",
                "type": "task.opened",
                "at": "2026-01-01T09:00:00Z",
                "task": f"T-{i}",
                "region": "implement",
            }
        )
        out.append(
            {
                "id": f"R-{i}",
                "type": "task.rated",
                "at": "2026-01-01T10:00:00Z",
                "task": f"T-{i}",
                "config": CONFIG,
                "rater": {"kind": "gate", "name": "pytest"},
                "score": 1.0,
            }
        )
    return out


def publish_fitted(home, *, history: bool = False):
    """A table that claims to be fitted from the newest table version (what fit-routing would publish)."""
    table = build_table({"implement": [member(A, 0.9, 0.1)], "*": [member(A, 0.9, 0.1)]})
    table = table.model_copy(update={"source": Source(version=table_version(home))})
    published = publish(table, home / "fits" / "routing-table.json")
    if history:
        (home / "fits" / "history").mkdir(parents=True, exist_ok=True)
        shutil.copy(home / "fits" / "routing-table.json", home / "fits" / "history" / f"{published.version}.json")
    return published


@pytest.fixture
def fitted_home(home):
    append(home, events(1, 3))
    compact(home)
    publish_fitted(home, history=True)
    return home


def live(report, name):
    return next(c for c in report.checks if c.kind == "LIVE" and c.name == name)


def test_live_checks_pass_on_a_freshly_fitted_home(fitted_home):
    report = doctor(fitted_home)
    for name in (
        "streams parse",
        "store views exist",
        "ratings has rows",
        "routing table exists",
        "routing table loads",
        "routing table matches its schema",
        "routing table is fresh",
    ):
        assert live(report, name).status == "ok", live(report, name)
    assert report.stale_events == 0


def test_stale_table_opens_the_loop_with_the_number_of_events(fitted_home):
    append(fitted_home, events(10, 2))  # 4 events compacted into a new table version
    compact(fitted_home)
    append(fitted_home, events(20, 1))  # 2 more not compacted yet
    report = doctor(fitted_home)
    fresh = live(report, "routing table is fresh")
    assert fresh.status == "fail"
    assert fresh.detail.startswith("stale by 6 event(s): fitted from table version 1, newest is 2, 2 line(s) not yet")
    assert not report.closed and any("stale by 6" in r for r in report.reasons)
    result = CliRunner().invoke(cli, ["doctor", "--home", str(fitted_home)])
    assert result.exit_code == 1
    assert "LOOP: OPEN" in result.output and "[LIVE] fail   routing table is fresh: stale by 6" in result.output


def test_pinned_table_is_reported_pinned_not_stale(fitted_home):
    old = json.loads((fitted_home / "fits" / "routing-table.json").read_text())["version"]
    append(fitted_home, events(10, 2))
    compact(fitted_home)
    result = CliRunner().invoke(cli, ["pin", "--home", str(fitted_home), old])
    assert result.exit_code == 0, result.output
    fresh = live(doctor(fitted_home), "routing table is fresh")
    assert fresh.status == "pinned" and fresh.ok
    assert fresh.detail.startswith(f"pinned to {old} (history/{old}.json)") and "4 event(s) newer" in fresh.detail


def test_missing_table_and_empty_store_open_the_loop(home):
    report = doctor(home)
    assert live(report, "ratings has rows").status == "fail"
    assert live(report, "routing table exists").detail.endswith("is missing; run `fit-routing`")
    assert not report.closed


def test_invalid_uncompacted_line_and_edited_table_fail(fitted_home):
    with open(fitted_home / "streams" / "ratings.jsonl", "ab") as handle:
        handle.write(b'{"type": "task.rated", "task": "T-1"}\n')
    path = fitted_home / "fits" / "routing-table.json"
    data = json.loads(path.read_text())
    data["regions"]["*"]["members"][0]["quality"] = 0.1
    path.write_text(json.dumps(data))
    report = doctor(fitted_home)
    assert live(report, "streams parse").detail.startswith("1 invalid line(s) not yet compacted, first:")
    assert "the file was edited" in live(report, "routing table matches its schema").detail


def test_code_checks_name_the_defaults(home):
    names = {c.name: c for c in doctor(home).checks if c.kind == "CODE"}
    assert names["default policy is learning_governed"].status == "ok"
    assert names["PRM scoring on by default"].status == "ok"
    assert names["decision writeback on by default"].detail == "FitOptions().writeback = True"


def test_code_checks_fail_when_a_default_is_off(home, monkeypatch):
    from pipeline.nightly import options

    class WritebackOff(options.FitOptions):
        writeback: bool = False

    monkeypatch.setattr(options, "FitOptions", WritebackOff)
    report = doctor(home)
    assert not report.closed
    assert "[CODE] decision writeback on by default: FitOptions().writeback = False" in report.reasons


def test_doctor_is_open_on_a_stale_home_and_closed_after_fit_routing(fitted_sim_home, tmp_path):
    from fixtures_routing import PINNED_FIT

    from pipeline.nightly.job import run_fit
    from pipeline.nightly.options import FitOptions

    home = tmp_path / "team"
    shutil.copytree(fitted_sim_home, home)
    assert doctor(home).closed
    append(home, events(1, 2))  # new evidence after the fit: stale by 4 events
    result = CliRunner().invoke(cli, ["doctor", "--home", str(home)])
    assert result.exit_code == 1 and "LOOP: OPEN" in result.output and "stale by 4 event(s)" in result.output
    run_fit(home, FitOptions(**PINNED_FIT))
    result = CliRunner().invoke(cli, ["doctor", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "LOOP: CLOSED"
    assert "[CODE] ok     decision writeback on by default" in result.output


# what the store holds -> the warning doctor gives (a warning leaves the loop closed)
RETRACT = {"type": "rating.retracted", "rating": "R-nope", "reason": "x"}
WARNINGS = [
    ("shipped configs seen in the store", {"cheap_config": "no/such/config/x"}, [], "cheap_config no/such/config/x"),
    ("retractions name stored ratings", None, [RETRACT], "R-nope"),
]


@pytest.mark.parametrize("check,shipped,extra,named", WARNINGS, ids=[w[0] for w in WARNINGS])
def test_doctor_warns_of_what_is_allowed_but_likely_a_mistake(fitted_home, check, shipped, extra, named):
    assert live(doctor(fitted_home), check).status == "ok"
    if shipped is not None:
        (fitted_home / "fits" / "shipped.json").write_text(json.dumps(shipped))
    if extra:
        append(fitted_home, [{**e, "at": "2026-01-01T11:00:00Z"} for e in extra])
        compact(fitted_home)
    found = live(doctor(fitted_home), check)
    assert found.status == "warn" and named in found.detail and found.ok  # warned, not a reason to open the loop


def test_doctor_warns_of_an_event_stored_with_a_time_in_the_future(fitted_home):
    append(fitted_home, [{"type": "task.opened", "task": "T-far", "at": "9999-12-31T23:59:59Z"}], future=None)
    compact(fitted_home, future=None)  # stored on purpose (--allow-future at append and compact)
    found = live(doctor(fitted_home), "no event dated in the future")
    assert found.status == "warn" and "1 stored event(s) dated more than a day after now" in found.detail
    assert "9999-12-31T23:59:59Z" in found.detail


def test_a_broken_shipped_json_opens_the_loop(fitted_home):
    (fitted_home / "fits" / "shipped.json").write_text('{"constants": {"exploration": "0.3"}}')
    report = doctor(fitted_home)
    assert not report.closed and any(
        "constants.exploration: Input should be a valid number" in r for r in report.reasons
    )
