"""Vectorised validation of stream lines: Arrow's JSON reader plus column checks.

A line is taken by the fast path only when it is plainly valid: a known type,
only that type's fields (Arrow rejects any other field, also nested), the right
JSON types (Arrow rejects a string where a number belongs, a float in an int
field, a duplicate key, bad UTF-8 or JSON), values in range, a canonical UTC
time (``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``), no explicit ``null`` for a field that
only has a default. Everything else (unknown fields or types, labels, other
time zones, anything wrong) is handed to the per-line parser, which gives the
reason a dead letter carries and keeps unknown fields in ``extra``. A block that
Arrow rejects is split in halves until the bad lines are isolated, so one bad
line costs a few re-reads of its neighbourhood, not the chunk.

The rows produced are equal to :func:`pipeline.compact.rows.event_row` of the
same line; ``tests/test_compact.py`` checks both paths against each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..events import KNOWN, RESERVED_ID
from ..families import COLUMNS, DEFAULTS
from .rows import SCHEMAS, family_of

_S, _F, _I, _B = pa.string(), pa.float64(), pa.int64(), pa.bool_()
_CONFIG = pa.struct([("cli", _S), ("route", _S), ("model", _S), ("effort", _S)])
_RATER = pa.struct([("kind", _S), ("name", _S)])
_LIST = pa.list_(_S)
_COMMON = [("id", _S), ("type", _S), ("at", _S), ("v", _I)]

#: The JSON fields of each known type, as Arrow reads them (``labels`` is left out: free keys go the slow way).
FIELDS: dict[str, list[tuple[str, pa.DataType]]] = {
    "task.opened": [("task", _S), ("region", _S), ("title", _S), ("thread", _S)],
    "task.attempted": [
        ("task", _S),
        ("config", _CONFIG),
        ("status", _S),
        ("cost_usd", _F),
        ("duration_ms", _I),
        ("node", _S),
        ("prompt_version", _S),
        ("reviewer_verdict", _S),
        ("tool_calls", _I),
        ("files_read", _I),
        ("files_written", _I),
    ],
    "route.decided": [
        ("task", _S),
        ("policy", _S),
        ("chosen", _S),
        ("candidates", _LIST),
        ("propensity", _F),
        ("table", _S),
        ("explored", _B),
        ("reason", _S),
        ("predicted_quality", _F),
    ],
    "task.closed": [("task", _S), ("outcome", _S)],
    "task.rated": [
        ("task", _S),
        ("config", _CONFIG),
        ("rater", _RATER),
        ("score", _F),
        ("precision", _F),
        ("confidence", _F),
        ("importance", _F),
    ],
    "task.rejected": [
        ("task", _S),
        ("config", _CONFIG),
        ("rater", _RATER),
        ("claim", _S),
        ("evidence", _LIST),
        ("weight", _F),
    ],
    "rating.retracted": [("rating", _S), ("reason", _S)],
}
_SCHEMA = {t: pa.schema(_COMMON + f) for t, f in FIELDS.items()}


@dataclass(frozen=True)
class Rules:
    """What the fast path checks on the rows of one event type, read off the type's model (its JSON Schema), so
    that the vectorised checks and the per-line parser have one source: the models in ``pipeline.events``."""

    required: list[str]  # present and not null
    defaulted: list[str]  # have a default but take no ``null``: an explicit null is invalid
    non_empty: list[str]  # strings of at least one character (when present)
    ranges: dict[str, tuple[float | None, float | None, bool, bool]]  # (low, high, low open, high open)
    enums: dict[str, list[str]]


def _branch(prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(the non-null schema of a property, whether it takes null)."""
    options = prop.get("anyOf")
    if options is None:
        return prop, prop.get("type") == "null"
    kept = [o for o in options if o.get("type") != "null"]
    return (kept[0] if kept else {}), len(kept) < len(options)


def rules_of(event_type: str) -> Rules:
    """The :class:`Rules` of a known event type, from its pydantic model."""
    schema = KNOWN[event_type].model_json_schema()
    required, defaulted, non_empty = [], [], []
    ranges: dict[str, tuple[float | None, float | None, bool, bool]] = {}
    enums: dict[str, list[str]] = {}
    for name, prop in schema["properties"].items():
        if name == "type":
            continue
        branch, nullable = _branch(prop)
        if name in schema.get("required", []):
            required.append(name)
        elif "default" in prop and not nullable:
            defaulted.append(name)
        if branch.get("minLength", 0) >= 1:
            non_empty.append(name)
        low, high = (
            branch.get("minimum", branch.get("exclusiveMinimum")),
            branch.get("maximum", branch.get("exclusiveMaximum")),
        )
        if low is not None or high is not None:
            ranges[name] = (low, high, "exclusiveMinimum" in branch, "exclusiveMaximum" in branch)
        if "enum" in branch:
            enums[name] = list(branch["enum"])
    return Rules(required, defaulted, non_empty, ranges, enums)


_RULES = {t: rules_of(t) for t in FIELDS}
_RATER_KINDS = ["gate", "reviewer", "human"]
_CANONICAL_AT = (
    r"^([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(\.[0-9]{1,6})?Z$"
)
_TYPE = r'"type"\s*:\s*"(?P<t>[a-z._]+)"'
_MIN_BISECT = 16  # a failed block this small goes line by line
_GIVE_UP = 4096  # a failed block at least this big whose halves both fail goes line by line


def lines_array(block: bytes, starts: np.ndarray) -> pa.LargeBinaryArray:
    """Line ``i`` of ``block`` is ``block[starts[i]:starts[i+1]]`` (with its newline), without copying."""
    return pa.Array.from_buffers(
        pa.large_binary(), len(starts) - 1, [None, pa.py_buffer(starts.astype(np.int64)), pa.py_buffer(block)]
    )


def event_types(lines: pa.LargeBinaryArray) -> pa.Array:
    """The first ``"type": "..."`` of each line (null when none, or when the chunk is not UTF-8)."""
    try:
        text = lines.cast(pa.large_string())
    except pa.ArrowInvalid:
        return pa.nulls(len(lines), _S)
    return pc.struct_field(pc.extract_regex(text, _TYPE), [0])


class KeySearch:
    """Which lines of a chunk contain a key (``"name"``): one literal search over the chunk's bytes per key."""

    def __init__(self, block: bytes, lines: pa.LargeBinaryArray):
        self.block = block
        self.starts = np.frombuffer(lines.buffers()[1], np.int64, len(lines) + 1, lines.offset * 8)
        self.found: dict[bytes, np.ndarray] = {}

    def lines_with(self, needle: bytes) -> np.ndarray:
        mask = self.found.get(needle)
        if mask is None:
            hits = []
            at = self.block.find(needle)
            while at >= 0:
                hits.append(at)
                at = self.block.find(needle, at + 1)
            mask = np.zeros(len(self.starts) - 1, bool)
            if hits:
                mask[np.searchsorted(self.starts, np.array(hits, np.int64), side="right") - 1] = True
            self.found[needle] = mask
        return mask


class FastResult:
    """Rows per family (each with ``_line``) for the lines the fast path took, and the lines it left."""

    def __init__(self, keys: KeySearch) -> None:
        self.keys = keys
        self.tables: dict[str, list[pa.Table]] = {}
        self.slow: list[np.ndarray] = []


def parse_fast(
    lines: pa.LargeBinaryArray, candidate: np.ndarray, id_prefix: str, offsets: np.ndarray, block: bytes
) -> FastResult:
    """Validate the ``candidate`` lines (indices into ``lines``, whose bytes are ``block``); ``offsets`` are their
    stream byte offsets and an id-less line gets the id ``<id_prefix>@<offset>``."""
    out = FastResult(KeySearch(block, lines))
    types = event_types(lines)
    codes = pc.dictionary_encode(types)
    names = codes.dictionary.to_pylist()
    index = codes.indices.to_numpy(zero_copy_only=False)
    valid_code = ~np.asarray(pc.is_null(codes.indices), bool)
    for k, name in enumerate(names):
        picked = candidate[valid_code[candidate] & (index[candidate] == k)]
        if name not in FIELDS:
            out.slow.append(picked)
            continue
        if len(picked):
            _parse_group(name, lines, picked, id_prefix, offsets, out)
    out.slow.append(candidate[~valid_code[candidate]])
    return out


def _parse_group(
    name: str, lines: pa.LargeBinaryArray, picked: np.ndarray, id_prefix: str, offsets: np.ndarray, out: FastResult
) -> None:
    read = _read(name, lines, picked)
    if read is None:
        if len(picked) <= _MIN_BISECT:
            out.slow.append(picked)
            return
        half = len(picked) // 2
        before = sum(len(s) for s in out.slow)
        _parse_group(name, lines, picked[:half], id_prefix, offsets, out)
        failed_first = sum(len(s) for s in out.slow) > before
        if failed_first and len(picked) >= _GIVE_UP and _read(name, lines, picked[half:]) is None:
            out.slow.append(picked[half:])
            return
        _parse_group(name, lines, picked[half:], id_prefix, offsets, out)
        return
    table, raw = read
    ok, times = _row_checks(name, table, raw, lambda needle: out.keys.lines_with(needle)[picked])
    if not ok.all():
        out.slow.append(picked[~ok])
        keep = pa.array(ok)
        table, times, picked = table.filter(keep), times.filter(keep), picked[ok]
    if len(picked):
        family = family_of(name)
        out.tables.setdefault(family, []).append(_to_family(family, table, times, picked, id_prefix, offsets))


def _read(name: str, lines: pa.LargeBinaryArray, picked: np.ndarray) -> tuple[pa.Table, pa.Array] | None:
    """Arrow's reading of the picked lines with the type's exact schema (and the lines), or None when it rejects any."""
    whole = len(picked) == len(lines) and picked[0] == 0 and picked[-1] == len(lines) - 1
    taken = lines if whole else lines.take(pa.array(picked))  # sorted and unique: all lines, in order
    offs = np.frombuffer(taken.buffers()[1], np.int64, len(taken) + 1, taken.offset * 8)
    data = taken.buffers()[2].slice(int(offs[0]), int(offs[-1] - offs[0]))
    options = pj.ParseOptions(explicit_schema=_SCHEMA[name], unexpected_field_behavior="error")
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            parse_options=options,
            read_options=pj.ReadOptions(block_size=max(1 << 22, 2 * int(np.diff(offs).max()))),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(picked):  # Arrow skips a blank line: go line by line
        return None
    return table, taken


def _all_valid(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), bool)


def _row_checks(
    name: str, table: pa.Table, raw: pa.LargeBinaryArray, with_key: Callable[[bytes], np.ndarray]
) -> tuple[np.ndarray, pa.Array]:
    """True for rows the fast path may take (see the module docstring), and their times; ``raw`` are their lines,
    ``with_key(b'"name"')`` tells which of them contain that key."""
    rules = _RULES[name]
    ok = _all_valid(pc.equal(table["type"], name))
    for field in rules.required:
        ok &= _all_valid(pc.is_valid(table[field]))
    for field in rules.non_empty:
        ok &= ~_all_valid(pc.equal(pc.utf8_length(table[field]), 0))
    # an explicit id of the compactor's own form is refused by the parser: leave it to the parser's reason
    ok &= ~_all_valid(pc.match_substring_regex(table["id"], "^" + RESERVED_ID.pattern + "$"))
    for field, (low, high, low_open, high_open) in rules.ranges.items():
        col = table[field]
        good = pc.is_valid(col)
        if low is not None:
            good = pc.and_kleene(good, pc.greater(col, low) if low_open else pc.greater_equal(col, low))
        if high is not None:
            good = pc.and_kleene(good, pc.less(col, high) if high_open else pc.less_equal(col, high))
        if pa.types.is_floating(col.type):
            good = pc.and_kleene(good, pc.is_finite(col))
        ok &= _all_valid(pc.or_kleene(pc.is_null(col), good))
    for field, allowed in rules.enums.items():
        ok &= _all_valid(pc.is_in(table[field], value_set=pa.array(allowed)))
    cols = set(table.column_names)
    for struct, fields in (("config", ("cli", "model")), ("rater", ("name",))):
        if struct in cols:
            for field in fields:
                part = pc.struct_field(table[struct], field)
                ok &= _all_valid(pc.greater(pc.utf8_length(part), 0))
    if "rater" in cols:
        ok &= _all_valid(pc.is_in(pc.struct_field(table["rater"], "kind"), value_set=pa.array(_RATER_KINDS)))
    for field, non_empty in (("candidates", True), ("evidence", False)):
        if field in cols:
            flat = pc.list_flatten(table[field])
            bad_items = (
                pc.is_null(flat) if not non_empty else pc.or_kleene(pc.is_null(flat), pc.equal(pc.utf8_length(flat), 0))
            )
            parents = pc.list_parent_indices(table[field]).to_numpy()
            ok[parents[_all_valid(bad_items)]] = False
    at = table["at"].combine_chunks()
    no_at = _all_valid(pc.is_null(at))
    canonical = _all_valid(pc.match_substring_regex(at, _CANONICAL_AT))
    ok &= canonical | no_at
    times = _timestamps(at if canonical.all() else pc.if_else(pa.array(canonical), at, pa.scalar(None, _S)))
    ok &= _all_valid(pc.is_valid(times)) | no_at  # 2026-02-30 matches the pattern but is no date
    # A defaulted field null in the table but its key in the line: an explicit null (invalid) or the key inside
    # some string; either way the parser decides. Literal searches over the lines, no regex per line.
    nulls = {f: _all_valid(pc.is_null(table[f])) for f in rules.defaulted}
    nulls = {f: null for f, null in nulls.items() if null.any()}
    if nulls:
        for field, null in nulls.items():
            ok &= ~(null & with_key(f'"{field}"'.encode()))
    return ok, times


def _timestamps(at: pa.Array) -> pa.Array:
    """Canonical ``...Z`` strings (or null) to naive UTC ``timestamp[us]``; null where not a real date or time."""
    bare = pc.utf8_slice_codeunits(at, 0, -1)
    try:
        return pc.cast(bare, pa.timestamp("us"))  # strict ISO 8601: 2026-02-30 or 24:00 fail the whole cast
    except pa.ArrowInvalid:
        pass
    head = pc.utf8_slice_codeunits(at, 0, 19)
    base = pc.strptime(head, format="%Y-%m-%dT%H:%M:%S", unit="us", error_is_null=True)
    # strptime rolls 2026-02-30 over to March: only a time that prints back as it was read is real
    printed = pc.strftime(pc.cast(base, pa.timestamp("s")), format="%Y-%m-%dT%H:%M:%S")  # %S of us prints a fraction
    base = pc.if_else(pc.equal(printed, head), base, pa.scalar(None, base.type))
    frac = pc.utf8_slice_codeunits(at, 20, -1)  # digits between '.' and 'Z' ("" without a fraction)
    micros = pc.cast(pc.utf8_rpad(pc.if_else(pc.equal(frac, ""), "0", frac), 6, "0"), _I)
    return pc.cast(pc.add(pc.cast(base, _I), micros), pa.timestamp("us"))


def _encode_part(part: pa.Array) -> pa.Array:
    """The config-key encoding of one part (same rule as :func:`pipeline.events.config_key`); each replacement
    runs only when some value needs it (almost never)."""
    encoded = part
    if pc.any(pc.match_substring(part, "%")).as_py():
        encoded = pc.replace_substring(encoded, "%", "%25")
    if pc.any(pc.match_substring(part, "/")).as_py():
        encoded = pc.replace_substring(encoded, "/", "%2F")
    dash = pc.equal(part, "-")
    if pc.any(dash).as_py():
        encoded = pc.if_else(dash, "%2D", encoded)
    return pc.fill_null(encoded, "-")


def config_keys(config: pa.Array) -> pa.Array:
    parts = [_encode_part(pc.struct_field(config, f)) for f in ("cli", "route", "model", "effort")]
    return pc.binary_join_element_wise(*parts, "/")


def _to_family(
    family: str, table: pa.Table, times: pa.Array, picked: np.ndarray, id_prefix: str, offsets: np.ndarray
) -> pa.Table:
    ids = table["id"].combine_chunks()
    if ids.null_count:
        fallback = pa.array([f"{id_prefix}@{int(o)}" for o in offsets[picked]], _S)
        ids = pc.if_else(pc.is_null(ids), fallback, ids)
    columns: dict[str, pa.Array] = {
        "id": ids,
        "type": table["type"],
        "at": times,
        "v": pc.fill_null(table["v"], 1),
    }
    defaults = {**DEFAULTS.get(family, {}), **({"region": "general"} if family == "tasks" else {})}
    config = table["config"].combine_chunks() if "config" in table.column_names else None
    rater = table["rater"].combine_chunks() if "rater" in table.column_names else None
    n = table.num_rows
    for column, _ in COLUMNS[family]:
        if column in columns:
            continue
        if column in ("cli", "route", "model", "effort"):
            columns[column] = pc.struct_field(config, column)
        elif column == "config_key":
            columns[column] = config_keys(config)
        elif column in ("rater_kind", "rater_name"):
            columns[column] = pc.struct_field(rater, column[6:])
        elif column in ("labels", "extra"):
            columns[column] = pa.nulls(n, _S)
        else:
            value = table["table" if column == "table_version" else column]
            columns[column] = pc.fill_null(value, defaults[column]) if column in defaults else value
    schema = SCHEMAS[family]
    arrays = [pc.cast(columns[f.name], f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema).append_column("_line", pa.array(picked, pa.int64()))
