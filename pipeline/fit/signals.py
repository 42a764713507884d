"""Learning signals of the mini-ork loop: relative advantage, win rates, rejections (docs/design.md, Signals).

Pure functions over task values (:meth:`pipeline.fit.context.FitContext.values`: polars expressions, no Python
loop over tasks). Each formula lives in exactly one function, written in its docstring. The PRM fill-ins are made
by the aggregation (:func:`pipeline.fit.aggregate.prm_score_sql`); decision writeback and the off-policy estimates
live in :mod:`pipeline.fit.writeback`; :func:`signals_section` assembles the ``signals`` object of ``stats.json``
from all of them.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from ..scalars import latest
from ..utc import aware, naive

#: Half-life of the relative-advantage recency weight, in days (docs/design.md, Relative advantage).
ADVANTAGE_HALF_LIFE_DAYS = 14.0
_ROUND = 9


def _everywhere(frame: pl.DataFrame) -> pl.Expr:
    """The global pool ``'*'`` as a ``region`` column of ``frame``'s region type."""
    return pl.lit("*", dtype=frame.schema["region"])


def _age_days(at: pl.Expr, newest_at: datetime, dtype: pl.DataType) -> pl.Expr:
    """Days from ``at`` to ``newest_at``; matches the column's time zone (the store's is naive UTC)."""
    tz = getattr(dtype, "time_zone", None)
    newest_at = naive(newest_at) if tz is None else aware(newest_at)
    return (pl.lit(newest_at, dtype) - at).dt.total_microseconds() / 86_400e6


def task_advantages(task_values: pl.DataFrame) -> pl.DataFrame:
    """Per (task, config): ``z = (q_t,c - mean_t) / std_t`` over the configs rated on task t.

    Population standard deviation; ``z = 0`` when ``std_t = 0`` or the task has one config (GRPO's
    sigma = 0 guard). Columns ``task, region, config_key, at, z, configs`` (configs rated on t).
    """
    rows = task_values.filter(pl.col("value").is_not_null())
    mean = pl.col("value").mean().over("task")
    std = pl.col("value").std(ddof=0).over("task")
    return rows.select(
        "task",
        "region",
        "config_key",
        "at",
        z=pl.when((pl.len().over("task") >= 2) & (std > 0)).then((pl.col("value") - mean) / std).otherwise(0.0),
        configs=pl.len().over("task"),
    )


def relative_advantage(task_values: pl.DataFrame, newest_at: datetime | None) -> pl.DataFrame:
    """Relative advantage (GRPO) per (region, config_key), with region ``'*'`` for all tasks.

    ``A(c, r) = sum_t(u_t * z_t,c) / sum_t(u_t)`` over the tasks t of r rated on two or more configs,
    ``u_t = exp(-ln2 * age_days / 14)``, age of the (t, c) value's latest rating from ``newest_at``
    (the newest event of the fitted data; the newest rating when None). A config with no such task
    gets 0 with ``n_tasks = 0``. Columns ``region, config_key, relative_advantage, n_tasks``.
    """
    adv = task_advantages(task_values)
    if adv.is_empty():
        return pl.DataFrame(
            schema={"region": pl.String, "config_key": pl.String, "relative_advantage": pl.Float64, "n_tasks": pl.Int64}
        )
    newest = newest_at if newest_at is not None else latest(adv["at"])
    # No time known at all: no recency weighting, as the fit's recency without a newest time.
    age = _age_days(pl.col("at"), newest, adv.schema["at"]) if newest is not None else pl.lit(0.0)
    u = (-math.log(2.0) * age / ADVANTAGE_HALF_LIFE_DAYS).exp()
    adv = adv.with_columns(u=pl.when(pl.col("configs") >= 2).then(u).otherwise(0.0))
    both = pl.concat([adv, adv.with_columns(region=_everywhere(adv))])
    return (
        both.group_by("region", "config_key")
        .agg(
            uz=(pl.col("u") * pl.col("z")).sum(),
            u=pl.col("u").sum(),
            n_tasks=(pl.col("configs") >= 2).sum().cast(pl.Int64),
        )
        .select(
            "region",
            "config_key",
            relative_advantage=pl.when(pl.col("u") > 0).then(pl.col("uz") / pl.col("u")).otherwise(0.0).round(_ROUND),
            n_tasks="n_tasks",
        )
        .sort("region", "config_key")
    )


def _outcomes(frame: pl.DataFrame) -> pl.DataFrame:
    """Per (task, config) row: wins, losses, ties against every other config rated on the same task.

    ``wins`` = configs with a lower task value, ``losses`` = configs with a higher one, ties the rest
    (ranks within the task, so no pairwise join): with a task's values sorted, a row's wins are the
    rows before its run of equal values and its losses the rows after it.
    """
    n = frame.height
    if n == 0:
        return frame.with_columns(wins=pl.lit(0, pl.Int64), losses=pl.lit(0, pl.Int64), ties=pl.lit(0, pl.Int64))
    runs = frame.select(run=pl.col("task").rle_id(), tasks=pl.col("task").n_unique())
    task_ids = runs["run"]  # a task's rows are usually contiguous (task values are sorted by task time, task)
    if task_ids[-1] + 1 != runs["tasks"][0]:
        task_ids = frame["task"].rank("dense")
    task = task_ids.cast(pl.Int64).to_numpy()
    value = frame["value"].cast(pl.Float64).to_numpy()
    order = np.lexsort((value, task))
    t, v = task[order], value[order]
    idx = np.arange(n)
    new_task = np.concatenate([[True], t[1:] != t[:-1]])
    new_value = new_task | np.concatenate([[True], v[1:] != v[:-1]])
    end_task = np.concatenate([new_task[1:], [True]])
    end_value = np.concatenate([new_value[1:], [True]])
    task_start = np.maximum.accumulate(np.where(new_task, idx, 0))
    value_start = np.maximum.accumulate(np.where(new_value, idx, 0))
    task_end = np.minimum.accumulate(np.where(end_task, idx, n)[::-1])[::-1]
    value_end = np.minimum.accumulate(np.where(end_value, idx, n)[::-1])[::-1]
    wins, losses, ties = (np.empty(n, dtype=np.int64) for _ in range(3))
    wins[order] = value_start - task_start
    losses[order] = task_end - value_end
    ties[order] = value_end - value_start
    return frame.with_columns(wins=pl.Series(wins), losses=pl.Series(losses), ties=pl.Series(ties))


def _rate(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``win_rate = wins / (wins + losses)`` (ties excluded; null when no decisive comparison)."""
    return (
        frame.group_by(keys)
        .agg(pl.col("wins").sum(), pl.col("losses").sum(), pl.col("ties").sum(), n_tasks=pl.col("task").n_unique())
        .with_columns(
            win_rate=pl.when(pl.col("wins") + pl.col("losses") > 0)
            .then(pl.col("wins") / (pl.col("wins") + pl.col("losses")))
            .round(_ROUND)
        )
        .with_columns(pl.col("n_tasks").cast(pl.Int64))
        .sort(keys)
    )


def win_rates(task_values: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Pairwise win rates on shared tasks (docs/design.md, Win rate): the higher task value wins, ties excluded.

    Returns ``{"configs": ..., "prompt_versions": ...}``:
    - ``configs``: per (region incl. ``'*'``, config_key): ``wins, losses, ties, n_tasks, win_rate``;
    - ``prompt_versions`` (mini-ork's RHO): each rated (task, config) takes the prompt version of its
      latest attempt that names one (``prompt_version`` of the task values), and is compared with every other
      config rated on that task whose prompt version differs (a comparison within one prompt version says nothing
      about the prompt); per (prompt_version, region incl. ``'*'``): ``wins, losses, ties, n_tasks, win_rate`` and
      ``n = wins + losses``, its sample size.
    """
    if "prompt_version" not in task_values.columns:  # no attempt names one
        task_values = task_values.with_columns(prompt_version=pl.lit(None, pl.String))
    rows = task_values.filter(pl.col("value").is_not_null()).select(
        "task", "region", "config_key", "value", "prompt_version"
    )
    scored = _outcomes(rows.drop("prompt_version"))
    configs = _rate(pl.concat([scored, scored.with_columns(region=_everywhere(scored))]), ["region", "config_key"])
    empty = pl.DataFrame(
        schema={
            "prompt_version": pl.String,
            "region": task_values.schema["region"],
            "wins": pl.Int64,
            "losses": pl.Int64,
            "ties": pl.Int64,
            "n_tasks": pl.Int64,
            "win_rate": pl.Float64,
            "n": pl.Int64,
        }
    )
    if rows["prompt_version"].null_count() == rows.height:
        return {"configs": configs, "prompt_versions": empty}
    pairs = (
        rows.filter(pl.col("prompt_version").is_not_null())
        .join(rows.select("task", other_value="value", other_version="prompt_version"), on="task")
        .filter(pl.col("other_version").is_null() | (pl.col("other_version") != pl.col("prompt_version")))
        .with_columns(
            wins=(pl.col("value") > pl.col("other_value")).cast(pl.Int64),
            losses=(pl.col("value") < pl.col("other_value")).cast(pl.Int64),
            ties=(pl.col("value") == pl.col("other_value")).cast(pl.Int64),
        )
    )
    if pairs.is_empty():
        return {"configs": configs, "prompt_versions": empty}
    rho = _rate(pl.concat([pairs, pairs.with_columns(region=_everywhere(pairs))]), ["prompt_version", "region"])
    return {
        "configs": configs,
        "prompt_versions": rho.with_columns(n=(pl.col("wins") + pl.col("losses")).cast(pl.Int64)),
    }


def rejection_counts(task_values: pl.DataFrame) -> pl.DataFrame:
    """Grounded rejections (the anti-reward) per (region incl. ``'*'``, config_key): ``rejections, weight`` (the
    sum of their weights), from the task values' ``n_rej``/``w_rej``.

    They already enter the fit as ratings of score 0 with their weight; this only counts them.
    """
    rej = task_values.filter(pl.col("n_rej") > 0).select("task", "region", "config_key", "n_rej", "w_rej")
    both = pl.concat([rej, rej.with_columns(region=_everywhere(rej))])
    return (
        both.group_by("region", "config_key")
        .agg(rejections=pl.col("n_rej").sum().cast(pl.Int64), weight=pl.col("w_rej").sum())
        .sort("region", "config_key")
    )


def member_signals(
    task_values: pl.DataFrame,
    newest_at: datetime | None,
    *,
    advantage: pl.DataFrame | None = None,
    wins: dict[str, pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """``region, config_key, relative_advantage, win_rate``: the two per-member columns of the routing table.

    ``advantage`` / ``wins``: :func:`relative_advantage` / :func:`win_rates` of these task values when the
    caller has them already (the learning stage computes them once for the table and the stats).
    """
    if advantage is None:
        advantage = relative_advantage(task_values, newest_at)
    adv = advantage.select("region", "config_key", "relative_advantage")
    rates = (wins or win_rates(task_values))["configs"].select("region", "config_key", "win_rate")
    return adv.join(rates, on=["region", "config_key"], how="full", coalesce=True).sort("region", "config_key")


def _rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return frame.to_dicts()


def origin_counts(counts: list[dict[str, Any]], prm_fill_ins: int) -> dict[str, int]:
    """The fitted ratings by origin (``prm``, ``rating``, ``rejection``: those there are), from the aggregation's
    counts of real ratings not retracted and the number of PRM fill-ins."""
    out = {
        "prm": prm_fill_ins,
        "rating": sum(int(r["live"]) for r in counts if not r["rejection"]),
        "rejection": sum(int(r["live"]) for r in counts if r["rejection"]),
    }
    return {k: v for k, v in out.items() if v}


def signals_section(
    counts: list[dict[str, Any]],
    *,
    task_values: pl.DataFrame,
    newest_at: datetime | None,
    writeback: list[dict[str, Any]] | None = None,
    off_policy: dict[str, Any] | None = None,
    top: int = 3,
    advantage: pl.DataFrame | None = None,
    wins: dict[str, pl.DataFrame] | None = None,
) -> dict[str, Any]:
    """The ``signals`` object of ``stats.json``.

    ``counts`` (ratings by origin, tasks compared by the advantage, rejections, prompt versions),
    ``members`` per region (incl. ``'*'``): the ``top`` best and worst members by relative advantage
    with their win rate and sample sizes, ``rejections`` per region/config, ``prompt_versions`` (RHO),
    ``decisions`` (:func:`pipeline.fit.writeback.decision_writeback`) and ``off_policy``
    (:func:`pipeline.fit.writeback.off_policy`) as given by the caller. ``counts``: the aggregation's rating
    counts (the ``counts`` of :class:`pipeline.fit.context.FitContext`); ``advantage`` / ``wins``:
    :func:`relative_advantage` / :func:`win_rates` of these task values, when computed already.
    """
    adv = advantage if advantage is not None else relative_advantage(task_values, newest_at)
    wins = wins or win_rates(task_values)
    members = adv.join(
        wins["configs"].rename({"n_tasks": "rated_tasks"}), on=["region", "config_key"], how="full", coalesce=True
    ).with_columns(pl.col("relative_advantage").fill_null(0.0), pl.col("n_tasks").fill_null(0))
    per_region: dict[str, Any] = {}
    for region in sorted(members["region"].cast(pl.String).unique().to_list()):
        rows = members.filter(pl.col("region") == region)
        best = rows.sort(["relative_advantage", "config_key"], descending=[True, False]).head(top)
        worst = rows.sort(["relative_advantage", "config_key"], descending=[False, False]).head(top)
        per_region[region] = {"top": _rows(best), "bottom": _rows(worst)}
    # tasks the advantage compares: those rated on two or more configs
    compared = (
        task_values.filter(pl.col("value").is_not_null()).group_by("task").len().filter(pl.col("len") >= 2).height
    )
    prm = int(task_values["prm"].sum())
    by_origin = origin_counts(counts, prm)
    return {
        "counts": {
            "ratings_by_origin": by_origin,
            "prm_fill_ins": prm,
            "tasks_compared": int(compared),
            "rejections": by_origin.get("rejection", 0),
            "prompt_versions": int(wins["prompt_versions"]["prompt_version"].n_unique()),
        },
        "members": per_region,
        "rejections": _rows(rejection_counts(task_values)),
        "prompt_versions": _rows(wins["prompt_versions"]),
        "decisions": writeback,
        "off_policy": off_policy,
    }
