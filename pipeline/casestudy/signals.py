"""The learning-signals section of a page: each part of ``stats.signals`` in words and tables for people.

Every column has a name a reader understands (no raw keys), a configuration appears once per region, and a part
with nothing in it says so in one sentence.
"""

from __future__ import annotations

from typing import Any

from ..nightly.stats import Stats
from . import fmt
from .doc import Block, Heading, para, table
from .optional import first, short_config

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
    counts = signals.get("counts") or {}
    if counts:
        rows = [[COUNT_LABELS.get(k, k.replace("_", " ")), _count(v)] for k, v in counts.items()]
        out.append(table(["count", "value"], rows, numeric=[False, True]))
    empty: list[str] = []
    for title, part in (
        ("members by relative advantage", _members(signals.get("members"))),
        ("logged routing decisions", _decisions(signals.get("decisions"), signals.get("off_policy"))),
        ("prompt versions", _prompts(signals.get("prompt_versions"))),
        ("rejections", _rejections(signals.get("rejections"))),
    ):
        if part:
            out += [Heading(3, title[0].upper() + title[1:]), *part]
        else:
            empty.append(title)
    if empty:
        out.append(para("Nothing to show in this data for: " + ", ".join(empty) + "."))
    return out


def _count(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {fmt.count(v)}" for k, v in value.items())
    return fmt.count(value) if isinstance(value, int) else str(value)


def _members(members: Any) -> list[Block]:
    """Per region each configuration once, by relative advantage: above the task mean first, then below it."""
    if not isinstance(members, dict) or not members:
        return []
    rows = []
    for region, ranked in members.items():
        seen: dict[str, dict[str, Any]] = {}
        for m in [*(ranked.get("top") or []), *(ranked.get("bottom") or [])]:
            seen.setdefault(str(first(m, "config_key", "config")), m)
        for config, m in sorted(seen.items(), key=lambda kv: (-(kv[1].get("relative_advantage") or 0.0), kv[0])):
            advantage = m.get("relative_advantage") or 0.0
            side = "above" if advantage > 0 else "below" if advantage < 0 else "at"
            rows.append(
                [
                    region,
                    short_config(config),
                    fmt.signed(advantage, 2),
                    f"{side} the task mean",
                    fmt.pct(m.get("win_rate")),
                    fmt.count(first(m, "n_tasks", "n")),
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


def _decisions(decisions: Any, off_policy: Any) -> list[Block]:
    out: list[Block] = []
    if isinstance(decisions, list) and decisions:
        rows = [
            [
                str(d.get("policy")),
                fmt.count(d.get("decisions")),
                fmt.count(d.get("resolved")),
                fmt.count(d.get("unresolved")),
                fmt.pct(d.get("mean_reward")),
            ]
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
    if isinstance(off_policy, dict) and off_policy.get("n"):
        if off_policy.get("snips") is None:
            out.append(para(f"No off-policy estimate: {off_policy.get('reason') or 'nothing matches'}."))
        else:
            out.append(
                para(
                    f"SNIPS estimate of the share of tasks the published table's greedy choice would have done: "
                    f"{fmt.pct(off_policy['snips'])} (IPS {fmt.pct(off_policy.get('ips'))}; "
                    f"{fmt.count(off_policy.get('matched'))} of {fmt.count(off_policy['n'])} logged decisions chose "
                    f"what it chooses; effective sample size {fmt.num(off_policy.get('ess'), 1)})."
                )
            )
    return out


def _prompts(rows: Any) -> list[Block]:
    if not isinstance(rows, list) or not rows:
        return []
    body = [
        [
            str(r.get("prompt_version")),
            str(r.get("region")),
            fmt.count(r.get("n_tasks")),
            fmt.count(r.get("wins")),
            fmt.count(r.get("losses")),
            fmt.count(r.get("ties")),
            fmt.pct(r.get("win_rate")),
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


def _rejections(rows: Any) -> list[Block]:
    if not isinstance(rows, list) or not rows:
        return []
    body = [
        [
            short_config(str(r.get("config_key"))),
            str(r.get("region")),
            fmt.count(r.get("rejections")),
            f"{r.get('weight'):g}",
        ]
        for r in rows
    ]
    return [
        table(
            ["config", "region", "rejections", "weight"],
            body,
            "A rejection counts as a rating of 0 with its weight.",
            [False, False, True, True],
        )
    ]
