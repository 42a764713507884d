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

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ..streams.events import FILLABLE, KNOWN, RESERVED_ID, config_key
from ..streams.spec import CONFIG_PARTS, FAMILY_FIELDS, RATER_PARTS
from ..streams.spec import FIELDS as SPEC_FIELDS
from .rows import ENCODED, ENCODED_SCHEMAS, family_of

_S, _F, _I, _B = pa.string(), pa.float64(), pa.int64(), pa.bool_()
_CONFIG = pa.struct([(part, _S) for part in CONFIG_PARTS])
_RATER = pa.struct([(part, _S) for part in RATER_PARTS])
#: The common fields (``filled``: the fields an append filled, read and checked, never stored: docs/design.md,
#: Storage).
_COMMON = [("id", _S), ("type", _S), ("at", _S), ("v", _I), ("filled", pa.list_(_S))]
#: How Arrow's JSON reader reads each kind of field (pipeline.streams.spec); ``json`` (free keys) is left out.
_READ_AS: dict[str, pa.DataType] = {
    "string": _S,
    "double": _F,
    "bigint": _I,
    "boolean": _B,
    "strings": pa.list_(_S),
    "config": _CONFIG,
    "rater": _RATER,
}

#: The JSON fields of each known type as Arrow reads them, from the event spec (``labels`` and any other object
#: field are left out: a line with free keys goes the slow way).
FIELDS: dict[str, list[tuple[str, pa.DataType]]] = {
    t: [(f.name, _READ_AS[f.kind]) for f in fields if f.kind in _READ_AS] for t, fields in SPEC_FIELDS.items()
}
_SCHEMA = {t: pa.schema(_COMMON + f) for t, f in FIELDS.items()}


@dataclass(frozen=True)
class Rules:
    """What the fast path checks on the rows of one event type, read off the type's model (its JSON Schema), so
    that the vectorised checks and the per-line parser have one source: the models in ``pipeline.streams.events``."""

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
#: Per type, its own fields that only have a default (see :func:`_parse_type`), and its schema without them.
_LEAN_DROPPED = {t: [f for f, _ in FIELDS[t] if f in _RULES[t].defaulted] for t in FIELDS}
_LEAN_SCHEMA = {t: pa.schema([f for f in _SCHEMA[t] if f.name not in dropped]) for t, dropped in _LEAN_DROPPED.items()}
_RATER_KINDS = ["gate", "reviewer", "human"]
_CANONICAL_AT = (
    r"^([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
    r"(\.[0-9]{1,6})?Z$"
)
_TYPE_KEY = b'"type"'
_KEY_MASK = np.frombuffer(b"\xff" * len(_TYPE_KEY) + b"\0" * (8 - len(_TYPE_KEY)), "<u8")[0]
_TYPE_WORD = np.frombuffer(_TYPE_KEY.ljust(8, b"\0"), "<u8")[0] & _KEY_MASK  # the key in the low bytes of a word
_TYPE_SAMPLE = 16  # lines of a chunk whose key position is tried on every line
#: The known types in a fixed order (:func:`event_types` gives indices into it), and their byte patterns.
TYPES = list(FIELDS)
_TYPE_WORDS = 2  # 8-byte words compared: 16 bytes of the name and its quote tell the known types apart
_MIN_BISECT = 16  # a failed block this small goes line by line
_GIVE_UP = 4096  # a failed block at least this big whose halves both fail goes line by line


def lines_array(block: bytes, starts: np.ndarray) -> pa.LargeBinaryArray:
    """Line ``i`` of ``block`` is ``block[starts[i]:starts[i+1]]`` (with its newline), without copying."""
    return pa.Array.from_buffers(
        pa.large_binary(), len(starts) - 1, [None, pa.py_buffer(starts.astype(np.int64)), pa.py_buffer(block)]
    )


def event_types(lines: pa.LargeBinaryArray) -> np.ndarray:
    """The index in :data:`TYPES` of each line's type, read after the first ``"type"`` of the line, a colon and
    a quote, with any JSON whitespace around the colon (``"type":"`` as ``append`` writes it, ``"type": "`` as
    ``json.dumps`` does); -1 when there is none or it names no type of :data:`FIELDS`.

    Only a guess that routes a line to the reading of one type: every row the fast path takes is checked to
    carry that type, so a wrong guess (a nested ``type`` first, the word ``"type"`` as a value before the key)
    sends the line to the per-line parser. No regex and no search in the common case: the key is looked for
    where the first lines of the chunk have it (after an id of one length, in any order of keys), as 8-byte
    words; only the other lines are searched."""
    n = len(lines)
    out = np.full(n, -1, np.int8)
    data = lines.buffers()[2]
    if n == 0 or data is None or data.size < 16:
        return out
    starts = np.frombuffer(lines.buffers()[1], np.int64, n + 1, lines.offset * 8)
    words = np.ndarray(shape=(data.size - 7,), dtype="<u8", buffer=data, strides=(1,))  # a word at every byte
    last = len(words) - 1
    head = bytes(data[int(starts[0]) : int(starts[min(n, _TYPE_SAMPLE)])]).split(b"\n")
    guesses = Counter(line.find(_TYPE_KEY) for line in head) + Counter({1: 0})  # 1: a line without an id
    begin, end = starts[:-1], starts[1:]
    key = np.full(n, -1, np.int64)
    rest = np.arange(n)
    for guess, _ in guesses.most_common():
        if guess < 0 or not len(rest):
            continue
        at = begin[rest] + guess
        hit = (at + 8 <= end[rest]) & ((words[np.minimum(at, last)] & _KEY_MASK) == _TYPE_WORD)
        key[rest[hit]] = at[hit]
        rest = rest[~hit]
    if len(rest):
        where = np.asarray(pc.find_substring(lines.take(pa.array(rest)), _TYPE_KEY.decode()), np.int64)
        found = where >= 0
        key[rest[found]] = begin[rest[found]] + where[found]
    known = np.flatnonzero(key >= 0)
    value = _value_start(np.frombuffer(data, np.uint8), key[known] + len(_TYPE_KEY), end[known])
    opened = value >= 0
    known, value = known[opened], value[opened]
    read = [words[np.minimum(value + 8 * k, last)] for k in range(_TYPE_WORDS)]
    for code, patterns in enumerate(_TYPE_PATTERNS):
        match = np.ones(len(known), bool)
        for word, (mask, pattern) in zip(read, patterns, strict=True):
            match &= (word & mask) == pattern
        out[known[match]] = code
    return out


_JSON_SPACE = np.zeros(256, bool)
_JSON_SPACE[[0x20, 0x09, 0x0D, 0x0A]] = True  # JSON's whitespace: space, tab, CR, LF
_MAX_SPACE = 4  # a run of whitespace beside the colon this long is read; a longer one goes to the parser


def _value_start(data: np.ndarray, at: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per position just after a key: where its string value begins (after whitespace, ``:``, whitespace and
    the opening quote), or -1 when what follows is not that (the key was a value, or more whitespace)."""
    last = len(data) - 1

    def skip_space(at: np.ndarray) -> np.ndarray:
        for _ in range(_MAX_SPACE):
            at = at + _JSON_SPACE[data[np.minimum(at, last)]]
        return at

    at = skip_space(at)
    ok = (at < end) & (data[np.minimum(at, last)] == ord(":"))
    at = skip_space(at + 1)
    ok &= (at < end) & (data[np.minimum(at, last)] == ord('"'))
    return np.where(ok, at + 1, -1)


def _not_utf8(lines: pa.LargeBinaryArray) -> np.ndarray:
    """Which lines are not valid UTF-8: one validation of the chunk, line by line only when it fails."""
    try:
        lines.cast(pa.large_string())
        return np.zeros(len(lines), bool)
    except pa.ArrowInvalid:
        pass
    bad = np.zeros(len(lines), bool)
    for i, line in enumerate(lines.to_pylist()):
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            bad[i] = True
    return bad


def _type_patterns(name: str) -> list[tuple[np.uint64, np.uint64]]:
    """(mask, value) of each 8-byte word of ``<name>"``: the bytes a line shows after ``"type":"``."""
    text = (name + '"').encode().ljust(8 * _TYPE_WORDS, b"\0")
    length = len(name) + 1
    out = []
    for k in range(_TYPE_WORDS):
        used = max(0, min(8, length - 8 * k))
        mask = np.frombuffer(bytes([255] * used + [0] * (8 - used)), "<u8")[0]
        out.append((mask, np.frombuffer(text[8 * k : 8 * k + 8], "<u8")[0] & mask))
    return out


_TYPE_PATTERNS = [_type_patterns(t) for t in TYPES]


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
            end = int(self.starts[-1])  # the block may go on past its last line
            at = self.block.find(needle, 0, end)
            while at >= 0:
                hits.append(at)
                at = self.block.find(needle, at + 1, end)
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
        self.filled: dict[str, set[str]] = {}  # per type, the fields with a default some row gave a value


def parse_fast(
    lines: pa.LargeBinaryArray,
    candidate: np.ndarray,
    id_prefix: str,
    offsets: np.ndarray,
    block: bytes,
    lean: dict[str, bool] | None = None,
) -> FastResult:
    """Validate the ``candidate`` lines (indices into ``lines``, whose bytes are ``block``); ``offsets`` are their
    stream byte offsets and an id-less line gets the id ``<id_prefix>@<offset>``.

    ``lean`` remembers, per type, whether its last chunk was read without the fields that only have a default
    (see :func:`_parse_type`); a caller that parses many chunks passes one dict to all of them. It changes only
    the speed: the rows and the lines left are the same either way."""
    out = FastResult(KeySearch(block, lines))
    codes = event_types(lines)
    codes[_not_utf8(lines)] = -1  # Arrow's JSON reader takes any bytes in a string
    chosen = codes[candidate]
    for k, name in enumerate(TYPES):
        picked = candidate[chosen == k]
        if len(picked):
            _parse_type(name, lines, picked, id_prefix, offsets, out, {} if lean is None else lean)
    out.slow.append(candidate[chosen < 0])
    return out


def _parse_type(
    name: str,
    lines: pa.LargeBinaryArray,
    picked: np.ndarray,
    id_prefix: str,
    offsets: np.ndarray,
    out: FastResult,
    lean: dict[str, bool],
) -> None:
    """The lines of one type. A field that only has a default (``precision`` of a rating) is usually absent, and
    an explicit ``null`` of it is invalid, which Arrow cannot tell from absence: with the field in the schema,
    every chunk would search its bytes for the key. So, while the type's lines go without such fields, read
    them with a schema that leaves them out: Arrow then refuses any line that has one (an unexpected field),
    and all of them are known to be absent. When that read fails, read with the whole schema (as usual)."""
    dropped = _LEAN_DROPPED.get(name)
    if dropped and lean.get(name, True):
        read = _read(_LEAN_SCHEMA[name], lines, picked)
        if read is not None:
            table, raw = read
            for field in dropped:
                table = table.append_column(field, pa.nulls(table.num_rows, _SCHEMA[name].field(field).type))
            keys = out.keys

            def with_key(needle: bytes) -> np.ndarray:
                if needle.strip(b'"').decode() in dropped:
                    return np.zeros(len(picked), bool)  # Arrow refused any line with this key
                return keys.lines_with(needle)[picked]

            _take_rows(name, table, raw, picked, id_prefix, offsets, out, with_key)
            lean[name] = True
            return
        lean[name] = False
    _parse_group(name, lines, picked, id_prefix, offsets, out)
    if dropped:  # lean again once a chunk shows none of the fields: no values, no key (searched for the nulls)
        seen = out.keys.found
        lean[name] = not out.filled.get(name) and not any(
            seen[key][picked].any() for key in (f'"{field}"'.encode() for field in dropped) if key in seen
        )


def _parse_group(
    name: str, lines: pa.LargeBinaryArray, picked: np.ndarray, id_prefix: str, offsets: np.ndarray, out: FastResult
) -> None:
    read = _read(_SCHEMA[name], lines, picked)
    if read is None:
        if len(picked) <= _MIN_BISECT:
            out.slow.append(picked)
            return
        half = len(picked) // 2
        before = sum(len(s) for s in out.slow)
        _parse_group(name, lines, picked[:half], id_prefix, offsets, out)
        failed_first = sum(len(s) for s in out.slow) > before
        if failed_first and len(picked) >= _GIVE_UP and _read(_SCHEMA[name], lines, picked[half:]) is None:
            out.slow.append(picked[half:])
            return
        _parse_group(name, lines, picked[half:], id_prefix, offsets, out)
        return
    table, raw = read
    _take_rows(name, table, raw, picked, id_prefix, offsets, out, lambda needle: out.keys.lines_with(needle)[picked])


def _take_rows(
    name: str,
    table: pa.Table,
    raw: pa.LargeBinaryArray,
    picked: np.ndarray,
    id_prefix: str,
    offsets: np.ndarray,
    out: FastResult,
    with_key: Callable[[bytes], np.ndarray],
) -> None:
    """Check the rows Arrow read from the ``picked`` lines; take the good ones, leave the others to the parser."""
    ok, times = _row_checks(name, table, raw, with_key)
    filled = [f for f in _LEAN_DROPPED[name] if table[f].null_count < table.num_rows]
    if filled:
        out.filled.setdefault(name, set()).update(filled)
    if not ok.all():
        out.slow.append(picked[~ok])
        keep = pa.array(ok)
        table, times, picked = table.filter(keep), times.filter(keep), picked[ok]
    if len(picked):
        family = family_of(name)
        out.tables.setdefault(family, []).append(_to_family(family, table, times, picked, id_prefix, offsets))


def _read(schema: pa.Schema, lines: pa.LargeBinaryArray, picked: np.ndarray) -> tuple[pa.Table, pa.Array] | None:
    """Arrow's reading of the picked lines with an exact schema (and the lines), or None when it rejects any."""
    whole = len(picked) == len(lines) and picked[0] == 0 and picked[-1] == len(lines) - 1
    taken = lines if whole else lines.take(pa.array(picked))  # sorted and unique: all lines, in order
    offs = np.frombuffer(taken.buffers()[1], np.int64, len(taken) + 1, taken.offset * 8)
    data = taken.buffers()[2].slice(int(offs[0]), int(offs[-1] - offs[0]))
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
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
    ids = table["id"]
    if pc.any(pc.match_substring(ids, "@")).as_py():  # the reserved form has an '@'; most ids have none
        ok &= ~_all_valid(pc.match_substring_regex(ids, "^" + RESERVED_ID.pattern + "$"))
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
                part = child(table[struct], field)
                ok &= _all_valid(pc.greater(pc.utf8_length(part), 0))
    if "rater" in cols:
        ok &= _all_valid(pc.is_in(child(table["rater"], "kind"), value_set=pa.array(_RATER_KINDS)))
    flat = pc.list_flatten(table["filled"])
    if len(flat):  # the fields an append filled: each one of them, by name
        bad_items = pc.invert(pc.fill_null(pc.is_in(flat, value_set=pa.array(FILLABLE)), False))
        ok[pc.list_parent_indices(table["filled"]).to_numpy()[_all_valid(bad_items)]] = False
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


def child(struct: pa.Array | pa.ChunkedArray, field: str) -> pa.Array:
    """A field of a struct column (null where the struct is null). Without null structs (a required
    ``config``), the child array itself: ``struct_field`` would build a copy that merges the parent's nulls."""
    array = struct.combine_chunks() if isinstance(struct, pa.ChunkedArray) else struct
    return array.field(field) if array.null_count == 0 else pc.struct_field(array, field)


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


def config_keys(config: pa.Array) -> pa.DictionaryArray:
    """The config key of each row of a ``config`` struct column (no null configs), dictionary-encoded:
    :func:`pipeline.streams.events.config_key` (the one implementation) runs once per distinct config."""
    parts = [pc.dictionary_encode(child(config, f)) for f in CONFIG_PARTS]
    return _config_columns(parts)["config_key"]


def _config_columns(parts: list[pa.DictionaryArray]) -> dict[str, pa.Array]:
    """The four config parts (dictionary-encoded, nulls masked) and the config key of each row."""
    n = len(parts[0])
    combo = np.zeros(n, np.int64)
    span = 1
    for part in parts:
        size = len(part.dictionary) + 1  # one more for null
        if span * size >= 1 << 62:  # renumber the combinations seen so far to keep the product small
            _, combo = np.unique(combo, return_inverse=True)
            span = int(combo.max()) + 1 if n else 1
        codes = np.asarray(pc.fill_null(part.indices, size - 1).to_numpy(zero_copy_only=False), np.int64)
        combo = combo * size + codes
        span *= size
    if n and span <= (1 << 24):  # count, no sort
        present = np.flatnonzero(np.bincount(combo, minlength=span))
        index = np.zeros(span, np.int64)
        index[present] = np.arange(len(present))
        key_of_row = index[combo]
        first = np.zeros(len(present), np.int64)
        first[key_of_row] = np.arange(n)  # a row of each combination (any: they have the same parts)
    else:
        _, first, key_of_row = np.unique(combo, return_index=True, return_inverse=True)
    firsts = pa.array(first, pa.int64())
    keys = [config_key(*config) for config in zip(*(p.take(firsts).to_pylist() for p in parts), strict=True)]
    columns: dict[str, pa.Array] = dict(zip(CONFIG_PARTS, parts, strict=True))
    columns["config_key"] = pa.DictionaryArray.from_arrays(
        pa.array(np.asarray(key_of_row, np.int32)), pa.array(keys, pa.string())
    )
    return columns


def _with_default(column: pa.ChunkedArray | pa.Array, default: Any) -> pa.Array | pa.ChunkedArray:
    """Nulls replaced by the default; a column without nulls as it is, an all-null one (a field no line gave)
    built as the constant."""
    if not column.null_count:
        return column
    if column.null_count == len(column):
        return (
            pa.array(np.full(len(column), default), column.type)
            if pa.types.is_primitive(column.type)
            else (pa.repeat(pa.scalar(default, column.type), len(column)))
        )
    return pc.fill_null(column, default)


def _to_family(
    family: str, table: pa.Table, times: pa.Array, picked: np.ndarray, id_prefix: str, offsets: np.ndarray
) -> pa.Table:
    """The store rows of the checked rows of one type (all of it: ``type`` is one value), in the family's
    :data:`~pipeline.compact.rows.ENCODED_SCHEMAS`, with ``_line``."""
    n = table.num_rows
    ids = table["id"].combine_chunks()
    if ids.null_count:
        fallback = pa.array([f"{id_prefix}@{int(o)}" for o in offsets[picked]], _S)
        ids = pc.if_else(pc.is_null(ids), fallback, ids)
    columns: dict[str, pa.Array] = {
        "id": ids,
        "type": pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), table["type"].combine_chunks()[:1]),
        "at": times,
        "v": _with_default(table["v"], 1),
    }
    for field in FAMILY_FIELDS[family]:  # as the event spec says, like pipeline.compact.rows.event_row
        if field.kind == "config":
            config = table[field.name].combine_chunks()
            columns |= _config_columns([pc.dictionary_encode(child(config, part)) for part in CONFIG_PARTS])
        elif field.kind == "rater":
            rater = table[field.name].combine_chunks()
            columns |= {c: child(rater, part) for (c, _), part in zip(field.columns, RATER_PARTS, strict=True)}
        elif field.kind == "json":
            columns[field.column] = pa.nulls(n, _S)  # a line with an object field takes the slow path
        else:
            value = table[field.name]
            columns[field.column] = value if field.default is None else _with_default(value, field.default)
    columns["extra"] = pa.nulls(n, _S)
    schema = ENCODED_SCHEMAS[family]
    arrays = [_encoded(columns[f.name]) if f.type == ENCODED else pc.cast(columns[f.name], f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema).append_column("_line", pa.array(picked, pa.int64()))


def _encoded(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A string column dictionary-encoded (as it is when it already is)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column if pa.types.is_dictionary(column.type) else pc.dictionary_encode(column)
