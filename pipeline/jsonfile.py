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


def read_json(path: Path, error: type[PipelineError], *, missing: str | None = None) -> Any:
    """The parsed content of ``path``. A missing file raises ``error("<path>: <missing>")``, or
    :class:`FileNotFoundError` when ``missing`` is None (the caller has a default)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if missing is None:
            raise
        raise error(f"{path}: {missing}") from None
    except ValueError as exc:
        raise error(f"{path}: not valid JSON: {exc}") from None


def first_problem(exc: ValueError) -> str:
    """A parse or validation error on one line: ``<field.path>: <reason>`` of pydantic's first error (``-`` for the
    whole document), else the first line of the message. Pydantic's own report spans two lines per error."""
    if isinstance(exc, ValidationError):
        err = exc.errors(include_url=False)[0]
        return f"{'.'.join(str(p) for p in err['loc']) or '-'}: {err['msg']}"
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
