"""The documentation site and the packaging: docstring examples run, the API reference lists the public names,
the docs build command is documented, the wheel ships its typing marker without a license warning."""
from __future__ import annotations

import ast
import doctest
import importlib
import importlib.metadata
import importlib.util
import inspect
import pkgutil
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import calibtest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
BUILD_COMMAND = 'pip install ".[docs]" && sphinx-build -W --keep-going -b html docs docs/_build/html'


def _modules() -> list[str]:
    return ["calibtest", *sorted(info.name for info in pkgutil.walk_packages(calibtest.__path__, "calibtest."))]


def _conf():
    """docs/conf.py as a module (it imports calibtest and defines the helpers the build uses)."""
    spec = importlib.util.spec_from_file_location("calibtest_docs_conf", DOCS / "conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stub_names() -> set[str]:
    tree = ast.parse((REPO / "calibtest" / "__init__.pyi").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return {ast.literal_eval(element) for element in node.value.elts}
    raise AssertionError("the stub __init__.pyi has no __all__")


@pytest.mark.parametrize("name", _modules())
@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_docstring_examples_run(name, monkeypatch, tmp_path):
    """Every docstring example of the package runs and prints what it shows (doctest)."""
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional extra (dask, pyarrow) that is not installed
        pytest.skip(f"{name}: {exc}")
    finder = doctest.DocTestFinder(exclude_empty=True)  # the module's own objects, not the ones it imports
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):
        runner.run(test, out=lambda text: None)
    assert runner.failures == 0, (f"{runner.failures} failing docstring example(s) in {name}; "
                                  f"`python -m pytest --doctest-modules {name.replace('.', '/')}.py` shows them")


def _runnable_examples(obj) -> list[doctest.Example]:
    examples = doctest.DocTestParser().get_examples(inspect.getdoc(obj) or "")
    return [e for e in examples if not e.options.get(doctest.SKIP, False)]


@pytest.mark.parametrize("name", sorted(n for n in calibtest._EXPORTS if n[0].islower()))
def test_every_public_function_has_a_runnable_example(name):
    function = getattr(calibtest, name)
    doc = inspect.getdoc(function) or ""
    assert re.search(r"^Examples\n--------$", doc, re.M), f"{name}'s docstring has no Examples section"
    assert _runnable_examples(function), f"{name}'s examples are all skipped (# doctest: +SKIP)"


def test_a_failing_example_is_caught():
    """The doctest runner of test_docstring_examples_run fails on a wrong output (the test can fail)."""
    def wrong():
        """
        >>> 1 + 1
        3
        """
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder().find(wrong, "wrong", globs={}):
        runner.run(test, out=lambda text: None)
    assert runner.failures == 1


def test_the_docs_build_command_is_documented_and_run_in_ci():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    for where, text in (("README.md", readme), ("docs/index.md", index), (".ci/run", ci)):
        assert BUILD_COMMAND in text, f"{where} does not give the docs build command"
    # CI: the README's quick test command first, then the tests marked slow, the docs build and mypy
    quick = re.search(r"pip install -q \"\.\[dev\]\" && (python -m pytest -q -m \"not slow\")", readme).group(1)
    assert ci.index(quick) < ci.index("python -m pytest -q -m slow") < ci.index(BUILD_COMMAND) \
        < ci.index("python -m mypy")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    docs_extra = {re.match(r"[\w-]+", requirement).group(0).lower()
                  for requirement in project["optional-dependencies"]["docs"]}
    assert {"sphinx", "numpydoc", "myst-parser"} <= docs_extra
    assert "mypy" in {re.match(r"[\w-]+", r).group(0) for r in project["optional-dependencies"]["dev"]}


def test_the_api_reference_lists_the_stubs_public_names():
    listed = _conf().api_reference_names()
    assert len(listed) == len(set(listed)), "docs/api.rst lists a name twice"
    assert set(listed) == _stub_names() - {"__version__"}, (
        "docs/api.rst and calibtest/__init__.pyi disagree: add each new public name to a section of docs/api.rst")


def test_api_reference_parser_reads_autosummary_blocks(tmp_path):
    page = tmp_path / "api.rst"
    page.write_text("Title\n=====\n\n.. autosummary::\n   :toctree: generated\n\n   calib_ci\n   BinStats\n\n"
                    "Text that is not a name.\n\n.. autosummary::\n\n   calibtest.load_demo\n", encoding="utf-8")
    assert _conf().api_reference_names(page) == ["calib_ci", "BinStats", "load_demo"]


def test_getting_started_includes_the_readmes_quick_start():
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = re.search(r':start-after: "(.*)"', page).group(1)
    end = re.search(r':end-before: "(.*)"', page).group(1)
    assert "{include} ../README.md" in page
    assert readme.count(start) == 1 and readme.count(end) == 1 and readme.index(start) < readme.index(end)
    assert "```python" in readme[readme.index(start):readme.index(end)]  # the quick start's code


def test_the_user_guide_and_the_examples_cover_every_page():
    conf = _conf()
    guide = conf.user_guide_pages()
    on_disk = {p.stem for p in DOCS.glob("*.md")} - set(conf.SITE_PAGES)
    assert set(guide) == on_disk and {"conventions", "scale", "report"} <= on_disk
    assert conf.vignettes() == sorted(p.stem for p in (REPO / "vignettes").glob("*.md"))
    for page in ("getting-started", "guide", "api", "examples/index"):
        assert page in (DOCS / "index.md").read_text(encoding="utf-8")


def test_version_is_in_step():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (REPO / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert released and released[0] == project["version"], (
        f"pyproject.toml's version {project['version']} is not the CHANGELOG's latest release {released[:1]}")
    try:
        installed = importlib.metadata.version("calibtest")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("calibtest is not installed")
    assert calibtest.__version__ == installed == project["version"]


def test_license_is_an_spdx_expression():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"] and (REPO / "LICENSE").is_file()
    assert "BSD 3-Clause" in (REPO / "LICENSE").read_text(encoding="utf-8")
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))  # PEP 639: not both


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_wheel_ships_the_typing_marker_without_a_license_warning(tmp_path):
    pytest.importorskip("build")
    out = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(REPO)],
                         capture_output=True, text=True, timeout=300)
    log = out.stdout + out.stderr
    if out.returncode != 0 and re.search(r"Could not find a version|No matching distribution|connection", log, re.I):
        pytest.skip("no package index to fetch the build backend from")
    assert out.returncode == 0, log[-3000:]
    assert not re.search(r"license.*deprecated|deprecated.*license", log, re.I), "the build warns about the license"
    wheel, = tmp_path.glob("calibtest-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert {"calibtest/py.typed", "calibtest/__init__.pyi", "calibtest/templates/report.html"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: BSD-3-Clause" in metadata
