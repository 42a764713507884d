"""The body of a case study: data, constants, baselines, figures, ladders, policies, signals, how to reproduce."""

from __future__ import annotations

from ..nightly.stats import Stats
from . import fmt
from .doc import Block, Bullets, Code, Figure, Heading, Inline, Note, para, table
from .generic import blocks_for, scalar
from .optional import (
    first,
    frontier_aiq,
    frontier_points,
    ladder_regions,
    ladder_summary,
    policy_rows,
    rungs,
    short_config,
)
from .plots import Plot

#: What sequential replay's realized value measures, per objective (DESIGN 6).
REALIZED = {
    "quality_per_dollar": "total quality ÷ total cost, i.e. quality per dollar",
    "utility": "mean of λ·quality − cost",
    "quality": "mean quality",
}
CONSTANT_NAMES = (
    "prior_source",
    "prior_weight",
    "exploration",
    "half_life_days",
    "min_samples",
    "cost_floor_usd",
    "lambda",
)


def fitted_home(stats: Stats) -> str | None:
    """The ``--home`` of the command that produced the stats, so the page's other commands name it too."""
    import shlex

    try:
        words = shlex.split(stats.source.command or "")
    except ValueError:
        return None
    return next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--home"), None)


def with_home(stats: Stats, command: str) -> str:
    import shlex

    home = fitted_home(stats)
    return command if home is None else f"{command} --home {shlex.quote(home)}"


def render_command(stats: Stats) -> str:
    return with_home(stats, f"ratings case-study {stats.name}")


def source_caption(stats: Stats) -> tuple[Inline, ...]:
    """Where a figure's numbers come from: the manifest, the event counts, the commands."""
    src = stats.source
    events = ", ".join(f"{n:,} {kind}" for kind, n in src.events.items()) or "no event counts"
    parts: list[Inline] = [f"Source: store manifest {src.manifest if src.manifest is not None else 'n/a'} ({events})"]
    if src.command:
        parts += ["; fitted by ", Code(src.command)]
    parts += ["; drawn by ", Code(render_command(stats)), " from stats.json."]
    return tuple(parts)


def costed_table(
    stats: Stats, columns: list[str], rows: list[list[str]], caption: str = "", numeric: list[bool] | None = None
) -> Block:
    """A table whose cost columns are left out when the data has no costs (they would be all n/a)."""
    keep = [i for i, c in enumerate(columns) if stats.cost_known or "cost" not in c]
    numeric = numeric or [False] * len(columns)
    return table([columns[i] for i in keep], [[r[i] for i in keep] for r in rows], caption, [numeric[i] for i in keep])


def _not_computed(key: str) -> Block:
    return para("Not computed: the stats file has no ", Code(key), " section (the stage that writes it did not run).")


def data_section(stats: Stats) -> list[Block]:
    r, s = stats.ratings, stats.split
    kinds = ", ".join(f"{n:,} {k}" for k, n in r.by_rater_kind.items()) or "none"
    return [
        Heading(2, "The data", "data"),
        Bullets(
            (
                (f"{fmt.count(r.total)} ratings ({kinds}); {fmt.count(r.retracted)} retracted and ignored.",),
                (
                    f"Chronological split: {fmt.count(s.learned_tasks)} learned tasks (the last "
                    f"{fmt.count(s.validation_tasks)} "
                    f"of them validate the constants), {fmt.count(s.held_out_tasks)} held-out tasks from "
                    f"{s.cutoff_at or 'n/a'}; {fmt.count(s.eligible_held_out)} held-out tasks were done by two or more "
                    f"configurations and are eligible for the hit rate.",
                ),
                (
                    "Objective: ",
                    Code(stats.objective),
                    "." + ("" if stats.cost_known else " Costs are unknown: ranking by quality alone."),
                ),
            )
        ),
    ]


def constants_section(stats: Stats) -> list[Block]:
    c = stats.constants
    shipped, fitted = c.shipped.model_dump(by_alias=True), c.fitted.model_dump(by_alias=True)
    names = [n for n in CONSTANT_NAMES if n != "lambda" or shipped.get(n) is not None or fitted.get(n) is not None]
    rows = [
        [n, fmt.constant(n, shipped.get(n)), fmt.constant(n, fitted.get(n)), c.selected_on.get(n, "not searched")]
        for n in names
    ]
    return [
        Heading(2, "Shipped and fitted constants", "constants"),
        table(
            ["constant", "shipped", "fitted", "fitted value chosen on"],
            rows,
            f"The published routing table uses the {c.published} constants.",
        ),
    ]


def baselines_section(stats: Stats) -> list[Block]:
    b = stats.baselines
    rows = []
    for name in ("oracle", "fitted", "shipped", "best_single", "cheapest", "random"):
        x = getattr(b, name)
        if name == "cheapest" and not stats.cost_known:  # no costs: there is no cheapest configuration
            continue
        rows.append(
            [
                name.replace("_", " "),
                short_config(x.config) if x.config else "",
                fmt.pct(x.hit_rate),
                fmt.num(x.mean_quality, 3),
                fmt.usd(x.mean_cost_usd),
            ]
        )
    rp = stats.replay
    replay = [
        [
            k,
            fmt.constant("exploration", run.exploration),
            fmt.num(run.realized_value, 4),
            fmt.count(run.tasks_routed),
            fmt.count(run.tasks_skipped),
        ]
        for k, run in (("shipped", rp.shipped), ("fitted", rp.fitted))
    ]
    return [
        Heading(2, "Against the baselines", "baselines"),
        costed_table(
            stats,
            ["route by", "config", "hit rate", "mean quality", "mean cost"],
            rows,
            f"On the {fmt.count(stats.split.eligible_held_out)} eligible held-out tasks.",
            [False, False, True, True, True],
        ),
        para(
            "Sequential replay on the held-out tasks (each route reveals only the chosen configuration's outcome; "
            f"realized value: {REALIZED[stats.objective]} over the period):"
        ),
        table(
            ["constants", "exploration", "realized value", "tasks routed", "tasks skipped"],
            replay,
            numeric=[False, True, True, True, True],
        ),
    ]


def figure(stats: Stats, plots: dict[str, Plot], file: str, *caption: Inline) -> Block | None:
    plot = plots.get(file)
    return Figure(file, plot.alt, (*caption, " ", *source_caption(stats))) if plot else None


def grid_section(stats: Stats, plots: dict[str, Plot]) -> list[Block]:
    f = stats.constants.fitted
    fig = figure(
        stats,
        plots,
        "grid.svg",
        "Held-out hit rate (%) expected under exploration, over prior weight and exploration with the other "
        f"constants at their fitted values (half-life {fmt.constant('half_life_days', f.half_life_days)}). "
        "Diagnostic only: the constants were chosen on validation, never on these cells. Solid green box: "
        "fitted; dashed red box: the shipped prior weight and exploration (other constants as fitted).",
    )
    out: list[Block] = [
        Heading(2, "The grid of constants (diagnostic)", "grid"),
        fig or para("No grid rows were evaluated."),
    ]
    replay = [r for r in stats.grid if (r.model_extra or {}).get("kind") == "replay"]
    if replay:
        rows = [
            [
                fmt.constant("exploration", r.exploration) + (" (fitted)" if r.exploration == f.exploration else ""),
                fmt.num(r.validation),
                fmt.num(r.held_out_diagnostic),
            ]
            for r in replay
        ]
        out += [
            para(
                "Exploration is chosen by sequential replay on the validation tasks (exploring always lowers "
                "the immediate hit rate, so the hit rate cannot choose it):"
            ),
            table(
                ["exploration", "validation realized value", "held-out (diagnostic)"], rows, numeric=[False, True, True]
            ),
        ]
    return out


def frontier_section(stats: Stats, plots: dict[str, Plot]) -> list[Block]:
    out: list[Block] = [Heading(2, "Cost and quality", "frontier")]
    if not stats.cost_known:
        out.append(
            para(
                "Costs are unknown in this data, so there is no cost-quality frontier: the ranking is by "
                "quality alone (see the baselines table for mean quality)."
            )
        )
    else:
        drawn = {p.kind for p in frontier_points(stats) if p.cost is not None and p.quality is not None}
        names = [
            text
            for kind, text in (
                ("single", "single configurations"),
                ("router", "the router over the lambda sweep"),
                ("ladder", "the published ladders"),
                ("shipped", "the shipped constants"),
                ("fitted", "the fitted constants"),
                ("oracle", "the oracle"),
            )
            if kind in drawn
        ]
        caption = [
            "Mean held-out quality against mean cost per task: "
            + ", ".join(names[:-1])
            + (" and " if len(names) > 1 else "")
            + names[-1]
            + "."
        ]
        summary = ladder_summary(stats)
        if summary and summary.get("gate_is_target"):
            caption.append(" The ladder point is an upper bound for a perfect verifier (its gate is the target).")
        if summary:
            caption.append(
                " The ladder is measured on the fully observed tasks only "
                f"({fmt.pct(first(summary, 'coverage'))} coverage)."
            )
        fig = figure(stats, plots, "frontier.svg", *caption)
        out.append(fig or para("No cost figures to draw."))
    singles = sorted(
        (p for p in frontier_points(stats) if p.kind == "single"),
        key=lambda p: (p.cost or 0.0, p.label) if stats.cost_known else (-(p.quality or 0.0), p.label),
    )
    if singles:
        out.append(
            costed_table(
                stats,
                ["single configuration", "mean quality", "mean cost"],
                [[short_config(p.label), fmt.num(p.quality, 3), fmt.usd(p.cost)] for p in singles],
                "Each configuration alone, over the held-out tasks it did.",
                [False, True, True],
            )
        )
    aiq = frontier_aiq(stats)
    if aiq:
        out.append(
            para(
                "Area under the cost-quality frontier (AIQ, normalised by the cost range): "
                + "; ".join(f"{k} {fmt.num(v, 3)}" for k, v in aiq.items())
                + "."
            )
        )
    elif stats.frontier is None:
        out.append(_not_computed("frontier"))
    elif stats.frontier.get("reason"):
        out.append(para(f"No AIQ: {stats.frontier['reason']}."))
    return out


def priors_section(stats: Stats, plots: dict[str, Plot]) -> list[Block]:
    out: list[Block] = [Heading(2, "Shipped priors against the ratings", "priors")]
    if not stats.priors:
        return [*out, para("No shipped priors: every prior was measured from the ratings.")]
    disagree = [r for r in stats.priors if r.disagrees]
    if disagree:
        out.append(
            Bullets(
                tuple(
                    (
                        "The ratings disagree with the prior for ",
                        Code(r.selector),
                        f" in {r.region}: shipped "
                        f"{fmt.num(r.shipped, 2)}, measured {fmt.num(r.measured, 3)} (weight {r.weight:g}, n={r.n:,}).",
                    )
                    for r in disagree
                )
            )
        )
    else:
        out.append(para("No shipped prior disagrees with the ratings by more than 0.1 with enough samples."))
    fig = figure(
        stats,
        plots,
        "priors.svg",
        "Each shipped prior (bar) and the quality measured from the ratings "
        "(dot, sized by the number of ratings); red where they disagree.",
    )
    if fig:
        out.append(fig)
    rows = [
        [
            r.selector,
            r.region,
            fmt.num(r.shipped, 2),
            fmt.num(r.measured, 3),
            f"{r.weight:g}",
            fmt.count(r.n),
            "yes" if r.disagrees else "no",
        ]
        for r in stats.priors
    ]
    out.append(
        table(
            ["selector", "region", "shipped", "measured", "weight", "n", "disagrees"],
            rows,
            numeric=[False, False, True, True, True, True, False],
        )
    )
    return out


def ladders_section(stats: Stats) -> list[Block]:
    out: list[Block] = [Heading(2, "Escalation ladders", "ladders")]
    if stats.ladders is None:
        return [*out, _not_computed("ladders")]
    regions = ladder_regions(stats)
    rows = [
        [
            region,
            " → ".join(short_config(k) for k in rungs(row)),
            fmt.num(first(row, "validated_quality"), 3),
            fmt.usd(first(row, "validated_cost_usd")),
            fmt.num(first(row, "held_out_quality"), 3),
            fmt.usd(first(row, "held_out_cost_usd")),
            fmt.pct(first(row, "coverage")),
        ]
        for region, row in regions.items()
    ]
    if rows:
        out.append(
            costed_table(
                stats,
                [
                    "region",
                    "ladder",
                    "validated quality",
                    "validated cost",
                    "held-out quality",
                    "held-out cost",
                    "coverage",
                ],
                rows,
                numeric=[False, False, True, True, True, True, True],
            )
        )
    summary = ladder_summary(stats)
    if summary and summary.get("gate_is_target"):
        out.append(
            Note(
                (
                    "The gate ratings are the ratings that measure quality: these ladder figures are an upper "
                    "bound for a perfect verifier.",
                )
            )
        )
    return out


#: What each built-in routing policy does (pipeline.routing.policies), for the reader of the policies table.
POLICY_MEANING = {
    "learning_governed": "the learned choice when it passes the evidence gate, else the static choice (default)",
    "quality_per_dollar": "the best quality per dollar in the table, no gate",
    "ladder": "the region's escalation ladder, next rung after each failure",
    "workflow_default": "the static default configuration",
    "frontier_only": "always the highest-quality configuration",
    "cheap_only": "always the cheapest configuration",
    "static_hybrid": "cheap for implementers and researchers, frontier for reviewers",
    "trace_governed": "cheap first, frontier after a failure",
}


def policies_section(stats: Stats) -> list[Block]:
    out: list[Block] = [Heading(2, "Routing policies on the held-out tasks", "policies")]
    rows = policy_rows(stats)
    if not rows:
        return [*out, _not_computed("policies")]
    protocol = (stats.policies or {}).get("protocol")
    if isinstance(protocol, str):
        out.append(para(fmt.sentence(protocol)))
    body = [
        [
            name + (" (default)" if name == "learning_governed" else ""),
            POLICY_MEANING.get(name, "registered"),
            fmt.pct(first(r, "hit_rate")),
            fmt.num(first(r, "mean_quality"), 3),
            fmt.usd(first(r, "mean_cost_usd", "cost_usd")),
            fmt.num(first(r, "mean_configs_run"), 2),
            fmt.count(first(r, "n")),
        ]
        for name, r in rows
    ]
    return [
        *out,
        costed_table(
            stats,
            ["policy", "what it routes to", "hit rate", "mean quality", "mean cost", "configs run", "n"],
            body,
            "Hit rate: routed (or, for policies that escalate, stopped) at a best configuration "
            "of the task; configs run: how many configurations a task used on average.",
            numeric=[False, False, True, True, True, True, True],
        ),
    ]


def signals_section(stats: Stats) -> list[Block]:
    out: list[Block] = [Heading(2, "Learning signals", "signals")]
    signals = stats.signals
    if signals is None:
        return [*out, _not_computed("signals")]
    counts = signals.get("counts")
    if isinstance(counts, dict):
        out.append(table(["count", "value"], [[k.replace("_", " "), scalar(v)] for k, v in counts.items()]))
    members = signals.get("members")
    if isinstance(members, dict) and members:
        rows = [
            [
                region,
                side,
                short_config(str(first(m, "config_key", "config"))),
                fmt.signed(first(m, "relative_advantage"), 2),
                fmt.pct(first(m, "win_rate")),
                fmt.count(first(m, "n_tasks", "n")),
            ]
            for region, ranked in members.items()
            if isinstance(ranked, dict)
            for side in ("top", "bottom")
            for m in ranked.get(side) or []
        ]
        out += [
            Heading(3, "Best and worst members by relative advantage"),
            table(
                ["region", "rank", "config", "advantage", "win rate", "tasks"],
                rows,
                numeric=[False, False, False, True, True, True],
            ),
        ]
    empty = [key for key, value in signals.items() if key not in ("counts", "members") and _empty(value)]
    for key, value in signals.items():
        if key not in ("counts", "members") and key not in empty:
            out += [Heading(3, key.replace("_", " ")), *blocks_for(value, level=4)]
    if empty:
        out.append(para("Nothing to show in this data for: " + ", ".join(k.replace("_", " ") for k in empty) + "."))
    return out


def _empty(value) -> bool:
    """A signal with nothing in it: none, an empty collection, or a mapping whose counts are all 0 or null."""
    if value is None or value == [] or value == {}:
        return True
    if isinstance(value, dict):
        values = [v for v in value.values() if not isinstance(v, str)]  # a reason beside zeros says nothing more
        return bool(values) and all(v is None or v == 0 or v == [] or v == {} for v in values)
    return False


def closing_section(stats: Stats) -> list[Block]:
    out: list[Block] = []
    if stats.notes:
        out += [Heading(2, "Notes", "notes"), Bullets(tuple((n,) for n in stats.notes))]
    out += [Heading(2, "Reproduce", "reproduce")]
    steps: list[tuple[Inline, ...]] = []
    if stats.source.command:
        steps.append(("Fit: ", Code(stats.source.command)))
    steps.append(("Render this page from stats.json alone: ", Code(render_command(stats))))
    steps.append(("Compare shipped and fitted constants: ", Code(with_home(stats, "ratings compare"))))
    out.append(Bullets(tuple(steps)))
    return out


def body(stats: Stats, plots: dict[str, Plot]) -> list[Block]:
    blocks = (
        data_section(stats)
        + constants_section(stats)
        + baselines_section(stats)
        + grid_section(stats, plots)
        + frontier_section(stats, plots)
        + priors_section(stats, plots)
        + ladders_section(stats)
        + policies_section(stats)
        + signals_section(stats)
        + closing_section(stats)
    )
    return [b for b in blocks if b is not None]
