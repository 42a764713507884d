"""Case studies: render ``case-studies/<name>/index.html`` and ``README.md`` from ``stats.json`` alone.

``render_case_study(home, name)`` is what ``ratings case-study`` runs. The page
is built once as a :class:`~pipeline.casestudy.doc.Document` (headline in
words, then sections and figures) and written twice, as HTML and Markdown,
with the figures as SVG files beside them. Same stats, same bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import PipelineError
from ..home import Home
from ..jsonfile import first_problem
from ..nightly.stats import Stats, load_stats
from . import fmt
from .credits import credits
from .doc import Code, Document
from .headline import headline
from .lead import routing_table_lead
from .plots import FIGURE_FILES, all_plots
from .render_html import render_html
from .render_markdown import render_markdown
from .sections import body

__all__ = ["Rendered", "build_document", "render", "render_case_study"]


@dataclass(frozen=True)
class Rendered:
    """What a render wrote: the directory and the file names in it."""

    directory: Path
    files: tuple[str, ...]

    def summary(self) -> dict:
        return {"directory": str(self.directory), "files": list(self.files)}


def build_document(stats: Stats, plots: dict) -> Document:
    s = stats.split
    subtitle = (
        f"Routing by rating, checked on {fmt.count(s.held_out_tasks)} held-out tasks after "
        f"{s.cutoff_at or 'the cutoff'}; objective ",
        Code(stats.objective),
        ".",
    )
    return Document(
        title=f"Case study: {stats.name}",
        subtitle=subtitle,
        credits=tuple(credits(stats)),
        headline=tuple(headline(stats)),
        body=tuple(body(stats, plots)),
        lead=tuple(routing_table_lead(stats)),
    )


def render(stats: Stats, home: Home, name: str) -> Rendered:
    """Write the figures, ``index.html`` and ``README.md`` into ``case-studies/<name>/`` of ``home`` (every file
    confined to the home); remove figures this stats lacks."""
    directory = home.case_study(name)
    plots = {p.file: p for p in all_plots(stats)}
    doc = build_document(stats, plots)
    for plot in plots.values():
        home.write(directory / plot.file, plot.svg)
    for stale in set(FIGURE_FILES) - set(plots):
        home.confine(directory / stale, create=False).unlink(missing_ok=True)
    home.write(directory / "index.html", render_html(doc).encode("utf-8"))
    home.write(directory / "README.md", render_markdown(doc).encode("utf-8"))
    return Rendered(directory, ("index.html", "README.md", *sorted(plots)))


def render_case_study(home: str | os.PathLike[str] | Home | None, name: str) -> Rendered:
    """Render ``case-studies/<name>/`` of ``home`` from its ``stats.json``."""
    home = Home.resolve(home)
    path = home.case_study(name) / "stats.json"
    if not path.exists():
        raise PipelineError(f"{path}: no stats.json; run `fit-routing --case-study {name}` first")
    try:
        stats = load_stats(path)
    except ValueError as exc:  # pydantic's ValidationError and JSON errors are both ValueErrors
        raise PipelineError(f"{path}: not a case-study-stats/v1 file: {first_problem(exc)}") from None
    if not isinstance(stats, Stats):
        raise PipelineError(
            f"{path}: the stats of a refit without evaluation (fit-routing --no-evaluate) hold no held-out figure to "
            f"render; run `fit-routing --case-study {name}` (with the evaluation) first"
        )
    return render(stats, home, name)
