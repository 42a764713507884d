"""``ratings compare`` for people: the comparison's tables and sentences (``--json`` prints the model instead)."""

from __future__ import annotations

from collections.abc import Container

from ..casestudy import fmt
from ..nightly.sections import HitRate, Routing
from .compare import Comparison, PreviousFit


def _aligned(columns: list[str], rows: list[list[str]], right: Container[int] = frozenset()) -> list[str]:
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return [line(columns), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]


def _hit(h: HitRate) -> list[str]:
    return [fmt.pct(h.hit_rate), f"{fmt.count(h.hits)} of {fmt.count(h.n)}", fmt.interval(h.ci95)]


def comparison_text(c: Comparison) -> str:
    """The comparison for people: constants, the held-out verdicts, priors, policies, notes, the previous fit."""
    out = [*_constants_text(c), *_verdicts_text(c), *_priors_text(c), *_policies_text(c)]
    if c.notes:
        out += ["", *(f"Note: {n}" for n in c.notes)]
    if c.previous:
        out += _previous_text(c.previous)
    return "\n".join(out)


def _constants_text(c: Comparison) -> list[str]:
    out = [
        f"Constants (the published table uses the {c.published or 'n/a'} constants"
        + (f", from {c.published_from})" if c.published_from else ")")
    ]
    published = ["published"] if c.table_file else []
    out += _aligned(
        ["constant", "shipped", "fitted", *published, "fitted chosen on"],
        [
            [
                r.name,
                fmt.constant(r.name, r.shipped),
                fmt.constant(r.name, r.fitted),
                *([fmt.constant(r.name, r.published)] if published else []),
                r.selected_on,
            ]
            for r in c.constants
        ],
    )
    return out


def _verdicts_text(c: Comparison) -> list[str]:
    """The held-out hit rates and the two verdicts (the stats', else the table's), provenance, calibration."""
    out = ["", "Held-out hit rate (greedy, routed to a best configuration)"]
    out += _table_verdict(c) if c.routing is None else _stats_verdicts(c.routing)
    if c.provenance:
        out.append(f"Published: {c.published} (" + ", ".join(f"{k} {v}" for k, v in sorted(c.provenance.items())) + ")")
    if c.calibration is not None:
        cal = c.calibration
        out.append(f"Calibration against the plain mean: {cal.recommendation}. {cal.reason}".rstrip())
    elif verdict := (c.evaluation or {}).get("calibration"):
        out.append(f"Calibration against the plain mean: {verdict}.")
    return out


def _table_verdict(c: Comparison) -> list[str]:
    """The table's evaluation (no stats file): rates and the verdict, no counts or intervals."""
    ev = c.evaluation or {}
    rates, diff, n = ev.get("hit_rate") or {}, ev.get("difference") or {}, ev.get("eligible_held_out")
    out = _aligned(
        ["constants", "hit rate", "hits", "95% CI"],
        [[k, fmt.pct(rates.get(k)), f"n = {fmt.count(n)}", fmt.interval(None)] for k in ("shipped", "fitted")],
        right={1},
    )
    ci = diff.get("ci95")
    interval = fmt.points_interval((ci[0], ci[1]) if isinstance(ci, list) and len(ci) == 2 else None)
    out.append(f"Fitted minus shipped: {fmt.points(diff.get('value'))} (95% CI {interval})")
    reason = ev.get("reason") or ""
    return [*out, "", f"Prior family (greedy hit rate): {ev.get('recommendation') or 'n/a'}. {reason}".rstrip()]


def _stats_verdicts(r: Routing) -> list[str]:
    """The stats' verdicts: the prior family's hit rates with n and intervals, then the exploration replay."""
    out = _aligned(
        ["constants", "hit rate", "hits", "95% CI"],
        [["shipped", *_hit(r.shipped)], ["fitted", *_hit(r.fitted)]],
        right={1},
    )
    out.append(
        f"Fitted minus shipped: {fmt.points(r.difference.value)} (95% CI {fmt.points_interval(r.difference.ci95)})"
    )
    expected = r.shipped.expected_hit_rate_with_exploration
    if expected is not None:
        out.append(f"Shipped under its exploration, expected: {fmt.pct(expected)}")
    out += ["", f"Prior family (greedy hit rate): {r.recommendation}. {r.reason}".rstrip()]
    x = r.exploration
    return [
        *out,
        "",
        f"Exploration (held-out replay, mean of {x.method.seeds} seeds): shipped {x.shipped.exploration:g} realized "
        f"{fmt.num(x.shipped.realized_value)}, fitted {x.fitted.exploration:g} realized "
        f"{fmt.num(x.fitted.realized_value)}; fitted minus shipped {fmt.signed(x.difference.value)} "
        f"(95% CI {_span(x.difference.ci95)})",
        f"Exploration: {x.recommendation}. {x.reason}",
    ]


def _priors_text(c: Comparison) -> list[str]:
    out = ["", f"Priors: {c.disagreements} of {len(c.priors)} disagree with the ratings"]
    for p in c.priors:
        if p.disagrees:
            out.append(
                f"The ratings disagree with the prior {p.selector} in {p.region}: shipped "
                f"{fmt.num(p.shipped, 2)}, measured {fmt.num(p.measured, 3)}, weight {fmt.num(p.weight, 2)}, "
                f"n {fmt.count(p.n)}."
            )
    if c.priors:
        out += _aligned(
            ["selector", "region", "shipped", "measured", "weight", "n", "disagrees"],
            [
                [
                    p.selector,
                    p.region,
                    fmt.num(p.shipped, 2),
                    fmt.num(p.measured, 3),
                    fmt.num(p.weight, 2),
                    fmt.count(p.n),
                    "yes" if p.disagrees else "no",
                ]
                for p in c.priors
            ],
            right={2, 3, 4, 5},
        )
    return out


def _policies_text(c: Comparison) -> list[str]:
    if c.policies is None or not c.policies.policies:
        return []
    rows = c.policies.policies
    costed = any(x.mean_cost_usd is not None for x in rows.values())
    out = ["", "Routing policies on the held-out tasks (a table fitted on the learned tasks only)"]
    out += _aligned(
        ["policy", "hit rate", "mean quality", *(["mean cost"] if costed else []), "configs run", "n"],
        [
            [
                name + (" (default)" if name == "learning_governed" else ""),
                fmt.pct(x.hit_rate),
                fmt.num(x.mean_quality, 3),
                *([fmt.usd(x.mean_cost_usd)] if costed else []),
                fmt.num(x.mean_configs_run, 2),
                fmt.count(x.n),
            ]
            for name, x in rows.items()
        ],
        right=set(range(1, 6 if costed else 5)),
    )
    return out


def _previous_text(prev: PreviousFit) -> list[str]:
    out = [
        "",
        f"Against the previous fit {prev.previous_version} ({prev.previous_fitted_at or 'n/a'}) -> "
        f"{prev.current_version} ({prev.current_fitted_at or 'n/a'}): {prev.changed} region(s) changed",
    ]
    out += _aligned(
        ["region", "choice before", "choice after", "ladder", "value before", "value after", "moved"],
        [
            [
                x.region,
                x.choice_before or "",
                x.choice_after or "",
                "changed" if x.ladder_before != x.ladder_after else "same",
                fmt.num(x.value_before),
                fmt.num(x.value_after),
                fmt.signed(x.value_delta),
            ]
            for x in prev.regions
        ],
        right={4, 5, 6},
    )
    return out


def _span(ci: tuple[float, float] | None) -> str:
    """A 95% interval of a difference of replay values: ``[-0.0123, +0.2000]``."""
    return fmt.NA if ci is None else f"[{fmt.signed(ci[0])}, {fmt.signed(ci[1])}]"
