"""Writing a report file: atomically (a failure leaves an existing file as it was), errors naming the field."""
from __future__ import annotations

import os
import re
import stat

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.reporting import document, report
from calibtest.options import OptionError, OptionTypeError
from calibtest.reporting.document import check_metadata, write_report_file
from calibtest.reporting.html import render_html

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


# ----------------------------------------------------------------------------- report() and `calibtest report`
def _listing(folder) -> list:
    """Every file and folder under ``folder`` (relative paths), to show a refusal wrote nothing."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _cli_refusal(argv, capsys) -> tuple[int, str]:
    from calibtest.cli import main
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize("option, flag, value", [
    ("hl_groups", "--hl-groups", 0), ("hl_groups", "--hl-groups", 2), ("rng", "--seed", -1)])
def test_report_refuses_the_option_values_the_cli_refuses_with_its_message(tmp_path, small_result, capsys,
                                                                           option, flag, value):
    data = tmp_path / "d.csv"
    pd.DataFrame({"y": [0, 1, 1, 0], "p": [0.2, 0.7, 0.6, 0.4]}).to_csv(data, index=False)
    before = _listing(tmp_path)
    status, err = _cli_refusal(["report", data, "--formula", "y ~ p", "-o", tmp_path / "r.html", flag, value], capsys)
    cli_text = re.search(rf"argument {flag}: (.*?) \(see", err).group(1)
    with pytest.raises(OptionError) as refused:
        report(small_result, tmp_path / "r.html", **{option: value})
    assert status == 2 and str(refused.value) == f"{option} {cli_text}"
    assert _listing(tmp_path) == before  # nothing written by either


@pytest.mark.parametrize("option, value, kind", [
    ("meta_method", "XX", OptionError), ("hartung_knapp", "yes", OptionTypeError),
    ("templates", "no-such-folder", OptionError), ("plan", "no-such-plan.json", OptionError),
    ("title", 3, OptionTypeError), ("labels", [3], OptionTypeError),
    ("source", 3, OptionTypeError), ("comparisons", 3, OptionTypeError)])
def test_report_refuses_every_bad_option_before_writing(tmp_path, small_result, option, value, kind, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(kind, match=option):
        report(small_result, "r.html", **{option: value})
    assert _listing(tmp_path) == []


@pytest.mark.parametrize("make", ["missing", "file"])
def test_report_path_through_a_folder_the_os_cannot_enter_is_refused(tmp_path, small_result, capsys, monkeypatch,
                                                                     make):
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"y": [0, 1, 1, 0], "p": [0.2, 0.7, 0.6, 0.4]}).to_csv("d.csv", index=False)
    if make == "file":
        (tmp_path / "nosub").write_text("a file, not a folder")
    target = os.path.join("nosub", "..", "r.html")  # lexically ./r.html; the OS resolves 'nosub' first
    with pytest.raises(OSError):
        open(target, "w")  # the OS refuses it
    before = _listing(tmp_path)
    what = "does not exist" if make == "missing" else "is not a folder"
    with pytest.raises(OptionError) as refused:
        report(small_result, target)
    assert str(refused.value) == f"path {target!r} cannot be written: the folder 'nosub' {what}; nothing was written"
    status, err = _cli_refusal(["report", "d.csv", "--formula", "y ~ p", "-o", target], capsys)
    assert status == 2 and f"-o/--output {target!r} cannot be written: the folder 'nosub' {what}" in err
    assert _listing(tmp_path) == before  # no report, no temporary file, no bins CSV file
    with pytest.raises(OptionError, match="the folder 'nosub'"):
        write_report_file(target, "<html></html>")  # the writer itself resolves the path as the OS does
    assert _listing(tmp_path) == before


def test_report_path_through_an_existing_folder_and_dotdot_is_written(tmp_path, small_result, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    out = report(small_result, os.path.join("sub", "..", "r.html"))  # the OS accepts it: ./r.html
    assert (tmp_path / "r.html").read_bytes() == out.read_bytes() and _listing(tmp_path) == ["r.html", "sub"]


# --------------------------------------------------------------------------- the machine-readable result
ACCEPTANCE = {"ece_below": 0.1, "citl_within": [-0.2, 0.2], "slope_within": [0.8, 1.25], "oe_within": [0.8, 1.25]}


def _embedded_record(html: str) -> dict:
    """The JSON the report links as result-1-*.json (a base64 data URI), parsed."""
    import base64
    import json

    links = re.findall(r'download="(result-1-[^"]+\.json)" href="data:application/json;charset=utf-8;base64,'
                       r'([^"]+)"', html)
    assert len(links) == 1, links
    return json.loads(base64.b64decode(links[0][1]).decode("utf-8"))


def _same(a, b) -> bool:
    """JSON value a equals the Python value b (NaN and None alike)."""
    if b is None or (isinstance(b, float) and np.isnan(b)):
        return a is None
    return a == b


def _check_record(record: dict, res, acceptance_plan):
    ev = res.evidence()
    assert record["verdict"] == ev.verdict
    table = record["evidence"]
    assert table["rows"] == list(ev.table.index) and table["conclusion"] == ev.conclusion()
    for key, row in ev.table.iterrows():  # every row of the evidence table, from the result's own table
        for col in ("statistic", "pvalue", "lower", "upper", "reject", "verdict"):
            assert _same(table[f"{key}_{col}"], row[col]), (key, col)
    acc = res.acceptance(acceptance_plan.acceptance, alpha=acceptance_plan.alpha, primary=acceptance_plan.primary,
                         model="The model")
    got = record["acceptance"]
    assert [r["criterion"] for r in got["criteria"]] == list(acc.table["criterion"])
    for r, (_, row) in zip(got["criteria"], acc.table.iterrows()):
        for col in ("estimate", "ci_lower", "ci_upper", "pvalue", "verdict", "lower_limit", "upper_limit"):
            assert _same(r[col], row[col]), (r["criterion"], col)
    assert record["estimate"] == res.estimate and record["ci_upper"] == res.conf_int().upper  # to_dict() kept


def test_the_embedded_result_holds_the_evidence_acceptance_and_verdict_binary(tmp_path):
    df = ct.load_demo()
    res = ct.calib_ci("y ~ p", data=df)
    plan = ct.plan(tmp_path / "plan.json", acceptance=ACCEPTANCE)
    html = render_html(res, plan=plan, figures=False)
    record = _embedded_record(html)
    assert "survival" not in record["evidence"]
    _check_record(record, res, plan)


def test_the_embedded_result_holds_the_survival_evidence(tmp_path):
    rng = np.random.default_rng(11)
    n = 800
    risk = rng.uniform(0.05, 0.6, n)
    t = rng.exponential(5 / -np.log1p(-risk))
    c = rng.uniform(0, 12, n)
    df = pd.DataFrame({"time": np.minimum(t, c), "event": (t <= c).astype(int), "risk": risk})
    res = ct.calib_ci("Surv(time, event) ~ risk", data=df, horizon=5.0)
    assert res.censored
    plan = ct.plan(tmp_path / "plan.json", acceptance=ACCEPTANCE)
    html = render_html(res, plan=plan, figures=False)
    record = _embedded_record(html)
    _check_record(record, res, plan)
    sev = res.evidence().survival
    surv = record["evidence"]["survival"]
    assert (surv["e50"], surv["e90"], surv["emax"]) == (sev.curve.e50, sev.curve.e90, sev.curve.emax)
    assert surv["flexible_estimate"] == sev.curve.ici and surv["auc_estimate"] == sev.auc
    assert surv["auc_se"] == sev.auc_se and surv["gnd_unreliable"] == sev.gnd_unreliable
    assert surv["groups_observed"] == sev.groups["observed"].tolist()
    assert {"auc", "gnd", "observed_expected"} <= set(record["evidence"]["rows"])
