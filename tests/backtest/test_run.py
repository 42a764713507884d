"""Whole backtests of hand-made tables whose answers are worked out by hand: references, ratios, revealed rows and
costs (each refit is the product's own fit, so the tables are small: two nights, one or two seeds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.backtest.data import BacktestInputError
from pipeline.backtest.run import BacktestOptions, run_backtest
from pipeline.nightly.backtest import SIMULATION_NOTE

HEADER = "task_id,config,score,cost_usd,region,at\n"
CHEAP, STRONG = "import/-/cheap/-", "import/-/strong/-"


def write(path: Path, rows: list[tuple[str, str, float, float | None, str, int]]) -> Path:
    """rows: (task, model, score, cost, region, minute)."""
    lines = [
        f"{t},{m},{s},{'' if c is None else c},{r},2026-01-01T{minute // 60:02d}:{minute % 60:02d}:00Z"
        for t, m, s, c, r, minute in rows
    ]
    path.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def shipped(path: Path, **data: object) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.fixture
def cheap_and_strong(tmp_path: Path) -> Path:
    """8 tasks, easy and hard in turn (e0, h0, e1, h1, ...): cheap (1.0, $1) on easy, (0.2, $1) on hard;
    strong (1.0, $10) on easy, (1.0, $2) on hard. Cheap is best per dollar, strong best on quality."""
    rows = []
    for i in range(4):
        rows += [(f"e{i}", "cheap", 1.0, 1.0, "easy", 2 * i), (f"e{i}", "strong", 1.0, 10.0, "easy", 2 * i)]
        rows += [(f"h{i}", "cheap", 0.2, 1.0, "hard", 2 * i + 1), (f"h{i}", "strong", 1.0, 2.0, "hard", 2 * i + 1)]
    return write(tmp_path / "cheap-strong.csv", rows)


def test_references_and_a_loop_that_never_learns(tmp_path: Path, cheap_and_strong: Path) -> None:
    options = BacktestOptions(
        policies=("learning_governed",),
        starts=("frontier", "cheapest"),
        shipped=shipped(tmp_path / "shipped.json", constants={"exploration": 0.0}),
        night_size=4,
        seeds=1,
    )
    report = run_backtest(tmp_path / "out", table=cheap_and_strong, options=options)
    about = report.about
    assert (about.tasks, about.nights, about.night_size, about.second_half_first_task) == (8, 2, 4, 4)
    # frontier = the highest mean quality (strong 1.0 against cheap 0.6); cheapest = the lowest mean cost (cheap $1
    # against strong $6)
    assert {s: c.config for s, c in about.starts.items()} == {"frontier": STRONG, "cheapest": CHEAP}
    qpd = report.references["quality_per_dollar"]
    whole = qpd.whole
    # region-level tables (quality total / cost total over 4 easy + 4 hard): (cheap, strong) (4 + 4) / (4 + 8) is
    # the best, above (cheap, cheap) 4.8 / 8 = 0.6; the oracle takes the same; the best single is cheap (0.6)
    assert whole.region_best.configs == {"easy": CHEAP, "hard": STRONG}
    assert whole.region_best.value == pytest.approx(8 / 12)
    assert whole.oracle.value == pytest.approx(8 / 12)
    assert (whole.best_single.config, whole.best_single.value) == (CHEAP, pytest.approx(0.6))
    assert whole.starts["frontier"].value == pytest.approx(8 / 48)  # strong everywhere: 8 / (40 + 8)
    assert whole.starts["cheapest"].value == pytest.approx(0.6)
    assert whole.starts["frontier"].mean_cost_usd == pytest.approx(6.0)
    # Exploration 0 from the frontier: night 0 runs strong (no table yet); night 1's table knows strong alone, and
    # cheap, never run, has no evidence to pass the gate: strong everywhere. Value 8 / 48, a quarter of the
    # region best; the second half (e2, h2, e3, h3) the same: (2 + 2) / (20 + 4) over (2 + 2) / (2 + 4).
    run = next(r for r in report.runs if r.start == "frontier")
    assert run.whole.value == pytest.approx(8 / 48)
    assert run.whole.vs_region_best == pytest.approx(0.25)
    assert run.second_half.vs_region_best == pytest.approx(0.25)
    assert (run.whole.mean_quality, run.whole.mean_cost_usd, run.whole.configs_per_task) == (1.0, 6.0, 1.0)
    assert run.whole.p5 == run.whole.p95 == pytest.approx(0.25)  # one seed
    assert run.whole.vs_full_information == pytest.approx(run.whole.value / run.whole.full_information_value)
    assert [n.tasks for n in run.nights] == [4, 4]
    assert run.whole.lift is None  # utility only
    # Cold start: strong on easy is 0.1 of cheap per dollar on both nights (never settles); on hard strong is the
    # best every night (settled from night 0); so never for every region together.
    assert run.cold_start is not None and run.cold_start.regions == {"easy": None, "hard": 0.0}
    assert (run.cold_start.every_region, run.cold_start.never) == (None, {"easy": 1, "hard": 0})
    assert "every region from night never; easy never (1 seed(s) never), hard 0" in (
        tmp_path / "out" / "backtest.txt"
    ).read_text(encoding="utf-8")
    # every output says what it is
    assert report.about.note == SIMULATION_NOTE
    assert SIMULATION_NOTE in (tmp_path / "out" / "backtest.txt").read_text(encoding="utf-8")
    assert "simulation of deployment" in (tmp_path / "out" / "learning-curve.svg").read_text(encoding="utf-8")
    assert not (tmp_path / "out" / "homes").exists()  # scratch homes removed


def test_utility_lambda_and_lift(tmp_path: Path, cheap_and_strong: Path) -> None:
    # lambda = (c_f - c_c) / (q_f - q_c) = (6 - 1) / (1 - 0.6) = 12.5. Region best: easy cheap 12.5 - 1, hard
    # strong 12.5 - 2: mean 11. The cheapest start: (4 * 11.5 + 4 * (2.5 - 1)) / 8 = 6.5. A loop that never leaves
    # cheap (workflow_default runs default_config) has lift (6.5 - 6.5) / (11 - 6.5) = 0.
    options = BacktestOptions(
        policies=("workflow_default",), objectives=("utility",), starts=("cheapest",), night_size=4, seeds=1
    )
    report = run_backtest(tmp_path / "out", table=cheap_and_strong, options=options)
    refs = report.references["utility"]
    assert refs.lambda_ == pytest.approx(12.5)
    assert refs.whole.region_best.value == pytest.approx(11.0)
    assert refs.whole.starts["cheapest"].value == pytest.approx(6.5)
    run = report.runs[0]
    assert run.whole.value == pytest.approx(6.5)
    assert run.whole.lift == pytest.approx(0.0)
    assert run.whole.vs_full_information == pytest.approx(1.0)  # the same choices with full information


def test_ladder_learns_its_second_rung_from_its_own_logs(tmp_path: Path) -> None:
    # 120 tasks, 3 nights of 40, no exploration, utility with lambda 20. cheap ($1) passes where i % 5 < 3 (60%);
    # mid ($2) and strong ($10) pass everything. From the cheapest start (cheap):
    #   night 0: no table, cheap once on every task: quality 0.6, 1 config per task.
    #   night 1: the table knows cheap alone, so its ladder is cheap alone; after cheap fails, the highest-quality
    #            member left (mid and strong are both unknown, the prior row: the first in key order, mid) runs.
    #   the refit reads those logs: mid is seen only after cheap failed (never a first run, never a single), which
    #   is exactly what the ladder (cheap, mid) needs: utility 20 * (0.6 + 0.4 * 1) - (1 + 0.4 * 2) = 18.2 against
    #   cheap's 20 * 0.6 - 1 = 11; the night-0 tasks where cheap failed take mid's mean over its donors.
    #   night 2: the published ladder is (cheap, mid): quality 1, 1.4 configs per task, $1.80 per task.
    rows = []
    for i in range(120):
        ok = float(i % 5 < 3)
        rows += [(f"t{i:03d}", "cheap", ok, 1.0, "r", i), (f"t{i:03d}", "mid", 1.0, 2.0, "r", i)]
        rows.append((f"t{i:03d}", "strong", 1.0, 10.0, "r", i))
    table = write(tmp_path / "ladder.csv", rows)
    options = BacktestOptions(
        policies=("ladder",),
        objectives=("utility",),
        starts=("cheapest",),
        shipped=shipped(tmp_path / "shipped.json", constants={"exploration": 0.0}),
        lambda_=20.0,
        night_size=40,
        seeds=1,
        keep_homes=True,
    )
    report = run_backtest(tmp_path / "out", table=table, options=options)
    nights = report.runs[0].nights
    assert [(n.mean_quality, n.configs_per_task) for n in nights] == [(0.6, 1.0), (1.0, 1.4), (1.0, 1.4)]
    assert nights[2].mean_cost_usd == pytest.approx(1.8)
    home = tmp_path / "out" / "homes" / "loops" / "ladder-utility-cheapest" / "seed-0"
    published = json.loads((home / "fits" / "routing-table.json").read_text(encoding="utf-8"))
    assert published["regions"]["*"]["ladder"]["rungs"] == [CHEAP, "import/-/mid/-"]


def test_several_rows_per_task_and_config(tmp_path: Path) -> None:
    # 4 tasks (nights of 2), cheap and strong with two trials each. trace_governed with cheap_config and
    # frontier_config shipped (--start shipped): cheap first, strong after a failure.
    #   t0, t1 (night 0, no table yet): cheap's first trial passes ($1 each).
    #   t2: cheap trial 1 fails ($1), strong trial 1 fails ($4), every config has failed: strong again, its trial 2
    #       passes ($4): quality 1, cost 9, 3 configs run.
    #   t3: cheap's first trial passes ($1).
    # Whole stream: quality 1, cost (1 + 1 + 9 + 1) / 4 = 3, 1.5 configs per task, per dollar 4 / 12.
    rows = []
    for i, (c, s) in enumerate([((1, 1), (1, 1)), ((1, 1), (1, 1)), ((0, 1), (0, 1)), ((1, 1), (1, 1))]):
        rows += [(f"t{i}", "cheap", c[0], 1.0, "r", 10 * i), (f"t{i}", "cheap", c[1], 1.0, "r", 10 * i + 1)]
        rows += [(f"t{i}", "strong", s[0], 4.0, "r", 10 * i), (f"t{i}", "strong", s[1], 4.0, "r", 10 * i + 1)]
    table = write(tmp_path / "trials.csv", rows)
    options = BacktestOptions(
        policies=("trace_governed",),
        objectives=("quality_per_dollar", "quality"),
        starts=("shipped",),
        shipped=shipped(tmp_path / "shipped.json", cheap_config=CHEAP, frontier_config=STRONG),
        night_size=2,
        seeds=1,
    )
    report = run_backtest(tmp_path / "out", table=table, options=options)
    assert report.about.rows_per_pair == "several"
    assert report.about.starts["shipped"].config == CHEAP  # the static choice: cheap when both are named
    run = next(r for r in report.runs if r.objective == "quality_per_dollar")
    assert (run.whole.mean_quality, run.whole.mean_cost_usd, run.whole.configs_per_task) == (1.0, 3.0, 1.5)
    assert run.whole.value == pytest.approx(4 / 12)
    # references reveal first trials only: cheap is 1, 1, 0, 1 at $1 (per dollar 3 / 4), strong the same at $4
    refs = report.references["quality_per_dollar"].whole
    assert refs.region_best.value == pytest.approx(0.75) and refs.oracle.value == pytest.approx(0.75)
    assert run.whole.vs_region_best == pytest.approx((4 / 12) / 0.75)
    # on quality the rerun's second trial takes the loop above every one-run reference: 1.0 against 0.75
    on_quality = next(r for r in report.runs if r.objective == "quality")
    assert on_quality.whole.vs_region_best == pytest.approx(1 / 0.75)
    assert run.whole.vs_full_information == pytest.approx(1.0)  # fixed roles: the same runs with full information


@pytest.fixture
def one_best(tmp_path: Path) -> Path:
    """8 tasks: best always scores 1 at $1, worse 0 at $2."""
    rows = []
    for i in range(8):
        rows += [(f"t{i}", "best", 1.0, 1.0, "r", i), (f"t{i}", "worse", 0.0, 2.0, "r", i)]
    return write(tmp_path / "one.csv", rows)


def test_one_config_always_best(tmp_path: Path, one_best: Path) -> None:
    # Every reference is best's value 1.0; a loop exploring (the code default 0.3) can only lose.
    options = BacktestOptions(policies=("learning_governed",), starts=("cheapest",), night_size=4, seeds=2)
    report = run_backtest(tmp_path / "out", table=one_best, options=options)
    refs = report.references["quality_per_dollar"].whole
    assert refs.region_best.value == refs.best_single.value == refs.oracle.value == pytest.approx(1.0)
    assert report.about.starts["cheapest"].config == "import/-/best/-"
    whole = report.runs[0].whole
    assert whole.vs_region_best is not None and whole.vs_region_best <= 1.0
    assert whole.p5 is not None and whole.p95 is not None and whole.p5 <= whole.vs_region_best <= whole.p95


def test_utility_without_costs_ranks_by_quality(tmp_path: Path) -> None:
    # No costs: utility has no lambda, and every objective ranks by quality (the refit is on quality). best scores 1
    # and worse 0 on every task, so from the cheapest start (no costs: the lowest mean quality, worse) both
    # objectives learn best on night 1 and run the same loops (the refit's exploration draws are the same).
    rows = []
    for i in range(8):
        rows += [(f"t{i}", "best", 1.0, None, "r", i), (f"t{i}", "worse", 0.0, None, "r", i)]
    table = write(tmp_path / "no-costs.csv", rows)
    options = BacktestOptions(
        policies=("learning_governed",), objectives=("utility", "quality"), starts=("cheapest",), night_size=4, seeds=1
    )
    report = run_backtest(tmp_path / "out", table=table, options=options)
    utility, quality = (next(r for r in report.runs if r.objective == o) for o in ("utility", "quality"))
    assert report.about.starts["cheapest"].config == "import/-/worse/-"
    assert utility.whole == quality.whole
    assert report.references["utility"].lambda_ is None


def test_jobs_give_the_same_bytes(tmp_path: Path, one_best: Path) -> None:
    # One night (no refit: the processes only route), two seeds: spawned workers give the serial run's bytes.
    options = BacktestOptions(starts=("cheapest", "frontier"), night_size=8, seeds=2)
    serial = run_backtest(tmp_path / "serial", table=one_best, options=options)
    parallel = run_backtest(tmp_path / "parallel", table=one_best, options=options.model_copy(update={"jobs": 2}))
    assert (tmp_path / "serial" / "backtest.json").read_bytes() == (
        tmp_path / "parallel" / "backtest.json"
    ).read_bytes()
    assert serial == parallel


def test_out_must_be_empty_or_a_backtests(tmp_path: Path, cheap_and_strong: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(BacktestInputError, match="not a backtest's"):
        run_backtest(out, table=cheap_and_strong, options=BacktestOptions(seeds=1))
    assert (out / "precious.txt").read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"policies": ("no_such_policy",)}, "unknown policy no_such_policy"),
        ({"starts": ("shipped",)}, "--start shipped needs a shipped.json"),
    ],
)
def test_bad_options_are_refused(tmp_path: Path, cheap_and_strong: Path, options: dict, message: str) -> None:
    with pytest.raises(BacktestInputError, match=message):
        run_backtest(tmp_path / "out", table=cheap_and_strong, options=BacktestOptions(seeds=1, **options))


# ratios of the loop to the region's best, night by night -> the night from which it stays within 98%
SETTLED = [
    ([1.0, 1.0, 1.0], 0.0),  # settled from the start
    ([0.5, 0.99, 0.98], 1.0),  # 0.98 is within
    ([0.99, 0.5, 1.0, 1.0], 2.0),  # a late dip moves it
    ([1.0, 0.97], float("inf")),  # the last night below: never
    ([None, 0.5, None, 1.0], 2.0),  # a night without the region's tasks (or nothing to lose) counts as within
    ([], 0.0),
]


@pytest.mark.parametrize("ratios,night", SETTLED)
def test_the_night_a_region_settles(ratios: list, night: float) -> None:
    from pipeline.backtest.run import _settled_night

    assert _settled_night(ratios) == night
