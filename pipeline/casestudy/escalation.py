"""The escalation ladders section of a case study: the published ladders, how they did in hindsight, and why."""

from __future__ import annotations

from ..nightly.sections import HindsightPoint, LadderRule
from ..nightly.stats import Stats
from . import fmt
from .doc import Block, Heading, Note, para
from .glossary import see_glossary
from .names import chain, config_keys, short_config, short_configs_in
from .sections import costed_table, no_eligible, not_computed, uniform_or_table


def ladders_section(stats: Stats) -> list[Block]:
    out: list[Block] = [Heading(2, "Escalation ladders", "ladders")]
    ladders = stats.ladders
    if ladders is None:
        return [*out, not_computed("ladders")]
    rule = ladders.rule
    if rule is not None and rule.reason:
        out.append(para("The rule: ", short_configs_in(fmt.sentence(rule.reason), config_keys(stats))))
    regions = sorted(ladders.regions.items(), key=lambda kv: (kv[0] != "*", kv[0]))
    rows = [
        [
            region,
            chain(row.ladder),
            fmt.num(row.validated_quality, 3),
            fmt.usd(row.validated_cost_usd),
            fmt.num(row.held_out_quality, 3),
            fmt.usd(row.held_out_cost_usd),
            fmt.pct(row.coverage),
        ]
        for region, row in regions
    ]
    if rows:
        out.append(
            costed_table(
                stats,
                [
                    "region",
                    "ladder",
                    "cross-validated quality",
                    "cross-validated cost",
                    "held-out quality",
                    "held-out cost",
                    "coverage",
                ],
                rows,
                "Cross-validated: what the rule's choices did on the validation blocks of the learned tasks (its "
                "promise); held-out: the published ladder on the eligible held-out tasks it covered.",
                numeric=[False, False, True, True, True, True, True],
            )
        )
    if rule is not None and rule.kappas:
        out.append(_kappas(stats, rule))
    out += _hindsight(stats)
    out.append(no_eligible(stats, "held-out judgement of the ladders") or _why_ladders(stats))
    if ladders.summary is not None and ladders.summary.gate_is_target:
        out.append(
            Note(
                (
                    "The gate ratings are the ratings that measure quality: these ladder figures are an upper "
                    "bound for a perfect verifier.",
                )
            )
        )
    out.append(see_glossary("gate", "coverage", "best single", "eligible task"))
    return out


def _kappas(stats: Stats, rule: LadderRule) -> Block:
    """The cross-validation that chose kappa, one row per confidence level (one sentence when they agree)."""
    return uniform_or_table(
        stats,
        ["kappa", "choices that were ladders", "quality vs best single", "95% lower bound", "cost difference"],
        [
            [
                f"{k.kappa:g}",
                f"{k.ladders} of {rule.folds or 0} folds",
                fmt.signed(k.difference, 4),
                fmt.signed(k.lower, 4),
                fmt.signed(k.spend_difference, 6),
            ]
            for k in rule.kappas
        ],
        "The cross-validation that chose kappa (the standard errors a ladder's gain must clear): the rule's "
        "choices against each fold's best single on its validation block, pooled"
        + ("" if stats.cost_known else "; without costs, the cost difference is in calls")
        + ".",
        [True, False, True, True, True],
        "kappa",
    )


def _hindsight(stats: Stats) -> list[Block]:
    """The held-out ladder frontier, chosen with hindsight: how far the rule's choice is from the limit."""
    h = stats.ladders.hindsight if stats.ladders else None
    if h is None or stats.ladders is None or stats.ladders.summary is None:
        return []

    def spend(x: HindsightPoint) -> str:
        return fmt.usd(x.cost_usd) if stats.cost_known else f"{fmt.num(x.calls, 2)} calls"

    near, reach = h.frontier_at_cost, h.cheapest_reaching_best_single
    parts = []
    if near.ladder:
        parts.append(
            f"the best any ladder of up to three rungs reached at no more than the published ladders' spend was "
            f"{fmt.num(near.quality, 3)} ({chain(near.ladder)}, "
            f"{spend(near)}), {fmt.signed(near.gap, 3)} above them"
        )
    if reach is not None and reach.ladder:
        parts.append(
            f"the cheapest one reaching the best single's quality was {chain(reach.ladder)} at {spend(reach)}"
            + (f" ({fmt.pct(reach.cost_ratio)} of the best single's spend)" if reach.cost_ratio else "")
        )
    if not parts:
        return []
    return [
        para(
            "Diagnostic, chosen with hindsight on the held-out tasks (never used to choose): "
            + "; ".join(parts)
            + f" ({fmt.count(h.ladders_scored)} ladders scored)."
        )
    ]


def _why_ladders(stats: Stats) -> Block:
    """Whether a ladder pays here, and why, in words."""
    summary = stats.ladders.summary if stats.ladders else None
    rule = stats.ladders.rule if stats.ladders else None
    best = short_config((summary.best_single_config if summary else None) or "the best single")
    if rule is not None and rule.name == "best-single" and rule.kappa is None:
        coverage = summary.coverage if summary else None
        return para(
            f"Here a ladder does not pay: at no confidence level did the rule's ladders beat {best} on the "
            "validation blocks with a lower bound at or above 0, so the published ladder is that configuration "
            "alone. "
            + (
                f"Gates are sparse or noisy here: every rung a ladder runs must carry a gate rating, and only "
                f"{fmt.pct(coverage)} of the eligible held-out tasks had one for each, so a ladder is judged on few "
                "tasks, and a gate that passes a failure stops the ladder on it."
                if coverage is not None and coverage < 0.8
                else "The cheaper configurations rarely solve what the best single fails, so escalating buys little."
            )
        )
    ratio = summary.quality_ratio if summary else None
    cost_ratio = summary.cost_ratio if summary else None
    if ratio is None:
        return para(
            "The published ladder has no held-out figure: no eligible held-out task had a gate rating for each of "
            "its rungs, so whether it pays here is not known yet."
        )
    spent = f" for {fmt.pct(cost_ratio)} of its cost" if cost_ratio is not None else ""
    return para(
        f"Here a ladder pays: on the held-out tasks it reached {fmt.pct(ratio)} of {best}'s quality{spent}, "
        "because cheap first rungs solve most tasks and their gates send the rest up."
    )
