"""Are the fit's verdicts right? A study on the simulator, where the truth is known.

``python -m bench.verdicts [--seeds 100] [--families null,prior,drift,exploration] [--tasks N]``

Each family is a scenario built per seed (:func:`scenario`), simulated into a scratch home, compacted and
evaluated exactly as the nightly job does (:func:`pipeline.evaluate.protocol.evaluate`). Per family it prints
how often each verdict says ``adopt``, with a Clopper-Pearson 95% interval:

- ``null``: the shipped priors are the qualities the ratings converge to, nothing drifts, the shipped
  exploration is at the floor: no change of constants can route better. Target: at most 9 adopts of 100
  (either family), consistent with a false-adopt rate of 5%.
- ``prior``: a configuration added late in the timeline, few ratings, a shipped prior far from its truth and a
  heavy shipped prior weight. The prior family should adopt.
- ``drift``: a configuration that gets much better before the validation part starts; a finite half-life
  tracks it. The prior family should adopt.
- ``exploration``: a configuration that improves in the validation part where the greedy table does not send
  work; only exploring finds it. The exploration family should adopt.

Targets for an effect family: at least 72 adopts of 100 for its family. When a verdict adopts, the study checks
against the truth that the published constants route closer to the truth's best than the shipped ones: from
the fit on all tasks, each routes new tasks drawn from the truth (the configs' qualities after any drift),
learning online with its exploration; the realized quality per dollar is averaged over replay seeds.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.simulate.scenario import ConfigSpec, Drift, GateSpec, Policy, Prior, RegionSpec, ReviewerSpec, Scenario
from pipeline.simulate.truth import rated_quality

REGIONS = ("r0", "r1", "r2")
FAMILIES = ("null", "prior", "drift", "exploration")
#: The family whose verdict should adopt (None: neither should).
RIGHT = {"null": None, "prior": "prior", "drift": "prior", "exploration": "exploration"}
FLOOR = 0.05
DRIFT_AT = 0.38
E_AT, E_COST = 0.5, 0.35
#: Future tasks routed from the truth to compare the published and the shipped constants, and replay seeds.
FUTURE_TASKS, FUTURE_SEEDS = 400, 4


def _config(name: str, quality: tuple[float, float, float], cost: float, available_from: float = 0.0) -> ConfigSpec:
    return ConfigSpec(
        cli=name, model="m", quality=dict(zip(REGIONS, quality, strict=True)), cost_usd=cost,
        cost_sigma=0.3, cost_missing=0.0, available_from=available_from,
    )  # fmt: skip


def scenario(family: str, tasks: int) -> Scenario:
    """The family's scenario (the seed only changes the draws). Four configs, three regions, most tasks done
    by two or three configs (second opinions), so the held-out replay observes most choices."""
    a = _config("a", (0.9, 0.9, 0.9), 1.0)  # strong and dear
    b = _config("b", (0.7, 0.6, 0.75), 0.45)
    c = _config("c", (0.45, 0.55, 0.4), 0.3)
    d = _config("d", (0.35, 0.3, 0.5), 0.25)
    drift: Drift | None = None
    weight = 3.0
    configs = [a, b, c, d]
    wrong: dict[str, float] = {}
    attempts = (0.0, 0.45, 0.55)
    days = 120.0
    if family == "prior":
        # d arrives at 45% of the timeline (a few ratings before validation starts), best per dollar in r0 and r1,
        # believed poor (0.05) under the heaviest prior weight of the grid; few second opinions keep it thin.
        configs = [a, b, c, _config("d", (0.92, 0.9, 0.5), 0.25, available_from=0.45)]
        wrong = {"d": 0.05}
        weight = 34.0
        attempts = (0.7, 0.2, 0.1)
    elif family == "drift":
        # A year of backlog; d gets much better in r0 and r1 at 38% of it (two months before validation
        # starts), and the no-recency mean at the cutoff is still below b's in r0 and c's in r1.
        configs = [a, _config("b", (0.85, 0.6, 0.75), 0.42), c, _config("d", (0.1, 0.1, 0.5), 0.3)]
        drift = Drift(config="d/-/m/-", at=DRIFT_AT, quality={"r0": 0.98, "r1": 0.95})
        days = 365.0
    elif family == "exploration":
        # Two configs. e is poor and rarely tried (the logging policy explores 5%, one task in seven gets a second
        # opinion); when validation starts it becomes the best per dollar everywhere. The fits' evidence on e is
        # mostly old and poor, so the greedy table keeps b; an exploring router tries e and finds it.
        configs = [_config("b", (0.75, 0.75, 0.75), 0.45), _config("e", (0.25, 0.25, 0.25), E_COST)]
        drift = Drift(config="e/-/m/-", at=E_AT, quality=dict.fromkeys(REGIONS, 0.95))
        attempts = (0.85, 0.15, 0.0)
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
class Outcome:
    prior: str
    exploration: str
    closer: bool | None  # when a family adopts: the published constants route closer to the truth's best
    published_value: float | None
    shipped_value: float | None


def run_one(family: str, seed: int, tasks: int, root: Path) -> Outcome:
    """Simulate, compact, evaluate; check an adopted verdict against the truth."""
    from pipeline.simulate import simulate

    sc = scenario(family, tasks)
    home = root / f"{family}-{seed}"
    simulate(home, sc, seed=seed)
    inputs, shipped, ev = evaluate_home(home, seed)
    prior = ev.routing["recommendation"]
    exploration = ev.routing["exploration"]["recommendation"]
    closer = published = shipped_value = None
    if "adopt" in (prior, exploration):
        published = future_value(inputs, ev.published, shipped, sc, seed)
        shipped_value = future_value(inputs, ev.shipped, shipped, sc, seed)
        closer = published > shipped_value
    return Outcome(prior, exploration, closer, published, shipped_value)


def future_value(inputs: Any, constants: Any, shipped: Any, sc: Scenario, seed: int) -> float:
    """Quality per dollar realized on :data:`FUTURE_TASKS` new tasks drawn from the truth (after any drift), by a
    router that starts from the fit on all tasks with ``constants`` and learns online with their exploration
    (mean over :data:`FUTURE_SEEDS` replay seeds; every config's outcome is drawn, so nothing is skipped)."""
    from pipeline.evaluate.replay import Run, replay_runs, start_from
    from pipeline.fit.inputs import task_values
    from pipeline.fit.model import fit_model
    from pipeline.simulate.truth import mean_cost, quality_tables

    _, after = quality_tables(sc)
    cost = mean_cost(sc)
    names = sc.region_names
    shares = np.array([r.share for r in sc.regions]) / sum(r.share for r in sc.regions)
    rng = np.random.default_rng([seed, 77])
    regions = rng.choice(len(names), size=FUTURE_TASKS, p=shares)
    rows = []
    for t, r in enumerate(regions):
        for cfg in sc.configs:
            q = after[cfg.key][names[r]]
            rows.append((f"F{t:05d}", names[r], cfg.key, float(rng.random() < q), cost[cfg.key][names[r]]))
    outcomes = pl.DataFrame(rows, schema=["task", "region", "config_key", "value", "cost_t"], orient="row")
    outcomes = outcomes.with_columns(weight=pl.lit(1.0), unknown_cost=pl.lit(0, pl.Int64))
    tasks = outcomes.select("task", "region").unique(maintain_order=True).with_row_index("first_at")
    model = fit_model(inputs, constants, shipped, "quality_per_dollar")
    start = start_from(model, task_values(inputs, half_life_days=constants.half_life_days), names)
    runs = [Run(float(constants.exploration), (seed, 78, i)) for i in range(FUTURE_SEEDS)]
    results = replay_runs(start, tasks, outcomes, runs)
    return float(np.mean([r.realized_value for r in results if r.realized_value is not None]))


def evaluate_home(home: Path, seed: int) -> tuple[Any, Any, Any]:
    """Compact ``home`` and evaluate it as the nightly job does: (inputs, shipped file, evaluation)."""
    from pipeline.compact import compact
    from pipeline.evaluate.protocol import evaluate
    from pipeline.evaluate.search import Pins
    from pipeline.fit.inputs import load_inputs
    from pipeline.fit.model import load_shipped
    from pipeline.store import open_store

    compact(home)
    with open_store(home) as store:
        inputs = load_inputs(store)
    shipped = load_shipped(home / "fits" / "shipped.json")
    ev = evaluate(inputs, shipped=shipped, shipped_constants=shipped.to_constants(), pins=Pins(),
                  objective="quality_per_dollar", fraction=0.7, seed=seed)  # fmt: skip
    return inputs, shipped, ev


def default_backlog(root: Path) -> str:
    """What the truth of the default backlog (``make default-data``: preset ``backlog``, seed 7, truth in
    ``fits/truth.json``) makes the right constants, and whether the fit's verdicts agreed. Right, per family:
    the fitted values route new tasks drawn from the truth better than the shipped ones (the other family
    shipped), by the same forward measure as the study."""
    from pipeline.simulate import preset, simulate

    sc = preset("backlog")
    home = root / "default-backlog"
    simulate(home, sc, seed=7)
    inputs, shipped, ev = evaluate_home(home, 0)
    prior_fields = {f: getattr(ev.fitted, f) for f in ("prior_source", "prior_weight", "half_life_days")}
    base = future_value(inputs, ev.shipped, shipped, sc, 0)
    with_priors = future_value(inputs, ev.shipped.model_copy(update=prior_fields), shipped, sc, 0)
    with_eps = future_value(
        inputs, ev.shipped.model_copy(update={"exploration": ev.fitted.exploration}), shipped, sc, 0
    )
    lines = ["default backlog (preset backlog, seed 7; the truth is fits/truth.json):"]
    prior_text = ", ".join(f"{k} {v}" for k, v in prior_fields.items())
    exploration = ev.routing["exploration"]["recommendation"]
    for family, value, verdict, fitted_text in (
        ("prior family", with_priors, ev.routing["recommendation"], prior_text),
        ("exploration", with_eps, exploration, f"exploration {ev.fitted.exploration:g}"),
    ):
        right = value > base
        agreed = (verdict == "adopt") == right
        says = (
            "the fitted values are the shipped ones (they route alike)"
            if value == base
            else f"the truth makes the {'fitted' if right else 'shipped'} values right"
        )
        lines.append(
            f"  {family}: fitted ({fitted_text}) routes new truth tasks at {value:.4g} quality per dollar against "
            f"{base:.4g} for the shipped constants: {says}; the fit said {verdict}: "
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


def summarize(family: str, outcomes: list[Outcome]) -> dict[str, Any]:
    n = len(outcomes)
    prior = sum(o.prior == "adopt" for o in outcomes)
    explore = sum(o.exploration == "adopt" for o in outcomes)
    either = sum("adopt" in (o.prior, o.exploration) for o in outcomes)
    checked = [o.closer for o in outcomes if o.closer is not None]
    return {
        "family": family,
        "n": n,
        "adopt_prior": prior,
        "adopt_exploration": explore,
        "adopt_either": either,
        "ci_prior": clopper_pearson(prior, n),
        "ci_exploration": clopper_pearson(explore, n),
        "ci_either": clopper_pearson(either, n),
        "closer": sum(checked),
        "checked": len(checked),
        "verdicts": {
            fam: {v: sum(getattr(o, fam) == v for o in outcomes) for v in ("adopt", "keep", "insufficient-evidence")}
            for fam in ("prior", "exploration")
        },
    }


def report(s: dict[str, Any]) -> str:
    def pct(k: int, ci: tuple[float, float]) -> str:
        return f"{k}/{s['n']} ({100 * k / s['n']:.0f}%, 95% CI {100 * ci[0]:.1f}-{100 * ci[1]:.1f}%)"

    right = RIGHT[s["family"]]
    if right is None:
        head = f"false adopts (either family) {pct(s['adopt_either'], s['ci_either'])}; target <= 9/100"
    else:
        key = "prior" if right == "prior" else "exploration"
        head = f"power ({right} family) {pct(s[f'adopt_{key}'], s[f'ci_{key}'])}; target >= 72/100"
    return (
        f"{s['family']:<12} {head}\n"
        f"{'':<12} prior family adopts {pct(s['adopt_prior'], s['ci_prior'])}, exploration adopts "
        f"{pct(s['adopt_exploration'], s['ci_exploration'])}; verdicts {s['verdicts']}\n"
        f"{'':<12} when adopted, the published constants routed closer to the truth's best in "
        f"{s['closer']} of {s['checked']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--tasks", type=int, default=900)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--no-default", action="store_true", help="Skip the default backlog's truth check.")
    args = parser.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    began = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="verdicts-") as tmp:
        for family in families:
            if args.seeds <= 0:
                break
            outcomes = []
            for i, seed in enumerate(range(args.first_seed, args.first_seed + args.seeds)):
                outcomes.append(run_one(family, seed, args.tasks, Path(tmp)))
                o = outcomes[-1]
                print(
                    f"\r{family}: {i + 1}/{args.seeds} (prior {o.prior}, exploration {o.exploration}) "
                    f"{time.perf_counter() - began:.0f} s",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
            print(file=sys.stderr)
            results.append(summarize(family, outcomes))
            print(report(results[-1]), flush=True)
        if not args.no_default:
            print(default_backlog(Path(tmp)), flush=True)
    elapsed = time.perf_counter() - began
    print(f"{sum(r['n'] for r in results)} simulated fits in {elapsed:.0f} s ({elapsed / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
