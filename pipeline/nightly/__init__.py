"""The nightly job (``fit-routing``, ``ratings fit``): compact, fit, evaluate, publish.

- :mod:`pipeline.nightly.options`: :class:`~pipeline.nightly.options.FitOptions`, what the CLI builds;
- :mod:`pipeline.nightly.job`: :func:`~pipeline.nightly.job.run_fit`, the job itself (lock, stages, writes);
- :mod:`pipeline.nightly.stats`: the ``stats.json`` model every case study page reads.
"""
