"""Format a chunk as v1 event lines, fast: format strings over lists, not a pydantic model per event.

Each line is exactly what :func:`pipeline.streams.events.to_json_line` writes for the
event it parses to (field order, compact separators, ``repr`` floats), which a
test checks line by line on the default data and on a sample of the scale
preset. Event ids are ``<task>.<suffix>``, deterministic and readable:
``.open``, ``.route`` (``.route2`` a side-by-side lane, ``.route3`` an escalation), ``.a1`` (first attempt,
``.a2`` the second lane or opinion, ``.a3`` the escalation or third opinion), ``.a1.g1`` (its first gate),
``.a1.rv`` (reviewer), ``.a1.rx`` (a retraction of it), ``.a1.rv2`` (the
correction), ``.a1.h`` (human), ``.a1.rj`` (rejection), ``.close``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..streams.events import SCHEMA_VERSION
from ..streams.spec import template_fields
from .generate import FAILURE_STATUSES, UNDONE_OUTCOMES, Chunk, Static


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass
class Fragments:
    """JSON text that does not change between events, rendered once."""

    task_id_format: str
    regions: list[str]
    configs: list[str]
    keys: list[str]
    candidates: str
    policy: str
    thread: str
    nodes: list[str]
    believed: list[list[str]]
    gates: list[str]
    reviewers: list[str]
    humans: list[str]
    prompts: list[str]
    human_tail: str
    config_keys: list[str]

    def candidates_without(self, mask: int) -> str:
        """The candidates of a decision: every config but those whose bit is set in ``mask``."""
        return self.candidates if mask == 0 else _j([k for i, k in enumerate(self.config_keys) if not mask >> i & 1])

    @classmethod
    def of(cls, st: Static, task_id_format: str) -> Fragments:
        sc = st.scenario
        return cls(
            task_id_format=task_id_format,
            regions=[_j(r) for r in sc.region_names],
            configs=[_j(c.event_config()) for c in sc.configs],
            keys=[_j(k) for k in sc.config_keys],
            candidates=_j(sc.config_keys),
            policy=_j(sc.policy.name),
            thread=_j(sc.thread),
            nodes=[_j(r.node) for r in sc.regions],
            believed=[[repr(round(float(q), 9)) for q in row] for row in st.believed],
            gates=[_j({"kind": "gate", "name": g.name}) for g in sc.gates],
            reviewers=[_j({"kind": "reviewer", "name": r.name}) for r in sc.reviewers],
            humans=[_j({"kind": "human", "name": h}) for h in sc.humans],
            prompts=[present("task.attempted", "prompt_version", _j(p)) for p in sc.prompt_versions],
            human_tail=present("task.rated", "importance", repr(float(sc.ratings.human_importance))),
            config_keys=sc.config_keys,
        )


def timestamps(seconds: np.ndarray) -> list[str]:
    """RFC 3339 UTC with ``Z`` at second precision, vectorised."""
    text = np.datetime_as_string(seconds.astype("datetime64[s]"), unit="s")
    return [t + "Z" for t in text.tolist()]


def _floats(values: np.ndarray) -> list[str]:
    return [repr(v) for v in values.astype(float).tolist()]


REJECTION_CLAIMS = [
    ("the tests it reports as passing fail on a clean checkout", "pytest exit status 1 on {task}"),
    ("the change does not do what the task asks", "diff of {task} touches none of the files named in the task"),
    ("it cites a file that does not exist", "git ls-files has no match for the path cited in {task}"),
]


class _Sometimes(str):
    """A field written on some lines only: its slot (``%s``) takes ``,"name":value`` (:func:`present`) or
    nothing."""


SOMETIMES = _Sometimes("%s")
_Q = '"%s"'  # a string field whose text is formatted in (plain text, in quotes)


def template(event_type: str, texts: str = "", **formats: str) -> str:
    """The %-format of one line of ``event_type``, built from the event spec: ``at`` and (where the type has one)
    ``task`` as plain text between quotes, each field named in ``texts`` (space-separated) as its JSON text
    (``%s``), and each of ``formats`` (``id`` among them) as given: a format, or :data:`SOMETIMES`; ``type`` and
    ``v`` fixed.
    The fields come in the order :func:`pipeline.streams.events.to_json_line` writes them. A name the spec does not
    know is an error, so a renamed field cannot be written under its old name."""
    order = template_fields(event_type)
    plain: dict[str, str] = {name: _Q for name in ("at", "task") if name in order}
    values: dict[str, str] = {**plain, **dict.fromkeys(texts.split(), "%s"), **formats}
    unknown = sorted(set(values) - set(order) - {"type", "v"})
    if unknown:
        raise ValueError(f"{event_type} has no field {', '.join(unknown)} (pipeline.streams.events)")
    fixed = {"type": _j(event_type), "v": str(SCHEMA_VERSION)}
    parts: list[str] = []
    for name in order:
        value = fixed.get(name, values.get(name))
        if value is None:
            continue
        parts.append(value if isinstance(value, _Sometimes) else f'{"," if parts else ""}"{name}":{value}')
    return "{" + "".join(parts) + "}\n"


def present(event_type: str, name: str, text: str) -> str:
    """What a :data:`SOMETIMES` slot takes when the field is written: ``,"name":text``."""
    if name not in template_fields(event_type):
        raise ValueError(f"{event_type} has no field {name} (pipeline.streams.events)")
    return f',"{name}":{text}'


_OPENED = template("task.opened", "region thread", id='"%s.open"', title='"%s task %d"')
_ROUTE = template(
    "route.decided",
    "policy chosen candidates propensity explored predicted_quality",
    id='"%s.%s"',
    table="null",
    reason=_Q,
)
_ATTEMPT = template(
    "task.attempted",
    "config cost_usd duration_ms node tool_calls files_read files_written",
    id='"%s.a%d"',
    status=_Q,
    prompt_version=SOMETIMES,
    reviewer_verdict=SOMETIMES,
)
_CLOSED = template("task.closed", id='"%s.close"', outcome=_Q)
_RATED = template("task.rated", "config rater score confidence", id='"%s.a%d.%s"', importance=SOMETIMES)
_REJECTED = template("task.rejected", "config rater claim evidence", id='"%s.a%d.rj"')
_RETRACTED = template(
    "rating.retracted", id='"%s.a%d.rx"', rating='"%s.a%d.rv"', reason=_j("the reviewer corrected its score")
)
_VERDICTS = tuple(present("task.attempted", "reviewer_verdict", _j(v)) for v in ("approve", "request-changes"))
#: A decision's id suffix and reason by its kind (generate.Decisions.kind): the routed config, a side-by-side lane,
#: an escalation after every lane failed its gates.
_ROUTE_SUFFIX = ("route", "route2", "route3")
_REASONS = ("", "side-by-side lane: a uniformly chosen other config", "escalation after a failed gate")


@dataclass
class StreamPart:
    """Lines of one stream for one chunk, in time order."""

    lines: list[str]
    counts: dict[str, int]


def _ordered(parts: list[tuple[str, list[str], np.ndarray]]) -> StreamPart:
    """Merge (type, lines, at seconds) parts and sort by time; equal times keep part then row order."""
    lines = [line for _, ls, _ in parts for line in ls]
    at = np.concatenate([a for _, _, a in parts]) if parts else np.zeros(0, dtype=np.int64)
    order = np.argsort(at, kind="stable")
    counts: dict[str, int] = {}
    for kind, ls, _ in parts:
        counts[kind] = counts.get(kind, 0) + len(ls)
    return StreamPart([lines[i] for i in order.tolist()], counts)


def format_chunk(ch: Chunk, fr: Fragments) -> tuple[StreamPart, StreamPart, dict[str, int]]:
    """The chunk's ``tasks`` and ``ratings`` lines, and its ``task.rated`` counts per rater kind."""
    tid = [fr.task_id_format.format(i + 1) for i in range(ch.first, ch.first + ch.n)]
    attempts = _AttemptIds(
        [tid[i] for i in ch.attempts.task.tolist()], (ch.attempts.slot + 1).tolist(), ch.attempts.cfg.tolist()
    )
    tasks = _ordered(
        [
            ("task.opened", _opened(ch, fr, tid), ch.open_s),
            ("route.decided", _routed(ch, fr, tid), ch.decisions.at),
            ("task.attempted", _attempted(ch, fr, attempts), ch.attempts.end_s),
            ("task.closed", _closed(ch, tid), ch.close_s),
        ]
    )
    ratings = _Ratings(fr, attempts)
    for g, (att, score, conf, at_s) in enumerate(ch.ratings.gates):
        ratings.rated("gate", att, f"g{g + 1}", [fr.gates[g]] * len(att), score, _floats(conf), at_s)
    _reviews(ch, fr, ratings)
    att, who, score, at_s = ch.ratings.human
    humans = [fr.humans[w] for w in who.tolist()]
    ratings.rated("human", att, "h", humans, score, ["1.0"] * len(att), at_s, fr.human_tail)
    ratings.parts.append(("task.rejected", _rejections(ch, fr, attempts), ch.ratings.reject[2]))
    return tasks, _ordered(ratings.parts), ratings.by_kind


@dataclass(frozen=True)
class _AttemptIds:
    """Who each attempt of a chunk is: its task id, its slot (1-based) and its config index."""

    task: list[str]
    slot: list[int]
    cfg: list[int]


def _opened(ch: Chunk, fr: Fragments, tid: list[str]) -> list[str]:
    ordinal = range(ch.first + 1, ch.first + ch.n + 1)
    return [
        _OPENED % (t, a, t, fr.regions[r], fr.regions[r][1:-1], i, fr.thread)
        for t, a, r, i in zip(tid, timestamps(ch.open_s), ch.region.tolist(), ordinal, strict=True)
    ]


def _routed(ch: Chunk, fr: Fragments, tid: list[str]) -> list[str]:
    d, region = ch.decisions, ch.region.tolist()
    candidates = {mask: fr.candidates_without(mask) for mask in set(d.excluded.tolist())}
    rows = zip(
        d.task.tolist(),
        timestamps(d.at),
        d.cfg.tolist(),
        d.propensity.tolist(),
        d.explored.tolist(),
        d.kind.tolist(),
        d.excluded.tolist(),
        strict=True,
    )
    return [
        _ROUTE
        % (
            tid[t],
            _ROUTE_SUFFIX[kind],
            a,
            tid[t],
            fr.policy,
            fr.keys[c],
            candidates[mask],
            repr(round(p, 9)),
            "true" if e else "false",
            _REASONS[kind] if kind else ("exploration" if e else "greedy on shipped priors"),
            fr.believed[c][region[t]],
        )
        for t, a, c, p, e, kind, mask in rows
    ]


def _attempted(ch: Chunk, fr: Fragments, attempts: _AttemptIds) -> list[str]:
    region = ch.region.tolist()
    rows = zip(
        attempts.task,
        attempts.slot,
        timestamps(ch.attempts.end_s),
        attempts.task,
        (fr.configs[c] for c in attempts.cfg),
        ("success" if s < 0 else FAILURE_STATUSES[s] for s in ch.attempts.status.tolist()),
        ("null" if math.isnan(v) else repr(v) for v in ch.attempts.cost.tolist()),
        ch.attempts.duration_ms.tolist(),
        (fr.nodes[region[i]] for i in ch.attempts.task.tolist()),
        ("" if p < 0 else fr.prompts[p] for p in ch.attempts.prompt.tolist()),
        ("" if v < 0 else _VERDICTS[v] for v in ch.ratings.verdict.tolist()),
        ch.attempts.tools.tolist(),
        ch.attempts.read.tolist(),
        ch.attempts.written.tolist(),
        strict=True,
    )
    return [_ATTEMPT % row for row in rows]


def _closed(ch: Chunk, tid: list[str]) -> list[str]:
    return [
        _CLOSED % (t, a, t, "done" if o == 0 else UNDONE_OUTCOMES[o - 1])
        for t, a, o in zip(tid, timestamps(ch.close_s), ch.outcome.tolist(), strict=True)
    ]


class _Ratings:
    """The ``ratings`` stream's parts of a chunk as they are written, and the ratings per rater kind."""

    def __init__(self, fr: Fragments, attempts: _AttemptIds) -> None:
        self.fr, self.attempts = fr, attempts
        self.parts: list[tuple[str, list[str], np.ndarray]] = []
        self.by_kind = {"gate": 0, "reviewer": 0, "human": 0}

    def rated(
        self,
        kind: str,
        att: np.ndarray,
        suffix: str,
        raters: list[str],
        score: np.ndarray,
        conf: list[str],
        at_s: np.ndarray,
        tail: str = "",
    ) -> None:
        """``task.rated`` lines of the attempts ``att`` (ids ``<task>.a<slot>.<suffix>``), one part."""
        a = self.attempts
        lines = [
            _RATED % (a.task[i], a.slot[i], suffix, at, a.task[i], self.fr.configs[a.cfg[i]], rater, s, c, tail)
            for i, at, rater, s, c in zip(att.tolist(), timestamps(at_s), raters, _floats(score), conf, strict=True)
        ]
        self.parts.append(("task.rated", lines, at_s))
        self.by_kind[kind] += len(lines)


def _reviews(ch: Chunk, fr: Fragments, ratings: _Ratings) -> None:
    """The reviewers' ratings; a retracted rating was logged with the wrong score (1 - s), its retraction
    follows, and its correction, a minute after the retraction, has s."""
    att, who, score, conf, at_s, retracted, retract_at = ch.ratings.review
    raters = [fr.reviewers[w] for w in who.tolist()]
    ratings.rated(
        "reviewer", att, "rv", raters, np.where(retracted, np.round(1.0 - score, 2), score), _floats(conf), at_s
    )
    x = np.nonzero(retracted)[0]
    fixed = [raters[i] for i in x.tolist()]
    ratings.rated("reviewer", att[x], "rv2", fixed, score[x], _floats(conf[x]), retract_at[x] + 60)
    a = ratings.attempts
    retractions = [
        _RETRACTED % (a.task[i], a.slot[i], at, a.task[i], a.slot[i])
        for i, at in zip(att[x].tolist(), timestamps(retract_at[x]), strict=True)
    ]
    ratings.parts.append(("rating.retracted", retractions, retract_at[x]))


def _rejections(ch: Chunk, fr: Fragments, attempts: _AttemptIds) -> list[str]:
    att, who, at_s = ch.ratings.reject
    lines = []
    for i, w, at in zip(att.tolist(), who.tolist(), timestamps(at_s), strict=True):
        claim, evidence = REJECTION_CLAIMS[i % len(REJECTION_CLAIMS)]
        task, slot, cfg = attempts.task[i], attempts.slot[i], attempts.cfg[i]
        row = (task, slot, at, task, fr.configs[cfg], fr.reviewers[w], _j(claim), _j([evidence.format(task=task)]))
        lines.append(_REJECTED % row)
    return lines


def assignment_rows(ch: Chunk) -> list[str]:
    """``[region, [configs, routed first], [outcomes], [slots]]`` per task, compact JSON; a slot is the attempt's
    number on its task less one (0 routed; 1 a side-by-side lane or second opinion; 2 an escalation or third
    opinion)."""
    rows: list[list[int]] = [[] for _ in range(ch.n)]
    outs: list[list[int]] = [[] for _ in range(ch.n)]
    slots: list[list[int]] = [[] for _ in range(ch.n)]
    att = ch.attempts
    for t, c, s, j in zip(
        att.task.tolist(), att.cfg.tolist(), att.success.astype(int).tolist(), att.slot.tolist(), strict=True
    ):
        rows[t].append(c)
        outs[t].append(s)
        slots[t].append(j)
    return [
        f"[{r},[{','.join(map(str, c))}],[{','.join(map(str, o))}],[{','.join(map(str, j))}]]"
        for r, c, o, j in zip(ch.region.tolist(), rows, outs, slots, strict=True)
    ]
