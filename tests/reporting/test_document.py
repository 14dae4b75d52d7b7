"""Writing a report file: atomically (a failure leaves an existing file as it was), errors naming the field."""
from __future__ import annotations

import os
import stat

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.reporting import document, report
from calibtest.reporting.document import check_metadata, write_report_file

OLD = b"<html>the report approved last week</html>\n"


def _weasyprint_or_skip():
    """WeasyPrint, or skip the test (it is missing, or present without the Pango library)."""
    try:
        import weasyprint
    except (ImportError, OSError) as exc:
        pytest.skip(f"WeasyPrint unavailable: {exc}")
    return weasyprint


@pytest.fixture(scope="module")
def small_result():
    rng = np.random.default_rng(11)
    p = rng.uniform(0.05, 0.95, 300)
    y = (rng.random(300) < p).astype(int)
    return ct.calib_ci("y ~ p", data=pd.DataFrame({"y": y, "p": p}))


def _existing(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(OLD)
    return path


def _untouched(path):
    """The file holds the old bytes and nothing else is left in its directory (no temporary file)."""
    assert path.read_bytes() == OLD
    assert sorted(os.listdir(path.parent)) == [path.name]


@pytest.mark.parametrize("suffix", ["html", "pdf"])
def test_unencodable_metadata_leaves_the_existing_report_and_names_the_field(tmp_path, small_result, suffix):
    if suffix == "pdf":
        _weasyprint_or_skip()
    path = _existing(tmp_path, f"report.{suffix}")
    with pytest.raises(ValueError, match=r"metadata\['author'\] holds a character that cannot be encoded: "
                                         r"'\\ud800' at position 2"):
        report(small_result, path, metadata={"author": "A \ud800 B"})
    _untouched(path)


@pytest.mark.parametrize("kwargs, field", [
    ({"title": "Report \udcff"}, "title"),
    ({"purpose": "\ud800"}, "purpose"),
    ({"labels": ["ok \ud83d"]}, r"labels\[0\]"),
    ({"metadata": {"revisions": [{"version": "1", "date": "2026-01-01", "description": "x\ud800"}]}},
     r"metadata\['revisions'\]\[0\]\['description'\]"),
])
def test_every_free_text_names_its_field(tmp_path, small_result, kwargs, field):
    path = _existing(tmp_path, "report.html")
    with pytest.raises(ValueError, match=field + " holds a character that cannot be encoded"):
        report(small_result, path, **kwargs)
    _untouched(path)


def test_metadata_check_names_the_field():
    with pytest.raises(ValueError, match=r"metadata\['model_name'\] holds a character"):
        check_metadata({"model_name": "\udc80"})
    assert check_metadata({"model_name": "Modèle ✓ 😀"})["model_name"] == "Modèle ✓ 😀"  # valid UTF-8 is kept


def test_html_report_failing_at_the_write_leaves_the_existing_file(tmp_path, small_result, monkeypatch):
    path = _existing(tmp_path, "report.html")

    def fail(src, dst):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(document.os, "replace", fail)
    with pytest.raises(OSError, match="simulated"):
        report(small_result, path)
    _untouched(path)


def test_pdf_report_failing_mid_render_leaves_the_existing_file(tmp_path, small_result, monkeypatch):
    weasyprint = _weasyprint_or_skip()
    path = _existing(tmp_path, "report.pdf")

    def half_written(self, target, **kwargs):
        with open(target, "wb") as fh:
            fh.write(b"%PDF-1.7 truncated")
        raise RuntimeError("renderer crashed (simulated)")

    monkeypatch.setattr(weasyprint.HTML, "write_pdf", half_written)
    with pytest.raises(RuntimeError, match="simulated"):
        report(small_result, path)
    _untouched(path)


def test_a_successful_report_replaces_the_file_and_keeps_its_permissions(tmp_path, small_result):
    path = _existing(tmp_path, "report.html")
    os.chmod(path, 0o640)
    out = report(small_result, path, metadata={"author": "A. Statistician"})
    assert out == path
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "A. Statistician" in text
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["report.html"]


def test_a_new_file_gets_the_permissions_of_a_new_file(tmp_path):
    probe = tmp_path / "probe"
    probe.write_text("x")
    write_report_file(tmp_path / "new.html", "<html></html>")
    assert (tmp_path / "new.html").read_bytes() == b"<html></html>"
    assert stat.S_IMODE(os.stat(tmp_path / "new.html").st_mode) == stat.S_IMODE(os.stat(probe).st_mode)


@pytest.mark.parametrize("pdf", [False, True])
def test_write_report_file_refuses_unencodable_html_before_creating_anything(tmp_path, pdf):
    path = _existing(tmp_path, "r.pdf" if pdf else "r.html")

    def never(source, target):
        raise AssertionError("the renderer must not run")

    with pytest.raises(ValueError, match=r"cannot be encoded: '\\udfff' in '<p>caf\\udfff</p>'"):
        write_report_file(path, "<p>caf\udfff</p>", never if pdf else None)
    _untouched(path)


def test_write_report_file_removes_its_temporary_file_on_interrupt(tmp_path):
    path = _existing(tmp_path, "r.pdf")

    def interrupted(source, target):
        with open(target, "wb") as fh:
            fh.write(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_report_file(path, "<html></html>", interrupted)
    _untouched(path)


def test_a_symbolic_link_is_written_through(tmp_path):
    real = _existing(tmp_path, "approved.html")
    link = tmp_path / "latest.html"
    link.symlink_to(real.name)
    write_report_file(link, "<html>new</html>")
    assert link.is_symlink() and real.read_bytes() == b"<html>new</html>"
    assert sorted(os.listdir(tmp_path)) == ["approved.html", "latest.html"]
