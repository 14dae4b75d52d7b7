"""The layering of the package, checked on its source: no import cycles, imports point down the layers.

The layers and the few allowed upward imports are declared in ``tests/layering_helpers.py``
(``LAYERS``, ``ALLOWED_UPWARD``); ``benchmarks/import_graph.py`` prints the same graph.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from layering_helpers import (ALLOWED_UPWARD, LAYERS, find_cycles, layer_of, longest_chain, read_graph, unplaced,
                              upward_imports)

import calibtest

ROOT = Path(calibtest.__file__).resolve().parent


@pytest.fixture(scope="module")
def graph():
    return read_graph(ROOT)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_the_graph_is_read(graph):
    # The reader sees module-level and deferred imports (a reader that saw nothing would pass every test below).
    edges, every = graph.edges(), graph.edges(deferred=True)
    assert "calibtest.core.binning" in edges["calibtest.core.partition"]
    assert "calibtest.reporting.html" not in edges["calibtest.ece.result"]
    assert "calibtest.reporting.html" in every["calibtest.ece.result"]
    assert len(graph.modules) == len(list(ROOT.rglob("*.py")))


def test_every_module_has_a_layer(graph):
    assert unplaced(graph) == [], "declare the layer of these modules in LAYERS (tests/layering_helpers.py)"


def test_no_import_cycles(graph):
    assert find_cycles(graph.edges()) == []


def test_no_cycle_is_dodged_by_a_deferred_import(graph):
    assert find_cycles(graph.edges(deferred=True)) == []


def test_module_level_imports_point_down(graph):
    up = [str(i) for i in upward_imports(graph) if not i.deferred]
    assert up == [], "module-level imports against the layering"


def test_deferred_upward_imports_are_the_declared_ones(graph):
    found = {(i.importer, i.target) for i in upward_imports(graph) if i.deferred}
    assert sorted(found - set(ALLOWED_UPWARD)) == [], "new upward imports: import down, or declare them with a reason"
    assert sorted(set(ALLOWED_UPWARD) - found) == [], "stale entries of ALLOWED_UPWARD: remove them"


@pytest.mark.parametrize("lower, higher", [
    ("calibtest.core.binning", "calibtest.streams.accumulator"),
    ("calibtest.streams.files", "calibtest.api.calib_ci"),
    ("calibtest.api.calib_ci", "calibtest.reporting.html"),
    ("calibtest.ece.result", "calibtest.simulation.study"),
    ("calibtest.reporting.html", "calibtest.cli"),
])
def test_the_declared_order(lower, higher):
    # core below backends below the entry points below reporting/ and simulation/ below the CLI.
    assert layer_of(lower) < layer_of(higher)


def test_a_new_top_level_module_is_in_no_layer():
    # The root package names only itself: a new module must be placed, not fall into the top layer.
    assert layer_of("calibtest.brand_new") is None
    assert layer_of("calibtest") == len(LAYERS) - 1
    assert layer_of("calibtest.core.brand_new") == layer_of("calibtest.core")


def _readme_map() -> list[str]:
    """The bullets of the README's "Package layout" section, in order."""
    text = (ROOT.parent / "README.md").read_text(encoding="utf-8")
    section = text.split("## Package layout", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("* **")]


def test_the_readme_map_follows_the_declared_layers(graph):
    # One declaration of the layers (LAYERS): the README's map has one bullet per layer, in order, and each
    # bullet names every module of its layer (a module moved, added or renamed without the map fails here).
    bullets = _readme_map()
    assert len(bullets) == len(LAYERS)
    packages = {m for m in graph.modules if any(o.startswith(m + ".") for o in graph.modules)}
    for module in graph.modules:
        if module in packages and module != "calibtest":
            continue
        bullet, shown = bullets[layer_of(module)], module.rsplit(".", 1)[-1]
        if module == "calibtest":
            shown = "calibtest/__init__.py"
        assert f"`{shown}" in bullet or f"{shown}.py" in bullet or f"/{shown}`" in bullet, \
            f"the README's map does not name {module} in the layer '{LAYERS[layer_of(module)][0]}'"


def test_the_package_top_level_stays_small(graph):
    # Folders say what they hold: at most ten modules at the package's top level, the rest in subpackages.
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= 10, top


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


FAKE_LAYERS = [("core", ["fakepkg.core"]), ("api", ["fakepkg.api", "fakepkg.top"]), ("surface", ["fakepkg"])]


def test_the_checker_finds_synthetic_violations(tmp_path):
    pkg = _write(tmp_path / "fakepkg", {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "from fakepkg.core.b import x\n",
        "core/b.py": "from fakepkg.core import a\nx = 1\n",
        "core/c.py": "import fakepkg.api\n",                                     # module level, upward
        "core/d.py": """\
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from fakepkg.api import f                                       # never runs: ignored
            """,
        "api.py": """\
            import numpy as np

            def f():
                from fakepkg.top import y                                       # deferred, same layer
                from fakepkg import core                                        # deferred, downward
                return y
            """,
        "top.py": "from .api import f\ny = 2\n",                                # relative import
        "stray.py": "from . import top\n",
    })
    graph = read_graph(pkg)
    assert sorted(graph.modules) == ["fakepkg", "fakepkg.api", "fakepkg.core", "fakepkg.core.a", "fakepkg.core.b",
                                     "fakepkg.core.c", "fakepkg.core.d", "fakepkg.stray", "fakepkg.top"]
    assert find_cycles(graph.edges()) == [["fakepkg.core.a", "fakepkg.core.b"]]
    assert find_cycles(graph.edges(deferred=True)) == [["fakepkg.api", "fakepkg.top"],
                                                        ["fakepkg.core.a", "fakepkg.core.b"]]
    assert [(i.importer, i.target, i.deferred) for i in upward_imports(graph, FAKE_LAYERS)] == [
        ("fakepkg.core.c", "fakepkg.api", False)]
    assert unplaced(graph, FAKE_LAYERS) == ["fakepkg.stray"]
    with pytest.raises(ValueError, match="cycle"):
        longest_chain(graph.edges())


def test_the_checker_finds_a_deferred_upward_import(tmp_path):
    pkg = _write(tmp_path / "fakepkg", {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "def f():\n    from fakepkg.api import g\n    return g\n",
        "api.py": "from fakepkg.core.a import f\ndef g():\n    pass\n",
    })
    graph = read_graph(pkg)
    assert [str(i) for i in upward_imports(graph, FAKE_LAYERS)] == ["fakepkg.core.a -> fakepkg.api (line 2, deferred)"]
    assert find_cycles(graph.edges()) == []
    assert find_cycles(graph.edges(deferred=True)) == [["fakepkg.api", "fakepkg.core.a"]]
    assert longest_chain(graph.edges()) == ["fakepkg.api", "fakepkg.core.a"]
