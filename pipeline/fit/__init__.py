"""Fitting: priors, quality, cost, constants search, evaluation, signals, ladders (DESIGN 5 and 6)."""
