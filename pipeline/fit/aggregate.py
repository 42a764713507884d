"""The fit's one aggregation (docs/design.md, Fit, The aggregation): per-rating rows exist only inside the engine.

Over the store's views at one version, a few SQL statements label every task with the part of the evaluation it
belongs to (from the task order) and sum its ratings and attempts once per (task, config). Everything the later
stages read comes out of here as small rows (:class:`Aggregate`); :class:`pipeline.fit.context.FitContext` is
built from them. Each family is scanned once or twice (the task dictionary, then the sums); the ratings are read
once into ``fit_rated``, an engine-side table of codes and numbers that every sum of a rating reads.

**Levels.** A (task, config) pair is summed at up to three levels of time cut:

- level 0: every event of every task (the published fit; the held-out part);
- level 1: the learned tasks, events at or before the cutoff (the learned part; validation);
- level 2: the inner learned tasks, events at or before the inner cutoff (the inner learned part).

Only a task with an event after a cut (or without a time) has other sums at that level: the rows of levels 1 and
2 are written for those *late* tasks alone, and replace the task's level-0 rows there.

**Exact sums.** Every sum of a weight (``W = sum w``, ``S = sum w s``, the gate sums, the recency-weighted sums,
the known costs) is an integer sum of a fixed-point value: each term ``x`` (the product of the weights computed
first, in double precision, ``0 <= x < 2^20``) is cut into three integers, ``hi = floor(x 2^21)``, then
``mid = floor(frac(x 2^21) 2^43)`` and ``lo = floor(frac(frac(x 2^21) 2^43) 2^43)`` (together ``floor(x 2^107)``:
every double of at least ``2^-54`` exactly, a cost of a billionth of a dollar included), each summed as a 64-bit
integer (exact up to about a million terms a pair). Integer sums do not depend on the order of the terms, so the
result is the same on any number of threads and on any engine; ``hi 2^-21 + mid 2^-64 + lo 2^-107`` is put
together once, in Python (:func:`pipeline.fit.context.unfix`).

**Recency.** A half-life H weighs rating i by ``exp(-ln 2 * age_i / H)``, the age in days from the newest event
of the part (docs/design.md, Rating weight). The engine sums the weights relative to the task's reference time
(its latest rating, ``ref``), ``exp(-ln 2 * (ref - at_i) / H)``, which keeps the sums precise for old tasks; the
part's factor ``exp(-ln 2 * (newest - ref) / H)`` multiplies them afterwards (the product is the same weight). In
SQL each factor is ``2^-x`` with ``+``, ``-``, ``*`` only, the same bits on every engine (:mod:`pipeline.fit.halving`).

**Portability.** The statements are SQL that DuckDB and Spark SQL both run, with the few spellings that differ
passed in (:class:`pipeline.fit.engine.Dialect`). Every numeric literal is a double (``1e0``: ``1.0`` is a decimal
in both), every ordering says where NULL goes, ``"at"`` is quoted (Spark needs
``spark.sql.ansi.doubleQuotedIdentifiers``), and ties are broken by ``id``, so that each "first" and "latest" is
one row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..streams.events import MAX_COST_USD, MAX_WEIGHT
from ..utc import aware, naive
from .engine import DUCKDB, SPARK, Dialect, DuckDBEngine, Engine
from .finite import SHOWN
from .halving import recency_sql

if TYPE_CHECKING:
    import pyarrow as pa

#: Statuses of a failed attempt (docs/design.md, Evidence gate: escalations).
FAILED = ("failure", "vacuous", "blocked", "escalated")
#: Reviewer verdicts that count as approval for the PRM (compared case-insensitively; docs/design.md, PRM).
APPROVALS = ("approve", "approved", "pass", "success", "ok")
#: Decimals of a PRM fill-in's score.
PRM_DECIMALS = 9

__all__ = ["DUCKDB", "SPARK", "Aggregate", "Dialect", "DuckDBEngine", "Engine", "Spec", "Split", "aggregate"]


@dataclass(frozen=True)
class Spec:
    """What to aggregate: the task filters (``--thread``, ``--since``), PRM fill-ins, the half-lives of the
    recency sums and the split fraction (None: no split, every task at level 0 only)."""

    thread: str | None = None
    since: datetime | None = None
    prm: bool = True
    half_lives: tuple[float, ...] = ()
    fraction: Fraction | None = None


@dataclass(frozen=True)
class Split:
    """The chronological split in task positions (1-based, in ``(first_at, task)`` order, tasks without a time
    first; docs/design.md, Split; Validation).

    Tasks ``1..learned`` are learned, the rest held out. The learned part holds tasks ``first..learned`` (a task
    without any time cannot be placed before a cutoff and is left out when there is one); its inner learned
    tasks are ``first..inner_end - 1``, its validation tasks ``inner_end..learned``.
    """

    tasks: int
    learned: int
    first: int
    inner_end: int
    cutoff: datetime | None
    inner_cutoff: datetime | None

    @property
    def inner(self) -> int:
        return self.inner_end - self.first

    @property
    def validation(self) -> int:
        return self.learned + 1 - self.inner_end


@dataclass(frozen=True)
class Aggregate:
    """The rows of one aggregation (times in microseconds since the epoch, UTC).

    - ``configs``: ``config_key, config`` (the dictionary: codes in key order);
    - ``tasks``: per task ``code`` (its rank by task id), ``pos``, ``first_at``, ``level`` (the deepest level it
      reaches: 0, 1 validation, 2 inner learned), ``learned``, the region at each level (``region``,
      ``region1``, ``region2``), ``ref`` (its recency reference), ``late1``, ``late2``;
    - ``pairs``: per (level, task, config) the sums of :func:`pairs_sql`;
    - ``scores``: per held-out (task, config, score) ``k`` real ratings (calibration);
    - ``decisions``, ``candidates``, ``closures``: the logged decisions, their candidates, the closures;
    - ``counts``: the ratings by rater kind and origin; ``newest``: per level its newest event time;
    - ``bounds``: per kind of row outside the event bounds, what it is, how many, the first ids.
    """

    configs: pa.Table
    tasks: pa.Table
    pairs: pa.Table
    scores: pa.Table
    decisions: pa.Table
    candidates: pa.Table
    closures: pa.Table
    counts: list[dict[str, Any]]
    newest: dict[int, int | None]
    bounds: list[tuple[str, int, list[str]]]
    split: Split | None
    spec: Spec


# --------------------------------------------------------------------------------------------- helpers
def fixed(expr: str, name: str) -> str:
    """The three integer sums of the fixed-point value of ``expr`` (module docstring): ``<name>_hi, _mid, _lo``."""
    a = f"({expr}) * 2097152e0"
    b = f"(({a} - floor({a})) * 8796093022208e0)"
    c = f"(({b} - floor({b})) * 8796093022208e0)"
    return ", ".join(
        f"sum(CAST(floor({x}) AS BIGINT)) AS {name}_{part}" for x, part in ((a, "hi"), (b, "mid"), (c, "lo"))
    )


def micros(moment: datetime | None) -> int | None:
    """A store time (naive UTC, or aware) in microseconds since the epoch."""
    if moment is None:
        return None
    delta = aware(moment) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _timestamp(moment: datetime) -> str:
    return f"TIMESTAMP '{naive(moment).isoformat(sep=' ')}'"


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _key(d: Dialect, *, latest: bool) -> str:
    """The ordering key of "the first" (a timed event before one without a time) or "the latest" (one without a
    time before any timed one) event by ``(at, id)``: ``min_by``/``max_by`` of it."""
    at = f'coalesce({d.micros}("at"), 0)'
    return f'("at" IS NOT NULL, {at}, id)' if latest else f'("at" IS NULL, {at}, id)'


_INSIDE_RATING = f"(w IS NULL OR w BETWEEN 0e0 AND {MAX_WEIGHT:.0f}e0) AND (score IS NULL OR score BETWEEN 0e0 AND 1e0)"
INSIDE_ATTEMPT = f"(cost_usd IS NULL OR cost_usd BETWEEN 0e0 AND {MAX_COST_USD:.0f}e0)"


# --------------------------------------------------------------------------------------------- statements
def ratings_sql() -> str:
    """Every rating and rejection: ``w = precision * confidence * importance`` (a rejection's ``weight``, with
    score 0: docs/design.md, Rating weight) and whether it is inside the event bounds (:mod:`pipeline.fit.finite`:
    w in ``[0, 1e6]``, score in ``[0, 1]``; NaN and infinities are outside, null is not)."""
    return f"""
SELECT *, {_INSIDE_RATING} AS inside FROM (
    SELECT id, task, config_key, "at", score, precision * confidence * importance AS w, rater_kind,
           FALSE AS rejection FROM ratings
    UNION ALL
    SELECT id, task, config_key, "at", 0e0 AS score, weight AS w, rater_kind, TRUE AS rejection FROM rejections
) u"""


def configs_sql(d: Dialect) -> str:
    """Every config key the events name, coded in key order; with the rows outside the event bounds counted."""
    return f"""
SELECT config_key, CAST(row_number() OVER (ORDER BY config_key) - 1 AS INTEGER) AS config,
       CAST(sum(outside_ratings) AS BIGINT) AS outside_ratings,
       CAST(sum(outside_attempts) AS BIGINT) AS outside_attempts
FROM (
    SELECT config_key, CASE WHEN inside THEN 0 ELSE 1 END AS outside_ratings, 0 AS outside_attempts
    FROM fit_all_ratings
    UNION ALL SELECT config_key, 0, CASE WHEN {INSIDE_ATTEMPT} THEN 0 ELSE 1 END FROM attempts
    UNION ALL SELECT chosen, 0, 0 FROM decisions
    UNION ALL SELECT {d.explode}(candidates), 0, 0 FROM decisions
) k GROUP BY config_key"""


def tasks_sql(d: Dialect, spec: Spec) -> str:
    """Every task named by an event of any kind, with what the split and the levels need.

    ``first_at``: its first event (any family, retracted ratings included; docs/design.md, Inputs);
    ``region``/``thread``/``opened_us``: of its first ``task.opened`` by ``(at, id)`` (region ``general``
    without one); ``ref``: its latest rating; ``late_at``/``untimed``: its latest rating or attempt, and
    whether one has no time. ``--thread`` and ``--since`` keep only some tasks, before the split. ``code``: the
    rank by task id; ``pos``: by ``(first_at, task)``, tasks without any time first.
    """
    where = []
    if spec.thread is not None:
        where.append(f"thread = {_text(spec.thread)}")
    if spec.since is not None:
        where.append(f"first_at >= {_timestamp(spec.since)}")
    first = _key(d, latest=False)
    return f"""
WITH events AS (
    SELECT task, "at", 0 AS kind, region, thread, id FROM tasks
    UNION ALL SELECT task, "at", 1, NULL, NULL, NULL FROM fit_all_ratings WHERE inside
    UNION ALL SELECT task, "at", 2, NULL, NULL, NULL FROM attempts WHERE {INSIDE_ATTEMPT}
    UNION ALL SELECT task, "at", 3, NULL, NULL, NULL FROM decisions
    UNION ALL SELECT task, "at", 3, NULL, NULL, NULL FROM closures
), times AS (
    SELECT task, min("at") AS first_at,
           min_by(region, {first}) FILTER (WHERE kind = 0) AS region,
           min_by(thread, {first}) FILTER (WHERE kind = 0) AS thread,
           {d.micros}(min("at") FILTER (WHERE kind = 0)) AS opened_us,
           max({d.micros}("at")) FILTER (WHERE kind = 1) AS ref,
           max({d.micros}("at")) FILTER (WHERE kind IN (1, 2)) AS late_at,
           coalesce(bool_or("at" IS NULL) FILTER (WHERE kind IN (1, 2)), FALSE) AS untimed
    FROM events WHERE task IS NOT NULL GROUP BY task
), scope AS (
    SELECT * FROM times {"WHERE " + " AND ".join(where) if where else ""}
)
SELECT task, CAST(row_number() OVER (ORDER BY task) - 1 AS INTEGER) AS code,
       CAST(row_number() OVER (ORDER BY first_at NULLS FIRST, task) AS BIGINT) AS pos,
       first_at, coalesce(region, 'general') AS region, opened_us, ref, late_at, untimed
FROM scope"""


def rated_sql(d: Dialect) -> str:
    """``fit_rated``: every rating of a task in scope inside the bounds, once, as codes and numbers: its task,
    config, time, ``w``, ``s``, whether a rater of kind ``gate`` gave it, whether it is a rejection, its rater
    kind and the time of the first retraction naming it."""
    return f"""
SELECT t.code AS task, c.config, {d.micros}(r."at") AS at_us, r.w, r.score AS s,
       coalesce(r.rater_kind = 'gate', FALSE) AS gate, r.rejection, r.rater_kind,
       {d.micros}(x.retracted_at) AS retracted_us
FROM fit_all_ratings r JOIN fit_tasks t ON t.task = r.task JOIN fit_configs c ON c.config_key = r.config_key
LEFT JOIN (SELECT rating, min("at") AS retracted_at FROM retractions GROUP BY rating) x ON x.rating = r.id
WHERE r.inside"""


def learned_count(n: int, fraction: Fraction) -> int:
    """``floor(n * fraction)`` computed exactly (0.7 means 7/10: ten tasks give seven learned ones)."""
    product = n * fraction
    return product.numerator // product.denominator


def split_of(engine: Engine, fraction: Fraction) -> Split:
    """The split of the tasks of ``fit_tasks`` (docs/design.md, Split; Validation)."""
    counts = engine.fetch("SELECT count(*) AS n, count(*) FILTER (WHERE first_at IS NULL) AS z FROM fit_tasks")
    n, untimed = int(counts["n"][0].as_py()), int(counts["z"][0].as_py())
    learned = learned_count(n, fraction)
    cutoff = _first_at(engine, learned + 1) if learned < n else None
    first = untimed + 1 if cutoff is not None else 1
    inner_end = first + learned_count(max(learned - first + 1, 0), fraction)
    inner_cutoff = _first_at(engine, inner_end) if inner_end <= learned else None
    return Split(n, learned, first, inner_end, cutoff, inner_cutoff if inner_cutoff is not None else cutoff)


def _first_at(engine: Engine, pos: int) -> datetime | None:
    rows = engine.fetch(f"SELECT first_at FROM fit_tasks WHERE pos = {pos}")["first_at"].to_pylist()
    return rows[0] if rows else None


def _cuts(split: Split | None) -> tuple[int | None, int | None]:
    return (None, None) if split is None else (micros(split.cutoff), micros(split.inner_cutoff))


def levels_sql(split: Split | None) -> str:
    """``fit_levels``: per task its code, deepest level, regions at each level (a task opened after the cut, or
    at no known time, is ``general`` there), recency reference and whether each cut changes its sums (a rating,
    retraction or attempt after it, or one without a time)."""
    cuts = _cuts(split)
    if split is None:
        level, learned = "0", "0"
    else:
        level = (
            f"CASE WHEN pos > {split.learned} OR pos < {split.first} THEN 0 "
            f"WHEN pos < {split.inner_end} THEN 2 ELSE 1 END"
        )
        learned = str(split.learned)

    def region(cut: int | None) -> str:
        if cut is None:
            return "region"
        return f"CASE WHEN opened_us IS NOT NULL AND opened_us <= {cut} THEN region ELSE 'general' END"

    def late(cut: int | None, deep: int) -> str:
        if cut is None:
            return "FALSE"
        return f"(lv >= {deep} AND (untimed OR late_at > {cut} OR coalesce(retracted_us > {cut}, FALSE)))"

    return f"""
SELECT task, code, pos, first_at, lv AS level, pos <= {learned} AS learned, region,
       {region(cuts[0])} AS region1, {region(cuts[1])} AS region2, ref, {late(cuts[0], 1)} AS late1,
       {late(cuts[1], 2)} AS late2
FROM (
    SELECT t.*, {level} AS lv, x.retracted_us FROM fit_tasks t
    LEFT JOIN (SELECT task, max(retracted_us) AS retracted_us FROM fit_rated GROUP BY task) x ON x.task = t.code
) l"""


def _by_level(source: str, cuts: tuple[int | None, int | None], live0: str, live: str) -> str:
    """The rows of ``source`` once per level they count at: level 0 where ``live0`` holds; level L, for the tasks a
    cut changes (``late<L>``), the rows at or before the cut where ``live`` (formatted with ``cut``) holds."""
    out = [f"SELECT 0 AS level, * FROM {source} WHERE {live0}"]
    for level, cut in ((1, cuts[0]), (2, cuts[1])):
        if cut is not None:
            out.append(
                f"SELECT {level} AS level, * FROM {source} WHERE late{level} AND at_us <= {cut} AND "
                + live.format(cut=cut)
            )
    return "\n    UNION ALL\n    ".join(out)


def _shared(d: Dialect, name: str, sql: str) -> tuple[str, str]:
    """A relation one statement reads more than once (once per level of :func:`_by_level`): the CTE that defines
    it (with its trailing comma) and the name to read; where the dialect materializes such relations, no CTE and
    the engine-side table ``fit_<name>`` that :func:`aggregate` made of the same ``sql`` first (:data:`SHARED`)."""
    if d.materialize:
        return "", f"fit_{name}"
    return f"{name} AS ({sql}\n), ", name


def prm_score_sql() -> str:
    """The PRM score of an attempt (docs/design.md, PRM), the terms in this order, rounded to 9 decimals."""
    approvals = ", ".join(_text(a) for a in APPROVALS)
    return f"""round(greatest(least(
        0.4e0 * CAST(coalesce(status = 'success', FALSE) AS DOUBLE)
        + least(0.2e0 * CAST(coalesce(tool_calls, 0) > 0 AS DOUBLE)
                + 0.1e0 * CAST(coalesce(files_read, 0) + coalesce(files_written, 0) > 0 AS DOUBLE), 0.15e0)
        + 0.15e0 * CAST(coalesce(status = 'success' AND lower(reviewer_verdict) IN ({approvals}), FALSE) AS DOUBLE)
        + 0.1e0 * CAST(coalesce(duration_ms BETWEEN 1000 AND 600000, FALSE) AS DOUBLE)
        + 0.05e0 * CAST(coalesce(cost_usd > 0e0, FALSE) AS DOUBLE), 1e0), 0e0), {PRM_DECIMALS})"""


def rating_sums(spec: Spec) -> list[str]:
    """The fixed-point sums of ``rating_sums`` (each ``<name>_hi``, ``_mid``, ``_lo``)."""
    return ["w", "s", "gw", "gs", "rej", *(f"{x}{i}" for i in range(len(spec.half_lives)) for x in ("w", "s"))]


def attempted_sql(d: Dialect) -> str:
    """``attempted``: every attempt of a task in scope inside the bounds, as codes and numbers, with its PRM score
    and whether it is traced."""
    return f"""
    SELECT l.code AS task, c.config, l.late1, l.late2, {d.micros}(a."at") AS at_us, a.id, a.cost_usd,
           (a.tool_calls IS NOT NULL OR a.files_read IS NOT NULL OR a.files_written IS NOT NULL) AS traced,
           {prm_score_sql()} AS prm,
           a.prompt_version, a.status, a.duration_ms
    FROM attempts a JOIN fit_levels l ON l.task = a.task JOIN fit_configs c ON c.config_key = a.config_key
    WHERE {INSIDE_ATTEMPT.replace("cost_usd", "a.cost_usd")}"""


def attempt_sums_sql(d: Dialect, split: Split | None) -> str:
    """``fit_attempt_sums``: per (level, task, config) the attempts of a task in scope, inside the bounds
    (``attempts``, ``priced``: those with a cost, ``cost``: the fixed-point sum of their costs), the latest
    attempt's time, the PRM fill-in (score and time of the latest traced attempt by ``(at, id)``), the prompt
    version of the latest attempt naming one, the first start (``at - duration_ms``) and the first failure."""
    failed = ", ".join(_text(s) for s in FAILED)
    key = "(at_us IS NOT NULL, coalesce(at_us, 0), id)"
    cte, attempted = _shared(d, "attempted", attempted_sql(d))
    return f"""
WITH {cte}by_level AS (
    {_by_level(attempted, _cuts(split), "TRUE", "TRUE")}
)
SELECT level, task, config, count(*) AS attempts, count(cost_usd) AS priced, {fixed("cost_usd", "cost")},
       max(at_us) AS latest,
       max_by(prm, {key}) FILTER (WHERE traced) AS prm_score,
       max_by(at_us, {key}) FILTER (WHERE traced) AS prm_at,
       max_by(prompt_version, {key}) FILTER (WHERE prompt_version IS NOT NULL) AS prompt_version,
       min(at_us - coalesce(duration_ms, 0) * 1000) AS start_us,
       min(at_us) FILTER (WHERE status IN ({failed})) AS failed_us
FROM by_level GROUP BY level, task, config"""


def recent_sql(spec: Spec) -> str:
    """``recent``: every rating of ``fit_rated`` with its task's ``late1``, ``late2``, ``ref`` and its recency
    factors (:func:`recency_sql`)."""
    return recency_sql(
        "(SELECT r.*, l.late1, l.late2, l.ref FROM fit_rated r JOIN fit_levels l ON l.code = r.task) j", spec.half_lives
    )


def pairs_sql(d: Dialect, spec: Spec, split: Split | None) -> str:
    """The one aggregation: per (level, task, config) with a real rating (or a PRM fill-in) at that level.

    Columns: ``level, task, config``; ``n`` (the real ratings: ratings and rejections not retracted there),
    ``at`` (the latest of them); the fixed-point sums of :func:`rating_sums`: ``w``, ``s`` (``sum w``,
    ``sum w s``), ``gw``, ``gs`` (the same over raters of kind ``gate``), ``rej`` (``sum w`` of the
    rejections), and per half-life i ``w<i>``, ``s<i>`` (recency-weighted, relative to the task's reference);
    ``n_rej``; from :func:`attempt_sums_sql` ``attempts, priced, cost_hi, cost_mid, cost_lo, prm_score, prm_at,
    prompt_version``; ``escalated`` (of all the task's attempts, whatever the level: c's first attempt started
    after another config's attempt on the task had failed; docs/design.md, Evidence gate). Sorted by (level,
    task, config).
    """
    cuts = _cuts(split)
    recency = "".join(
        f",\n        {fixed(f'w * rec{i}', f'w{i}')},\n        {fixed(f'(w * rec{i}) * s', f's{i}')}"
        for i in range(len(spec.half_lives))
    )
    sums = [f"r.{name}_{part}" for name in rating_sums(spec) for part in ("hi", "mid", "lo")]
    prm = "TRUE" if spec.prm else "FALSE"
    cte, recent = _shared(d, "recent", recent_sql(spec))
    return f"""
WITH {cte}live AS (
    {_by_level(recent, cuts, "retracted_us IS NULL", "NOT coalesce(retracted_us <= {cut}, FALSE)")}
), rating_sums AS (
    SELECT level, task, config, count(*) AS n, max(at_us) AS "at", count(*) FILTER (WHERE rejection) AS n_rej,
        {fixed("w", "w")},
        {fixed("w * s", "s")},
        {fixed("CASE WHEN gate THEN w END", "gw")},
        {fixed("CASE WHEN gate THEN w * s END", "gs")},
        {fixed("CASE WHEN rejection THEN w END", "rej")}{recency}
    FROM live GROUP BY level, task, config
), escalated AS (
    SELECT s.task, s.config FROM fit_attempt_sums s JOIN fit_attempt_sums f
      ON s.level = 0 AND f.level = 0 AND f.task = s.task AND f.config <> s.config AND f.failed_us < s.start_us
    GROUP BY s.task, s.config
), joined AS (
    SELECT coalesce(r.level, a.level) AS level, coalesce(r.task, a.task) AS task,
           coalesce(r.config, a.config) AS config, coalesce(r.n, 0) AS n, r."at", r.n_rej, {", ".join(sums)},
           a.attempts, a.priced, a.cost_hi, a.cost_mid, a.cost_lo,
           CASE WHEN r.n IS NULL AND {prm} THEN a.prm_score END AS prm_score,
           CASE WHEN r.n IS NULL AND {prm} THEN a.prm_at END AS prm_at, a.prompt_version
    FROM rating_sums r FULL OUTER JOIN fit_attempt_sums a
      ON a.level = r.level AND a.task = r.task AND a.config = r.config
)
SELECT j.*, e.task IS NOT NULL AS escalated
FROM joined j LEFT JOIN escalated e ON e.task = j.task AND e.config = j.config
WHERE j.n > 0 OR j.prm_score IS NOT NULL
ORDER BY j.level, j.task, j.config"""


def decisions_sql(d: Dialect) -> str:
    """``fit_decisions``: the logged decisions of the tasks in scope, numbered in ``(at, id)`` order (a time before
    no time)."""
    return f"""
SELECT CAST(row_number() OVER (ORDER BY x."at" IS NOT NULL, x."at", x.id) - 1 AS BIGINT) AS decision,
       l.code AS task, {d.micros}(x."at") AS "at", x.policy, x.chosen, x.candidates, x.propensity, x.explored,
       x.table_version, x.predicted_quality, x.after_failed
FROM decisions x JOIN fit_levels l ON l.task = x.task"""


def closures_sql(d: Dialect) -> str:
    """``fit_closures``: the closures of the tasks in scope in ``(at, id)`` order (a time before no time)."""
    return f"""
SELECT CAST(row_number() OVER (ORDER BY c."at" IS NOT NULL, c."at", c.id) - 1 AS BIGINT) AS seq, l.code AS task,
       l.level, {d.micros}(c."at") AS t, c.outcome
FROM closures c JOIN fit_levels l ON l.task = c.task"""


def side_sql(d: Dialect, split: Split | None) -> dict[str, str]:
    """The small queries beside the aggregation (over ``fit_rated``, ``fit_levels``, the decisions and closures).

    - ``scores``: per held-out (task, config, score) ``k``, the real ratings not retracted (calibration:
      docs/design.md, Calibration);
    - ``decisions``, ``candidates``, ``closures``: the logged decisions, each decision's candidates one a row,
      the closures, in ``(at, id)`` order, as codes;
    - ``counts``: per (rater kind, rejection) the ratings not retracted, the retracted ones, and those not
      retracted with a weight above 0;
    - ``newest``: per level L its newest event time (docs/design.md, Inputs: every age is measured from it),
      ``r<L>`` of the ratings (a retracted one by its retraction), ``e<L>`` of every other event.
    """
    cuts = _cuts(split)
    rating_newest = ["max(CASE WHEN retracted_us IS NULL THEN at_us ELSE retracted_us END) AS r0"]
    event_newest = ["max(t) AS e0"]
    for level, cut in ((1, cuts[0]), (2, cuts[1])):
        if cut is None:
            continue
        rating_newest.append(
            f"max(CASE WHEN l.level >= {level} AND at_us <= {cut} THEN CASE WHEN retracted_us <= {cut} "
            f"THEN retracted_us ELSE at_us END END) AS r{level}"
        )
        event_newest.append(f"max(CASE WHEN level >= {level} AND t <= {cut} THEN t END) AS e{level}")
    # Attempts: a level's latest per (task, config) is its own row for the tasks the cut changes, else level 0's.
    events = f"""
        SELECT l.level, a.latest AS t FROM fit_attempt_sums a JOIN fit_levels l ON l.code = a.task WHERE a.level = 0
        UNION ALL SELECT level, t FROM fit_closures
        UNION ALL SELECT l.level, x."at" FROM fit_decisions x JOIN fit_levels l ON l.code = x.task
        UNION ALL SELECT l.level, {d.micros}(l.first_at) FROM fit_levels l
        UNION ALL SELECT l.level, t.opened_us FROM fit_levels l JOIN fit_tasks t ON t.code = l.code"""
    late_attempts = [
        f"max(CASE WHEN a.level = {level} OR (a.level = 0 AND NOT l.late{level} AND l.level >= {level}) "
        f"THEN a.latest END) AS a{level}"
        for level, cut in ((1, cuts[0]), (2, cuts[1]))
        if cut is not None
    ]
    return {
        "scores": """
SELECT r.task, r.config, r.s AS score, count(*) AS k FROM fit_rated r JOIN fit_levels l ON l.code = r.task
WHERE NOT l.learned AND r.retracted_us IS NULL GROUP BY r.task, r.config, r.s ORDER BY r.task, r.config, r.s""",
        "decisions": """
SELECT x.decision, x.task, x."at", x.policy, c.config AS chosen, x.propensity, x.explored, x.table_version,
       x.predicted_quality, x.after_failed
FROM fit_decisions x LEFT JOIN fit_configs c ON c.config_key = x.chosen ORDER BY x.decision""",
        "candidates": f"""
SELECT e.decision, c.config FROM (SELECT decision, {d.explode}(candidates) AS config_key FROM fit_decisions) e
JOIN fit_configs c ON c.config_key = e.config_key ORDER BY e.decision, c.config""",
        "closures": 'SELECT task, t AS "at", outcome FROM fit_closures ORDER BY seq',
        "counts": """
SELECT rater_kind, rejection, count(*) FILTER (WHERE retracted_us IS NULL) AS live,
       count(*) FILTER (WHERE retracted_us IS NOT NULL) AS retracted,
       count(*) FILTER (WHERE retracted_us IS NULL AND w > 0e0) AS weighted
FROM fit_rated GROUP BY rater_kind, rejection ORDER BY rater_kind NULLS FIRST, rejection""",
        "newest": f"""
SELECT * FROM (SELECT {", ".join(rating_newest)} FROM fit_rated r JOIN fit_levels l ON l.code = r.task) a,
     (SELECT {", ".join(event_newest)} FROM ({events}) e) b
     {
            ", (SELECT " + ", ".join(late_attempts) + " FROM fit_attempt_sums a JOIN fit_levels l ON l.code = a.task) c"
            if late_attempts
            else ""
        }""",
    }


def bounds_ids_sql(kind: str) -> str:
    """The ids of the ratings (``kind`` = ratings) or attempts outside the event bounds, in id order."""
    if kind == "ratings":
        return "SELECT id FROM fit_all_ratings WHERE NOT inside ORDER BY id"
    return f"SELECT id FROM attempts WHERE NOT {INSIDE_ATTEMPT} ORDER BY id"


BOUNDS_NOTES = {
    "ratings": f"rating(s) with a weight outside [0, {MAX_WEIGHT:g}] or a score outside [0, 1]",
    "attempts": f"attempt(s) with a cost outside [0, {MAX_COST_USD:g}] USD",
}

#: The engine-side tables and views an aggregation creates (dropped once its rows are out).
TEMPORARY = ("fit_rated", "fit_levels", "fit_attempt_sums", "fit_decisions", "fit_closures", "fit_tasks", "fit_configs")
#: The relations made engine-side tables first where the dialect materializes them (:func:`_shared`), and what makes
#: them.
SHARED = {"fit_attempted": lambda d, spec: attempted_sql(d), "fit_recent": lambda d, spec: recent_sql(spec)}


# --------------------------------------------------------------------------------------------- running
def aggregate(engine: Engine, spec: Spec) -> Aggregate:
    """Run the aggregation on ``engine`` (views ``tasks, attempts, ratings, rejections, retractions, decisions,
    closures`` with the store's columns) and return its rows. The engine-side tables are dropped at the end."""
    d = engine.dialect
    engine.execute(f"CREATE OR REPLACE TEMP VIEW fit_all_ratings AS {ratings_sql()}")
    engine.execute(f"{d.temp_table} fit_configs AS {configs_sql(d)}")
    engine.execute(f"{d.temp_table} fit_tasks AS {tasks_sql(d, spec)}")
    engine.execute(f"{d.temp_table} fit_rated AS {rated_sql(d)}")
    split = split_of(engine, spec.fraction) if spec.fraction is not None else None
    engine.execute(f"{d.temp_table} fit_levels AS {levels_sql(split)}")
    made = [*TEMPORARY, *(SHARED if d.materialize else ())]
    for name, sql in SHARED.items() if d.materialize else ():
        engine.execute(f"{d.temp_table} {name} AS {sql(d, spec)}")
    engine.execute(f"{d.temp_table} fit_attempt_sums AS {attempt_sums_sql(d, split)}")
    engine.execute(f"{d.temp_table} fit_decisions AS {decisions_sql(d)}")
    engine.execute(f"{d.temp_table} fit_closures AS {closures_sql(d)}")
    side = {name: engine.fetch(sql) for name, sql in side_sql(d, split).items()}
    newest_row = side["newest"].to_pylist()[0]
    newest: dict[int, int | None] = {}
    for level in (0, 1, 2):
        if f"e{level}" in newest_row:
            known = [v for k in "rea" if (v := newest_row.get(f"{k}{level}")) is not None]
            newest[level] = max(known, default=None)
    configs = engine.fetch(
        "SELECT config_key, config, outside_ratings, outside_attempts FROM fit_configs ORDER BY config"
    )
    bounds = []
    for kind in ("ratings", "attempts"):
        n = sum(v or 0 for v in configs[f"outside_{kind}"].to_pylist())
        if n:
            ids = engine.fetch(f"SELECT id FROM ({bounds_ids_sql(kind)}) b LIMIT {SHOWN}")["id"].to_pylist()
            bounds.append((BOUNDS_NOTES[kind], n, ids))
    out = Aggregate(
        configs=configs.select(["config_key", "config"]),
        tasks=engine.fetch(
            f"SELECT code, pos, {d.micros}(first_at) AS first_at, level, learned, region, region1, region2, ref, "
            "late1, late2 FROM fit_levels ORDER BY code"
        ),
        pairs=engine.fetch(pairs_sql(d, spec, split)),
        scores=side["scores"],
        decisions=side["decisions"],
        candidates=side["candidates"],
        closures=side["closures"],
        counts=side["counts"].to_pylist(),
        newest=newest,
        bounds=bounds,
        split=split,
        spec=spec,
    )
    for name in made:
        engine.execute(f"{d.drop} {name}")
    engine.execute("DROP VIEW IF EXISTS fit_all_ratings")
    return out
