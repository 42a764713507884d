"""Credit the public data a case study was fitted on.

A stats file may carry its own ``credit`` (a string or a list of strings) in
``source`` or top level, shown as written; the imported benchmark tables are
also recognised by name anywhere in ``source``, ``name`` or ``notes`` and
credited with links to their sources, so a page on RouterBench, LiveCodeBench or
Terminal-Bench data always says where the data came from.
"""

from __future__ import annotations

import json

from ..nightly.stats import Stats
from .doc import Inline, Link

KNOWN: dict[str, tuple[Inline, ...]] = {
    "routerbench": (
        "Data: ",
        Link("RouterBench", "https://github.com/withmartian/routerbench"),
        " (Hu et al. 2024), zero-shot subsets as kept by ",
        Link("RouterDC", "https://github.com/shuhao02/RouterDC"),
        ": prompts from ARC-Challenge, MBPP and Winogrande, each answered by 11 models, graded 0/1, with the dollar "
        "cost of each call.",
    ),
    "livecodebench": (
        "Data: ",
        Link("LiveCodeBench", "https://github.com/LiveCodeBench/livecodebench.github.io"),
        " leaderboard (Jain et al. 2024): contest problems with their dates, pass@1 per model. No costs.",
    ),
    "terminal-bench": (
        "Data: ",
        Link("Terminal-Bench", "https://github.com/laude-institute/terminal-bench-leaderboard"),
        " core 0.1.1 (laude-institute), the per-trial results of the leaderboard submissions of their authors: 80 "
        "terminal tasks, 9 agent configurations, five trials each, resolved or not. No costs.",
    ),
}


def credits(stats: Stats) -> list[tuple[Inline, ...]]:
    """Credit lines: the explicit ``source.credit`` first, then the known sources named anywhere in the stats."""
    lines: list[tuple[Inline, ...]] = [(stats.source.credit,)] if stats.source.credit else []
    haystack = " ".join([stats.name, json.dumps(stats.source.model_dump(mode="json")), *stats.notes]).lower()
    explicit = " ".join(str(line[0]) for line in lines)
    for key, line in KNOWN.items():
        links = [p.href for p in line if isinstance(p, Link)]
        if key in haystack and not any(href in explicit for href in links):  # the explicit credit may link it
            lines.append(line)
    return lines
