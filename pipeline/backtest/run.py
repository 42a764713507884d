"""The whole backtest: the table, its starts and lambdas, the full-information loops, every (policy, objective,
start, seed) loop, and the report (docs/design.md, Backtest).

Loops run in ``jobs`` processes (spawned, one loop per task of the pool, results gathered in loop order), so any
``jobs`` gives the same bytes as one. Scratch homes live under ``<out>/homes/`` and are removed at the end unless
``keep_homes``; nothing outside ``out`` is written (a ``--home`` is only read).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..defaults import FitMode, Objective
from ..fit.model import load_shipped
from ..nightly.backtest import (
    About,
    BacktestReport,
    ColdStart,
    Night,
    NightReferences,
    ObjectiveReferences,
    Reference,
    References,
    Run,
    Start,
    StartChoice,
    Summary,
)
from ..nightly.options import FitOptions
from ..routing.policies import POLICIES
from ..routing.router import DEFAULT_POLICY, Router
from ..routing.table import RoutingTable
from ..streams.imports import ConfigFormat
from ..workspace import BacktestOut, StrPath, Workspace
from .data import BacktestInputError, FullTable, read_file, read_home
from .loop import Dispatcher, Plan, Stream, full_information_events
from .references import best_choice, effective_objective, realized_value
from .refit import refit, scratch_home

#: The share of the tasks in a night by default, in percent: ceil(5% of n).
NIGHT_PERCENT = 5
DECIMALS = 9


class BacktestOptions(BaseModel):
    """The options of ``ratings backtest`` (the CLI builds it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    policies: tuple[str, ...] = (DEFAULT_POLICY,)
    objectives: tuple[Objective, ...] = ("quality_per_dollar",)
    starts: tuple[Start, ...] = ("frontier",)
    shipped: str | None = None  # shipped.json: its constants and priors for every start; its static for `shipped`
    lambda_: float | None = Field(default=None, alias="lambda", gt=0.0)
    night_size: int | None = Field(default=None, ge=1)
    seeds: int = Field(default=20, ge=1)
    pass_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    max_runs: int = Field(default=3, ge=1)
    gate_noise: float = Field(default=0.0, ge=0.0, le=1.0)
    fit: FitMode = "table"
    cost_floor_usd: float = Field(default=0.000001, gt=0.0)
    config_format: ConfigFormat = "auto"
    jobs: int = Field(default=1, ge=1)
    keep_homes: bool = False


@dataclass(frozen=True)
class _Setup:
    """What every loop of one backtest shares (sent once to each worker process)."""

    table: FullTable
    options: BacktestOptions
    layout: BacktestOut
    bounds: tuple[tuple[int, int], ...]  # each night's [first, last)
    starts: dict[str, str]  # start name -> config
    shipped: dict[str, dict[str, Any]]  # start name -> the scratch homes' shipped.json
    lambdas: dict[str, float | None]  # objective -> lambda pinned in every refit (utility with costs)

    def fit_options(self, objective: str) -> FitOptions:
        o = self.options
        return FitOptions(
            objective=objective,  # type: ignore[arg-type]
            lambda_=self.lambdas.get(objective),
            pass_threshold=o.pass_threshold,
            cost_floor_usd=o.cost_floor_usd,
        )


#: The setup of the backtest this process runs loops for (set once per worker process).
_STATE: dict[str, _Setup] = {}


def _install(setup: _Setup) -> None:
    _STATE["setup"] = setup


def _setup() -> _Setup:
    return _STATE["setup"]


def run_backtest(
    out: str | Path,
    *,
    table: str | Path | None = None,
    home: Workspace | StrPath | None = None,
    options: BacktestOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> BacktestReport:
    """Backtest the long table ``table`` (or the store of ``home``) into ``out``: ``backtest.json`` (the report),
    ``backtest.txt`` (its table), ``learning-curve.svg``; returns the report."""
    options = options or BacktestOptions()
    say = progress or (lambda _line: None)
    unknown = [p for p in options.policies if p not in POLICIES]
    if unknown:
        raise BacktestInputError(f"unknown policy {', '.join(unknown)}; known: {', '.join(sorted(POLICIES))}")
    if (table is None) == (home is None):
        raise BacktestInputError("give a long table (TABLE) or --home, not both and not neither")
    layout = _prepare(BacktestOut(Path(out).absolute()))
    say("reading the table")
    if table is not None:
        full = read_file(table, scratch_home(layout.input_home), config_format=options.config_format)
    else:
        full = read_home(Workspace.of(home))
    setup = _plan(full, options, layout, None if home is None else Workspace.of(home))
    loops: list[tuple[str, str, str, int]] = [
        (policy, objective, start, seed)
        for policy in options.policies
        for objective in options.objectives
        for start in options.starts
        for seed in range(options.seeds)
    ]
    informed: list[tuple[str, str]] = [
        (objective, start) for objective in options.objectives for start in options.starts
    ]
    with _Pool(setup, options.jobs) as pool:
        say(f"the full-information loops' refits ({len(informed)} x {len(setup.bounds) - 1} nights)")
        tables = dict(zip(informed, pool.map(_full_information_tables, informed), strict=True))
        units = [(*loop, tables[(loop[1], loop[2])]) for loop in loops]
        streams = []
        for done, result in enumerate(pool.imap(_loop, units), start=1):
            streams.append(result)
            say(f"loop {done}/{len(units)} ({' '.join(map(str, loops[done - 1]))})")
    report = _report(setup, loops, streams)
    _write(layout, report)
    if not options.keep_homes:
        shutil.rmtree(layout.homes, ignore_errors=True)
    return report


def _prepare(layout: BacktestOut) -> BacktestOut:
    """``--out`` empty, new, or a previous backtest's (its outputs are replaced); anything else is refused."""
    out = layout.root
    if out.exists() and not out.is_dir():
        raise BacktestInputError(f"--out {out} is a file; give a directory")
    if out.is_dir() and any(out.iterdir()) and not layout.report.is_file():
        raise BacktestInputError(f"--out {out} holds files that are not a backtest's; give an empty or new directory")
    shutil.rmtree(layout.homes, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    return layout


def _plan(full: FullTable, options: BacktestOptions, layout: BacktestOut, home: Workspace | None) -> _Setup:
    """Nights, starts (chosen with hindsight on the whole table), lambdas and the scratch homes' shipped.json."""
    n = full.n
    size = options.night_size or max(1, -(-n * NIGHT_PERCENT // 100))  # ceil, in integers
    bounds = tuple((a, min(a + size, n)) for a in range(0, n, size))
    shipped_path = options.shipped
    if shipped_path is None and home is not None:
        shipped_path = str(home.shipped) if home.shipped.is_file() else None
    shipped = load_shipped(shipped_path)
    base = shipped.model_dump(mode="json", by_alias=True, exclude_none=True)
    base = {k: v for k, v in base.items() if v not in ({}, [])}
    starts: dict[str, str] = {}
    files: dict[str, dict[str, Any]] = {}
    for start in options.starts:
        if start == "shipped":
            static = shipped.cheap_config if shipped.cheap_config and shipped.frontier_config else None
            config = static or shipped.default_config
            if config is None:
                raise BacktestInputError(
                    "--start shipped needs a shipped.json (--shipped FILE, or the home's) that names default_config "
                    "(or cheap_config and frontier_config)"
                )
            if config not in full.configs:
                raise BacktestInputError(
                    f"--start shipped: {config} is not a config of the table; its configs: {', '.join(full.configs)}"
                )
            starts[start], files[start] = config, base
        else:
            config = full.configs[_start_index(full, start)]
            rest = {k: v for k, v in base.items() if k not in ("cheap_config", "frontier_config")}
            starts[start], files[start] = config, {**rest, "default_config": config}
    lambdas: dict[str, float | None] = {
        o: _lambda(full, options) if o == "utility" and full.cost_known else None for o in options.objectives
    }
    return _Setup(full, options, layout, bounds, starts, files, lambdas)


def _start_index(full: FullTable, start: str) -> int:
    """cheapest: the lowest mean cost (no costs: the lowest mean quality); frontier: the highest mean quality.
    Ties: the first config in key order."""
    if start == "frontier":
        return int(np.argmax(full.mean_quality))
    return int(np.argmin(full.mean_cost if full.cost_known else full.mean_quality))


def start_reason(full: FullTable, start: str, config: str) -> str:
    if start == "shipped":
        return f"the static choice of the shipped.json given: {config}"
    k = full.configs.index(config)
    if start == "frontier":
        return f"the highest mean quality over the whole table ({full.mean_quality[k]:.4g}), chosen with hindsight"
    if full.cost_known:
        return f"the lowest mean cost over the whole table (${full.mean_cost[k]:.4g}), chosen with hindsight"
    return f"no costs: the lowest mean quality over the whole table ({full.mean_quality[k]:.4g}), chosen with hindsight"


def _lambda(full: FullTable, options: BacktestOptions) -> float:
    """--lambda, else (c_f - c_c) / (q_f - q_c) over the whole table: f the highest mean quality, c the lowest mean
    cost (the price of quality between the cheapest config and the frontier)."""
    if options.lambda_ is not None:
        return float(options.lambda_)
    f, c = int(np.argmax(full.mean_quality)), int(np.argmin(full.mean_cost))
    dq, dc = float(full.mean_quality[f] - full.mean_quality[c]), float(full.mean_cost[f] - full.mean_cost[c])
    if dq <= 0 or dc <= 0:
        raise BacktestInputError(
            f"--objective utility: the default lambda (c_f - c_c) / (q_f - q_c) is undefined here ({full.configs[f]} "
            f"has the highest mean quality and {full.configs[c]} the lowest mean cost); give --lambda"
        )
    return round(dc / dq, DECIMALS)


# --------------------------------------------------------------------------- the loops (run in workers)
def _full_information_tables(key: tuple[str, str]) -> list[dict[str, Any] | None]:
    """The full-information loop's table for each night (None on the first): every config run once on every task of
    the nights before, refit the same way. The same for every policy and seed of (objective, start)."""
    setup = _setup()
    objective, start = key
    root = setup.layout.informed_home(objective, start)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    home = scratch_home(root, setup.shipped[start])
    options = setup.fit_options(objective)
    tables: list[dict[str, Any] | None] = [None]
    for a, b in setup.bounds[:-1]:
        events = full_information_events(setup.table, a, b, setup.options.pass_threshold)
        tables.append(refit(home, events, options, setup.options.fit).to_json_dict())
    return tables


def _loop(unit: tuple[str, str, str, int, list[dict[str, Any] | None]]) -> tuple[Stream, Stream]:
    """One seed of (policy, objective, start): the bandit loop refitting its own scratch home every night, then the
    full-information loop on the shared tables."""
    setup = _setup()
    policy, objective, start, seed, informed = unit
    o = setup.options
    plan = Plan(policy, setup.starts[start], seed, o.pass_threshold, o.max_runs, o.gate_noise)
    root = setup.layout.loop_home(policy, objective, start, seed)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    home = scratch_home(root, setup.shipped[start])
    options = setup.fit_options(objective)
    bandit = Dispatcher(setup.table, plan)
    router: Router | None = None
    for a, b in setup.bounds:
        events = bandit.night(a, b, router)
        if b < setup.table.n:
            router = Router(refit(home, events, options, o.fit))
    full = Dispatcher(setup.table, plan, log=False)
    for (a, b), table in zip(setup.bounds, informed, strict=True):
        full.night(a, b, Router(RoutingTable.model_validate(table)) if table is not None else None)
    if not o.keep_homes:
        shutil.rmtree(root, ignore_errors=True)
    return bandit.stream, full.stream


class _Pool:
    """``jobs`` spawned worker processes, or the calling process itself for one job (same results)."""

    def __init__(self, setup: _Setup, jobs: int) -> None:
        self.setup, self.jobs = setup, jobs
        self.pool: Any = None

    def __enter__(self) -> _Pool:
        if self.jobs > 1:
            context = multiprocessing.get_context("spawn")
            self.pool = context.Pool(self.jobs, initializer=_install, initargs=(self.setup,))
        else:
            _install(self.setup)
        return self

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return list(self.imap(fn, items))

    def imap(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterable[Any]:
        return self.pool.imap(fn, items) if self.pool is not None else map(fn, items)

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.terminate() if exc[0] is not None else self.pool.close()
            self.pool.join()


# --------------------------------------------------------------------------- the report
def _r(x: float | None) -> float | None:
    """Rounded to 9 decimals; NaN and infinities become None."""
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), DECIMALS) + 0.0


def _ratio(value: float, reference: float | None) -> float | None:
    """value / reference when the reference is > 0, else None."""
    return value / reference if reference is not None and reference > 0 else None


def _mean(values: list[float | None]) -> float | None:
    """The mean over seeds; None when any seed's figure is undefined."""
    if not values or any(v is None for v in values):
        return None
    return float(np.mean(np.array(values, dtype=np.float64)))


@dataclass(frozen=True)
class _Scorer:
    """The objective's value of loops and references on slices of the task order."""

    table: FullTable
    objective: str  # ranked by (quality without costs)
    lam: float | None
    floor: float

    def value(self, quality: np.ndarray, cost: np.ndarray) -> float:
        return realized_value(quality, cost, self.objective, self.lam, self.floor)

    def reference(self, a: int, b: int, choice: np.ndarray) -> Reference:
        """The reference that runs config ``choice[i]`` on task ``a + i``."""
        rows = np.arange(a, b)
        q, c = self.table.quality[rows, choice], self.table.cost[rows, choice]
        return Reference(
            value=_r(self.value(q, c)),
            mean_quality=_r(float(q.mean())),
            mean_cost_usd=_r(float(c.mean())) if self.table.cost_known else None,
        )

    def references(self, a: int, b: int, starts: dict[str, str]) -> References:
        t = self.table
        q, c = t.quality[a:b], t.cost[a:b]
        n = b - a
        index = {cfg: k for k, cfg in enumerate(t.configs)}
        start_refs = {
            name: self.reference(a, b, np.full(n, index[cfg])).model_copy(update={"config": cfg})
            for name, cfg in starts.items()
        }
        single = int(best_choice(q, c, np.zeros(n, dtype=np.int64), 1, self.objective, self.lam, self.floor)[0])
        codes = t.region_codes()[a:b]
        per_region = best_choice(q, c, codes, len(t.regions), self.objective, self.lam, self.floor)
        oracle = best_choice(q, c, np.arange(n), n, self.objective, self.lam, self.floor)
        present = sorted(set(codes.tolist()))
        return References(
            starts=start_refs,
            best_single=self.reference(a, b, np.full(n, single)).model_copy(update={"config": t.configs[single]}),
            region_best=self.reference(a, b, per_region[codes]).model_copy(
                update={"configs": {t.regions[g]: t.configs[int(per_region[g])] for g in present}}
            ),
            oracle=self.reference(a, b, oracle),
        )


def _report(
    setup: _Setup, loops: list[tuple[str, str, str, int]], streams: list[tuple[Stream, Stream]]
) -> BacktestReport:
    t, o = setup.table, setup.options
    n = t.n
    half = n - math.ceil(n / 2)
    scorers: dict[str, _Scorer] = {
        obj: _Scorer(t, effective_objective(obj, t.cost_known), setup.lambdas.get(obj), o.cost_floor_usd)
        for obj in o.objectives
    }
    refs: dict[str, ObjectiveReferences] = {}
    for obj, scorer in scorers.items():
        lam = setup.lambdas.get(obj)
        refs[obj] = ObjectiveReferences(
            objective=obj,  # type: ignore[arg-type]
            ranked_by=scorer.objective,  # type: ignore[arg-type]
            lambda_=lam,
            lambda_source=(
                None
                if lam is None
                else "--lambda"
                if o.lambda_ is not None
                else "(c_f - c_c) / (q_f - q_c) on the whole table"
            ),
            whole=scorer.references(0, n, setup.starts),
            second_half=scorer.references(half, n, setup.starts),
            nights=[
                NightReferences(night=i, **scorer.references(a, b, setup.starts).model_dump())
                for i, (a, b) in enumerate(setup.bounds)
            ],
        )
    runs = [
        _run(setup, scorers[obj], refs[obj], (policy, obj, start), loops, streams)
        for (policy, obj, start) in dict.fromkeys(loop[:3] for loop in loops)
    ]
    about = About(
        source=t.source,
        tasks=n,
        dropped_tasks=t.dropped_tasks,
        configs=list(t.configs),
        regions=list(t.regions),
        cost_known=t.cost_known,
        filled_costs=t.filled_costs,
        rows_per_pair="several" if t.several_rows else "one",
        night_size=setup.bounds[0][1] - setup.bounds[0][0],
        nights=len(setup.bounds),
        second_half_first_task=half,
        **o.model_dump(include={"seeds", "fit", "pass_threshold", "max_runs", "gate_noise"}),  # as given
        starts={s: StartChoice(config=c, why=start_reason(t, s, c)) for s, c in setup.starts.items()},
        policies=list(o.policies),
    )
    return BacktestReport(runs=runs, references=refs, about=about)


def _run(
    setup: _Setup,
    scorer: _Scorer,
    ref: ObjectiveReferences,
    key: tuple[str, str, str],
    loops: list[tuple[str, str, str, int]],
    streams: list[tuple[Stream, Stream]],
) -> Run:
    """One (policy, objective, start) over its seeds: the whole stream, its second half, each night."""
    policy, objective, start = key
    seeds = [s for loop, s in zip(loops, streams, strict=True) if loop[:3] == key]
    utility = objective == "utility" and setup.table.cost_known
    n = setup.table.n
    half = n - math.ceil(n / 2)

    def summary(a: int, b: int, r: References) -> dict[str, Any]:
        return _summary(scorer, seeds, a, b, r, start, utility)

    return Run(
        policy=policy,
        objective=objective,  # type: ignore[arg-type]
        start=start,  # type: ignore[arg-type]
        start_config=setup.starts[start],
        whole=Summary(**summary(0, n, ref.whole)),
        second_half=Summary(**summary(half, n, ref.second_half)),
        nights=[
            Night(night=i, first_task=a, tasks=b - a, **summary(a, b, ref.nights[i]))
            for i, (a, b) in enumerate(setup.bounds)
        ],
        cold_start=_cold_start(scorer, seeds, setup.bounds),
    )


#: A region has settled from the night its value stays within this share of the region's best that night.
SETTLED = 0.98


def _settled_night(ratios: list[float | None]) -> float:
    """The first night from which every later ratio is at least :data:`SETTLED` (None: nothing to lose, no task of
    the region, counts as settled); infinity when the last night is below it."""
    bad = [i for i, r in enumerate(ratios) if r is not None and r < SETTLED]
    if bad and bad[-1] == len(ratios) - 1:
        return math.inf
    return float(bad[-1] + 1) if bad else 0.0


def _cold_start(scorer: _Scorer, seeds: list[tuple[Stream, Stream]], bounds: Sequence[tuple[int, int]]) -> ColdStart:
    """Per region and seed, :func:`_settled_night` of the loop's value over the region's best config each night (its
    tasks of that night, in hindsight); the medians over seeds (:class:`ColdStart`)."""
    t = scorer.table
    codes = t.region_codes()
    nights: dict[str, list[float]] = {g: [] for g in t.regions}
    for bandit, _ in seeds:
        for g, region in enumerate(t.regions):
            ratios: list[float | None] = []
            for a, b in bounds:
                rows = a + np.flatnonzero(codes[a:b] == g)
                if rows.size == 0:
                    ratios.append(None)
                    continue
                best = int(best_choice(t.quality[rows], t.cost[rows], np.zeros(rows.size, dtype=np.int64), 1,
                                       scorer.objective, scorer.lam, scorer.floor)[0])  # fmt: skip
                reference = scorer.value(t.quality[rows, best], t.cost[rows, best])
                ratios.append(_ratio(scorer.value(bandit.quality[rows], bandit.cost[rows]), reference))
            nights[region].append(_settled_night(ratios))
    latest = [max(per_seed) for per_seed in zip(*nights.values(), strict=True)] if nights else []

    def median(values: list[float]) -> float | None:
        m = float(np.median(values)) if values else math.inf
        return m if math.isfinite(m) else None

    return ColdStart(
        threshold=SETTLED,
        regions={g: median(v) for g, v in nights.items()},
        every_region=median(latest),
        never={g: sum(math.isinf(x) for x in v) for g, v in nights.items()},
    )


def _summary(
    scorer: _Scorer, seeds: list[tuple[Stream, Stream]], a: int, b: int, ref: References, start: str, utility: bool
) -> dict[str, Any]:
    """The figures of one loop on tasks [a, b), per seed, then their means over seeds (report doc)."""
    region_best = ref.region_best.value
    start_value = ref.starts[start].value
    per_seed: dict[str, list[float | None]] = {k: [] for k in ("q", "c", "runs", "value", "rb", "fi", "fiv", "lift")}
    for bandit, full in seeds:
        value = scorer.value(bandit.quality[a:b], bandit.cost[a:b])
        informed = scorer.value(full.quality[a:b], full.cost[a:b])
        per_seed["q"].append(float(bandit.quality[a:b].mean()))
        per_seed["c"].append(float(bandit.cost[a:b].mean()))
        per_seed["runs"].append(float(bandit.runs[a:b].mean()))
        per_seed["value"].append(value)
        per_seed["rb"].append(_ratio(value, region_best))
        per_seed["fi"].append(_ratio(value, informed))
        per_seed["fiv"].append(informed)
        lift = None
        if utility and region_best is not None and start_value is not None and region_best != start_value:
            lift = (value - start_value) / (region_best - start_value)
        per_seed["lift"].append(lift)
    rb = per_seed["rb"]
    p5 = p95 = None
    if all(v is not None for v in rb):
        p5, p95 = (float(x) for x in np.percentile(np.array(rb, dtype=np.float64), [5, 95]))
    return {
        "mean_quality": _r(_mean(per_seed["q"])),
        "mean_cost_usd": _r(_mean(per_seed["c"])) if scorer.table.cost_known else None,
        "configs_per_task": _r(_mean(per_seed["runs"])),
        "value": _r(_mean(per_seed["value"])),
        "vs_region_best": _r(_mean(rb)),
        "vs_full_information": _r(_mean(per_seed["fi"])),
        "lift": _r(_mean(per_seed["lift"])) if utility else None,
        "p5": _r(p5),
        "p95": _r(p95),
        "full_information_value": _r(_mean(per_seed["fiv"])),
    }


def _write(layout: BacktestOut, report: BacktestReport) -> None:
    from ..casestudy.plots import learning_curve_plot
    from .text import report_text

    layout.report.write_text(json.dumps(report.to_json_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    layout.text.write_text(report_text(report) + "\n", encoding="utf-8")
    plot = learning_curve_plot(report)
    layout.figure(plot.file).write_bytes(plot.svg)


def progress_printer(enabled: bool) -> Callable[[str], None] | None:
    """Stage lines on stderr (the CLI asks on a terminal unless --quiet)."""
    if not enabled:
        return None
    return lambda line: print(f"backtest: {line}", file=sys.stderr, flush=True)
