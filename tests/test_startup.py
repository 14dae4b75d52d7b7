"""``import calibtest`` is cheap: the public names are imported on first use (PEP 562), and all still resolve.

Not a timing test (``benchmarks/bench_startup.py`` times the start-up): each check runs a fresh
interpreter and looks at which modules it loaded.
"""
from __future__ import annotations

import ast
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import calibtest

HEAVY = ("numpy", "pandas", "scipy", "matplotlib", "statsmodels", "patsy", "sklearn")
CHECKOUT = Path(calibtest.__file__).resolve().parents[1]


def run_python(code: str) -> str:
    """stdout of ``python -c CODE`` in a fresh interpreter importing this checkout's calibtest."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(CHECKOUT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def heavy_modules_after(statement: str) -> list[str]:
    """The heavy dependencies loaded by a fresh interpreter after running ``statement``."""
    return json.loads(run_python(
        f"{statement}\nimport sys, json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"))


def test_import_calibtest_loads_no_heavy_dependency():
    out = run_python("import calibtest, sys; print(sorted(m for m in ('numpy','pandas','scipy','matplotlib',"
                     "'statsmodels','patsy') if m in sys.modules))")
    assert out == "[]"


@pytest.mark.parametrize("statement", [
    "import calibtest; calibtest.__version__",
    "import calibtest.core, calibtest.streams, calibtest.reporting",
    "import calibtest; dir(calibtest)",
])
def test_light_statements_load_no_heavy_dependency(statement):
    assert heavy_modules_after(statement) == []


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_using_a_public_name_loads_its_dependencies():
    # The check above can fail: the first use of a name does import numpy and pandas.
    loaded = heavy_modules_after("from calibtest import calib_ci")
    assert {"numpy", "pandas"} <= set(loaded)


def _type_checking_names(path: Path) -> dict[str, str]:
    """name -> module of what static tools read: the stub ``__init__.pyi`` beside ``path`` when there is one
    (its top-level ``from ... import`` statements), else the ``from ... import`` statements under
    ``if TYPE_CHECKING:`` in ``path``."""
    stub = path.with_suffix(".pyi")
    tree = ast.parse((stub if stub.exists() else path).read_text(encoding="utf-8"))
    if stub.exists():
        body = [node for node in tree.body if isinstance(node, ast.ImportFrom)]
    else:
        body = next(node for node in tree.body
                    if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING").body
    names = {}
    for node in body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            names[alias.asname or alias.name] = node.module
    return names


def test_the_stub_lists_every_public_name():
    stub = Path(calibtest.__file__).with_suffix(".pyi")
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    declared = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                    and any(getattr(t, "id", "") == "__all__" for t in node.targets))
    assert sorted(ast.literal_eval(declared)) == sorted(calibtest.__all__)


@pytest.mark.parametrize("package", ["calibtest", "calibtest.reporting"])
def test_static_imports_match_the_lazy_table(package):
    # What typing tools read (the TYPE_CHECKING block) is what __getattr__ imports.
    module = importlib.import_module(package)
    static = _type_checking_names(Path(module.__file__))
    lazy = dict(module._EXPORTS)
    lazy.update({name: package for name in getattr(module, "_SUBMODULES", ())})
    assert static == lazy
    assert sorted(module.__all__) == sorted([*lazy, *(["__version__"] if package == "calibtest" else [])])


@pytest.mark.parametrize("name", calibtest._EXPORTS)
def test_every_public_name_is_the_object_of_its_module(name):
    value = getattr(calibtest, name)
    assert value is getattr(importlib.import_module(calibtest._EXPORTS[name]), name)
    assert name in dir(calibtest)


def test_submodules_and_star_import():
    import calibtest.datasets
    import calibtest.simulation
    assert calibtest.simulation is sys.modules["calibtest.simulation"]
    assert calibtest.datasets is sys.modules["calibtest.datasets"]
    namespace = {}
    exec("from calibtest import *", namespace)
    assert set(calibtest.__all__) <= set(namespace)
    assert namespace["calib_ci"] is calibtest.calib_ci


def test_unknown_attribute():
    with pytest.raises(AttributeError, match="calibtest.*no_such_name"):
        calibtest.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        exec("from calibtest import no_such_name", {})


def test_version_is_the_package_metadata():
    try:
        expected = importlib.metadata.version("calibtest")
    except importlib.metadata.PackageNotFoundError:
        expected = "0+unknown"
    assert calibtest.__version__ == expected
    from calibtest._version import package_version
    assert package_version() == expected


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_no_public_name_shadows_a_module():
    # a public function named like its own submodule would be replaced by the module as soon as the
    # module is imported (the import system binds it on the package): no name of __all__ is a submodule
    import pkgutil
    modules = {m.name for m in pkgutil.iter_modules(calibtest.__path__)}
    assert not (set(calibtest._EXPORTS) & modules), set(calibtest._EXPORTS) & modules
    # and importing every module afterwards leaves every public name as it was
    lines = ["import calibtest, importlib, pkgutil, types",
             f"before = {{name: getattr(calibtest, name) for name in {sorted(calibtest._EXPORTS)!r}}}",
             "[importlib.import_module('calibtest.' + m.name) for m in pkgutil.iter_modules(calibtest.__path__)]",
             "assert all(getattr(calibtest, k) is v and not isinstance(v, types.ModuleType) "
             "for k, v in before.items())",
             "print('ok')"]
    assert run_python("\n".join(lines)) == "ok"

