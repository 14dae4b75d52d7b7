"""summary(), to_dict(), bin_table() and repr."""
import json

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

import calibtest as ct
from calibtest._format import fmt


@pytest.fixture
def res():
    rng = np.random.default_rng(4)
    P = rng.dirichlet(np.ones(5), size=800)
    labels = np.array([rng.choice(5, p=row) for row in P])
    return ct.calib_ci(y=labels, probs=P, k=2, alpha=0.1)


def test_summary_formats(res):
    s = res.summary()
    text = str(s)
    for piece in ("top-1-to-k (k = 2)", "No. observations:", "800", fmt(res.estimate), fmt(res.sigma0_sq),
                  fmt(res.null_pvalue, 4), "Adjusted 90% confidence interval", "calibrated: z0"):
        assert piece in text, piece
    html = s.as_html()
    assert "<table" in html and fmt(res.ci_upper) in html
    latex = s.as_latex()
    assert "\\begin{tabular}" in latex or "\\begin{table}" in latex
    assert s._repr_html_() == html


def test_summary_html_escapes_user_text():
    df = pd.DataFrame({"y": [0, 1, 1, 0] * 10, "p": np.linspace(0.1, 0.9, 40)})
    df = df.rename(columns={"p": "<script>alert(1)</script>"})
    res = ct.calib_ci('y ~ Q("<script>alert(1)</script>")', data=df)
    html = res.summary().as_html()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<script>" in str(res.summary())  # text output is not escaped


def test_to_dict_is_json_safe_and_complete(res):
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    for key in ("estimate", "ece", "ci_lower", "ci_upper", "ci_lower_open", "ece_ci_lower", "ece_ci_upper",
                "contains_zero", "sigma1_sq", "sigma0_sq", "se", "threshold", "null_zstat", "null_pvalue",
                "n", "n_bins", "k", "n_classes", "mode", "alpha"):
        assert key in d, key
    assert d["estimate"] == res.estimate and d["n"] == 800
    assert_allclose(d["ece_ci_upper"], np.sqrt(res.ci_upper))


def test_bin_table_contributions_sum_to_estimate(res):
    table = res.bin_table()
    assert_allclose(table["contribution"].sum(), res.estimate, rtol=1e-10)
    assert table["count"].sum() == res.n
    assert {"lower_1", "upper_2", "mean_pred_1", "mean_outcome_2"} <= set(table.columns)
    row = table.iloc[0]
    assert row["lower_1"] <= row["mean_pred_1"] < row["upper_1"] or row["upper_1"] == row["lower_1"]


def test_sparse_bin_warning():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=30)
    res = ct.calib_ci(y=(rng.uniform(size=30) < p).astype(int), probs=p, n_bins=200)
    assert res.n_singleton_bins > res.n_occupied_bins / 2
    assert "fewer than 2 rows" in str(res.summary())


def test_repr(res):
    assert repr(res).startswith("<CalibrationResult mode=topk k=2 n=800")
