"""Routing output for people: a decision (``ratings route``) as labelled lines, rows as an aligned table.

Programs read the JSON (``--json``); these lines say the same things in words, so nothing here is computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..money import usd


def fmt(value: Any, digits: int = 4) -> str:
    """A figure as a person reads it: ``n/a`` for null, 4 significant digits, plain integers and words."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def aligned(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart, a rule under the header."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def decision_lines(out: dict[str, Any]) -> list[str]:
    """``ratings route`` for people: the choice, why, and (with ``--explain``) the rows and tests behind it."""
    explored = " (an exploration draw)" if out["explored"] else ""
    propensity = out["propensity"]
    lines = [
        f"route to {out['config']}",
        f"  policy      {out['policy']}{explored}",
        f"  why         {out['reason']}",
        f"  quality     {fmt(out['predicted_quality'])} (the table's estimate for this config)",
        f"  propensity  {fmt(propensity)}" + (" (greedy, no exploration draw)" if propensity == 1.0 else ""),
        f"  table       {out['table_version'] or 'unversioned'}",
        f"  candidates  {', '.join(out['candidates'])}",
    ]
    if "rows" in out:
        lines += ["", f"rows of region {out['region_used']} (best first by {out['objective']}):"]
        body = [
            [r["config"], r["source"], fmt(r["quality"]), fmt(r["cost_usd"]), fmt(r["value"]), str(r["n_ratings"])]
            for r in out["rows"]
        ]
        lines += ["  " + x for x in aligned(body, ["config", "from", "quality", "cost", "value", "n"])]
    gate = out.get("gate")
    if gate:
        lines += ["", *_gate_lines(gate)]
    if "sql" in out:
        lines += ["", "recompute the rows from the store: add --json and run its .sql with `ratings sql`"]
    if "event_id" in out:
        lines += ["", f"logged as route.decided event {out['event_id']}"]
    return lines


def _gate_lines(gate: dict[str, Any]) -> list[str]:
    lines = [f"evidence gate (static choice {gate['static']['config']}: {gate['static']['why']}):"]
    for test in (gate["region_test"], gate.get("global_test")):
        if not test:
            continue
        if "tests" not in test:  # a v1 table
            lines.append(f"  in {test['region']}: {test['rule']}: passes {fmt(test['passes'])}")
            continue
        if not test["tests"]:
            lines.append(f"  in {test['region']}: no member ranks above {test['against']}")
        for t in test["tests"]:
            ev = t["test"]
            if ev is None:
                lines.append(f"  in {test['region']}: {t['config']} has no published test against {test['against']}")
            else:
                lines.append(
                    f"  in {test['region']}: {t['config']} vs {test['against']}: {ev['shared_tasks']} shared tasks, "
                    f"difference {fmt(ev['difference'])}, lower bound {fmt(ev['lower'])}, passes {fmt(ev['passes'])}"
                )
    return lines


def pick_words(pick: Any) -> str:
    return f"{pick.config}  quality {pick.quality:.3f}  cost {usd(pick.cost_usd)}  n {pick.n_ratings}"


def table_lines(summary: Any) -> list[str]:
    """``ratings table`` for people: a header, then one block per region (``*`` last)."""
    c = summary.constants
    floor = "no quality floor" if c.get("min_quality") is None else f"quality floor {c['min_quality']:g}"
    static = summary.static
    keys = ("cheap_config", "frontier_config", "default_config")
    named = [f"{k.removesuffix('_config')} {static[k]}" for k in keys if static[k]]
    pinned = [f"{role} -> {config}" for role, config in sorted(static["pinned"].items())]
    lines = [
        f"routing table {summary.version} ({summary.schema_version}), fitted at {summary.fitted_at or 'n/a'}",
        f"objective {summary.objective}; {summary.constants_source} constants: prior weight {c['prior_weight']:g}, "
        f"exploration {c['exploration']:g}, min samples {c['min_samples']}, {floor}",
        "static choice: "
        + ("; ".join(named) if named else "none named (the config with the most ratings)")
        + (f"; pinned roles: {', '.join(pinned)}" if pinned else ""),
        f"what {summary.policy} does for a task of each region (no role):",
    ]
    for r in summary.regions:
        lines += ["", r.region if r.region != "*" else "* (any other region)"]
        lines.append(f"  choice     {pick_words(r.choice)}")
        lines.append(f"  runner-up  {pick_words(r.runner_up) if r.runner_up else 'none (one member)'}")
        if r.ladder is not None:
            where = "its own" if r.ladder.source == "region" else "the global ladder"
            lines.append(f"  ladder     {' > '.join(r.ladder.rungs)} ({where}, pass mark {r.ladder.pass_threshold:g})")
        else:
            lines.append("  ladder     none")
        lines.append(f"  why        {r.words or r.why}")
        if r.words:
            lines.append(f"  gate       {r.why}")
    return lines
