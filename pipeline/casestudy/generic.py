"""Show a section whose exact shape this renderer does not know (``signals``) as tables, losing nothing.

A mapping of scalars becomes a two-column table; a mapping of mappings of
scalars, or a list of such mappings, becomes one table with a row each;
anything deeper becomes a sub-heading per key, two levels at most, then JSON.
"""

from __future__ import annotations

import json
from typing import Any

from . import fmt
from .doc import Block, Heading, para, table

MAX_ROWS = 50


def scalar(value: Any) -> str:
    if value is None:
        return fmt.NA
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return fmt.count(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(scalar(v) for v in value)
    if isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        return ", ".join(f"{k} {scalar(v)}" for k, v in value.items())
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def _flat(value: Any) -> bool:
    """A value that fits one cell: a scalar, a list of scalars, or a mapping of scalars (``k v, k v``)."""
    if isinstance(value, dict):
        return all(not isinstance(v, (dict, list)) for v in value.values())
    return not isinstance(value, list) or all(not isinstance(v, (dict, list)) for v in value)


def _rows_table(rows: list[tuple[str, dict[str, Any]]], key_name: str) -> Block:
    columns: list[str] = []
    for _, row in rows:
        columns += [c for c in row if c not in columns]
    body = [[name] + [scalar(row.get(c)) for c in columns] for name, row in rows[:MAX_ROWS]]
    caption = f"first {MAX_ROWS} of {len(rows)} rows" if len(rows) > MAX_ROWS else ""
    return table([key_name, *columns], body, caption)


def blocks_for(value: Any, level: int = 3, key_name: str = "name") -> list[Block]:
    if isinstance(value, dict) and all(_flat(v) for v in value.values()):
        return [table([key_name, "value"], [[k, scalar(v)] for k, v in value.items()])]
    if value is None or value == [] or value == {}:
        return [para("none")]
    if isinstance(value, dict) and all(
        isinstance(v, dict) and all(_flat(x) for x in v.values()) for v in value.values()
    ):
        return [_rows_table(list(value.items()), key_name)]
    if isinstance(value, list) and all(isinstance(v, dict) and all(_flat(x) for x in v.values()) for v in value):
        return [_rows_table([(str(i + 1), v) for i, v in enumerate(value)], "#")]
    if isinstance(value, dict) and level <= 6:
        out: list[Block] = []
        for key, sub in value.items():
            out.append(Heading(level, str(key)))
            out += blocks_for(sub, level + 1, key_name)
        return out
    return [para(scalar(value))]
