"""Case studies: render ``case-studies/<name>/index.html`` and ``README.md`` from ``stats.json`` alone.

``render_case_study(home, name)`` is what ``ratings case-study`` runs. The page
is built once as a :class:`~pipeline.casestudy.doc.Document` (headline in
words, then sections and figures) and written twice, as HTML and Markdown,
with the figures as SVG files beside them. Same stats, same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import PipelineError
from ..jsonfile import first_problem
from ..nightly.stats import Stats, load_stats
from ..workspace import StrPath, Workspace
from . import fmt
from .backtest import backtest_section
from .credits import credits
from .doc import Block, Code, Document
from .escalation import ladders_section
from .glossary import glossary_section
from .headline import headline
from .lead import routing_table_lead
from .plots import FIGURE_FILES, Plot, all_plots
from .render_html import render_html
from .render_markdown import render_markdown
from .sections import (
    baselines_section,
    closing_section,
    constants_section,
    data_section,
    frontier_section,
    grid_section,
    policies_section,
    priors_section,
)
from .signals import signals_section

__all__ = ["Rendered", "build_document", "render", "render_case_study"]


@dataclass(frozen=True)
class Rendered:
    """What a render wrote: the directory and the file names in it."""

    directory: Path
    files: tuple[str, ...]

    def summary(self) -> dict:
        return {"directory": str(self.directory), "files": list(self.files)}


def body(stats: Stats, plots: dict[str, Plot]) -> list[Block]:
    """The page's sections, in reading order."""
    blocks = (
        data_section(stats)
        + constants_section(stats)
        + baselines_section(stats)
        + grid_section(stats, plots)
        + frontier_section(stats, plots)
        + priors_section(stats, plots)
        + ladders_section(stats)
        + policies_section(stats)
        + backtest_section(stats, plots)
        + signals_section(stats)
        + glossary_section()
        + closing_section(stats)
    )
    return [b for b in blocks if b is not None]


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


#: The page's files beside its figures: the same document as HTML and as Markdown.
HTML_PAGE, MARKDOWN_PAGE = "index.html", "README.md"


def render(stats: Stats, ws: Workspace, name: str) -> Rendered:
    """Write the figures, ``index.html`` and ``README.md`` into ``case-studies/<name>/`` of the home (every file
    confined to it); remove figures this stats lacks."""
    plots = {p.file: p for p in all_plots(stats)}
    doc = build_document(stats, plots)
    for plot in plots.values():
        ws.write(ws.page(name, plot.file), plot.svg)
    for stale in set(FIGURE_FILES) - set(plots):
        ws.confine(ws.page(name, stale), create=False).unlink(missing_ok=True)
    ws.write(ws.page(name, HTML_PAGE), render_html(doc).encode("utf-8"))
    ws.write(ws.page(name, MARKDOWN_PAGE), render_markdown(doc).encode("utf-8"))
    return Rendered(ws.case_study(name), (HTML_PAGE, MARKDOWN_PAGE, *sorted(plots)))


def render_case_study(home: Workspace | StrPath | None, name: str) -> Rendered:
    """Render ``case-studies/<name>/`` of ``home`` from its ``stats.json``."""
    ws = Workspace.of(home)
    path = ws.stats(name)
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
    return render(stats, ws, name)
