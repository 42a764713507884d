"""Ladder test helpers: task-value frames by hand (``frame``) and synthetic configs of rising skill and cost.

Plain helpers (no fixtures): tests import them with ``from fixtures_ladders import ...``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

SCHEMA = {
    "task": pl.String,
    "region": pl.String,
    "config_key": pl.String,
    "value": pl.Float64,
    "gate": pl.Float64,
    "cost_usd": pl.Float64,
}


def frame(rows: list[tuple]) -> pl.DataFrame:
    """(task, region, config, value, gate, cost) rows."""
    return pl.DataFrame([dict(zip(SCHEMA, r, strict=True)) for r in rows], schema=SCHEMA)


def synthetic(n_tasks: int = 120, n_configs: int = 6, seed: int = 0) -> pl.DataFrame:
    """Configs of rising skill and cost; 0/1 scores, gate = score."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_tasks):
        hard = rng.random()
        for j in range(n_configs):
            s = float(rng.random() < (0.3 + 0.1 * j) * (1.2 - hard))
            rows.append((f"t{i:04d}", "ab"[i % 2], f"c{j}", s, s, 0.001 * 2**j))
    return frame(rows)


def logged(rows: list[tuple]) -> pl.DataFrame:
    """(task, region, config, value, gate, cost, after) rows: ``after`` the configs that had failed before (a
    dispatcher's logs; empty: a first run)."""
    plain = frame([r[:6] for r in rows])
    return plain.with_columns(after=pl.Series([list(r[6]) for r in rows], dtype=pl.List(pl.String)))
