"""The import graph of a package read with :mod:`ast`, and the declared layering of calibtest (not a test module).

Used by ``tests/test_layering.py`` (which asserts the layering) and by
``benchmarks/import_graph.py`` (which prints the graph).  Nothing is imported or
run: every ``.py`` file of the package is parsed, and each ``import`` /
``from ... import`` of a module of the package becomes an edge, marked
*deferred* when it sits inside a function body (it runs when the function is
called, not when the module is imported).  Imports under ``if TYPE_CHECKING:``
never run and are ignored.  An import of ``a.b.c`` is an edge to ``a.b.c``
only (not to the packages ``a`` and ``a.b`` whose ``__init__`` also runs):
calibtest's package ``__init__`` files import their public names on first use.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

#: The layering of calibtest, from the bottom: a module may import modules of its own layer or below.
#: An entry names a module or a subpackage (with everything in it); the root package ``calibtest``
#: names only its ``__init__``, so a new top-level module must be placed here explicitly.
LAYERS = [
    ("leaves", ["calibtest.options", "calibtest._version", "calibtest.datasets", "calibtest.data"]),
    ("display", ["calibtest.display"]),
    ("core", ["calibtest.core"]),
    ("inputs", ["calibtest.inputs"]),
    ("checks", ["calibtest.checks"]),
    ("ece", ["calibtest.ece"]),
    ("streams", ["calibtest.streams"]),
    ("api", ["calibtest.api"]),
    ("reporting and simulation", ["calibtest.reporting", "calibtest.simulation", "calibtest.sklearn",
                                  "calibtest.monitor"]),
    ("surface", ["calibtest.cli", "calibtest"]),
]

#: The imports that point up the layers, each deferred into a function body, and why.  Any other upward
#: import, and any module-level one, fails tests/test_layering.py; so does an entry here that no longer exists.
ALLOWED_UPWARD = {
    ("calibtest.ece.result", "calibtest.reporting.plotting"):
        "CalibrationResult.plot_reliability(): a statsmodels-like result draws its own reliability diagram; "
        "matplotlib is imported only when a plot is asked for",
    ("calibtest.ece.result", "calibtest.reporting.html"):
        "CalibrationResult.report(): the result writes its own validation report; jinja2 and matplotlib are "
        "imported only when a report is asked for",
    ("calibtest.ece.meta_analysis", "calibtest.reporting.forest"):
        "MetaAnalysisResult.plot_forest(): the meta-analysis draws its own forest plot per measure; matplotlib is "
        "imported only when a plot is asked for",
    ("calibtest.ece.group_engine", "calibtest.reporting.forest"):
        "GroupedCalibrationResult.plot_forest(): the grouped result draws its own forest plot; matplotlib is "
        "imported only when a plot is asked for",
}


@dataclass(frozen=True)
class Import:
    """One import of a module of the package by another: where it is and whether it runs at import time."""

    importer: str
    target: str
    deferred: bool
    line: int

    def __str__(self) -> str:
        return f"{self.importer} -> {self.target} (line {self.line}{', deferred' if self.deferred else ''})"


@dataclass(frozen=True)
class ImportGraph:
    """The modules of a package (name -> file) and every import among them."""

    package: str
    modules: dict
    imports: tuple

    def edges(self, deferred: bool = False) -> dict[str, set[str]]:
        """Module -> the modules it imports: at module level only, or (``deferred=True``) every import."""
        out = {m: set() for m in self.modules}
        for imp in self.imports:
            if deferred or not imp.deferred:
                out[imp.importer].add(imp.target)
        return out


def module_name(path: Path, root: Path) -> str:
    """Dotted name of the module in ``path`` (``root`` is the package directory)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_of(path: Path, name: str, modules: set[str], package: str):
    """Every :class:`Import` of a module of the package in the file ``path`` (module ``name``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deferred, typing_only = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            deferred.update(id(n) for n in ast.walk(node))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            typing_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            if target != package and not target.startswith(package + "."):
                continue
            while target not in modules:       # a name inside a module: the module
                target = target.rpartition(".")[0]
            if target != name:
                yield Import(name, target, id(node) in deferred, node.lineno)


def read_graph(root: Path) -> ImportGraph:
    """The import graph of the package in directory ``root``, read from its source."""
    root = Path(root)
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    modules = set(files)
    imports = []
    for name, path in sorted(files.items()):
        imports.extend(sorted(set(_imports_of(path, name, modules, root.name)),
                              key=lambda i: (i.line, i.target)))
    return ImportGraph(root.name, files, tuple(imports))


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
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
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(cycles)


def longest_chain(edges: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports ``a -> b -> ...`` (the depth of the layers, in modules); needs no cycles."""
    memo: dict[str, list[str]] = {}

    def chain(v, path):
        if v in path:
            raise ValueError(f"import cycle through {v}")
        if v not in memo:
            below = [chain(w, path | {v}) for w in sorted(edges[v])]
            memo[v] = [v] + max(below, key=len, default=[])
        return memo[v]

    return max((chain(v, frozenset()) for v in sorted(edges)), key=len, default=[])


def layer_of(module: str, layers=LAYERS) -> int | None:
    """Index in ``layers`` of the most specific entry naming ``module`` (None when no entry does).

    An entry names a module or a subpackage and what it holds; the root package (an entry without a dot)
    names only itself.
    """
    best, best_len = None, -1
    for i, (_, entries) in enumerate(layers):
        for entry in entries:
            inside = "." in entry and module.startswith(entry + ".")
            if (module == entry or inside) and len(entry) > best_len:
                best, best_len = i, len(entry)
    return best


def unplaced(graph: ImportGraph, layers=LAYERS) -> list[str]:
    """The modules that no layer names."""
    return sorted(m for m in graph.modules if layer_of(m, layers) is None)


def upward_imports(graph: ImportGraph, layers=LAYERS) -> list[Import]:
    """The imports whose target sits in a higher layer than their importer (modules without a layer skipped)."""
    out = []
    for imp in graph.imports:
        low, high = layer_of(imp.importer, layers), layer_of(imp.target, layers)
        if low is not None and high is not None and high > low:
            out.append(imp)
    return out
