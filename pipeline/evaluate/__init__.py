"""Judging the fitted model on tasks it has not seen (docs/design.md, Evaluation).

It imports the model (:mod:`pipeline.fit`) and the router (:mod:`pipeline.routing`); neither imports it.
Every figure is a per-task column first (hit, quality, cost, squared error, ...); one paired bootstrap
serves every interval of a difference.
"""
