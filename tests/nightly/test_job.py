"""``run_fit`` end to end on the hand-checkable tiny store (tests/fixtures_nightly.py), worked out by hand.

The store: ten tasks T01..T10 of region r, one per day; x costs 0.10 and y 0.20 per attempt.

    day   1    2    3    4    5    6    7  |  8    9    10
    x     1    .5   -    1    0    1    1  |  1    0    1
    y     1    -    1    -    1    1    -  |  1    1    0
    plus a late reviewer rating of y on T02 = 0 on day 9 (after the cutoff)

Split 0.7 of 10 -> 7 learned (T01..T07), 3 held out (T08..T10), cutoff = T08's time (day 8).
Inner split 0.7 of 7 -> floor(4.9) = 4 inner learned (T01..T04), 3 validation (T05..T07).
Shipped: prior 0.5 for selector c/-/x (region *), defaults k = 3, eps = 0.3. Pinned: k = 1, shipped priors,
eps = 0, no recency.

Learned fit (events before day 8; the late rating is not used):
    x: W = 6, S = 1 + .5 + 1 + 0 + 1 + 1 = 4.5; prior p(x) = 0.5 (shipped)
       q(x) = (1 * 0.5 + 4.5) / (1 + 6) = 5/7 = 0.714286; cost 0.1; value 7.142857
    y: W = 4, S = 4; prior = measured mean 4/4 = 1.0; q(y) = (1 + 4)/(1 + 4) = 1.0; cost 0.2; value 5.0
    shipped constants (k = 3): q(x) = (1.5 + 4.5)/9 = 0.666667 -> 6.67 > y (3 + 4)/7 = 1 -> 5: also x
Held-out best per dollar: T08 x (10 vs 5), T09 y (0 vs 5), T10 x (10 vs 0). Greedy x: hits T08, T10 = 2/3.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time

import polars as pl
import pytest
from click.testing import CliRunner
from fixtures_nightly import PINNED, RATED, X, Y, at, config, make_home, tiny_events

from pipeline.cli import cli
from pipeline.errors import Busy
from pipeline.nightly.job import rounded, run_fit
from pipeline.nightly.options import FitOptions
from pipeline.routing.table import load
from pipeline.workspace import Workspace

approx = pytest.approx


def test_split_counts(tiny_fit):
    split = tiny_fit[1].stats.split
    assert (split.learned_tasks, split.held_out_tasks, split.validation_tasks) == (7, 3, 3)
    assert split.eligible_held_out == 3  # each held-out task was done by x and y, with some value > 0
    assert split.cutoff_at == "2026-01-08T00:00:00Z"


def test_learned_prior_posterior_cost_value(tiny_fit):
    members = tiny_fit[1].evaluation.learned_members.filter(pl.col("region") == "r")
    x, y = members.sort("config_key").iter_rows(named=True)
    assert (x["prior"], x["quality"], x["cost_usd"], x["value"], x["weight"]) == approx((0.5, 5 / 7, 0.1, 50 / 7, 6))
    assert (y["prior"], y["quality"], y["cost_usd"], y["value"], y["weight"]) == approx((1.0, 1.0, 0.2, 5.0, 4))


def test_hits_wilson_and_expected_hit_under_exploration(tiny_fit):
    routing = tiny_fit[1].stats.routing
    for side in (routing.shipped, routing.fitted):
        assert (side.hits, side.n) == (2, 3)
        assert side.hit_rate == approx(2 / 3)
        # Wilson 2 of 3: z^2 = 3.841459; denominator 1 + z^2/3 = 2.280486
        # centre (2/3 + z^2/6) / 2.280486 = 1.306910 / 2.280486 = 0.573084
        # half z * sqrt((2/3)(1/3)/3 + z^2/36) / 2.280486 = 1.959964 * 0.425186 / 2.280486 = 0.365424
        assert side.ci95 == approx((0.207660, 0.938508), abs=1e-5)
    # Shipped eps 0.3: T08 hit, the other member y is not best -> 0.7; T09 miss, y is best -> 0.3; T10 -> 0.7
    assert routing.shipped.expected_hit_rate_with_exploration == approx(1.7 / 3)
    # Both choose x everywhere: difference 0 in every resample; 3 < 10 eligible tasks -> no verdict.
    assert routing.difference.value == 0.0 and routing.difference.ci95 == (0.0, 0.0)
    assert routing.recommendation == "insufficient-evidence"
    assert "only 3 eligible held-out task(s)" in routing.reason


def test_validation_scores(tiny_fit):
    # Inner fit (T01..T04, before day 5): x W 3, S 2.5; y W 2, S 2 (measured prior 1.0).
    # k = 1: q(x) = (0.5 + 2.5)/4 = 0.75 -> 7.5 > q(y) = 1 -> 5 -> x.   Validation eligible: T05 (best y), T06
    # (best x); T07 has x only. Hits: T06 only -> 0.5. Shipped k = 3: (1.5 + 2.5)/6 = 0.667 -> 6.67 > 5 -> x: 0.5.
    validation = tiny_fit[1].stats.routing.validation
    assert (validation.shipped, validation.fitted) == (0.5, 0.5)


def test_replay_with_the_fitted_exploration(tiny_fit):
    # eps 0 from the learned fit: T08 x (7.14 > 5) reveals 1 -> S 5.5, W 7, q = (0.5 + 5.5)/8 = 0.75
    # T09 x (7.5 > 5) reveals 0 -> q = 6/9; T10 x (6.67 > 5) reveals 1. Quality 2 over cost 0.3 = 6.666667
    fitted = tiny_fit[1].stats.replay.fitted
    assert (fitted.tasks_routed, fitted.tasks_skipped, fitted.exploration) == (3, 0, 0.0)
    assert fitted.realized_value == approx(20 / 3)
    shipped = tiny_fit[1].stats.replay.shipped
    assert shipped.exploration == 0.3 and shipped.tasks_routed + shipped.tasks_skipped == 3


def test_calibration_mse_mae(tiny_fit):
    # Held-out ratings: x 1, 0, 1 and y 1, 1, 0. Regions predict q(x) = 5/7, q(y) = 1; the plain mean
    # (measured prior) predicts x 0.75, y 1.
    # regions SE: x (2/7)^2 + (5/7)^2 + (2/7)^2 = 33/49, y 0 + 0 + 1 -> (33/49 + 1)/6 = 0.278912
    # plain   SE: x 0.0625 + 0.5625 + 0.0625 = 0.6875, y 1 -> 1.6875/6 = 0.28125
    # regions AE: x 2/7 + 5/7 + 2/7 = 9/7, y 1 -> (9/7 + 1)/6 = 0.380952;  plain AE: (1.25 + 1)/6 = 0.375
    cal = tiny_fit[1].stats.calibration
    assert cal.regions_mse == approx((33 / 49 + 1) / 6) and cal.plain_mean_mse == approx(0.28125)
    assert cal.regions_mae == approx((9 / 7 + 1) / 6) and cal.plain_mean_mae == approx(0.375)
    assert cal.recommendation == "insufficient-evidence" and "fewer than 10 held-out tasks" in cal.reason


def test_baselines(tiny_fit):
    b = tiny_fit[1].stats.baselines
    # best single = highest learned quality = y (1.0): best only on T09 -> 1/3; quality (1 + 1 + 0)/3; cost 0.2
    assert (b.best_single.config, b.best_single.hit_rate, b.best_single.mean_quality, b.best_single.mean_cost_usd) == (
        Y,
        approx(1 / 3),
        approx(2 / 3),
        approx(0.2),
    )
    # cheapest = x: 2/3, quality (1 + 0 + 1)/3, cost 0.1
    assert (b.cheapest.config, b.cheapest.hit_rate, b.cheapest.mean_cost_usd) == (X, approx(2 / 3), approx(0.1))
    # random: half the members are best on every task; quality per task (1, .5, .5); cost 0.15
    assert (b.random.hit_rate, b.random.mean_quality, b.random.mean_cost_usd) == approx((0.5, 2 / 3, 0.15))
    # oracle: x, y, x -> quality 1, cost (0.1 + 0.2 + 0.1)/3
    assert (b.oracle.hit_rate, b.oracle.mean_quality, b.oracle.mean_cost_usd) == approx((1.0, 1.0, 0.4 / 3))
    assert b.fitted.hit_rate == b.shipped.hit_rate == approx(2 / 3)


def test_priors_ratings_constants(tiny_fit):
    stats = tiny_fit[1].stats
    # x's learned ratings: 6, weighted mean 4.5/6 = 0.75, 0.25 away from the shipped 0.5 with n >= 3
    assert [p.model_dump() for p in stats.priors] == [
        {"selector": "c/-/x", "region": "*", "shipped": 0.5, "measured": 0.75, "weight": 6.0, "n": 6, "disagrees": True}
    ]
    assert (stats.ratings.total, stats.ratings.by_rater_kind, stats.ratings.retracted) == (
        17,
        {"gate": 16, "reviewer": 1},
        0,
    )
    assert set(stats.constants.selected_on.values()) == {"pinned"}
    assert stats.constants.fitted.prior_weight == 1.0 and stats.constants.shipped.prior_weight == 3.0
    # Every searched constant is pinned: the published table uses the pinned values (the operator's choice)
    assert stats.constants.published == "fitted" and stats.cost_known and stats.objective == "quality_per_dollar"
    assert set(stats.constants.provenance.values()) == {"pinned"} and stats.constants.values.prior_weight == 1.0


def test_published_table_is_refit_on_all_tasks_with_the_allowed_constants(tiny_fit):
    home, result = tiny_fit
    table = load(home / "fits" / "routing-table.json")
    assert table == result.table and table.constants_source == "fitted" and table.constants.prior_weight == 1.0
    assert table.constants_provenance == dict.fromkeys(
        ("exploration", "half_life_days", "prior_source", "prior_weight"), "pinned"
    )
    # All tasks, the late rating included, k = 1 (pinned): x W 9, S 6.5 -> (0.5 + 6.5)/10 = 0.7
    # y W 8, S 1+1+1+1+1+1+0 + 0 (late) = 6, measured prior 6/8 -> (0.75 + 6)/9 = 0.75
    region = table.regions["r"]
    assert [(m.config, m.quality) for m in region.members] == [(X, approx(0.7)), (Y, approx(0.75))]
    assert region.choice == X
    assert table.evaluation["recommendation"] == "insufficient-evidence"
    assert table.fitted_at == "2026-01-10T02:00:00Z" and table.source.version == 1
    assert (home / "fits" / "history" / f"{table.version}.json").read_bytes() == (
        home / "fits" / "routing-table.json"
    ).read_bytes()
    assert (home / "fits" / "routing-table.schema.json").exists()
    saved = json.loads((home / "case-studies" / "routing-by-rating" / "stats.json").read_text())
    assert saved == result.stats.to_json_dict()


def test_same_store_same_bytes(tiny_fit):
    home, _ = tiny_fit
    table = (home / "fits" / "routing-table.json").read_bytes()
    stats = (home / "case-studies" / "routing-by-rating" / "stats.json").read_bytes()
    run_fit(home, PINNED)
    assert (home / "fits" / "routing-table.json").read_bytes() == table
    assert (home / "case-studies" / "routing-by-rating" / "stats.json").read_bytes() == stats


def _learned(result):
    return result.evaluation.learned_members, result.stats.constants, result.stats.routing.validation


def test_held_out_changes_change_only_held_out_figures(fit_home):
    searched = FitOptions()  # nothing pinned: the search itself must not see held-out tasks
    _, base = fit_home("leak-base", tiny_events(), searched)
    changed = {**RATED, 9: {"x": 1.0, "y": 0.0}, 10: {"x": 1.0, "y": 0.0}}  # x now best on all three
    _, other = fit_home("leak-changed", tiny_events(changed), searched)
    assert _learned(base)[0].equals(_learned(other)[0])
    assert _learned(base)[1:] == _learned(other)[1:]
    assert base.stats.grid != other.stats.grid  # held-out diagnostics moved ...
    assert [r.validation for r in base.stats.grid] == [r.validation for r in other.stats.grid]  # ... validation not
    assert base.stats.routing.fitted != other.stats.routing.fitted


def test_a_rating_after_the_cutoff_on_a_learned_task_is_not_used(fit_home, tiny_fit):
    _, without = fit_home("no-late", tiny_events(late=False))
    assert _learned(without)[0].equals(_learned(tiny_fit[1])[0])
    assert without.stats.routing == tiny_fit[1].stats.routing
    assert without.stats.calibration == tiny_fit[1].stats.calibration


def test_search_records_what_it_chose_on_validation(fit_home):
    _, result = fit_home("leak-base", tiny_events(), FitOptions())
    c = result.stats.constants
    assert set(c.selected_on) == {"prior_source", "prior_weight", "exploration", "half_life_days"}
    assert set(c.selected_on.values()) == {"validation"}
    kinds = {r.kind for r in result.stats.grid}
    assert kinds == {"greedy_hit_rate", "replay", "expected_hit_rate"}
    # 2 sources x 9 weights x 4 half-lives, 2 modes x 4 replays (the grid from the floor 0.05: 0.05, 0.1, 0.2,
    # 0.3), 9 weights x 4 explorations for the heat map
    assert [r.kind for r in result.stats.grid].count("greedy_hit_rate") == 72
    assert len(result.stats.grid) == 72 + 2 * 4 + 36
    assert {r.exploration_mode for r in result.stats.grid if r.kind == "replay"} == {"epsilon", "thompson"}
    assert sorted(r.exploration for r in result.stats.grid if r.kind == "replay") == sorted([0.05, 0.1, 0.2, 0.3] * 2)


def test_no_costs_degrade_to_quality(fit_home):
    events = [e for e in tiny_events() if e["type"] != "task.attempted"]
    _, result = fit_home("no-cost", events)
    stats = result.stats
    assert stats.cost_known is False and stats.objective == "quality"
    assert "ranking used quality alone" in stats.notes[0]
    assert stats.baselines.oracle.mean_cost_usd is None and result.table.objective == "quality"
    # by quality the held-out best sets are T08 {x, y}, T09 {y}, T10 {x}
    assert stats.baselines.oracle.mean_quality == 1.0


def test_second_fit_exits_or_waits_while_one_holds_the_lock(tiny_fit):
    home, _ = tiny_fit
    fd = os.open(Workspace.of(home).fit_lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(Busy, match=r"another fit is running .* --wait"):
            run_fit(home, PINNED.model_copy(update={"no_compact": True}))
        result = CliRunner().invoke(cli, ["fit", "--home", str(home), "--no-compact"])
        assert result.exit_code == 3 and "another fit is running" in result.output  # busy: neither bad nor broken
        threading.Timer(0.3, lambda: os.close(fd)).start()
        started = time.monotonic()
        run_fit(home, PINNED.model_copy(update={"no_compact": True, "wait": True}))
        assert time.monotonic() - started >= 0.25
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def test_cli_summary_and_json(tiny_fit):
    home, result = tiny_fit
    args = [
        "fit",
        "--home",
        str(home),
        "--prior-source",
        "shipped",
        "--prior-weight",
        "1",
        "--exploration",
        "0",
        "--half-life-days",
        "inf",
    ]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert f"published routing table {result.table.version} (constants: fitted" in out.output
    assert "held-out hit rate: shipped 0.6667 [0.2077, 0.9385]" in out.output
    out = CliRunner().invoke(cli, [*args, "--json"])
    printed = json.loads(out.output)
    assert printed["source"].pop("command") == (
        f"fit-routing --home {home} --case-study routing-by-rating --prior-source shipped --prior-weight 1 "
        "--exploration 0 --half-life-days inf"
    )
    expected = result.stats.to_json_dict()
    del expected["source"]["command"]
    assert printed == expected
    page = home / "case-studies" / "routing-by-rating"
    assert "fit-routing --home" in (page / "index.html").read_text() and (page / "README.md").exists()
    bad = CliRunner().invoke(cli, ["fit", "--home", str(home), "--half-life-days", "soon"])
    assert bad.exit_code == 2 and "not a number of days or 'inf'" in bad.output


def test_too_few_tasks(tmp_path):
    home = make_home(tmp_path / "one", tiny_events({1: {"x": 1.0}}, late=False))
    result = CliRunner().invoke(cli, ["fit", "--home", str(home), "--quiet"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output == (
        "error: 1 task(s): the learned part is empty (floor(1 x 0.7) = 0 tasks); "
        "a held-out evaluation needs at least 2 tasks\n"
    )


def test_a_learned_part_without_ratings_is_named_with_its_numbers(tmp_path):
    # Ten tasks, one a day; only the last three (the held-out ones) are rated.
    events = tiny_events({d: ({"x": 1.0, "y": 0.0} if d > 7 else {}) for d in range(1, 11)}, late=False)
    home = make_home(tmp_path / "late", events)
    result = CliRunner().invoke(cli, ["fit", "--home", str(home), "--quiet"])
    assert result.exit_code == 2
    assert result.output == (
        "error: the learned part (7 of 10 tasks, events at or before 2026-01-08T00:00:00Z) has no rating with "
        "weight > 0 (the store has 6, all on held-out tasks or later): nothing to fit; append ratings of the "
        "earlier tasks\n"
    )


def _one_batch(tasks: int, configs: int, regions: int, moment: str) -> str:
    """NDJSON of ``tasks`` tasks in ``regions`` regions, each attempted and rated by ``configs`` configs, every
    event at ``moment`` (one ``ratings append`` from stdin with one time, as a batch import gives)."""
    lines = []
    for i in range(tasks):
        task = f"B{i:02d}"
        lines.append({"type": "task.opened", "task": task, "region": f"r{i % regions}", "at": moment})
        for j in range(configs):
            cfg = config(f"m{j}")
            lines.append(
                {"type": "task.attempted", "task": task, "config": cfg, "status": "success",
                 "cost_usd": 0.1 * (j + 1), "at": moment}
            )  # fmt: skip
            lines.append(
                {"type": "task.rated", "task": task, "config": cfg, "rater": {"kind": "gate", "name": "pytest"},
                 "score": float((i + j) % 2), "at": moment}
            )  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_events_that_tie_with_the_cutoff_are_fitted(tmp_path):
    # 30 tasks, 2 configs, 3 regions, all at one time: the split orders ties by task id (21 learned, B00..B20)
    # and every learned event ties with the cutoff (B21's time), so it is fitted (at or before the cutoff).
    home = tmp_path / "batch"
    home.mkdir()  # append makes a home of an empty folder it is given
    runner = CliRunner()
    moment = "2026-03-01T00:00:00Z"
    appended = runner.invoke(cli, ["append", "--home", str(home)], input=_one_batch(30, 2, 3, moment))
    assert appended.exit_code == 0, appended.output
    result = runner.invoke(cli, ["fit", "--home", str(home), "--quiet", "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["split"]["learned_tasks"] == 21 and stats["split"]["held_out_tasks"] == 9
    assert stats["split"]["cutoff_at"] == moment and stats["split"]["validation_tasks"] == 7
    table = load(home / "fits" / "routing-table.json")
    assert sorted(table.regions) == ["*", "r0", "r1", "r2"]
    # The learned fit saw every learned rating: 21 tasks x 2 configs, weight 1 each
    learned = run_fit(home, FitOptions(no_compact=True)).evaluation.learned_members
    assert learned.filter(pl.col("region") == "*")["weight"].sum() == 42
    routed = runner.invoke(cli, ["route", "--home", str(home), "--region", "r0", "--json"])
    assert routed.exit_code == 0 and json.loads(routed.output)["config"] in ("c/-/m0/-", "c/-/m1/-")


def test_rounding_removes_non_finite_numbers():
    assert rounded({"a": float("nan"), "b": [float("inf"), 0.1234567891234], "c": (1.0, -0.0)}) == {
        "a": None,
        "b": [None, 0.123456789],
        "c": [1.0, 0.0],
    }


def test_a_pinned_table_stays_in_place_and_the_fit_goes_to_history(tmp_path):
    from pipeline.commands.pin import pin

    home = make_home(tmp_path / "pinned", tiny_events())
    first = run_fit(home, PINNED)
    pin(home, first.table.version)
    live = (home / "fits" / "routing-table.json").read_bytes()
    from pipeline.streams.log import append

    append(
        home,
        [
            {
                "type": "task.rated",
                "task": "T10",
                "config": {"cli": "c", "route": None, "model": "y", "effort": None},
                "rater": {"kind": "human", "name": "lead"},
                "score": 1.0,
                "at": "2026-01-10T06:00:00Z",
            }
        ],
    )
    second = run_fit(home, PINNED)
    assert second.table.version != first.table.version
    assert (home / "fits" / "routing-table.json").read_bytes() == live
    assert (home / "fits" / "history" / f"{second.table.version}.json").exists()
    assert "pinned to" in second.stats.notes[-1]


def test_utility_searches_lambda_on_its_grid(fit_home):
    from pipeline.evaluate.search import lambda_grid

    options = PINNED.model_copy(update={"objective": "utility"})
    _, result = fit_home("utility", tiny_events(), options)
    stats = result.stats
    # learned task values: costs 6 x 0.1 (x) + 4 x 0.2 (y) -> mean 0.14; values 4.5 + 4 -> mean 0.85
    scale = 0.14 / 0.85
    assert stats.constants.shipped.lambda_ == pytest.approx(scale)  # shipped.json has none: 1x the scale
    assert stats.constants.selected_on["lambda"] == "validation"
    assert stats.constants.selected_on["prior_weight"] == "pinned"
    greedy = [r for r in stats.grid if r.kind == "greedy_hit_rate"]
    assert len(greedy) == 13
    assert sorted({r.lambda_ for r in greedy}) == pytest.approx(lambda_grid(scale))
    assert stats.constants.fitted.lambda_ in {r.lambda_ for r in greedy}
    assert stats.objective == "utility" and result.table.constants.lambda_ is not None


def test_every_policy_on_held_out_from_a_learned_only_table(tiny_fit):
    """Published = shipped constants (k = 3), learned tasks only: x (6.67/USD) beats y (5/USD) in r.

    Held out: T08 x 1 y 1 (best x), T09 x 0 y 1 (best y), T10 x 1 y 0 (best x).
    quality_per_dollar and learning_governed route x: hits T08, T10 = 2/3, quality 2/3, cost 0.10.
    frontier_only routes y (the frontier config: the dearer one): hit T09 only, quality 2/3, cost 0.20.
    trace_governed: x first, y after x fails (T09): all three hit, quality 1, cost (0.1 + 0.3 + 0.1) / 3,
    configs run 4/3.
    """
    _, result = tiny_fit
    section = result.stats.policies
    assert "learned tasks only" in section.protocol
    p = {name: row.model_dump() for name, row in section.policies.items()}
    from pipeline.routing.policies import BUILTIN

    assert list(p) == list(BUILTIN) and all(row["n"] == 3 for row in p.values())
    for name in ("quality_per_dollar", "learning_governed"):
        assert p[name] == {
            "hit_rate": approx(2 / 3),
            "hits": 2,
            "n": 3,
            "mean_quality": approx(2 / 3),
            "mean_cost_usd": approx(0.1),
            "mean_configs_run": 1.0,
        }
    assert (p["frontier_only"]["hits"], p["frontier_only"]["mean_cost_usd"]) == (1, approx(0.2))
    assert p["trace_governed"] == {
        "hit_rate": 1.0,
        "hits": 3,
        "n": 3,
        "mean_quality": 1.0,
        "mean_cost_usd": approx(0.5 / 3),
        "mean_configs_run": approx(4 / 3),
    }


def test_source_command_and_the_table_names_its_case_study(tiny_fit):
    _home, result = tiny_fit
    assert result.stats.source.command == (
        "fit-routing --case-study routing-by-rating --prior-source shipped "
        "--prior-weight 1 --exploration 0 --half-life-days inf"
    )
    assert result.table.evaluation["case_study"] == "routing-by-rating"
    assert result.table.evaluation["stats"] == "case-studies/routing-by-rating/stats.json"


def test_command_line_spells_every_changed_option():
    options = FitOptions(
        seed=3,
        case_study="jan 26",
        prm=False,
        writeback=False,
        lambda_=0.5,
        since="2026-01-01T00:00:00+00:00",
        half_life_days=float("inf"),
        no_compact=True,
    )
    assert options.command_line("my home") == (
        "fit-routing --home 'my home' --case-study 'jan 26' --seed 3 --lambda 0.5 --half-life-days inf "
        "--since 2026-01-01T00:00:00+00:00 --no-prm --no-writeback --no-compact"
    )
    assert FitOptions().command_line() == "fit-routing --case-study routing-by-rating"
    assert FitOptions().writeback is True


def test_prm_fill_ins_are_never_held_out_targets(fit_home):
    """A config z that only has traced attempts gets PRM fill-ins (score 0.40 + 0.15 + 0.10 = 0.65 for a
    success with tool calls and files written; cost 0.001, so it would be best per dollar on every task it did).
    docs/design.md, PRM: a fill-in is never a held-out target, so z is in no best set and no baseline is scored on it:
    the held-out figures equal those of the store without z.
    """
    traced = [
        {
            "type": "task.attempted",
            "task": f"T{day:02d}",
            "config": config("z"),
            "status": "success",
            "cost_usd": 0.001,
            "tool_calls": 3,
            "files_written": 1,
            "at": at(day, 1),
            "id": f"trace-{day}",
        }
        for day in RATED
    ]
    _, plain = fit_home("prm-plain", tiny_events())
    _, with_z = fit_home("prm-traced", tiny_events() + traced)
    assert with_z.stats.ratings.by_rater_kind == plain.stats.ratings.by_rater_kind  # fill-ins are not ratings
    assert with_z.stats.split.eligible_held_out == plain.stats.split.eligible_held_out == 3
    assert with_z.stats.baselines.oracle.mean_quality == plain.stats.baselines.oracle.mean_quality
    assert with_z.stats.baselines.oracle.config == plain.stats.baselines.oracle.config


def test_utility_without_costs_degrades_to_quality(fit_home):
    """docs/design.md, Cost: with no costs at all the objective degrades to quality, also when utility was asked for."""
    events = [e for e in tiny_events() if e["type"] != "task.attempted"]
    _, result = fit_home(
        "no-cost-utility",
        events,
        FitOptions(objective="utility", prior_source="shipped", prior_weight=1, exploration=0.0, half_life_days="inf"),
    )
    assert result.stats.cost_known is False and result.stats.objective == "quality"
    assert result.table.objective == "quality" and result.table.constants.lambda_ is None


def test_two_homes_with_the_same_streams_publish_the_same_bytes(fit_home):
    """Compaction names Parquet files uniquely per run, so two homes hold different store files; the table's
    ``source.sha256`` names the stream bytes read, so both publish byte-identical tables and stats."""
    a, _ = fit_home("twin-a", tiny_events())
    b, _ = fit_home("twin-b", tiny_events())
    assert sorted(p.name for p in (a / "store").rglob("*.parquet")) != sorted(
        p.name for p in (b / "store").rglob("*.parquet")
    )
    for rel in ("fits/routing-table.json", "case-studies/routing-by-rating/stats.json"):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_a_retraction_of_an_id_the_store_does_not_hold_is_said(fit_home):
    """Issue 26, item 7: it was accepted without a word; it retracts nothing, and the stats' notes say so."""
    retract = {"type": "rating.retracted", "rating": "rate-T03-q", "reason": "typo", "at": at(3, 5), "id": "rt"}
    _, result = fit_home("unknown-retraction", [*tiny_events(), retract])
    assert (
        "1 retraction(s) name an id no rating or rejection holds, and retract nothing: rate-T03-q" in result.stats.notes
    )
    assert result.stats.ratings.retracted == 0
