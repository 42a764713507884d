"""Off-policy estimates on logged decisions: how a table's policy would have done on tasks it did not route
(docs/design.md, Verdicts on logged data).

A dispatcher runs one configuration per task, so its held-out tasks are not *eligible* (no two configurations did
one) and no hit rate exists. What it logged is, per task, the action it took, the candidates it chose among and,
from ``route.decided``, the propensity of that action. A table's policy pi is scored on those actions:

```
a_i, p_i, r_i  the logged action (a config run on the task, not an escalation), its propensity (1 for a run no
               decision chose: a side-by-side lane, an imported table), its task value q_i and cost c_i
pi(a | t)      the target's probability of a among the task's candidates: [a = greedy(t)] for a greedy table;
               (1 - eps) [a = greedy] + eps / (m - 1) [a != greedy] for epsilon exploration;
               (1 - eps) [a = greedy] + eps P_draw(a) for Thompson (pipeline.routing.thompson, exact)
w_i          = pi(a_i | t_i) / max(p_i, 0.05)                       the clip of the evidence gate (PROPENSITY_CLIP)
SNIPS:  Q    = sum_i w_i q_i / sum_i w_i,   C = sum_i w_i c_i / sum_i w_i,   V = objective(Q, C)
DR:     Q_dr = mean_t sum_a pi(a | t) q^(a, r_t) + sum_i w_i (q_i - q^(a_i, r_t)) / sum_i w_i    (C_dr likewise)
ESS          = (sum_i w_i)^2 / sum_i w_i^2
```

``objective(Q, C)`` is the table's: ``Q / max(C, floor)`` per dollar, ``lambda Q - C`` utility, ``Q`` quality (a
ratio of means, as the evidence gate). The direct term ``q^`` is one reward model for both sides (the learned fit
with the shipped constants), so a difference between two targets is a difference of policies, not of models; the
correction is self-normalized, so on full-information data without decisions DR equals SNIPS equals the mean
task value of the target's choices. Without any logged propensity every p_i is 1: the estimate is unweighted (the
mean over the tasks where the target's choice was the logged one), biased toward what the logger preferred, and
the reason says so.

The interval: a paired bootstrap over tasks (1,000 resamples with replacement, seed ``(--seed, 2)``; both targets
on the same resample; above 20,000 tasks the m-out-of-n rule of :mod:`pipeline.evaluate.intervals`), the 95%
percentile interval of ``V(fitted) - V(shipped)``; resamples where a side matches nothing are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..fit.context import FitContext, Part
from ..fit.gate import PROPENSITY_CLIP, logged_decisions, logged_runs
from ..fit.model import GLOBAL, FittedModel
from ..rounding import DECIMALS
from ..routing import thompson
from ..routing.view import Row
from .intervals import RESAMPLES, SUBSAMPLE

#: The seed stream of the logged bootstrap: ``(--seed, LOGGED_STREAM)`` (docs/design.md, Determinism).
LOGGED_STREAM = 2


@dataclass(frozen=True)
class Logged:
    """The logged actions of one part, as the estimators read them.

    ``actions``: one row per logged action ``t, region, config_key, p, q, c`` (``t`` the task's index in
    ``tasks``, ``c`` null without costs); ``candidates``: ``t, region, config_key``, the configs each task's target
    chooses among (its first decision's candidates known to the table, else the table's whole pool);
    ``weighted``: some action carries a logged propensity; ``decisions``: tasks whose action a decision logged.
    """

    tasks: int
    actions: pl.DataFrame
    candidates: pl.DataFrame
    weighted: bool
    decisions: int
    escalations: int


def logged_actions(ctx: FitContext, part: Part, reference: FittedModel) -> Logged:
    """:class:`Logged` of ``part``: every run of a real task value that is not an escalation (by timing, or by its
    decision's ``after``), its propensity from the first decision that chose it (1 when none did), costed by
    ``reference`` (unknown attempts at its estimate)."""
    values = reference.task_costs(ctx.values(part, real=True)).filter(pl.col("value").is_not_null())
    values = values.with_columns(pl.col("task").cast(pl.Int64), pl.col("config_key").cast(pl.String))
    runs = logged_runs(logged_decisions(ctx, part))
    after = runs.runs.filter(pl.col("after")).select("task", "config_key")
    kept = values.filter(~pl.col("escalated")).join(after, on=["task", "config_key"], how="anti")
    escalations = values.height - kept.height
    kept = kept.join(runs.runs.select("task", "config_key", "propensity"), on=["task", "config_key"], how="left")
    index = kept.select("task").unique().sort("task").with_row_index("t")
    actions = kept.join(index, on="task").select(
        pl.col("t").cast(pl.Int64),
        pl.col("region").cast(pl.String),
        "config_key",
        p=pl.col("propensity").fill_null(1.0),
        q=pl.col("value").cast(pl.Float64),
        c=pl.col("cost_t").cast(pl.Float64),
    )
    pool = reference.members.filter(pl.col("region") == GLOBAL).select(pl.col("config_key").cast(pl.String))
    regions = actions.select("t", "region").unique()
    logged = runs.candidates.join(index, on="task").select(pl.col("t").cast(pl.Int64), "config_key")
    logged = logged.join(pool, on="config_key")
    whole = regions.join(logged.select("t").unique(), on="t", how="anti").join(pool, how="cross")
    candidates = pl.concat([logged.join(regions, on="t"), whole.select("t", "config_key", "region")], how="diagonal")
    return Logged(
        tasks=index.height,
        actions=actions.sort("t", "config_key"),
        candidates=candidates.select("t", "region", "config_key").sort("t", "config_key"),
        weighted=bool(kept["propensity"].is_not_null().any()),
        decisions=int(kept.filter(pl.col("propensity").is_not_null())["task"].n_unique()),
        escalations=escalations,
    )


@dataclass(frozen=True)
class Target:
    """A policy to score: a fitted table (its greedy choice) and how it explores (``mode`` None: greedy only)."""

    model: FittedModel
    exploration: float = 0.0
    mode: str | None = None


def target_probabilities(target: Target, logged: Logged) -> pl.DataFrame:
    """``t, config_key, pi``: the target's probability of each candidate of each task (module doc)."""
    cands = logged.candidates
    greedy = target.model.choose_frame(cands.rename({"t": "task"})).rename({"task": "t", "chosen": "greedy"})
    frame = cands.join(greedy, on="t").with_columns(
        is_greedy=pl.col("config_key") == pl.col("greedy"), m=pl.len().over("t")
    )
    eps = float(target.exploration) if target.mode is not None else 0.0
    if eps == 0.0:
        explore = pl.lit(0.0)
    elif target.mode == "epsilon":
        # uniform over the other candidates; a lone candidate is the greedy one
        explore = (
            pl.when(pl.col("m") == 1).then(1.0).when(pl.col("is_greedy")).then(0.0).otherwise(1.0 / (pl.col("m") - 1))
        )
    else:
        frame = frame.join(_thompson_draws(target, cands), on=["t", "config_key"], how="left")
        explore = pl.col("draw")
    pi = (1.0 - eps) * pl.col("is_greedy").cast(pl.Float64) + eps * explore
    return frame.select("t", "config_key", pi=pi)


def _thompson_draws(target: Target, cands: pl.DataFrame) -> pl.DataFrame:
    """``t, config_key, draw``: P_draw of each candidate (:func:`pipeline.routing.thompson.win_probability`), once
    per distinct (region, candidate set)."""
    model, constants = target.model, target.model.constants
    rows = model.lookup(cands.select("config_key", "region"))
    by_pair = {(r["config_key"], r["region"]): r for r in rows.iter_rows(named=True)}
    sets = cands.group_by("t", maintain_order=True).agg("region", "config_key")
    memo: dict[tuple[str, tuple[str, ...]], dict[str, float]] = {}
    out_t, out_c, out_p = [], [], []
    for t, regions, configs in sets.iter_rows():
        key = (regions[0], tuple(configs))
        if key not in memo:
            members = [_row(by_pair[(c, key[0])]) for c in key[1]]
            objective = model.effective_objective
            memo[key] = {m.config: thompson.win_probability(members, m.config, objective, constants) for m in members}
        for config, p in memo[key].items():
            out_t.append(t)
            out_c.append(config)
            out_p.append(p)
    return pl.DataFrame(
        {"t": out_t, "config_key": out_c, "draw": out_p},
        schema={"t": pl.Int64, "config_key": pl.String, "draw": pl.Float64},
    )


def _row(r: dict[str, Any]) -> Row:
    """A member as the router's Thompson draw sees it (quality, cost and rating weight of the table)."""
    return Row(r["config_key"], r["quality"], r["cost_usd"], r["value"], r["weight"], r["n_ratings"], None, None, "fit")


#: Per-task sums of one target, in this column order (module doc).
SUMS = ("w", "wq", "wc", "w2", "wdq", "wdc", "dq", "dc")


def task_sums(target: Target, logged: Logged, reference: FittedModel) -> np.ndarray:
    """tasks x :data:`SUMS`: per task the weighted sums of its logged actions and the direct term of the target."""
    pi = target_probabilities(target, logged)
    hat = reference.lookup(logged.candidates.select("config_key", "region")).select(
        "config_key", "region", qh=pl.col("quality").cast(pl.Float64), ch=pl.col("cost_usd").cast(pl.Float64)
    )
    acts = (
        logged.actions.join(pi, on=["t", "config_key"], how="left")
        .join(hat, on=["config_key", "region"], how="left")
        .with_columns(w=pl.col("pi").fill_null(0.0) / pl.max_horizontal(pl.col("p"), pl.lit(PROPENSITY_CLIP)))
        .group_by("t")
        .agg(
            w=pl.col("w").sum(),
            wq=(pl.col("w") * pl.col("q")).sum(),
            wc=(pl.col("w") * pl.col("c").fill_null(0.0)).sum(),
            w2=(pl.col("w") ** 2).sum(),
            wdq=(pl.col("w") * (pl.col("q") - pl.col("qh").fill_null(0.0))).sum(),
            wdc=(pl.col("w") * (pl.col("c") - pl.col("ch")).fill_null(0.0)).sum(),
        )
    )
    direct = (
        pi.join(logged.candidates, on=["t", "config_key"])
        .join(hat, on=["config_key", "region"], how="left")
        .group_by("t")
        .agg(
            dq=(pl.col("pi") * pl.col("qh").fill_null(0.0)).sum(), dc=(pl.col("pi") * pl.col("ch").fill_null(0.0)).sum()
        )
    )
    frame = pl.DataFrame({"t": np.arange(logged.tasks, dtype=np.int64)})
    frame = frame.join(acts, on="t", how="left").join(direct, on="t", how="left").sort("t").fill_null(0.0)
    return frame.select(SUMS).to_numpy().astype(float)


Value = Callable[[np.ndarray, np.ndarray], np.ndarray]


def objective_of(model: FittedModel) -> Value:
    """``(Q, C) -> V`` of the table's effective objective (module doc), elementwise."""
    c = model.constants
    objective = model.effective_objective
    if objective == "quality_per_dollar":
        floor = float(c.cost_floor_usd)
        return lambda q, cost: q / np.maximum(cost, floor)
    if objective == "utility":
        lam = float(c.lambda_ or 0.0)
        return lambda q, cost: lam * q - cost
    return lambda q, cost: q


def estimates(sums: np.ndarray, n_tasks: int, value: Value) -> dict[str, np.ndarray]:
    """SNIPS and DR values (and ESS, matched weight) of per-resample sums (``... x SUMS``), the values rounded to
    the published :data:`pipeline.rounding.DECIMALS`: two targets that differ only by float noise (a Thompson draw's
    1e-13 share of a hopeless member) are the same value, so no verdict adopts on a difference nobody can see."""
    w, wq, wc, w2, wdq, wdc, dq, dc = (sums[..., i] for i in range(len(SUMS)))
    with np.errstate(invalid="ignore", divide="ignore"):
        snips = np.round(value(wq / w, wc / w), DECIMALS)
        dr = np.round(value(dq / n_tasks + wdq / w, dc / n_tasks + wdc / w), DECIMALS)
        ess = np.where(w2 > 0, w * w / w2, 0.0)
    return {"snips": np.where(w > 0, snips, np.nan), "dr": np.where(w > 0, dr, np.nan), "ess": ess, "w": w}


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def side(sums: np.ndarray, value: Value) -> dict[str, Any]:
    """One target's figures over every task: SNIPS, DR, the effective samples and the matched tasks."""
    n = sums.shape[0]
    est = estimates(sums.sum(axis=0), max(n, 1), value)
    return {
        "snips": _finite(float(est["snips"])),
        "dr": _finite(float(est["dr"])),
        "effective_samples": float(est["ess"]),
        "matched": int((sums[:, 0] > 0).sum()),
    }


def compare(fitted: np.ndarray, shipped: np.ndarray, value: Value, *, seed: int) -> dict[str, Any]:
    """Fitted against shipped (per-task sums of each): both sides, the SNIPS and DR differences and their paired
    bootstrap 95% intervals (module doc)."""
    n = fitted.shape[0]
    f, s = side(fitted, value), side(shipped, value)
    out: dict[str, Any] = {"fitted": f, "shipped": s, "tasks": n}
    both = np.concatenate([fitted, shipped], axis=1)
    k = len(SUMS)
    m = min(n, SUBSAMPLE)
    stats: dict[str, list[float]] = {"snips": [], "dr": []}
    if n:
        rng = np.random.default_rng((seed, LOGGED_STREAM))
        chunk = max(1, min(RESAMPLES, 4_000_000 // (m * 2 * k)))
        for start in range(0, RESAMPLES, chunk):
            idx = rng.integers(0, n, size=(min(chunk, RESAMPLES - start), m))
            total = both[idx].sum(axis=1)
            ef, es = estimates(total[:, :k], m, value), estimates(total[:, k:], m, value)
            for name in stats:
                stats[name].extend((ef[name] - es[name]).tolist())
    for name in ("snips", "dr"):
        diff = None if f[name] is None or s[name] is None else f[name] - s[name]
        arr = np.array(stats[name])
        arr = arr[np.isfinite(arr)]
        out[name] = {"value": diff, "ci95": None if diff is None or not arr.size else _interval(arr, diff, m, n)}
        if name == "snips":
            out["dropped_resamples"] = RESAMPLES - int(arr.size)
    return out


def _interval(stats: np.ndarray, estimate: float, m: int, n: int) -> tuple[float, float]:
    """The percentile interval of the resampled differences; with m < n resampled tasks the estimate plus
    ``sqrt(m / n)`` times their spread about it (:func:`pipeline.evaluate.intervals.paired_bootstrap`)."""
    low, high = (float(x) for x in np.quantile(stats, [0.025, 0.975]))
    if m == n:
        return low, high
    scale = math.sqrt(m / n)
    return estimate + scale * (low - estimate), estimate + scale * (high - estimate)


def value_of(target: Target, logged: Logged, reference: FittedModel) -> float | None:
    """The target's SNIPS value on ``logged`` (what the search chooses by where no hit rate exists)."""
    if logged.tasks == 0:
        return None
    return side(task_sums(target, logged, reference), objective_of(target.model))["snips"]


def unweighted_note(logged: Logged) -> str:
    """How the actions were weighted, in words for a verdict's reason."""
    if logged.weighted:
        return f"weighted by 1/max(propensity, {PROPENSITY_CLIP:g}) ({logged.decisions} logged decision(s))"
    return "unweighted (no logged propensities: biased toward what the logger preferred)"


@dataclass(frozen=True)
class LoggedParts:
    """The logged actions of validation and held-out, each with its reward model (the shipped constants' fit of the
    part the targets are fitted on): what the search and the verdicts score targets on where no hit rate exists."""

    validation: Logged
    validation_reference: FittedModel
    held_out: Logged
    held_out_reference: FittedModel

    @classmethod
    def of(cls, ctx: FitContext, fit: Callable[[Part], FittedModel]) -> LoggedParts:
        """``fit(part)``: the shipped constants' model of a part."""
        val_ref, held_ref = fit(Part.INNER), fit(Part.LEARNED)
        return cls(
            logged_actions(ctx, Part.VALIDATION, val_ref),
            val_ref,
            logged_actions(ctx, Part.HELD_OUT, held_ref),
            held_ref,
        )

    def value(
        self, held_out: bool, model: FittedModel, exploration: float = 0.0, mode: str | None = None
    ) -> float | None:
        """The SNIPS value of ``model``'s policy on validation (or held-out: a diagnostic)."""
        logged, ref = (
            (self.held_out, self.held_out_reference) if held_out else (self.validation, self.validation_reference)
        )
        return value_of(Target(model, exploration, mode), logged, ref)

    def compare(self, fitted: Target, shipped: Target, *, seed: int) -> dict[str, Any]:
        """:func:`compare` of two targets on the held-out actions, with how they were logged."""
        logged, ref = self.held_out, self.held_out_reference
        figures = compare(
            task_sums(fitted, logged, ref), task_sums(shipped, logged, ref), objective_of(shipped.model), seed=seed
        )
        return {
            **figures,
            "weighted": logged.weighted,
            "propensity_clip": PROPENSITY_CLIP,
            "decisions": logged.decisions,
            "escalations": logged.escalations,
        }
