"""The truth behind a simulated backlog, and the ``truth.json`` a test (never the fitter) reads.

Quality is the probability that an attempt succeeds. The ratings see it
through noise: a gate flips the outcome with probability ``gate_noise``, a
reviewer adds its bias and noise, a human scores 0.9 or 0.1 on average, a
rejection is a 0 of weight 1. ``rated_quality`` is what a weighted mean of the
ratings converges to (the target of the fit's ``q(c, r)`` once the data
outweighs the prior), written beside the true quality so a test can say which
one it checks.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from ..workspace import NOFOLLOW, fsync_dir, temp_beside
from .policy import LoggingPolicy
from .scenario import RatingSpec, Scenario

SCHEMA = "simulation-truth/v1"
#: The mean human score of a success and of a failure (1.0 or 0.75, 0.0 or 0.25, 60/40).
HUMAN_SUCCESS, HUMAN_FAILURE = 0.9, 0.1
_ROUND = 9


def quality_tables(scenario: Scenario) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """True quality per config and region, before and after the drift (equal when there is none)."""
    before = {c.key: dict(c.quality) for c in scenario.configs}
    after = {k: dict(v) for k, v in before.items()}
    if scenario.drift is not None:
        after[scenario.drift.config].update(scenario.drift.quality)
    return before, after


def mean_cost(scenario: Scenario) -> dict[str, dict[str, float]]:
    """True mean cost of one attempt: the config's mean times the region's multiplier (lognormal, mean-preserving)."""
    return {c.key: {r.name: c.cost_usd * r.cost_multiplier for r in scenario.regions} for c in scenario.configs}


def clipped_normal_mean(mean: float, sd: float) -> float:
    """E[clip(X, 0, 1)] for X ~ N(mean, sd): P(X > 1) + mean*(Phi(b) - Phi(a)) + sd*(phi(a) - phi(b)), with a, b
    the z of 0 and 1."""
    a, b = (0.0 - mean) / sd, (1.0 - mean) / sd
    cdf = lambda x: 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))  # noqa: E731
    pdf = lambda x: math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)  # noqa: E731
    return (1.0 - cdf(b)) + mean * (cdf(b) - cdf(a)) + sd * (pdf(a) - pdf(b))


def rated_quality(quality: float, scenario: Scenario) -> float:
    """Expected weighted mean of the ratings of an attempt of true quality Q: E[sum w*s] / E[sum w].

    Per rated attempt, with rate, mean weight and mean score of each kind:
    gates ``rate_g * conf_g * (g + (1 - 2g) Q)``, the reviewer ``rate * conf * (Q R1 + (1 - Q) R0)`` with
    ``R_o`` the reviewers' mean clipped score, humans ``rate * importance * (0.9 Q + 0.1 (1 - Q))``,
    rejections ``rate * (1 - Q) * 1 * 0`` (weight only).
    """
    spec: RatingSpec = scenario.ratings
    g = scenario.gate_noise
    num = den = 0.0
    for gate in scenario.gates:
        w = gate.rate * sum(gate.confidence) / 2
        num += w * (g + (1 - 2 * g) * quality)
        den += w
    reviewer_score = {
        outcome: sum(clipped_normal_mean(base + r.bias, r.noise) for r in scenario.reviewers) / len(scenario.reviewers)
        for outcome, base in ((1, spec.success_mean), (0, spec.failure_mean))
    }
    w = spec.review_rate * sum(spec.review_confidence) / 2
    num += w * (quality * reviewer_score[1] + (1 - quality) * reviewer_score[0])
    den += w
    w = spec.human_rate * spec.human_importance
    num += w * (quality * HUMAN_SUCCESS + (1 - quality) * HUMAN_FAILURE)
    den += w
    den += spec.rejection_rate * (1 - quality)
    return num / den if den > 0 else quality


def best_per_region(
    quality: dict[str, dict[str, float]], cost: dict[str, dict[str, float]], regions: list[str]
) -> dict[str, str]:
    """argmax over configs of quality / cost per region; ties by higher quality, then key order."""
    return {r: min(quality, key=lambda k: (-quality[k][r] / cost[k][r], -quality[k][r], k)) for r in regions}


def _r9(x: float) -> float:
    return round(x, _ROUND)


def build_truth(
    scenario: Scenario,
    policy: LoggingPolicy,
    *,
    seed: int,
    corrupt: float,
    drift_first: int | None,
    drift_at: str | None,
    task_id_format: str,
) -> dict[str, Any]:
    """Everything true about the scenario except the per-task assignments (added by the writer)."""
    regions = scenario.region_names
    keys = scenario.config_keys
    before, after = quality_tables(scenario)
    cost = mean_cost(scenario)
    table = lambda f: {k: {r: _r9(f(k, r)) for r in regions} for k in keys}  # noqa: E731
    drift = scenario.drift
    return {
        "schema": SCHEMA,
        "scenario": scenario.name,
        "seed": seed,
        "tasks": scenario.tasks,
        "start": scenario.start,
        "days": scenario.days,
        "gate_noise": scenario.gate_noise,
        "corrupt": corrupt,
        "regions": regions,
        "shares": {r.name: _r9(r.share / sum(x.share for x in scenario.regions)) for r in scenario.regions},
        "configs": keys,
        "quality": {"before": table(lambda k, r: before[k][r]), "after": table(lambda k, r: after[k][r])},
        "rated_quality": {
            "before": table(lambda k, r: rated_quality(before[k][r], scenario)),
            "after": table(lambda k, r: rated_quality(after[k][r], scenario)),
        },
        "cost_usd": table(lambda k, r: cost[k][r]),
        "value": {
            "before": table(lambda k, r: before[k][r] / cost[k][r]),
            "after": table(lambda k, r: after[k][r] / cost[k][r]),
        },
        "best": {"before": best_per_region(before, cost, regions), "after": best_per_region(after, cost, regions)},
        "drift": None
        if drift is None
        else {
            "config": drift.config,
            "quality": dict(drift.quality),
            "first_task": drift_first,
            "at": drift_at,
        },
        "policy": _policy_truth(scenario, policy, before),
        "dispatcher": {"side_by_side": scenario.side_by_side, "escalation": scenario.escalation},
        "notes": _notes(scenario),
        "task_id_format": task_id_format,
    }


def _policy_truth(scenario: Scenario, policy: LoggingPolicy, before: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The logging policy as the truth file states it: its greedy choice, beliefs, propensities and inclusions."""
    regions, keys = scenario.region_names, scenario.config_keys
    return {
        "name": scenario.policy.name,
        "exploration": policy.exploration,
        "greedy": {r: keys[policy.greedy[j]] for j, r in enumerate(regions)},
        "believed": {k: {r: _r9(policy.believed[i][j]) for j, r in enumerate(regions)} for i, k in enumerate(keys)},
        "propensity": {k: {r: _r9(policy.propensity(i, j)) for j, r in enumerate(regions)} for i, k in enumerate(keys)},
        "inclusion": {k: {r: _r9(policy.inclusion(i, j)) for j, r in enumerate(regions)} for i, k in enumerate(keys)},
        # P(the routed config succeeds) before drift: sum_r share_r sum_c P(routed c | r) Q(c, r).
        "done_rate": _r9(
            sum(
                r.share
                / sum(x.share for x in scenario.regions)
                * sum(policy.propensity(i, j) * before[k][r.name] for i, k in enumerate(keys))
                for j, r in enumerate(scenario.regions)
            )
        ),
    }


def _notes(scenario: Scenario) -> dict[str, str]:
    """What each figure of the truth file means (for a reader of the file)."""
    return {
        "quality": "probability that an attempt succeeds",
        "rated_quality": "expected weighted mean of its ratings (gates, reviewers, humans, rejections as 0)",
        "best": "argmax quality / cost_usd per region",
        "task.closed": (
            "done iff an attempt succeeded: the routed config, a side-by-side lane or the escalation after "
            "every lane failed its gates"
            if scenario.dispatcher
            else "done iff the routed (first) config succeeded; the other attempts are second opinions"
        ),
        "policy.done_rate": "P(the routed config succeeds) before drift",
        "policy.inclusion": "P(a config attempts a task of a region), routed or as another lane; escalations "
        "(which depend on outcomes) are not counted",
        "assignments": "row i is task task_id_format.format(i + 1): [region index, config indices "
        "(routed first), outcomes 1/0 in the same order, slots in the same order (0 routed, 1 a side-by-side "
        "lane or second opinion, 2 an escalation or third opinion)]",
    }


def write_truth(path: Path, truth: dict[str, Any], rows: Path) -> None:
    """Write truth.json: the summary indented and sorted, then the assignment rows, one per line, streamed from
    ``rows`` (comma-separated compact JSON arrays) so they are never all in memory. Temp file, fsync, rename."""
    head = json.dumps(truth, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    tmp = temp_beside(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NOFOLLOW, 0o644)  # never through a planted link
    with os.fdopen(fd, "wb") as out, open(rows, "rb") as body:
        out.write((head[:-2] + ',\n  "assignments": [\n').encode("utf-8"))
        shutil.copyfileobj(body, out, 1 << 20)
        out.write(b"\n  ]\n}\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def load_truth(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))
