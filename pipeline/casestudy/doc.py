"""The page as data: blocks that both renderers (HTML and Markdown) turn into text.

Building the page once and rendering it twice is what guarantees that the
README and the HTML say the same numbers in the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Link:
    text: str
    href: str


Inline = str | Code | Strong | Link


def join_inline(
    parts: tuple[Inline, ...],
    text: Callable[[str], str],
    code: Callable[[Code], str],
    strong: Callable[[Strong], str],
    link: Callable[[Link], str],
) -> str:
    """``parts`` as one text, each written by a renderer's function for its kind (plain text by ``text``)."""
    out = []
    for p in parts:
        if isinstance(p, Code):
            out.append(code(p))
        elif isinstance(p, Strong):
            out.append(strong(p))
        elif isinstance(p, Link):
            out.append(link(p))
        else:
            out.append(text(p))
    return "".join(out)


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str = ""


@dataclass(frozen=True)
class Para:
    parts: tuple[Inline, ...]
    lead: bool = False  # a headline paragraph: set apart on the page


@dataclass(frozen=True)
class Bullets:
    items: tuple[tuple[Inline, ...], ...]


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    numeric: tuple[bool, ...] = ()  # right-align these columns


@dataclass(frozen=True)
class Figure:
    file: str  # a file beside the page
    alt: str  # what the figure shows, in words, for screen readers and terminal browsers
    caption: tuple[Inline, ...]


@dataclass(frozen=True)
class Note:
    """A plain warning a reader must not miss (the fit does not beat the baseline, an upper bound ...)."""

    parts: tuple[Inline, ...]


Block = Heading | Para | Bullets | Table | Figure | Note


@dataclass(frozen=True)
class Document:
    title: str
    subtitle: tuple[Inline, ...]
    credits: tuple[tuple[Inline, ...], ...]
    headline: tuple[Block, ...]  # the numbers in words, right after the lead
    body: tuple[Block, ...]
    lead: tuple[Block, ...] = ()  # first on the page: what the published table does


def para(*parts: Inline, lead: bool = False) -> Para:
    return Para(tuple(p for p in parts if p != ""), lead=lead)


def table(columns: list[str], rows: list[list[str]], caption: str = "", numeric: list[bool] | None = None) -> Table:
    return Table(tuple(columns), tuple(tuple(r) for r in rows), caption, tuple(numeric or ()))
