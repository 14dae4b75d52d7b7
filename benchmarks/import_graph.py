"""The import graph of the ``calibtest`` package: modules, cycles, depth, imports against the layering.

Reads the source with :mod:`ast` (nothing is imported or run) and prints:

* the number of modules;
* the import cycles (strongly connected components with more than one module);
* the depth of the import layers (the longest chain of module-level imports, counted in modules;
  imports deferred into a function body and ``if TYPE_CHECKING`` imports are not layers);
* every import that points up against the intended layering (``LAYERS`` below),
  separating imports made at module level from imports deferred inside a function.

Run: ``python benchmarks/import_graph.py [PACKAGE_DIR]`` (default: the package of this checkout).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

#: The layering, from the bottom: a module may import modules of its own layer or below.
LAYERS = [
    ("leaves", ["calibtest.options", "calibtest._validation", "calibtest._format", "calibtest.datasets", "calibtest.data"]),
    ("core", ["calibtest.core"]),
    ("input", ["calibtest.formula", "calibtest.inputs", "calibtest.grouping", "calibtest.logistic"]),
    ("display", ["calibtest.summary"]),
    ("tests on rows", ["calibtest.hosmer_lemeshow", "calibtest.valprob", "calibtest.calibration_test",
                       "calibtest.verdict", "calibtest.flexible"]),
    ("results", ["calibtest.results"]),
    ("estimation", ["calibtest.estimation"]),
    ("backends", ["calibtest.backends"]),
    ("api", ["calibtest.groups", "calibtest.ece", "calibtest.compare", "calibtest.tcal", "calibtest.evidence",
             "calibtest.plan"]),
    ("reporting and simulation", ["calibtest.reporting", "calibtest.simulation"]),
    ("surface", ["calibtest.cli", "calibtest"]),
]


def layer_of(module: str) -> int:
    """Index of the most specific layer prefix matching ``module``."""
    best, depth = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > depth:
                best, depth = i, len(prefix)
    if best is None:
        raise ValueError(f"module {module} is in no layer")
    return best


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path, name: str, modules: set[str]):
    """(target, deferred) for every import of a calibtest module in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    deferred_nodes, typing_only = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            deferred_nodes.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            typing_only.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rsplit(".", 1)[0] if "." in target else ""
            if target and target != name:
                yield target, id(node) in deferred_nodes


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "calibtest"
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    modules = set(files)
    edges = {m: set() for m in modules}      # imports at module level: the layers
    deferred_edges = {m: set() for m in modules}
    up = []
    for m, p in sorted(files.items()):
        for target, deferred in imports(p, m, modules):
            (deferred_edges if deferred else edges)[m].add(target)
            if layer_of(target) > layer_of(m):
                up.append((m, target, deferred))
    # strongly connected components (Tarjan)
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(comp)

    sys.setrecursionlimit(10000)
    all_edges = {m: edges[m] | deferred_edges[m] for m in modules}
    edges, module_level = all_edges, edges   # cycles over every import, deferred ones included
    for v in sorted(modules):
        if v not in index:
            visit(v)
    edges = module_level
    cycles = [sorted(c) for c in sccs if len(c) > 1]
    depth = {}

    def longest(v, seen=()):
        if v in depth:
            return depth[v]
        best = 1 + max((longest(w, seen + (v,)) for w in edges[v] if w not in seen), default=0)
        depth[v] = best
        return best

    deepest = max(longest(v) for v in modules)
    print(f"modules: {len(modules)}")
    print(f"import cycles: {len(cycles)}" + "".join(f"\n  {' <-> '.join(c)}" for c in cycles))
    chain = [max(modules, key=longest)]
    while edges[chain[-1]]:
        chain.append(max(edges[chain[-1]], key=longest))
    print(f"depth of the import layers (longest chain of module-level imports): {deepest}\n  "
          + " -> ".join(chain))
    top_level = [u for u in up if not u[2]]
    print(f"imports against the layering: {len(up)} ({len(top_level)} at module level, "
          f"{len(up) - len(top_level)} deferred inside a function)")
    for m, t, deferred in up:
        print(f"  {m} -> {t}" + ("  (deferred)" if deferred else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
