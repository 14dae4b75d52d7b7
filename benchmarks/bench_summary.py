"""Benchmark: a result's displays format what was computed once (``summary()``, ``_repr_html_``, the report).

Binary model at n = 10^6 (p ~ Beta(2, 5), calibrated, seed 0).  Prints the
wall and CPU time of

* ``calib_ci`` (the result),
* ``calib_test`` on the same rows (the multi-scale test the evidence runs),
* the first ``summary()`` (computes the evidence: the multi-scale test,
  Hosmer-Lemeshow, val_prob, the bin-sensitivity rows),
* a second ``summary()`` and ``_repr_html_`` after it (format only),
* the parts of the first ``summary()``: the evidence's multi-scale test,
  val_prob, Hosmer-Lemeshow and the bin-sensitivity rows (each timed by
  wrapping the function the evidence calls),
* ``val_prob`` alone on the same rows, after the summary (statsmodels
  imported): what the evidence reads, then every statistic (``to_dict()``,
  which computes the C indexes, deviances and lowess errors it defers),
* val_prob's two logistic fits (the slope's joint fit and CITL) as val_prob
  makes them (the fits to the rows binned on logit(p), then statsmodels'
  ``Logit`` by Newton from there) and as it made them before (statsmodels'
  GLM by IRLS from (0, 1) and 0), with the largest difference of their
  estimates and the largest relative difference of their standard errors,

and whether building the report's context (without the figures) after the
summary ran the multi-scale test again (it is counted by wrapping the
function the evidence calls).

Targets: the second ``summary()`` and ``_repr_html_`` each under 50 ms; the
first ``summary()`` at most ``calib_test``'s time plus 0.5 s; the report runs
the test 0 more times.

Run: ``python benchmarks/bench_summary.py`` (writes ``benchmarks/results/bench_summary.txt``).
"""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np

import calibtest as ct
from calibtest.checks import evidence_table
from calibtest.reporting.html import build_context

OUT = Path(__file__).resolve().parent / "results" / "bench_summary.txt"
N = 10**6


def timed(fn):
    """(wall seconds, CPU seconds, value) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, value


def main() -> list[str]:
    g = np.random.default_rng(0)
    p = g.beta(2, 5, N)
    y = (g.random(N) < p).astype(np.int8)
    runs = []
    parts = {}  # name -> [wall, CPU] summed over the calls
    originals = {name: getattr(evidence_table, name)
                 for name in ("calib_test_rows", "result_val_prob", "result_hosmer_lemeshow", "_sensitivity")}

    def timing(name):
        def wrapper(*args, **kwargs):
            if name == "calib_test_rows":
                runs.append(1)  # counts the evidence's runs of the multi-scale test
            wall, cpu, value = timed(lambda: originals[name](*args, **kwargs))
            acc = parts.setdefault(name, [0.0, 0.0])
            acc[0] += wall
            acc[1] += cpu
            return value
        return wrapper

    for name in originals:
        setattr(evidence_table, name, timing(name))
    lines = [f"bench_summary: binary, n = {N}, seed 0; {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}", ""]
    rows = []
    wall, cpu, res = timed(lambda: ct.calib_ci(y=y, probs=p))
    rows.append(("calib_ci", wall, cpu))
    wall_test, cpu_test, _ = timed(lambda: ct.calib_test(y=y, probs=p, rng=0))
    rows.append(("calib_test on the same rows", wall_test, cpu_test))
    wall_first, cpu_first, first = timed(lambda: str(res.summary()))
    rows.append(("first summary()", wall_first, cpu_first))
    labels = {"calib_test_rows": "multi-scale test", "result_val_prob": "val_prob",
              "result_hosmer_lemeshow": "Hosmer-Lemeshow", "_sensitivity": "bin-sensitivity rows"}
    for name, label in labels.items():
        w, c = parts.get(name, (0.0, 0.0))
        rows.append((f"  of which {label}", w, c))
    rows.append(("  of which the rest", wall_first - sum(w for w, _ in parts.values()),
                 cpu_first - sum(c for _, c in parts.values())))
    wall2, cpu2, second = timed(lambda: str(res.summary()))
    rows.append(("second summary()", wall2, cpu2))
    wall3, cpu3, _ = timed(res._repr_html_)
    rows.append(("_repr_html_ after it", wall3, cpu3))
    before = len(runs)
    wall4, cpu4, _ = timed(lambda: build_context(res, figures=False))
    rows.append(("report context (no figures)", wall4, cpu4))
    for name, fn in originals.items():
        setattr(evidence_table, name, fn)
    wall5, cpu5, vp = timed(lambda: ct.val_prob(y=y, probs=p))
    rows.append(("val_prob alone (what evidence reads)", wall5, cpu5))
    wall6, cpu6, _ = timed(vp.to_dict)
    rows.append(("  + its other statistics (to_dict)", wall6, cpu6))
    fit_rows, agreement = _fits(p, y)
    rows += fit_rows
    lines.append(f"{'step':<38}{'wall s':>10}{'CPU s':>10}")
    lines += [f"{name:<38}{w:>10.3f}{c:>10.3f}" for name, w, c in rows]
    lines.append("")
    lines.append(f"second summary() identical to the first: {second == first}")
    lines.append(agreement)
    lines.append(f"multi-scale test runs: {before} by the summaries and _repr_html_, "
                 f"{len(runs) - before} by the report's context (reran the test: {len(runs) > before})")
    lines.append(f"targets: second summary() < 0.05 s: {wall2 < 0.05}; _repr_html_ < 0.05 s: {wall3 < 0.05}; "
                 f"first summary() <= calib_test + 0.5 s ({wall_test + 0.5:.3f} s): {wall_first <= wall_test + 0.5}")
    return lines


def _fits(p: np.ndarray, y: np.ndarray) -> tuple[list, str]:
    """Timed rows of val_prob's two logistic fits now and before, and their agreement in words."""
    from calibtest.checks import logistic_fits as lf

    fin = (p > 0.0) & (p < 1.0)
    yf, logit = y[fin].astype(float), np.log(p[fin] / (1.0 - p[fin]))
    designs = ((np.column_stack([np.ones(yf.size), logit]), None), (np.ones((yf.size, 1)), logit))

    def now():
        starts = lf.binned_starts(lf.logit_cell_sums(yf, logit))
        return [lf.fit_logistic_newton(yf, X, off, start, default)
                for (X, off), start, default in zip(designs, starts, lf.DEFAULT_STARTS)]

    def before():
        return [lf.fit_logistic_glm(yf, X, off, default) for (X, off), default in zip(designs, lf.DEFAULT_STARTS)]

    wall_now, cpu_now, new = timed(now)
    wall_before, cpu_before, old = timed(before)
    est = max(float(np.max(np.abs(np.asarray(a.params) - np.asarray(b.params)))) for a, b in zip(new, old))
    se = max(float(np.max(np.abs(np.asarray(a.bse) / np.asarray(b.bse) - 1.0))) for a, b in zip(new, old))
    rows = [("val_prob's fits: binned start + Newton", wall_now, cpu_now),
            ("val_prob's fits before: IRLS from 0, 1", wall_before, cpu_before)]
    return rows, (f"val_prob's fits, binned start + Newton against IRLS from (0, 1) / 0: largest difference of the "
                  f"estimates {est:.2g}, of the standard errors (relative) {se:.2g}")


if __name__ == "__main__":
    text = "\n".join(main())
    print(text)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text + "\n", encoding="utf-8")
