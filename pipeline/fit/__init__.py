"""Fitting: priors, quality, cost, constants search, evaluation, signals, ladders.

docs/design.md, Fit; docs/design.md, Evaluation.
"""
