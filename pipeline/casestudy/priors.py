"""The case study's section on the shipped priors: which the ratings disagree with, a figure and a table of at most
:data:`pipeline.casestudy.plots.MAX_PRIORS_SHOWN` of them (``stats.json`` keeps every one)."""

from __future__ import annotations

from ..nightly.stats import Stats
from . import fmt
from .doc import Block, Bullets, Code, Heading, para, table
from .figures import figure
from .plots import Plot, shown_priors


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
    out.append(
        table(
            ["selector", "region", "shipped", "measured", "weight", "n", "disagrees"],
            rows,
            f"The {len(shown)} of {len(stats.priors):,} shipped priors the ratings disagree with first, then the most "
            "rated; stats.json lists every one."
            if more
            else "",
            numeric=[False, False, True, True, True, True, False],
        )
    )
    return out
