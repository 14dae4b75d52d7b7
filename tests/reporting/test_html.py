"""HTML/PDF reports: structure, numbers, escaping, figures, PDF text, CLI and the installed wheel.

The HTML is parsed with the standard library's ``html.parser``; the numbers
are those of ``res.to_dict()`` formatted as the report formats them
(``calibtest.display.summary.fmt``: 6 significant digits, p-values 4); the PNG size is
read from the IHDR chunk and compared with the hand-computed pixel size
(inches x 120 dpi).
"""
from __future__ import annotations

import base64
import hashlib
import importlib
import io
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest import cli
from calibtest.datasets import load_demo
from calibtest.reporting.html import render_html, report
from calibtest.checks.evidence_table import conclude
from report_helpers import bins_csv
from calibtest.display.format import fmt

REPO = Path(__file__).resolve().parents[2]

VOID = {"meta", "img", "br", "hr", "link", "input", "col", "area", "base", "source", "wbr"}


class _Doc(HTMLParser):
    """Collects text, tags, attributes and images; checks that tags are balanced."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []
        self.images: list[str] = []
        self.conclusions: list[str] = []
        self._in_conclusion = 0
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            self.attrs.append((tag, name, value))
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))
        if tag not in VOID:
            self.stack.append(tag)
            if tag == "div" and "conclusion" in (dict(attrs).get("class") or ""):
                self._in_conclusion = len(self.stack)
                self.conclusions.append("")

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
            return
        if self._in_conclusion == len(self.stack):
            self._in_conclusion = 0
        self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1] in ("style", "title"):
            return
        self.text.append(data)
        if self._in_conclusion:
            self.conclusions[-1] += data

    @property
    def body_text(self) -> str:
        return re.sub(r"\s+", " ", " ".join(self.text))


def _weasyprint_or_skip():
    """WeasyPrint, or skip the test (it is missing, or present without the Pango library)."""
    try:
        import weasyprint
    except (ImportError, OSError) as exc:
        pytest.skip(f"WeasyPrint unavailable: {exc}")
    return weasyprint


def parse(html: str) -> _Doc:
    doc = _Doc()
    doc.feed(html)
    doc.close()
    assert not doc.errors, doc.errors[:5]
    assert not doc.stack, f"unclosed tags {doc.stack}"
    return doc


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def decode_images(doc: _Doc) -> list[bytes]:
    out = []
    for src in doc.images:
        assert src.startswith("data:image/png;base64,"), src[:40]
        out.append(base64.b64decode(src.split(",", 1)[1]))
    return out


@pytest.fixture(scope="module")
def demo():
    return load_demo()


@pytest.fixture(scope="module")
def demo_result(demo):
    return ct.calib_ci("y ~ p", data=demo)


@pytest.fixture(scope="module")
def demo_html(demo_result):
    return render_html(demo_result, title="Demo validation", purpose="Held-out check of a risk model.")


@pytest.fixture(scope="module")
def miscalibrated():
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, 800)
    y = (rng.random(800) < np.clip(p + 0.15, 0, 1)).astype(int)
    return ct.calib_ci("y ~ p", data=pd.DataFrame({"y": y, "p": p}))


NUMBER_KEYS = ("estimate", "ece", "ci_lower", "ci_upper", "ece_ci_lower", "ece_ci_upper", "sigma1_sq",
               "sigma0_sq", "se", "threshold", "plugin_estimate", "estimate_pos", "bin_volume", "bin_width",
               "n", "n_bins", "n_occupied_bins", "n_singleton_bins", "alpha")


def test_every_listed_reference_is_cited(demo_html):
    # the reference list is an ordered list: entry k is cited as [k] in the text before it
    head, refs = demo_html.split('<ol class="refs">', 1)
    listed = refs.split("</ol>", 1)[0].count("<li>")
    cited = {int(k) for k in re.findall(r"\[(\d+)\]", re.sub(r"<[^>]+>", " ", head))}
    assert listed >= 9
    assert set(range(1, listed + 1)) <= cited, sorted(set(range(1, listed + 1)) - cited)


def test_html_parses_and_shows_the_numbers(demo_result, demo_html):
    # one notation: the sentences shared with the console summary are typeset (ECE², not ECE^2)
    assert "ECE^2" in str(demo_result.summary()) and "ECE^2" not in demo_html and "ECE²" in demo_html
    doc = parse(demo_html)
    text = doc.body_text
    d = demo_result.to_dict()
    for key in NUMBER_KEYS:
        assert fmt(d[key]) in text, (key, fmt(d[key]))
    assert fmt(d["null_pvalue"], 4) in text
    assert fmt(d["null_zstat"], 4) in text
    interval = f"[{fmt(d['ci_lower'])}, {fmt(d['ci_upper'])}]"
    assert interval in text
    assert f"[{fmt(d['ece_ci_lower'])}, {fmt(d['ece_ci_upper'])}]" in text
    for section in ("Demo validation", "Held-out check of a risk model.", "Settings", "Provenance",
                    "Hosmer–Lemeshow", "rms::val.prob", "Bins of the estimator", "Methods", "Limitations",
                    "A Confidence Interval for the ℓ2 Expected Calibration Error", "independent"):
        assert section in text, section
    # the call, n and the versions of the numerical stack
    assert demo_result.call in text
    import scipy
    import statsmodels
    for version in (ct.__version__, np.__version__, scipy.__version__, statsmodels.__version__):
        assert version in text
    # every occupied bin is a row of the linked bin table, at full precision; its terms sum to T
    table = demo_result.bin_table()
    name, attached = bins_csv(demo_html)
    assert name == "result-1-p-bins.csv" and name in text
    assert list(attached["bin"]) == [k[0] for k in table["bin"]]
    for col in ("lower", "upper", "count", "mean_pred", "mean_outcome", "contribution"):
        assert np.array_equal(attached[col].to_numpy(), table[col].to_numpy()), col
    assert attached["contribution"].sum() == pytest.approx(demo_result.estimate, rel=1e-12, abs=1e-15)
    counts = table["count"].to_numpy()
    assert f"{int(counts.min())}, {fmt(float(np.median(counts)))}, {int(counts.max())}" in text
    assert f"{int(np.sum(counts == 1))} (" in text and demo_result.n_singleton_bins == int(np.sum(counts == 1))


def test_hosmer_lemeshow_and_valprob_numbers(demo, demo_result, demo_html):
    from calibtest.display.format import fmt_p
    from calibtest.checks.val_prob import val_prob
    text = parse(demo_html).body_text
    hl = demo_result.hosmer_lemeshow(10)
    assert fmt(hl.statistic) in text and fmt(hl.pvalue, 4) in text
    # the report's HL p-value is the external-validation one (df = g), and says so
    assert hl.validation == "external" and hl.df == 10
    assert "chi-square with df = g = 10 (external validation" in text
    assert f"p-value, df = 10 (the reference above) {fmt_p(hl.pvalue)}" in text
    assert f"df = g - 2 (development-data reference, for comparison) {fmt_p(hl.pvalue_df_groups_minus_2)}" in text
    assert fmt(hl.plugin_estimate_groups) in text and fmt(hl.debiased_estimate_groups) in text
    v = val_prob(demo["p"].to_numpy(), demo["y"].to_numpy(), alpha=0.05)
    for value in (v.brier, v.c_statistic, v.slope, v.intercept, v.citl, v.eavg, v.spiegelhalter_z):
        assert fmt(value, 4) in text
    assert f"[{fmt(v.slope_ci[0], 4)}, {fmt(v.slope_ci[1], 4)}]" in text


def test_valprob_metrics_with_predictions_exactly_one():
    # confidences of 1.0 (common in ImageNet top-1 files) no longer drop the val.prob section
    from calibtest.checks.val_prob import val_prob
    rng = np.random.default_rng(12)
    p = rng.uniform(0.2, 0.95, size=400)
    p[:15] = 1.0
    y = (rng.uniform(size=400) < np.minimum(p, 0.97)).astype(int)
    res = ct.calib_ci(y=y, probs=p, n_bins=10)
    text = " ".join(parse(render_html(res)).body_text.split())
    assert "not computed" not in text
    v = val_prob(p, y)
    assert v.n_infinite_logit == 15
    for value in (v.brier, v.slope, v.citl, v.eavg):
        assert fmt(value, 4) in text
    assert "15 rows have p exactly 0 or 1 (infinite logit)" in text
    assert "use the other 385 rows" in text


def test_conclusion_wording(demo_result, demo_html, miscalibrated):
    doc = parse(demo_html)
    assert len(doc.conclusions) == 1
    c = re.sub(r"\s+", " ", doc.conclusions[0])
    assert demo_result.contains_zero
    assert "No evidence of miscalibration at level 0.05" in c
    # the report writes no conclusion of its own: the sentence is the one of calibtest.checks.evidence_table.conclude
    assert c == "Interval and test at the report's bins. " + conclude(demo_result)[1].replace("^2", "²")
    # "calibrated" is only ever negated
    assert "does not show that the model is calibrated" in c
    assert c.count("is calibrated") == 1
    assert "[0, 0.0484]" in c  # 3 significant digits of sqrt(ci_upper)
    assert fmt(demo_result.conf_int(scale="ece").upper, 3) == "0.0484"

    assert not miscalibrated.contains_zero
    doc2 = parse(render_html(miscalibrated))
    c2 = re.sub(r"\s+", " ", doc2.conclusions[0])
    ci = miscalibrated.conf_int(scale="ece")
    assert "Evidence of miscalibration" in c2 and "No evidence" not in c2 and "is calibrated" not in c2
    assert f"[{fmt(ci.lower, 3)}, {fmt(ci.upper, 3)}]" in c2


def test_self_contained_and_figure_size(demo_html):
    doc = parse(demo_html)
    assert "script" not in doc.tags and "link" not in doc.tags and "iframe" not in doc.tags
    for tag, name, value in doc.attrs:
        assert not name.startswith("on"), (tag, name)
        if name in ("src", "href"):
            assert value.startswith("data:") or value.startswith("#"), value[:40]
    assert "http://" not in demo_html.split("<body>")[0] and "@import" not in demo_html
    images = decode_images(doc)
    # flexible curve, display-bin reliability diagram, prediction strip, bin sensitivity
    assert len(images) == 4
    import matplotlib.image as mpimg
    for image in images:
        width, height = png_size(image)
        assert width >= 600 and height >= 300
        pixels = mpimg.imread(io.BytesIO(image), format="png")
        assert pixels.std() > 0.05  # not a blank image


def test_topk_report_has_one_panel_per_coordinate():
    rng = np.random.default_rng(11)
    probs = rng.dirichlet([1.5, 1.0, 1.0], size=300)
    labels = (rng.random(300)[:, None] > probs.cumsum(axis=1)).sum(axis=1)
    res = ct.calib_ci(y=labels, probs=probs, k=2, n_bins=4)
    doc = parse(render_html(res))
    images = decode_images(doc)
    # the display-bin reliability diagram and the bin sensitivity (no flexible curve or strip for top-k)
    assert len(images) == 2
    text = doc.body_text
    assert "display bins" in text and "Bin sensitivity of probs" in text
    ev = res.evidence()
    assert "Table 1. Evidence on the calibration" in text and ev.conclusion().split(":")[0] in text
    assert "Hosmer" not in text.split("Methods")[0]  # HL and val.prob only for 1-dim targets
    # the linked bin table has the bin index, edges and means of both coordinates
    _, bins = bins_csv(render_html(res))
    assert list(bins.columns[:2]) == ["bin_1", "bin_2"]
    assert {"mean_pred_1", "mean_outcome_1", "mean_pred_2", "mean_outcome_2"} <= set(bins.columns)
    assert list(zip(bins["bin_1"], bins["bin_2"])) == [tuple(k) for k in res.bin_table()["bin"]]
    assert fmt(res.estimate) in text


def test_autoescaping_of_names_title_and_file(tmp_path):
    rng = np.random.default_rng(5)
    p = rng.uniform(0.1, 0.9, 200)
    evil_col = '<script>alert("p")</script>'
    df = pd.DataFrame({"y'\"<b>": (rng.random(200) < p).astype(int), evil_col: p})
    res = ct.calib_ci("Q('y\\'\"<b>') ~ Q('<script>alert(\"p\")</script>')", data=df)
    title = '<script>alert(1)</script> "quoted" & \'single\''
    source = {"file": 'data"<script>x</script>.csv', "sha256": "0" * 64}
    out = report(res, tmp_path / "evil.html", title=title, purpose="<img src=x onerror=alert(1)>",
                 source=source, labels=['"><script>bad()</script>'])
    html = out.read_text(encoding="utf-8")
    doc = parse(html)
    assert "script" not in doc.tags
    assert doc.tags.count("img") == 4  # only the figures, not the purpose's <img>
    for tag, name, value in doc.attrs:
        assert not name.startswith("on"), (tag, name)
    text = doc.body_text
    assert title in text
    assert "<img src=x onerror=alert(1)>" in text
    assert 'data"<script>x</script>.csv' in text
    assert evil_col in text and "<script>bad()</script>" in text
    assert "&lt;script&gt;" in html and "<script>" not in html


def test_multi_model_report_with_comparisons(demo):
    df = demo.assign(q=np.clip(demo["p"] * 1.25, 0.001, 0.999))
    a = ct.calib_ci("y ~ p", data=df)
    b = ct.calib_ci("y ~ q", data=df)

    class FakeComparison:  # the to_dict() layout of calibtest.calib_compare's ComparisonResult
        def to_dict(self):
            return {"estimate": a.estimate - b.estimate, "estimate_a": a.estimate, "estimate_b": b.estimate,
                    "se": 0.00123456, "statistic": -2.5, "pvalue": 0.0124, "alternative": "two-sided",
                    "alpha": 0.05, "ci_lower": -0.0111, "ci_upper": -0.00222, "paired": True,
                    "pairing": "formula", "name_a": "p", "name_b": "q", "notes": ["paired <note>"]}

    class FakePairwise:
        def to_dict(self):
            return {"names": ["p", "q"], "alpha": 0.05, "alternative": "two-sided", "correction": "holm",
                    "comparisons": [{"model_a": "p", "model_b": "q", "estimate": -0.00765432, "se": 0.002,
                                     "statistic": -3.8, "pvalue": 0.000145, "pvalue_holm": 0.00029,
                                     "reject": True, "ci_lower": -0.0116, "ci_upper": -0.0037, "paired": True}]}

    html = render_html([a, b], comparisons=[FakeComparison(), FakePairwise()], title="Two models")
    doc = parse(html)
    text = doc.body_text
    images = decode_images(doc)
    assert len(images) == 9  # overlaid flexible curves + four per model
    for res in (a, b):
        assert fmt(res.estimate) in text and fmt(res.ci_upper) in text
    assert fmt(a.estimate - b.estimate) in text and "0.00123456" in text and "0.0124" in text
    assert "-0.00765432" in text and "0.00029" in text
    assert "paired <note>" in text
    assert "Model: p (y ~ p)" in text and "Model: q (y ~ q)" in text
    assert "not adjusted for multiplicity" in text


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_real_calib_compare_if_available(demo):
    if not hasattr(ct, "calib_compare"):
        pytest.skip("calibtest.calib_compare is not on this branch")
    df = demo.assign(q=np.clip(demo["p"] * 1.25, 0.001, 0.999))
    cmp = ct.calib_compare("y ~ p", "y ~ q", data=df)
    text = parse(render_html([cmp.result_a, cmp.result_b], comparisons=cmp)).body_text
    d = cmp.to_dict()
    assert fmt(d["estimate"]) in text and fmt(d["pvalue"], 4) in text


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_pdf_text_has_estimate_and_interval(tmp_path):
    pytest.importorskip("pypdf")
    _weasyprint_or_skip()
    from pypdf import PdfReader
    rng = np.random.default_rng(2)
    p = rng.uniform(0.05, 0.95, 150)
    res = ct.calib_ci(y=(rng.random(150) < p).astype(int), probs=p, n_bins=5)
    out = res.report(tmp_path / "r.pdf", title="PDF check")
    reader = PdfReader(str(out))
    assert len(reader.pages) >= 2
    text = re.sub(r"\s+", " ", " ".join(page.extract_text() for page in reader.pages))
    assert "PDF check" in text
    assert fmt(res.estimate) in text
    d = res.to_dict()
    assert f"[{fmt(d['ci_lower'])}, {fmt(d['ci_upper'])}]" in text
    assert f"[{fmt(d['ece_ci_lower'])}, {fmt(d['ece_ci_upper'])}]" in text


def test_missing_weasyprint_names_the_extra(tmp_path, monkeypatch, demo_result):
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # makes "import weasyprint" raise ImportError
    with pytest.raises(ImportError, match=re.escape('pip install "calibtest[pdf]"')):
        demo_result.report(tmp_path / "x.pdf")
    assert not (tmp_path / "x.pdf").exists()


def test_bad_arguments(tmp_path, demo_result):
    with pytest.raises(ValueError, match=r"\.html, \.htm or \.pdf"):
        report(demo_result, tmp_path / "x.docx")
    with pytest.raises(TypeError, match="CalibrationResult"):
        report([demo_result, "nope"], tmp_path / "x.html")
    with pytest.raises(ValueError, match="one name per result"):
        report(demo_result, tmp_path / "x.html", labels=["a", "b"])
    with pytest.raises(TypeError, match="calib_compare"):
        report(demo_result, tmp_path / "x.html", comparisons=[object()])


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_top_level_function_and_method_write_the_same_report(tmp_path, miscalibrated):
    a = ct.report(miscalibrated, tmp_path / "a.html", title="Same")
    b = miscalibrated.report(tmp_path / "b.html", title="Same")
    strip = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d|data:image/png;base64,[A-Za-z0-9+/=]+")
    assert strip.sub("", a.read_text()) == strip.sub("", b.read_text())


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_cli_report_records_file_hash_and_command(tmp_path, demo, monkeypatch, capsys):
    csv = tmp_path / "demo data.csv"
    demo.to_csv(csv, index=False)
    digest = hashlib.sha256(csv.read_bytes()).hexdigest()
    out = tmp_path / "out.html"
    seen = {}
    ece = importlib.import_module("calibtest.api.calib_ci")  # the CLI imports calib_ci from it when a command runs
    real = ece.calib_ci

    def spy(*args, **kwargs):
        seen.clear()
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ece, "calib_ci", spy)
    rc = cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(out), "--title", "CLI <report>",
                   "--bins", "20", "--alpha", "0.1"])
    assert rc == 0 and out.exists()
    assert seen["method"] == "adjusted" and seen["n_bins"] == 20 and seen["alpha"] == 0.1
    text = parse(out.read_text()).body_text
    assert digest in text and str(csv) in text and "CLI <report>" in text
    assert "calibtest report" in text and "--bins 20 --alpha 0.1 --method adjusted" in text
    assert f"'{csv}'" in text  # the path with a space is shell-quoted
    res = real("y ~ p", data=demo, n_bins=20, alpha=0.1)
    assert fmt(res.estimate) in text and fmt(res.ci_upper) in text
    rc = cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(tmp_path / "o.html"), "--method", "bootstrap"])
    assert seen["method"] == "bootstrap" and rc == 0 and (tmp_path / "o.html").exists()
    rc = cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(tmp_path / "o.txt")])
    assert rc == 2 and ".html, .htm or .pdf" in capsys.readouterr().err


# Lines of pip's output that mean "the package index could not be reached" (urllib3/requests/socket
# errors as pip prints them while retrying), as opposed to a real resolution or install error.
_PIP_OFFLINE_MARKERS = (
    "Failed to establish a new connection", "Temporary failure in name resolution",
    "Name or service not known", "nodename nor servname", "Network is unreachable", "No route to host",
    "Connection refused", "NewConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ProxyError",
    "Max retries exceeded", "Could not fetch URL",
)


@pytest.mark.slow
def test_wheel_ships_templates_and_renders_in_a_fresh_venv(tmp_path):
    """Build the wheel, install it with its dependencies into a plain venv and render a report there.

    The venv has no ``--system-site-packages``: it must not see the base interpreter (a bare
    Python on CI) nor the test environment, so ``pip install <wheel>`` resolves numpy, scipy,
    pandas, patsy, statsmodels, matplotlib and jinja2 from the package index.  If the index
    cannot be reached the test skips and says so; any other install failure fails it.  The
    report is rendered by the venv's python from an empty directory, so neither the source
    checkout nor the build copy is on ``sys.path``.
    """
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "tests", "vignettes",
        "benchmarks"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    build = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--skip-dependency-check",
                            "--outdir", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, env=env)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("calibtest-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        css = zf.read("calibtest/templates/report.css").decode("utf-8")
    assert {"calibtest/templates/report.html", "calibtest/templates/report.css", "calibtest/templates/title_page.html",
            "calibtest/reporting/html.py", "calibtest/reporting/plotting.py",
            "calibtest/data/demo.csv", "calibtest/datasets.py"} <= names, sorted(names)
    assert not any(n.startswith(("tests/", "templates/", "vignettes/", "benchmarks/")) for n in names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)  # plain: own site-packages
    py = venv / "bin" / "python"
    # --no-compile: byte-compiling all of scipy/pandas/matplotlib/statsmodels roughly doubles the install time;
    # the few modules the script imports are compiled on import.
    install = subprocess.run([str(py), "-m", "pip", "install", "--disable-pip-version-check", "--retries", "2",
                              "--no-compile", "-q", str(wheel)], capture_output=True, text=True, env=env)
    if install.returncode != 0:
        log = install.stdout + install.stderr
        hit = next((m for m in _PIP_OFFLINE_MARKERS if m in log), None)
        if hit is not None:
            pytest.skip(f"package index unreachable, cannot install the wheel's dependencies "
                        f"(pip: {hit!r}): {log.strip().splitlines()[-1][:300]}")
        pytest.fail(f"pip install of the wheel failed:\n{log[-3000:]}")

    run_dir = tmp_path / "run"  # empty working directory: nothing importable but the venv's packages
    run_dir.mkdir()
    script = (
        "import sys, calibtest, jinja2\n"
        "from importlib.resources import files\n"
        "from calibtest.datasets import load_demo\n"
        "assert sys.prefix != sys.base_prefix, 'not in a venv'\n"
        "for mod in (calibtest, jinja2):\n"
        "    assert mod.__file__.startswith(sys.prefix), mod.__file__\n"
        "tpl = files('calibtest').joinpath('templates', 'report.html')\n"
        "assert str(tpl).startswith(sys.prefix) and tpl.is_file(), tpl\n"
        "r = calibtest.calib_ci('y ~ p', data=load_demo().iloc[:400])\n"
        "print(r.report(sys.argv[1], title='from the wheel'))\n")
    out = tmp_path / "wheel.html"
    run = subprocess.run([str(py), "-c", script, str(out)], capture_output=True, text=True, env=env,
                         cwd=str(run_dir))
    assert run.returncode == 0, run.stderr[-2000:]
    html = out.read_text(encoding="utf-8")
    doc = parse(html)
    assert "from the wheel" in doc.body_text and len(decode_images(doc)) >= 1
    assert "Settings" in doc.body_text and "Provenance" in doc.body_text
    # the stylesheet came from the installed report.css (included inline by report.html)
    rule = next(line for line in css.splitlines() if line.startswith("body {"))
    assert rule in html


def test_conclusion_sentences_for_every_case(demo_result):
    # open-at-zero interval: evidence, interval written (0, upper]
    res = demo_result.with_parts(contains_zero=False, ci_lower_open=True, ci_lower=0.0, ci_upper=0.0025,
                                  null_pvalue=0.01)
    verdict, s, reasons = conclude(res)
    assert verdict == "evidence" and reasons == ()
    assert s.startswith("Evidence of miscalibration at level 0.05") and "No evidence" not in s
    assert "(0, 0.05]" in s and "(0, 0.0025]" in s and "p = 0.01" in s
    assert "the conditional (shifted gamma) test of ECE = 0 at B = 76 rejects" in s
    # a resampling interval that excludes 0 while the test does not reject: both are stated
    res = demo_result.with_parts(method="bootstrap", contains_zero=False, ci_lower_open=False, ci_lower=0.0004,
                                  ci_upper=0.0025, null_pvalue=0.39)
    verdict, s, _ = conclude(res)
    assert verdict == "evidence"
    assert "95% bootstrap interval" in s and "[0.02, 0.05]" in s and "excludes 0" in s
    assert "does not reject (p = 0.39)" in s
    # a resampling interval that contains 0: no evidence, never "is calibrated" unnegated
    res = demo_result.with_parts(method="hulc", contains_zero=True, ci_lower=0.0, null_pvalue=0.5)
    verdict, s, _ = conclude(res)
    assert verdict == "no evidence" and "does not show that the model is calibrated" in s
    assert s.count("is calibrated") == s.count("not show that the model is calibrated") == 1
    # a different alpha appears in the sentence and the level
    s = conclude(demo_result, 0.1)[1]
    assert "at level 0.1" in s and "90% interval" in s


def test_underflowed_pvalue_is_not_printed_as_zero(demo_result):
    from calibtest.reporting.html import fmt_p
    assert fmt_p(0.0) == "< 1e-300" and fmt_p(0.012345) == "0.01235" and fmt_p(None) == ""
    res = demo_result.with_parts(contains_zero=False, ci_lower=0.0001, null_pvalue=0.0)
    s = conclude(res)[1]
    assert "(p < 1e-300)" in s and "p = <" not in s and "p = 0)" not in s


# ----------------------------------------------------------------------------- document control, plan, structure
from calibtest.reporting.document import METADATA_FIELDS, check_metadata, load_metadata  # noqa: E402

FULL_META = {
    "document_id": "VAL-2026-017", "document_version": "1.1", "author": "Ann Author",
    "reviewer": "Rita Reviewer", "approver": "Abe Approver", "organisation": "Example Trust",
    "model_name": "Sepsis score", "model_version": "3.2.0", "intended_use": "Triage support",
    "population": "Adult inpatients", "outcome_definition": "Sepsis within 48 h",
    "data_source": "EHR extract", "data_period": "2024-01 to 2025-06", "inclusion_criteria": "Age 18 or more",
    "revisions": [{"version": "1.0", "date": "2026-10-01", "description": "First issue"},
                  {"version": "1.1", "date": "2026-11-20", "description": "Added comparison"}],
}


def _section(doc_text: str, start: str, end: str) -> str:
    """The text between the last ``start`` (headings also appear in the contents) and the next ``end``."""
    return doc_text.rsplit(start, 1)[1].split(end, 1)[0]


def test_every_metadata_field_is_shown_and_missing_ones_say_not_stated(demo_result):
    html = render_html(demo_result, metadata=FULL_META, figures=False)
    text = parse(html).body_text
    for key, value in FULL_META.items():
        if key == "revisions":
            for rev in value:
                assert f"{rev['version']} {rev['date']} {rev['description']}" in text
        else:
            assert value in text, key
    assert "not stated" not in text.split("Contents")[0]
    # signature block: role, name, then empty date and signature cells
    approval = _section(text, "Approval: prepared", "calibtest validation report")
    for role, name in (("Prepared by (author)", "Ann Author"), ("Reviewed by (reviewer)", "Rita Reviewer"),
                       ("Approved by (approver)", "Abe Approver")):
        assert f"{role} {name}" in approval
    # nothing given: every field shown, as "not stated" (the title block holds 8 of them, model and data 8)
    bare = parse(render_html(demo_result, figures=False)).body_text
    block = bare.split("Contents")[0]
    assert block.count("not stated") == 8 + 2  # 8 rows + the hidden running-header id and version
    model_data = _section(bare, "The model under validation and the validation data.", "Analysis plan")
    assert model_data.count("not stated") == 8
    assert "no revision history was given" in bare
    assert bare.count("Prepared by (author) not stated") == 1


def test_metadata_errors_name_the_field(tmp_path, demo_result):
    with pytest.raises(ValueError, match=r"unknown keys \['colour', 'size'\]"):
        check_metadata({"colour": "red", "size": 2, "author": "x"})
    with pytest.raises(TypeError, match=r"metadata\['document_version'\] must be a string"):
        check_metadata({"document_version": 1.0})
    with pytest.raises(ValueError, match=r"revisions'\]\[0\] must have the keys"):
        check_metadata({"revisions": [{"version": "1", "date": "2026-01-01"}]})
    with pytest.raises(TypeError, match=r"revisions'\]\[1\]\['date'\] must be a string"):
        check_metadata({"revisions": [{"version": "1", "date": "x", "description": "y"},
                                      {"version": "2", "date": 20260101, "description": "z"}]})
    with pytest.raises(TypeError, match="metadata must be a dict"):
        report(demo_result, tmp_path / "x.html", metadata=[("author", "x")])
    assert set(check_metadata(None)) == set(METADATA_FIELDS)


def test_load_metadata_json_and_toml(tmp_path, monkeypatch):
    import json as _json
    (tmp_path / "m.json").write_text(_json.dumps(FULL_META), encoding="utf-8")
    assert load_metadata(tmp_path / "m.json") == FULL_META
    toml = "\n".join(f'{k} = "{v}"' for k, v in FULL_META.items() if k != "revisions")
    toml += "".join(f'\n[[revisions]]\nversion = "{r["version"]}"\ndate = "{r["date"]}"\n'
                    f'description = "{r["description"]}"' for r in FULL_META["revisions"])
    (tmp_path / "m.toml").write_text(toml, encoding="utf-8")
    if sys.version_info >= (3, 11):
        assert load_metadata(tmp_path / "m.toml") == FULL_META
    from calibtest.reporting import document
    monkeypatch.setattr(document.sys, "version_info", (3, 10, 14))
    with pytest.raises(ValueError, match="TOML needs Python 3.11"):
        load_metadata(tmp_path / "m.toml")


def test_every_new_field_is_escaped(tmp_path, demo_result):
    evil = {k: f'<script>alert("{k}")</script>' for k in FULL_META if k != "revisions"}
    evil["revisions"] = [{k: f"<script>{k}()</script>" for k in ("version", "date", "description")}]
    out = report(demo_result, tmp_path / "evil.html", metadata=evil, labels=['<b onclick="x()">M</b>'])
    html = out.read_text(encoding="utf-8")
    doc = parse(html)
    assert "script" not in doc.tags and "b" not in doc.tags
    assert not any(name.startswith("on") for _, name, _ in doc.attrs)
    text = doc.body_text
    for value in list(evil.values())[:-1]:
        assert value in text
    for value in evil["revisions"][0].values():
        assert value in text
    # the author also goes into <meta name="author">, as an escaped attribute
    assert ('content="&lt;script&gt;alert(&#34;author&#34;)&lt;/script&gt;"' in html
            or 'content="&lt;script&gt;alert(&quot;author&quot;)&lt;/script&gt;"' in html)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_toc_links_and_consecutive_numbering(demo):
    df = demo.assign(q=np.clip(demo["p"] * 1.25, 0.001, 0.999))
    a, b = ct.calib_ci("y ~ p", data=df), ct.calib_ci("y ~ q", data=df)
    cmp = ct.calib_compare(a, b, names=("old", "new"))
    html = render_html([a, b], comparisons=cmp, labels=["old", "new"], metadata=FULL_META)
    doc = parse(html)
    ids = [v for tag, name, v in doc.attrs if name == "id"]
    assert len(ids) == len(set(ids))
    hrefs = [v for tag, name, v in doc.attrs if tag == "a" and name == "href"]
    toc = [v[1:] for v in hrefs if v.startswith("#")]
    assert toc and all(t in ids for t in toc)
    # the only other links are each model's machine-readable result and bin table, inside the file
    assert [v.split(",")[0] for v in hrefs if not v.startswith("#")] == [
        "data:application/json;charset=utf-8;base64", "data:text/csv;charset=utf-8;base64"] * 2
    sections = [t for t in toc if not t.startswith(("table-", "figure-"))]
    assert sections[:4] == ["summary", "model-and-data", "analysis-plan", "comparisons"]
    assert sections[-6:] == ["methods", "limitations", "software", "references", "revision-history", "approval"]
    tables = [int(i.split("-")[1]) for i in ids if i.startswith("table-")]
    figures = [int(i.split("-")[1]) for i in ids if i.startswith("figure-")]
    assert tables == list(range(1, len(tables) + 1)) and figures == list(range(1, 10))
    text = doc.body_text
    # every caption carries its number; every "Table N"/"Figure N" the text cites exists
    assert re.findall(r'<span class="label">Table (\d+)\.</span>', html) == [str(t) for t in tables]
    assert re.findall(r'<span class="label">Figure (\d+)\.</span>', html) == [str(f) for f in figures]
    assert len(re.findall(r"Table \d+\. ", text)) == len(tables)
    assert len(re.findall(r"Figure \d+\. ", text)) == len(figures)
    cited = {int(n) for n in re.findall(r"Table (\d+)", text)}
    assert cited <= set(tables) and max(cited) == len(tables)
    # the evidence tables come first, and the summary cites them
    summary = _section(text, "1. Summary of findings", "2. Model and data")
    assert "Table 1. Evidence on the calibration of old" in summary and "All tests: Table 1" in summary
    assert "Table 2. Evidence on the calibration of new" in summary
    # labels everywhere in the comparison, not the right-hand sides of the formulas
    comp = _section(text, "Comparison of the models", "Model: old")
    assert "Comparison of old with new" in comp and "Model A old" in comp and "Model B new" in comp
    assert "p vs q" not in text and "docs/" not in text and "eq. (" not in text and "case 2" not in text


def test_units_and_citations(demo_result):
    text = parse(render_html(demo_result, figures=False)).body_text
    assert "ECE is in probability units" in text and "ECE² in squared probability units" in text
    refs = text.rsplit("References", 1)[1].rsplit("Revision history", 1)[0]
    for needle in ("Sun, Y., Chaudhari, P., Barnett, I. J. and Dobriban, E. (2024)", "arXiv:2408.08998",
                   "Journal of Machine Learning Research 24(335)", "Statistics in Medicine 5(5), 421–433",
                   "10.1080/03610928008827941", "Regression Modeling Strategies", "val.prob",
                   "Journal of Clinical Epidemiology 74, 167–176", "10.1016/j.jclinepi.2015.12.005"):
        assert needle in refs, needle


def test_plan_followed_and_each_deviation(tmp_path, demo):
    res = ct.calib_ci("y ~ p", data=demo)
    plan = ct.plan(tmp_path / "plan.json")
    text = parse(render_html(res, plan=tmp_path / "plan.json", figures=False)).body_text
    assert (f"The analysis followed the pre-specified plan (SHA-256 {plan.sha256}, created {plan.created})"
            in text)
    assert "Deviations of the analysis" not in text
    none = parse(render_html(res, figures=False)).body_text
    assert "The analysis options were not pre-specified" in none
    deviating = ct.plan(tmp_path / "dev.json", alpha=0.01, n_bins=20, null="asymptotic", method="hulc",
                        k=2, n_classes=3, tests=["calib_ci", "calib_compare"], subgroups=["site", "sex"])
    text = parse(render_html(res, plan=deviating, labels=["score"], figures=False)).body_text
    table = _section(text, "Deviations of the analysis from the pre-specified plan.", "Model: score")
    expected = [("score", "significance level α (alpha)", "0.01", "0.05"),
                ("score", "bins per coordinate B (n_bins)", "20", "76 (automatic)"),
                ("score", "null distribution of the test (null)", "asymptotic", "conditional"),
                ("score", "interval method (method)", "hulc", "adjusted"),
                ("score", "top-k target k (k)", "2", "none (binary target)"),
                ("score", "number of classes K (n_classes)", "3", "not fixed in the plan"),
                ("all models", "tests to report (tests)", "calib_compare", "not reported"),
                ("score", "subgroups (subgroups)", "site, sex", "not analysed (whole sample only)")]
    for row in expected:
        assert " ".join(row) in table, row
    assert "deviated from the pre-specified plan" in text and "in 8 options" in text
    # tampered plan file
    raw = (tmp_path / "plan.json").read_text().replace('"alpha": 0.05', '"alpha": 0.01')
    (tmp_path / "bad.json").write_text(raw)
    with pytest.raises(ValueError, match="does not match its content"):
        render_html(res, plan=tmp_path / "bad.json", figures=False)
    with pytest.raises(TypeError, match="plan must be"):
        render_html(res, plan={"alpha": 0.05}, figures=False)


def test_deviation_reasons_in_the_table_and_the_statement(tmp_path, demo_result):
    plan = ct.plan(tmp_path / "plan.json", alpha=0.1, n_bins=20)
    reason = "the journal asks for <5%> levels"
    html = render_html(demo_result, plan=plan, labels=["score"], figures=False,
                       deviation_reasons={"alpha": reason})
    text = parse(html).body_text
    table = _section(text, "Deviations of the analysis from the pre-specified plan.", "Model: score")
    assert f"score significance level α (alpha) 0.1 0.05 {reason}" in table  # escaped, shown as written
    assert "score bins per coordinate B (n_bins) 20 76 (automatic) not stated" in table
    assert "in 2 options, 1 of them without a stated reason" in text
    assert "<5%>" not in html and "&lt;5%&gt;" in html
    both = parse(render_html(demo_result, plan=plan, labels=["score"], figures=False,
                             deviation_reasons={"alpha": "a", "n_bins": "b"})).body_text
    assert "in 2 options, each with the reason given" in both
    # nothing silent: a reason for a followed option, an unknown option, a non-string, no plan
    for bad, error, match in (({"k": "x"}, ValueError, "followed the plan for k"),
                              ({"bins": "x"}, ValueError, "unknown option 'bins'"),
                              ({"alpha": 1}, TypeError, r"deviation_reasons\['alpha'\]"),
                              (["alpha"], TypeError, "must be a dict")):
        with pytest.raises(error, match=match):
            render_html(demo_result, plan=plan, figures=False, deviation_reasons=bad)
    with pytest.raises(ValueError, match="needs a plan"):
        render_html(demo_result, figures=False, deviation_reasons={"alpha": "x"})


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_cli_deviation_reason(tmp_path, demo, capsys):
    csv = tmp_path / "d.csv"
    demo.to_csv(csv, index=False)
    ct.plan(tmp_path / "plan.json", alpha=0.1)
    out = tmp_path / "r.html"
    rc = cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(out), "--plan", str(tmp_path / "plan.json"),
                   "--deviation-reason", "alpha=set by the protocol amendment"])
    assert rc == 0
    text = parse(out.read_text()).body_text
    assert "significance level α (alpha) 0.1 0.05 set by the protocol amendment" in text
    assert "--deviation-reason 'alpha=set by the protocol amendment'" in text  # in the recorded command
    for args, message in ((["--deviation-reason", "alpha"], "must be OPTION=TEXT"),
                          (["--deviation-reason", "n_bins=x"], "--deviation-reason n_bins: the analysis followed"),
                          (["--deviation-reason", "alpha=a", "--deviation-reason", "alpha=b"], "given twice")):
        rc = cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(out), "--plan",
                       str(tmp_path / "plan.json")] + args)
        err = capsys.readouterr().err
        assert rc == 2 and message in err and "Traceback" not in err, err
    rc = cli.main(["report", str(csv), "--formula", "y ~ p", "-o", str(out), "--deviation-reason", "alpha=x"])
    assert rc == 2 and "needs --plan" in capsys.readouterr().err


def test_plan_sample_size_is_shown(tmp_path, demo_result):
    ct.plan(tmp_path / "p.json", sample_size={"n": 2400, "target": {"width": 0.025, "level": 0.95}})
    text = parse(render_html(demo_result, plan=tmp_path / "p.json", figures=False)).body_text
    table = _section(text, "The sample-size calculation of the analysis plan.", "Model:")
    assert "n 2400" in table and "target.width 0.025" in table and "target.level 0.95" in table


@pytest.fixture(scope="module")
def full_pdf(tmp_path_factory, demo):
    pytest.importorskip("pypdf")
    _weasyprint_or_skip()
    df = demo.assign(q=np.clip(demo["p"] * 1.25, 0.001, 0.999))
    a, b = ct.calib_ci("y ~ p", data=df), ct.calib_ci("y ~ q", data=df)
    cmp = ct.calib_compare(a, b, names=("current score", "inflated score"))
    folder = tmp_path_factory.mktemp("pdf")
    plan = ct.plan(folder / "plan.json", n_bins=20)
    out = report([a, b], folder / "full.pdf", comparisons=cmp, labels=["current score", "inflated score"],
                 metadata=FULL_META, plan=plan, title="Validation of the sepsis score",
                 purpose="External validation")
    return out, (a, b, cmp, plan)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_pdf_metadata_attachments_and_pdfa(full_pdf):
    import json as _json
    from pypdf import PdfReader
    from calibtest.display.format import json_safe
    path, (a, b, cmp, plan) = full_pdf
    reader = PdfReader(str(path))
    info = reader.metadata
    assert info.title == "Validation of the sepsis score" and info.author == "Ann Author"
    assert info.subject == "External validation" and "calibration" in info.get("/Keywords", "")
    files = reader.attachments
    assert sorted(files) == ["analysis-plan.json", "comparison-1.json", "result-1-current-score-bins.csv",
                             "result-1-current-score.json", "result-2-inflated-score-bins.csv",
                             "result-2-inflated-score.json"]
    for res, name in ((a, "result-1-current-score-bins.csv"), (b, "result-2-inflated-score-bins.csv")):
        attached = pd.read_csv(io.StringIO(files[name][0].decode("utf-8")))
        assert np.array_equal(attached["count"], res.bin_table()["count"])
        assert attached["contribution"].sum() == pytest.approx(res.estimate, rel=1e-12, abs=1e-15)
        assert name in re.sub(r"\s+", "", " ".join(p.extract_text() for p in reader.pages))
    for res, name in ((a, "result-1-current-score.json"), (b, "result-2-inflated-score.json")):
        record, own = _json.loads(files[name][0]), _json.loads(_json.dumps(json_safe(res.to_dict())))
        assert {key: record[key] for key in own} == own  # to_dict(), with the evidence, acceptance and verdict
        assert record["verdict"] == res.evidence().verdict and "evidence" in record
    assert _json.loads(files["comparison-1.json"][0])["estimate"] == cmp.estimate
    assert _json.loads(files["analysis-plan.json"][0]) == plan.to_dict()
    xmp = reader.trailer["/Root"]["/Metadata"].get_object().get_data().decode("utf-8")
    assert re.search(r"pdfaid:part(>|=\")3", xmp) and re.search(r"pdfaid:conformance(>|=\")B", xmp)
    assert reader.trailer["/Root"]["/OutputIntents"][0]["/S"] == "/GTS_PDFA1"  # the sRGB output intent


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_pdf_running_header_footer_and_toc_page_numbers(full_pdf):
    from pypdf import PdfReader
    path, _ = full_pdf
    pages = [re.sub(r"\s+", " ", p.extract_text()) for p in PdfReader(str(path)).pages]
    n = len(pages)
    for i, text in enumerate(pages, 1):
        assert "Validation of the sepsis score" in text, i
        assert "Document ID VAL-2026-017, version 1.1" in text, i
        assert f"page {i} of {n}" in text, i
    # the contents give each section's page: the heading is on that page
    toc = pages[0].split("Contents", 1)[1]
    entries = re.findall(r"(\d+)\. ([A-Z][A-Za-z ]+?|Model: [a-z ]+?) ?\.{3,} ?(\d+)", toc)
    assert len(entries) >= 10
    for number, title, page in entries:
        assert f"{number}. {title.strip()}" in pages[int(page) - 1], (number, title, page)


def test_pdf_no_word_outside_the_page(full_pdf, tmp_path):
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    path, _ = full_pdf
    out = tmp_path / "bbox.html"
    subprocess.run(["pdftotext", "-bbox", str(path), str(out)], check=True)
    html = out.read_text(encoding="utf-8")
    outside = []
    for page in re.finditer(r'<page width="([\d.]+)" height="([\d.]+)">(.*?)</page>', html, re.S):
        width, height = float(page.group(1)), float(page.group(2))
        for m in re.finditer(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>',
                             page.group(3)):
            x0, y0, x1, y1 = map(float, m.groups()[:4])
            # inside the page and inside the side margins (14 mm = 39.7 pt) of the content box
            if x0 < 39.0 or x1 > width - 39.0 or y0 < 0 or y1 > height:
                outside.append((m.group(5), x0, x1))
    assert not outside, outside[:10]


def test_pdf_pairwise_table_of_three_models_fits_the_page(tmp_path, demo):
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    _weasyprint_or_skip()
    df = demo.iloc[:1500].assign(q=lambda d: np.clip(d["p"] * 1.25, 0.001, 0.999),
                                 r=lambda d: np.clip(d["p"] * 0.8, 0.001, 0.999))
    results = [ct.calib_ci(f, data=df) for f in ("y ~ p", "y ~ q", "y ~ r")]
    names = ["baseline model", "inflated model", "deflated model"]
    pairwise = ct.calib_compare(results, names=names)
    out = report(results, tmp_path / "three.pdf", comparisons=pairwise, labels=names)
    subprocess.run(["pdftotext", "-bbox", str(out), str(tmp_path / "b.html")], check=True)
    html = (tmp_path / "b.html").read_text(encoding="utf-8")
    words = re.findall(r'<page width="([\d.]+)"|<word xMin="([\d.]+)" yMin="[\d.]+" xMax="([\d.]+)"', html)
    width = float(next(w for w, _, _ in words if w))
    outside = [(x0, x1) for _, x0, x1 in words if x0 and (float(x0) < 39.0 or float(x1) > width - 39.0)]
    assert not outside, outside[:10]
    text = subprocess.run(["pdftotext", str(out), "-"], capture_output=True, text=True, check=True).stdout
    assert "Pairwise comparison of 3 models: baseline model, inflated model, deflated model" in " ".join(text.split())


# ----------------------------------------------------------------------------- the regimes table: asymptotic numbers
def _table_rows(html: str, caption_part: str) -> dict[str, list[str]]:
    """The rows (first cell -> the other cells, as text) of the table whose caption contains ``caption_part``."""
    import html as html_lib
    for table in re.findall(r"<table[^>]*>(.*?)</table>", html, re.S):
        caption = re.search(r"<caption>(.*?)</caption>", table, re.S)
        if caption and caption_part in html_lib.unescape(re.sub(r"<[^>]+>", "", caption.group(1))):
            rows = {}
            for row in re.findall(r"<tr>(.*?)</tr>", table.split("</thead>", 1)[1], re.S):
                cells = [html_lib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", c))).strip()
                         for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
                rows[cells[0]] = cells[1:]
            return rows
    raise AssertionError(f"no table captioned {caption_part!r}")


def _number_after(text: str, marker: str) -> float:
    """The number that follows ``marker`` in ``text`` (or opens it, for an empty marker)."""
    rest = text.split(marker, 1)[1] if marker else text
    return float(re.match(r"\s*([-+0-9.e]+)", rest).group(1))


@pytest.fixture(scope="module")
def regime_results():
    rng = np.random.default_rng(21)
    n = 900
    q = rng.beta(2, 5, n)
    y = (rng.random(n) < np.clip(q * 1.15, 0, 1)).astype(int)
    frame = pd.DataFrame({"y": y, "p": q, "w": rng.gamma(2.0, 1.0, n)})
    return {"default": ct.calib_ci("y ~ p", data=frame),
            "asymptotic": ct.calib_ci("y ~ p", data=frame, null="asymptotic"),
            "weighted": ct.calib_ci("y ~ p", data=frame, weights="w", null="asymptotic"),
            "monte-carlo": ct.calib_ci("y ~ p", data=frame, null="monte-carlo", rng=4)}


@pytest.mark.parametrize("kind", ["default", "asymptotic", "weighted", "monte-carlo"])
def test_regimes_table_shows_the_asymptotic_quantities_of_its_formulas(regime_results, kind):
    from scipy.stats import norm
    res = regime_results[kind]
    html = render_html(res, figures=False)
    rows = _table_rows(html, "two asymptotic regimes")
    # recomputed from the formulas printed in the table, from the result's T, n, w and sigma0^2
    z0 = res.n * np.sqrt(res.bin_volume) * res.estimate / np.sqrt(res.sigma0_sq)
    p0 = norm.sf(z0)
    shown_z = _number_after(rows["Statistic"][0], "z₀ = n·√w·T / σ₀ =")
    shown_p = _number_after(rows["p-value of H0: ECE = 0"][0], "")
    assert shown_z == pytest.approx(z0, rel=1e-3) and shown_p == pytest.approx(p0, rel=1e-3)
    assert "(one-sided, 1 − Φ(z₀))" in rows["p-value of H0: ECE = 0"][0]
    threshold0 = norm.ppf(1 - res.alpha) * np.sqrt(res.sigma0_sq) / (res.n * np.sqrt(res.bin_volume))
    assert _number_after(rows["Role in the interval"][0], "z(1−α)·σ₀ / (n·√w) =") == pytest.approx(threshold0, rel=1e-5)
    weighted = res.weighting is not None
    assert ("(exact)" in rows["Variance constant"][0]) is not weighted  # an estimated V0 is not exact
    if weighted:
        assert "V₀ estimated" in rows["Variance constant"][0]
    settings = _table_rows(html, "Settings of the analysis")
    assert f"(null='{res.null}')" in settings["Null distribution of the test of ECE = 0"][0]
    assert "auto" not in settings["Null distribution of the test of ECE = 0"][0]
    if res.null == "asymptotic":
        assert res.null_pvalue == pytest.approx(p0, rel=1e-12)
        assert rows["Role in the interval"][0].startswith("0 belongs to the interval iff T⁺ <")
        assert "finite-sample test of H0" not in html
        return
    # the finite-sample test actually used, in its own table, with its own p-value (not 1 - Phi(z0))
    assert res.null_pvalue != pytest.approx(p0, rel=1e-3)
    assert rows["Role in the interval"][0].startswith("not used:")
    used = _table_rows(html, "finite-sample test of H0: ECE = 0 used")
    assert _number_after(used["p-value of H0: ECE = 0"][0], "") == pytest.approx(res.null_pvalue, rel=1e-3)
    assert _number_after(used["Critical value of T at α"][0], "") == pytest.approx(res.threshold, rel=1e-5)
    assert used["Role in the interval"][0] == "0 belongs to the interval iff p > α"
    if res.null == "monte-carlo":
        draws = res.monte_carlo.null_draws
        assert res.null_pvalue == (1 + np.count_nonzero(draws >= res.estimate)) / (1 + draws.size)
        assert f"{draws.size} Monte Carlo draws of T" in used["Statistic"][0]
    else:
        z = res.estimate / np.sqrt(res.conditional.variance)
        assert _number_after(used["Statistic"][0], "z = T / sd(T | Z) =") == pytest.approx(z, rel=1e-3)


def test_console_tests_table_shows_the_asymptotic_z0_and_p(regime_results):
    from scipy.stats import norm
    for res in regime_results.values():
        table = res.summary(evidence=False).tables[3]
        z0 = res.n * np.sqrt(res.bin_volume) * res.estimate / np.sqrt(res.sigma0_sq)
        assert table.loc["calibrated: z0", "statistic"] == pytest.approx(z0, rel=1e-12)
        assert table.loc["calibrated: z0", "p-value"] == pytest.approx(norm.sf(z0), rel=1e-9)
        if res.monte_carlo is not None:
            assert table.loc[f"Monte Carlo: {res.monte_carlo.n_draws} label draws", "p-value"] == res.null_pvalue


def test_weighted_report_names_the_asymptotic_null(regime_results):
    res = regime_results["weighted"]
    doc = parse(render_html(res, figures=False))
    text = doc.body_text
    assert "auto test" not in text and "null='auto'" not in text
    assert "the asymptotic test of ECE = 0 at B" in " ".join(doc.conclusions)


# ----------------------------------------------------------------- the reviewer's items (issue 24, point 6)
def _cells(html: str) -> dict:
    """First cell -> the other cells of every table row (text, whitespace collapsed)."""
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", html, flags=re.S):
        cells = [" ".join(re.sub(r"<[^>]+>", " ", c).split())
                 for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, flags=re.S)]
        if cells:
            rows.setdefault(cells[0], cells[1:])
    return rows


def test_report_validation_metrics_model_and_data_and_wording():
    import html as html_lib
    import json
    from scipy import stats

    d = load_demo()
    p, y = d["p"].to_numpy(), d["y"].to_numpy()
    res = ct.calib_ci("y ~ p", data=d)
    html = render_html(res, figures=False)
    cells = {k: [html_lib.unescape(c) for c in v] for k, v in _cells(html).items()}
    n, o, e = y.size, int(y.sum()), float(p.sum())
    # Model and data: n, events, event rate; missing data
    assert cells["Rows analysed n; events (y = 1); event rate"] == [f"{n}; {o}; {fmt(o / n, 4)}"]
    assert cells["Missing data"][0].startswith(f"{n} rows read, 0 dropped, {n} analysed")
    assert "missing='raise'" in cells["Missing data"][0]
    # O/E, its log-scale interval, the mean prediction beside the observed rate
    z = stats.norm.ppf(0.975)
    se = np.sqrt((1 - o / n) / o)
    assert cells["O / E (observed / expected events)"][:2] == [
        fmt(o / e, 4), f"[{fmt(o / e * np.exp(-z * se), 4)}, {fmt(o / e * np.exp(z * se), 4)}]"]
    assert cells["Observed event rate O / n"][0] == fmt(o / n, 4)
    assert cells["Mean predicted risk E / n"][0] == fmt(p.mean(), 4)
    # C-statistic with DeLong's interval and the loess errors, from R (pROC, stats::loess)
    ref = json.loads((REPO / "tests/reference/loess_calibration.json").read_text())["datasets"]["demo"]
    lower, auc, upper, _ = ref["auc_delong_lower_auc_upper_se"]
    assert cells["C-statistic (exact)"][:2] == [fmt(auc, 4), f"[{fmt(lower, 4)}, {fmt(upper, 4)}]"]
    assert "DeLong" in cells["C-statistic (exact)"][2]
    for label, value in zip(("E50 (loess)", "E90 (loess)", "ICI (loess)", "Emax (loess)"),
                            ref["interpolate_e50_e90_ici_emax"]):
        assert cells[label][0] == fmt(value, 4), label
    text = " ".join(parse(html).body_text.split())
    # a bound at a confidence level, never "at most"
    upper_bound = res.conf_int().upper
    assert f"the upper confidence limit (one-sided 97.5%) for ECE² is {fmt(upper_bound, 4)} (for ECE, " in text
    assert "is at most" not in text and "ECE at most" not in text
    summary = " ".join(str(res.summary()).split())
    assert "upper confidence limit (one-sided 97.5%) for ECE^2 is" in summary and "is at most" not in summary
    # the Limitations follow the null used: the default one is conditional, not asymptotic
    assert res.null != "asymptotic"
    limitations = text.split("Limitations", 2)[2]
    assert "is a finite-sample test" in limitations and "The intervals and the test are asymptotic" not in text
    asym = ct.calib_ci("y ~ p", data=d, null="asymptotic")
    limitations = " ".join(parse(render_html(asym, figures=False)).body_text.split()).split("Limitations", 2)[2]
    assert "uses the asymptotic normal law of T" in limitations and "finite-sample" not in limitations


def test_report_missing_rows_dropped_and_direction():
    import html as html_lib

    d = load_demo()
    d["q"] = d["p"] ** 2
    d.loc[[3, 7], "q"] = np.nan
    res = ct.calib_ci("y ~ q", data=d, missing="drop")
    html = render_html(res, figures=False)
    cells = {k: [html_lib.unescape(c) for c in v] for k, v in _cells(html).items()}
    assert cells["Missing data"][0].startswith(f"{len(d)} rows read, 2 dropped, {len(d) - 2} analysed")
    assert "missing='drop'" in cells["Missing data"][0]
    text = " ".join(html_lib.unescape(parse(html).body_text).split())
    vp = ct.val_prob(y=d["y"][d["q"].notna()], probs=d["q"].dropna())
    assert vp.citl_ci[0] > 0 and vp.slope_ci[1] < 1  # p squared: too low on average and too extreme
    direction = vp.direction()
    assert "too low on average" in direction and "too extreme" in direction
    assert text.count(direction) >= 2  # the evidence conclusion and the validation metrics


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_pdf_software_table_names_weasyprint(tmp_path):
    pytest.importorskip("pypdf")
    weasyprint = _weasyprint_or_skip()
    from pypdf import PdfReader
    rng = np.random.default_rng(2)
    p = rng.uniform(0.05, 0.95, 150)
    res = ct.calib_ci(y=(rng.random(150) < p).astype(int), probs=p, n_bins=5)
    reader = PdfReader(str(res.report(tmp_path / "r.pdf")))
    text = re.sub(r"\s+", " ", " ".join(page.extract_text() for page in reader.pages))
    assert f"WeasyPrint (made this PDF) {weasyprint.__version__}" in text
    assert "WeasyPrint (made this PDF)" not in render_html(res, figures=False)  # an HTML report is not made by it


def test_report_top1_observed_expected_counts_correct_top1_predictions():
    import html as html_lib

    rng = np.random.default_rng(0)
    probs = rng.dirichlet([2, 2, 2], 1500)
    y = (rng.uniform(size=(1500, 1)) > probs.cumsum(axis=1)).sum(axis=1)  # a draw from each row's probabilities
    res = ct.calib_ci(y=y, probs=probs, k=1)
    cells = {k: [html_lib.unescape(c) for c in v] for k, v in _cells(render_html(res, figures=False)).items()}
    correct = probs.argmax(axis=1) == y
    o, e = int(correct.sum()), float(probs.max(axis=1).sum())
    assert cells["Rows analysed n; events (top-1 prediction correct); event rate"] == [
        f"1500; {o}; {fmt(o / 1500, 4)}"]
    assert cells["O / E (observed / expected events)"][0] == fmt(o / e, 4)
    assert cells["Mean predicted risk E / n"][0] == fmt(e / 1500, 4)
