"""The headline of a case study, in words: routing, calibration, recommendation, and what does not work.

Every number a reader should leave with is said here, with its n and its
interval; the figures and tables below only support it.
"""

from __future__ import annotations

from ..nightly.sections import HitRate, LoggedVerdict, PolicyFigures
from ..nightly.stats import Stats
from . import fmt
from .backtest import backtest_lead
from .doc import Block, Code, Note, Strong, para
from .names import chain, short_config

VERDICT = {
    "adopt": "The fitted prior family beats the shipped one on held-out tasks.",
    "keep": "The fitted prior family does NOT beat the shipped one on held-out tasks.",
    "insufficient-evidence": "The evidence is NOT enough to say the fitted prior family beats the shipped one.",
}
EXPLORATION_VERDICT = {
    "adopt": "The fitted exploration beats the shipped one in the held-out replay.",
    "keep": "The fitted exploration does NOT beat the shipped one in the held-out replay.",
    "insufficient-evidence": "The evidence is NOT enough to say the fitted exploration beats the shipped one.",
}
CALIBRATION_VERDICT = {
    "adopt": "Regions beat the plain mean: per-region quality carries a signal.",
    "keep": "Regions do NOT beat the plain mean: per-region quality carries no signal here.",
    "insufficient-evidence": "Regions do NOT clearly beat the plain mean: the evidence is not enough either way.",
}


def hit_phrase(h: HitRate) -> str:
    """``268 of 412 (65.0%, 95% CI 60.3%–69.5%)``."""
    return f"{fmt.count(h.hits)} of {fmt.count(h.n)} ({fmt.pct(h.hit_rate)}, 95% CI {fmt.interval(h.ci95)})"


def _routing_phrase(stats: Stats) -> Block:
    """The lead's hit rates of the fitted and shipped constants, or why there are none."""
    r, c = stats.routing, stats.constants
    if not stats.split.eligible_held_out:  # for the default policy too (policy_lead says nothing then)
        return para(
            Strong("Routing: "),
            f"no hit rate: none of the {fmt.count(stats.split.held_out_tasks)} held-out tasks was done by two or "
            "more configurations (an eligible task), so no choice on them can be scored right or wrong.",
            lead=True,
        )
    expected = r.shipped.expected_hit_rate_with_exploration
    return para(
        Strong("Constants (plain greedy routing, without the evidence gate): "),
        f"of {fmt.count(stats.split.eligible_held_out)} eligible held-out tasks, the ",
        Strong("fitted"),
        f" constants routed {hit_phrase(r.fitted)} to a best configuration; the ",
        Strong("shipped"),
        f" constants routed {hit_phrase(r.shipped)}. Fitted minus shipped: "
        f"{fmt.points(r.difference.value)} (95% CI {fmt.points_interval(r.difference.ci95)}).",
        (
            f" With their exploration of {fmt.constant('exploration', c.shipped.exploration)}, the shipped "
            f"constants would be expected to hit {fmt.pct(expected)}."
            if expected is not None
            else ""
        ),
        _best_single_phrase(stats),
        lead=True,
    )


def routing_lead(stats: Stats) -> list[Block]:
    r, c = stats.routing, stats.constants
    blocks: list[Block] = [_routing_phrase(stats)]
    verdict = VERDICT[r.recommendation]
    if r.recommendation == "adopt":
        blocks.append(para(Strong(verdict), lead=True))
    else:
        blocks.append(Note((verdict,)))
    decided = (
        "Decided on the logged held-out decisions (no hit rate: too few eligible tasks)."
        if r.decided_by == "logged"
        else "Decided by the greedy hit rate on the eligible held-out tasks."
    )
    blocks.append(
        para(
            Strong(f"Prior family (prior source, prior weight, half-life): {r.recommendation}. "),
            fmt.sentence(r.reason),
            f" {decided}",
            lead=True,
        )
    )
    if r.logged is not None:
        blocks.append(_logged_phrase(r.logged, "each table's greedy choice", decided=r.decided_by == "logged"))
    x = r.exploration
    ci = x.difference.ci95
    span = "n/a" if ci is None else f"{fmt.signed(ci[0])} to {fmt.signed(ci[1])}"
    on_logged = x.decided_by == "logged"
    arms = {
        name: fmt.arm(side.exploration_mode, side.exploration)
        for name, side in (("fitted", x.fitted), ("shipped", x.shipped))
    }
    blocks.append(
        para(
            Strong("Exploration" + (" (decided on the logged held-out decisions)" if on_logged else "") + ": "),
            f"replaying the {fmt.count(x.method.tasks)} held-out tasks in time order (mean of "
            f"{x.method.seeds} replay seeds), exploration {arms['fitted']} (fitted) realized "
            f"{fmt.num(x.fitted.realized_value)} and {arms['shipped']} (shipped) "
            f"{fmt.num(x.shipped.realized_value)}; fitted minus shipped {fmt.signed(x.difference.value)} "
            f"(95% CI {span}, moving-block bootstrap). ",
            Strong(f"{EXPLORATION_VERDICT[x.recommendation]} "),
            f"Verdict: {x.recommendation}. {fmt.sentence(x.reason)}",
            lead=True,
        )
    )
    if x.logged is not None:
        blocks.append(_logged_phrase(x.logged, "the published table exploring by each arm", decided=on_logged))
    provenance = ", ".join(f"{k} {v}" for k, v in sorted(c.provenance.items()))
    blocks.append(
        para(
            Strong("Published: "),
            f"the routing table uses the {c.published} constants" + (f" ({provenance})." if provenance else "."),
            lead=True,
        )
    )
    return blocks


def _logged_phrase(lv: LoggedVerdict, what: str, *, decided: bool) -> Block:
    """The off-policy estimates of the fitted and shipped tables on the logged held-out decisions."""
    weighting = (
        f"weighted by 1 / max(propensity, {lv.propensity_clip:g}) over {fmt.count(lv.decisions)} logged decisions"
        if lv.weighted
        else "unweighted: no decision carried a propensity"
    )
    ci, dr = lv.snips.ci95, lv.dr.ci95
    return para(
        Strong("On the logged decisions" + ("" if decided else " (beside the hit rate, not deciding)") + ": "),
        f"the self-normalized off-policy estimate (SNIPS) of {what} on {fmt.count(lv.tasks)} logged held-out "
        f"tasks ({weighting}; {fmt.count(lv.escalations)} escalation runs left out): fitted "
        f"{fmt.num(lv.fitted.snips)}, shipped {fmt.num(lv.shipped.snips)}, fitted minus shipped "
        f"{fmt.signed(lv.snips.value)} (95% CI {'n/a' if ci is None else f'{fmt.signed(ci[0])} to {fmt.signed(ci[1])}'}"
        f", paired bootstrap over tasks); doubly robust {fmt.signed(lv.dr.value)} "
        f"(95% CI {'n/a' if dr is None else f'{fmt.signed(dr[0])} to {fmt.signed(dr[1])}'}). "
        f"Verdict on them: {lv.recommendation}.",
        lead=True,
    )


def _best_single_phrase(stats: Stats) -> str:
    """The plainest alternative, so a reader sees whether routing beat sending everything to one configuration."""
    best = stats.baselines.best_single
    if best.config is None or best.hit_rate is None:
        return ""
    fitted = stats.baselines.fitted
    costs = best.mean_cost_usd is not None and fitted.mean_cost_usd is not None
    coverage = best.coverage
    where = (
        f" on the {fmt.pct(coverage)} of the eligible tasks it did" if coverage is not None and coverage < 1.0 else ""
    )
    return (
        f" Sending every task to the best single configuration of the learned tasks "
        f"({short_config(best.config)}) would have hit {fmt.pct(best.hit_rate)}{where}, with mean quality "
        f"{fmt.num(best.mean_quality, 3)}"
        + (f" at {fmt.usd(best.mean_cost_usd)} per task" if costs else "")
        + f" against {fmt.num(fitted.mean_quality, 3)}"
        + (f" at {fmt.usd(fitted.mean_cost_usd)}" if costs else "")
        + " for the fitted constants."
    )


def calibration_lead(stats: Stats) -> list[Block]:
    cal = stats.calibration
    ci = cal.difference_ci95
    text = (
        f"per-region quality predicts the held-out ratings with a mean squared error of "
        f"{fmt.num(cal.regions_mse)} against {fmt.num(cal.plain_mean_mse)} for the plain mean"
        + (f" (difference 95% CI {fmt.signed(ci[0])} to {fmt.signed(ci[1])})" if ci else "")
        + f"; mean absolute error {fmt.num(cal.regions_mae)} against {fmt.num(cal.plain_mean_mae)}"
        + (f", over {fmt.count(cal.n)} ratings" if cal.n else "")
        + ". Verdict: "
    )
    verdict = CALIBRATION_VERDICT[cal.recommendation]
    # With every figure defined the fitter's reason only restates them; otherwise it says why one is missing.
    complete = None not in (cal.regions_mse, cal.plain_mean_mse, cal.regions_mae, cal.plain_mean_mae, ci)
    blocks: list[Block] = [
        para(
            Strong("Calibration: "),
            text,
            Strong(cal.recommendation),
            "." + ("" if complete else f" {fmt.sentence(cal.reason)}"),
            lead=True,
        )
    ]
    blocks.append(para(Strong(verdict), lead=True) if cal.recommendation == "adopt" else Note((verdict,)))
    return blocks


def ladder_lead(stats: Stats) -> list[Block]:
    ladders = stats.ladders
    s = ladders.summary if ladders is not None else None
    if ladders is None or s is None:
        return []
    global_rungs = ladders.regions["*"].ladder if "*" in ladders.regions else []
    alone = global_rungs == [s.best_single_config] and all(r.source != "region" for r in ladders.regions.values())
    if alone:  # the rule kept the best single: say so instead of comparing it with itself
        return [
            para(
                Strong("Escalation ladders: "),
                f"the published ladder is the best single configuration alone "
                f"({short_config(global_rungs[0])}): no cheaper ladder kept its quality on the cross-validation "
                "of the learned tasks (see Escalation ladders below).",
                lead=True,
            )
        ]
    rungs = chain(global_rungs)
    rungs = f"the published ladders (global: {rungs})" if rungs else "the published ladders"
    at, their = "", ""
    if s.held_out_cost_usd is not None and s.cost_ratio is not None:
        at = f" at {fmt.usd(s.held_out_cost_usd)} per task"
        their = f" at {fmt.usd(s.best_single_cost_usd)} ({fmt.pct(s.cost_ratio)} of it spent by the ladders)"
    compared = ladders.held_out_tasks_compared
    on = f"{fmt.count(compared)} held-out tasks" if compared is not None else "held-out tasks"
    blocks: list[Block] = [
        para(
            Strong("Escalation ladders: "),
            f"{rungs} reached held-out quality {fmt.num(s.held_out_quality, 3)}{at}, against "
            f"{fmt.num(s.best_single_quality, 3)}{their} for "
            f"{short_config(s.best_single_config)}, the best single configuration; measured "
            f"on the {on} where the ladders and the best single could be estimated from the logs: a first run of "
            "the first rung, each later rung needed seen or completed from the tasks that saw it "
            f"({fmt.pct(s.coverage)} coverage of the eligible tasks; the rest are not counted).",
            lead=True,
        )
    ]
    reached, single = s.held_out_quality, s.best_single_quality
    if reached is not None and single is not None and reached < single:
        blocks.append(
            Note(
                (
                    f"The ladders did NOT reach that configuration's quality on the held-out tasks "
                    f"({fmt.num(reached, 3)} against {fmt.num(single, 3)}).",
                )
            )
        )
    if s.gate_is_target:
        blocks.append(
            Note(
                (
                    "This ladder figure is an upper bound for a perfect verifier: its gate ratings are the same "
                    "ratings that measure quality, so escalation never misses a failure the way a real gate would.",
                )
            )
        )
    return blocks


def policy_lead(stats: Stats) -> list[Block]:
    rows = stats.policies.policies if stats.policies is not None else {}
    default = rows.get("learning_governed")
    if default is None or not stats.split.eligible_held_out:  # no eligible task: the routing lead said why
        return []
    counted = f"{fmt.count(default.hits)} of {fmt.count(default.n)} ({fmt.pct(default.hit_rate)})"
    parts: list = [
        Strong("Default policy: "),
        Code("learning_governed"),
        f" routed {counted} held-out tasks to a best configuration, mean quality "
        f"{fmt.num(default.mean_quality, 3)}"
        + (f" at {fmt.usd(default.mean_cost_usd)} per task" if default.mean_cost_usd is not None else "")
        + ".",
    ]
    static, greedy = rows.get("workflow_default"), rows.get("quality_per_dollar")
    if static and _same_figures(default, static) and not (greedy and _same_figures(default, greedy)):
        parts.append(
            " It did exactly what the static choice (workflow_default) does: the evidence gate did not let the "
            "learned choice override it anywhere"
            + (f"; without the gate, the quality_per_dollar policy hit {fmt.pct(greedy.hit_rate)}" if greedy else "")
            + "."
        )
    elif greedy and greedy.hit_rate is not None and default.hit_rate is not None:
        gap = default.hit_rate - greedy.hit_rate
        parts.append(
            f" Plain quality_per_dollar, without the evidence gate, hit {fmt.pct(greedy.hit_rate)} "
            f"({fmt.points(gap)} for the gate)."
        )
    return [para(*parts, lead=True)]


def cheapest_lead(stats: Stats) -> list[Block]:
    """Say it plainly when always sending a task to the cheapest configuration beats the router."""
    cheap, fitted = stats.baselines.cheapest, stats.baselines.fitted
    if cheap.config is None or cheap.hit_rate is None or fitted.hit_rate is None or cheap.hit_rate <= fitted.hit_rate:
        return []
    return [
        Note(
            (
                f"The cheapest configuration alone ({short_config(cheap.config)}) hit {fmt.pct(cheap.hit_rate)} of "
                f"the eligible tasks it did, more than the router's {fmt.pct(fitted.hit_rate)}: on hit rate, the "
                "router does not beat the cheapest baseline here.",
            )
        )
    ]


def _same_figures(a: PolicyFigures, b: PolicyFigures) -> bool:
    return (a.hits, a.n, a.mean_quality, a.mean_cost_usd) == (b.hits, b.n, b.mean_quality, b.mean_cost_usd)


def headline(stats: Stats) -> list[Block]:
    """The default policy's result first (held-out, then the backtest), then the constants' verdicts."""
    blocks = (
        policy_lead(stats)
        + backtest_lead(stats)
        + routing_lead(stats)
        + cheapest_lead(stats)
        + calibration_lead(stats)
        + ladder_lead(stats)
    )
    if not stats.cost_known:
        blocks.append(
            Note(
                (
                    "Costs are unknown in this data: every configuration was ranked by quality alone, and "
                    "no cost figure is shown.",
                )
            )
        )
    return blocks
