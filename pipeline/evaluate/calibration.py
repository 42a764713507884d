"""Calibration of DESIGN 6: do regions predict held-out scores better than the plain mean?

Each held-out rating's score (PRM-derived ratings are never targets) is
predicted twice: by the fitted ``q(c, r)`` and by the plain mean, c's weighted
mean over the learned ratings without regions (the global weighted mean for a
config never rated in the learned part). The deciding score is the mean squared
error (the Brier score for 0/1 scores); the mean absolute error is reported
beside it. The interval of ``MSE(regions) - MSE(plain)`` is a paired bootstrap
over held-out tasks.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict

from .metrics import contains_zero, paired_bootstrap_ci

#: Fewer held-out tasks than this and no verdict is given (DESIGN 6).
MIN_TASKS = 10


class CalibrationResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    regions_mse: float | None
    plain_mean_mse: float | None
    regions_mae: float | None
    plain_mean_mae: float | None
    difference_ci95: tuple[float, float] | None
    recommendation: str
    reason: str
    n: int
    tasks: int


def calibrate(held_out_ratings: pl.DataFrame, model: Any, *, seed: int) -> CalibrationResult:
    """Score the fitted ``q(c, r)`` of ``model`` against its plain mean on the held-out ratings.

    The plain mean is the fit's measured prior (``model.configs.measured``: c's weighted mean over all regions,
    the global weighted mean for a config the fit never saw), so both predictions come from the same fit.
    """
    targets = held_out_ratings.filter(pl.col("origin") != "prm").select("task", "region", "config_key", "score")
    if targets.height == 0 or model.global_quality is None:
        return CalibrationResult(
            regions_mse=None,
            plain_mean_mse=None,
            regions_mae=None,
            plain_mean_mae=None,
            difference_ci95=None,
            recommendation="insufficient-evidence",
            n=0,
            tasks=0,
            reason="no held-out ratings to predict" if targets.height == 0 else "no learned ratings to predict from",
        )
    predicted = model.lookup(targets).select("region", "config_key", pl.col("quality").alias("q_regions"))
    plain = model.configs.select("config_key", pl.col("measured").alias("plain"))
    scored = (
        targets.join(predicted, on=["region", "config_key"], how="left")
        .join(plain, on="config_key", how="left")
        .with_columns(pl.col("plain").fill_null(model.global_quality))
        .with_columns(
            ((pl.col("q_regions") - pl.col("score")) ** 2).alias("se_r"),
            ((pl.col("plain") - pl.col("score")) ** 2).alias("se_p"),
            (pl.col("q_regions") - pl.col("score")).abs().alias("ae_r"),
            (pl.col("plain") - pl.col("score")).abs().alias("ae_p"),
        )
    )
    n = scored.height
    mse_r, mse_p = float(scored["se_r"].mean()), float(scored["se_p"].mean())
    mae_r, mae_p = float(scored["ae_r"].mean()), float(scored["ae_p"].mean())
    per_task = scored.group_by("task").agg(pl.col("se_r").sum(), pl.col("se_p").sum(), pl.len().alias("k")).sort("task")
    ci = paired_bootstrap_ci(
        per_task["se_r"].to_numpy(), per_task["se_p"].to_numpy(), per_task["k"].to_numpy(), seed=seed
    )
    tasks = per_task.height
    recommendation, reason = _verdict(mse_r, mse_p, ci, tasks, n)
    return CalibrationResult(
        regions_mse=mse_r,
        plain_mean_mse=mse_p,
        regions_mae=mae_r,
        plain_mean_mae=mae_p,
        difference_ci95=ci,
        recommendation=recommendation,
        reason=reason,
        n=n,
        tasks=tasks,
    )


def _verdict(mse_r: float, mse_p: float, ci, tasks: int, n: int) -> tuple[str, str]:
    """adopt: regions' MSE lower and the interval of the difference excludes 0; keep: not lower; else insufficient."""
    numbers = f"regions MSE {mse_r:.4f} vs plain mean MSE {mse_p:.4f} on {n} held-out ratings of {tasks} tasks"
    if tasks < MIN_TASKS:
        return "insufficient-evidence", f"{numbers}; fewer than {MIN_TASKS} held-out tasks, no verdict"
    ci_text = "undefined" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]"
    if contains_zero(ci):
        return (
            "insufficient-evidence",
            f"{numbers}; the 95% interval of the difference {ci_text} contains 0, so regions show no reliable signal",
        )
    if mse_r < mse_p:
        return "adopt", f"{numbers}; difference 95% interval {ci_text} below 0: regions carry a signal"
    return "keep", f"{numbers}; difference 95% interval {ci_text} above 0: regions predict worse than the plain mean"
