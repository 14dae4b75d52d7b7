"""The simulation-study runner: per-data-set intervals, seeding, the tidy summary."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import calibtest as ct
from calibtest import simulation as sim
from calibtest.simulation import study

GRID = {1: [1.0, 0.5], 3: [0.0, 0.05]}


def _dataset(setting, beta, i, seed, n):
    key = 2 * int(round(abs(beta) * 1e6)) + int(beta < 0)
    ss = np.random.SeedSequence(seed, spawn_key=(setting, key, i))
    data_ss, boot_ss, sub_ss, hulc_ss, _ = ss.spawn(5)
    data = getattr(sim, f"setting{setting}")(n, beta, rng=np.random.default_rng(data_ss))
    return data, boot_ss, sub_ss, hulc_ss


def test_study_intervals_equal_calib_ci_on_the_same_data():
    raw = study.simulate_intervals(settings=(1, 3), betas=GRID, n=60, n_bins={1: 10, 3: 5}, n_datasets=3,
                                   alpha=0.1, methods=("adjusted", "bootstrap", "subsampling", "hulc"),
                                   n_resamples=30, seed=4)
    assert len(raw) == 2 * 2 * 3 * 4
    for (s, beta, i) in [(1, 0.5, 2), (3, 0.0, 1)]:
        data, boot_ss, sub_ss, hulc_ss = _dataset(s, beta, i, 4, 60)
        if s == 1:
            kw = dict(y=data.correct, probs=data.confidence, n_classes=2, n_bins=10)
        else:
            kw = dict(y=data.labels, probs=data.probs, k=2, n_bins=5)
        got = raw[(raw.setting == s) & (raw.beta == beta) & (raw.dataset == i)].set_index("method")
        adj = ct.calib_ci(alpha=0.1, **kw)
        assert got.loc["adjusted", "lower"] == pytest.approx(adj.ci_lower, abs=1e-15)
        assert got.loc["adjusted", "upper"] == pytest.approx(adj.ci_upper, rel=1e-12)
        assert bool(got.loc["adjusted", "reject"]) == (not adj.contains_zero)
        for method, ss in (("bootstrap", boot_ss), ("subsampling", sub_ss), ("hulc", hulc_ss)):
            res = ct.calib_ci(alpha=0.1, method=method, n_resamples=30, rng=np.random.default_rng(ss), **kw)
            lo, hi = got.loc[method, "lower"], got.loc[method, "upper"]
            assert max(lo, 0.0) == pytest.approx(res.ci_lower, abs=1e-15)
            assert max(hi, 0.0) == pytest.approx(res.ci_upper, abs=1e-15)
            assert bool(got.loc[method, "reject"]) == (not res.contains_zero)
        truth = sim.true_ece_sq(s, beta, "top1" if s == 1 else "top2")
        assert (got["true_ece_sq"] == truth).all()


def test_full_calibration_rejection_is_the_binary_z_test():
    raw = study.simulate_intervals(settings=(1, 3), betas={1: [0.6], 3: [0.05]}, n=80, n_bins={1: 10, 3: 5},
                                   n_datasets=4, methods=("adjusted", "adjusted_full"), seed=7)
    assert set(raw[raw.setting == 3].method) == {"adjusted"}  # run in settings 1-2 only
    full = raw[raw.method == "adjusted_full"].set_index("dataset")
    assert full["lower"].isna().all() and full["covered"].isna().all()
    for i in range(4):
        data, *_ = _dataset(1, 0.6, i, 7, 80)
        res = ct.calib_ci(y=(data.labels == 0).astype(int), probs=data.probs[:, 0], n_bins=10, alpha=0.1)
        assert bool(full.loc[i, "reject"]) == (not res.contains_zero)


def test_tcal_in_the_study_is_tcal_test_on_full_calibration():
    if "tcal" not in study.available_methods():
        pytest.skip("calibtest.tcal_test not available")
    raw = study.simulate_intervals(settings=(1, 3), betas={1: [0.4], 3: [0.0]}, n=60, n_bins={1: 10, 3: 5},
                                   n_datasets=3, methods=("adjusted", "tcal"), tcal_draws=50, seed=5)
    assert set(raw[raw.setting == 3].method) == {"adjusted"}  # the paper runs T-Cal in settings 1-2
    tc = raw[raw.method == "tcal"].set_index("dataset")
    for i in range(3):
        ss = np.random.SeedSequence(5, spawn_key=(1, study.beta_key(0.4), i)).spawn(5)
        data = sim.setting1(60, 0.4, rng=np.random.default_rng(ss[0]))
        res = ct.tcal_test(y=data.labels, probs=data.probs, k="full", n_bins=10, alpha=0.1, n_draws=50,
                           rng=np.random.default_rng(ss[4]), statistic="debiased")
        assert bool(tc.loc[i, "reject"]) == bool(res.reject)


def test_results_do_not_depend_on_workers_or_chunks():
    kw = dict(settings=(1, 3), betas=GRID, n=50, n_bins={1: 10, 3: 5}, n_datasets=6, n_resamples=20, seed=1,
              methods=("adjusted", "bootstrap", "subsampling", "hulc", "subsampling_reflected"))
    one = study.simulate_intervals(n_jobs=1, chunk_size=6, **kw)
    two = study.simulate_intervals(n_jobs=2, chunk_size=4, **kw)
    pd.testing.assert_frame_equal(one, two)
    fewer = study.simulate_intervals(**{**kw, "methods": ("adjusted", "hulc"), "betas": {1: [0.5], 3: [0.05]}})
    merged = one[one.method.isin(["adjusted", "hulc"]) & one.beta.isin([0.5, 0.05])].reset_index(drop=True)
    pd.testing.assert_frame_equal(fewer, merged)
    assert study.beta_key(0.05) == 100000 and study.beta_key(-0.05) == 100001 and study.beta_key(0.0) == 0


def test_summary_by_hand():
    raw = pd.DataFrame({
        "setting": 1, "beta": 0.5, "target": "top1", "n_bins": 20, "true_ece_sq": 0.01,
        "dataset": [0, 1, 2, 3, 0, 1, 2, 3],
        "method": ["adjusted"] * 4 + ["bootstrap"] * 4,
        "covered": [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0],
        "reject": [True, False, False, True, True, True, True, False],
        "length": [1.0, 2.0, 3.0, 2.0, 4.0, 4.0, 6.0, np.inf],
        "hulc_splits": np.nan,
    })
    out = study.summarise_study(raw).set_index("method")
    assert out.loc["adjusted", "coverage"] == 0.75 and out.loc["bootstrap", "coverage"] == 0.25
    assert out.loc["adjusted", "coverage_se"] == pytest.approx(math.sqrt(0.75 * 0.25 / 4))
    # Clopper-Pearson from the beta quantiles directly
    assert out.loc["adjusted", "coverage_lo"] == pytest.approx(stats.beta.ppf(0.025, 3, 2))
    assert out.loc["adjusted", "coverage_hi"] == pytest.approx(stats.beta.ppf(0.975, 4, 1))
    assert out.loc["bootstrap", "power"] == 0.75
    assert out.loc["adjusted", "mean_length"] == 2.0
    assert out.loc["bootstrap", "mean_length"] == pytest.approx(14 / 3)
    assert out.loc["bootstrap", "n_infinite"] == 1
    assert out.loc["bootstrap", "length_ratio"] == pytest.approx(7 / 3)
    assert out.loc["adjusted", "length_q05"] == pytest.approx(1.15)  # type 7 on 1, 2, 2, 3
    assert out.loc["adjusted", "true_ece"] == pytest.approx(0.1)


def test_covered_respects_the_open_end_at_zero():
    raw = study._raw_frame(
        [study._Task(3, 0, 0.0, 0, 2, 10, 5, "top2", 0.1, ("adjusted",), 10, 10, 0)],
        [np.array([[[0.0, 0.1, 1.0, 1.0, np.nan, np.nan]], [[0.0, 0.1, 0.0, 0.0, np.nan, np.nan]]])],
        ("adjusted",), (3,), {3: np.array([0.0])}, {3: 5}, {3: "top2"})
    # truth 0: (0, 0.1] does not cover it, [0, 0.1] does
    assert raw["covered"].tolist() == [0.0, 1.0]


def test_bad_study_arguments():
    with pytest.raises(ValueError, match="unknown methods"):
        study.simulate_intervals(methods=("adjusted", "jackknife"), n_datasets=1)
    with pytest.raises(ValueError, match="n_bins is needed"):
        study.simulate_intervals(n=70, n_datasets=1)
    with pytest.raises(ValueError, match="settings"):
        study.simulate_intervals(settings=(4,), n_datasets=1)


@pytest.mark.slow
def test_smoke_study_reproduces_the_papers_qualitative_findings():
    """Small version of the paper's study (n = 100, bins 20/10, alpha = 0.1).

    At a calibrated model the bootstrap's coverage is far below 0.9, HulC and
    subsampling keep it, and both are longer than the adjusted interval (paper,
    Figures "Coverage" and "Length ratio"); 120 data sets per cell.
    """
    out = study.run_study(settings=(1, 3), betas={1: [1.0], 3: [0.0]}, n=100, n_datasets=120, alpha=0.1,
                          methods=("adjusted", "bootstrap", "subsampling", "hulc"), n_resamples=200, seed=2024,
                          n_jobs=2, chunk_size=30)
    assert set(out.columns) >= {"coverage", "coverage_lo", "coverage_hi", "mean_length", "length_q05",
                                "length_q95", "length_ratio", "power", "power_lo", "power_hi"}
    assert len(out) == 8 and (out.n_datasets == 120).all()
    cov = out.set_index(["setting", "method"])["coverage"]
    ratio = out.set_index(["setting", "method"])["length_ratio"]
    se = math.sqrt(0.9 * 0.1 / 120)
    for s in (1, 3):
        assert cov[(s, "bootstrap")] < 0.9 - 3 * se
        assert cov[(s, "hulc")] >= 0.9 - 3 * se
        assert cov[(s, "subsampling")] >= 0.9 - 3 * se
        assert ratio[(s, "hulc")] > 1.0 and ratio[(s, "bootstrap")] > 1.0


@pytest.mark.slow
def test_vignette_script_smoke(tmp_path):
    """The vignette script end to end with 3 data sets per beta: figures, cached results, markdown."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "vignettes" / "simulation_study.py"
    if not script.exists():
        pytest.skip("vignettes/ not present")
    subprocess.run([sys.executable, str(script), "--datasets", "3", "--jobs", "2", "--out", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=300)
    for name in ("coverage_n100", "coverage_n1000", "length_n100", "length_n1000", "power_n100",
                 "power_n1000", "bins_coverage", "bins_length"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (tmp_path / "simulation_study.md").read_text()
    assert "## n = 100" in text and "## n = 1000" in text and "## Bin sensitivity (n = 1000)" in text
    results = pd.read_csv(tmp_path / "results" / "study_n1000.csv")
    assert set(results.method) >= {"adjusted", "bootstrap", "subsampling", "hulc"}
    assert (results.n_datasets == 3).all() and len(results[results.method == "adjusted"]) == 3 * 21
    meta = json.loads((tmp_path / "results" / "study_n1000_tcal.json").read_text())
    assert meta["n_datasets"] == 3 and meta["tcal_draws"] == 1000 and meta["wall_seconds"] > 0
