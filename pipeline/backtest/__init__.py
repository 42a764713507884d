"""``ratings backtest``: the loop replayed on a full-information table, as a real dispatcher would live it
(docs/design.md, Backtest).

- :mod:`pipeline.backtest.data`: the full-information table (every kept task done by every config), read from a
  long table through ``ratings import``'s reader or from a home's store;
- :mod:`pipeline.backtest.loop`: one dispatcher's stream of tasks: routing by the product's Router, only the runs
  it chose revealed, escalation after a failed gate, the events it logs;
- :mod:`pipeline.backtest.refit`: the nightly refit (one function: the product's own fit);
- :mod:`pipeline.backtest.references`: static starts, best single, the best region-level table in hindsight
  (Dinkelbach's iteration for the ratio of totals), the per-task oracle;
- :mod:`pipeline.backtest.text`: the report for people (the typed report, what ``--json`` prints and
  ``stats.json`` carries as ``backtest``, is :mod:`pipeline.nightly.backtest`);
- :mod:`pipeline.backtest.run`: :func:`~pipeline.backtest.run.run_backtest`, the whole backtest (seeds in
  parallel processes with the same bytes as serial).

A backtest of a benchmark table is a simulation of deployment, not a deployment: every output says so.
"""
