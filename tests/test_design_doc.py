"""The project documents itself: every pointer into ``docs/design.md`` names a section that exists.

Code, tests, benchmarks and the README point at the design document as ``docs/design.md, <Name>`` (the name of a
heading, compared case-insensitively) or ``docs/design.md#<anchor>`` (a heading's GitHub anchor). A name runs from
the comma to the first ``)``, ``]``, ``:``, ``;``, ``,``, ``.``, quote or backtick, or to the end of its line; it
may start on the next line (a wrapped comment or docstring). A pointer to a missing section fails, naming the file
and the line. The project never cites the brief it was built from; the code points at its own document instead.
The SQL the document gives an operator is run against a fitted store and must give the table's numbers.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from pathlib import Path

import pytest

from pipeline.routing.table import RoutingTable

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "design.md"
#: Where pointers into the design document live.
SCANNED = ("pipeline", "bench", "tests", "README.md")
#: The top-level sections other code points at; their names are part of the document's contract.
SECTIONS = (
    "The loop",
    "Layout",
    "Events",
    "Streams",
    "Imports",
    "Storage",
    "Fit",
    "Evidence gate",
    "Escalation",
    "Ladders",
    "Signals",
    "Evaluation",
    "Verdicts",
    "Backtest",
    "Routing",
    "Routing table",
    "Case studies",
    "Commands",
)

#: ``docs/design.md, <Name>``: the name may begin on the next line, after a comment's ``#``.
NAMED = re.compile(r"docs/design\.md,[ \t]*(?:\n[ \t]*(?:#[ \t]*)?)?([A-Za-z][^\n)\]:;,.\"'`]*)")
#: ``docs/design.md#<anchor>``.
ANCHORED = re.compile(r"docs/design\.md#([A-Za-z0-9_-]+)")
#: A citation of the brief by section number, or of its file. Written so that this file does not match itself.
BRIEF = re.compile(r"DESIGN(?:\.md)?[ \t]*,?[ \t]*(?:section[ \t]*|§[ \t]*)?[0-9]|shared/DESIG[N]")


def headings(text: str) -> list[tuple[int, str]]:
    """(level, name) of every Markdown heading outside fenced code blocks, in order."""
    out = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#{1,6})[ \t]+(.+?)[ \t#]*$", line)):
            out.append((len(match.group(1)), match.group(2).strip()))
    return out


def anchor(name: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", name.lower()).replace(" ", "-")


def anchors(names: list[str]) -> set[str]:
    """Every anchor of the headings, with GitHub's ``-1``, ``-2`` suffixes for repeated ones."""
    seen: dict[str, int] = {}
    out = set()
    for name in names:
        base = anchor(name)
        count = seen.get(base, 0)
        out.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return out


def references(text: str) -> list[tuple[int, str, str]]:
    """(line, kind, target) of every pointer into the design document: kind ``name`` or ``anchor``."""
    found = [(m.start(), "name", m.group(1).strip()) for m in NAMED.finditer(text)]
    found += [(m.start(), "anchor", m.group(1)) for m in ANCHORED.finditer(text)]
    return sorted((text.count("\n", 0, start) + 1, kind, target) for start, kind, target in found)


def scanned_files() -> list[Path]:
    """The text files under :data:`SCANNED` (caches and binary files left out)."""
    files = []
    for entry in SCANNED:
        path = ROOT / entry
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in candidates:
            if any(part in ("__pycache__", ".hypothesis", ".pytest_cache") for part in file.parts):
                continue
            data = file.read_bytes()
            if b"\0" not in data[:8192]:
                files.append(file)
    return files


def text_of(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def broken_references(files: list[Path], names: list[str], *, root: Path = ROOT) -> list[str]:
    """``file:line: docs/design.md, <target>: ...`` for every pointer whose section does not exist (files named
    relative to ``root``)."""
    known_names = {n.casefold() for n in names}
    known_anchors = anchors(names)
    broken = []
    for path in files:
        for line, kind, target in references(text_of(path)):
            ok = target.casefold() in known_names if kind == "name" else target in known_anchors
            if not ok:
                shown = f"docs/design.md, {target}" if kind == "name" else f"docs/design.md#{target}"
                broken.append(f"{path.relative_to(root)}:{line}: {shown}: no such heading in docs/design.md")
    return broken


def test_the_document_has_the_sections_other_code_points_at() -> None:
    top = [name for level, name in headings(text_of(DOC)) if level == 2]
    assert top == list(SECTIONS)


def test_every_reference_names_a_heading_of_the_document() -> None:
    names = [name for _, name in headings(text_of(DOC))]
    files = scanned_files()
    assert sum(len(references(text_of(p))) for p in files) > 10  # the scan finds the pointers the code has
    broken = broken_references(files, names)
    assert not broken, "\n".join(broken)


def test_a_reference_to_a_missing_section_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    names = [name for _, name in headings(text_of(DOC))]
    ref = "docs/design.md"  # pieced together, so that this file holds no pointer of its own to a missing section
    source = tmp_path / "module.py"
    source.write_text(
        f'"""Quality per member ({ref}, Fit).\n\n'
        f"Wrapped ({ref},\n    Evidence gate), a section that moved ({ref}, The fit), an anchor\n"
        f"({ref}#storage) and a bad one ({ref}#nowhere).\n"
        '"""\n'
        f"# the gate's lower bound ({ref},\n# Verdicts: how much data is enough)\n",
        encoding="utf-8",
    )
    found = references(source.read_text(encoding="utf-8"))
    assert [(line, target) for line, _, target in found] == [
        (1, "Fit"),
        (3, "Evidence gate"),
        (4, "The fit"),
        (5, "nowhere"),
        (5, "storage"),
        (7, "Verdicts"),
    ]
    assert broken_references([source], names, root=tmp_path) == [
        f"module.py:4: {ref}, The fit: no such heading in docs/design.md",
        f"module.py:5: {ref}#nowhere: no such heading in docs/design.md",
    ]


def test_names_are_matched_case_insensitively_and_anchors_like_github() -> None:
    names = [name for _, name in headings(text_of(DOC))]
    assert {"routing table", "the loop"} <= {n.casefold() for n in names}
    assert {"routing-table", "the-loop", "evidence-gate", "case-studies"} <= anchors(names)
    assert anchors(["Storage", "Storage", "A, b: c"]) == {"storage", "storage-1", "a-b-c"}


def test_the_document_never_cites_the_brief() -> None:
    text = text_of(DOC)
    assert not BRIEF.search(text)
    assert "shared/" not in text


def sql_blocks(section: str) -> list[str]:
    """The ```sql blocks of the document's (sub)section named ``section`` (up to the next heading of any level)."""
    text = text_of(DOC)
    start = re.search(rf"^#+ {re.escape(section)}$", text, flags=re.MULTILINE)
    assert start is not None, section
    end = re.search(r"^#", text[start.end() :], flags=re.MULTILINE)
    body = text[start.end() : start.end() + end.start()] if end else text[start.end() :]
    return re.findall(r"^```sql\n(.*?)^```", body, flags=re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def recomputable(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RoutingTable]:
    """A simulated backlog (rejections and a retraction included) fitted as the document's SQL assumes: no PRM
    fill-ins, no recency weighting."""
    from pipeline.nightly.job import run_fit
    from pipeline.nightly.options import FitOptions
    from pipeline.simulate import preset, simulate

    home = tmp_path_factory.mktemp("design") / "home"
    simulate(home, preset("backlog", tasks=300), seed=5)  # a seed whose 300 tasks have a retraction
    options = FitOptions(prior_source="shipped", prior_weight=3, exploration=0.3, half_life_days="inf", prm=False)
    table = run_fit(home, options).table
    assert table.source.events["rejections"] and table.source.events["retractions"]  # both rules are exercised
    return home, table


def test_the_documented_sql_recomputes_every_member_of_the_table(recomputable: tuple[Path, RoutingTable]) -> None:
    """Fit, Recomputing from the store: n, W, S and the cost of every member of every region, from the store."""
    from pipeline.store import run_sql

    home, table = recomputable
    (query,) = sql_blocks("Recomputing from the store")
    assert "SELECT '*' AS r" in query
    k, floor = table.constants.prior_weight, table.constants.cost_floor_usd
    for region, content in table.regions.items():
        rows = {r["config_key"]: r for r in run_sql(home, query.replace("SELECT '*' AS r", f"SELECT '{region}' AS r"))}
        assert sorted(rows) == sorted(m.config for m in content.members), region
        for m in content.members:
            row = rows[m.config]
            assert row["n"] == m.n_ratings, (region, m.config)
            assert row["W"] == pytest.approx(m.weight, abs=1e-8)
            assert m.prior is not None and m.cost_usd is not None
            assert (k * m.prior + row["S"]) / (k + row["W"]) == pytest.approx(m.quality, abs=1e-8)
            assert max(floor, row["cost_before_floor"]) == pytest.approx(m.cost_usd, abs=1e-8)


def test_the_documented_aggregation_for_other_engines_counts_as_the_fit(
    recomputable: tuple[Path, RoutingTable],
) -> None:
    """Storage, Many writers and object stores: the per-task aggregation over the raw table, summed per config,
    gives the global pool's n and W."""
    import duckdb
    from deltalake import DeltaTable

    home, table = recomputable
    (query,) = sql_blocks("Many writers and object stores")
    files = ", ".join(f"'{f}'" for f in DeltaTable(str(home / "store" / "events")).file_uris())
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW events AS SELECT * FROM read_parquet([{files}], hive_partitioning = true, union_by_name = true)"
    )
    per_task = con.execute(
        f"SELECT config_key, sum(n), sum(W) FROM ({query.rstrip().rstrip(';')}) GROUP BY 1"
    ).fetchall()
    sums = {c: (n, w) for c, n, w in per_task}
    star = table.regions["*"].members
    assert sorted(sums) == sorted(m.config for m in star)
    for m in star:
        assert sums[m.config][0] == m.n_ratings
        assert sums[m.config][1] == pytest.approx(m.weight, abs=1e-8)


def test_no_file_cites_the_brief() -> None:
    cites = [
        f"{path.relative_to(ROOT)}:{text_of(path).count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for path in scanned_files()
        for m in BRIEF.finditer(text_of(path))
    ]
    assert not cites, "\n".join(cites)


# --------------------------------------------------------------------------- every other pointer, in every docstring
#: A path into the repository that a docstring, a comment or a document names (``tests/test_compact.py``).
PATH = re.compile(r"(?<![\w/.])((?:pipeline|tests|bench|docs)/[A-Za-z0-9_/.-]+\.(?:py|md|json))\b")
#: A Sphinx cross-reference in a docstring or a ``#:`` comment (``:func:`pipeline.streams.append```).
ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|exc|obj):`~?([^`<>]+)`")


def dangling_paths(files: list[Path], *, root: Path = ROOT) -> list[str]:
    """``file:line: path`` for every repository path a file names that does not exist."""
    return [
        f"{path.relative_to(root)}:{text_of(path).count(chr(10), 0, m.start()) + 1}: {m.group(1)}"
        for path in files
        for m in PATH.finditer(text_of(path))
        if not (root / m.group(1)).exists()
    ]


def _names_in(tree: ast.Module) -> set[str]:
    """Every name a module defines or imports (under ``if TYPE_CHECKING`` too)."""
    names = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def _importable(dotted: str) -> bool:
    """Whether ``dotted`` names a module, or an attribute (or model field) reached from one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            fields = getattr(obj, "model_fields", None) or getattr(obj, "__dataclass_fields__", None) or {}
            if attr in fields:
                return True
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def dangling_references(path: Path, module: str, *, root: Path = ROOT) -> list[str]:
    """``file:line: :role:`target``` for every cross-reference in ``path`` that names nothing: a dotted name that
    does not import, a relative one (``.views``) that is no module of the package, a bare name the module
    neither defines nor imports."""
    source = text_of(path)
    tree = ast.parse(source)
    local = _names_in(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    bad = []
    for m in ROLE.finditer(source):
        target = m.group(1).strip().rstrip("()")
        if target.startswith("."):
            ok = _importable(f"{package}{target}")
        elif "." in target and target.split(".")[0] == "pipeline":
            ok = _importable(target)
        else:
            ok = target.split(".")[0] in local
        if not ok:
            bad.append(f"{path.relative_to(root)}:{source.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    return bad


def test_every_path_a_file_names_exists() -> None:
    files = [*scanned_files(), DOC]
    assert sum(len(PATH.findall(text_of(p))) for p in files) > 10  # the scan finds the paths the files name
    assert dangling_paths(files) == []


def test_every_cross_reference_in_the_package_names_something() -> None:
    bad = [
        ref
        for path in sorted((ROOT / "pipeline").rglob("*.py"))
        for ref in dangling_references(
            path, ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        )
    ]
    assert bad == []


def test_a_dangling_path_or_reference_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    source = ROOT / "pipeline" / "streams" / "log.py"  # a real module: its imports resolve
    copy = tmp_path / "pipeline" / "streams" / "log.py"
    copy.parent.mkdir(parents=True)
    gone = "tests/" + "test_gone.py"  # pieced together, so that this file names no missing file of its own
    copy.write_text(
        f'"""See tests/streams/test_log.py and {gone}.\n\n'
        ":func:`append` :func:`gone` :mod:`pipeline.streams.framing` :mod:`pipeline.store.location` "
        ':func:`.framing.consistent_cut` :class:`ValueError`."""\nfrom .log import append\n',
        encoding="utf-8",
    )
    assert dangling_paths([copy], root=tmp_path) == [
        "pipeline/streams/log.py:1: tests/streams/test_log.py",  # under tmp_path: missing there
        f"pipeline/streams/log.py:1: {gone}",
    ]
    assert dangling_references(copy, "pipeline.streams.log", root=tmp_path) == [
        "pipeline/streams/log.py:3: :func:`gone`",
        "pipeline/streams/log.py:3: :mod:`pipeline.store.location`",
    ]
    assert source.exists() and dangling_references(source, "pipeline.streams.log") == []
