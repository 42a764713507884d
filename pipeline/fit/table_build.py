"""Turn a :class:`~pipeline.fit.model.FittedModel` into a ``routing-table/v1`` (docs/design.md, Routing table).

Regions are every region with fitted ratings plus ``'*'``, the global pool. A region's members are
the configs rated in it, sorted by config key; its ``choice`` is the greedy choice over those members
(docs/design.md, Greedy choice and ties). Published floats are rounded to 9 decimals, so the same fit gives the
same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

import polars as pl

from ..errors import FitError
from ..rounding import round_figure
from ..routing.table import ConstantOrigin, Evidence, Ladder, Member, Region, RoutingTable, Source, Static
from ..utc import format_timestamp
from .model import FittedModel

SIGNAL_COLUMNS = ("relative_advantage", "win_rate")


def build_table(
    model: FittedModel,
    *,
    constants_source: Literal["fitted", "shipped", "mixed"],
    static: Static,
    source: Source | Mapping[str, Any],
    fitted_at: datetime | None,
    evaluation: Mapping[str, Any] | None = None,
    signals: pl.DataFrame | None = None,
    ladders: Mapping[str, Ladder] | None = None,
    gate: pl.DataFrame | None = None,
    provenance: Mapping[str, ConstantOrigin] | None = None,
) -> RoutingTable:
    """The routing table of ``model`` (unversioned: :func:`pipeline.routing.table.publish` stamps it).

    ``fitted_at`` is the newest event time of the fitted data (naive times are UTC).
    ``signals`` (optional) has ``config_key, region`` and any of ``relative_advantage, win_rate``
    (region ``'*'`` too); pairs it lacks get null. ``ladders`` maps a region to its ladder. ``gate``:
    :func:`pipeline.fit.gate.gate_evidence` rows (each member's tests against the static choices).
    ``provenance``: per searched constant, fitted, shipped or pinned.
    ``objective`` is the model's effective objective: ``quality`` when no cost is known, since
    every ``value`` then is the quality.
    """
    members = model.members
    if members["quality"].null_count():
        raise FitError(
            "no fitted rating carries weight (every w = precision*confidence*importance is 0), "
            "so no quality can be estimated"
        )
    if signals is not None:
        present = [c for c in SIGNAL_COLUMNS if c in signals.columns]
        members = members.join(
            signals.select(pl.col("config_key").cast(pl.String), pl.col("region").cast(pl.String), *present),
            on=["config_key", "region"],
            how="left",
            maintain_order="left",
        )
    members = members.with_columns(
        pl.lit(None, pl.Float64).alias(c) for c in SIGNAL_COLUMNS if c not in members.columns
    )
    choice = model.choose_frame(members.select(task="region", region="region", config_key="config_key"))
    chosen = dict(zip(choice["task"].to_list(), choice["chosen"].to_list(), strict=True))
    tests = _evidence(gate)
    regions: dict[str, Region] = {}
    for name, rows in members.sort("region", "config_key").group_by("region", maintain_order=True):
        region = name[0]
        regions[region] = Region(
            members=[
                _member(row, tests.get((region, row["config_key"]), {}) if gate is not None else None)
                for row in rows.iter_rows(named=True)
            ],
            choice=chosen[region],
            ladder=(ladders or {}).get(region),
        )
    return RoutingTable(
        fitted_at=_timestamp(fitted_at),
        source=source if isinstance(source, Source) else Source.model_validate(dict(source)),
        objective=model.effective_objective,
        constants=model.constants,
        constants_source=constants_source,
        constants_provenance=dict(provenance or {}),
        static=static,
        regions=regions,
        evaluation=dict(evaluation or {}),
    )


#: The v1.2 fields of a gate test (the evidence of logged runs), published as computed.
_LOGGED = ("tasks", "runs", "static_runs", "effective_samples", "weighted", "escalations", "level")


def _evidence(gate: pl.DataFrame | None) -> dict[tuple[str, str], dict[str, Evidence]]:
    """(region, config) -> {static choice: its gate test}, floats rounded as published."""
    tests: dict[tuple[str, str], dict[str, Evidence]] = {}
    for row in (gate if gate is not None else pl.DataFrame()).iter_rows(named=True):
        tests.setdefault((row["region"], row["config_key"]), {})[row["against"]] = Evidence(
            shared_tasks=int(row["shared_tasks"]),
            difference=round_figure(row["difference"]),
            lower=round_figure(row["lower"]),
            passes=bool(row["passes"]),
            **{k: row[k] for k in _LOGGED if row.get(k) is not None},
        )
    return tests


def _member(row: dict[str, Any], gate: dict[str, Evidence] | None) -> Member:
    return Member(
        config=row["config_key"],
        quality=round_figure(row["quality"]),
        cost_usd=round_figure(row["cost_usd"]),
        value=round_figure(row["value"]),
        weight=round_figure(row["weight"]),
        n_ratings=int(row["n_ratings"]),
        relative_advantage=round_figure(row["relative_advantage"]),
        win_rate=round_figure(row["win_rate"]),
        prior=round_figure(row["prior"]),
        gate=gate,
    )


def _timestamp(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return format_timestamp(moment)
