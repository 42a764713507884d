"""The writer: the name under which a home's compactions land in the store (docs/design.md, Storage).

Every home is one writer. Its name is ``--writer``, else the host name, and the home remembers the name it
first used in ``store/writer.json`` (with a random home id), so that a renamed host does not become a second
writer: the store keys what it consumed by (writer, stream), and a second name would consume the same streams
again. A different ``--writer`` for a home that already has one is refused; the home id lets compaction notice
two homes that claim one name in a shared store.
"""

from __future__ import annotations

import json
import re
import secrets
import socket

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import PipelineError
from ..workspace import Workspace

#: A writer name: what a host name may hold, no ':' or '@' (they delimit compactor ids ``<writer>:<stream>@<n>``).
WRITER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


class WriterIdentity(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    writer: str
    home_id: int = Field(ge=1, lt=2**63)  # random; recorded in the store beside the writer's offsets


def check_name(name: str) -> str:
    if not WRITER_NAME.fullmatch(name):
        raise PipelineError(
            f"writer name {name!r}: use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


def _default_name() -> str:
    """The host name, made a valid writer name (its first label when the full name does not fit)."""
    host = socket.gethostname() or "localhost"
    name = re.sub(r"[^A-Za-z0-9._-]", "-", host).lstrip("._-")[:63] or "localhost"
    return name


def identity(ws: Workspace) -> WriterIdentity:
    """This home's writer: the one ``store/writer.json`` remembers, else a new one (the workspace's ``writer``,
    else the host name) that :func:`remember` records once the store has accepted it."""
    path, requested = ws.writer_file, ws.writer
    if path.exists():
        try:
            known = WriterIdentity.model_validate_json(ws.read(path))  # never through a link out of the bounds
        except (ValidationError, ValueError) as exc:
            raise PipelineError(
                f"{path}: not a writer identity ({str(exc).splitlines()[0]}); fix or remove it"
            ) from None
        if requested is not None and requested != known.writer:
            raise PipelineError(
                f"this home writes to the store as {known.writer!r} (store/writer.json); --writer {requested!r} "
                "would consume its streams a second time under another name. Drop --writer, or use a new home"
            )
        return known
    return WriterIdentity(writer=check_name(requested) if requested else _default_name(), home_id=_home_id())


def remember(ws: Workspace, writer: WriterIdentity) -> None:
    """Record this home's writer in ``store/writer.json`` (once: the first compaction the store accepted)."""
    path = ws.writer_file
    if not path.exists():
        ws.write(path, (json.dumps(writer.model_dump(), indent=1) + "\n").encode())


def _home_id() -> int:
    return secrets.randbits(62) + 1
