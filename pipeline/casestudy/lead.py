"""The page's first section: what the dispatcher will do (the published table in words, as ``ratings table``)."""

from __future__ import annotations

from ..nightly.stats import Stats
from ..routing.summary import Pick, RegionSummary
from . import fmt
from .doc import Block, Bullets, Code, Heading, Inline, Note, Strong, para
from .names import chain, short_config, short_configs_in
from .sections import costed_table, with_home


def routing_table_lead(stats: Stats) -> list[Block]:
    """The ``routing_table`` section of the stats as a table (one row per region) and the reasons in words."""
    summary = stats.routing_table
    out: list[Block] = [Heading(2, "What the dispatcher will do", "table")]
    if summary is None:
        return [*out, para("Not computed: the stats file has no ", Code("routing_table"), " section.")]
    out.append(
        para(
            f"The routing table this fit published ({summary.version}, {summary.schema_version}) sends a task "
            "of each region, for no particular role, where the default policy ",
            Code(summary.policy),
            " says below; the runner-up is the next configuration in the table's order, and a failed ",
            "gate escalates along the ladder. ",
            Code(with_home(stats, "ratings table")),
            " prints the same table. The evaluation that follows says how far to trust it.",
        )
    )
    rows = []
    for r in summary.regions:
        rows.append(
            [
                "* (any other)" if r.region == "*" else r.region,
                short_config(r.choice.config),
                fmt.num(r.choice.quality, 3),
                fmt.usd(r.choice.cost_usd),
                fmt.count(r.choice.n_ratings),
                _runner_up(r.runner_up),
                chain(r.ladder.rungs) if r.ladder else "none",
            ]
        )
    out.append(
        costed_table(
            stats,
            ["region", "routes to", "quality", "cost", "ratings", "runner-up", "ladder"],
            rows,
            "Quality and cost are the table's estimates for the chosen configuration in the region; ratings: how "
            "many it has there.",
            [False, False, True, True, True, False, False],
        )
    )
    out.append(Bullets(tuple(_why(r, summary.configs) for r in summary.regions)))
    pinned = summary.static.get("pinned") or {}
    if pinned:
        out.append(
            Note(
                (
                    "Pinned roles skip the table: "
                    + "; ".join(f"{role} always goes to {short_config(c)}" for role, c in sorted(pinned.items()))
                    + ".",
                )
            )
        )
    return out


def _runner_up(pick: Pick | None) -> str:
    if pick is None:
        return "none"
    cost = "" if pick.cost_usd is None else f", {fmt.usd(pick.cost_usd)}"
    return f"{short_config(pick.config)} ({fmt.num(pick.quality, 3)}{cost})"


def _why(region: RegionSummary, configs: list[str]) -> tuple[Inline, ...]:
    """Why the table chose what it chose in the region, in words (the router's reason for stats written before
    the words existed), with the table's config keys shortened as everywhere on the page."""
    name = "any other region" if region.region == "*" else region.region
    return (Strong(f"{name}: "), short_configs_in(fmt.sentence(region.words or region.why), configs))
