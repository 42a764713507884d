"""What every command of the ``ratings`` CLI shares: the group, options, output for people and programs,
the mapping of library errors to one line and an exit code, the progress bar."""

from __future__ import annotations

import inspect
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import wraps
from typing import TYPE_CHECKING, Any

import click

from .. import defaults
from ..bounds import MAX_SEED
from ..errors import InvalidBatch, MachineFailure, PipelineError

if TYPE_CHECKING:
    from ..workspace import HomeRule, Workspace

# --------------------------------------------------------------------------- shared options
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def option(name: str, type_: Any, default: Any, help: str, *, dest: str | None = None, **extra: Any) -> Decorator:
    """One option on one line: ``name`` (its parameter ``dest`` where the name does not say it) of ``type_`` with
    ``default`` (shown in --help unless None) and ``help``; ``extra`` as click.option takes it (metavar, callback,
    multiple, ...)."""
    extra.setdefault("show_default", default is not None)
    return click.option(*(name,) if dest is None else (name, dest), type=type_, default=default, help=help, **extra)


def negation(name: str, dest: str, help: str) -> Decorator:
    """A ``--no-X`` flag: the parameter ``dest`` is True unless the flag is given."""
    return click.option(name, dest, flag_value=False, default=True, help=help)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for programs instead of a table.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
table_option = option(
    "--table", click.Path(dir_okay=False), None, "Routing table file (default: <home>/fits/routing-table.json)."
)
fsync_option = option(
    "--fsync", click.Choice(["always", "batch", "never"]), "batch", "fsync after every line, once per batch, or never."
)
#: What routing maximises (pipeline.defaults.OBJECTIVES).
OBJECTIVES = click.Choice(defaults.OBJECTIVES)


def shipped_option(help: str, *, exists: bool = True) -> Decorator:
    """``--shipped FILE``: a shipped.json, with this command's use of it."""
    return option("--shipped", click.Path(exists=exists, dir_okay=False), None, help)


def config_format_option(help: str, dest: str | None = None) -> Decorator:
    """``--config-column-format auto|key|model``: how a long table's config column is read (ratings import's rule)."""
    return option("--config-column-format", click.Choice(["auto", "key", "model"]), "auto", help, dest=dest)


def gate_noise_option(type_: click.ParamType, default: float | None, help: str) -> Decorator:
    """``--gate-noise``: the probability that a gate's verdict is flipped (the simulator's, the backtest's)."""
    return option("--gate-noise", type_, default, help)


def lambda_option(type_: click.ParamType, help: str) -> Decorator:
    """``--lambda``: lambda of the utility objective, lambda * q - cost (fit's pin, the backtest's); parameter
    ``lambda_`` (a keyword of Python)."""
    return option("--lambda", type_, None, help, dest="lambda_")


def pass_threshold_option(type_: click.ParamType, default: float, help: str) -> Decorator:
    """``--pass-threshold``: the gate score below which a run fails (fit's ladders, the backtest's escalations)."""
    return option("--pass-threshold", type_, default, help)


_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|min|m|h|d)\s*", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def _skew(ctx: click.Context, param: click.Parameter, value: str) -> timedelta:
    match = _DURATION.fullmatch(value)
    if match is None:
        raise click.BadParameter(f"{value!r} is not a duration: a number and a unit, s, min, h or d (e.g. 1d, 6h)")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
    if not 0 < seconds <= 3650 * 86400:
        raise click.BadParameter(f"{value!r}: give a duration above 0 and at most 3650d")
    return timedelta(seconds=seconds)


def future_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--skew DURATION`` and ``--allow-future`` for a command that takes events in (append, import, compact, fit):
    the body gets ``future``, the skew an event time may lie after now, or None when any time is allowed."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        skew, allow = kwargs.pop("skew"), kwargs.pop("allow_future")
        return fn(*args, **kwargs, future=None if allow else skew)

    wrapper = click.option(
        "--allow-future",
        "allow_future",
        is_flag=True,
        help="Accept events dated more than --skew after now (a backfill that needs it).",
    )(wrapper)
    return click.option(
        "--skew",
        default="1d",
        show_default=True,
        metavar="DURATION",
        callback=_skew,
        help="How far after now an event's time may lie (s, min, h, d); later ones are refused.",
    )(wrapper)


class Finite(click.FloatRange):
    """A finite number in a range: ``nan``, ``inf`` and numbers too large for a float are refused (click's own
    range lets NaN through, since every comparison with it is false)."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


def seed_option(default: int | None, help: str) -> Decorator:
    """``--seed N`` with this command's default and meaning (0 to 2^64 - 1, what numpy's generators take)."""
    return option("--seed", click.IntRange(0, MAX_SEED), default, help)


#: The options that name a workspace (pipeline.workspace.Workspace.resolve), by what a command asks for.
_HOME = click.option(
    "--home",
    "home",
    type=click.Path(),
    default=None,
    help="Home directory (default: $RATINGS_HOME, else the current directory).",
)
_STORE = (
    click.option(
        "--store",
        "store_uri",
        default=None,
        envvar="RATINGS_STORE",
        metavar="URI",
        help="The store: a local path or s3://, gs://, az:// URI (default: $RATINGS_STORE, else <home>/store).",
    ),
    click.option(
        "--storage-option",
        "storage_option",
        multiple=True,
        metavar="KEY=VALUE",
        help="An object-store setting for delta-rs (repeat), e.g. AWS_ENDPOINT_URL=http://127.0.0.1:9000.",
    ),
)
_WRITER = click.option(
    "--writer",
    default=None,
    metavar="NAME",
    help="This home's name in the store (default: the name it first used, else the host name).",
)
_AS_OF = click.option(
    "--as-of",
    "as_of",
    default=None,
    metavar="VERSION|TIME",
    help="Read the store as it was at this table version or time (RFC 3339 or a date).",
)


def workspace(
    *,
    store: bool = False,
    writer: bool = False,
    as_of: bool = False,
    rule: HomeRule = "home",
    optional: Callable[[Workspace, dict[str, Any]], bool] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--home`` (plus ``--store URI`` and ``--storage-option KEY=VALUE``, ``--writer``, ``--as-of`` where asked):
    the command receives the :class:`~pipeline.workspace.Workspace` they name as ``ws``, resolved once here and
    checked against what the command may do with its home (``rule``: :meth:`Workspace.check_home`); a missing
    folder or one that is not a home is refused with the remedy before the command runs. ``optional(ws, kwargs)``
    True: this call can work without a home (a store or a file given instead), so only a ``--home`` given is
    checked. The command also gets ``home``, the option as given, when it has a parameter of that name."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        wants_home = "home" in inspect.signature(fn).parameters

        @wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            from ..workspace import Workspace, parse_storage_options

            home = kwargs.pop("home")
            try:
                kwargs["ws"] = Workspace.resolve(
                    home,
                    store=kwargs.pop("store_uri") if store else None,
                    storage_options=parse_storage_options(kwargs.pop("storage_option")) if store else None,
                    writer=kwargs.pop("writer") if writer else None,
                    as_of=kwargs.pop("as_of") if as_of else None,
                )
                if home is not None or optional is None or not optional(kwargs["ws"], kwargs):
                    kwargs["ws"].check_home(rule)
            except PipelineError as exc:
                click.echo(f"error: {exc}", err=True)
                sys.exit(exc.exit_code)
            if wants_home:
                kwargs["home"] = home
            return fn(*args, **kwargs)

        options = [_HOME, *(_STORE if store else ()), *([_WRITER] if writer else []), *([_AS_OF] if as_of else [])]
        for option in reversed(options):
            wrapper = option(wrapper)
        return wrapper

    return decorate


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False, allow_nan=False))


def print_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """A plain aligned text table for people."""
    if not rows:
        click.echo("(no rows)")
        return
    columns = columns or list(rows[0])
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def handle_errors(fn: Callable) -> Callable:
    """Turn library errors into one line per problem on stderr and the error's exit code."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InvalidBatch as exc:
            for err in exc.errors:
                click.echo(err.message(), err=True)
            named = f" (the first {len(exc.errors)} named above)" if exc.total > len(exc.errors) else ""
            click.echo(f"nothing appended: {exc.total} {exc.what}{named}{exc.remedy}", err=True)
            sys.exit(2)
        except PipelineError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except BrokenPipeError:  # the reader went away (`ratings sql ... | head`): nothing to say to it
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            sys.exit(1)
        except OSError as exc:  # an unwritable home, a full disk: the machine failed, not the input
            click.echo(f"error: {os_error_line(exc)}", err=True)
            sys.exit(MachineFailure.exit_code)

    return wrapper


def os_error_line(exc: OSError) -> str:
    """One line for an I/O failure: what failed, on which file, and the notes the library added (what was kept)."""
    what = exc.strerror or str(exc) or type(exc).__name__
    if exc.filename is not None:
        what += f": {exc.filename}"
    notes = getattr(exc, "__notes__", [])
    return what + (f" ({'; '.join(notes)})" if notes else "")


@contextmanager
def json_errors(as_json: bool, **shape: Any) -> Iterator[None]:
    """With ``--json``, report a failure as one JSON object on stdout (``shape`` plus ``errors`` or ``error``)
    and exit with its code; without it, let :func:`handle_errors` print it for people."""
    if not as_json:
        yield
        return
    try:
        yield
    except InvalidBatch as exc:
        emit_json({**shape, "errors": [e.as_json() for e in exc.errors], "invalid": exc.total})
        sys.exit(exc.exit_code)
    except PipelineError as exc:
        emit_json({**shape, "error": str(exc)})
        sys.exit(exc.exit_code)
    except OSError as exc:
        emit_json({**shape, "error": os_error_line(exc)})
        sys.exit(MachineFailure.exit_code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Ratings pipeline: append events, compact them, fit routing, route.

    \b
    Example:
      ratings append '{"type":"task.opened","task":"T-1","region":"implement"}'
      fit-routing --home .
    """


@contextmanager
def progress_bar(label: str, quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback ``(done, total)`` drawing click's bar on a terminal; None in pipes or when quiet."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    bar: Any = None
    shown = 0

    def advance(done: int, total: int) -> None:
        nonlocal bar, shown
        if bar is None:
            bar = click.progressbar(length=total, label=label, file=sys.stderr)
            bar.__enter__()
        bar.update(done - shown)
        shown = done

    try:
        yield advance
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
