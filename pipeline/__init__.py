"""Event-sourced ratings pipeline with a batch fitter.

The library first; ``ratings`` and ``fit-routing`` are thin layers over it:

- :mod:`pipeline.streams.events` and :mod:`pipeline.streams`: the v1 events and the append-only streams;
- :mod:`pipeline.compact` and :mod:`pipeline.store`: the Delta Lake events table, DuckDB views over one version;
- :mod:`pipeline.fit`: the model: inputs, priors, quality, costs, signals, ladders, the routing table it builds;
- :mod:`pipeline.evaluate`: judging the model on held-out tasks: split, constant search, replay, metrics,
  calibration, baselines, frontier, ladder and policy scores, the verdicts;
- :mod:`pipeline.routing`: the routing table and the :class:`~pipeline.routing.Router`;
- :mod:`pipeline.nightly`: the nightly job ``fit-routing`` (compact, fit, evaluate, publish).
"""

__version__ = "0.1.0"
