"""The logging policy that chose who did each task, and what it implies.

The simulated team routed with its shipped constants: per region it believed the
most specific shipped prior, took the greedy config by the objective, and
explored with probability epsilon. Strong-believed configs are therefore
over-represented where they were believed strong (the selection bias a fit
must see through); the propensities below are what undoes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ..fit.shipped import Prior
from .scenario import Scenario


def believed_priors(keys: list[str], regions: list[str], priors: list[Prior]) -> dict[tuple[str, str], float]:
    """(config key, region) -> the most specific matching shipped prior, by the fitter's own rule
    (:func:`pipeline.fit.shipped.shipped_prior`; docs/design.md, Priors); pairs no prior matches are absent."""
    import polars as pl

    from ..fit.shipped import priors_frame, shipped_prior

    pairs = pl.DataFrame(
        {"config_key": [k for k in keys for _ in regions], "region": regions * len(keys)},
        schema={"config_key": pl.String, "region": pl.String},
    )
    found = shipped_prior(pairs, priors_frame(priors))
    return {(k, r): q for k, r, q in found.select("config_key", "region", "shipped_prior").iter_rows()}


@dataclass(frozen=True)
class LoggingPolicy:
    """Per region: the believed quality of every config, the greedy choice and the inclusion probabilities."""

    believed: list[list[float]]  # [config][region]
    greedy: list[int]  # per region, index of the greedy config
    exploration: float
    attempts: tuple[float, float, float]

    @classmethod
    def of(cls, scenario: Scenario) -> LoggingPolicy:
        pol = scenario.policy
        regions = scenario.region_names
        known = believed_priors([c.key for c in scenario.configs], list(regions), list(pol.priors))
        believed = [[known.get((c.key, r), pol.unknown_quality) for r in regions] for c in scenario.configs]

        def rank(i: int, j: int) -> tuple[float, float, str]:
            """Config ``i`` in region ``j``: objective on beliefs (quality per dollar uses the list price), then
            higher belief, then key order."""
            q, c = believed[i][j], scenario.configs[i].cost_usd
            value = q / c if pol.objective == "quality_per_dollar" else q
            return (-value, -q, scenario.configs[i].key)

        configs = range(len(scenario.configs))
        greedy = [min(configs, key=partial(rank, j=j)) for j in range(len(regions))]
        # A side-by-side lane adds one uniformly chosen other config, as a second opinion would.
        s = scenario.side_by_side
        attempts = (1.0 - s, s, 0.0) if s > 0 else scenario.attempts
        return cls(believed, greedy, pol.exploration if len(scenario.configs) > 1 else 0.0, attempts)

    @property
    def n_configs(self) -> int:
        return len(self.believed)

    def propensity(self, config: int, region: int) -> float:
        """P(policy routes a task of ``region`` to ``config``): ``1 - eps`` greedy, ``eps / (K - 1)`` any other."""
        if config == self.greedy[region]:
            return 1.0 - self.exploration
        return self.exploration / (self.n_configs - 1)

    def expected_extras(self) -> float:
        """E[number of extra configs on a task] (capped by the number of other configs)."""
        cap = self.n_configs - 1
        return sum(p * min(k, cap) for k, p in enumerate(self.attempts))

    def inclusion(self, config: int, region: int) -> float:
        """P(``config`` attempts a task of ``region``) = P(routed) + P(not routed) * E[extras] / (K - 1).

        Extras (second opinions, side-by-side lanes) are drawn uniformly among the configs not routed,
        independently of any outcome, so this is exact; escalations, which depend on outcomes, are not counted.
        """
        routed = self.propensity(config, region)
        if self.n_configs == 1:
            return routed
        return routed + (1.0 - routed) * self.expected_extras() / (self.n_configs - 1)
