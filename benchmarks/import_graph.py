"""The import graph of the ``calibtest`` package: modules, cycles, depth, imports against the layering.

Reads the source with :mod:`ast` (nothing is imported or run) and prints:

* the number of modules;
* the import cycles (strongly connected components with more than one module), among module-level
  imports and among every import (deferred ones included);
* the depth of the import layers (the longest chain of module-level imports, counted in modules;
  imports deferred into a function body and ``if TYPE_CHECKING`` imports are not layers);
* every import that points up against the declared layering, separating imports made at module level
  from imports deferred inside a function, with the reason of each allowed one.

The reader and the layering (``LAYERS``, ``ALLOWED_UPWARD``) are those of ``tests/layering_helpers.py``,
which ``tests/test_layering.py`` asserts; this script only prints them.

Run: ``python benchmarks/import_graph.py [PACKAGE_DIR]`` (default: the package of this checkout).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from layering_helpers import (ALLOWED_UPWARD, find_cycles, longest_chain, read_graph, unplaced,  # noqa: E402
                              upward_imports)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    graph = read_graph(Path(argv[0]) if argv else ROOT / "calibtest")
    cycles, every_cycle = find_cycles(graph.edges()), find_cycles(graph.edges(deferred=True))
    print(f"modules: {len(graph.modules)}")
    print(f"import cycles: {len(cycles)} among module-level imports, {len(every_cycle)} among every import"
          + "".join(f"\n  {' <-> '.join(c)}" for c in every_cycle))
    if not cycles:
        chain = longest_chain(graph.edges())
        print(f"depth of the import layers (longest chain of module-level imports): {len(chain)}\n  "
              + " -> ".join(chain))
    missing = unplaced(graph)
    if missing:
        print(f"modules in no layer: {len(missing)}\n  " + "\n  ".join(missing))
    up = upward_imports(graph)
    module_level = [i for i in up if not i.deferred]
    print(f"imports against the layering: {len(up)} ({len(module_level)} at module level, "
          f"{len(up) - len(module_level)} deferred inside a function)")
    for imp in up:
        reason = ALLOWED_UPWARD.get((imp.importer, imp.target))
        print(f"  {imp}" + (f"\n      allowed: {reason}" if reason and imp.deferred else "  NOT ALLOWED"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
