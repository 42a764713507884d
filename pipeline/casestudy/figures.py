"""Where a case study's numbers come from: the command that fitted them, the one that draws the page, and the
figures' captions that name both."""

from __future__ import annotations

from ..nightly.stats import Stats
from .doc import Block, Code, Figure, Inline
from .plots import Plot


def fitted_home(stats: Stats) -> str | None:
    """The ``--home`` of the command that produced the stats, so the page's other commands name it too."""
    import shlex

    try:
        words = shlex.split(stats.source.command or "")
    except ValueError:
        return None
    return next((words[i + 1] for i, w in enumerate(words[:-1]) if w == "--home"), None)


def with_home(stats: Stats, command: str) -> str:
    import shlex

    home = fitted_home(stats)
    return command if home is None else f"{command} --home {shlex.quote(home)}"


def render_command(stats: Stats) -> str:
    return with_home(stats, f"ratings case-study {stats.name}")


def source_caption(stats: Stats) -> tuple[Inline, ...]:
    """Where a figure's numbers come from: the store's table version, the event counts, the commands."""
    src = stats.source
    events = ", ".join(f"{n:,} {kind}" for kind, n in src.events.items()) or "no event counts"
    version = src.version if src.version is not None else "n/a"
    parts: list[Inline] = [f"Source: store table version {version} ({events})"]
    if src.command:
        parts += ["; fitted by ", Code(src.command)]
    parts += ["; drawn by ", Code(render_command(stats)), " from stats.json."]
    return tuple(parts)


def figure(stats: Stats, plots: dict[str, Plot], file: str, *caption: Inline) -> Block | None:
    plot = plots.get(file)
    return Figure(file, plot.alt, (*caption, " ", *source_caption(stats))) if plot else None
