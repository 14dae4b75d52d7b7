"""Layout of the PDF report as a reviewer reads it (issue 24, point 8), and the p-value wording.

Two PDFs are rendered once for the module (the demo and a two-model comparison) and read back
page by page with poppler's ``pdftotext`` (``-bbox`` for where the text lines sit, the plain text
for what they say).  The properties:

* no heading (and no table or figure caption) is the last line of a page, away from its text;
* every conclusion box (``div.conclusion``, ``div.finding``) starts and ends on the same page;
* no page holds only the running header, the footer note or nothing;
* at most one page of a report, the last, is more than half empty: the lowest text line on the page lies
  above the middle of the page's content box (a figure sits above its caption, so the caption's
  line counts for the figure);
* no "p = <" and no closing parenthesis glued to the next word ("(Details: Table 2)Weighted").
"""
from __future__ import annotations

import html as html_lib
import re
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.display.format import fmt_p, p_equals

MM = 72 / 25.4
#: The page's content box (report.css: @page margin 20mm 14mm 18mm 14mm on A4).
TOP, BOTTOM_MARGIN = 20 * MM, 18 * MM


def _weasyprint_or_skip():
    try:
        import weasyprint  # noqa: F401
    except (ImportError, OSError) as exc:
        pytest.skip(f"WeasyPrint unavailable: {exc}")
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")


class _Blocks(HTMLParser):
    """Text of the report's headings (h2, h3), captions and conclusion boxes, in document order."""

    def __init__(self):
        super().__init__()
        self.stack, self.headings, self.boxes, self.captions = [], [], [], []

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "meta", "link", "input", "hr"):
            return
        cls = dict(attrs).get("class") or ""
        kind = ("heading" if tag in ("h2", "h3") else "box" if {"conclusion", "finding"} & set(cls.split())
                else "caption" if tag in ("caption", "figcaption") else None)
        self.stack.append([kind, []])

    def handle_endtag(self, tag):
        if tag in ("br", "img", "meta", "link", "input", "hr") or not self.stack:
            return
        kind, parts = self.stack.pop()
        text = " ".join("".join(parts).split())
        if self.stack:  # the text belongs to the enclosing elements too
            self.stack[-1][1].append(" " + "".join(parts) + " ")
        if kind == "heading":
            self.headings.append(text)
        elif kind == "box":
            self.boxes.append(text)
        elif kind == "caption":
            self.captions.append(text)

    def handle_data(self, data):
        if self.stack:
            self.stack[-1][1].append(data)


def _norm(text: str) -> str:
    return " ".join(text.split())


def _squash(text: str) -> str:
    """Text without any white space: line breaks and the spaces of justified lines do not matter."""
    return re.sub(r"\s+", "", text)


class _Pdf:
    """A rendered PDF read back per page: the words with their boxes, the text lines, the plain text."""

    def __init__(self, path, html: str):
        self.path = path
        blocks = _Blocks()
        blocks.feed(html)
        self.headings, self.boxes, self.captions = blocks.headings, blocks.boxes, blocks.captions
        bbox = subprocess.run(["pdftotext", "-bbox", str(path), "-"], capture_output=True, text=True,
                              check=True).stdout
        self.pages = []  # per page: (height, [(yMin, yMax, xMin, word)])
        for m in re.finditer(r'<page width="[\d.]+" height="([\d.]+)">(.*?)</page>', bbox, re.S):
            words = [(float(y0), float(y1), float(x0), html_lib.unescape(w)) for x0, y0, y1, w in re.findall(
                r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="[\d.]+" yMax="([\d.]+)">(.*?)</word>', m.group(2))]
            self.pages.append((float(m.group(1)), words))
        plain = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
        self.text = plain.split("\f")[:len(self.pages)]
        m = re.search(r"<footer>(.*?)</footer>", html, re.S)
        self.footer_note = " ".join(html_lib.unescape(m.group(1)).split()) if m else ""

    def content_words(self, i):
        """The words of page ``i`` inside the content box (without the running header and footer)."""
        height, words = self.pages[i]
        return [w for w in words if w[0] >= TOP - 1 and w[1] <= height - BOTTOM_MARGIN + 1]

    def content_lines(self, i) -> list[str]:
        """Page ``i``'s text lines inside the content box, top to bottom (words joined by their line)."""
        lines: dict[float, list[tuple[float, str]]] = {}
        for y0, y1, x0, word in sorted(self.content_words(i)):
            key = next((k for k in lines if abs(k - y1) < 2.0), y1)  # words of one line share the baseline
            lines.setdefault(key, []).append((x0, word))
        return [" ".join(w for _, w in sorted(lines[k])) for k in sorted(lines)]

    def fill(self, i) -> float:
        """How far down the content box page ``i``'s lowest text line reaches (0 empty, 1 full)."""
        height, _ = self.pages[i]
        words = self.content_words(i)
        low = max((w[1] for w in words), default=TOP)
        return (low - TOP) / (height - BOTTOM_MARGIN - TOP)


def _render(folder, name, results, **kwargs):
    """The PDF of ``report(results, ...)`` read back, with the HTML WeasyPrint laid out (kept on the way)."""
    from calibtest.reporting import html as reporting

    laid_out = []
    render = reporting._render

    def keep(*args, **kw):
        laid_out.append(render(*args, **kw))
        return laid_out[-1]

    reporting._render = keep  # the report is built once; its HTML is the PDF's
    try:
        path = reporting.report(results, folder / f"{name}.pdf", **kwargs)
    finally:
        reporting._render = render
    return _Pdf(path, laid_out[0])


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory):
    _weasyprint_or_skip()
    folder = tmp_path_factory.mktemp("layout")
    demo = ct.load_demo()
    one = _render(folder, "demo", ct.calib_ci("y ~ p", data=demo), title="Demo validation",
                  purpose="Held-out check of a risk model.")
    df = demo.assign(q=np.clip(demo["p"] * 1.25, 0.001, 0.999))
    a, b = ct.calib_ci("y ~ p", data=df), ct.calib_ci("y ~ q", data=df)
    cmp = ct.calib_compare(a, b, names=("current score", "inflated score"))
    two = _render(folder, "two", [a, b], comparisons=cmp, labels=["current score", "inflated score"],
                  title="Validation of two scores", purpose="External validation")
    rng = np.random.default_rng(25)
    risk = rng.uniform(0.05, 0.6, 1200)
    t, c = rng.exponential(5 / -np.log1p(-risk)), rng.exponential(15, 1200)
    frame = pd.DataFrame({"time": np.minimum(t, c), "event": (t <= c).astype(int), "risk": risk})
    surv = _render(folder, "survival", ct.calib_ci("Surv(time, event) ~ risk", data=frame, horizon=5),
                   title="Validation at a horizon", purpose="Five-year risk with censored follow-up.")
    return {"demo": one, "two models": two, "survival": surv}


@pytest.fixture(params=["demo", "two models", "survival"])
def pdf(request, pdfs):
    return pdfs[request.param]


def test_the_reader_sees_what_the_html_says(pdf):
    # the test reads the right things: headings, boxes and captions of the HTML are found in the PDF
    assert len(pdf.headings) >= 10 and len(pdf.boxes) >= 2 and len(pdf.captions) >= 5
    whole = _squash(" ".join(line for i in range(len(pdf.pages)) for line in pdf.content_lines(i)))
    for text in pdf.headings + pdf.boxes:
        assert _squash(text) in whole, text


def stranded_headings(pdf) -> list:
    """(page, heading) of every heading or caption that is the last line of a page (not the last page)."""
    stranded = []
    for i in range(len(pdf.pages) - 1):
        last = _squash(pdf.content_lines(i)[-1])
        for text in pdf.headings + pdf.captions:
            # the heading (or the caption's first line) is the page's last line: its text is on the next page
            if _squash(text).startswith(last) and len(last) >= 6:
                stranded.append((i + 1, text[:60]))
    return stranded


def broken_boxes(pdf) -> list:
    """(page, text) of every conclusion box that does not end on the page where it starts."""
    pages = [_squash(t) for t in pdf.text]
    broken = []
    for box in pdf.boxes:
        words = box.split()
        head, tail = _squash(" ".join(words[:8])), _squash(" ".join(words[-8:]))
        on = [i for i, t in enumerate(pages) if head in t]
        assert on, box[:80]  # the box's start is found (else the check would pass for nothing)
        if tail not in pages[on[0]]:
            broken.append((on[0] + 1, box[:60]))
    return broken


def pages_without_content(pdf) -> list:
    """Pages holding nothing but the running header and footer, or only the document's footer note."""
    note = _squash(pdf.footer_note)
    empty = []
    for i in range(len(pdf.pages)):
        body = _squash(" ".join(pdf.content_lines(i)))
        if not body or body in note:
            empty.append(i + 1)
    return empty


def half_empty_pages(pdf) -> list:
    """(page, fill) of the pages whose lowest text line lies above the middle of the content box."""
    return [(i + 1, round(pdf.fill(i), 2)) for i in range(len(pdf.pages)) if pdf.fill(i) < 0.5]


def test_no_heading_or_caption_at_a_page_foot(pdf):
    assert not stranded_headings(pdf)


def test_conclusion_boxes_are_not_broken(pdf):
    assert not broken_boxes(pdf)


def test_no_page_without_content(pdf):
    assert pdf.footer_note.startswith(("Demo validation", "Validation of two scores", "Validation at a horizon"))
    assert not pages_without_content(pdf)


def test_at_most_one_page_more_than_half_empty(pdf):
    # at most one, and that one the last page (before the fix: the page before the first figure, 39% full)
    half_empty = half_empty_pages(pdf)
    assert len(half_empty) <= 1 and all(page == len(pdf.pages) for page, _ in half_empty), half_empty


def test_no_p_equals_less_than_and_no_glued_words(pdf):
    whole = "\n".join(pdf.text)
    slip = re.search(r".{0,30}=\s*<\s*\d.{0,20}", whole)  # "p = < 1e-300"; not "data=<DataFrame ...>"
    assert slip is None, slip.group(0)
    glued = re.findall(r"\S*\)[A-Za-z]\S*", whole)
    assert not glued, glued[:5]


def test_the_checks_catch_a_bad_layout(tmp_path_factory):
    """A house style that strands a heading, breaks the conclusion box and puts the footer note on a
    page of its own (and leaves half pages empty) is caught by every check above."""
    _weasyprint_or_skip()
    folder = tmp_path_factory.mktemp("bad-layout")
    (folder / "house_style.css").write_text(
        "h2, h3 { break-after: auto !important; }\n"
        "section#model-and-data h2 + p { break-before: page !important; }\n"
        ".conclusion, .finding { break-inside: auto !important; }\n"
        "section#summary .finding { margin-top: 215mm; }\n"
        "footer { break-before: page !important; }\n"
        "section { break-before: page; }\n", encoding="utf-8")
    bad = _render(folder, "bad", ct.calib_ci("y ~ p", data=ct.load_demo()), title="Demo validation",
                  templates=folder)
    assert ("2. Model and data" in [h for _, h in stranded_headings(bad)])
    assert [text[:15] for _, text in broken_boxes(bad)] == ["p. No evidence "]
    assert pages_without_content(bad) == [len(bad.pages)]
    assert len(half_empty_pages(bad)) >= 2


# ----------------------------------------------------------------------------- the p-value in words
def test_p_equals_writes_equals_or_less_than():
    assert p_equals(0.0312) == "p = 0.0312" and p_equals(0.03125, 2) == "p = 0.031"
    assert p_equals(0.0) == "p < 1e-300" and fmt_p(0.0) == "< 1e-300"
    assert p_equals(1.0) == "p = 1"


def test_a_p_value_of_zero_reads_p_less_than_in_every_sentence():
    from calibtest.checks.evidence_table import conclude
    from calibtest.reporting.html import render_html

    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, 4000)
    y = (rng.uniform(size=p.size) < p ** 3).astype(float)  # far from calibrated
    res = ct.calib_ci(y=y, probs=p)
    res0 = res.with_parts(null_pvalue=0.0)  # as if the p-value underflowed
    _, sentence, _ = conclude(res0)
    assert "p < 1e-300" in sentence and "p = <" not in sentence and "= <" not in sentence
    text = html_lib.unescape(re.sub(r"<[^>]+>", " ", render_html(res0)))
    assert "p < 1e-300" in text and not re.search(r"=\s*<\s*1e-300", text)
    assert "p < 1e-300" in str(res0.summary()) and "= < 1e-300" not in str(res0.summary())


class _Text(HTMLParser):
    """The HTML's text as a reader sees it: block elements separated, inline elements run on."""

    BLOCKS = {"p", "div", "td", "th", "tr", "li", "h1", "h2", "h3", "h4", "table", "caption", "figcaption",
              "section", "header", "footer", "nav", "ol", "ul", "br", "figure", "title", "style"}

    def __init__(self):
        super().__init__()
        self.parts, self.skip = [], False

    def handle_starttag(self, tag, attrs):
        self.skip = tag == "style"
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        self.skip = False
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


@pytest.mark.slow  # a long case (subprocess, PDF, wheel or many calls)
def test_weighted_reports_have_no_glued_words():
    """The summary of a weighted result appends the re-weighting to the conclusion: with a space."""
    from calibtest.reporting.html import render_html

    demo = ct.load_demo()
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(demo))
    for kwargs in ({"weights": "w"}, {"prevalence": 0.2}):
        res = ct.calib_ci("y ~ p", data=demo.assign(w=w), **kwargs)
        reader = _Text()
        reader.feed(render_html(res))
        text = "".join(reader.parts)
        assert re.search(r"\(Details: Table \d+\) Weighted analysis", " ".join(text.split())), kwargs
        glued = re.findall(r"\S*\)[A-Za-z]\S*", text)
        assert not glued, (kwargs, glued[:5])
