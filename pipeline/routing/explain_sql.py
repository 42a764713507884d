"""The ``ratings sql`` query that recomputes a region's table rows from the store (``route --explain``).

``ratings sql`` can read the store and nothing else, so the query carries what
only the table knows as literals: the prior weight k, each member's prior p
(the table's ``prior``), the half-life H and the cost floor. Everything else
comes from the store's views, by the formulas of docs/design.md, Fit:

- w = precision * confidence * importance (times exp(-ln2 * age / H) when H is set, age from the
  newest event of the store); a rejection is a rating of score 0 with w = its weight; retracted
  ratings are left out; PRM fill-ins are added for traced attempts of a (task, config) with no rating;
- n, W = sum w, S = sum w*s per (config, region); q = (k*p + S) / (k + W); value = the objective;
- cost = mean over c's rated tasks in r whose attempts all have a cost of the sum of those costs,
  else the same mean over all regions, else over every config, floored (null without any cost);
- relative advantage = sum(u*z) / sum(u) over the tasks rated on two or more configs, z the task's
  standardised value (population std, task values without the half-life), u = exp(-ln2 * age / 14)
  with age from the (task, config)'s latest rating to the newest event.

The fit reads the store at the table version the table names (``source.version``): run the query with
``ratings sql --as-of <that version>`` to get its figures exactly; on a newer version they move by what was
added since (``ratings doctor`` says how many events).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RoutingError
from .table import Constants
from .view import GLOBAL, RegionView

#: A reviewer verdict that approves (the PRM's ``APPROVALS``, compared case-insensitively).
_APPROVED = "lower(reviewer_verdict) IN ('approve', 'approved', 'pass', 'success', 'ok')"


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _num(x: float | None) -> str:
    return "NULL" if x is None else repr(float(x))


#: The statement :func:`explain_sql` fills in: the table's numbers recomputed from the views, step by step
#: (docs/design.md, Recomputing from the store).
_TEMPLATE = """WITH newest AS (
  SELECT max("at") AS t FROM (SELECT "at" FROM tasks UNION ALL SELECT "at" FROM attempts
    UNION ALL SELECT "at" FROM ratings UNION ALL SELECT "at" FROM rejections
    UNION ALL SELECT "at" FROM decisions UNION ALL SELECT "at" FROM closures)
), task_region AS (
  SELECT e.task, coalesce(o.region, 'general') AS region
  FROM (SELECT task FROM ratings UNION SELECT task FROM rejections UNION SELECT task FROM attempts) e
  LEFT JOIN (SELECT task, first(region ORDER BY "at", id) AS region FROM tasks GROUP BY task) o USING (task)
), live AS (
  SELECT task, config_key, "at", score, precision * confidence * importance AS w FROM ratings
  WHERE id NOT IN (SELECT rating FROM retractions)
  UNION ALL
  SELECT task, config_key, "at", 0.0, weight FROM rejections WHERE id NOT IN (SELECT rating FROM retractions)
), prm AS (
  SELECT task, config_key, "at", least(1.0, greatest(0.0,
      0.40 * (status = 'success')::DOUBLE
    + least(0.20 * (coalesce(tool_calls, 0) > 0)::DOUBLE
            + 0.10 * (coalesce(files_read, 0) + coalesce(files_written, 0) > 0)::DOUBLE, 0.15)
    + 0.15 * coalesce(status = 'success' AND {approved}, false)::DOUBLE
    + 0.10 * coalesce(duration_ms BETWEEN 1000 AND 600000, false)::DOUBLE
    + 0.05 * coalesce(cost_usd > 0, false)::DOUBLE)) AS score, 1.0 AS w
  FROM (SELECT *, row_number() OVER (PARTITION BY task, config_key ORDER BY "at" DESC, id DESC) AS k
        FROM attempts WHERE coalesce(tool_calls, files_read, files_written) IS NOT NULL) a
  WHERE k = 1 AND NOT EXISTS (SELECT 1 FROM live l WHERE l.task = a.task AND l.config_key = a.config_key)
), weighted AS (
  SELECT task, config_key, "at", score, w AS w0, w * {recency} AS w
  FROM (SELECT *, (epoch_us((SELECT t FROM newest)) - epoch_us("at")) / 86400e6 AS age_days
        FROM (SELECT * FROM live UNION ALL SELECT * FROM prm))
), tv_all AS (
  SELECT task, region, config_key, sum(w) AS weight, sum(w * score) AS wscore, count(*) AS n, max("at") AS last_at,
         sum(w0 * score) / nullif(sum(w0), 0) AS q
  FROM weighted JOIN task_region USING (task) GROUP BY ALL
), tv AS (
  SELECT * FROM tv_all WHERE {where}
), costs AS (
  SELECT task, config_key, sum(cost_usd) AS cost, count(*) FILTER (WHERE cost_usd IS NULL) AS unknown
  FROM attempts GROUP BY ALL
), known AS (  -- cost_t,c of the rated (task, config) pairs whose attempts all have a cost
  SELECT config_key, cost FROM tv_all JOIN costs USING (task, config_key) WHERE unknown = 0
), fallback AS (  -- c's mean over all regions
  SELECT config_key, avg(cost) AS cost_config FROM known GROUP BY ALL
), z AS (
  SELECT config_key, count(*) OVER t AS configs, last_at,
         CASE WHEN count(*) OVER t >= 2 AND stddev_pop(q) OVER t > 0
              THEN (q - avg(q) OVER t) / stddev_pop(q) OVER t ELSE 0 END AS z
  FROM tv WHERE q IS NOT NULL WINDOW t AS (PARTITION BY task)
), adv AS (
  SELECT config_key, coalesce(sum(u * z) / nullif(sum(u), 0), 0) AS relative_advantage FROM (
    SELECT config_key, z, CASE WHEN configs >= 2 THEN
      exp(-ln(2) * ((epoch_us((SELECT t FROM newest)) - epoch_us(last_at)) / 86400e6) / 14) ELSE 0 END AS u FROM z)
  GROUP BY config_key
), priors(config_key, p) AS (VALUES {priors})
, members AS (
SELECT tv.config_key AS config, sum(tv.n) AS n_ratings, sum(tv.weight) AS weight, sum(tv.wscore) AS wscore,
       CASE WHEN {k} + sum(tv.weight) = 0 THEN any_value(p.p)
            ELSE ({k} * any_value(p.p) + sum(tv.wscore)) / ({k} + sum(tv.weight)) END AS quality,
       coalesce(avg(costs.cost) FILTER (WHERE costs.unknown = 0), any_value(f.cost_config),
                (SELECT avg(cost) FROM known)) AS cost_raw,
       any_value(adv.relative_advantage) AS relative_advantage
FROM tv JOIN priors p USING (config_key) LEFT JOIN costs USING (task, config_key) LEFT JOIN adv USING (config_key)
  LEFT JOIN fallback f USING (config_key)
GROUP BY tv.config_key
), floored AS (
  SELECT *, CASE WHEN cost_raw IS NOT NULL THEN greatest(cost_raw, {floor}) END AS cost_usd FROM members
)
SELECT config, n_ratings, round(weight, 9) AS weight, round(wscore, 9) AS wscore, round(quality, 9) AS quality,
       round(cost_usd, 9) AS cost_usd, round(relative_advantage, 9) AS relative_advantage, round({value}, 9) AS value
FROM floored ORDER BY config"""


def explain_sql(view: RegionView, constants: Constants, objective: str, configs: Sequence[str]) -> str:
    """One SQL statement over the store's views giving the table's rows of ``configs`` in the ``view``'s region
    (``constants`` and ``objective``: the table's)."""
    name = view.name
    c = constants
    priors = ", ".join(f"({_lit(k)}, {_num(view.row(k).prior)})" for k in sorted(configs)) or "(NULL, NULL)"
    half_life = c.half_life_days
    recency = "1.0" if half_life is None else f"exp(-ln(2) * age_days / {float(half_life)!r})"
    # The objective (docs/design.md, Objectives) over the recomputed columns (quality alone without a known cost).
    if objective == "utility":
        if c.lambda_ is None:  # a utility table always carries lambda (pipeline.routing.greedy)
            raise RoutingError("the utility objective needs lambda (constants.lambda): none is given")
        value = f"CASE WHEN cost_usd IS NULL THEN quality ELSE {float(c.lambda_)!r} * quality - cost_usd END"
    elif objective == "quality_per_dollar":
        value = "CASE WHEN cost_usd IS NULL THEN quality ELSE quality / cost_usd END"
    else:
        value = "quality"
    where = "TRUE" if name == GLOBAL else f"region = {_lit(name)}"
    k, floor = repr(float(c.prior_weight)), repr(float(c.cost_floor_usd))
    return _TEMPLATE.format(
        approved=_APPROVED, recency=recency, where=where, priors=priors, k=k, floor=floor, value=value
    )
