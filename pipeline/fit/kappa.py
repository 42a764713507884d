"""A row of the ladder rule's cross-validation (docs/design.md, The rule that chooses a ladder): what the rule's
choice at one confidence level did against the best single, pooled over the folds. A small module of its own, so
that the stats' readers (:mod:`pipeline.nightly.sections`) load it without the ladder search."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class KappaRow(BaseModel):
    """One confidence level of the rule, cross-validated: its choices against each fold's best single, pooled."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kappa: float
    tasks: int  # validation tasks where the choices were observed, over all folds
    difference: float | None  # mean value (the measure's) of the choices minus the best single's there
    lower: float | None  # its one-sided 95% lower bound
    spend_difference: float | None  # mean spend (the measure's) of the choices minus the best single's
    ladders: int  # folds whose choice is a ladder other than their best single
