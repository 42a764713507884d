"""The simulator: deterministic, valid, honest about its truth, and exact about the damage it injects."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.errors import InvalidEvent, PipelineError
from pipeline.simulate import Scenario, load_truth, preset, simulate
from pipeline.simulate.corrupt import N_INVALID_VARIANTS, conflicting, invalid, torn
from pipeline.simulate.policy import believed_priors
from pipeline.simulate.presets import BACKLOG, CODEX, KIMI, Prior
from pipeline.simulate.truth import best_per_region, mean_cost, quality_tables, rated_quality
from pipeline.streams.events import config_key, parse_line, to_json_line

REPO = Path(__file__).resolve().parents[1]
DEFAULT_FILES = ["streams/tasks.jsonl", "streams/ratings.jsonl", "fits/shipped.json", "fits/truth.json"]


def _files(home: Path) -> dict[str, bytes]:
    return {name: (home / "streams" / f"{name}.jsonl").read_bytes() for name in ("tasks", "ratings")} | {
        "truth": (home / "truth.json").read_bytes(),
        "shipped": (home / "fits" / "shipped.json").read_bytes(),
    }


def _lines(home: Path, stream: str) -> list[bytes]:
    return (home / "streams" / f"{stream}.jsonl").read_bytes().splitlines(keepends=True)


# --------------------------------------------------------------------------- determinism
def test_same_seed_same_bytes_and_another_seed_other_data(tmp_path: Path) -> None:
    scenario = preset("backlog", 300)
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        simulate(tmp_path / name, scenario, seed=seed)
    a, b, c = (_files(tmp_path / name) for name in "abc")
    assert a == b
    for name in ("tasks", "ratings", "truth"):
        assert a[name] != c[name]
    # Not only the ids differ: the outcomes and the routing do.
    ta, tc = json.loads(a["truth"]), json.loads(c["truth"])
    assert ta["assignments"] != tc["assignments"]


def test_chunking_and_corruption_keep_the_clean_lines(tmp_path: Path) -> None:
    """Chunked generation is deterministic, and the damage never changes the valid lines around it."""
    scenario = preset("backlog", 1200)
    simulate(tmp_path / "one", scenario, seed=2, chunk_tasks=500)
    simulate(tmp_path / "two", scenario, seed=2, chunk_tasks=500)
    assert _files(tmp_path / "one") == _files(tmp_path / "two")
    result = simulate(tmp_path / "bad", scenario, seed=2, corrupt=0.02, chunk_tasks=500)
    for stream in ("tasks", "ratings"):
        clean = _lines(tmp_path / "one", stream)
        damaged = _lines(tmp_path / "bad", stream)
        seen, kept = set(), []
        for line in damaged:
            try:
                parse_line(line)
            except InvalidEvent:
                continue
            if line.endswith(b"\n") and line not in seen:
                kept.append(line)
                seen.add(line)
        clean_set = set(clean)
        conflicts = {line for line in kept if line not in clean_set}
        assert len(conflicts) == result.corruption_by_stream[stream]["conflicts"]
        assert [line for line in kept if line not in conflicts] == clean


# --------------------------------------------------------------------------- the embedded default data
def test_default_data_is_in_sync_with_the_generator(tmp_path: Path) -> None:
    """`make default-data` (ratings simulate --preset backlog --seed 7 --out . --truth fits/truth.json --force)."""
    result = CliRunner().invoke(
        cli,
        [
            "simulate",
            "--preset",
            "backlog",
            "--seed",
            "7",
            "--out",
            str(tmp_path),
            "--truth",
            "fits/truth.json",
            "--force",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    for name in DEFAULT_FILES:
        assert (tmp_path / name).read_bytes() == (REPO / name).read_bytes(), f"{name} is stale: run `make default-data`"
    assert (
        "simulate --preset backlog --seed 7 --out . --truth fits/truth.json --force" in (REPO / "Makefile").read_text()
    )


def test_default_backlog_every_line_is_a_canonical_v1_event() -> None:
    types: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    times = []
    for stream in ("tasks", "ratings"):
        for no, line in enumerate(_lines(REPO, stream), start=1):
            event = parse_line(line, line=no, source=stream)  # raises on any invalid line
            assert to_json_line(event) == line  # the fast writer writes exactly what the models write
            types[event.type] += 1
            times.append(event.at)
            if event.type == "task.rated":
                kinds[event.rater.kind] += 1
    assert types["task.opened"] == 1000
    assert 3200 <= types["task.rated"] <= 3600
    assert 3.5 <= kinds["gate"] / kinds["reviewer"] <= 4.5  # about four gate ratings per reviewer rating
    assert kinds["human"] > 0 and types["task.rejected"] > 0 and types["rating.retracted"] > 0
    assert types["task.closed"] == 1000
    assert types["route.decided"] == types["task.attempted"] > 1000  # a decision per attempt: lanes, escalations
    assert "2026-06-01" <= min(times) < max(times) < "2026-10-15"  # a few months, a synthetic timeline


def test_default_shipped_file() -> None:
    shipped = json.loads((REPO / "fits" / "shipped.json").read_text())
    assert shipped["constants"] == {
        "prior_weight": 3,
        "exploration": 0.3,
        "min_samples": 3,
        "objective": "quality_per_dollar",
    }
    keys = set(BACKLOG.config_keys)
    assert {shipped["default_config"], shipped["cheap_config"], shipped["frontier_config"]} <= keys
    assert shipped["pinned"] and set(shipped["pinned"].values()) <= keys
    truth = json.loads((REPO / "fits" / "truth.json").read_text())
    # Wrong on purpose: Codex is believed strong at abstract work; it is the weakest per dollar but two.
    believed = believed_priors([CODEX], ["abstract"], [Prior(**p) for p in shipped["priors"]])[CODEX, "abstract"]
    assert believed - truth["quality"]["before"][CODEX]["abstract"] > 0.4
    assert truth["policy"]["greedy"]["abstract"] == CODEX != truth["best"]["before"]["abstract"]


def test_scale_preset_lines_parse(tmp_path: Path) -> None:
    """The scale preset's writer, sampled across chunk boundaries, writes canonical v1 lines."""
    result = simulate(tmp_path, preset("scale", 6000), seed=3, chunk_tasks=2000)
    # The preset's default size gives a million ratings or more.
    assert result.events["task.rated"] / 6000 * preset("scale").tasks > 1_000_000
    rng = np.random.default_rng(0)
    for stream in ("tasks", "ratings"):
        lines = _lines(tmp_path, stream)
        assert len(lines) == result.lines[stream]
        for i in rng.choice(len(lines), size=1500, replace=False):
            assert to_json_line(parse_line(lines[i])) == lines[i]
    assert sum(result.events.values()) == sum(result.lines.values())


# --------------------------------------------------------------------------- the truth is honest
@pytest.fixture(scope="module")
def big_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20,000 tasks (about 70,000 ratings) of the backlog scenario, shared by the truth tests."""
    home = tmp_path_factory.mktemp("big")
    simulate(home, preset("backlog", 20000), seed=11)
    return home


def _gate_estimates(home: Path) -> tuple[dict, float]:
    """Gate scores per (config, region, drift period), grouped by the truth's per-task assignments."""
    truth = load_truth(home / "truth.json")
    index = {truth["task_id_format"].format(i + 1): i for i in range(truth["tasks"])}
    first, drifting = truth["drift"]["first_task"], truth["drift"]["config"]
    sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0])
    escalations = truth["dispatcher"]["escalation"] > 0  # an escalation runs only on tasks that failed: not a draw
    for line in _lines(home, "ratings"):
        if b'"kind":"gate"' not in line or (escalations and b".a3." in line):
            continue
        event = json.loads(line)
        task = index[event["task"]]
        region = truth["regions"][truth["assignments"][task][0]]
        key = config_key(**event["config"])
        period = "after" if key == drifting and task >= first else "before"
        cell = sums[(key, region, period)]
        cell[0] += event["score"]
        cell[1] += 1
    g = truth["gate_noise"]
    # A gate flips the outcome with probability g: E[score] = g + (1 - 2g) Q, so Q = (mean - g) / (1 - 2g).
    errors = [
        ((s / n - g) / (1 - 2 * g)) - truth["quality"][period][key][region]
        for (key, region, period), (s, n) in sums.items()
    ]
    return sums, math.sqrt(sum(e * e for e in errors) / len(errors))


def test_empirical_quality_approaches_the_truth_as_n_grows(tmp_path: Path, big_home: Path) -> None:
    rmse = []
    for n in (200, 2000):
        simulate(tmp_path / str(n), preset("backlog", n), seed=11)
        rmse.append(_gate_estimates(tmp_path / str(n))[1])
    cells, error = _gate_estimates(big_home)
    rmse.append(error)
    assert rmse[0] > rmse[1] > rmse[2]
    assert rmse[2] < 0.03
    assert len(cells) == 6 * 5 + 5  # every config in every region, and the drifting one after its drift too


def test_selection_is_biased_and_the_propensities_undo_it(big_home: Path) -> None:
    """The logging policy over-represents configs where it believes them strong; inclusion weights undo it."""
    truth = load_truth(big_home / "truth.json")
    keys, regions = truth["configs"], truth["regions"]
    first, drifting = truth["drift"]["first_task"], keys.index(truth["drift"]["config"])
    codex = keys.index(CODEX)
    naive, ipw = [0.0, 0.0], [0.0, 0.0]
    for region, configs, outcomes, slots in truth["assignments"]:
        for c, y, slot in zip(configs, outcomes, slots, strict=True):
            if c == codex and slot < 2:  # routed or a side-by-side lane; escalations depend on outcomes
                w = 1.0 / truth["policy"]["inclusion"][CODEX][regions[region]]
                naive[0] += y
                naive[1] += 1
                ipw[0] += w * y
                ipw[1] += w
    assert drifting != codex and first > 0
    population = sum(truth["shares"][r] * truth["quality"]["before"][CODEX][r] for r in regions)
    # Codex is routed mostly to implement (its best, true 0.9) and abstract (believed 0.85, true 0.38), so its
    # plain mean over the tasks it did is not its quality over the population of tasks; weighting each attempt
    # by 1 / P(codex attempts a task of that region) is.
    assert abs(naive[0] / naive[1] - population) > 0.05
    assert abs(ipw[0] / ipw[1] - population) < 0.02
    # The logged propensities and choices are the truth's.
    for line in _lines(big_home, "tasks")[:3000]:
        event = json.loads(line)
        if event["type"] == "route.decided" and event["id"].endswith(".route"):  # the routed config's decision
            task = int(event["task"].split("-")[1]) - 1
            region = regions[truth["assignments"][task][0]]
            assert event["chosen"] == keys[truth["assignments"][task][1][0]]
            assert event["propensity"] == truth["policy"]["propensity"][event["chosen"]][region]
            assert event["explored"] == (event["chosen"] != truth["policy"]["greedy"][region])


def test_rated_quality_is_what_the_weighted_ratings_converge_to(big_home: Path) -> None:
    """E[sum w s] / E[sum w] over gates, reviewers, humans and rejections (weight 1, score 0), retractions removed."""
    truth = load_truth(big_home / "truth.json")
    index = {truth["task_id_format"].format(i + 1): i for i in range(truth["tasks"])}
    lines = [json.loads(line) for line in _lines(big_home, "ratings")]
    retracted = {e["rating"] for e in lines if e["type"] == "rating.retracted"}
    sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for e in lines:
        if e["type"] == "rating.retracted" or e["id"] in retracted:
            continue
        task = index[e["task"]]
        key = config_key(**e["config"])
        if key == truth["drift"]["config"] and task >= truth["drift"]["first_task"]:
            continue
        region = truth["regions"][truth["assignments"][task][0]]
        w, s = (
            (e.get("weight", 1.0), 0.0)
            if e["type"] == "task.rejected"
            else (e.get("precision", 1.0) * e.get("confidence", 1.0) * e.get("importance", 1.0), e["score"])
        )
        sums[(key, region)][0] += w * s
        sums[(key, region)][1] += w
    errors = [s / w - truth["rated_quality"]["before"][k][r] for (k, r), (s, w) in sums.items()]
    assert math.sqrt(sum(e * e for e in errors) / len(errors)) < 0.03


def test_truth_best_per_dollar_survives_rating_noise() -> None:
    """Each region's best config per dollar wins by 10%+, also by rated quality, before and after the drift."""
    before, after = quality_tables(BACKLOG)
    cost = mean_cost(BACKLOG)
    regions = BACKLOG.region_names
    for quality in (before, after):
        rated = {k: {r: rated_quality(q, BACKLOG) for r, q in v.items()} for k, v in quality.items()}
        assert best_per_region(quality, cost, regions) == best_per_region(rated, cost, regions)
        for table in (quality, rated):
            for r in regions:
                values = sorted((table[k][r] / cost[k][r] for k in table), reverse=True)
                assert values[0] > 1.1 * values[1]
    assert best_per_region(before, cost, regions)["research"] != best_per_region(after, cost, regions)["research"]
    assert best_per_region(after, cost, regions)["research"] == KIMI


def test_gate_noise_is_the_rate_of_gate_disagreement(tmp_path: Path) -> None:
    scenario = Scenario.model_validate({**preset("backlog", 4000).model_dump(), "gate_noise": 0.2})
    simulate(tmp_path, scenario, seed=1)
    truth = load_truth(tmp_path / "truth.json")
    index = {truth["task_id_format"].format(i + 1): i for i in range(truth["tasks"])}
    keys = truth["configs"]
    agree = disagree = 0
    for line in _lines(tmp_path, "ratings"):
        if b'"kind":"gate"' in line:
            e = json.loads(line)
            _, configs, outcomes, _ = truth["assignments"][index[e["task"]]]
            outcome = outcomes[configs.index(keys.index(config_key(**e["config"])))]
            agree += e["score"] == outcome
            disagree += e["score"] != outcome
    assert abs(disagree / (agree + disagree) - 0.2) < 0.02


# --------------------------------------------------------------------------- what a dispatcher logs
def test_the_backlog_is_what_a_dispatcher_logs(big_home: Path) -> None:
    """One config per task by the logging policy; on a share of tasks a side-by-side lane started with it; after
    every lane failed its gates, an escalation to a config not yet run, decided after the last gate; every attempt
    with its route.decided and propensity."""
    truth = load_truth(big_home / "truth.json")
    keys, regions, frontier = truth["configs"], truth["regions"], BACKLOG.policy.frontier_config
    events: dict[str, list[dict]] = defaultdict(list)
    first = 4000  # the first 4,000 tasks of the 20,000 (enough for the shares below, and quick)
    names = {truth["task_id_format"].format(i + 1) for i in range(first)}
    for stream in ("tasks", "ratings"):
        for line in _lines(big_home, stream):
            e = json.loads(line)
            if e.get("task") in names:
                events[e["task"]].append(e)
    lanes = escalations = 0
    for i, (region, configs, _outcomes, slots) in enumerate(truth["assignments"][:first]):
        task = events[truth["task_id_format"].format(i + 1)]
        decided = {e["id"].rsplit(".", 1)[1]: e for e in task if e["type"] == "route.decided"}
        attempts = {e["id"].rsplit(".", 1)[1]: e for e in task if e["type"] == "task.attempted"}
        assert len(decided) == len(attempts) == len(configs)  # every attempt has its decision
        assert set(slots) <= {0, 1, 2} and slots[0] == 0 and slots == sorted(slots)
        routed = decided["route"]
        assert routed["propensity"] == truth["policy"]["propensity"][routed["chosen"]][regions[region]]
        if 1 in slots:  # a side-by-side lane: decided with the routed one, started with it, uniform among others
            lanes += 1
            lane = decided["route2"]
            assert lane["at"] == routed["at"] and lane["propensity"] == pytest.approx(1 / (len(keys) - 1))
            assert lane["chosen"] != routed["chosen"] and routed["chosen"] not in lane["candidates"]
            start = {k: _start(attempts[k]) for k in ("a1", "a2")}
            assert start["a1"] == start["a2"]
        if 2 in slots:  # an escalation: after every lane failed its gates, to a config not yet run
            escalations += 1
            before = [e for e in task if e["type"] == "task.rated" and e["rater"]["kind"] == "gate"
                      and e["id"].split(".")[-2] != "a3"]  # fmt: skip
            by_attempt: dict[str, list[float]] = defaultdict(list)
            for e in before:
                by_attempt[e["id"].split(".")[-2]].append(e["score"])
            lanes_run = [k for k in attempts if k != "a3"]
            assert all(k in by_attempt and sum(by_attempt[k]) < 0.5 * len(by_attempt[k]) for k in lanes_run)
            up = decided["route3"]
            assert up["propensity"] == 1.0 and not up["explored"]
            assert up["at"] > max(e["at"] for e in before)
            ran = {keys[c] for c, j in zip(configs, slots, strict=True) if j < 2}
            assert up["chosen"] not in ran and not ran & set(up["candidates"])
            assert up["chosen"] == frontier or frontier in ran
            assert _start(attempts["a3"]) > max(attempts[k]["at"] for k in lanes_run)  # after the failure ended
    assert 0.12 < lanes / first < 0.18  # side_by_side 0.15
    assert escalations > 0.2 * first


def _start(attempt: dict) -> str:
    """When an attempt started: its time less its duration (whole seconds, as the simulator writes them)."""
    from datetime import datetime, timedelta

    end = datetime.fromisoformat(attempt["at"].replace("Z", "+00:00"))
    return (end - timedelta(seconds=-(-attempt["duration_ms"] // 1000))).isoformat()


# --------------------------------------------------------------------------- corruption
def test_every_injected_defect_is_rejected_by_the_parser() -> None:
    line = _lines(REPO, "ratings")[0].decode()
    for variant in range(N_INVALID_VARIANTS):
        with pytest.raises(InvalidEvent):
            parse_line(invalid(line, variant).encode("utf-8", "surrogateescape"))
    for fraction in (0.0, 0.5, 0.999):
        with pytest.raises(InvalidEvent):
            parse_line(torn(line, fraction))
    other = parse_line(conflicting(line))
    assert other.id == parse_line(line).id and to_json_line(other) != line.encode()


def test_corruption_counts_are_exact(tmp_path: Path) -> None:
    result = simulate(tmp_path, preset("backlog", 1500), seed=9, corrupt=0.02)
    for stream in ("tasks", "ratings"):
        data = (tmp_path / "streams" / f"{stream}.jsonl").read_bytes()
        body, _, tail = data.rpartition(b"\n")
        assert tail and not tail.endswith(b"\n")  # a torn tail
        seen: dict[str, bytes] = {}
        found = Counter()
        for line in body.split(b"\n"):
            try:
                event = parse_line(line)
            except InvalidEvent:
                found["dead"] += 1
                continue
            if event.id in seen:
                found["duplicates" if seen[event.id] == line else "conflicts"] += 1
            else:
                seen[event.id] = line
        counts = result.corruption_by_stream[stream]
        assert counts["torn_tail"] == 1
        assert found["dead"] == counts["torn"] + counts["invalid"] > 0
        assert found["duplicates"] == counts["duplicates"] > 0
        assert found["conflicts"] == counts["conflicts"] > 0
    truth = load_truth(result.truth_path)
    assert truth["counts"]["corruption"] == result.corruption
    assert result.expected_compaction == {
        "dead_letters": result.corruption["torn"] + result.corruption["invalid"] + result.corruption["conflicts"],
        "duplicates": result.corruption["duplicates"],
        "quarantined": 2,
    }


def test_default_backlog_compacts_with_zero_dead_letters(tmp_path: Path) -> None:
    from pipeline.compact import compact

    (tmp_path / "streams").mkdir()
    for name in ("tasks", "ratings"):
        shutil.copy(REPO / "streams" / f"{name}.jsonl", tmp_path / "streams" / f"{name}.jsonl")
    result = compact(tmp_path)
    truth = json.loads((REPO / "fits" / "truth.json").read_text())
    for stream, outcome in result.streams.items():
        assert (outcome.duplicate, outcome.conflict, outcome.invalid) == (0, 0, 0)
        assert outcome.stored == outcome.lines == truth["counts"]["lines"][stream]
    assert not (tmp_path / "deadletter").exists() or all(
        p.stat().st_size == 0 for p in (tmp_path / "deadletter").iterdir()
    )


def test_corrupted_backlog_compacts_to_exactly_the_injected_damage(tmp_path: Path) -> None:
    from pipeline.compact import compact
    from pipeline.streams.log import repair

    # Three days of work: few date partitions, so compaction is quick.
    scenario = Scenario.model_validate({**preset("backlog", 400).model_dump(), "days": 3})
    sim = simulate(tmp_path, scenario, seed=12, corrupt=0.02)
    result = compact(tmp_path)
    for stream, outcome in result.streams.items():
        counts = sim.corruption_by_stream[stream]
        assert outcome.duplicate == counts["duplicates"]
        assert outcome.conflict == counts["conflicts"]
        assert outcome.invalid == counts["torn"] + counts["invalid"]
        assert (
            outcome.stored
            == sim.lines[stream] - counts["torn"] - counts["invalid"] - counts["conflicts"] - counts["duplicates"]
        )
    dead = sum(len((tmp_path / "deadletter" / f"{s}.jsonl").read_bytes().splitlines()) for s in ("tasks", "ratings"))
    assert dead == sim.expected_compaction["dead_letters"]
    # compaction's consistent cut recovered the streams first: the torn tails are in quarantine/ already
    assert len(list((tmp_path / "quarantine").iterdir())) == sim.expected_compaction["quarantined"] == 2
    assert repair(tmp_path).quarantined == []


# --------------------------------------------------------------------------- scenario and CLI
def test_scenario_round_trips_through_json_and_rejects_nonsense(tmp_path: Path) -> None:
    from pipeline.simulate import load_scenario

    path = tmp_path / "scenario.json"
    path.write_text(BACKLOG.model_dump_json())
    assert load_scenario(path) == BACKLOG
    broken = json.loads(BACKLOG.model_dump_json())
    broken["configs"][0]["quality"].pop("review")
    path.write_text(json.dumps(broken))
    with pytest.raises(PipelineError, match="quality must name exactly the regions"):
        load_scenario(path)
    broken = json.loads(BACKLOG.model_dump_json())
    broken["gate_noise"] = 0.7
    path.write_text(json.dumps(broken))
    with pytest.raises(PipelineError, match="gate_noise"):
        load_scenario(path)


def test_cli_simulate(tmp_path: Path) -> None:
    runner = CliRunner()
    scenario = tmp_path / "s.json"
    scenario.write_text(BACKLOG.model_copy(update={"name": "mine", "drift": None}).model_dump_json())
    out = tmp_path / "home"
    result = runner.invoke(
        cli,
        [
            "simulate",
            "--out",
            str(out),
            "--scenario",
            str(scenario),
            "--tasks",
            "50",
            "--seed",
            "3",
            "--gate-noise",
            "0.1",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["scenario"] == "mine" and summary["tasks"] == 50 and summary["events"]["task.opened"] == 50
    truth = load_truth(out / "truth.json")
    assert truth["gate_noise"] == 0.1 and truth["drift"] is None
    again = runner.invoke(cli, ["simulate", "--out", str(out)])
    assert again.exit_code == 2
    assert "exists and is not empty; simulate writes a fresh home (use --force to replace it)" in again.output
    table = runner.invoke(cli, ["simulate", "--out", str(out), "--tasks", "20", "--force", "--corrupt", "0.05"])
    assert table.exit_code == 0, table.output
    assert "task.rated by gate" in table.output and "events/s" in table.output
    bad = runner.invoke(cli, ["simulate", "--out", str(out), "--corrupt", "0.5"])
    assert bad.exit_code == 2
    helped = runner.invoke(cli, ["simulate", "--help"])
    assert "Example:" in helped.output


def test_a_failure_before_writing_leaves_no_temporary_files(tmp_path: Path) -> None:
    """The truth file's directory cannot be made (a file stands in its way): simulate fails with a clear error and
    leaves neither temporary stream files nor open handles behind, and no stream is replaced."""
    out = tmp_path / "home"
    (out / "streams").mkdir(parents=True)
    (out / "blocker").write_text("a file, not a directory", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(cli, ["simulate", "--out", str(out), "--tasks", "20", "--truth", "blocker/truth.json"])
    assert result.exit_code == 2, result.output  # refused before anything is written: --truth cannot be made
    assert result.output.startswith("error: refusing ") and "blocker is not a directory" in result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in (out / "streams").iterdir()) == []
    assert sorted(p.name for p in out.iterdir()) == ["blocker", "streams"]
