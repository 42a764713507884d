"""Event-sourced ratings pipeline with a batch fitter.

The library first; ``ratings`` and ``fit-routing`` are thin layers over it:

- :mod:`pipeline.events` and :mod:`pipeline.streams`: the v1 events and the append-only streams;
- :mod:`pipeline.compact` and :mod:`pipeline.store`: Parquet with manifests, DuckDB views;
- :mod:`pipeline.fit`: priors, quality, costs, constants, evaluation, signals, ladders;
- :mod:`pipeline.routing`: the routing table and the :class:`~pipeline.routing.Router`.
"""

__version__ = "0.1.0"
