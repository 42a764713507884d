"""Are the fit's verdicts right? A study on the simulator, where the truth is known.

``python -m bench.verdicts [--seeds 100] [--families null,late-config,drift,exploration] [--tasks N] [--jobs 2]``

Each family is a scenario (:func:`scenario`) simulated per seed into a scratch home, compacted and evaluated
exactly as the nightly job does (:func:`pipeline.evaluate.protocol.evaluate`): the prior family (prior source,
prior weight, half-life) is judged by the greedy hit rate on held-out tasks, exploration by the held-out replay.
Every family has 900 tasks over three regions of equal share, gate noise 5%, shipped exploration at the floor
0.05, and the shipped priors at what each config's ratings converge to (its rated quality, the truth seen through
the raters' noise) unless the family says otherwise. The families, each built so that its effect is present at
the verdict and still present when the timeline ends:

- ``null``: nothing to find. Four configs, every task done by two or three of them; the truth's best per dollar
  wins each region by 20% or more on the true scale (19% or more on the rated one), so the shipped priors route
  to it, and it is also the first choice that wins the most held-out tasks; nothing drifts. Target: at most 9
  runs of 100 adopt for either family (a false-adopt rate of 5%).
- ``late-config``: config d arrives at 42% of the timeline (a few ratings before validation starts at 49%), worth
  3.6 quality per dollar (0.9 at $0.25) in every region against the incumbent b's 2.0 (0.8 at $0.40), but shipped
  at a prior of 0.05 under prior weight 34 (the heaviest of the grid). Seven tasks in ten have one config, so d
  stays thin: about 25 rated tasks per region by the end, too few to outweigh the prior (the shipped table still
  routes past d). The prior family should adopt.
- ``drift``: a year of backlog; config d ($0.25) is poor (0.05) until 42% of the timeline, 25 days before
  validation starts, then the best per dollar in two regions (0.98: 3.9 quality per dollar against the
  incumbent b's 2.7, 0.88 at $0.33); every task is done by two or three configs. The plain mean of d, 58% new
  by the end, stays below b's, so only a finite half-life tracks the change. In the third region nothing
  changes. The prior family should adopt.
- ``exploration``: two configs; e is poor (0.1 at $0.40) until half of the timeline, then the best per dollar
  (0.95, 2.4 per dollar against b's 1.7). Four tasks in ten get a second opinion, so the held-out replay can
  observe e; the greedy table never sends e work, since e's plain mean, half old and half new, stays below b's to
  the end, and validation starts before e improves, so no prior family constant can see it. Exploring finds it.
  The exploration verdict should adopt.

Targets for an effect family: at least 72 adopts of 100 for its family (80% power). Per family the study prints
n, the adopts of the right family and of the other (false adopts), with Clopper-Pearson 95% intervals, the truth
check and the wall time. The families were designed on pilot runs with seeds below :data:`FIRST_SEED`; the
study runs seeds from it on, which no design decision saw.

**The truth check** (measured against the truth, which the fit never reads) compares the published table with
the shipped one where a verdict adopted, each check measuring what its family's constants do:

- prior family (:func:`routing_value`): the expected quality per dollar, against the truth at the end of the
  timeline (after any drift), of routing new tasks with each table refit on all tasks: in each region the table's
  greedy choice, ``sum_r share_r Q(choice_r, r) / sum_r share_r cost(choice_r, r)``.
- exploration (:func:`loop_value`): the quality per dollar a loop running with each table's constants realizes
  over a continuation of the timeline as long as the held-out part: it starts from the table refit on all tasks,
  routes each new task (greedy, or with probability epsilon another config), observes the outcome the truth draws
  (a success with the config's true quality, scored 1 or 0 like a gate) and refits as it goes (the replay's
  posterior); total successes over total cost, the mean of :data:`CONTINUATIONS` continuations with
  :data:`PATHS` exploration paths each, the same draws for both tables.

Each check counts the runs where the published table is strictly better, equal (both route alike: not a failure),
or worse, with the mean difference and its 95% bootstrap interval over runs. Under the null, where nothing
adopts, the study checks its premise instead: the fitted constants (adopted or not) against the shipped ones.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.simulate.scenario import ConfigSpec, Drift, GateSpec, Policy, Prior, RegionSpec, ReviewerSpec, Scenario
from pipeline.simulate.truth import mean_cost, quality_tables, rated_quality

REGIONS = ("r0", "r1", "r2")
FAMILIES = ("null", "late-config", "drift", "exploration")
#: The verdict that should adopt in each family (None: neither should).
RIGHT: dict[str, str | None] = {"null": None, "late-config": "prior", "drift": "prior", "exploration": "exploration"}
VERDICTS = ("prior", "exploration")
TASKS = 900
#: The study's seeds start here; the families were designed on pilot runs with seeds below it.
FIRST_SEED = 1001
FLOOR = 0.05
#: Exploration check: continuations of the timeline, and exploration paths per continuation.
CONTINUATIONS, PATHS = 16, 4
#: Bootstrap resamples of a mean difference over runs.
RESAMPLES = 2000


def _config(name: str, quality: tuple[float, float, float], cost: float, available_from: float = 0.0) -> ConfigSpec:
    return ConfigSpec(
        cli=name, model="m", quality=dict(zip(REGIONS, quality, strict=True)), cost_usd=cost,
        cost_sigma=0.3, cost_missing=0.0, available_from=available_from,
    )  # fmt: skip


def scenario(family: str, tasks: int = TASKS) -> Scenario:
    """The family's scenario (the seed only changes the draws)."""
    a = _config("a", (0.9, 0.9, 0.9), 1.0)  # strong and dear
    drift: Drift | None = None
    wrong: dict[str, float] = {}
    weight, days = 3.0, 120.0
    attempts = (0.0, 0.45, 0.55)
    if family == "null":
        # Best per dollar: b in r0 (1.89 against c's 1.5), c in r1 (1.83 against b's 1.33), d in r2 (2.0 against
        # b's 1.67); on the rated scale 1.77 / 1.48, 1.77 / 1.28, 1.95 / 1.57.
        configs = [
            a,
            _config("b", (0.85, 0.6, 0.75), 0.45),
            _config("c", (0.45, 0.55, 0.4), 0.3),
            _config("d", (0.35, 0.3, 0.5), 0.25),
        ]
    elif family == "late-config":
        configs = [
            a,
            _config("b", (0.8, 0.8, 0.8), 0.4),
            _config("c", (0.5, 0.5, 0.5), 0.3),
            _config("d", (0.9, 0.9, 0.9), 0.25, available_from=0.42),
        ]
        wrong, weight, attempts = {"d": 0.05}, 34.0, (0.7, 0.2, 0.1)
    elif family == "drift":
        configs = [
            a,
            _config("b", (0.88, 0.88, 0.88), 0.33),
            _config("c", (0.4, 0.4, 0.4), 0.3),
            _config("d", (0.05, 0.05, 0.05), 0.25),
        ]
        drift = Drift(config="d/-/m/-", at=0.42, quality={"r0": 0.98, "r1": 0.98})
        days = 365.0
    elif family == "exploration":
        configs = [_config("b", (0.75, 0.75, 0.75), 0.45), _config("e", (0.1, 0.1, 0.1), 0.4)]
        drift = Drift(config="e/-/m/-", at=0.5, quality=dict.fromkeys(REGIONS, 0.95))
        attempts = (0.6, 0.4, 0.0)
    else:
        raise ValueError(f"unknown family {family!r}; expected one of {', '.join(FAMILIES)}")
    base = Scenario(
        name=f"verdicts-{family}", tasks=tasks, days=days, regions=[RegionSpec(name=r, share=1.0) for r in REGIONS],
        configs=configs, attempts=attempts, gate_noise=0.05,
        gates=[GateSpec(name="tests", rate=0.9)], reviewers=[ReviewerSpec(name="review", noise=0.1)],
    )  # fmt: skip
    # The shipped priors: what the ratings of each config converge to before any drift (exact beliefs) ...
    priors = [
        Prior(selector=cfg.cli, region=r, quality=round(rated_quality(cfg.quality[r], base), 4))
        for cfg in configs
        for r in REGIONS
    ]
    # ... except a wrong one where the family says so
    priors = [p if p.selector not in wrong else p.model_copy(update={"quality": wrong[p.selector]}) for p in priors]
    policy = Policy(prior_weight=weight, exploration=FLOOR, priors=priors, default_config=configs[0].key)
    return base.model_copy(update={"policy": policy, "drift": drift})


@dataclass(frozen=True)
class Check:
    """One truth check: the published (or, under the null, the fitted) table's value against the shipped one's."""

    published: float
    shipped: float

    @property
    def difference(self) -> float:
        return self.published - self.shipped

    @property
    def sign(self) -> str:
        return "better" if self.published > self.shipped else "worse" if self.published < self.shipped else "equal"


@dataclass(frozen=True)
class Outcome:
    """One run: both verdicts and the truth checks of the families they concern."""

    family: str
    seed: int
    prior: str
    exploration: str
    checks: dict[str, Check] = field(default_factory=dict)  # verdict -> its truth check (where measured)

    def adopted(self, verdict: str) -> bool:
        return getattr(self, verdict) == "adopt"


def run_one(family: str, seed: int, root: Path, tasks: int = TASKS, subsample: int | None = None) -> Outcome:
    """Simulate, compact, evaluate; check each adopted verdict against the truth (under the null, the fitted
    constants whatever the verdicts). ``subsample``: the held-out tasks above which the exploration verdict's
    bootstrap replays only that many (pipeline.evaluate.exploration.SUBSAMPLE; None: the code's)."""
    from pipeline.evaluate import exploration
    from pipeline.simulate import simulate

    if subsample is not None:
        exploration.SUBSAMPLE = subsample

    sc = scenario(family, tasks)
    home = root / f"{family}-{seed}"
    simulate(home, sc, seed=seed)
    try:
        ctx, ev = evaluate_home(home, seed)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    verdicts = {"prior": ev.routing["recommendation"], "exploration": ev.routing["exploration"]["recommendation"]}
    null = RIGHT[family] is None
    checks = {}
    if verdicts["prior"] == "adopt" or null:
        candidate = ev.shipped.model_copy(update={f: getattr(ev.fitted, f) for f in PRIOR_FIELDS})
        checks["prior"] = _check(candidate, ev.shipped, lambda c: routing_value(ctx, c, sc))
    if verdicts["exploration"] == "adopt" or null:
        arm = {"exploration": ev.fitted.exploration, "exploration_mode": ev.fitted.exploration_mode}
        candidate = ev.published.model_copy(update=arm)
        length = ev.split["held_out_tasks"]
        checks["exploration"] = _check(candidate, ev.shipped, lambda c: loop_value(ctx, c, sc, seed, length))
    return Outcome(family, seed, verdicts["prior"], verdicts["exploration"], checks)


def _check(candidate: Any, shipped: Any, value: Callable[[Any], float]) -> Check:
    """``value`` of both constant sets; once when they are the same (the check is then equal by construction)."""
    base = value(shipped)
    return Check(base if candidate == shipped else value(candidate), base)


#: The constants the prior family's verdict judges (``lambda_`` is None under quality per dollar).
PRIOR_FIELDS = ("prior_source", "prior_weight", "half_life_days", "lambda_")


def _truth(sc: Scenario) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], np.ndarray]:
    """True quality after any drift and mean cost per (config, region), and the regions' shares."""
    _, after = quality_tables(sc)
    shares = np.array([r.share for r in sc.regions], dtype=float)
    return after, mean_cost(sc), shares / shares.sum()


def routing_value(ctx: Any, constants: Any, sc: Scenario) -> float:
    """Expected quality per dollar against the truth after any drift of routing new tasks with the table fitted on
    all tasks under ``constants``: each region's greedy choice among its members (the table's ``choice``),
    ``sum_r share_r Q(choice_r, r) / sum_r share_r cost(choice_r, r)``."""
    from pipeline.fit.context import Part

    model = ctx.model(Part.FULL, constants)
    members = model.members.filter(pl.col("region") != "*")
    choice = model.choose_frame(members.select(task="region", region="region", config_key="config_key"))
    chosen = dict(zip(choice["task"].to_list(), choice["chosen"].to_list(), strict=True))
    quality, cost, shares = _truth(sc)
    names = sc.region_names
    total_q = sum(s * quality[chosen[r]][r] for s, r in zip(shares, names, strict=True))
    total_cost = sum(s * cost[chosen[r]][r] for s, r in zip(shares, names, strict=True))
    return float(total_q / total_cost)


def loop_value(ctx: Any, constants: Any, sc: Scenario, seed: int, tasks: int) -> float:
    """Quality per dollar a loop with ``constants`` realizes against the truth over ``tasks`` new tasks: it starts
    from the fit on all tasks, routes each task (greedy, or with probability epsilon another config), observes the
    truth's draw for the chosen config (success with its true quality after any drift, scored 1 or 0 with weight 1,
    at its mean cost) and refits as it goes (:func:`pipeline.evaluate.replay.replay_runs`). Mean over
    :data:`CONTINUATIONS` continuations of :data:`PATHS` exploration paths; the continuations and the paths' draws
    depend on ``seed`` only, so two constant sets meet the same tasks, outcomes and draws."""
    from pipeline.evaluate.replay import ReplayRun, replay_runs, start_from
    from pipeline.fit.context import Part

    quality, cost, shares = _truth(sc)
    names = sc.region_names
    keys = np.array(sc.config_keys)
    q = np.array([[quality[k][r] for r in names] for k in keys])
    c = np.array([[cost[k][r] for r in names] for k in keys])
    start = start_from(ctx.model(Part.FULL, constants), names)
    values = []
    for i in range(CONTINUATIONS):
        rng = np.random.default_rng([seed, 77, i])
        region = rng.choice(len(names), size=tasks, p=shares)
        success = rng.random((tasks, len(keys))) < q[:, region].T
        ids = np.array([f"F{t:06d}" for t in range(tasks)])
        outcomes = pl.DataFrame(
            {
                "task": np.repeat(ids, len(keys)),
                "region": np.repeat(np.array(names)[region], len(keys)),
                "config_key": np.tile(keys, tasks),
                "value": success.astype(float).ravel(),
                "cost_t": c[:, region].T.ravel(),
            }
        ).with_columns(weight=pl.lit(1.0), unknown_cost=pl.lit(0, pl.Int64))
        frame = pl.DataFrame({"task": ids, "region": np.array(names)[region], "first_at": np.arange(tasks)})
        arm = (float(constants.exploration), constants.exploration_mode)
        runs = [ReplayRun(arm[0], (seed, 78, i, j), None, arm[1]) for j in range(PATHS)]
        values += [r.realized_value for r in replay_runs(start, frame, outcomes, runs) if r.realized_value is not None]
    return float(np.mean(values))


def evaluate_home(home: Path, seed: int) -> tuple[Any, Any]:
    """Compact ``home`` and evaluate it as the nightly job does: (its aggregation, the evaluation)."""
    from fractions import Fraction

    from pipeline.compact import compact
    from pipeline.evaluate.protocol import evaluate
    from pipeline.evaluate.search import Pins, half_lives_of
    from pipeline.fit.aggregate import DuckDBEngine, Spec
    from pipeline.fit.context import FitContext
    from pipeline.fit.model import load_shipped
    from pipeline.store import open_store

    compact(home)
    shipped = load_shipped(home / "fits" / "shipped.json")
    # the shipped arm is the code default's mode (Thompson) at the floor; the verdict chooses a mode and a share
    constants = shipped.to_constants()
    spec = Spec(half_lives=half_lives_of(constants, Pins()), fraction=Fraction(7, 10))
    with open_store(home) as store:
        ctx = FitContext.build(DuckDBEngine(store), spec, shipped=shipped)
    return ctx, evaluate(ctx, shipped_constants=constants, pins=Pins(), seed=seed)


def default_backlog(root: Path) -> str:
    """What the truth of the default backlog (``make default-data``: preset ``backlog``, seed 7, truth in
    ``fits/truth.json``) makes the right constants, and whether the fit's verdicts agreed. Right, per family:
    the fitted values beat the shipped ones by that family's truth check (the other family shipped)."""
    from pipeline.simulate import preset, simulate

    sc = preset("backlog")
    home = root / "default-backlog"
    simulate(home, sc, seed=7)
    ctx, ev = evaluate_home(home, 0)
    prior_fields = {f: getattr(ev.fitted, f) for f in PRIOR_FIELDS if f != "lambda_"}
    length = ev.split["held_out_tasks"]
    with_priors = ev.shipped.model_copy(update=prior_fields)
    with_eps = ev.shipped.model_copy(
        update={"exploration": ev.fitted.exploration, "exploration_mode": ev.fitted.exploration_mode}
    )
    checks = (
        (
            "prior family",
            ", ".join(f"{k} {v}" for k, v in prior_fields.items()),
            ev.routing["recommendation"],
            "routes new tasks (greedy, expected against the truth) at",
            _check(with_priors, ev.shipped, lambda c: routing_value(ctx, c, sc)),
        ),
        (
            "exploration",
            f"exploration {ev.fitted.exploration:g}",
            ev.routing["exploration"]["recommendation"],
            f"realizes in a loop over {length} new tasks",
            _check(with_eps, ev.shipped, lambda c: loop_value(ctx, c, sc, 0, length)),
        ),
    )
    lines = ["default backlog (preset backlog, seed 7; the truth is fits/truth.json):"]
    for family, fitted_text, verdict, measure, check in checks:
        right = check.sign == "better"
        says = (
            "the fitted values route like the shipped ones"
            if check.sign == "equal"
            else f"the truth makes the {'fitted' if right else 'shipped'} values right"
        )
        agreed = (verdict == "adopt") == right
        lines.append(
            f"  {family}: fitted ({fitted_text}) {measure} {check.published:.4g} quality per dollar against "
            f"{check.shipped:.4g} for the shipped constants: {says}; the fit said {verdict}: "
            f"{'agreed' if agreed else 'disagreed'}"
        )
    return "\n".join(lines)


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """Exact 95% interval of a binomial proportion k / n: low is the p where P(X >= k | p) = 0.025 (0 when
    k = 0), high = 1 - low(n - k) by symmetry; found by bisection on the binomial distribution."""

    def at_most(j: int, p: float) -> float:  # P(X <= j | n, p)
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(j + 1))

    def low(j: int) -> float:  # the p where P(X >= j | p) = 1 - P(X <= j - 1 | p), increasing in p, is 0.025
        if j == 0:
            return 0.0
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if 1.0 - at_most(j - 1, mid) < 0.025 else (lo, mid)
        return (lo + hi) / 2

    return low(k), 1.0 - low(n - k)


def mean_interval(values: list[float], *, seed: int = 0) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of the mean of ``values`` (runs resampled with replacement); None when
    there are none."""
    if not values:
        return None
    x = np.array(values, dtype=float)
    means = x[np.random.default_rng(seed).integers(0, x.size, size=(RESAMPLES, x.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def summarize_checks(checks: list[Check]) -> dict[str, Any]:
    """Counts of better / equal / worse, and the mean difference with its interval."""
    diffs = [c.difference for c in checks]
    return {
        "n": len(checks),
        **{s: sum(c.sign == s for c in checks) for s in ("better", "equal", "worse")},
        "mean_difference": float(np.mean(diffs)) if diffs else None,
        "ci95": mean_interval(diffs),
    }


def summarize(family: str, outcomes: list[Outcome], seconds: float | None = None) -> dict[str, Any]:
    """The family's figures: adopts per verdict with Clopper-Pearson intervals, the truth checks, the wall time."""
    n = len(outcomes)
    right = RIGHT[family]
    adopts = {v: sum(o.adopted(v) for o in outcomes) for v in VERDICTS}
    either = sum(o.adopted("prior") or o.adopted("exploration") for o in outcomes)
    checks = {}
    for v in VERDICTS:
        measured = [o.checks[v] for o in outcomes if v in o.checks and (right is None or o.adopted(v))]
        checks[v] = summarize_checks(measured)
    if right is None:
        checks["adopted"] = summarize_checks([c for o in outcomes for v, c in o.checks.items() if o.adopted(v)])
    return {
        "family": family,
        "n": n,
        "right": right,
        "adopts": adopts,
        "ci": {v: clopper_pearson(k, n) for v, k in adopts.items()},
        "either": either,
        "ci_either": clopper_pearson(either, n),
        "verdicts": {
            v: {x: sum(getattr(o, v) == x for o in outcomes) for x in ("adopt", "keep", "insufficient-evidence")}
            for v in VERDICTS
        },
        "checks": checks,
        "seconds": seconds,
    }


def _rate(k: int, n: int, ci: tuple[float, float]) -> str:
    return f"{k}/{n} ({100 * k / n:.0f}%, 95% CI {100 * ci[0]:.1f}-{100 * ci[1]:.1f}%)" if n else "0/0"


def _check_text(c: dict[str, Any]) -> str:
    if not c["n"]:
        return "not measured (no run)"
    ci = c["ci95"]
    return (
        f"{c['better']} better / {c['equal']} equal / {c['worse']} worse of {c['n']}; mean difference "
        f"{c['mean_difference']:+.4f} (95% CI {ci[0]:+.4f} to {ci[1]:+.4f}) quality per dollar"
    )


CHECK_NAMES = {
    "prior": "routing new tasks, expected against the truth",
    "exploration": "a loop over a continuation, realized against the truth",
}


def report(s: dict[str, Any]) -> str:
    """The family's figures in words (one line each)."""
    n, right = s["n"], s["right"]
    wall = "" if s["seconds"] is None else f" ({s['seconds'] / 60:.1f} min)"
    lines = [f"{s['family']}: n = {n}{wall}"]
    if right is None:
        lines.append(f"  false adopts, either family: {_rate(s['either'], n, s['ci_either'])}; target <= 9/100")
        for v in VERDICTS:
            lines.append(f"  {v} family adopts: {_rate(s['adopts'][v], n, s['ci'][v])}")
        lines.append(f"  published vs shipped where a verdict adopted: {_check_text(s['checks']['adopted'])}")
        for v in VERDICTS:
            lines.append(f"  premise, fitted {v} vs shipped ({CHECK_NAMES[v]}): {_check_text(s['checks'][v])}")
        return "\n".join(lines)
    other = "exploration" if right == "prior" else "prior"
    lines.append(f"  {right} family adopts (right): {_rate(s['adopts'][right], n, s['ci'][right])}; target >= 72/100")
    lines.append(f"  {other} family adopts (false): {_rate(s['adopts'][other], n, s['ci'][other])}")
    for v in (right, other):
        if s["checks"][v]["n"] or v == right:
            lines.append(f"  truth check of the {v} adopts ({CHECK_NAMES[v]}): {_check_text(s['checks'][v])}")
    return "\n".join(lines)


def table(results: list[dict[str, Any]]) -> str:
    """Every family in one Markdown table (the README's form): adopts of the right and of the other family with
    their intervals, the truth check of the right family's adopts (under the null: of any adopt), wall time."""

    def rate(k: int, n: int, ci: tuple[float, float]) -> str:
        return f"{k}/{n} ({100 * ci[0]:.0f}-{100 * ci[1]:.0f}%)"

    def check(c: dict[str, Any]) -> str:
        if not c["n"]:
            return "none adopted"
        low, high = c["ci95"]
        return f"{c['better']} / {c['equal']} / {c['worse']}; {c['mean_difference']:+.3f} [{low:+.3f}, {high:+.3f}]"

    rows = [
        "| family | n | right family adopts (95% CI) | other family adopts (false) | truth check: better / equal / "
        "worse; mean difference [95% CI] | wall |",
        "|---|---|---|---|---|---|",
    ]
    for s in results:
        n, right = s["n"], s["right"]
        wall = "" if s["seconds"] is None else f"{s['seconds'] / 60:.1f} min"
        if right is None:
            cells = ["none should", f"either: {rate(s['either'], n, s['ci_either'])}", check(s["checks"]["adopted"])]
        else:
            other = "exploration" if right == "prior" else "prior"
            cells = [
                f"{right}: {rate(s['adopts'][right], n, s['ci'][right])}",
                f"{other}: {rate(s['adopts'][other], n, s['ci'][other])}",
                check(s["checks"][right]),
            ]
        rows.append(f"| {s['family']} | {n} | " + " | ".join(cells) + f" | {wall} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED)
    parser.add_argument("--tasks", type=int, default=TASKS)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--jobs", type=int, default=1, help="Runs at once, each in its own process.")
    parser.add_argument("--no-default", action="store_true", help="Skip the default backlog's truth check.")
    parser.add_argument(
        "--subsample",
        type=int,
        default=None,
        metavar="M",
        help="Replay M held-out tasks per bootstrap resample of the exploration verdict (its m-out-of-n form, "
        "checked at a size the study reaches; default: the code's threshold).",
    )
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    for family in families:
        scenario(family, args.tasks)  # an unknown family fails before any run
    began = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="verdicts-") as tmp:
        for family in families if args.seeds > 0 else []:
            started = time.perf_counter()
            outcomes = []
            seeds = range(args.first_seed, args.first_seed + args.seeds)
            # Runs are independent and seeded: in parallel, the outcomes (in seed order) are the same.
            with ProcessPoolExecutor(max_workers=args.jobs) as pool:
                runs = pool.map(
                    run_one, repeat(family), seeds, repeat(Path(tmp)), repeat(args.tasks), repeat(args.subsample)
                )
                for i, o in enumerate(runs):
                    outcomes.append(o)
                    print(
                        f"\r{family}: {i + 1}/{args.seeds} (prior {o.prior}, exploration {o.exploration}) "
                        f"{time.perf_counter() - began:.0f} s",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
            print(file=sys.stderr)
            results.append(summarize(family, outcomes, time.perf_counter() - started))
            print(report(results[-1]), flush=True)
        if results:
            print(table(results), flush=True)
        if not args.no_default:
            print(default_backlog(Path(tmp)), flush=True)
    elapsed = time.perf_counter() - began
    print(f"{sum(r['n'] for r in results)} simulated fits in {elapsed:.0f} s ({elapsed / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
