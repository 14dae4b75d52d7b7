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


# --------------------------------------------------------------------------- the gallery and the figures

GALLERY = DOCS / "gallery"


def _gallery_module():
    """docs/sphinxext/calibtest_gallery.py (the gallery's order and image scraper) as a module."""
    spec = importlib.util.spec_from_file_location("calibtest_gallery", DOCS / "sphinxext" / "calibtest_gallery.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_gallery_lists_every_example_in_its_order():
    examples = sorted(path.name for path in GALLERY.glob("plot_*.py"))
    assert sorted(_gallery_module().EXAMPLE_ORDER) == examples
    # the topics: a real data set of a package, an LLM, full calibration, survival, several
    # centres, planning, a report, scikit-learn, monitoring over time
    assert {"plot_breast_cancer.py", "plot_llm_confidence.py", "plot_multiclass_full.py", "plot_survival_horizon.py",
            "plot_multicentre.py", "plot_planning.py", "plot_report.py", "plot_sklearn.py",
            "plot_monitoring.py"} <= set(examples)
    order = _gallery_module().ExampleOrder(str(GALLERY))
    assert sorted(["plot_new.py", *examples], key=order)[-1] == "plot_new.py"  # an unlisted example goes last


@pytest.mark.parametrize("example", sorted(path.name for path in GALLERY.glob("plot_*.py")))
def test_each_example_has_a_title_and_downloads_nothing(example):
    source = (GALLERY / example).read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source))
    assert doc and re.match(r"[^\n]+\n=+\n", doc), f"{example} has no title (a docstring with an === underline)"
    title, underline = doc.splitlines()[:2]
    assert len(underline) >= len(title)
    # the code fits the page's code box at 1200 px without scrolling (the prose is wrapped by the browser)
    body = source.splitlines()[ast.parse(source).body[0].end_lineno:]
    wide = [line for line in body if len(line) > 80 and not line.startswith("#")]
    assert not wide, f"{example}: code lines longer than 80 characters: {wide}"
    # the site builds without a network: the data ship with a package or are simulated
    assert not re.search(r"fetch_|get_rdataset|urlopen|requests\.|https?://", source), f"{example} downloads data"


def _top_level_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {target.id for node in tree.body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)}


def _embedded_gallery_images(page: str) -> list[tuple[str, str]]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.findall(r"auto_examples/images/(plot_\w+)-(\w+)\.png", text)


@pytest.mark.parametrize("page", ["figures.md", "sklearn.md"])
def test_the_figures_and_sklearn_pages_embed_figures_the_gallery_draws(page):
    """Each image of the page is a figure bound to that name at the top level of a gallery example (the
    scraper saves it as <example>-<name>.png), so a renamed variable fails here, not silently."""
    embedded = _embedded_gallery_images(page)
    assert len(embedded) >= (7 if page == "figures.md" else 3)
    for example, name in embedded:
        path = GALLERY / f"{example}.py"
        assert path.is_file(), f"{page} embeds an image of {example}, which is not a gallery example"
        assert name in _top_level_names(path), f"{page} embeds {example}-{name}.png but {example}.py binds no {name}"


def test_the_figures_page_shows_each_function_it_describes():
    text = (DOCS / "figures.md").read_text(encoding="utf-8")
    for function in ("flexible_curve_figure", "display_reliability_figure", "bin_sensitivity_figure",
                     "prediction_strip_figure", "plot_reliability", "plot_forest", "plot_meta_forest",
                     "plot_survival_calibration"):
        assert re.search(rf"```{{figure}}[^`]*`[\w.]*{function}\(", text), f"figures.md shows no figure of {function}"


def test_the_scraper_saves_unmanaged_figures_and_names_every_figure(tmp_path):
    pytest.importorskip("sphinx_gallery")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    scraper = _gallery_module().unmanaged_figures
    (tmp_path / "images").mkdir()
    from sphinx_gallery.scrapers import ImagePathIterator
    block_vars = {"image_path_iterator": ImagePathIterator(tmp_path / "images" / "sphx_glr_plot_x_{0:03}.png"),
                  "src_file": str(tmp_path / "plot_x.py"), "example_globals": {}}
    unmanaged = Figure()
    unmanaged.subplots().plot([0, 1])
    _, managed_ax = plt.subplots()
    block_vars["example_globals"].update(fig_a=unmanaged, ax_b=managed_ax, n=3, same=unmanaged)
    try:
        rst = scraper(None, block_vars, {"src_dir": str(tmp_path)})
        again = scraper(None, block_vars, {"src_dir": str(tmp_path)})  # the next block: nothing new
    finally:
        plt.close("all")
    saved = sorted(path.name for path in (tmp_path / "images").iterdir())
    # one gallery image (the unmanaged figure: pyplot's is left to the matplotlib scraper), and a stable
    # name for each of the two figures, the first name bound to a figure winning
    assert saved == ["plot_x-ax_b.png", "plot_x-fig_a.png", "sphx_glr_plot_x_001.png"]
    assert "sphx_glr_plot_x_001.png" in rst and again == ""


def test_the_api_reference_lists_the_figure_and_sklearn_modules():
    conf = _conf()
    entries = conf.api_reference_entries()
    assert conf.api_reference_gaps() == []
    for module in conf.REFERENCE_MODULES:
        assert sorted(entries[module]) == sorted(importlib.import_module(module).__all__)
    api = (DOCS / "api.rst").read_text(encoding="utf-8")
    assert ":no-index:" not in api  # every documented name has its entry in the general index


def test_the_api_reference_check_finds_a_missing_name(tmp_path, monkeypatch):
    conf = _conf()
    page = tmp_path / "api.rst"
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    page.write_text(text.replace("   flexible_curve_figure\n", ""), encoding="utf-8")
    assert "flexible_curve_figure" not in conf.api_reference_entries(page)["calibtest.reporting.plotting"]
    monkeypatch.setattr(conf, "api_reference_entries", lambda path=None, _real=conf.api_reference_entries: _real(page))
    gaps = conf.api_reference_gaps()
    assert len(gaps) == 1 and "flexible_curve_figure" in gaps[0] and "calibtest.reporting.plotting" in gaps[0]


def test_api_reference_parser_reads_current_modules(tmp_path):
    page = tmp_path / "api.rst"
    page.write_text(".. autosummary::\n\n   calib_ci\n\n.. currentmodule:: calibtest.sklearn\n\n.. autosummary::\n"
                    "   :toctree: generated\n\n   ece_score\n", encoding="utf-8")
    assert _conf().api_reference_entries(page) == {"calibtest": ["calib_ci"], "calibtest.sklearn": ["ece_score"]}
    assert _conf().api_reference_names(page) == ["calib_ci"]


def test_the_site_stylesheet_keeps_tables_in_their_column():
    conf = _conf()
    assert "calibtest.css" in conf.html_css_files and conf.html_static_path == ["_static"]
    css = (DOCS / "_static" / "calibtest.css").read_text(encoding="utf-8")
    assert re.search(r"table\.docutils[^{]*\{[^}]*overflow-x:\s*auto", css)
    assert re.search(r"span\.pre[^{]*\{[^}]*overflow-wrap:\s*anywhere", css)


# --------------------------------------------------------------------------- the built pages in a browser

#: Three pages with wide content: the scikit-learn table, the figures, a gallery example's output.
SCREENSHOT_PAGES = ("sklearn.html", "figures.html", "auto_examples/plot_breast_cancer.html")
WINDOW_WIDTH = 1200

_PROBE = """<script>
window.addEventListener('load', function () {
  var column = document.querySelector('div.body') || document.body;
  var right = column.getBoundingClientRect().right;
  var out = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
             columnRight: right, tables: []};
  document.querySelectorAll('table').forEach(function (t) {
    var box = t.getBoundingClientRect();
    out.tables.push({right: box.right, scrollWidth: t.scrollWidth, clientWidth: t.clientWidth});
  });
  var pre = document.createElement('pre');
  pre.id = 'overflow-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str | None:
    import shutil
    return next((path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))),
                None)


def _browser(browser: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--window-size={WINDOW_WIDTH},1600", "--virtual-time-budget=5000", *args],
                          capture_output=True, text=True, timeout=120)


def page_overflow(browser: str, page: Path, work: Path) -> list[str]:
    """What is wider than its place on a page at 1200 px: the page itself, a table beyond the text
    column, or a table whose content overflows its box (measured by headless Chromium; empty: nothing)."""
    import json
    html = page.read_text(encoding="utf-8")
    html = html.replace("<head>", f'<head><base href="{page.parent.as_uri()}/">', 1).replace("</body>", _PROBE + "</body>")
    probe = work / f"probe-{page.stem}.html"
    probe.write_text(html, encoding="utf-8")
    dom = _browser(browser, "--dump-dom", probe.as_uri()).stdout
    match = re.search(r'id="overflow-probe">([^<]*)<', dom)
    assert match, f"the probe did not run on {page.name}: {dom[-500:]}"
    out = json.loads(match.group(1).replace("&quot;", '"'))
    problems = []
    if out["scrollWidth"] > out["innerWidth"]:
        problems.append(f"{page.name}: the page is {out['scrollWidth']} px wide in a {out['innerWidth']} px window")
    for i, table in enumerate(out["tables"]):
        if table["right"] > out["columnRight"] + 1:
            problems.append(f"{page.name}: table {i + 1} runs {table['right'] - out['columnRight']:.0f} px past its column")
        if table["scrollWidth"] > table["clientWidth"] + 1:
            problems.append(f"{page.name}: table {i + 1} is {table['scrollWidth']} px wide in a {table['clientWidth']} px box")
    return problems


@pytest.fixture(scope="module")
def browser():
    found = _chromium()
    if found is None:
        pytest.skip("no headless Chromium (chromium, chromium-browser) on PATH")
    return found


@pytest.mark.slow  # builds the site (about a minute) and starts a browser
def test_three_pages_fit_a_1200_px_window(browser, tmp_path):
    """Screenshots of three pages at 1200 px, and nothing wider than its place on them (CI runs this on the
    site it has just built, CALIBTEST_DOCS_BUILD; without Chromium it skips)."""
    import os
    built = os.environ.get("CALIBTEST_DOCS_BUILD")  # a site just built (.ci/run, after the docs build)
    if built:
        out = Path(built) if Path(built).is_absolute() else REPO / built
        assert (out / "index.html").is_file(), f"CALIBTEST_DOCS_BUILD={built} holds no built site"
    else:
        for module in ("sphinx", "sphinx_gallery", "myst_parser", "numpydoc"):
            pytest.importorskip(module)
        out = tmp_path / "html"
        build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS),
                                str(out)], capture_output=True, text=True, timeout=900, cwd=REPO)
        assert build.returncode == 0, build.stderr[-3000:]
    problems = []
    for name in SCREENSHOT_PAGES:
        page = out / name
        shot = tmp_path / f"{page.stem}.png"
        _browser(browser, f"--screenshot={shot}", page.as_uri())
        assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"no screenshot of {name}"
        assert int.from_bytes(shot.read_bytes()[16:20], "big") == WINDOW_WIDTH  # the PNG's width
        problems += page_overflow(browser, page, tmp_path)
    assert problems == []
    # the figures of the Figures page were drawn and copied into the site
    figures = (out / "figures.html").read_text(encoding="utf-8")
    images = re.findall(r'<img [^>]*src="(_images/[^"]+\.png)"', figures)
    assert len(images) >= 9 and all((out / image).is_file() for image in images)


@pytest.mark.slow  # starts a browser
def test_the_overflow_probe_finds_a_wide_table(browser, tmp_path):
    """The check above can fail: a table wider than its column, and a page wider than the window."""
    page = tmp_path / "wide.html"
    page.write_text("<html><head></head><body><div class='body' style='width: 600px'>"
                    "<table style='width: 900px'><tr><td>wide</td></tr></table></div>"
                    "<div style='width: 1500px'>x</div></body></html>", encoding="utf-8")
    problems = page_overflow(browser, page, tmp_path)
    assert len(problems) == 2
    assert "page is" in problems[0] and "past its column" in problems[1]
