"""Configuration keys as a reader of a page recognises them."""

from __future__ import annotations

import re
from typing import Any

from ..nightly.stats import Stats


def short_config(key: str) -> str:
    """``claude-code/anthropic/opus/high`` -> ``opus high``: the model and effort a reader recognises."""
    from urllib.parse import unquote

    parts = key.split("/")
    if len(parts) != 4:
        return key
    model, effort = unquote(parts[2]), unquote(parts[3])
    return model if effort == "-" else f"{model} {effort}"


def chain(keys: list[str]) -> str:
    """A ladder's rungs in short form: ``a → b``."""
    return " → ".join(short_config(k) for k in keys)


#: The fields of a stats file that hold configuration keys (one key, or a list of them).
CONFIG_FIELDS = frozenset(
    {"config", "config_key", "best_single_config", "configs", "rungs", "ladder", "cheap_config", "frontier_config"}
    | {"default_config"}
)


def config_keys(stats: Stats) -> list[str]:
    """Every configuration key the stats names, longest first (so a key inside another is replaced second)."""
    keys: set[str] = set()

    def walk(value: Any, field: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, field)
        elif isinstance(value, str) and field in CONFIG_FIELDS and len(value.split("/")) == 4:
            keys.add(value)

    walk(stats.to_json_dict())
    return sorted(keys, key=lambda k: (-len(k), k))


def short_configs_in(text: str, keys: list[str]) -> str:
    """``text`` with each configuration key in ``keys`` written as :func:`short_config` writes it."""
    if not keys or not text:
        return text
    pattern = re.compile("|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True)))
    return pattern.sub(lambda m: short_config(m.group(0)), text)
