"""The few exceptions users of the library catch.

Each carries what a person needs to fix the cause; the CLI turns them into a one-line message and the exit code
of its class (:data:`EXIT_CODES`, the README's table). Anything else that escapes is a bug of ours and surfaces
as one.
"""

from __future__ import annotations

#: Every exit code of the CLI (README, Exit codes).
EXIT_CODES = {
    0: "success",
    1: "a failed check: `verify` found a problem, `doctor` says the loop is open, a damaged store",
    2: "bad input: an invalid event, option, file or query, a missing home (nothing was written)",
    3: "busy: another fit holds the home's fit lock, or another compaction committed meanwhile",
    4: "a machine failure: a full or read-only disk, permissions, an unreachable store (nothing of the run is visible)",
}


class PipelineError(Exception):
    """Base of every error the pipeline raises on purpose: bad input unless a subclass says otherwise."""

    exit_code = 2


class MachineFailure(PipelineError):
    """The machine failed the command: a full or read-only disk, a quota or file-size limit, permissions, an
    I/O error, a store that cannot be reached. The message says what to fix; nothing of the run is visible."""

    exit_code = 4


class InvalidEvent(PipelineError):
    """One line or object that is not a valid v1 event.

    ``source`` names where it came from (a file, ``<stdin>``, ``<arg>``),
    ``line`` is 1-based, ``field`` is a dotted path (``rater.kind``) or ``-``
    when the line as a whole is wrong. ``problems`` lists every (field, reason)
    found (the first is ``field`` and the start of ``reason``, which names them all).
    """

    def __init__(
        self,
        reason: str,
        *,
        field: str = "-",
        line: int | None = None,
        source: str = "<input>",
        problems: tuple[tuple[str, str], ...] | None = None,
    ):
        self.reason = reason
        self.field = field
        self.line = line
        self.source = source
        self.problems = problems if problems is not None else ((field, reason),)
        super().__init__(self.message())

    def message(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.field}: {self.reason}"

    def located(self, *, source: str, line: int) -> InvalidEvent:
        return InvalidEvent(self.reason, field=self.field, line=line, source=source, problems=self.problems)

    def as_json(self) -> dict[str, object]:
        """The stable JSON shape of this error (``ratings append --json``)."""
        return {
            "source": self.source,
            "line": self.line,
            "problems": [{"field": field, "reason": reason} for field, reason in self.problems],
        }


class OutsideHome(PipelineError):
    """A path the pipeline would write, or read as a stream, leads outside the home through a symbolic link.

    A symlinked home itself (the ``--home`` path) is fine; a link inside it that leaves it is refused, so that
    no command truncates, appends to, copies or creates a file elsewhere (exit 2).
    """


class NotAHome(PipelineError):
    """The folder a command was given is missing or not a home (a folder with ``streams/`` or ``fits/``); the
    message says how to start one or which home was meant (exit 2). Nothing was created."""


class InvalidBatch(PipelineError):
    """A batch with one or more invalid events; nothing of it was written. ``errors`` names them, or the first
    of ``total`` when there are too many to name."""

    def __init__(
        self, errors: list[InvalidEvent], *, total: int | None = None, what: str = "invalid event(s)", remedy: str = ""
    ):
        self.errors = errors
        self.total = total if total is not None else len(errors)
        self.what, self.remedy = what, remedy  # how the summary line names them, and what to do
        super().__init__("\n".join(e.message() for e in errors))


class StoreConflict(PipelineError):
    """Another process holds the lock, or another home claims this home's writer name in the store."""


class Busy(StoreConflict):
    """Another process holds the lock (another fit), or another compaction of this writer committed meanwhile:
    nothing is wrong, run again later (or with ``--wait``)."""

    exit_code = 3


class StoreCorrupt(PipelineError):
    """The store is damaged or disagrees with what its commits claim (the message says how to recover)."""

    exit_code = 1


class StaleTable(PipelineError):
    """The routing table was not fitted from the newest table version."""

    exit_code = 1


class TableSchemaError(PipelineError):
    """A routing table of an unknown major schema, or one that does not validate."""


class FitError(PipelineError):
    """The fit cannot run on this data (for example: no ratings at all)."""


class RoutingError(PipelineError):
    """A route that cannot be decided: an empty pool, an unknown policy, a table without a global pool."""
