"""Full (canonical) calibration, k = K: estimator, exact sigma0^2, K = 2 equivalences, output.

References: sigma0^2 by numerical integration (scipy quad/dblquad/tplquad) or
Monte Carlo; T and sigma1^2 by explicit loops over the test's own cell
assignment; the K = 2 equivalences with binary mode by algebra (U = (u, -u)).
"""
from __future__ import annotations

import json
from fractions import Fraction
from math import factorial

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special

import calibtest as ct
from calibtest.core.binning import auto_n_bins
from calibtest.cli import main
from calibtest.core.null import sigma0_sq, sigma0_sq_exact, sigma0_sq_full, sigma0_sq_full_exact


def g(z):
    z = np.asarray(z)
    return np.sum(z**2) - 2 * np.sum(z**3) + np.sum(z**2) ** 2


def draw_labels(rng, Q):
    """One class per row from the probability rows Q (inverse CDF)."""
    return np.minimum((rng.random(Q.shape[0])[:, None] >= np.cumsum(Q, axis=1)).sum(axis=1), Q.shape[1] - 1)


def slow_cell(z, B):
    """Cell of one row by the definition: floor of s_j = B (z_1+...+z_j) and the order of the fractions."""
    s = [B * sum(z[: j + 1]) for j in range(len(z) - 1)]
    a = tuple(int(np.floor(v)) for v in s)
    frac = [v - np.floor(v) for v in s]
    order = tuple(sorted(range(len(s)), key=lambda j: (frac[j], j)))
    return a + order


def slow_full(P, labels, B):
    """T and sigma1^2 of full calibration by explicit loops over cells and pairs of rows."""
    n, K = P.shape
    U = np.eye(K)[labels] - P
    cells: dict = {}
    for i in range(n):
        cells.setdefault(slow_cell(P[i], B), []).append(i)
    t = first = second = cross = 0.0
    for rows in cells.values():
        c = len(rows)
        if c >= 2:
            t += sum(float(U[a] @ U[b]) for a in rows for b in rows if a != b) / (c - 1) / n
        mu = U[rows].mean(axis=0)
        cov = sum(np.outer(U[j], U[j]) for j in rows) / c - np.outer(mu, mu)
        first += c / n * float(mu @ mu) ** 2
        second += c / n * float(mu @ mu)
        cross += c / n * float(mu @ cov @ mu)
    return t, first - second**2 + 4 * cross, len(cells)


# ----------------------------------------------------------------------------- sigma0
def test_sigma0_full_k2_is_four_times_binary():
    assert sigma0_sq_full_exact(2) == Fraction(4, 15) == 4 * sigma0_sq_exact("binary")
    assert sigma0_sq("full", 2) == sigma0_sq_full(2) == pytest.approx(4 / 15, rel=1e-15)


def test_sigma0_full_k3_k4_by_quadrature():
    v3, _ = integrate.dblquad(lambda z2, z1: 2 * g([z1, z2, 1 - z1 - z2]), 0, 1, 0, lambda z1: 1 - z1,
                              epsabs=1e-13)
    assert float(sigma0_sq_full_exact(3)) == pytest.approx(v3, rel=1e-10)
    v4, _ = integrate.tplquad(lambda z3, z2, z1: 2 * g([z1, z2, z3, 1 - z1 - z2 - z3]), 0, 1,
                              lambda z1: 0, lambda z1: 1 - z1, lambda z1, z2: 0, lambda z1, z2: 1 - z1 - z2)
    assert float(sigma0_sq_full_exact(4)) == pytest.approx(v4, rel=1e-9)


def test_sigma0_full_k10_by_monte_carlo():
    """2 * E[g(Z)] * vol(Delta_9), Z ~ Dirichlet(1, ..., 1), vol = 1/9!."""
    rng = np.random.default_rng(4)
    Z = rng.dirichlet(np.ones(10), size=400_000)
    gz = (Z**2).sum(1) - 2 * (Z**3).sum(1) + (Z**2).sum(1) ** 2
    est = 2 * gz.mean() / factorial(9)
    se = 2 * gz.std() / np.sqrt(Z.shape[0]) / factorial(9)
    assert abs(sigma0_sq_full(10) - est) < 4 * se


def test_sigma0_full_bad_k():
    with pytest.raises(ValueError, match="K >= 2"):
        sigma0_sq_full_exact(1)


# ----------------------------------------------------------------------------- K = 2
@pytest.fixture(params=[1.0, 0.4])
def binary_pair(request):
    rng = np.random.default_rng(21)
    n = 1500
    p = np.concatenate([rng.random(n - 6), [0.0, 0.0, 1.0, 1.0, 0.5, 0.25]])
    y = (rng.random(n) < special.expit(request.param * special.logit(np.clip(p, 1e-12, 1 - 1e-12)))).astype(int)
    return p, y


@pytest.mark.parametrize("B", [5, 20, 48])
def test_k2_full_is_binary_in_other_units(binary_pair, B):
    p, y = binary_pair
    rb = ct.calib_ci(y=y, probs=p, n_bins=B)
    rf = ct.calib_ci(y=1 - y, probs=np.column_stack([p, 1 - p]), k="full", n_bins=B)
    assert rf.mode == "full" and rf.k == 2 and rf.n_classes == 2
    assert rf.estimate == pytest.approx(2 * rb.estimate, rel=1e-12, abs=1e-15)
    assert rf.sigma1_sq == pytest.approx(4 * rb.sigma1_sq, rel=1e-12, abs=1e-15)
    assert rf.sigma0_sq == pytest.approx(4 * rb.sigma0_sq, rel=1e-15)
    assert rf.bin_volume == rb.bin_volume == 1 / B
    assert rf.null_zstat == pytest.approx(rb.null_zstat, rel=1e-12, abs=1e-12)
    assert rf.null_pvalue == pytest.approx(rb.null_pvalue, rel=1e-10, abs=1e-15)
    assert rf.contains_zero == rb.contains_zero and rf.ci_branch == rb.ci_branch
    assert rf.ci_lower == pytest.approx(2 * rb.ci_lower, rel=1e-12, abs=1e-15)
    assert rf.ci_upper == pytest.approx(2 * rb.ci_upper, rel=1e-12)
    assert rf.threshold == pytest.approx(2 * rb.threshold, rel=1e-12)
    # the same cells: binary keys floor(B p) (B for p = 1) against the first simplex coordinate
    assert np.array_equal(rf.bin_stats.keys[:, 0], rb.bin_stats.keys[:, 0])
    assert np.array_equal(rf.bin_stats.count, rb.bin_stats.count)


def test_k2_interval_doubles_when_zero_is_excluded():
    rng = np.random.default_rng(2)
    p = rng.random(1000)
    y = (rng.random(1000) < special.expit(0.3 * special.logit(p))).astype(int)
    rb = ct.calib_ci(y=y, probs=p, n_bins=20)
    rf = ct.calib_ci(y=1 - y, probs=np.column_stack([p, 1 - p]), k=2, n_bins=20)
    assert not rb.contains_zero and not rf.contains_zero
    assert (rf.ci_lower, rf.ci_upper) == pytest.approx((2 * rb.ci_lower, 2 * rb.ci_upper), rel=1e-12)


# ----------------------------------------------------------------------------- estimator
@pytest.mark.parametrize("K,B,n", [(3, 4, 300), (4, 3, 250), (5, 2, 200)])
def test_estimates_match_slow_reference(K, B, n):
    rng = np.random.default_rng(K)
    P = rng.dirichlet(np.full(K, 0.7), size=n)
    P[:5] = np.eye(K)[rng.integers(0, K, 5)]           # vertices, including z_K = 0 faces
    P[5] = np.r_[0.5, 0.5, np.zeros(K - 2)]
    labels = draw_labels(rng, P ** 1.5 / (P ** 1.5).sum(1, keepdims=True))
    res = ct.calib_ci(y=labels, probs=P, k="full", n_bins=B)
    t, s1, m = slow_full(P, labels, B)
    assert res.estimate == pytest.approx(t, rel=1e-10, abs=1e-14)
    assert res.sigma1_sq == pytest.approx(s1, rel=1e-9, abs=1e-14)
    assert res.n_occupied_bins == m
    assert res.bin_volume == pytest.approx(1 / (factorial(K - 1) * B ** (K - 1)), rel=1e-15)
    assert res.sigma0_sq == float(sigma0_sq_full_exact(K))


@pytest.mark.parametrize("K,B", [(3, 3), (10, 10)])
def test_sigma1_quadratic_form_equals_core(K, B):
    from calibtest.core.binstats import sigma1_sq_quadratic
    from calibtest.core.binstats import sparse_bin_sums
    from calibtest.core.simplex import simplex_groups
    from calibtest.core.binstats import sigma1_sq
    rng = np.random.default_rng(K)
    P = rng.dirichlet(np.ones(K), size=4000)
    U = np.eye(K)[draw_labels(rng, P**2 / (P**2).sum(1, keepdims=True))] - P
    stats = sparse_bin_sums(*simplex_groups(P, B), U, P)
    assert sigma1_sq_quadratic(stats) == pytest.approx(sigma1_sq(stats), rel=1e-12)


def test_k_equal_K_and_formula_labels():
    rng = np.random.default_rng(5)
    P = rng.dirichlet(np.ones(3), size=400)
    labels = draw_labels(rng, P)
    names = np.array(["cat", "dog", "owl"])[labels]
    df = pd.DataFrame(P, columns=["cat", "dog", "owl"]).assign(animal=names, code=labels)
    a = ct.calib_ci(y=labels, probs=P, k="full", n_bins=6)
    b = ct.calib_ci(y=labels, probs=P, k=3, n_bins=6)
    c = ct.calib_ci("animal ~ cat + dog + owl", data=df, k="full", n_bins=6)
    d = ct.calib_ci("code ~ cat + dog + owl", data=df, k=3, n_bins=6, alpha=0.1)
    for r in (b, c, d):
        assert r.estimate == a.estimate and r.sigma1_sq == a.sigma1_sq and r.mode == "full"
    assert c.prob_names == ("cat", "dog", "owl") and c.formula == "animal ~ cat + dog + owl"
    assert "k='full'" in c.call


def _slow_auto_bins(P, d):
    """The automatic rule by brute force: every B from the rate down, cells counted with a dict."""
    from collections import Counter
    from calibtest.core.simplex import simplex_cells

    n = P.shape[0]
    for B in range(auto_n_bins(n, d), 1, -1):
        counts = Counter(map(tuple, simplex_cells(P, B)))
        if sum(1 for c in counts.values() if c == 1) / n <= 0.05:
            return B
    return 2


def test_auto_bins_use_d_equal_K_minus_1():
    rng = np.random.default_rng(6)
    for K, n in [(2, 1000), (3, 1000), (4, 5000)]:
        P = rng.dirichlet(np.ones(K), size=n)
        res = ct.calib_ci(y=draw_labels(rng, P), probs=P, k="full")
        assert res.n_bins == _slow_auto_bins(P, K - 1) and res.n_bins_rule == "auto"
        assert res.bin_rule.rate_n_bins == auto_n_bins(n, K - 1) and res.bin_rule.dim == K - 1
        assert res.bin_rule.singleton_fraction <= 0.05 and not res.approximate
    assert res.n_bins < auto_n_bins(5000, 3)  # the rate alone leaves most rows of K = 4 alone in a cell
    assert auto_n_bins(1000, 2) == 20 and auto_n_bins(1000, 1) == 48


def test_missing_drop_in_full_mode():
    rng = np.random.default_rng(7)
    P = rng.dirichlet(np.ones(3), size=300)
    labels = draw_labels(rng, P).astype(float)
    labels[3] = np.nan
    res = ct.calib_ci(y=labels, probs=P, k="full", n_bins=4, missing="drop")
    ref = ct.calib_ci(y=np.delete(labels, 3).astype(int), probs=np.delete(P, 3, axis=0), k="full", n_bins=4)
    assert res.n_dropped == 1 and res.n == 299 and res.estimate == ref.estimate


# ----------------------------------------------------------------------------- bad input
def test_full_with_one_column_explains_binary_mode():
    with pytest.raises(ValueError, match="binary mode already is full calibration for K = 2"):
        ct.calib_ci(y=[0, 1, 1, 0], probs=[0.2, 0.6, 0.7, 0.1], k="full")
    with pytest.raises(ValueError, match="binary mode already is full calibration"):
        ct.calib_ci("y ~ p", data=pd.DataFrame({"y": [0, 1, 1], "p": [0.1, 0.5, 0.9]}), k="full")


def test_bad_full_input():
    P = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [0.6, 0.2, 0.2]])
    with pytest.raises(ValueError, match="k must be an integer or 'full'"):
        ct.calib_ci(y=[0, 1, 2], probs=P, k="canonical")
    with pytest.raises(ValueError, match="sum to 1"):
        ct.calib_ci(y=[0, 1, 2], probs=P * 1.01, k="full")
    with pytest.raises(ValueError, match="class codes outside 0..2"):
        ct.calib_ci(y=[0, 1, 3], probs=P, k="full")
    with pytest.raises(ValueError, match="n_classes=4 does not match"):
        ct.calib_ci(y=[0, 1, 2], probs=P, k="full", n_classes=4)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ct.calib_ci(y=[0, 1, 2], probs=P - [0.3, 0, -0.3], k="full")


# ----------------------------------------------------------------------------- output
@pytest.fixture
def full_result():
    rng = np.random.default_rng(8)
    P = rng.dirichlet(np.ones(3), size=600)
    return ct.calib_ci(y=draw_labels(rng, P ** 2 / (P ** 2).sum(1, keepdims=True)), probs=P, k="full",
                       n_bins=5), P


def test_bin_table_full(full_result):
    res, P = full_result
    tab = res.bin_table()
    assert len(tab) == res.n_occupied_bins and tab["count"].sum() == res.n
    assert tab["contribution"].sum() == pytest.approx(res.estimate, rel=1e-12)
    bary = tab[["barycentre_1", "barycentre_2", "barycentre_3"]].to_numpy()
    np.testing.assert_allclose(bary.sum(axis=1), 1.0)
    # every row's cell (test's own assignment) has the table's key; means are per-cell means
    own = [slow_cell(row, 5) for row in P]
    first = tab.iloc[0]
    members = [i for i, key in enumerate(own) if key[:2] == first["floor"]
               and key[2:] == tuple(np.argsort(first["order"], kind="stable"))]
    assert len(members) == first["count"]
    assert first["mean_pred_2"] == pytest.approx(P[members, 1].mean(), rel=1e-12)
    # barycentre of the cell = mean of uniform points of that cell, roughly; exact check in test_simplex
    assert np.all(bary >= -1e-12)


def test_summary_dict_and_html(full_result):
    res, _ = full_result
    text = " ".join(str(res.summary()).split())  # notes are wrapped to the table width
    assert "full (canonical, k = K)" in text and "5^2 equal-volume simplices" in text
    d = res.to_dict()
    assert d["mode"] == "full" and d["k"] == 3 and d["n_classes"] == 3
    assert d["bin_volume"] == pytest.approx(1 / 50)
    json.dumps(d)
    assert "full (canonical" in res.summary().as_html()
    assert "mode=full" in repr(res)


def test_cli_k_full(tmp_path, capsys):
    rng = np.random.default_rng(9)
    P = rng.dirichlet(np.ones(3), size=400)
    df = pd.DataFrame(P, columns=["p0", "p1", "p2"]).assign(label=draw_labels(rng, P))
    path = tmp_path / "preds.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    assert main(["ci", str(path), "--formula", "label ~ p0 + p1 + p2", "--k", "full", "--bins", "4",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = ct.calib_ci("label ~ p0 + p1 + p2", data=df, k="full", n_bins=4)
    assert out["mode"] == "full" and out["estimate"] == ref.estimate and out["ci_upper"] == ref.ci_upper
    assert main(["ci", str(path), "--formula", "label ~ p0", "--k", "full"]) == 1
    assert "binary mode already is full calibration" in capsys.readouterr().err


# ----------------------------------------------------------------------------- Monte Carlo
REPS = 400          # data sets per setting: MC s.e. of a rate near 0.05 (or 0.95) is 0.0109
ALPHA = 0.05


def mc_se(rate: float) -> float:
    return float(np.sqrt(rate * (1 - rate) / REPS))


def true_ece2_setting1(beta):
    """Full ECE^2 = 2 E[(logistic(beta logit Z1) - Z1)^2], Z1 ~ U(0, 1), by quadrature."""
    return 2 * integrate.quad(lambda z: (special.expit(beta * special.logit(z)) - z) ** 2, 0, 1)[0]


def tempered(Z, beta):
    W = Z**beta
    return W / W.sum(axis=-1, keepdims=True)


def true_ece2_dirichlet3(beta):
    """E||q(Z) - Z||^2 for Z ~ Dirichlet(1, 1, 1) (density 2 on the triangle), q = Z^beta / sum."""
    def f(z2, z1):
        z = np.array([z1, z2, 1 - z1 - z2])
        return 2 * np.sum((tempered(z, beta) - z) ** 2)
    return integrate.dblquad(f, 0, 1, 0, lambda z1: 1 - z1)[0]


def run(setting, beta, n_bins, rng, n=1000):
    rejects = covers = 0
    truth = 0.0 if beta == 1 else (true_ece2_setting1(beta) if setting == 1 else true_ece2_dirichlet3(beta))
    for _ in range(REPS):
        if setting == 1:
            z1 = rng.random(n)
            y1 = rng.random(n) < special.expit(beta * special.logit(z1))
            P, labels = np.column_stack([z1, 1 - z1]), np.where(y1, 0, 1)
        else:
            P = rng.dirichlet(np.ones(3), size=n)
            labels = draw_labels(rng, tempered(P, beta))
        res = ct.calib_ci(y=labels, probs=P, k="full", n_bins=n_bins, alpha=ALPHA)
        rejects += not res.contains_zero
        if truth == 0.0:
            covers += res.contains_zero
        else:
            covers += (res.ci_lower <= truth <= res.ci_upper) and not (res.ci_lower_open and truth == 0)
    return rejects / REPS, covers / REPS, truth


@pytest.mark.slow
def test_setting1_full_size_and_coverage():
    """Paper's Setting 1 as full calibration (K = 2), n = 1000, auto bins (B = 48).

    Measured with 1000 data sets: size 0.058 at beta = 1, coverage 0.972 at beta = 0.5.
    """
    rng = np.random.default_rng(2024)
    size, _, _ = run(1, 1.0, "auto", rng)
    assert size <= ALPHA + 3 * mc_se(ALPHA)
    _, coverage, truth = run(1, 0.5, "auto", rng)
    assert truth == pytest.approx(0.0229, abs=1e-4)
    assert coverage >= 1 - ALPHA - 3 * mc_se(1 - ALPHA)


@pytest.mark.slow
def test_dirichlet3_full_size_and_coverage():
    """K = 3, Z ~ Dirichlet(1,1,1), P(Y = j | Z) proportional to Z_j^beta, n = 1000, B = 10 (100 cells).

    Measured with 1000 data sets: size 0.068 at beta = 1; coverage 0.975 at beta = 0.5
    (ECE^2 = 0.0283).  The rate B = 20 (the automatic B before the occupancy rule) (400 cells, 2.5 rows per cell) leaves
    most cells with 0-2 rows: T is then biased down by the singleton cells and
    sigma1 underestimates its spread (coverage 0.79 at beta = 2 with B = 20, 0.91
    with B = 10), so this setting uses B = 10.
    """
    rng = np.random.default_rng(77)
    size, _, _ = run(3, 1.0, 10, rng)
    assert size <= ALPHA + 3 * mc_se(ALPHA)
    _, coverage, truth = run(3, 0.5, 10, rng)
    assert truth == pytest.approx(0.02825, abs=1e-4)
    assert coverage >= 1 - ALPHA - 3 * mc_se(1 - ALPHA)
