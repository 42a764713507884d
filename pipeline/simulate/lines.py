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
            prompts=[',"prompt_version":' + _j(p) for p in sc.prompt_versions],
            human_tail=',"importance":' + repr(float(sc.ratings.human_importance)),
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
_OPENED = (
    '{"id":"%s.open","type":"task.opened","at":"%s","v":1,"task":"%s","region":%s,"title":"%s task %d","thread":%s}\n'
)
_ROUTE = (
    '{"id":"%s.%s","type":"route.decided","at":"%s","v":1,"task":"%s","policy":%s,"chosen":%s,'
    '"candidates":%s,"propensity":%s,"table":null,"explored":%s,"reason":"%s","predicted_quality":%s}\n'
)
#: A decision's id suffix and reason by its kind (Decisions.kind): the routed config, a side-by-side lane, an
#: escalation after every lane failed its gates.
_ROUTE_SUFFIX = ("route", "route2", "route3")
_REASONS = ("", "side-by-side lane: a uniformly chosen other config", "escalation after a failed gate")
_ATTEMPT = (
    '{"id":"%s.a%d","type":"task.attempted","at":"%s","v":1,"task":"%s","config":%s,"status":"%s",'
    '"cost_usd":%s,"duration_ms":%d,"node":%s%s%s,"tool_calls":%d,"files_read":%d,"files_written":%d}\n'
)
_CLOSED = '{"id":"%s.close","type":"task.closed","at":"%s","v":1,"task":"%s","outcome":"%s"}\n'
_RATED = (
    '{"id":"%s.a%d.%s","type":"task.rated","at":"%s","v":1,"task":"%s","config":%s,"rater":%s,'
    '"score":%s,"confidence":%s%s}\n'
)
_REJECTED = (
    '{"id":"%s.a%d.rj","type":"task.rejected","at":"%s","v":1,"task":"%s","config":%s,"rater":%s,'
    '"claim":%s,"evidence":%s}\n'
)
_RETRACTED = (
    '{"id":"%s.a%d.rx","type":"rating.retracted","at":"%s","v":1,"rating":"%s.a%d.rv",'
    '"reason":"the reviewer corrected its score"}\n'
)
_VERDICTS = (',"reviewer_verdict":"approve"', ',"reviewer_verdict":"request-changes"')


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
    ordinal = range(ch.first + 1, ch.first + ch.n + 1)
    region = ch.region.tolist()

    at = timestamps(ch.open_s)
    opened = [
        _OPENED % (t, a, t, fr.regions[r], fr.regions[r][1:-1], i, fr.thread)
        for t, a, r, i in zip(tid, at, region, ordinal, strict=True)
    ]

    d = ch.decisions
    at = timestamps(d.at)
    candidates = {mask: fr.candidates_without(mask) for mask in set(d.excluded.tolist())}
    routed = [
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
        for t, a, c, p, e, kind, mask in zip(
            d.task.tolist(),
            at,
            d.cfg.tolist(),
            d.propensity.tolist(),
            d.explored.tolist(),
            d.kind.tolist(),
            d.excluded.tolist(),
            strict=True,
        )
    ]

    att = ch.attempts
    at = timestamps(att.end_s)
    a_tid = [tid[i] for i in att.task.tolist()]
    slot = (att.slot + 1).tolist()
    cfg = att.cfg.tolist()
    status = ["success" if s < 0 else FAILURE_STATUSES[s] for s in att.status.tolist()]
    cost = ["null" if math.isnan(v) else repr(v) for v in att.cost.tolist()]
    node = [fr.nodes[region[i]] for i in att.task.tolist()]
    prompt = ["" if p < 0 else fr.prompts[p] for p in att.prompt.tolist()]
    verdict = ["" if v < 0 else _VERDICTS[v] for v in att.verdict.tolist()]
    attempted = [
        _ATTEMPT % row
        for row in zip(
            a_tid,
            slot,
            at,
            a_tid,
            (fr.configs[c] for c in cfg),
            status,
            cost,
            att.duration_ms.tolist(),
            node,
            prompt,
            verdict,
            att.tools.tolist(),
            att.read.tolist(),
            att.written.tolist(),
            strict=True,
        )
    ]

    at = timestamps(ch.close_s)
    closed = [
        _CLOSED % (t, a, t, "done" if o == 0 else UNDONE_OUTCOMES[o - 1])
        for t, a, o in zip(tid, at, ch.outcome.tolist(), strict=True)
    ]

    tasks = _ordered(
        [
            ("task.opened", opened, ch.open_s),
            ("route.decided", routed, d.at),
            ("task.attempted", attempted, att.end_s),
            ("task.closed", closed, ch.close_s),
        ]
    )

    parts: list[tuple[str, list[str], np.ndarray]] = []
    by_kind = {"gate": 0, "reviewer": 0, "human": 0}

    def rated(
        rows: np.ndarray,
        suffix: str | list[str],
        raters: list[str],
        score: np.ndarray,
        conf: list[str],
        at_s: np.ndarray,
        tail: str = "",
    ) -> list[str]:
        ai = rows.tolist()
        suffixes = suffix if isinstance(suffix, list) else [suffix] * len(ai)
        return [
            _RATED % (a_tid[i], slot[i], sfx, a, a_tid[i], fr.configs[cfg[i]], rater, s, c, tail)
            for i, sfx, a, rater, s, c in zip(ai, suffixes, timestamps(at_s), raters, _floats(score), conf, strict=True)
        ]

    for g, (on, score, conf, at_s) in enumerate(att.gates):
        lines = rated(on, f"g{g + 1}", [fr.gates[g]] * len(on), score, _floats(conf), at_s)
        parts.append(("task.rated", lines, at_s))
        by_kind["gate"] += len(lines)

    on, who, score, conf, at_s, retracted, retract_at = att.review
    raters = [fr.reviewers[w] for w in who.tolist()]
    # A retracted rating was logged with the wrong score (1 - s); its correction, a minute after the retraction, has s.
    logged = np.where(retracted, np.round(1.0 - score, 2), score)
    lines = rated(on, "rv", raters, logged, _floats(conf), at_s)
    parts.append(("task.rated", lines, at_s))
    x = np.nonzero(retracted)[0]
    fix_at = retract_at[x] + 60
    fixes = rated(on[x], "rv2", [raters[i] for i in x.tolist()], score[x], _floats(conf[x]), fix_at)
    parts.append(("task.rated", fixes, fix_at))
    by_kind["reviewer"] += len(lines) + len(fixes)
    retractions = [
        _RETRACTED % (a_tid[i], slot[i], a, a_tid[i], slot[i])
        for i, a in zip(on[x].tolist(), timestamps(retract_at[x]), strict=True)
    ]
    parts.append(("rating.retracted", retractions, retract_at[x]))

    on, who, score, at_s = att.human
    lines = rated(on, "h", [fr.humans[w] for w in who.tolist()], score, ["1.0"] * len(on), at_s, fr.human_tail)
    parts.append(("task.rated", lines, at_s))
    by_kind["human"] += len(lines)

    on, who, at_s = att.reject
    rejections = []
    for i, w, a in zip(on.tolist(), who.tolist(), timestamps(at_s), strict=True):
        claim, evidence = REJECTION_CLAIMS[i % len(REJECTION_CLAIMS)]
        rejections.append(
            _REJECTED
            % (
                a_tid[i],
                slot[i],
                a,
                a_tid[i],
                fr.configs[cfg[i]],
                fr.reviewers[w],
                _j(claim),
                _j([evidence.format(task=a_tid[i])]),
            )
        )
    parts.append(("task.rejected", rejections, at_s))

    return tasks, _ordered(parts), by_kind


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
