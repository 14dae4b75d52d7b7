"""Rendering time of a validation report: one model, HTML and PDF (target: PDF < 5 s).

Renders the report of ``calib_ci("y ~ p", data=load_demo())`` (n = 3183, the
packaged demo) with full document-control metadata, ``--repeat`` times after
one warm-up (imports, fonts and matplotlib caches are then loaded), and prints
for each step the median wall-clock and CPU seconds:

* ``context``: the numbers, the evidence table (multi-scale Monte Carlo test,
  conditional nulls at five B) and the four PNG figures;
* ``html``: context plus the Jinja2 rendering, written to a file;
* ``pdf``: the same plus WeasyPrint layout to PDF/A-3b with the JSON attachments.

Also prints which font subsetter WeasyPrint used (HarfBuzz-Subset, a C
library, when installed; else fontTools) and, with HarfBuzz-Subset, the PDF
time with fontTools instead, and the load average before and after, since the wall-clock times on
a shared machine move with it (CPU time moves much less).

Usage (from the repository root)::

    python benchmarks/bench_report.py [--repeat 3] [--out benchmarks/results/bench_report.txt]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import calibtest as ct
from calibtest.reporting.html import build_context

METADATA = {"document_id": "BENCH-1", "document_version": "1.0", "author": "A", "reviewer": "B", "approver": "C",
            "organisation": "O", "model_name": "demo model", "model_version": "1", "intended_use": "benchmark",
            "population": "demo", "outcome_definition": "y", "data_source": "demo.csv", "data_period": "n/a",
            "inclusion_criteria": "all", "revisions": [{"version": "1.0", "date": "2026-11-23",
                                                         "description": "benchmark"}]}


def _time(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=None, help="also write the lines printed to this file")
    args = parser.parse_args(argv)
    lines = []

    def say(text):
        print(text, flush=True)
        lines.append(text)

    res = ct.calib_ci("y ~ p", data=ct.load_demo())
    folder = Path(tempfile.mkdtemp())
    steps = {
        "context": lambda: build_context(res, metadata=METADATA),
        "html": lambda: ct.report(res, folder / "r.html", metadata=METADATA),
        "pdf": lambda: ct.report(res, folder / "r.pdf", metadata=METADATA),
    }
    say(f"calibtest {ct.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"one-model report of the demo data (n = {res.n}, B = {res.n_bins}); median of {args.repeat} runs "
        "after one warm-up")
    say(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, fn in steps.items():
        fn()  # warm-up
        runs = [_time(fn) for _ in range(args.repeat)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        say(f"{name:8s} wall {wall:6.2f} s   CPU {cpu:6.2f} s" + ("   (target: < 5 s)" if name == "pdf" else ""))
    # WeasyPrint subsets the embedded fonts with HarfBuzz-Subset (C) when the library is installed
    # (Debian: libharfbuzz-subset0), else with fontTools (Python): time the fallback too
    from weasyprint.pdf import fonts as weasy_fonts
    say(f"font subsetting: {'HarfBuzz-Subset' if weasy_fonts.harfbuzz_subset is not None else 'fontTools'}")
    if weasy_fonts.harfbuzz_subset is not None:
        saved, weasy_fonts.harfbuzz_subset = weasy_fonts.harfbuzz_subset, None
        try:
            runs = [_time(steps["pdf"]) for _ in range(args.repeat)]
        finally:
            weasy_fonts.harfbuzz_subset = saved
        say(f"pdf with fontTools subsetting instead: wall {statistics.median(r[0] for r in runs):6.2f} s   "
            f"CPU {statistics.median(r[1] for r in runs):6.2f} s")
    from pypdf import PdfReader
    say(f"PDF: {len(PdfReader(str(folder / 'r.pdf')).pages)} pages, {(folder / 'r.pdf').stat().st_size} bytes; "
        f"HTML: {(folder / 'r.html').stat().st_size} bytes")
    say(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
