"""The report's subgroup section (``calib_ci(..., by=)``) and weighted results (``weights=``, ``prevalence=``).

The HTML is parsed with the standard library's ``html.parser``; the table
cells are read back as numbers and compared with ``grouped.to_frame()``; π̂
and the effective sample size are recomputed by hand from the outcomes and
the weights (Kish: (Σw)² / Σw²).
"""
from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from calibtest.display.format import fmt_p

import calibtest as ct
from calibtest import cli
from calibtest.display.format import json_safe
from calibtest.reporting.html import build_context, render_html, report
from report_helpers import bins_csv

EVIL = "<script>alert(1)</script>"


class _Tables(HTMLParser):
    """Tables by id (rows of cell texts), every id, the text, and whether tags balance."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []
        self._table = None
        self._cell = None
        self._style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "style":
            self._style = True
        if tag == "table":
            self._table = a.get("id")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "style":
            self._style = False
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append(self._cell.strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._style:
            return
        self.text.append(data)
        if self._cell is not None:
            self._cell += data

    @property
    def body(self) -> str:
        return re.sub(r"\s+", " ", " ".join(self.text))


def parse(html: str) -> _Tables:
    doc = _Tables()
    doc.feed(html)
    doc.close()
    return doc


def _caption_table(doc: _Tables, html: str, caption_start: str) -> list[list[str]]:
    """The rows (header first) of the table whose caption starts with ``caption_start``."""
    m = re.search(r'<table[^>]* id="(table-\d+)">\s*<caption><span class="label">Table \d+\.</span> '
                  + re.escape(caption_start), html)
    assert m, caption_start
    return doc.tables[m.group(1)]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(20261123)
    n = 2400
    site = rng.choice(["north", "south", EVIL], size=n, p=[0.5, 0.4, 0.1])
    sex = rng.choice(["f", "m"], size=n)
    p = rng.uniform(0.05, 0.95, size=n)
    truth = np.where(site == "south", np.clip(p + 0.12, 0, 1), p)  # miscalibrated in one site
    y = (rng.uniform(size=n) < truth).astype(int)
    return pd.DataFrame({"y": y, "p": p, "site": site, "sex": sex, "w": rng.lognormal(0.0, 0.6, size=n)})


@pytest.fixture(scope="module")
def grouped(data):
    return ct.calib_ci("y ~ p", data=data, by="site")


@pytest.fixture(scope="module")
def grouped_html(grouped):
    return render_html(grouped, labels=["risk score"])


def _number(cell: str) -> float:
    return float(cell.replace("−", "-"))


def _interval(cell: str) -> tuple[float, float]:
    lo, hi = cell.strip("[(]").split(", ")
    return _number(lo), _number(hi)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_subgroup_table_equals_to_frame(grouped, grouped_html):
    doc = parse(grouped_html)
    rows = _caption_table(doc, grouped_html, "Calibration of risk score within the subgroups of site")
    header, body = rows[0], rows[1:]
    assert header == ["Group (site)", "n", "events", "B", "T (ECE²)", "95% CI for ECE²", "ECE", "95% CI for ECE",
                      "verdict", "p (ECE = 0)", "p (Holm)"]
    frame = grouped.to_frame()
    assert [r[0] for r in body[:-1]] == [str(i) for i in frame.index]
    for row, (label, rec) in zip(body, frame.iterrows()):
        assert int(row[1]) == rec["n"] and int(row[2]) == rec["events"] and int(row[3]) == rec["n_bins"]
        assert _number(row[4]) == pytest.approx(rec["estimate"], rel=5e-4, abs=1e-12)
        assert _interval(row[5]) == pytest.approx((rec["ci_lower"], rec["ci_upper"]), rel=5e-4, abs=1e-12)
        assert _number(row[6]) == pytest.approx(rec["ece"], rel=5e-4, abs=1e-12)
        assert _interval(row[7]) == pytest.approx((rec["ece_ci_lower"], rec["ece_ci_upper"]), rel=5e-4, abs=1e-12)
        assert row[8] == ("contains 0" if rec["contains_zero"] else "excludes 0")
        assert row[7].startswith("(") == (not rec["contains_zero"] and rec["ece_ci_lower"] == 0)  # open at 0
        assert _number(row[9]) == pytest.approx(rec["pvalue"], rel=5e-4)
        assert _number(row[10]) == pytest.approx(rec["pvalue_holm"], rel=5e-4)
    # Holm over the analysed groups, recomputed by hand: sorted p times (G - rank), running maximum, capped at 1
    p = frame["pvalue"].to_numpy(float)
    order = np.argsort(p)
    adj = np.minimum(1.0, np.maximum.accumulate(p[order] * (len(p) - np.arange(len(p)))))
    holm = np.empty_like(adj)
    holm[order] = adj
    assert [_number(r[10]) for r in body[:-1]] == pytest.approx(holm, rel=5e-4)
    pooled = body[-1]
    assert pooled[0] == "all rows (pooled)" and int(pooled[1]) == grouped.pooled.n
    assert int(pooled[2]) == int(grouped.pooled.data.y[:, 0].sum())
    assert _number(pooled[6]) == pytest.approx(grouped.pooled.ece, rel=5e-4)
    # the tests across groups: statistics, df and p-values of the result, with the null hypotheses in words
    tests = _caption_table(doc, grouped_html, "Tests across the subgroups of site")
    assert tests[0] == ["", "Global test", "Heterogeneity test"]
    rows = {r[0]: r[1:] for r in tests[1:]}
    assert "calibrated in every analysed group" in rows["Null hypothesis"][0]
    assert "same in every analysed group" in rows["Null hypothesis"][1]
    assert _number(rows["p-value"][0]) == pytest.approx(grouped.global_pvalue, rel=5e-4)
    assert _number(rows["Statistic"][0].split("= ")[1]) == pytest.approx(frame["pvalue"].min(), rel=5e-4)  # min p
    assert int(rows["Degrees of freedom"][1]) == len(frame) - 1
    assert _number(rows["Statistic"][1].split("= ")[1]) == pytest.approx(grouped.heterogeneity_statistic, rel=5e-4)
    assert _number(rows["p-value"][1]) == pytest.approx(grouped.heterogeneity_pvalue, rel=5e-4)
    assert rows["Verdict at α = 0.05"][0] == ("rejects" if grouped.global_pvalue <= 0.05 else "does not reject")
    text = doc.body
    assert "Multiplicity. " + grouped.notes()[0] in text  # the multiplicity statement, verbatim
    assert "not adjusted for multiplicity" in text


def test_numbering_toc_and_escaping(grouped, grouped_html):
    doc = parse(grouped_html)
    assert doc.ids.index("model-1") < doc.ids.index("subgroups-1") < doc.ids.index("methods")
    toc = [h[1:] for h in doc.hrefs]
    assert toc.index("model-1") + 1 == toc.index("subgroups-1")
    tables = [int(i.split("-")[1]) for i in doc.ids if i.startswith("table-")]
    figures = [int(i.split("-")[1]) for i in doc.ids if i.startswith("figure-")]
    assert tables == list(range(1, len(tables) + 1)) and figures == list(range(1, len(figures) + 1))
    assert re.findall(r'<span class="label">Table (\d+)\.</span>', grouped_html) == [str(t) for t in tables]
    # the forest plot is inside the subgroup section, the sites' forest plots (the last figure) in the section
    # after it, and the text of each section cites its figure and tables
    section = grouped_html.split('id="subgroups-1"', 1)[1].split("</section>", 1)[0]
    sites = grouped_html.split('id="sites-1"', 1)[1].split("</section>", 1)[0]
    assert f'<figure id="figure-{figures[-2]}"' in section and f'<figure id="figure-{figures[-1]}"' in sites
    in_section = [t for t in tables if f'id="table-{t}"' in section]
    assert len(in_section) == 3  # the groups, every measure, the tests across groups
    cited = set(re.findall(r"(?:Table|Figure) \d+", re.sub(r"<[^>]+>", " ", section)))
    assert {f"Figure {figures[-2]}"} | {f"Table {t}" for t in in_section} <= cited
    assert toc.index("subgroups-1") + 1 == toc.index("sites-1")
    heading = re.search(r"<h2>(\d+)\. Subgroups of risk score by site</h2>", grouped_html)
    model = re.search(r"<h2>(\d+)\. Model: risk score", grouped_html)
    assert int(heading.group(1)) == int(model.group(1)) + 1
    # the group label is escaped everywhere (table, notes) and never reaches the page as markup
    assert "<script" not in grouped_html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in grouped_html
    assert EVIL in [r[0] for r in _caption_table(doc, grouped_html, "Calibration of risk score within")]
    # the summary states the subgroup finding and the model section points to the subgroup section
    summary = doc.body.split("Summary of findings", 2)[2].split("Model and data")[0]
    assert "risk score, by subgroup." in summary and "global test of calibration in every group" in summary


def test_groups_not_analysed_are_listed_with_the_reason(data):
    df = data.copy()
    df.loc[df["site"] == EVIL, "y"] = 1  # a single outcome class
    g = ct.calib_ci("y ~ p", data=df, by=["site", "sex"])
    html = render_html(g, figures=False)
    doc = parse(html)
    body = _caption_table(doc, html, "Calibration of p within the subgroups of site × sex")[1:]
    missing = [r for r in body if r[4] == "not analysed"]
    assert len(missing) == len(g.reasons) == 2
    assert all(r[3] == "—" and r[5] == "—" for r in missing)
    for label, reason in g.reasons.items():
        assert f"{', '.join(label)}: {reason}" in doc.body
    assert "2 analysed of" not in doc.body and "(4 analysed)" in doc.body


def test_one_analysable_group_report_says_heterogeneity_in_words(data):
    """One analysable group: the tests table and the finding say why Cochran's Q is not computed."""
    df = data.copy()
    df.loc[df["site"] != "north", "y"] = 1  # south and EVIL: a single outcome class
    g = ct.calib_ci("y ~ p", data=df, by="site")
    assert g.n_analysed == 1 and g.heterogeneity_note is not None
    html = render_html(g, figures=False)
    doc = parse(html)
    tests = _caption_table(doc, html, "Tests across the subgroups of site")
    cells = {row[0]: row[1:] for row in tests}
    assert cells["Degrees of freedom"][1] == "—"
    assert cells["Verdict at α = 0.05"][1] == f"not computed: {g.heterogeneity_note}"
    text = " ".join(doc.body.split())
    assert "heterogeneity of the ECE² across groups not computed (it needs at least two analysed groups" in text
    assert re.search(r"\bnan\b", text, re.IGNORECASE) is None and "on 0 df" not in text


def test_grouping_column_named_n_reports_its_labels(data):
    g = ct.calib_ci("y ~ p", data=data.assign(n=data["sex"]), by="n")
    html = render_html(g, figures=False)
    body = _caption_table(parse(html), html, "Calibration of p within the subgroups of n")[1:]
    assert [r[0] for r in body] == ["f", "m", "all rows (pooled)"]
    assert [int(r[1]) for r in body[:2]] == [int((data["sex"] == s).sum()) for s in ("f", "m")]


def test_grouped_among_several_results_and_attachment(data, grouped):
    plain = ct.calib_ci("y ~ p", data=data, n_bins=10)
    ctx = build_context([plain, grouped], labels=["fixed bins", "by site"], figures=False)
    assert [m["subgroups"] is not None for m in ctx["models"]] == [False, True]
    assert [e["anchor"] for e in ctx["toc"]][3:6] == ["comparisons", "model-1", "model-2"]
    assert "subgroups-2" in [e["anchor"] for e in ctx["toc"]]
    names = [name for name, _, _ in ctx["_attachments"]]
    assert names == ["result-1-fixed-bins.json", "result-1-fixed-bins-bins.csv", "result-2-by-site-subgroups.json",
                     "result-2-by-site-bins.csv"]
    attached = json.loads(ctx["_attachments"][2][1])
    own = json.loads(json.dumps(json_safe(grouped.to_dict())))
    assert {k: attached[k] for k in own} == own  # to_dict() whole, with the report's conclusions beside it
    assert set(attached) - set(own) == {"evidence", "acceptance", "verdict"}
    assert attached["verdict"] == grouped.pooled.evidence().verdict
    assert attached["pooled"]["n"] == grouped.pooled.n and len(attached["groups"]) == 3


def test_plan_subgroups_match_and_mismatch(tmp_path, data, grouped):
    def statement(plan, res):
        text = parse(render_html(res, plan=plan, labels=["score"], figures=False)).body
        return text, ("followed the pre-specified plan" in text)

    text, ok = statement(ct.plan(tmp_path / "site.json", subgroups=["site"]), grouped)
    assert ok and "Deviations of the analysis" not in text
    crossed = ct.calib_ci("y ~ p", data=data, by=["sex", "site"])
    assert statement(ct.plan(tmp_path / "crossed.json", subgroups=["site", "sex"]), crossed)[1]  # order free
    text, ok = statement(ct.plan(tmp_path / "sex.json", subgroups=["sex"]), grouped)
    assert not ok and "score subgroups (subgroups) sex site" in text
    text, ok = statement(ct.plan(tmp_path / "none.json"), grouped)  # subgroups not pre-specified
    assert not ok and "score subgroups (subgroups) none planned site" in text
    text, ok = statement(ct.plan(tmp_path / "site2.json", subgroups=["site"]), grouped.pooled)
    assert not ok and "score subgroups (subgroups) site not analysed (whole sample only)" in text


def _kish(w):
    return w.sum() ** 2 / (w ** 2).sum()


def test_weighted_reports_state_pi_pi_hat_and_n_eff(data):
    pi = 0.08
    res = ct.calib_ci("y ~ p", data=data, prevalence=pi, rng=1)
    html = render_html(res)
    doc = parse(html)
    y = data["y"].to_numpy()
    pi_hat = y.mean()
    w = np.where(y == 1, pi / pi_hat, (1 - pi) / (1 - pi_hat))
    text = doc.body
    for needle in (f"pi = {pi:.4g}", f"pi_hat = {pi_hat:.4g}",
                   f"n_eff = (sum w)^2 / sum w^2 = {_kish(w):.4g} of n = {len(y)}",
                   f"pi / pi_hat = {pi / pi_hat:.4g}", f"(1 - pi) / (1 - pi_hat) = {(1 - pi) / (1 - pi_hat):.4g}"):
        model_data = text.split("Model and data", 2)[2].split("Analysis plan")[0]
        assert needle in model_data, needle  # in the "Model and data" section
        assert text.count(needle) >= 2, needle  # and in the model section
    # one figure, the weighted reliability diagram; the evidence rows that support weights, the others with
    # their reason
    assert html.count("<img") == 1 and "Weighted reliability diagram of p (prevalence)" in text
    evidence = text.split("supports its weights", 1)[1].split("Model and data", 1)[0]
    iv = res.conf_int()
    assert f"Weighted interval for ECE² (B = {res.n_bins}, adjusted)" in evidence
    assert f"[{ct.display.format.fmt(iv.lower, 4)}, {ct.display.format.fmt(iv.upper, 4)}]" in evidence
    assert "Weighted test of ECE = 0" in evidence and f"p = {fmt_p(res.null_pvalue)}" in evidence
    assert "no chi-squared reference: prevalence weights depend on the outcome" in evidence
    assert "Hosmer–Lemeshow test is not shown" in text and "Validation metrics (R's rms::val.prob) are not shown" in text
    # the bin table gives the weighted means and the terms of T_w, which sum to it
    _, bins = bins_csv(html)
    assert {"weight", "mean_pred_weighted", "mean_outcome_weighted"} <= set(bins.columns)
    assert bins["contribution"].sum() == pytest.approx(res.estimate, rel=1e-12, abs=1e-15)
    assert "Bins holding one row (they do not enter T_w)" in text
    # case weights (a column)
    cw = ct.calib_ci("y ~ p", data=data, weights="w")
    text = parse(render_html(cw, figures=False)).body
    assert "case weights (column w)" in text
    assert f"n_eff = (sum w)^2 / sum w^2 = {_kish(data['w'].to_numpy()):.4g}" in text
    assert "π" not in text.split("Model and data", 2)[2].split("Analysis plan")[0]


def test_weighted_grouped_report_renders(data):
    g = ct.calib_ci("y ~ p", data=data, by="sex", weights="w")
    html = render_html(g)
    text = parse(html).body
    assert "Subgroups of p by sex" in text and "case weights (column w)" in text
    # the forest plot, the pooled weighted reliability diagram and the sites' forest plot, of the ECE only: the
    # CITL, slope and O/E of val_prob are for unweighted rows
    assert html.count("<img") == 3
    assert g.meta.measures == ("ece",) and g.to_frame()[["citl", "slope", "oe"]].isna().all().all()
    assert "Weighted reliability diagram of p (case weights)" in text


def _run(argv):
    return cli.main([str(a) for a in argv])


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_cli_report_by_weights_prevalence(tmp_path, data, capsys):
    csv = tmp_path / "d.csv"
    data.assign(site=data["site"].replace({EVIL: "east"})).to_csv(csv, index=False)
    out = tmp_path / "g.html"
    assert _run(["report", csv, "--formula", "y ~ p", "--by", "site", "--by", "sex", "-o", out]) == 0
    html = out.read_text(encoding="utf-8")
    text = parse(html).body
    assert "Subgroups of p by site × sex" in text
    assert "--by site --by sex" in text  # the command line that reproduces the report
    expected = ct.calib_ci("y ~ p", data=pd.read_csv(csv), by=["site", "sex"])
    assert f"{len(expected.table)} subgroups of site × sex" in text
    out = tmp_path / "w.html"
    assert _run(["report", csv, "--formula", "y ~ p", "--prevalence", "0.1", "--seed", "4", "-o", out]) == 0
    text = parse(out.read_text(encoding="utf-8")).body
    assert f"pi_hat = {data['y'].mean():.4g}" in text and "--prevalence 0.1" in text
    out = tmp_path / "cw.html"
    assert _run(["report", csv, "--formula", "y ~ p", "--weights", "w", "-o", out]) == 0
    assert "case weights (column w)" in parse(out.read_text(encoding="utf-8")).body
    assert _run(["report", csv, "--formula", "y ~ p", "--weights", "nope", "-o", tmp_path / "x.html"]) == 1
    assert "nope" in capsys.readouterr().err


@pytest.mark.slow
def test_grouped_pdf_attachment_and_page_width(tmp_path, grouped):
    pypdf = pytest.importorskip("pypdf")
    try:
        import weasyprint
        assert weasyprint.HTML
    except (ImportError, OSError) as exc:
        pytest.skip(f"WeasyPrint unavailable: {exc}")
    out = report(grouped, tmp_path / "g.pdf", labels=["risk score"])
    files = pypdf.PdfReader(str(out)).attachments
    assert sorted(files) == ["result-1-risk-score-bins.csv", "result-1-risk-score-subgroups.json"]
    pooled_bins = pd.read_csv(io.StringIO(files["result-1-risk-score-bins.csv"][0].decode("utf-8")))
    assert np.array_equal(pooled_bins["count"], grouped.pooled.bin_table()["count"])
    record, own = json.loads(files["result-1-risk-score-subgroups.json"][0]), json.loads(
        json.dumps(json_safe(grouped.to_dict())))
    assert {key: record[key] for key in own} == own  # to_dict(), with what the report adds
    if shutil.which("pdftotext") is None:
        return
    subprocess.run(["pdftotext", "-bbox", str(out), str(tmp_path / "b.html")], check=True)
    bbox = (tmp_path / "b.html").read_text(encoding="utf-8")
    width = float(re.search(r'<page width="([\d.]+)"', bbox).group(1))
    words = re.findall(r'<word xMin="([\d.]+)" yMin="[\d.]+" xMax="([\d.]+)"', bbox)
    assert not [(a, b) for a, b in words if float(a) < 39.0 or float(b) > width - 39.0]


def test_weighted_summary_names_the_reweighting(data):
    res = ct.calib_ci("y ~ p", data=data, prevalence=0.2, rng=2)
    text = parse(render_html(res, figures=False)).body
    summary = text.split("Summary of findings", 2)[2].split("Model and data")[0]
    assert (f"Weighted analysis: re-weighted to the population prevalence π = 0.2 (sample π̂ = "
            f"{data['y'].mean():.4g})") in summary


def test_forest_figure_text_lies_inside_the_figure(data):
    """Long group labels (and a "$", which matplotlib would read as math) stay inside the report's figure."""
    from calibtest.reporting.html import forest_figure
    long = "a very long hospital name, outpatient clinic $5 tier"
    df = data.assign(site=data["site"].replace({EVIL: long}))
    g = ct.calib_ci("y ~ p", data=df, by=["site", "sex"])
    fig = forest_figure(g)
    extra_lines = 2  # the long label of two groups (f, m), about 65 characters, takes two lines each
    assert tuple(fig.get_size_inches()) == pytest.approx((7.2, 1.3 + 0.3 * (len(g.table) + 1) + 0.18 * extra_lines))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    ax = fig.axes[0]
    texts = list(ax.get_yticklabels()) + [fig._suptitle, ax.xaxis.label]
    assert "heterogeneity p" in fig._suptitle.get_text()
    labels = [" ".join(t.get_text().replace("\\$", "$").split()) for t in ax.get_yticklabels()]
    n_f = int(((df["site"] == long) & (df["sex"] == "f")).sum())
    assert f"{long}, f (n={n_f})" in labels  # wrapped onto lines, the words intact
    assert max(len(line) for t in ax.get_yticklabels() for line in t.get_text().split("\n")) <= 37
    for t in texts:
        if not t.get_text():
            continue
        ext = t.get_window_extent(renderer)
        assert ext.x0 >= box.x0 - 0.5 and ext.x1 <= box.x1 + 0.5 and ext.y0 >= box.y0 - 0.5 and \
            ext.y1 <= box.y1 + 0.5, t.get_text()
    assert ax.get_legend() is None  # nothing is drawn over the intervals


def test_references_of_the_subgroup_and_weighting_methods(data, grouped):
    text = parse(render_html(grouped, figures=False)).body
    ref_list = text.rsplit("References", 1)[1]
    assert "Holm's step-down procedure [10]" in text and "Cochran's Q [11]" in text
    assert "Holm, S. (1979)" in ref_list and "Cochran, W. G. (1954)" in ref_list and "Kish" not in ref_list
    weighted = parse(render_html(ct.calib_ci("y ~ p", data=data, weights="w"), figures=False)).body
    assert "(Σw)² / Σw² [10]" in weighted and "Kish, L. (1965)" in weighted.rsplit("References", 1)[1]
    plain = parse(render_html(grouped.pooled, figures=False)).body
    assert "Holm, S." not in plain and "Kish, L." not in plain


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_cli_two_models_by_site_with_comparison(tmp_path, data):
    csv = tmp_path / "d.csv"
    data.assign(site=data["site"].replace({EVIL: "east"}), q=np.clip(data["p"] * 1.2, 0.001, 0.999)).to_csv(
        csv, index=False)
    out = tmp_path / "two.html"
    assert _run(["report", csv, "--model", "old=y ~ p", "--model", "new=y ~ q", "--compare", "old,new",
                 "--by", "site", "-o", out]) == 0
    html = out.read_text(encoding="utf-8")
    doc = parse(html)
    assert [h[1:] for h in doc.hrefs if re.fullmatch(r"#(model|subgroups)-\d", h)] == \
        ["model-1", "subgroups-1", "model-2", "subgroups-2"]
    df = pd.read_csv(csv)
    a, b = ct.calib_ci("y ~ p", data=df), ct.calib_ci("y ~ q", data=df)
    expected = ct.calib_compare(a, b, names=("old", "new"))  # the models compared on all rows
    rows = {r[0]: r[1] for r in _caption_table(doc, html, "Comparison of old with new")[1:]}
    assert _number(rows["Δ = ECE_A² − ECE_B²"]) == pytest.approx(expected.estimate, rel=1e-5)


def test_weighted_reliability_figure_plots_weighted_bin_means(data):
    """The points are Σwp/Σw and Σwy/Σw of the estimator's bins, recomputed here from the rows."""
    from calibtest.reporting.plotting import weighted_reliability_figure

    res = ct.calib_ci("y ~ p", data=data, weights="w")
    fig = weighted_reliability_figure(res, "p")
    points = np.asarray(fig.axes[0].collections[0].get_offsets())
    p, y, w = data["p"].to_numpy(), data["y"].to_numpy(float), data["w"].to_numpy(float)
    b = np.minimum(np.floor(p * res.n_bins), res.n_bins - 1).astype(int)
    occupied = np.unique(b[w > 0])
    wp = np.array([np.sum(w[b == j] * p[b == j]) / np.sum(w[b == j]) for j in occupied])
    wy = np.array([np.sum(w[b == j] * y[b == j]) / np.sum(w[b == j]) for j in occupied])
    order = np.argsort(points[:, 0])
    np.testing.assert_allclose(points[order, 0], np.sort(wp), rtol=1e-12)
    np.testing.assert_allclose(points[order, 1], wy[np.argsort(wp)], rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="weighted result"):
        weighted_reliability_figure(ct.calib_ci("y ~ p", data=data))
