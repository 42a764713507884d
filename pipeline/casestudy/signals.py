"""The learning-signals section of a page: each part of ``stats.signals`` in words and tables for people.

Every column has a name a reader understands (no raw keys), a configuration appears once per region, and a part
with nothing in it says so in one sentence.
"""

from __future__ import annotations

from ..nightly.sections import MemberRanks, MemberSignal, OffPolicy, PromptVersionRow, RejectionRow, WritebackRow
from ..nightly.stats import Stats
from . import fmt
from .doc import Block, Heading, para, table
from .names import short_config

COUNT_LABELS = {
    "ratings_by_origin": "ratings by origin",
    "prm_fill_ins": "PRM fill-ins",
    "tasks_compared": "tasks rated on two or more configurations",
    "rejections": "rejections",
    "prompt_versions": "prompt versions",
}


def signals_section(stats: Stats) -> list[Block]:
    out: list[Block] = [Heading(2, "Learning signals", "signals")]
    signals = stats.signals
    if signals is None:
        return [*out, para("Not computed: the stats file has no signals section.")]
    counts = sorted(signals.counts.model_dump().items())  # in the order stats.json lists them (sorted keys)
    rows = [[COUNT_LABELS.get(k, k.replace("_", " ")), _count(v)] for k, v in counts]
    out.append(table(["count", "value"], rows, numeric=[False, True]))
    empty: list[str] = []
    for title, part in (
        ("members by relative advantage", _members(signals.members)),
        ("logged routing decisions", _decisions(signals.decisions, signals.off_policy)),
        ("prompt versions", _prompts(signals.prompt_versions)),
        ("rejections", _rejections(signals.rejections)),
    ):
        if part:
            out += [Heading(3, title[0].upper() + title[1:]), *part]
        else:
            empty.append(title)
    if empty:
        out.append(para("Nothing to show in this data for: " + ", ".join(empty) + "."))
    return out


def _count(value: int | dict[str, int]) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt.count(v)}" for k, v in value.items())
    return fmt.count(value)


def _members(members: dict[str, MemberRanks]) -> list[Block]:
    """Per region each configuration once, by relative advantage: above the task mean first, then below it."""
    if not members:
        return []
    rows = []
    for region, ranked in members.items():
        seen: dict[str, MemberSignal] = {}
        for m in [*ranked.top, *ranked.bottom]:
            seen.setdefault(m.config_key, m)
        for config, m in sorted(seen.items(), key=lambda kv: (-kv[1].relative_advantage, kv[0])):
            advantage = m.relative_advantage
            side = "above" if advantage > 0 else "below" if advantage < 0 else "at"
            rows.append(
                [
                    region,
                    short_config(config),
                    fmt.signed(advantage, 2),
                    f"{side} the task mean",
                    fmt.pct(m.win_rate),
                    fmt.count(m.n_tasks),
                ]
            )
    return [
        para(
            "Relative advantage: how far above or below the mean of the configurations that did the same task a "
            "configuration's task value lies, in standard deviations, recency-weighted. The best and the worst "
            "of each region, each listed once."
        ),
        table(
            ["region", "config", "advantage", "", "win rate", "tasks compared"],
            rows,
            numeric=[False, False, True, False, True, True],
        ),
    ]


def _decisions(decisions: list[WritebackRow] | None, off_policy: OffPolicy | None) -> list[Block]:
    out: list[Block] = []
    if decisions:
        rows = [
            [d.policy, fmt.count(d.decisions), fmt.count(d.resolved), fmt.count(d.unresolved), fmt.pct(d.mean_reward)]
            for d in decisions
        ]
        out.append(
            table(
                ["logged by policy", "decisions", "resolved", "unresolved", "tasks done"],
                rows,
                "A decision resolves with its task's first closing after it; tasks done: the share of the "
                "resolved decisions whose task closed done.",
                [False, True, True, True, True],
            )
        )
    if off_policy is not None and off_policy.n:
        if off_policy.snips is None:
            out.append(para(f"No off-policy estimate: {off_policy.reason or 'nothing matches'}."))
        else:
            out.append(
                para(
                    f"SNIPS estimate of the share of tasks the published table's greedy choice would have done: "
                    f"{fmt.pct(off_policy.snips)} (IPS {fmt.pct(off_policy.ips)}; "
                    f"{fmt.count(off_policy.matched)} of {fmt.count(off_policy.n)} logged decisions chose "
                    f"what it chooses; effective sample size {fmt.num(off_policy.ess, 1)})."
                )
            )
    return out


def _prompts(rows: list[PromptVersionRow]) -> list[Block]:
    if not rows:
        return []
    body = [
        [
            r.prompt_version,
            r.region,
            fmt.count(r.n_tasks),
            fmt.count(r.wins),
            fmt.count(r.losses),
            fmt.count(r.ties),
            fmt.pct(r.win_rate),
        ]
        for r in rows
    ]
    return [
        table(
            ["prompt version", "region", "tasks", "wins", "losses", "ties", "win rate"],
            body,
            "Wins, losses and ties against the other configurations rated on the same tasks.",
            [False, False, True, True, True, True, True],
        )
    ]


def _rejections(rows: list[RejectionRow]) -> list[Block]:
    if not rows:
        return []
    body = [[short_config(r.config_key), r.region, fmt.count(r.rejections), f"{r.weight:g}"] for r in rows]
    return [
        table(
            ["config", "region", "rejections", "weight"],
            body,
            "A rejection counts as a rating of 0 with its weight.",
            [False, False, True, True],
        )
    ]
