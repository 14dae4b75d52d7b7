"""Uno's IPCW AUC at a horizon (calibtest.core.time_auc) against riskRegression and a slow pairwise reference.

``tests/reference/survival_auc.json`` was written by ``tests/reference/survival_auc.R`` (R 4.2.2,
riskRegression 2022.11.28, prodlim 2019.11.13) on ``tests/reference/survival_evidence_data.csv``:

    Score(list(m = risk), formula = Hist(time, event) ~ 1, data = d, times = t, metrics = "auc",
          null.model = FALSE, cens.model = "km")$AUC$score

``test_rerun_r_reference`` runs the script again (slow; skipped without Rscript).
"""
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from calibtest.core.time_auc import time_auc
from reference_helpers import load_reference, survival_set

REPO = Path(__file__).resolve().parents[2]
REF_DIR = REPO / "tests" / "reference"
REF_JSON = REF_DIR / "survival_auc.json"
REF_DATA = REF_DIR / "survival_evidence_data.csv"
REF_SCRIPT = REF_DIR / "survival_auc.R"


def _reference() -> dict:
    return load_reference(REF_JSON, REF_DATA)


def _data(name: str):
    time, event, risk, horizon = survival_set(REF_DATA, name)
    return time, event == 1, risk, horizon


def _slow_auc(time, event, risk, horizon):
    """Every pair spelled out, the reverse Kaplan-Meier by a loop over the distinct times (events first)."""
    def g_before(s):
        g = 1.0
        for u in np.unique(time[time < s]):
            at_risk = np.sum((time > u) | ((time == u) & ~event))
            g *= 1.0 - np.sum((time == u) & ~event) / at_risk
        return g
    num = den = 0.0
    controls = np.flatnonzero(time > horizon)
    for i in np.flatnonzero(event & (time <= horizon)):
        w = 1.0 / g_before(time[i])
        for j in controls:
            num += w * (1.0 if risk[i] > risk[j] else 0.5 if risk[i] == risk[j] else 0.0)
            den += w
    return num / den


@pytest.mark.parametrize("name", ["weibull", "ties"])
def test_estimate_matches_riskregression_and_the_slow_reference(name):
    ref = _reference()[name]
    got = time_auc(*_data(name))
    assert got.auc == pytest.approx(ref["auc"], abs=1e-8)
    # the slow reference on a third of the rows (every pair, the weights by a loop)
    time, event, risk, horizon = _data(name)
    keep = slice(0, None, 3)
    assert time_auc(time[keep], event[keep], risk[keep], horizon).auc == pytest.approx(
        _slow_auc(time[keep], event[keep], risk[keep], horizon), abs=1e-12)


def test_standard_error_matches_riskregression():
    ref = _reference()
    # without tied times: the same influence function, to rounding
    assert time_auc(*_data("weibull")).se == pytest.approx(ref["weibull"]["se"], rel=1e-8)
    # times tied between events and censorings: within 1e-4 (relative) of riskRegression's
    got = time_auc(*_data("ties")).se
    assert got == pytest.approx(ref["ties"]["se"], rel=1e-4)


def test_the_censoring_term_is_in_the_standard_error():
    """With heavy censoring the influence of the estimated G changes the se: it differs from the se of the same
    estimator with G taken as known, computed here by the delta method on the weighted sums alone."""
    rng = np.random.default_rng(4)
    n = 2000
    risk = rng.uniform(0.05, 0.6, n)
    t = rng.exponential(5 / -np.log1p(-risk))
    c = rng.uniform(0, 8, n)
    time, event = np.minimum(t, c), t <= c
    got = time_auc(time, event, risk, 5.0)
    # G known: jackknife of the estimate with the weights held at their full-data values
    u = np.unique(time)
    at_c = np.array([np.sum((time > s) | ((time == s) & ~event)) for s in u])
    cens = np.array([np.sum((time == s) & ~event) for s in u])
    g_all = np.r_[1.0, np.cumprod(1 - cens / at_c)[:-1]]
    w = 1.0 / g_all[np.searchsorted(u, time)]
    case, ctrl = event & (time <= 5.0), time > 5.0
    k = (risk[:, None] > risk[None, :]) * case[:, None] * ctrl[None, :] * w[:, None]
    k = k + 0.5 * (risk[:, None] == risk[None, :]) * case[:, None] * ctrl[None, :] * w[:, None]
    num_i, num_j = k.sum(1), k.sum(0)
    a, b, cc = k.sum(), (w * case).sum(), ctrl.sum()
    auc_known = a / (b * cc)
    assert auc_known == pytest.approx(got.auc, abs=1e-12)
    # a jackknife over rows (weights fixed) gives the se with G known
    loo = np.array([(a - num_i[i] - num_j[i]) / ((b - w[i] * case[i]) * (cc - ctrl[i])) for i in range(n)])
    se_known = math.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2))
    assert got.se == pytest.approx(se_known, rel=0.2)  # the same order ...
    assert abs(got.se - se_known) / se_known > 1e-4  # ... but not the same: the censoring term is there


def test_no_case_or_no_control_gives_nan():
    time = np.array([6.0, 7.0, 8.0])
    out = time_auc(time, np.ones(3, bool), np.array([0.1, 0.2, 0.3]), 5.0)
    assert math.isnan(out.auc) and math.isnan(out.se) and (out.n_cases, out.n_controls) == (0, 3)


@pytest.mark.slow
def test_rerun_r_reference(tmp_path):
    if shutil.which("Rscript") is None:
        pytest.skip("Rscript not found")
    stored = _reference()
    out = tmp_path / "auc.json"
    subprocess.run(["Rscript", str(REF_SCRIPT), str(out)], cwd=REPO, check=True, capture_output=True, timeout=600)
    fresh = json.loads(out.read_text())
    for name in ("weibull", "ties"):
        for key in ("auc", "se", "lower", "upper"):
            assert fresh[name][key] == pytest.approx(stored[name][key], rel=1e-12)
