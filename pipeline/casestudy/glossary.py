"""The page's glossary: one definition of each term the page uses, in one place (the sections refer to it)."""

from __future__ import annotations

from .doc import Block, Heading, Para, Strong, para

#: Term -> its one definition on the page.
GLOSSARY: dict[str, str] = {
    "eligible task": (
        "a held-out task done by two or more configurations, at least one of them with a task value above 0. "
        "Every held-out figure on this page (baselines, frontier, AIQ, ladders, policies) is measured on the "
        "eligible tasks, so a quantity two sections share is one number."
    ),
    "task value": "a configuration's quality on one task: the weighted mean of its ratings there.",
    "hit rate": (
        "the share of eligible tasks routed to a configuration of the task's best set: those with the highest "
        "quality per dollar among the configurations that did the task (the highest quality when costs are "
        "unknown). For a policy that escalates, the configuration it stopped at counts."
    ),
    "best single": (
        "the configuration with the highest quality in the table fitted on the learned tasks; the baselines and "
        "the ladders compare with this one configuration."
    ),
    "oracle": (
        "on each eligible task, one configuration of its best set (the highest quality among them, then the "
        "lower cost): the hit rate is 100% by definition."
    ),
    "coverage": (
        "the share of eligible tasks on which a configuration (or every rung a ladder ran) was observed. A single "
        "configuration's or a ladder's figures are means over those tasks only."
    ),
    "replay": (
        "the held-out tasks routed one by one in time order; each route reveals only the chosen configuration's "
        "outcome, which the router learns from before the next task. A task the chosen configuration never did "
        "is skipped."
    ),
    "realized value": (
        "what a replay earned on the tasks it routed: total quality ÷ total cost for quality per dollar, mean "
        "λ·quality − cost for utility, mean quality for quality."
    ),
    "best region-level table": (
        "in a backtest, one configuration per region chosen with hindsight to maximize the objective's realized "
        "value on exactly the tasks reported (for quality per dollar, the ratio of totals over the regions together, "
        "found exactly by Dinkelbach's iteration). A table the loop could learn, so the yardstick of learning."
    ),
    "full-information loop": (
        "in a backtest, the same policy, seeds and nightly refits, but every configuration's outcome on every task "
        "of the nights before revealed to the refit: what the loop would do if it saw everything."
    ),
    "gate": (
        "a rating by an automatic check (tests, a linter: rater kind gate). A ladder runs its next rung when the "
        "gate of the rung before is below the pass mark."
    ),
    "evidence gate": (
        "the routing rule of the default policy: the learned choice replaces the static choice in a region only "
        "when, on at least min_samples tasks both did there (tasks either ran only after another configuration "
        "had failed are left out), the lower end of a one-sided 95% interval of their paired difference on the "
        "objective is above 0; else the same test in the global pool; else the static choice."
    ),
    "PRM": (
        "process reward model: a score from an attempt's trace (success, tool calls, review verdict, duration, "
        "cost) filled in where a task and configuration have no rating. The fit uses it; held-out figures never do."
    ),
    "AIQ": (
        "average improvement in quality (RouterBench): the area under the cost–quality frontier across the cost "
        "range of the single configurations, divided by that range."
    ),
    "SNIPS": (
        "self-normalised inverse propensity scoring: an off-policy estimate of what a policy or configuration "
        "would have scored on every task, from the logged routing decisions weighted by 1 / their propensity."
    ),
}


def glossary_section() -> list[Block]:
    items: list[Block] = [Heading(2, "Glossary", "glossary")]
    items += [Para((Strong(f"{term}: "), text)) for term, text in GLOSSARY.items()]
    return items


def see_glossary(*terms: str) -> Block:
    """A pointer to the glossary for the terms a section uses (the definitions are not repeated there)."""
    missing = [t for t in terms if t not in GLOSSARY]
    if missing:
        raise KeyError(f"not in the glossary: {', '.join(missing)}")
    return para("Terms: " + ", ".join(terms) + " (see the glossary at the end).")
