"""The package's layout holds: no import cycle inside ``pipeline/``, each stage imports only the stages below it, and
no module but the workspace names a file of the home.

The imports are read with ``ast`` from the source (nothing is imported), every import statement counts: at module
level, inside a function (a lazy import still ties the two modules) or under ``if TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[1] / "pipeline"

#: The stages, lowest first (docs/design.md, Layout): a module imports modules of its own stage and of the stages
#: before it, never of one after it. Each entry is a package or module; a module belongs to the longest entry it
#: lies under. A compatibility shim (``pipeline/compat``) sits in the stage of the code it serves.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "pipeline",
            "pipeline.errors",
            "pipeline.confine",
            "pipeline.bounds",
            "pipeline.workspace",
            "pipeline.utc",
            "pipeline.jsonfile",
            "pipeline.money",
            "pipeline.rounding",
            "pipeline.defaults",
            "pipeline.scalars",
            "pipeline.compat",
            "pipeline.compat.table_v1",
        ),
    ),
    ("streams", ("pipeline.streams",)),  # events and the append-only streams
    ("store", ("pipeline.store", "pipeline.compat.manifest_store")),  # the table's format and views; no writing
    ("compact", ("pipeline.compact", "pipeline.compat.daily_layout")),  # stream bytes -> one commit of the store
    ("routing", ("pipeline.routing", "pipeline.compat.routing_v1")),  # the table and the router: no fit in it
    ("fit", ("pipeline.fit",)),  # the model: never its judging or the job
    ("evaluate", ("pipeline.evaluate",)),  # judging the model: never the job
    ("nightly", ("pipeline.nightly",)),  # the job: compact, fit, evaluate, publish
    ("casestudy", ("pipeline.casestudy",)),  # the page, from stats.json alone: a stage after the job
    ("backtest", ("pipeline.backtest",)),  # the loop replayed on a full-information table: the job each night
    ("simulate", ("pipeline.simulate",)),  # data with known truth
    ("commands", ("pipeline.commands",)),  # the user commands over the stages
    ("cli", ("pipeline.cli",)),  # nothing below imports the CLI
]


def module_files(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's ``__init__``) for every ``.py`` file under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules under ``root`` it imports (``from a import b`` counts ``a.b`` when b is a module)."""
    known = module_files(root)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in known.items():
        package = name if is_package else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets.update(
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module for alias in node.names
                )
        resolved = set()
        for target in targets:
            module = target
            while module and module not in known:  # a name inside a module: the module
                module = module.rpartition(".")[0]
            if module and module != name:
                resolved.add(module)
        graph[name] = resolved
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted; a self-import too."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def in_layer(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def stage_of(module: str) -> int:
    """The index in :data:`STAGES` of the longest entry ``module`` lies under (-1 when none)."""
    best, found = -1, -1
    for i, (_, entries) in enumerate(STAGES):
        for entry in entries:
            under = module == entry if entry == "pipeline" else in_layer(module, entry)  # the package's own __init__
            if under and len(entry) > best:
                best, found = len(entry), i
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module (stage) -> target (stage)`` for every import of a module of a later stage."""
    return sorted(
        f"{module} ({STAGES[stage_of(module)][0]}) -> {target} ({STAGES[stage_of(target)][0]})"
        for module, targets in graph.items()
        for target in targets
        if stage_of(target) > stage_of(module)
    )


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PIPELINE)


def test_the_walk_sees_the_layers(graph):
    assert "pipeline.evaluate.protocol" in graph["pipeline.nightly.job"]
    assert "pipeline.fit.model" in graph["pipeline.evaluate.protocol"]
    assert "pipeline.routing.router" in graph["pipeline.evaluate.policies"]
    assert "pipeline.routing.view" in graph["pipeline.routing.policies"]


def test_no_import_cycle_inside_pipeline(graph):
    assert cycles(graph) == []


def test_every_module_is_in_a_stage(graph):
    assert sorted(m for m in graph if stage_of(m) < 0) == []


def test_no_stage_imports_a_later_stage(graph):
    """streams < store < compact < routing < fit < evaluate < nightly < casestudy < simulate < commands < cli:
    the store never imports compaction, the router never the fit, the fit never its judging or the job, the job
    never the case study, nothing below the commands imports them and nothing below the CLI imports it."""
    assert upward_imports(graph) == []


#: What the workspace alone may spell: a path built from a name (``x / "name"``, ``x / f"..."``) or a name put
#: beside one (``with_name("...")``); its confinement module names the temporary files beside a target. The
#: compatibility shims read old layouts by their old names.
NAMING_ALLOWED = ("pipeline/workspace.py", "pipeline/confine.py", "pipeline/compat/")


def names_a_path(tree: ast.AST) -> list[int]:
    """Lines where ``tree`` joins a path with a literal name or puts a literal name beside one."""

    def literal(node: ast.AST) -> bool:
        return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))

    def joins(node: ast.AST) -> bool:  # x / "name"
        return (
            isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and (literal(node.left) or literal(node.right))
        )

    def beside(node: ast.AST) -> bool:  # x.with_name("name")
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "with_name"
            and bool(node.args)
            and literal(node.args[0])
        )

    lines = [node.lineno for node in ast.walk(tree) if joins(node) or beside(node)]
    return lines


def test_no_module_but_the_workspace_names_a_file_of_the_home():
    offenders = [
        f"{path.relative_to(PIPELINE.parent)}:{line}"
        for path in sorted(PIPELINE.rglob("*.py"))
        if not path.relative_to(PIPELINE.parent).as_posix().startswith(NAMING_ALLOWED)
        for line in names_a_path(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert offenders == []


def test_the_walk_finds_a_cycle_and_a_forbidden_import(tmp_path):
    """The checks above can fail: a package whose router and policies import each other (one lazily, in a
    function), and a fit module that imports the judging."""
    root = tmp_path / "pipeline"
    for package in ("routing", "fit", "evaluate"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "routing" / "router.py").write_text("def route():\n    from .policies import POLICIES\n")
    (root / "routing" / "policies.py").write_text("from .router import route\n")
    (root / "fit" / "learning.py").write_text("from ..evaluate.split import parts\n")
    (root / "evaluate" / "split.py").write_text("import pipeline.fit.learning as fitting\n")
    graph = import_graph(root)
    assert cycles(graph) == [
        ["pipeline.evaluate.split", "pipeline.fit.learning"],
        ["pipeline.routing.policies", "pipeline.routing.router"],
    ]
    assert "pipeline.evaluate.split" in reachable(graph, "pipeline.fit.learning")
    assert upward_imports(graph) == ["pipeline.fit.learning (fit) -> pipeline.evaluate.split (evaluate)"]


def test_the_naming_check_sees_a_literal_name_and_only_that():
    tree = ast.parse('a = home / "fits" / f"{v}.json"\nb = p.with_name("x.tmp")\nc = home / name\nd = 6 / 3\n')
    assert sorted(names_a_path(tree)) == [1, 1, 2]
