"""The report's templates: at the repository's top level, shipped in the wheel, and an organisation's own
in front of them (``report(..., templates=DIR)``, ``calibtest report --templates DIR``)."""
from __future__ import annotations

import html as html_lib
import re
import tomllib
from pathlib import Path

import pytest

import calibtest as ct
from calibtest import cli
from calibtest.options import OPTIONS, OptionError, OptionTypeError
from calibtest.reporting.html import builtin_templates, render_html, report

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def result():
    return ct.calib_ci("y ~ p", data=ct.load_demo().iloc[:600])


def _text(html: str) -> str:
    body = re.sub(r"<style>.*?</style>", " ", html, flags=re.S)
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_builtin_templates_are_the_top_level_folder():
    folder = builtin_templates()
    assert folder == REPO / "templates"  # a source checkout reads the repository's templates/
    names = {p.name for p in folder.iterdir()}
    assert {"report.html", "title_page.html", "report.css", "house_style.css"} <= names
    assert not (REPO / "calibtest" / "reporting" / "templates").exists()
    # report.html includes the title page: replacing it is one file
    assert '{% include "title_page.html" %}' in (folder / "report.html").read_text(encoding="utf-8")


def test_pyproject_lists_every_package_and_ships_the_templates():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    packages = set(config["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "calibtest").rglob("__init__.py")}
    assert on_disk | {"calibtest.templates"} == packages  # a new subpackage must be added to the list
    assert config["package-dir"] == {"calibtest.templates": "templates"}
    assert "*.html" in config["package-data"]["calibtest.templates"]
    assert "*.css" in config["package-data"]["calibtest.templates"]


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_an_organisations_title_page_replaces_the_builtin_one(tmp_path, result):
    builtin = _text(render_html(result, title="Appendix B"))
    (tmp_path / "title_page.html").write_text(
        '<header class="title-block"><h1 class="doc-title">ACME Health — {{ title }}</h1>'
        '<p class="running"><span class="docid">{{ doc.document_id }}</span>'
        '<span class="docver">{{ doc.document_version }}</span></p>'
        "<p>Quality system form QF-{{ doc.document_version }}</p></header>\n", encoding="utf-8")
    text = _text(render_html(result, title="Appendix B", templates=tmp_path))
    assert "ACME Health — Appendix B" in text and "Quality system form QF-not stated" in text
    assert "ACME Health" not in builtin
    # the built-in title block (its table of document control) is gone, the rest falls back to the built-in
    assert "Document ID not stated" in builtin and "Document ID not stated" not in text
    stamp = r"\d{4}-\d\d-\d\dT[\d:]+\+00:00"  # the generation time differs between the two renderings
    assert re.sub(stamp, "", text.split("Contents", 1)[1]) == re.sub(stamp, "", builtin.split("Contents", 1)[1])


def test_house_style_and_extending_the_builtin_report(tmp_path, result):
    (tmp_path / "house_style.css").write_text("h2 { color: #7a0019; }\n", encoding="utf-8")
    (tmp_path / "report.html").write_text(
        '{% extends "calibtest/report.html" %}{% block footer %}<footer>ACME confidential</footer>'
        "{% endblock %}", encoding="utf-8")
    html = render_html(result, templates=str(tmp_path))
    css = html.split("<style>", 1)[1].split("</style>", 1)[0]
    assert css.index("h2 { color: #7a0019; }") > css.index("h2 { font-size")  # after the built-in rule
    assert "Numbers are rounded for display" in _text(render_html(result))  # the built-in footer note
    assert "<footer>ACME confidential</footer>" in html and "Numbers are rounded for display" not in _text(html)
    assert "Summary of findings" in _text(html)  # the body came from the built-in report.html


def test_an_organisations_template_is_autoescaped(tmp_path, result):
    (tmp_path / "title_page.html").write_text(
        '<h1 class="doc-title">{{ title }}</h1><p>{{ purpose }}</p>', encoding="utf-8")
    html = render_html(result, title="<script>alert(1)</script>", purpose='a "quoted" & <b>bold</b> aim',
                       templates=tmp_path)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html


def test_an_undefined_variable_names_the_template_and_line(tmp_path, result):
    (tmp_path / "title_page.html").write_text("<header>\n<h1>{{ doc.sponsor }}</h1>\n</header>\n",
                                              encoding="utf-8")
    with pytest.raises(OptionError, match=r"templates: template .*title_page\.html, line 2: undefined "
                                          r"variable: .*'sponsor'"):
        render_html(result, templates=tmp_path)
    (tmp_path / "title_page.html").write_text("<h1>{% if %}</h1>", encoding="utf-8")
    with pytest.raises(OptionError, match=r"title_page\.html, line 1: template error"):
        render_html(result, templates=tmp_path)


def test_templates_must_be_an_existing_folder(tmp_path, result):
    with pytest.raises(OptionError, match="templates must be an existing directory: .* does not exist"):
        report(result, tmp_path / "r.html", templates=tmp_path / "nowhere")
    (tmp_path / "f.html").write_text("x", encoding="utf-8")
    with pytest.raises(OptionError, match="is a file, not a directory"):
        report(result, tmp_path / "r.html", templates=tmp_path / "f.html")
    with pytest.raises(OptionTypeError, match="templates must be None or the path of an existing directory"):
        report(result, tmp_path / "r.html", templates=3)
    assert not (tmp_path / "r.html").exists()
    assert OPTIONS["templates"].default is None and OPTIONS["templates"].cli == "--templates"


def test_cli_report_templates(tmp_path, capsys):
    csv = tmp_path / "d.csv"
    ct.load_demo().iloc[:500].to_csv(csv, index=False)
    folder = tmp_path / "house"
    folder.mkdir()
    (folder / "title_page.html").write_text('<h1 class="doc-title">House title: {{ title }}</h1>',
                                            encoding="utf-8")
    out = tmp_path / "r.html"
    rc = cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(out), "--title", "T1",
                   "--templates", str(folder)])
    assert rc == 0, capsys.readouterr().err
    text = _text(out.read_text(encoding="utf-8"))
    assert "House title: T1" in text and f"--templates {folder}" in text  # in the recorded command
    with pytest.raises(SystemExit) as exc:  # argparse's usage error
        cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(out), "--templates", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--templates: must be an existing directory" in err and "Traceback" not in err
    (folder / "title_page.html").write_text("{{ nothing_here }}", encoding="utf-8")
    rc = cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(out), "--templates", str(folder)])
    err = capsys.readouterr().err
    assert rc == 2 and "title_page.html, line 1: undefined variable" in err and len(err.splitlines()) == 1
