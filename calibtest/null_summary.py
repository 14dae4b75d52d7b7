"""Summary rows and notes of the finite-sample nulls (see :mod:`calibtest.conditional`).

The summary always shows the paper's asymptotic test next to the conditional
(shifted-gamma) test, and the Monte Carlo test when it was run, with a note
when they disagree at the chosen alpha.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["asymptotic_test", "null_rows", "null_notes"]


def asymptotic_test(res) -> tuple[float, float, float]:
    """(z0, p-value, threshold) of the paper's calibrated-regime test, whatever the chosen null."""
    if res.null == "asymptotic" or res.asymptotic_pvalue is None:
        return res.null_zstat, res.null_pvalue, res.threshold
    from .results import _threshold
    return res.asymptotic_zstat, res.asymptotic_pvalue, _threshold(res.alpha, res.sigma0_sq, res.n,
                                                                   res.bin_volume)


def null_rows(res) -> pd.DataFrame:
    """Rows of the tests table for the conditional and Monte Carlo nulls."""
    from .summary import fmt
    rows = {"conditional: T / sd(T | Z), shifted gamma": {
        "variance": fmt(res.conditional_variance), "statistic": fmt(res.conditional_zstat),
        "p-value": fmt(res.conditional_pvalue, 4), "threshold": fmt(res.conditional_threshold)}}
    if res.mc_pvalue is not None:
        rows[f"Monte Carlo: {res.mc_draws} label draws"] = {
            "variance": "", "statistic": "", "p-value": fmt(res.mc_pvalue, 4),
            "threshold": fmt(res.threshold) if res.null == "monte-carlo" else ""}
    return pd.DataFrame.from_dict(rows, orient="index")


def null_notes(res) -> list[str]:
    """Notes on the null used, and on disagreement between the nulls at ``res.alpha``."""
    from .summary import fmt
    if res.conditional_pvalue is None:
        return []
    notes = []
    tests = {"asymptotic": asymptotic_test(res)[1], "conditional": res.conditional_pvalue}
    if res.mc_pvalue is not None:
        tests["monte-carlo"] = res.mc_pvalue
    rejects = {name: p <= res.alpha for name, p in tests.items()}
    if len(set(rejects.values())) > 1:
        said = "; ".join(f"{name} p = {fmt(p, 4)} ({'rejects' if rejects[name] else 'does not reject'})"
                         for name, p in tests.items())
        notes.append(f"The tests of ECE = 0 disagree at level {res.alpha:g}: {said}. The {res.null} null "
                     "(null=) decides whether 0 joins the interval; the conditional and Monte Carlo nulls "
                     "hold their size in finite samples, the asymptotic one may not.")
    if res.conditional_skewness is not None:
        notes.append(f"Conditional null given the predictions: sd(T | Z) = "
                     f"{fmt(res.conditional_variance ** 0.5 if res.conditional_variance else 0.0)}, "
                     f"skewness {fmt(res.conditional_skewness, 3)}.")
    if res.mc_seed is not None:
        notes.append(f"Monte Carlo null: {res.mc_draws} label draws, seed {res.mc_seed} (rng=) reproduces them.")
    return notes
