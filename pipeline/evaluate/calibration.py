"""Calibration (docs/design.md, Calibration): do regions predict held-out scores better than the plain mean?

Each held-out rating's score (PRM-derived ratings are never targets) is
predicted twice: by the fitted ``q(c, r)`` and by the plain mean, c's weighted
mean over the learned ratings without regions (the global weighted mean for a
config never rated in the learned part). The deciding score is the mean squared
error (the Brier score for 0/1 scores); the mean absolute error is reported
beside it. Both are per-task columns first (sums of squared and absolute errors and
the number of ratings ``k`` of each held-out task, from its ratings counted by (config, score)):
``MSE = sum_t se_t / sum_t k_t``, and the interval of ``MSE(regions) - MSE(plain)`` is the paired bootstrap over
those task rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict

from .intervals import paired_bootstrap
from .verdict import Recommendation, calibration_verdict


class CalibrationResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    regions_mse: float | None
    plain_mean_mse: float | None
    regions_mae: float | None
    plain_mean_mae: float | None
    difference_ci95: tuple[float, float] | None
    recommendation: Recommendation
    reason: str
    n: int
    tasks: int


def calibrate(scores: pl.DataFrame, model: Any, *, seed: int) -> CalibrationResult:
    """Score the fitted ``q(c, r)`` of ``model`` against its plain mean on the held-out ratings.

    ``scores``: per held-out (task, config, score) the number ``k`` of real ratings (PRM fill-ins are never targets),
    with the task's ``region`` (the ``scores`` of :class:`pipeline.fit.context.FitContext`). The plain mean is c's
    weighted mean over all regions, not shrunk (``model.configs.measured``; the global weighted mean for a config
    the fit never saw), so both predictions come from the same fit. Per row its squared and absolute errors
    count ``k`` times; per task they are summed in row order (``numpy.bincount``).
    """
    if scores.height == 0 or model.global_quality is None:
        return CalibrationResult(
            regions_mse=None,
            plain_mean_mse=None,
            regions_mae=None,
            plain_mean_mae=None,
            difference_ci95=None,
            recommendation="insufficient-evidence",
            n=0,
            tasks=0,
            reason="no held-out ratings to predict" if scores.height == 0 else "no learned ratings to predict from",
        )
    predicted = model.lookup(scores).select("region", "config_key", pl.col("quality").alias("q_regions"))
    plain = model.configs.select(pl.col("config_key").cast(scores.schema["config_key"]), plain="measured")
    scored = (
        scores.join(predicted, on=["region", "config_key"], how="left", maintain_order="left")
        .join(plain, on="config_key", how="left", maintain_order="left")
        .with_columns(pl.col("plain").fill_null(model.global_quality))
    )
    k = scored["k"].to_numpy().astype(np.float64)
    score = scored["score"].to_numpy()
    errors = {
        "se_r": k * (scored["q_regions"].to_numpy() - score) ** 2,
        "se_p": k * (scored["plain"].to_numpy() - score) ** 2,
        "ae_r": k * np.abs(scored["q_regions"].to_numpy() - score),
        "ae_p": k * np.abs(scored["plain"].to_numpy() - score),
        "k": k,
    }
    tasks, index = np.unique(scored["task"].to_numpy(), return_inverse=True)
    per_task = pl.DataFrame(
        {"task": tasks, **{name: np.bincount(index, weights=x, minlength=len(tasks)) for name, x in errors.items()}}
    )
    n = int(per_task["k"].sum())
    mse_r, mse_p, mae_r, mae_p = (float(per_task[col].sum()) / n for col in ("se_r", "se_p", "ae_r", "ae_p"))
    ci = paired_bootstrap(per_task, "se_r", "se_p", weight="k", seed=seed)
    recommendation, reason = calibration_verdict(mse_r, mse_p, ci, len(tasks), n)
    return CalibrationResult(
        regions_mse=mse_r,
        plain_mean_mse=mse_p,
        regions_mae=mae_r,
        plain_mean_mae=mae_p,
        difference_ci95=ci,
        recommendation=recommendation,
        reason=reason,
        n=n,
        tasks=len(tasks),
    )
