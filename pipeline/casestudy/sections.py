"""The sections of a case study: data, constants, baselines, figures, priors, policies, how to reproduce."""

from __future__ import annotations

from ..fit.shipped import defaults_note
from ..nightly.stats import Stats
from ..routing.policies import MEANING
from ..routing.table import CONSTANT_NAMES
from . import fmt
from .doc import Block, Bullets, Code, Figure, Heading, Inline, para, table
from .glossary import see_glossary
from .names import short_config
from .plots import Plot, same_cell, shown_priors
from .points import frontier_points

#: What sequential replay's realized value measures, per objective (docs/design.md, Sequential replay).
REALIZED = {
    "quality_per_dollar": "total quality ÷ total cost, i.e. quality per dollar",
    "utility": "mean of λ·quality − cost",
    "quality": "mean quality",
}


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
    """Where a figure's numbers come from: the store's table version, the event counts, the commands."""
    src = stats.source
    events = ", ".join(f"{n:,} {kind}" for kind, n in src.events.items()) or "no event counts"
    version = src.version if src.version is not None else "n/a"
    parts: list[Inline] = [f"Source: store table version {version} ({events})"]
    if src.command:
        parts += ["; fitted by ", Code(src.command)]
    parts += ["; drawn by ", Code(render_command(stats)), " from stats.json."]
    return tuple(parts)


def costed_table(
    stats: Stats, columns: list[str], rows: list[list[str]], caption: str = "", numeric: list[bool] | None = None
) -> Block:
    """A table whose cost columns are left out when the data has no costs (they would be all n/a)."""
    keep = _costed_columns(stats, columns)
    numeric = numeric or [False] * len(columns)
    return table([columns[i] for i in keep], [[r[i] for i in keep] for r in rows], caption, [numeric[i] for i in keep])


def _costed_columns(stats: Stats, columns: list[str]) -> list[int]:
    """The columns a page shows: all of them, but those about cost only where costs are known."""
    return [i for i, c in enumerate(columns) if stats.cost_known or "cost" not in c]


def uniform_or_table(
    stats: Stats, columns: list[str], rows: list[list[str]], caption: str, numeric: list[bool], what: str
) -> Block:
    """A :func:`costed_table` keyed by its first column, or one sentence when every row but for that key is the
    same (nine identical rows would be nine identical cards on a phone). ``what`` names the rows in the sentence.
    """
    if len(rows) < 2 or any(r[1:] != rows[0][1:] for r in rows):
        return costed_table(stats, columns, rows, caption, numeric)
    same = "; ".join(f"{columns[i]} {rows[0][i]}" for i in _costed_columns(stats, columns) if i > 0)
    return para(f"{caption} The same at every {what} tried ({', '.join(r[0] for r in rows)}): {same}.")


def not_computed(key: str) -> Block:
    return para("Not computed: the stats file has no ", Code(key), " section (the stage that writes it did not run).")


def no_eligible(stats: Stats, what: str) -> Block | None:
    """The sentence a section shows instead of a table of n/a when no held-out task is eligible (None when some
    are): ``what`` names what the section would have compared."""
    s = stats.split
    if s.eligible_held_out:
        return None
    return para(
        f"No {what}: none of the {fmt.count(s.held_out_tasks)} held-out tasks was done by two or more "
        "configurations, so there is no task on which one choice can be right and another wrong (an eligible "
        "task). A dispatcher that runs one configuration per task gets eligible tasks from exploration and from "
        "escalations after a failed gate."
    )


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

    def shown(n: str, values: dict) -> str:  # exploration is an arm: its mode and its share
        return (
            fmt.arm(values.get("exploration_mode"), values[n]) if n == "exploration" else fmt.constant(n, values.get(n))
        )

    rows = [[n, shown(n, shipped), shown(n, fitted), c.selected_on.get(n, "not searched")] for n in names]
    out: list[Block] = [Heading(2, "Shipped and fitted constants", "constants")]
    if c.shipped_from == "code defaults":  # the same sentence as the summary and `ratings compare`
        out.append(para(fmt.sentence(defaults_note(c.shipped))))
    defaults = c.published == "shipped" and c.shipped_from == "code defaults"
    caption = "the code defaults (no shipped.json)" if defaults else f"the {c.published} constants"
    out.append(
        table(
            ["constant", "shipped", "fitted", "fitted value chosen on"],
            rows,
            f"The published routing table uses {caption}.",
        )
    )
    return out


def baselines_section(stats: Stats) -> list[Block]:
    b = stats.baselines
    rows = []
    for name in ("oracle", "fitted", "shipped", "best_single", "cheapest", "random"):
        x = getattr(b, name)
        if name == "cheapest" and not stats.cost_known:  # no costs: there is no cheapest configuration
            continue
        coverage = x.coverage
        rows.append(
            [
                name.replace("_", " "),
                short_config(x.config) if x.config else "",
                fmt.pct(x.hit_rate),
                fmt.num(x.mean_quality, 3),
                fmt.usd(x.mean_cost_usd),
                fmt.pct(coverage if coverage is not None else 1.0),
            ]
        )
    rp = stats.replay
    replay = [
        [
            k,
            fmt.arm(run.exploration_mode, run.exploration),
            fmt.num(run.realized_value, 4),
            fmt.mean_count(run.tasks_routed),
            fmt.mean_count(run.tasks_skipped),
        ]
        for k, run in (("shipped", rp.shipped), ("fitted", rp.fitted))
    ]
    verdict = stats.routing.exploration
    seeds = verdict.method.seeds
    over = f"the mean over {seeds} replay seeds" if seeds else "the mean over the replay seeds"
    return [
        Heading(2, "Against the baselines", "baselines"),
        no_eligible(stats, "baseline comparison")
        or costed_table(
            stats,
            ["route by", "config", "hit rate", "mean quality", "mean cost", "coverage"],
            rows,
            f"On the {fmt.count(stats.split.eligible_held_out)} eligible held-out tasks; a single configuration "
            "on those it did.",
            [False, False, True, True, True, True],
        ),
        see_glossary("eligible task", "hit rate", "best single", "oracle", "coverage"),
        para(f"Replay on the held-out tasks, each figure {over} (realized value: {REALIZED[stats.objective]}):"),
        table(
            ["constants", "exploration", "realized value", "tasks routed (mean)", "tasks skipped (mean)"],
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
        "fitted; dashed red box: the shipped prior weight and exploration (other constants as fitted)."
        + (" Here they are the same cell: the small green box inside the red one." if same_cell(stats) else ""),
    )
    out: list[Block] = [
        Heading(2, "The grid of constants (diagnostic)", "grid"),
        fig or para("No grid rows were evaluated."),
    ]
    replay = [r for r in stats.grid if r.kind in ("replay", "logged_value") and r.exploration is not None]
    if replay:
        fitted_arm = (f.exploration_mode, f.exploration)
        rows = [
            [
                fmt.arm(r.exploration_mode, float(r.exploration or 0.0))
                + (" (fitted)" if (r.exploration_mode or "epsilon", r.exploration) == fitted_arm else ""),
                fmt.num(r.validation),
                fmt.num(r.held_out_diagnostic),
            ]
            for r in replay
        ]
        how = (
            "by its SNIPS value on the logged validation decisions (no validation task was done by two "
            "configurations, so no replay can compare arms)"
            if replay[0].kind == "logged_value"
            else "by sequential replay on the validation tasks (exploring always lowers the immediate hit rate, so "
            "the hit rate cannot choose it)"
        )
        out += [
            para(f"Exploration, a mode (epsilon or Thompson) and a share, is chosen {how}:"),
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
        empty = no_eligible(stats, "cost-quality frontier")
        if empty is not None:  # one config per held-out task: nothing drawn, no single to compare
            return [*out, empty]
        out.append(_frontier_figure(stats, plots))
    singles = _singles_table(stats)
    return out + ([singles] if singles is not None else []) + _aiq(stats)


def _frontier_figure(stats: Stats, plots: dict[str, Plot]) -> Block:
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
    if not names:  # no held-out task with both a cost and a quality
        return para("No cost-quality frontier: no configuration has both a mean cost and a mean quality here.")
    caption = [
        "Mean held-out quality against mean cost per task: "
        + ", ".join(names[:-1])
        + (" and " if len(names) > 1 else "")
        + names[-1]
        + "."
    ]
    summary = stats.ladders.summary if stats.ladders else None
    if summary is not None and summary.gate_is_target:
        caption.append(" The ladder point is an upper bound for a perfect verifier (its gate is the target).")
    if summary is not None:
        caption.append(
            f" The ladder is measured on the fully observed tasks only ({fmt.pct(summary.coverage)} coverage)."
        )
    return figure(stats, plots, "frontier.svg", *caption) or para("No cost figures to draw.")


def _singles_table(stats: Stats) -> Block | None:
    """Each configuration alone on the held-out tasks (with the SNIPS estimate when decisions were logged)."""
    singles = sorted(
        (p for p in frontier_points(stats) if p.kind == "single"),
        key=lambda p: (p.cost or 0.0, p.label) if stats.cost_known else (-(p.quality or 0.0), p.label),
    )
    if not singles:
        return None
    extra = {s.config: s for s in (stats.frontier.singles if stats.frontier else [])}
    snips = any("snips_quality" in s.model_fields_set for s in extra.values())
    columns = ["single configuration", "mean quality", "mean cost", "coverage"]
    columns += ["SNIPS quality", "SNIPS cost"] if snips else []
    rows = []
    for p in singles:
        row = extra.get(p.label)
        coverage = row.coverage if row else None
        cells = [short_config(p.label), fmt.num(p.quality, 3), fmt.usd(p.cost), fmt.pct(coverage)]
        if snips:
            quality, cost = (row.snips_quality, row.snips_cost_usd) if row else (None, None)
            cells += [fmt.num(quality, 3), fmt.usd(cost)]
        rows.append(cells)
    return costed_table(
        stats,
        columns,
        rows,
        "Each configuration alone, over the eligible held-out tasks it did"
        + (
            "; beside it, the SNIPS estimate from the logged routing decisions: what it would do on every task."
            if snips
            else "."
        ),
        [False, True, True, True, True, True][: len(columns)],
    )


def _aiq(stats: Stats) -> list[Block]:
    out: list[Block] = []
    aiq = _aiq_values(stats)
    if aiq:
        out.append(
            para(
                "AIQ of the router's lambda sweep and of the single configurations: "
                + "; ".join(f"{k} {fmt.num(v, 3)}" for k, v in aiq.items())
                + "."
            )
        )
        note = stats.frontier.note if stats.frontier else None
        if note:
            out.append(para(fmt.sentence(note)))
    elif stats.frontier is None:
        out.append(not_computed("frontier"))
    elif stats.frontier.reason:
        out.append(para(f"No AIQ: {stats.frontier.reason}."))
    return out


def _aiq_values(stats: Stats) -> dict[str, float]:
    """AIQ per series (``router``, ``singles``) where it is defined."""
    aiq = stats.frontier.aiq if stats.frontier else None
    if aiq is None:
        return {}
    return {k: v for k, v in (("router", aiq.router), ("singles", aiq.singles)) if v is not None}


def priors_section(stats: Stats, plots: dict[str, Plot]) -> list[Block]:
    out: list[Block] = [Heading(2, "Shipped priors against the ratings", "priors")]
    if not stats.priors:
        return [*out, para("No shipped priors: every prior was measured from the ratings.")]
    shown = shown_priors(stats)
    disagree = [r for r in shown if r.disagrees]
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
        for r in shown
    ]
    more = len(stats.priors) - len(shown)
    caption = (
        f"The {len(shown)} of {len(stats.priors):,} shipped priors the ratings disagree with first, then the most "
        "rated; stats.json lists every one."
    )
    out.append(
        table(
            ["selector", "region", "shipped", "measured", "weight", "n", "disagrees"],
            rows,
            caption if more else "",
            numeric=[False, False, True, True, True, True, False],
        )
    )
    return out


def policies_section(stats: Stats) -> list[Block]:
    out: list[Block] = [Heading(2, "Routing policies on the held-out tasks", "policies")]
    policies = stats.policies
    if policies is None or not policies.policies:
        return [*out, not_computed("policies")]
    empty = no_eligible(stats, "policy comparison")
    if empty is not None:
        return [*out, empty]
    out.append(para(fmt.sentence(policies.protocol)))
    body = [
        [
            name + (" (default)" if name == "learning_governed" else ""),
            MEANING.get(name, "registered"),
            fmt.pct(r.hit_rate),
            fmt.num(r.mean_quality, 3),
            fmt.usd(r.mean_cost_usd),
            fmt.num(r.mean_configs_run, 2),
            fmt.count(r.n),
        ]
        for name, r in policies.policies.items()
    ]
    return [
        *out,
        see_glossary("eligible task", "hit rate", "evidence gate", "gate"),
        costed_table(
            stats,
            ["policy", "what it routes to", "hit rate", "mean quality", "mean cost", "configs run", "n"],
            body,
            "Configs run: how many configurations a task used on average (more than one when a policy "
            "escalates after a failed gate).",
            numeric=[False, False, True, True, True, True, True],
        ),
    ]


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
