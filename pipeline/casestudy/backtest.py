"""The backtest on a case-study page: its lead sentence (the default policy first) and its section (docs/design.md,
Backtest), from the stats' ``backtest`` alone."""

from __future__ import annotations

from ..nightly.backtest import BacktestReport, Run
from ..nightly.stats import Stats
from . import fmt
from .doc import Block, Code, Figure, Heading, Note, Strong, para, table
from .glossary import see_glossary
from .names import short_config
from .plots import Plot

DEFAULT_POLICY = "learning_governed"


def _share(run: Run) -> str:
    s = run.second_half
    spread = f" (5th–95th percentile over seeds {fmt.pct(s.p5)}–{fmt.pct(s.p95)})" if s.p5 != s.p95 else ""
    return f"{fmt.pct(s.vs_region_best)}{spread}"


def _start_words(run: Run) -> str:
    return f"from the {run.start} start ({short_config(run.start_config)})"


def _ordered(report: BacktestReport) -> list[Run]:
    """The default policy first, then the others in the report's order."""
    return sorted(report.runs, key=lambda r: r.policy != DEFAULT_POLICY)


def backtest_lead(stats: Stats) -> list[Block]:
    """One headline paragraph: how far each policy's loop got in the backtest, the default policy first."""
    report = stats.backtest
    if report is None:
        return []
    a = report.about
    runs = _ordered(report)
    objectives = sorted({r.objective for r in runs})
    said = "; ".join(
        f"{r.policy} {_start_words(r)} reached {_share(r)} of the best region-level table"
        + (f" ({r.objective})" if len(objectives) > 1 else "")
        + f" at {fmt.num(r.second_half.configs_per_task, 2)} configs run per task"
        for r in runs
    )
    return [
        para(
            Strong("Backtest (a simulation of deployment on this table, not a deployment): "),
            f"replaying its {fmt.count(a.tasks)} tasks as a dispatcher would live them (one configuration per task, "
            f"only the runs chosen revealed, the table refit every night of {fmt.count(a.night_size)} tasks, "
            f"{a.seeds} seeds), over the second half: {said}.",
            lead=True,
        )
    ]


def _rows(report: BacktestReport, part: str) -> list[list[str]]:
    rows = []
    for run in _ordered(report):
        s = getattr(run, part)
        rows.append(
            [
                run.policy + (" (default)" if run.policy == DEFAULT_POLICY else ""),
                run.objective,
                f"{run.start} ({short_config(run.start_config)})",
                fmt.num(s.mean_quality, 3),
                fmt.usd(s.mean_cost_usd),
                fmt.num(s.configs_per_task, 2),
                f"{fmt.pct(s.vs_region_best)} [{fmt.pct(s.p5)}, {fmt.pct(s.p95)}]",
                fmt.pct(s.vs_full_information),
            ]
        )
    return rows


def backtest_section(stats: Stats, plots: dict[str, Plot]) -> list[Block]:
    report = stats.backtest
    out: list[Block] = [Heading(2, "Backtest: the loop as a dispatcher would live it", "backtest")]
    if report is None:
        return [
            *out,
            para(
                "No backtest is attached to this case study. A backtest needs a full-information table (every "
                "configuration did every task); run ",
                Code("ratings backtest TABLE --out DIR"),
                " and attach it with ",
                Code("fit-routing --backtest DIR/backtest.json"),
                ".",
            ),
        ]
    a = report.about
    out += [
        Note((a.note,)),
        para(
            f"{fmt.count(a.tasks)} tasks x {len(a.configs)} configurations"
            + (f" ({fmt.count(a.dropped_tasks)} dropped: not done by every configuration)" if a.dropped_tasks else "")
            + f", in time order, in {a.nights} nights of {fmt.count(a.night_size)} tasks; {a.seeds} seeds. Each "
            "task is routed by the product's router with the table refit after the night before (refit: "
            f"{a.fit}), the decision logged with its propensity, and only the configurations run are revealed. "
            f"Policies that escalate run their next choice after a gate below {a.pass_threshold:g}, at most "
            f"{a.max_runs} runs"
            + (f"; the gate's verdict is wrong {fmt.pct(a.gate_noise)} of the time" if a.gate_noise else "")
            + ". Starts: "
            + "; ".join(f"{name}: {short_config(s.config)} ({s.why})" for name, s in a.starts.items())
            + ".",
        ),
        see_glossary("best region-level table", "full-information loop", "realized value"),
    ]
    columns = [
        "policy",
        "objective",
        "start",
        "quality",
        "cost",
        "configs run",
        "% of the best region-level table [p5, p95]",
        "% of the full-information loop",
    ]
    numeric = [False, False, False, True, True, True, True, True]
    keep = [i for i, c in enumerate(columns) if a.cost_known or c != "cost"]
    for part, title in (("second_half", "the second half of the stream"), ("whole", "the whole stream")):
        rows = _rows(report, part)
        out.append(
            table(
                [columns[i] for i in keep],
                [[r[i] for i in keep] for r in rows],
                f"Over {title}: means over seeds; [p5, p95] over seeds.",
                [numeric[i] for i in keep],
            )
        )
    out += _references(report)
    plot = plots.get("learning-curve.svg")
    if plot is not None:
        out.append(
            Figure(
                plot.file,
                plot.alt,
                (
                    "The realized value per night of each policy (mean over seeds; the band: 5th to 95th percentile) "
                    "against the best region-level table, the best single and the start; dashed: the same loop with "
                    "full information.",
                ),
            )
        )
    return out


def _references(report: BacktestReport) -> list[Block]:
    """One paragraph per objective: the references of the second half, each with its value."""
    out: list[Block] = []
    for objective, refs in report.references.items():
        r = refs.second_half
        regions = ", ".join(f"{region}: {short_config(c)}" for region, c in (r.region_best.configs or {}).items())
        lam = f" (λ {refs.lambda_:.4g}, {refs.lambda_source})" if refs.lambda_ is not None else ""
        ranked = "" if refs.ranked_by == objective else f", ranked by {refs.ranked_by} (no costs)"
        out.append(
            para(
                Strong(f"References, {objective}{lam}{ranked}, second half: "),
                f"the best region-level table in hindsight ({regions}) realized {fmt.num(r.region_best.value)}; "
                f"the best single ({short_config(r.best_single.config or '')}) {fmt.num(r.best_single.value)}; "
                f"the per-task oracle {fmt.num(r.oracle.value)}; "
                + "; ".join(
                    f"the {name} start ({short_config(s.config or '')}) {fmt.num(s.value)}"
                    for name, s in r.starts.items()
                )
                + ".",
            )
        )
    return out
