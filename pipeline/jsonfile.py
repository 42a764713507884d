"""Reading a JSON file a person wrote (shipped.json, a scenario, a routing table) into a pydantic model.

One place for the messages: ``<path>: not valid JSON: ...`` and ``<path>: <field.path>: <reason>``
(``-`` when the file as a whole is wrong), raised as the caller's :class:`PipelineError` subclass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from .errors import PipelineError

M = TypeVar("M", bound=BaseModel)


#: JSON nested deeper than this is refused (Python's parser would exhaust its stack far below what a person writes).
MAX_DEPTH = 200


def parse_json(text: str | bytes) -> Any:
    """The value of a JSON document; :class:`ValueError` for anything that is not one: invalid JSON or UTF-8,
    nesting deeper than :data:`MAX_DEPTH` (checked before parsing: the parser's own recursion would fail only at
    Python's stack limit, as a ``RecursionError``)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and _depth(raw) > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(raw)  # NaN and Infinity are read: the model that validates them names the field
    except RecursionError:  # unreachable after the depth check; kept as the parser's own limit
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None


def _depth(raw: bytes) -> int:
    """The deepest nesting of brackets outside strings."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def read_json(path: Path, error: type[PipelineError], *, missing: str | None = None) -> Any:
    """The parsed content of ``path`` (:func:`parse_json`). A missing file raises ``error("<path>: <missing>")``,
    or :class:`FileNotFoundError` when ``missing`` is None (the caller has a default)."""
    try:
        return parse_json(path.read_bytes())
    except FileNotFoundError:
        if missing is None:
            raise
        raise error(f"{path}: {missing}") from None
    except IsADirectoryError:
        raise error(f"{path}: a folder, not a JSON file") from None
    except ValueError as exc:
        raise error(f"{path}: not valid JSON: {exc}") from None


def first_problem(exc: ValueError) -> str:
    """A parse or validation error on one line: ``<field.path>: <reason>`` of pydantic's first error (``-`` for the
    whole document), else the first line of the message. Pydantic's own report spans two lines per error."""
    if isinstance(exc, ValidationError):
        err = exc.errors(include_url=False)[0]
        return f"{'.'.join(str(p) for p in err['loc']) or '-'}: {err['msg'].removeprefix('Value error, ')}"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def json_schema(model: Any, schema_id: str, title: str) -> dict[str, Any]:
    """The published JSON Schema (draft 2020-12) of ``model`` (a model class, or a union of them), with its JSON
    (alias) names, ``$id`` and ``title``."""
    schema = TypeAdapter(model).json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = schema_id
    schema["title"] = title
    return schema


def validate(model: type[M], data: Any, path: Path, error: type[PipelineError]) -> M:
    """``data`` as ``model``; the first validation error as ``error("<path>: <field.path>: <reason>")``."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{path}: {first_problem(exc)}") from None
