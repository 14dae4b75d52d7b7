"""Every timing, throughput and memory figure in README.md and docs/ is the output of a benchmark.

A figure is a number (or a range "a-b", "a to b", "a and b", "a / b") followed by a unit of time (ms, s, min,
minutes, seconds, hours), of throughput (M rows/s, rows per CPU/wall second) or of memory (MiB, GiB, MB, GB),
optionally with "CPU" or "wall" in between. "3 s.e." (a standard error) and "4s" (a symbol) are not figures.
The figure's paragraph (or, failing that, its section) must name a benchmark (`benchmarks/NAME.py` or its
output `benchmarks/results/NAME.txt`), and the number must be in that benchmark's saved output
(`benchmarks/results/NAME.txt` or `benchmarks/NAME.txt`), as printed or rounded to the digits the docs give.
ALLOWED lists the few figures that are not a benchmark's output, each with its reason.
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
PAGES = ["README.md"] + sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md")
                              if not any(part.startswith("_") for part in p.relative_to(REPO / "docs").parts))

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_UNIT = (r"ms|s|sec|seconds?|min|minutes?|hours?|MiB|GiB|MB|GB|M rows/s|rows/s"
         r"|rows per (?:CPU |wall )?second")
FIGURE = re.compile(rf"(?<![\w.^/·−-])({_NUM})(?:\s*(?:-|–|to|and|/)\s*({_NUM}))?"
                    rf"\s+(?:(?:of\s+)?(?:CPU|wall)\s+)?({_UNIT})(?!\w|\.\w)")
BENCHMARK = re.compile(r"benchmarks/(?:results/)?(\w+)\.(?:py|txt)")
HEADING = re.compile(r"^#{1,6} ")

#: (page, figure as written, whitespace collapsed) -> why it is no benchmark's output.
ALLOWED = {
    ("README.md", "3 minutes"): "the quick test suite's time, measured by CI (.ci/run), not a benchmark",
    ("README.md", "3 min"): "the quick test suite's time, measured by CI (.ci/run), not a benchmark",
    ("README.md", "9 s"): "the quick test suite's time, measured by CI (.ci/run), not a benchmark",
    ("README.md", "4 min"): "the slow tests' time, measured by CI (.ci/run), not a benchmark",
    ("README.md", "20 s"): "the slow tests' time, measured by CI (.ci/run), not a benchmark",
    ("docs/scale.md", "207 MB"): "computed in the text (two R x bins arrays of 8-byte numbers), not measured",
}


def _numbers(text: str) -> list[str]:
    return re.findall(_NUM, text)


def _same(doc: str, printed: str) -> bool:
    """``printed`` rounds to ``doc`` at the digits ``doc`` gives (and gives at least as many)."""
    doc, printed = Decimal(doc.replace(",", "")), Decimal(printed.replace(",", ""))
    if printed.as_tuple().exponent > doc.as_tuple().exponent:
        return False
    return printed.quantize(doc, rounding=ROUND_HALF_UP) == doc


def output_of(name: str) -> Path | None:
    """The saved output of ``benchmarks/NAME.py``: ``benchmarks/results/NAME.txt`` or ``benchmarks/NAME.txt``."""
    for path in (BENCH / "results" / f"{name}.txt", BENCH / f"{name}.txt"):
        if path.exists():
            return path
    return None


def _blocks(text: str) -> list[tuple[str, str]]:
    """(paragraph, its section) pairs: paragraphs split by blank lines, sections by headings."""
    sections, current = [], []
    for line in text.splitlines():
        if HEADING.match(line) and current:
            sections.append("\n".join(current))
            current = []
        current.append(line)
    sections.append("\n".join(current))
    return [(para, section) for section in sections for para in re.split(r"\n\s*\n", section)]


def _figures(text: str, page: str):
    """(figure as written, its match, the benchmarks named near it) of each figure not in ALLOWED."""
    for para, section in _blocks(text):
        for m in FIGURE.finditer(para):
            figure = " ".join(m.group(0).split())
            if (page, figure) not in ALLOWED:
                yield figure, m, BENCHMARK.findall(para) or BENCHMARK.findall(section)


def unbacked_figures(text: str, page: str, output=output_of) -> list[str]:
    """The figures of ``text`` that no benchmark named near them prints, each with the reason."""
    problems = []
    for figure, m, names in _figures(text, page):
        if not names:
            problems.append(f"{page}: '{figure}' names no benchmark in its paragraph or section")
            continue
        printed = [n for name in dict.fromkeys(names) if (path := output(name)) is not None
                   for n in _numbers(path.read_text(encoding="utf-8"))]
        if not printed:
            problems.append(f"{page}: '{figure}': no saved output of {sorted(set(names))}")
            continue
        for number in filter(None, m.group(1, 2)):
            if not any(_same(number, p) for p in printed):
                problems.append(f"{page}: '{figure}': {number} is not in the output of {sorted(set(names))}")
    return problems


@pytest.mark.parametrize("page", PAGES)
def test_every_figure_is_a_benchmark_output(page):
    assert unbacked_figures((REPO / page).read_text(encoding="utf-8"), page) == []


def test_the_figure_pattern_takes_timings_and_not_statistics():
    text = ("took 1.79 s (2.6-2.9 s of CPU), 267 and 253 CPU s, 5,165,950 rows per CPU second, 17.8 M rows/s, "
            "peak 340 MiB; 3 s.e. below, O(B^(-2s)), 0s and 1s, 10^6 rows, p = 0.05")
    found = [[n for n in m.group(1, 2) if n] for m in FIGURE.finditer(text)]
    assert found == [["1.79"], ["2.6", "2.9"], ["267", "253"], ["5,165,950"], ["17.8"], ["340"]]


def _fake_output(name):
    return {"bench_x": FAKE_OUTPUT}.get(name)


class _Text:
    def __init__(self, text):
        self.text = text

    def read_text(self, encoding=None):
        return self.text


FAKE_OUTPUT = _Text("bench_x: load average 3.1\ncalib_ci  wall 1.786 s  CPU 2.877 s; 5,165,950 rows per CPU second\n")


@pytest.mark.parametrize("text, problems", [
    ("`benchmarks/bench_x.py`: 1.79 s wall, 2.9 s of CPU, 5,165,950 rows per CPU second.", 0),
    ("## Speed\n\n`benchmarks/bench_x.py` prints the time.\n\nThe call took 1.786 s.", 0),  # named by the section
    ("The call took 1.79 s.", 1),                                  # no benchmark named
    ("`benchmarks/bench_x.py`: 1.80 s.", 1),                       # another number
    ("`benchmarks/bench_x.py`: 1.7861 s.", 1),                     # more digits than printed
    ("`benchmarks/bench_x.py`: 1.79-2.5 s.", 1),                   # one end of the range is not printed
    ("`benchmarks/bench_y.py`: 1.79 s.", 1),                       # a benchmark without saved output
])
def test_a_figure_without_its_benchmark_output_is_caught(text, problems):
    assert len(unbacked_figures(text, "docs/page.md", output=_fake_output)) == problems


def test_the_outputs_the_docs_quote_state_the_machines_load():
    names = {name for page in PAGES for _, _, near in _figures((REPO / page).read_text(encoding="utf-8"), page)
             for name in near}
    outputs = {name: output_of(name) for name in names}
    assert len(outputs) >= 10
    assert [name for name, path in outputs.items()
            if path is not None and "load" not in path.read_text(encoding="utf-8").lower()] == []


def test_the_allowed_figures_are_still_in_the_docs():
    found = {(page, " ".join(m.group(0).split())) for page in PAGES
             for para, _ in _blocks((REPO / page).read_text(encoding="utf-8")) for m in FIGURE.finditer(para)}
    assert [key for key in ALLOWED if key not in found] == []
