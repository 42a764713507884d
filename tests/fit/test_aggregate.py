"""The aggregation (pipeline.fit.aggregate): exact sums in any order and on any number of threads, PRM scores,
the event bounds, and the SQL's portability rules."""

from __future__ import annotations

import math
import random
import re
from fractions import Fraction

import duckdb
import pytest
from fixtures_fit import A, B, C, at, attempted, closed, memory_store, opened, rated, rejected, retracted

from pipeline.fit import aggregate as agg
from pipeline.fit.aggregate import DuckDBEngine, Spec, aggregate
from pipeline.fit.context import FitContext, Part
from pipeline.fit.shipped import Shipped


def random_events(seed: int, tasks: int = 300) -> list:
    """A few thousand events of every kind, weights and costs over many magnitudes, times over two months."""
    rng = random.Random(seed)
    events = []
    for t in range(tasks):
        task, start = f"t{t:04d}", rng.uniform(0, 1400)
        events.append(opened(task, rng.choice(["a", "b", "c"]), start))
        for config in rng.sample([A, B, C], rng.randint(1, 3)):
            for k in range(rng.randint(1, 4)):
                cost = rng.choice([None, 10 ** rng.uniform(-9, 2)])
                events.append(attempted(f"x{t}{config[0]}{k}", task, config, start + k, cost, tool_calls=k or None))
            for k in range(rng.randint(0, 4)):
                weight = {"precision": rng.random(), "importance": 10 ** rng.uniform(-3, 4)}
                when = start + rng.uniform(0, 90)
                events.append(rated(f"r{t}{config[0]}{k}", task, config, rng.random(), when, **weight))
            if rng.random() < 0.2:
                events.append(rejected(f"j{t}{config[0]}", task, config, start + 2, weight=rng.uniform(0, 5)))
        if rng.random() < 0.1:
            events.append(retracted(f"q{t}", f"r{t}{A[0]}0", start + rng.uniform(0, 200)))
        events.append(closed(f"c{t}", task, start + 100))
    return events


SPEC = Spec(prm=True, half_lives=(90.0, 14.0), fraction=Fraction(7, 10))


def test_the_sums_are_the_same_on_1_2_and_16_threads_and_in_any_row_order():
    events = random_events(1)
    shuffled = events[:]
    random.Random(2).shuffle(shuffled)
    runs = [
        aggregate(DuckDBEngine(memory_store(*rows), threads=threads), SPEC)
        for rows, threads in ((events, 1), (events, 2), (events, 16), (shuffled, 2))
    ]
    first = runs[0]
    assert first.pairs.num_rows > 500 and first.split is not None
    for other in runs[1:]:
        for name in ("tasks", "pairs", "scores", "decisions", "candidates", "closures"):
            assert getattr(other, name).equals(getattr(first, name)), name
        assert (other.newest, other.counts, other.split) == (first.newest, first.counts, first.split)


def exact(values: list[float]) -> float:
    """The correctly rounded sum of ``values``."""
    return float(sum(Fraction(v) for v in values))


def test_a_fixed_point_sum_gives_back_single_terms_exactly_and_sums_within_one_ulp():
    con = duckdb.connect()
    rng = random.Random(3)
    groups = {g: [10 ** rng.uniform(-12, 6) * rng.random() for _ in range(rng.randint(1, 6))] for g in range(400)}
    con.execute("CREATE TABLE x AS SELECT * FROM (VALUES (0, 0e0)) v(g, x) WHERE false")
    con.executemany("INSERT INTO x VALUES (?, ?)", [(g, v) for g, vs in groups.items() for v in vs])
    sums = con.sql(f"SELECT g, {agg.fixed('x', 's')} FROM x GROUP BY g ORDER BY g").pl()
    from pipeline.fit.context import unfix

    got = sums.select("g", s=unfix("s"))
    for g, total in got.iter_rows():
        values = groups[g]
        want = exact([v for v in values if v >= 2.0**-54])  # the fixed point holds every double of 2^-54 or more
        if len(values) == 1 and values[0] >= 2.0**-54:
            assert total == values[0]
        else:
            assert abs(total - want) <= math.ulp(want) + 2.0**-107 * len(values)


@pytest.mark.parametrize(
    ("trace", "score"),
    [
        # success 0.40 + activity (tools 0.20, files 0.10, capped at 0.15) + approved 0.15 + timely 0.10 + paid 0.05
        ({"status": "success", "tool_calls": 3, "files_read": 1, "reviewer_verdict": "Approved",
          "duration_ms": 5000, "cost": 0.2}, 0.85),
        ({"status": "success", "tool_calls": 3}, 0.55),
        ({"status": "success", "files_written": 2}, 0.50),
        ({"status": "failure", "tool_calls": 1, "reviewer_verdict": "approve", "duration_ms": 500}, 0.15),
        ({"status": "success", "tool_calls": 0, "duration_ms": 600000, "cost": 0.0}, 0.50),
        ({"status": "blocked", "tool_calls": 0}, 0.0),
    ],
)  # fmt: skip
def test_a_prm_fill_in_scores_its_latest_traced_attempt(trace, score):
    trace = dict(trace)
    cost, status = trace.pop("cost", None), trace.pop("status")
    events = [
        attempted("x0", "t1", A, 0.2, 1.0, status="failure", tool_calls=9),  # earlier: the later attempt speaks
        attempted("x1", "t1", A, 0.5, cost, status=status, **trace),
    ]
    ctx = FitContext.build(DuckDBEngine(memory_store(*events)), Spec(prm=True), shipped=Shipped(found=False))
    row = ctx.values(Part.FULL).row(0, named=True)
    got = (row["prm"], row["wscore"], row["weight"], row["n"], row["at"])
    assert got == (True, pytest.approx(score), 1.0, 1, at(0.5))


def test_rows_outside_the_event_bounds_are_left_out_and_named():
    events = [
        rated("r1", "t1", A, 0.5),
        rated("bad-w", "t1", A, 0.5, importance=2e6),
        rated("bad-s", "t1", A, 1.5),
        attempted("bad-c", "t1", A, 0.5, 2e6),
        attempted("x1", "t1", A, 0.6, 0.1),
    ]
    ctx = FitContext.build(DuckDBEngine(memory_store(*events)), Spec(), shipped=Shipped(found=False))
    row = ctx.values(Part.FULL).row(0, named=True)
    assert (row["n"], row["attempts"], row["cost_usd"]) == (1, 1, pytest.approx(0.1))
    assert ctx.notes == (
        "2 rating(s) with a weight outside [0, 1e+06] or a score outside [0, 1] were left out of the fit (the event "
        "bounds): bad-s, bad-w",
        "1 attempt(s) with a cost outside [0, 1e+06] USD were left out of the fit (the event bounds): bad-c",
    )


def test_the_statements_keep_to_the_sql_both_engines_run():
    """No DuckDB-only spelling (EXCLUDE, GROUP BY ALL, ::casts, arg_min, list functions), every numeric literal with a
    fraction a double (``1.5`` is a decimal in both engines), the column ``at`` always quoted (in Spark SQL a
    double-quoted name needs ``spark.sql.ansi.doubleQuotedIdentifiers``; DuckDB reserves ``at``)."""
    split = agg.Split(10, 7, 1, 5, at(5), at(3))
    d = agg.DUCKDB
    spec = Spec(half_lives=(14.0,), fraction=Fraction(7, 10))
    texts = [
        agg.ratings_sql(), agg.configs_sql(d), agg.tasks_sql(d, spec), agg.rated_sql(d), agg.levels_sql(split),
        agg.attempt_sums_sql(d, split), agg.pairs_sql(d, spec, split), agg.decisions_sql(d), agg.closures_sql(d),
        *agg.side_sql(d, split).values(),
    ]  # fmt: skip
    for text in texts:
        assert not re.search(r"EXCLUDE|GROUP BY ALL|::|arg_m(in|ax)|list_", text), text
        assert not re.search(r"(?<![\w.])\d+\.\d+(?![\deE])", text), text  # 1.5 is a decimal: write 1.5e0
        assert not re.search(r'(?<![\w"])at(?![\w"])', text), text
