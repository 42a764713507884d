"""Opening the events table: at one version (or as of a time), with delta-rs errors as one line each.

Every reader opens the table once, at one version, and reads that snapshot to the end (docs/design.md,
Storage). Nothing here imports ``deltalake`` at module level: the CLI and the append path never load it.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn

from ..errors import Busy, MachineFailure, PipelineError, StoreCorrupt
from ..utc import parse_time
from ..workspace import DELTA_LOG, STREAMS, StoreLocation, Workspace
from .families import VIEWS

if TYPE_CHECKING:
    from deltalake import DeltaTable

#: What to do when the store is damaged (appended to every such message).
RECOVER = (
    "run `ratings verify` to see the damage, then `ratings compact --rebuild` to rebuild the store from the streams"
)


def first_line(exc: BaseException) -> str:
    """An exception's message on one line (delta-rs appends a Rust backtrace, colour codes and the error's causes,
    one per line: the last cause says what happened, the first names the operation)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip().lstrip("↳").strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not re.fullmatch(r"\d+: .*", line)]  # backtrace frames
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]}: {lines[-1]}"


#: What to do about each failure of the machine, by the operating system's error code.
MACHINE = {
    errno.ENOSPC: "the disk is full: free some space, then run the command again",
    errno.EDQUOT: "the disk quota is used up: free some space, then run the command again",
    errno.EFBIG: "a file size limit was reached (ulimit -f): raise it, then run the command again",
    errno.EROFS: "the store is on a read-only file system: make it writable, then run the command again",
    errno.EACCES: "permission denied: make the home and the store writable, then run the command again",
    errno.EPERM: "permission denied: make the home and the store writable, then run the command again",
    errno.EIO: "the disk reported an I/O error: check it, then run the command again",
    errno.EMFILE: "too many open files (ulimit -n): raise the limit, then run the command again",
    errno.ENOMEM: "out of memory: free some memory, then run the command again",
}
#: How delta-rs's object store names the operating system's error of a local file (an OSError without errno).
_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def os_code(exc: OSError) -> int | None:
    """The operating system's error code of ``exc``: its ``errno``, or the code delta-rs's object store puts in
    the message of the ``OSError`` it raises without one (``... (os error 28)``)."""
    if exc.errno is not None:
        return exc.errno
    found = _OS_ERROR.findall(str(exc))
    return int(found[-1]) if found else None


def machine_failure(exc: OSError, doing: str) -> MachineFailure:
    """An ``OSError`` of the machine as one line: what failed, on which file, and what to do."""
    code = os_code(exc)
    advice = MACHINE.get(code, f"{first_line(exc)}: fix that, then run the command again") if code else None
    where = f" ({exc.filename})" if exc.filename else ""
    return MachineFailure(f"cannot {doing}{where}: {advice or first_line(exc)}")


def store_errors() -> tuple[type[BaseException], ...]:
    """The classes of error the store's libraries raise: the OS's (``OSError``, also what delta-rs raises for
    its object store), delta-rs's (``DeltaError``) and Arrow's (``ArrowException``). Anything else is a bug."""
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    return (OSError, DeltaError, pa.ArrowException)


def unreachable(exc: BaseException, location: StoreLocation, doing: str) -> MachineFailure:
    """An object store that failed a request (delta-rs raises ``OSError`` for all of them): exit 4, with what its
    message says of the cause (wrong endpoint, credentials, bucket), never the options."""
    lowered = str(exc).lower()
    if "nosuchbucket" in lowered or "bucket does not exist" in lowered:
        why = "the bucket does not exist"
    elif "/latest/api/token" in lowered or "/latest/meta-data" in lowered or "metadata" in lowered:
        why = (
            "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile or role); none was "
            "configured and the instance metadata service did not answer"
        )
    elif "credential" in lowered or "accessdenied" in lowered or "invalidaccesskeyid" in lowered or "403" in lowered:
        why = "the credentials are missing or refused (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or --storage-option)"
    elif "connect" in lowered or "dns" in lowered or "timed out" in lowered or "error sending request" in lowered:
        why = "the endpoint cannot be reached (AWS_ENDPOINT_URL, or --storage-option AWS_ENDPOINT_URL=...)"
    else:
        why = first_line(exc)
    return MachineFailure(f"cannot {doing} the store {location.describe()}: {why}")


@contextmanager
def machine_errors(doing: str) -> Iterator[None]:
    """Turn an ``OSError`` of our own writes (lock, dead letters, data files) into one line saying what to do."""
    try:
        yield
    except OSError as exc:
        raise machine_failure(exc, doing) from None


def fail(exc: BaseException, location: StoreLocation, doing: str) -> NoReturn:
    """Raise the one-line error of the class of a delta-rs, Arrow or OS error while ``doing`` something to the
    store: a failure of the machine (:class:`MachineFailure`, exit 4), a store that cannot be reached (4), a
    commit that lost every race (:class:`Busy`, 3) or damage (:class:`StoreCorrupt`, 1: a missing or corrupt
    file, a log that does not parse). Any other exception is re-raised: it is a bug, not the store's state."""
    from deltalake.exceptions import CommitFailedError, DeltaError

    if isinstance(exc, OSError):
        code = os_code(exc)
        if code in MACHINE:
            raise MachineFailure(f"cannot {doing} the store {location.describe()}: {MACHINE[code]}") from None
        if location.local is None:
            raise unreachable(exc, location, doing) from None
        if not isinstance(exc, FileNotFoundError) and code not in (None, errno.ENOENT):
            raise machine_failure(exc, f"{doing} the store {location.describe()}") from None
    elif isinstance(exc, CommitFailedError):
        raise Busy(
            f"cannot {doing} the store {location.describe()}: other writers kept committing ({first_line(exc)}); "
            "run the command again"
        ) from None
    elif not isinstance(exc, DeltaError | _arrow_error()):
        raise exc
    raise StoreCorrupt(f"the store {location.describe()} is damaged ({first_line(exc)}); {RECOVER}") from None


def _delta_error() -> type[BaseException]:
    from deltalake.exceptions import DeltaError

    return DeltaError


def _arrow_error() -> type[BaseException]:
    import pyarrow as pa

    return pa.ArrowException


def exists(location: StoreLocation) -> bool:
    """Whether the events table exists (a local store: its ``_delta_log``; an object store: it opens)."""
    if location.table_path is not None:
        return (location.table_path / DELTA_LOG).is_dir()
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:  # not DeltaTable.is_deltatable: with some S3 endpoints it retries without end
        DeltaTable(location.table_uri, storage_options=location.options)
    except TableNotFoundError:
        return False
    except store_errors() as exc:
        fail(exc, location, "reach")
    return True


def parse_as_of(text: str) -> int | datetime:
    """``--as-of``: a table version (digits) or a time (RFC 3339, or a date meaning its start in UTC)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return parse_time(text)
    except ValueError:
        raise PipelineError(
            f"--as-of {text!r}: give a table version (a number) or a time (RFC 3339 or a date)"
        ) from None


def open_table(location: StoreLocation, as_of: str | int | datetime | None = None) -> DeltaTable | None:
    """The events table at ``as_of`` (a version, a time, or None for the newest); None when there is no table yet."""
    from deltalake import DeltaTable

    location.check_table()  # no link in a local table: delta-rs follows them
    if not exists(location):
        if as_of is not None:
            raise PipelineError(f"--as-of {as_of}: the store {location.describe()} has no table yet")
        return None
    try:
        table = DeltaTable(location.table_uri, storage_options=location.options)
    except store_errors() as exc:
        fail(exc, location, "open")
    if as_of is None:
        return table
    wanted = parse_as_of(as_of) if isinstance(as_of, str) else as_of
    newest = table.version()
    if isinstance(wanted, int):
        if wanted > newest:
            raise PipelineError(f"--as-of {wanted}: the table's newest version is {newest}")
        try:
            table.load_as_version(wanted)
        except store_errors() as exc:  # a version the log no longer holds, or cannot read
            if not isinstance(exc, _delta_error()) or isinstance(exc, OSError):
                fail(exc, location, "read")
            raise PipelineError(f"--as-of {wanted}: no such version of the table ({first_line(exc)})") from None
        return table
    created = _commit_time(table, 0)
    if created is not None and wanted < created:
        raise PipelineError(
            f"--as-of {wanted.isoformat()}: the table did not exist yet (created {created.isoformat()})"
        )
    try:
        table.load_as_version(wanted)
    except store_errors() as exc:
        if not isinstance(exc, _delta_error()) or isinstance(exc, OSError):
            fail(exc, location, "read")
        raise PipelineError(f"--as-of {wanted.isoformat()}: {first_line(exc)}") from None
    return table


def _commit_time(table: DeltaTable, version: int) -> datetime | None:
    for commit in table.history():
        if commit.get("version") == version and "timestamp" in commit:
            return datetime.fromtimestamp(commit["timestamp"] / 1000, tz=UTC)
    return None


def commits(table: DeltaTable, location: StoreLocation) -> list[dict[str, Any]]:
    """The commit infos up to the table's loaded version, oldest first.

    Read from the newest version of the table at ``location``: delta-rs (1.6) numbers the history of a table
    loaded at an older version from that version down, though it lists every commit up to the newest (a table at
    version 2 of 4 reports the commits 4, 3, 2, 1, 0 as 2, 1, 0, -1, -2), so its commits would be the wrong ones."""
    version = table.version()
    newest = open_table(location)
    history = (newest if newest is not None else table).history()
    return sorted((c for c in history if c.get("version", -1) <= version), key=lambda c: c["version"])


def txn_ids(writer: str, stream: str) -> tuple[str, str, str]:
    """Application ids of one (writer, stream): end offset consumed, next line number, dead-letter bytes."""
    return f"{writer}:{stream}", f"{writer}:{stream}:line", f"{writer}:{stream}:deadletter"


def home_txn_id(writer: str) -> str:
    """The application id whose version is the random id of the home that writes as ``writer``."""
    return f"{writer}:home"


def consumed_offsets(ws: Workspace, table: DeltaTable | None = None) -> dict[str, int] | None:
    """Per stream, the byte offset up to which this home's writer committed it (0 when never); None when the
    store has no table yet. ``table``: an already open table (default: the newest version of the home's store)."""
    from .writer import identity

    if table is None:
        table = open_table(ws.store)
    if table is None:
        return None
    if not ws.writer_file.exists():
        return dict.fromkeys(STREAMS, 0)
    writer = identity(ws).writer
    return {stream: table.transaction_version(txn_ids(writer, stream)[0]) or 0 for stream in STREAMS}


def family_rows(table: Any) -> dict[str, int]:
    """Rows per family at the table's loaded version, from the commit statistics (no data read)."""
    import pyarrow as pa

    counts = dict.fromkeys(VIEWS, 0)
    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows:
        grouped = actions.group_by("partition.family").aggregate([("num_records", "sum")])
        families, sums = grouped["partition.family"].to_pylist(), grouped["num_records_sum"].to_pylist()
        for family, n in zip(families, sums, strict=True):
            counts[family] = int(n or 0)
    return counts
