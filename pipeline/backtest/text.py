"""A backtest report for people: what was replayed, the loops' table (second half, then the whole stream) and the
references, with the simulation note first."""

from __future__ import annotations

from ..nightly.backtest import BacktestReport, ColdStart, References, Summary


def _num(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _usd(x: float | None) -> str:
    return "n/a" if x is None else f"${x:.4g}"


def _rows(report: BacktestReport, part: str) -> list[list[str]]:
    rows = [
        [
            "policy",
            "objective",
            "start",
            "quality",
            "cost/task",
            "configs/task",
            "value",
            "% region best [p5, p95]",
            "% full information",
        ]
    ]
    for run in report.runs:
        s: Summary = getattr(run, part)
        rows.append(
            [
                run.policy,
                run.objective,
                run.start,
                _num(s.mean_quality),
                _usd(s.mean_cost_usd),
                _num(s.configs_per_task, 3),
                _num(s.value),
                f"{_pct(s.vs_region_best)} [{_pct(s.p5)}, {_pct(s.p95)}]",
                _pct(s.vs_full_information),
            ]
        )
    return rows


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _references(refs: References) -> str:
    starts = "; ".join(f"start {name} {r.config} {_num(r.value)}" for name, r in refs.starts.items())
    regions = ", ".join(f"{region}: {config}" for region, config in (refs.region_best.configs or {}).items())
    return (
        f"region best {_num(refs.region_best.value)} ({regions}); best single {refs.best_single.config} "
        f"{_num(refs.best_single.value)}; oracle {_num(refs.oracle.value)}; {starts}"
    )


def _cold(c: ColdStart) -> str:
    def night(x: float | None) -> str:
        return "never" if x is None else f"{x:g}"

    regions = ", ".join(
        f"{g} {night(x)}" + (f" ({c.never[g]} seed(s) never)" if c.never.get(g) else "") for g, x in c.regions.items()
    )
    return f"every region from night {night(c.every_region)}; {regions}"


def report_text(report: BacktestReport) -> str:
    a = report.about
    half = a.tasks - a.second_half_first_task
    lines = [
        f"backtest of {a.source}",
        a.note,
        f"table: {a.tasks:,} tasks x {len(a.configs)} configs ({a.dropped_tasks:,} dropped: not done by every config), "
        f"regions {', '.join(a.regions)}; "
        + (
            "costs known"
            + (f" ({a.filled_costs:,} rows without a cost take their config's mean)" if a.filled_costs else "")
            if a.cost_known
            else "no costs: every objective ranks by quality"
        )
        + ("; several rows per (task, config): each run reveals the next" if a.rows_per_pair == "several" else ""),
        f"protocol: {_count(a.nights, 'night')} of {a.night_size:,} tasks (the second half: the last {half:,}); "
        f"{_count(a.seeds, 'seed')}; "
        f"refit: {a.fit}; gate: score >= {a.pass_threshold:g}, at most {a.max_runs} runs for escalating policies; "
        f"gate noise {a.gate_noise:g}",
        "starts: " + "; ".join(f"{name} {s.config} ({s.why})" for name, s in a.starts.items()),
    ]
    for objective, refs in report.references.items():
        if refs.lambda_ is not None:
            lines.append(f"lambda ({objective}): {refs.lambda_:.6g}, {refs.lambda_source}, pinned in every refit")
        if refs.ranked_by != objective:
            lines.append(f"{objective}: no costs, ranked by {refs.ranked_by}")
    for part, title in (("second_half", "second half"), ("whole", "whole stream")):
        lines += ["", f"{title}, means over {_count(a.seeds, 'seed')}", *_table(_rows(report, part))]
    lines += ["", "cold start: the median over seeds of the night (0-based) from which each region stays within 98% "
              "of its best config that night (never: half the seeds or more never settle)"]  # fmt: skip
    for run in report.runs:
        if run.cold_start is not None:
            lines.append(f"  {run.policy} {run.objective} from {run.start}: {_cold(run.cold_start)}")
    for part, title in (("second_half", "second half"), ("whole", "whole stream")):
        lines += ["", f"references, {title} (each config's first row, chosen with hindsight on these tasks)"]
        for objective, refs in report.references.items():
            lines.append(f"  {objective}: {_references(getattr(refs, part))}")
    return "\n".join(lines)
