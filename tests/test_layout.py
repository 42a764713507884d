"""The package's layout holds: no import cycle inside ``pipeline/``, and each layer imports only the ones below it.

The imports are read with ``ast`` from the source (nothing is imported), every import statement counts: at module
level, inside a function (a lazy import still ties the two modules) or under ``if TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[1] / "pipeline"

#: (layer, a layer it must never reach, directly or through other modules).
FORBIDDEN = [
    ("pipeline.fit", "pipeline.evaluate"),  # the model never depends on its judging
    ("pipeline.fit", "pipeline.nightly"),
    ("pipeline.routing", "pipeline.fit"),  # the router reads a table, not the fit that made it
    ("pipeline.routing", "pipeline.evaluate"),
    ("pipeline.routing", "pipeline.nightly"),
    ("pipeline.evaluate", "pipeline.nightly"),  # the job runs the judging, not the other way round
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


@pytest.mark.parametrize(("layer", "never"), FORBIDDEN)
def test_a_layer_never_reaches_the_layers_above_it(graph, layer, never):
    offenders = sorted(
        f"{module} -> {target}"
        for module in graph
        if in_layer(module, layer)
        for target in reachable(graph, module)
        if in_layer(target, never)
    )
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
