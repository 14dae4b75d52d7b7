"""val_prob against R's rms::val.prob and against slow, obviously correct computations.

The reference numbers in ``tests/reference/valprob_reference.json`` were written by
``tests/reference/valprob_reference.R`` (R 4.2.2, rms 6.5.0, Hmisc 4.8.0); the
numeric tests read that file and need no R.  ``test_rerun_r_reference`` runs the
R script again and skips when ``Rscript`` or rms is not installed.  Data sets
under ``../shared`` are skipped when that folder is absent.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from calibtest.datasets import load_demo
from calibtest.checks.val_prob import FIELDS, LAZY_STATISTICS, ValProbResult, val_prob
from calibtest import val_prob as ct_val_prob

REPO = Path(__file__).resolve().parents[2]
REF_DIR = REPO / "tests" / "reference"
REF_JSON = REF_DIR / "valprob_reference.json"
REF_SCRIPT = REF_DIR / "valprob_reference.R"
SHARED_TCAL = REPO.parent / "shared" / "data" / "tcal"

RTOL = 1e-6  # closed-form and GLM statistics
RTOL_LOWESS = 1e-3  # Emax, E90, Eavg (smoother implementations differ slightly)
LOWESS_STATS = {"Emax", "E90", "Eavg"}
# R computes U:p as 1 - pchisq(), exact only to ~1e-16 absolute (0 below that).
ATOL_PVALUE = 1e-15


def _reference() -> dict:
    with REF_JSON.open() as fh:
        return json.load(fh)


def _load_dataset(entry: dict) -> tuple[np.ndarray, np.ndarray]:
    path = (REPO / entry["path"]).resolve()
    if not path.exists():
        pytest.skip(f"{entry['path']} not found (../shared absent?)")
    digest = hashlib.md5(path.read_bytes()).hexdigest()
    assert digest == entry["md5"], f"{entry['path']} changed since the R reference was made"
    df = pd.read_csv(path)
    return df[entry["p_column"]].to_numpy(np.float64), df[entry["y_column"]].to_numpy(np.int64)


def _compare_to_r(res: ValProbResult, entry: dict) -> dict:
    """Assert res matches one data set's R output; return the relative differences."""
    rel = {}
    ours = res.valprob_dict()
    for label, r_value in entry["val_prob"].items():
        mine = ours[label]
        if r_value is None:  # D:p, which val.prob leaves NA
            continue
        rtol = RTOL_LOWESS if label in LOWESS_STATS else RTOL
        atol = ATOL_PVALUE if label in {"U:p", "S:p"} else 0.0
        np.testing.assert_allclose(mine, r_value, rtol=rtol, atol=atol, err_msg=label)
        if r_value != 0:
            rel[label] = abs(mine - r_value) / abs(r_value)
    # D:p: val.prob prints NA; ours is the chi-square(1) tail of R's D:Chi-sq.
    np.testing.assert_allclose(res.d_p, stats.chi2.sf(entry["val_prob"]["D:Chi-sq"], 1), rtol=RTOL)

    gj = entry["glm_joint"]
    pairs = {
        "glm intercept": (res.intercept, gj["intercept"]),
        "glm slope": (res.slope, gj["slope"]),
        "intercept_se": (res.intercept_se, gj["intercept_se"]),
        "slope_se": (res.slope_se, gj["slope_se"]),
        "intercept_ci_lower": (res.intercept_ci[0], gj["intercept_ci_lower"]),
        "intercept_ci_upper": (res.intercept_ci[1], gj["intercept_ci_upper"]),
        "slope_ci_lower": (res.slope_ci[0], gj["slope_ci_lower"]),
        "slope_ci_upper": (res.slope_ci[1], gj["slope_ci_upper"]),
        "citl": (res.citl, entry["glm_offset"]["intercept"]),
        "citl_se": (res.citl_se, entry["glm_offset"]["intercept_se"]),
        "citl_ci_lower": (res.citl_ci[0], entry["glm_offset"]["intercept_ci_lower"]),
        "citl_ci_upper": (res.citl_ci[1], entry["glm_offset"]["intercept_ci_upper"]),
        "exact C (somers2)": (res.auc, entry["somers2_C"]),
    }
    for label, (mine, r_value) in pairs.items():
        np.testing.assert_allclose(mine, r_value, rtol=RTOL, err_msg=label)
        rel[label] = abs(mine - r_value) / abs(r_value)
    assert res.n == entry["n"]
    return rel


# --------------------------------------------------------------------------- R reference


@pytest.mark.parametrize("name", ["demo", "cifar10_resnet50", "cifar100_resnet56"])
def test_matches_stored_r_valprob(name):
    ref = _reference()
    entry = ref["datasets"][name]
    p, y = _load_dataset(entry)
    assert ref["rms_version"] == "6.5.0"
    _compare_to_r(val_prob(p, y), entry)


def test_demo_reference_is_for_the_shipped_demo_file():
    entry = _reference()["datasets"]["demo"]
    assert entry["path"] == "calibtest/data/demo.csv"
    p, y = _load_dataset(entry)  # checks the md5
    d = load_demo()
    np.testing.assert_array_equal(p, d["p"].to_numpy())
    np.testing.assert_array_equal(y, d["y"].to_numpy())


def _r_with_rms() -> str | None:
    rscript = shutil.which("Rscript")
    if rscript is None:
        return None
    probe = subprocess.run(
        [rscript, "-e", 'quit(status = if (requireNamespace("rms", quietly = TRUE)) 0 else 1)'],
        capture_output=True, timeout=120,
    )
    return rscript if probe.returncode == 0 else None


def test_rerun_r_reference(tmp_path):
    rscript = _r_with_rms()
    if rscript is None:
        pytest.skip("Rscript with the rms package not available")
    out = tmp_path / "fresh.json"
    proc = subprocess.run(
        [rscript, str(REF_SCRIPT), str(out)], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    fresh = json.loads(out.read_text())
    stored = _reference()
    assert "demo" in fresh["datasets"]
    for name, entry in fresh["datasets"].items():
        p, y = _load_dataset(entry)
        _compare_to_r(val_prob(p, y), entry)
        if (fresh["R_version"], fresh["rms_version"]) == (stored["R_version"], stored["rms_version"]):
            old = stored["datasets"][name]
            for block in ("val_prob", "glm_joint", "glm_offset"):
                for key, value in entry[block].items():
                    if value is None:
                        assert old[block][key] is None
                    else:
                        np.testing.assert_allclose(value, old[block][key], rtol=1e-12, atol=1e-300,
                                                   err_msg=f"{name} {block} {key}")


# --------------------------------------------------------------------------- hand checks


def _pairwise_c(score: np.ndarray, y: np.ndarray) -> float:
    """C index by comparing every event with every non-event (ties count 1/2)."""
    pos = score[y == 1][:, None]
    neg = score[y == 0][None, :]
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


def test_brier_and_c_by_brute_force_on_demo():
    d = load_demo()
    p, y = d["p"].to_numpy(), d["y"].to_numpy()
    res = val_prob(p, y)
    brier = math.fsum((float(pi) - int(yi)) ** 2 for pi, yi in zip(p, y)) / len(p)
    assert res.brier == pytest.approx(brier, rel=1e-13)
    assert res.auc == pytest.approx(_pairwise_c(p, y), rel=1e-12)
    # val.prob's C: probabilities in cells floor(5000 p) + 1, then the same C.
    assert res.c_statistic == pytest.approx(_pairwise_c(np.floor(5000 * p), y), rel=1e-12)
    assert res.dxy == pytest.approx(2 * _pairwise_c(np.floor(5000 * p), y) - 1, rel=1e-12)


def test_c_by_brute_force_on_subsample_with_ties():
    rng = np.random.default_rng(7)
    d = load_demo()
    idx = rng.choice(len(d), size=400, replace=False)
    p = np.round(d["p"].to_numpy()[idx], 2)  # rounding creates many ties
    y = d["y"].to_numpy()[idx]
    res = val_prob(p, y)
    assert res.auc == pytest.approx(_pairwise_c(p, y), rel=1e-12)
    assert res.brier == pytest.approx(math.fsum((a - b) ** 2 for a, b in zip(p.tolist(), y.tolist())) / 400)


def test_c_statistic_is_coarse_near_one():
    # Many probabilities within 1/5000 of 1 share val.prob's top cell.
    p = np.array([0.99991, 0.99992, 0.99993, 0.99994, 0.3, 0.6])
    y = np.array([0, 1, 0, 1, 0, 1])
    res = val_prob(p, y)
    assert res.auc == pytest.approx(_pairwise_c(p, y))
    assert res.c_statistic == pytest.approx(_pairwise_c(np.floor(5000 * p), y))
    assert res.c_statistic != res.auc


def _neg_loglik(beta, X, y):
    eta = X @ beta
    return float(np.sum(np.logaddexp(0.0, eta) - y * eta))


def test_calibration_fits_by_direct_likelihood_and_wald_formula():
    d = load_demo()
    p, y = d["p"].to_numpy(), d["y"].to_numpy().astype(float)
    L = np.log(p) - np.log1p(-p)
    alpha = 0.1
    res = val_prob(p, y, alpha=alpha)
    # Joint fit a + b L by a generic optimizer, SEs from the analytic information.
    X = np.column_stack([np.ones_like(L), L])
    opt = optimize.minimize(_neg_loglik, x0=[0.0, 1.0], args=(X, y), method="BFGS",
                            jac=lambda b, X, y: X.T @ (1 / (1 + np.exp(-X @ b)) - y),
                            options={"gtol": 1e-10})
    np.testing.assert_allclose([res.intercept, res.slope], opt.x, rtol=1e-6)
    mu = 1 / (1 + np.exp(-X @ opt.x))
    se = np.sqrt(np.diag(np.linalg.inv((X * (mu * (1 - mu))[:, None]).T @ X)))
    np.testing.assert_allclose([res.intercept_se, res.slope_se], se, rtol=1e-6)
    zq = stats.norm.ppf(1 - alpha / 2)
    np.testing.assert_allclose(res.slope_ci, (res.slope - zq * res.slope_se, res.slope + zq * res.slope_se),
                               rtol=1e-12)
    # Calibration in the large: root of the score equation sum(y - expit(a0 + L)) = 0.
    a0 = optimize.brentq(lambda a: np.sum(y - 1 / (1 + np.exp(-(a + L)))), -5, 5, xtol=1e-14)
    assert res.citl == pytest.approx(a0, rel=1e-8)
    mu0 = 1 / (1 + np.exp(-(a0 + L)))
    assert res.citl_se == pytest.approx(1 / math.sqrt(np.sum(mu0 * (1 - mu0))), rel=1e-6)
    np.testing.assert_allclose(res.citl_ci, (res.citl - zq * res.citl_se, res.citl + zq * res.citl_se),
                               rtol=1e-12)
    # Likelihood statistics from the fitted deviances.
    dev_p = -2 * np.sum(y * np.log(p) + (1 - y) * np.log1p(-p))
    ybar = y.mean()
    dev_0 = -2 * len(y) * (ybar * np.log(ybar) + (1 - ybar) * np.log1p(-ybar))
    dev_rc = 2 * _neg_loglik(opt.x, X, y)
    assert res.d_chisq == pytest.approx(dev_0 - dev_p, rel=1e-10)
    assert res.u_chisq == pytest.approx(dev_p - dev_rc, rel=1e-6)
    assert res.q == pytest.approx(res.d - res.u, rel=1e-12)
    assert res.r2 == pytest.approx((1 - np.exp(-(dev_0 - dev_p) / len(y))) / (1 - np.exp(-dev_0 / len(y))))


def test_calibration_fits_converge_where_plain_irls_overshoots():
    # From the default start, IRLS diverges on this offset model (a full Newton
    # step overshoots); the estimate must still be the root of the score equation.
    p = np.array([0.99991, 0.99992, 0.99993, 0.99994, 0.3, 0.6])
    y = np.array([0, 1, 0, 1, 0, 1], dtype=float)
    L = np.log(p) - np.log1p(-p)
    res = val_prob(p, y)
    a0 = optimize.brentq(lambda a: np.sum(y - 1 / (1 + np.exp(-(a + L)))), -30, 30, xtol=1e-14)
    assert res.citl == pytest.approx(a0, rel=1e-8)
    X = np.column_stack([np.ones_like(L), L])
    opt = optimize.minimize(_neg_loglik, x0=[0.0, 0.0], args=(X, y), method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000})
    np.testing.assert_allclose([res.intercept, res.slope], opt.x, rtol=1e-5, atol=1e-7)


def test_spiegelhalter_on_tiny_example():
    p = np.array([0.1, 0.4, 0.8, 0.3])
    y = np.array([1, 0, 1, 0])
    num = (1 - 0.1) * 0.8 + (0 - 0.4) * 0.2 + (1 - 0.8) * (-0.6) + (0 - 0.3) * 0.4
    den = math.sqrt(0.8**2 * 0.09 + 0.2**2 * 0.24 + 0.6**2 * 0.16 + 0.4**2 * 0.21)
    res = val_prob(p, y)
    assert res.spiegelhalter_z == pytest.approx(num / den, rel=1e-12)
    assert res.spiegelhalter_p == pytest.approx(math.erfc(abs(num / den) / math.sqrt(2)), rel=1e-12)
    assert res.brier == pytest.approx((0.81 + 0.16 + 0.04 + 0.09) / 4, rel=1e-12)


# --------------------------------------------------------------------------- result object


def test_result_is_frozen_and_json_safe():
    d = load_demo()
    res = val_prob(d["p"], d["y"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.slope = 1.0  # type: ignore[misc]
    out = res.to_dict()
    text = json.dumps(out, allow_nan=False)
    back = json.loads(text)
    assert back["slope"] == res.slope and back["intercept_ci"] == list(res.intercept_ci)
    assert list(back) == list(FIELDS)  # every statistic, the lazy ones included, in val_prob's order
    assert list(res.valprob_dict())[:3] == ["Dxy", "C (ROC)", "R2"]
    text = str(res.summary(digits=2))
    assert f"{res.slope:.2f}" in text and "Slope (joint fit)" in text and "Alpha:" in text


def test_input_forms_agree():
    d = load_demo().sample(n=500, random_state=3)
    a = val_prob(d["p"], d["y"])
    b = val_prob(d["p"].tolist(), d["y"].astype(bool).to_numpy())
    c = val_prob(d["p"].to_numpy(), d["y"].to_numpy(dtype=float))
    assert a == b == c


# --------------------------------------------------------------------------- validation


# --------------------------------------------------------------------------- p exactly 0 or 1

# R's val.prob (rms 6.5.0) leaves rows with an infinite logit out of its logistic
# fits only: ``i <- !is.infinite(logit); lrm.fit(logit[i], y[i])``.  The data are
# the demo file with the 12 smallest p set to 0 (all y = 0) and the 25 largest to 1
# (4 of them y = 0); "quirk" also sets the 13th smallest to p = 0 with y = 1.
_R_EXTREME_SCRIPT = r"""
suppressPackageStartupMessages(library(rms))
d <- read.csv(commandArgs(trailingOnly = TRUE)[1])
p <- as.numeric(d$p); y <- as.numeric(d$y)
vp <- suppressWarnings(val.prob(p, y, pl = FALSE))
i <- !is.infinite(qlogis(p))
lg <- qlogis(p[i]); yi <- y[i]
fj <- glm(yi ~ lg, family = binomial, control = glm.control(epsilon = 1e-14, maxit = 100))
fo <- glm(yi ~ 1, offset = lg, family = binomial, control = glm.control(epsilon = 1e-14, maxit = 100))
out <- c(vp, "glm intercept" = unname(coef(fj)[1]), "glm slope" = unname(coef(fj)[2]),
         "intercept_se" = sqrt(vcov(fj)[1, 1]), "slope_se" = sqrt(vcov(fj)[2, 2]),
         "citl" = unname(coef(fo)[1]), "citl_se" = sqrt(vcov(fo)[1, 1]),
         "somers2 C" = unname(somers2(p, y)["C"]), "n deleted" = sum(!i))
cat(paste0(names(out), "\t", sprintf("%.17g", out)), sep = "\n")
"""

# Output of _R_EXTREME_SCRIPT with R 4.2.2, rms 6.5.0, Hmisc 4.8.0 (NA as None).
_R_EXTREME = {
    "plain": {
        "Dxy": 0.46885613475137733, "C (ROC)": 0.73442806737568866, "R2": 0.20051582927029682,
        "D": 0.15424063636902602, "D:Chi-sq": 486.24104201695582, "D:p": None,
        "U": -0.00045891372134037272, "U:Chi-sq": 0.5562574326631875, "U:p": 0.75719935131868021,
        "Q": 0.1546995500903664, "Brier": 0.18394219702751363, "Intercept": -0.036802508575500235,
        "Slope": 0.96947579211363277, "Emax": 0.10379771705478025, "E90": 0.026332399943370079,
        "Eavg": 0.012192084977168614, "S:z": 0.8313245096161922, "S:p": 0.40579033223297156,
        "glm intercept": -0.036802508555972509, "glm slope": 0.96947579227337899,
        "intercept_se": 0.052378159553631037, "slope_se": 0.048363166734209692,
        "citl": -0.016732267011917965, "citl_se": 0.041749241794804139,
        "somers2 C": 0.73996496304166015, "n deleted": 37,
    },
    "quirk": {
        "Dxy": 0.46860805260973853, "C (ROC)": 0.73430402630486924, "R2": 0.20031228855063343,
        "D": 0.15408115586924093, "D:Chi-sq": 485.5852352087627, "D:p": None,
        "U": math.inf, "U:Chi-sq": math.inf, "U:p": 0.0, "Q": -math.inf,
        "Brier": 0.18425541593109326, "Intercept": -0.036897184085270887, "Slope": 0.96918101177771532,
        "Emax": 0.10379771705478025, "E90": 0.026347983656178409, "Eavg": 0.011771906666949161,
        "S:z": 0.92800197973045817, "S:p": 0.35340654268638783,
        "glm intercept": -0.036897184066398775, "glm slope": 0.96918101193282047,
        "intercept_se": 0.052377216577778128, "slope_se": 0.048372267409629417,
        "citl": -0.016637911509049461, "citl_se": 0.041750541767494181,
        "somers2 C": 0.73912602425034402, "n deleted": 38,
    },
}
# U, U:Chi-sq, U:p and Q differ by design in "quirk" (see val_prob's Notes).
_R_U_STATS = {"U", "U:Chi-sq", "U:p", "Q"}


def _extreme_demo(quirk: bool = False) -> tuple[np.ndarray, np.ndarray]:
    d = load_demo()
    p, y = d["p"].to_numpy().copy(), d["y"].to_numpy().copy()
    order = np.argsort(p, kind="stable")
    p[order[:12]] = 0.0
    p[order[-25:]] = 1.0
    if quirk:
        p[order[12]], y[order[12]] = 0.0, 1
    return p, y


def _compare_extreme_to_r(res: ValProbResult, r: dict, skip=frozenset()) -> None:
    ours = res.valprob_dict()
    for label, value in ours.items():
        if label in skip or r[label] is None:
            continue
        rtol = RTOL_LOWESS if label in LOWESS_STATS else RTOL
        np.testing.assert_allclose(value, r[label], rtol=rtol, atol=ATOL_PVALUE, err_msg=label)
    pairs = {"glm intercept": res.intercept, "glm slope": res.slope, "intercept_se": res.intercept_se,
             "slope_se": res.slope_se, "citl": res.citl, "citl_se": res.citl_se, "somers2 C": res.auc}
    for label, value in pairs.items():
        np.testing.assert_allclose(value, r[label], rtol=RTOL, err_msg=label)
    assert res.n_infinite_logit == r["n deleted"]


@pytest.mark.parametrize("case", ["plain", "quirk"])
def test_p_exactly_zero_or_one_matches_stored_r_valprob(case):
    p, y = _extreme_demo(quirk=case == "quirk")
    res = val_prob(p, y)
    assert res.n == 3183
    _compare_extreme_to_r(res, _R_EXTREME[case], skip=_R_U_STATS if case == "quirk" else frozenset())


def test_p_exactly_zero_or_one_rerun_r(tmp_path):
    rscript = _r_with_rms()
    if rscript is None:
        pytest.skip("Rscript with the rms package not available")
    script = tmp_path / "extreme.R"
    script.write_text(_R_EXTREME_SCRIPT)
    for case in ("plain", "quirk"):
        p, y = _extreme_demo(quirk=case == "quirk")
        csv = tmp_path / f"{case}.csv"
        pd.DataFrame({"p": p, "y": y}).to_csv(csv, index=False)  # repr floats: exact round trip
        proc = subprocess.run([rscript, str(script), str(csv)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        fresh = {}
        for line in proc.stdout.strip().splitlines():
            name, value = line.split("\t")
            fresh[name] = None if value == "NA" else float(value)
        _compare_extreme_to_r(val_prob(p, y), fresh, skip=_R_U_STATS if case == "quirk" else frozenset())
        for name, value in _R_EXTREME[case].items():
            if value is None or math.isinf(value):
                assert fresh[name] == value, name
            else:
                np.testing.assert_allclose(fresh[name], value, rtol=1e-10, err_msg=f"{case} {name}")


def test_p_zero_with_an_event_keeps_u_finite_by_design():
    # R: L01 = -2 sum(y logit - log(1 + exp(logit)), na.rm = TRUE) over all rows, so p = 0 with
    # y = 1 gives U:Chi-sq = Inf; calibtest takes L01 on the finite-logit rows like the fits.
    p, y = _extreme_demo(quirk=True)
    assert math.isinf(_R_EXTREME["quirk"]["U:Chi-sq"])
    res = val_prob(p, y)
    keep = (p > 0) & (p < 1)
    sub = val_prob(p[keep], y[keep])
    for name in ("u", "u_chisq", "u_p", "q", "d_chisq", "r2", "slope", "intercept", "citl", "c_statistic"):
        assert getattr(res, name) == pytest.approx(getattr(sub, name), rel=1e-12, abs=1e-15), name
    assert math.isfinite(res.u_chisq) and res.n_infinite_logit == 38


def test_p_exactly_zero_or_one_by_independent_computation():
    import statsmodels.api as sm
    p, y = _extreme_demo()
    res = val_prob(p, y, alpha=0.1)
    keep = (p > 0) & (p < 1)
    assert res.n_infinite_logit == int(np.sum(~keep)) == 37 and res.n == p.size
    pf, yf = p[keep], y[keep].astype(float)
    L = np.log(pf) - np.log1p(-pf)
    joint = sm.GLM(yf, sm.add_constant(L), family=sm.families.Binomial()).fit(tol=1e-14)
    np.testing.assert_allclose([res.intercept, res.slope], joint.params, rtol=1e-8)
    np.testing.assert_allclose([res.intercept_se, res.slope_se], joint.bse, rtol=1e-8)
    np.testing.assert_allclose(np.array([res.intercept_ci, res.slope_ci]), joint.conf_int(alpha=0.1), rtol=1e-8)
    offset = sm.GLM(yf, np.ones_like(L), family=sm.families.Binomial(), offset=L).fit(tol=1e-14)
    assert res.citl == pytest.approx(offset.params[0], rel=1e-8)
    # likelihood statistics on the finite-logit rows, n = their number
    nf = pf.size
    dev_p = -2 * np.sum(yf * np.log(pf) + (1 - yf) * np.log1p(-pf))
    assert res.d_chisq == pytest.approx(joint.null_deviance - dev_p, rel=1e-10)
    assert res.d == pytest.approx((joint.null_deviance - dev_p - 1) / nf, rel=1e-10)
    assert res.u == pytest.approx((dev_p - joint.deviance - 2) / nf, rel=1e-6)
    # val.prob's C on the finite-logit rows; the exact C on every row
    assert res.c_statistic == pytest.approx(_pairwise_c(np.floor(5000 * pf), y[keep]), rel=1e-12)
    assert res.auc == pytest.approx(_pairwise_c(p, y), rel=1e-12)
    # Brier and Spiegelhalter on every row
    assert res.brier == pytest.approx(np.mean((p - y) ** 2), rel=1e-13)
    w = 1 - 2 * p
    z = np.sum((y - p) * w) / np.sqrt(np.sum(w * w * p * (1 - p)))
    assert res.spiegelhalter_z == pytest.approx(z, rel=1e-12)
    # the lowess E-statistics use every row: not those of the finite-logit rows alone
    sub = val_prob(pf, y[keep])
    assert res.eavg != pytest.approx(sub.eavg, rel=1e-3)
    text = " ".join(str(res.summary()).split())
    assert "37 of 3183 rows have p exactly 0 or 1" in text and "left out of the logistic fits" in text
    assert res.to_dict()["n_infinite_logit"] == 37
    assert val_prob(p[keep], y[keep]).n_infinite_logit == 0
    assert "rows have p exactly" not in str(sub.summary())


# R's val.prob(confidence, correct) on imagenet_resnet152.csv (328 confidences are 1.0).
_R_IMAGENET = {"Dxy": 7.3342778145840903e-01, "C (ROC)": 8.6671389072920446e-01, "R2": 3.6701241467312734e-01,
               "D": 2.7239335127209874e-01, "D:Chi-sq": 1.3531322544387687e+04, "U": 5.4312564387249240e-02,
               "U:Chi-sq": 2.6998136982434444e+03, "U:p": 0.0, "Q": 2.1808078688484950e-01,
               "Brier": 1.1812849232711550e-01, "Intercept": -1.9486306703165332e-01,
               "Slope": 6.8060784313926637e-01, "Emax": 9.8033800034499463e-02, "E90": 9.3026601665516170e-02,
               "Eavg": 4.7858553627176108e-02, "S:z": 4.8090934548705604e+01, "S:p": 0.0}


def test_imagenet_file_with_confidence_one_matches_r():
    path = SHARED_TCAL / "imagenet_resnet152.csv"
    if not path.exists():
        pytest.skip("../shared absent")
    df = pd.read_csv(path)
    res = val_prob(df["confidence"], df["correct"])
    assert res.n == 50000 and res.n_infinite_logit == int((df["confidence"] == 1).sum()) == 328
    ours = res.valprob_dict()
    for label, value in _R_IMAGENET.items():
        rtol = RTOL_LOWESS if label in LOWESS_STATS else RTOL
        np.testing.assert_allclose(ours[label], value, rtol=rtol, atol=ATOL_PVALUE, err_msg=label)


@pytest.mark.parametrize("p, y, pattern", [
    ([0.0, 1.0, 0.0, 1.0], [0, 1, 1, 0], "both 0 and 1 among the 0 rows with 0 < p < 1"),
    ([0.0, 0.3, 0.6, 1.0], [1, 0, 0, 0], "both 0 and 1 among the 2 rows"),
    ([0.0, 0.3, 0.3, 1.0], [1, 0, 1, 0], "single distinct value among the 2 rows"),
    ([0.0, 0.3, 0.6, 0.2, 1.0], [1, 0, 1, 0, 0], "p separates y among the 3 rows"),
])
def test_finite_logit_rows_must_support_the_fits(p, y, pattern):
    with pytest.raises(ValueError, match=pattern):
        val_prob(p, y)


@pytest.mark.parametrize(
    "p, y, exc, pattern",
    [
        ([0.2, 0.5, 0.7], [0, 1], ValueError, "same length"),
        ([[0.2, 0.5, 0.7]], [[0, 1, 1]], ValueError, "p must be 1-D"),
        ([0.2, np.nan, 0.7], [0, 1, 1], ValueError, "p must be finite"),
        ([0.2, 0.5, 0.7], [0, np.nan, 1], ValueError, "y must be finite"),
        ([0.2, 1.5, 0.7], [0, 1, 1], ValueError, r"p must be probabilities in \[0, 1\]"),
        ([0.2, -0.1, 0.7], [0, 1, 1], ValueError, r"p must be probabilities in \[0, 1\]"),
        ([0.2, 0.5, 0.7], [0, 2, 1], ValueError, "y must contain only 0 and 1"),
        ([0.2, 0.5, 0.7], [1, 1, 1], ValueError, "both 0 and 1"),
        ([0.5, 0.5, 0.5], [0, 1, 1], ValueError, "single distinct value"),
        ([0.2, 0.5, 0.7, 0.4], [0, 1, 1, 0], ValueError, "p separates y"),
        ([0.2, 0.5, 0.5, 0.4], [1, 0, 1, 1], ValueError, "p separates y"),
        ([0.2, 0.5], [0, 1], ValueError, "at least 3"),
        (["a", "b", "c"], [0, 1, 1], TypeError, "p must be array-like of numbers"),
        ([0.2, 0.5, 0.7], ["0", "1", "1"], TypeError, "y must be array-like of numbers"),
    ],
)
def test_bad_input(p, y, exc, pattern):
    with pytest.raises(exc, match=pattern):
        val_prob(p, y)


@pytest.mark.parametrize("alpha, exc", [(0.0, ValueError), (1.0, ValueError), ("0.05", TypeError),
                                        (True, TypeError), (None, TypeError)])
def test_bad_alpha(alpha, exc):
    with pytest.raises(exc, match="alpha"):
        val_prob([0.2, 0.5, 0.7], [0, 1, 1], alpha=alpha)


def test_bad_summary_digits():
    res = val_prob([0.2, 0.5, 0.7, 0.4], [0, 1, 0, 1])
    with pytest.raises(TypeError, match="digits"):
        res.summary(digits=2.5)
    with pytest.raises(ValueError, match="digits"):
        res.summary(digits=-1)


def test_formula_and_keyword_forms_match_the_positional_form():
    d = load_demo().sample(n=400, random_state=1)
    old = val_prob(d["p"], d["y"], alpha=0.1)
    new = ct_val_prob("y ~ p", data=d, alpha=0.1)
    kw = ct_val_prob(y=d["y"].to_numpy(), probs=d["p"].to_numpy(), alpha=0.1)
    for r in (new, kw):
        assert (r.slope, r.citl, r.brier, r.auc, r.slope_ci) == (old.slope, old.citl, old.brier, old.auc, old.slope_ci)
    assert new.formula == "y ~ p"
    withna = d.assign(p=np.r_[np.nan, d["p"].to_numpy()[1:]])
    with pytest.raises(ValueError, match="missing"):
        ct_val_prob("y ~ p", data=withna)
    dropped = ct_val_prob("y ~ p", data=withna, missing="drop")
    assert dropped.n == 399 and dropped.n_dropped == 1
    # intervals at another alpha: estimate -/+ z se
    ci = old.conf_int(0.05)
    assert ci.loc["slope", "lower"] == pytest.approx(old.slope - 1.959963984540054 * old.slope_se, rel=1e-12)
    assert tuple(old.conf_int().loc["slope"]) == old.slope_ci
    for ref in ("Spiegelhalter", "Cox", "val.prob", "421-433", "562-565"):
        assert ref in ct_val_prob.__doc__


# --------------------------------------------------------------------------- parts computed on first access

def _eager_val_prob(p: np.ndarray, y: np.ndarray, alpha: float) -> dict:
    """Every statistic of val_prob computed at once from the two fitted statsmodels results (the code val_prob
    ran before its discrimination, likelihood and smooth parts became lazy, and before its fits started from
    the binned fit)."""
    import statsmodels.api as sm
    from statsmodels.nonparametric.smoothers_lowess import lowess

    from calibtest.checks.logistic_fits import fit_logistic_glm

    def c_index(score, yy):
        pos, neg = score[yy == 1], score[yy == 0]
        u = stats.mannwhitneyu(pos, neg, alternative="two-sided", use_continuity=False,
                               method="asymptotic").statistic
        return float(u) / (pos.size * neg.size)

    fin = (p > 0.0) & (p < 1.0)
    pf, yf = p[fin], y[fin]
    nf = pf.size
    logit = np.log(pf / (1.0 - pf))
    family = sm.families.Binomial()
    joint = fit_logistic_glm(yf, np.column_stack([np.ones(nf), logit]), None, np.array([0.0, 1.0]))
    citl = fit_logistic_glm(yf, np.ones((nf, 1)), logit, np.array([0.0]))
    ci, citl_ci = np.asarray(joint.conf_int(alpha=alpha)), np.asarray(citl.conf_int(alpha=alpha))[0]
    dev_null, dev_p = float(joint.null_deviance), float(-2.0 * family.loglike(yf, pf))
    d_chisq, u_chisq = dev_null - dev_p, dev_p - float(joint.deviance)
    d_index, u_index = (d_chisq - 1.0) / nf, (u_chisq - 2.0) / nf
    cells = np.floor(5000 * (1.0 / (1.0 + np.exp(-np.clip(logit, -30.0, 30.0)))) + 1.0)
    c_stat = c_index(cells, yf)
    err = np.abs(p - lowess(y, p, frac=2.0 / 3.0, it=0, delta=0.01 * float(np.ptp(p)), return_sorted=False))
    w = 1.0 - 2.0 * p
    z = float(np.sum((y - p) * w) / np.sqrt(np.sum(w * w * p * (1.0 - p))))
    return {
        "n": int(p.size), "n_events": int(np.count_nonzero(y)), "n_infinite_logit": int(p.size - nf),
        "alpha": alpha, "auc": c_index(p, y), "c_statistic": c_stat, "dxy": 2.0 * (c_stat - 0.5),
        "r2": float(-math.expm1(-d_chisq / nf) / -math.expm1(-dev_null / nf)), "d": float(d_index),
        "d_chisq": float(d_chisq), "d_p": float(stats.chi2.sf(d_chisq, 1)), "u": float(u_index),
        "u_chisq": float(u_chisq), "u_p": float(stats.chi2.sf(u_chisq, 2)), "q": float(d_index - u_index),
        "brier": float(np.mean((p - y) ** 2)), "intercept": float(joint.params[0]), "slope": float(joint.params[1]),
        "intercept_se": float(joint.bse[0]), "slope_se": float(joint.bse[1]),
        "intercept_ci": (float(ci[0, 0]), float(ci[0, 1])), "slope_ci": (float(ci[1, 0]), float(ci[1, 1])),
        "citl": float(citl.params[0]), "citl_se": float(citl.bse[0]),
        "citl_ci": (float(citl_ci[0]), float(citl_ci[1])),
        "emax": float(np.max(err)), "e90": float(np.quantile(err, 0.9)), "eavg": float(np.mean(err)),
        "spiegelhalter_z": z, "spiegelhalter_p": float(2.0 * stats.norm.sf(abs(z))),
    }


def _lazy_cases():
    d = load_demo()
    g = np.random.default_rng(20261125)
    p = g.beta(2, 5, 3000)
    y = (g.random(3000) < np.clip(1.2 * p, 0, 1)).astype(float)
    edge = p.copy()
    edge[:7], edge[7:15] = 0.0, 1.0  # infinite logits: left out of the fits, in auc, Brier, lowess, z
    yedge = y.copy()
    yedge[:7], yedge[7:12], yedge[12:15] = 0.0, 1.0, 0.0
    # plain IRLS overshoots on the CITL fit here: fit_logistic_glm's L-BFGS fallback runs
    overshoot = np.array([0.99991, 0.99992, 0.99993, 0.99994, 0.3, 0.6])
    return {"demo": (d["p"].to_numpy(float), d["y"].to_numpy(float), 0.05),
            "beta": (p, y, 0.1), "zeros_and_ones": (edge, yedge, 0.05),
            "overshoot": (overshoot, np.array([0, 1, 0, 1, 0, 1], dtype=float), 0.05)}


@pytest.mark.parametrize("case", ["demo", "beta", "zeros_and_ones", "overshoot"])
def test_lazy_parts_equal_the_eager_computation_exactly(case):
    p, y, alpha = _lazy_cases()[case]
    eager = _eager_val_prob(p, y, alpha)
    # each part read first on its own result, then every statistic: the order of access changes nothing
    for first in [None] + [names[0] for names in LAZY_STATISTICS.values()]:
        res = val_prob(p, y, alpha=alpha)
        if first is not None:
            getattr(res, first)
        got = {name: getattr(res, name) for name in eager}
        # exact (==) where the two logistic fits do not enter; the fits (statsmodels' Newton from the binned
        # start) agree with statsmodels' IRLS from val.prob's start to 1e-10
        assert {k: v for k, v in got.items() if k not in _FIT_KEYS} == {
            k: v for k, v in eager.items() if k not in _FIT_KEYS}
        for key in _FIT_KEYS:
            assert np.asarray(got[key]) == pytest.approx(np.asarray(eager[key]), rel=1e-10, abs=1e-12), key
        listed = {k: v for k, v in res.to_dict().items() if k in eager}
        assert listed == {k: list(v) if isinstance(v, tuple) else v for k, v in got.items()}


#: val_prob's statistics read from its two logistic fits (the joint fit's deviance enters U and Q).
_FIT_KEYS = ("intercept", "slope", "intercept_se", "slope_se", "intercept_ci", "slope_ci", "citl", "citl_se",
             "citl_ci", "u", "u_chisq", "u_p", "q")


def test_lazy_parts_are_computed_on_first_access_once(monkeypatch):
    import calibtest.checks.val_prob as vp_module

    calls = dict.fromkeys(LAZY_STATISTICS, 0)
    for part in LAZY_STATISTICS:
        original = getattr(vp_module, f"_{part}_part")

        def counting(*args, _part=part, _original=original):
            calls[_part] += 1
            return _original(*args)
        monkeypatch.setattr(vp_module, f"_{part}_part", counting)
    d = load_demo()
    res = val_prob(d["p"], d["y"])
    res.slope_ci, res.citl_ci, res.spiegelhalter_p, res.brier  # what val_prob computes itself
    assert calls == dict.fromkeys(LAZY_STATISTICS, 0)
    assert res.e90 == res.e90 and res.eavg > 0
    assert calls == {**dict.fromkeys(LAZY_STATISTICS, 0), "smooth": 1}
    res.summary()  # shows every statistic
    res.to_dict()
    assert calls == dict.fromkeys(LAZY_STATISTICS, 1)
    # the parts' functions (and the rows they hold) are released once every part is computed
    assert res._parts._compute == {}


def test_lazy_result_pickles_copies_and_compares_with_numbers_only():
    import copy
    import pickle

    d = load_demo()
    res = val_prob(d["p"], d["y"])
    back = pickle.loads(pickle.dumps(res))  # computes every part first: the copy holds numbers, not rows
    assert back == res and back.to_dict() == res.to_dict() and back._parts._compute == {}
    assert copy.deepcopy(val_prob(d["p"], d["y"])).to_dict() == res.to_dict()
    other = val_prob(d["p"].to_numpy()[::-1], d["y"].to_numpy()[::-1])  # the same rows in another order
    assert other.slope == pytest.approx(res.slope, rel=1e-9)
    assert hash(val_prob(d["p"], d["y"])) == hash(res)


def test_evidence_reads_no_lazy_part():
    import calibtest as ct
    from calibtest.checks.evidence_table import result_val_prob

    d = load_demo()
    res = ct.calib_ci("y ~ p", data=d)
    ev = res.evidence()
    vp = result_val_prob(res)
    assert ev.valprob is vp and vp._parts._values == {}  # nothing the evidence does not read was computed
    assert ev.table.loc["slope", "statistic"] == vp.slope and ev.table.loc["citl", "statistic"] == vp.citl


def test_lazy_result_keeps_no_fitted_model():
    import gc

    from statsmodels.genmod.generalized_linear_model import GLM, GLMResults

    def alive():
        gc.collect()
        return sum(isinstance(o, (GLM, GLMResults)) for o in gc.get_objects())

    d = load_demo()
    before = alive()
    res = val_prob(d["p"], d["y"])  # the deferred parts hold the rows and two estimates, not the fits
    assert alive() == before
    assert res.u_chisq >= 0 and alive() == before


# ----------------------------------------------------------------- O/E, DeLong interval, loess E50/E90/ICI
LOESS_JSON = REF_DIR / "loess_calibration.json"


def _loess_sets() -> dict:
    d = load_demo()
    p = d["p"].to_numpy(np.float64)
    return {"demo": (p, d["y"].to_numpy(np.int64)), "demo_rounded": (np.round(p, 2), d["y"].to_numpy(np.int64))}


@pytest.mark.parametrize("name", ["demo", "demo_rounded"])
def test_loess_errors_and_delong_match_r(name):
    """E50, E90, ICI, Emax of |p - loess(y ~ p)| and pROC's DeLong interval, as R gives them (17 digits)."""
    from calibtest.checks.val_prob import loess_vertices

    ref = json.loads(LOESS_JSON.read_text())["datasets"][name]
    p, y = _loess_sets()[name]
    v = val_prob(y=y, probs=p)
    ours = [v.loess_e50, v.loess_e90, v.loess_ici, v.loess_emax]
    np.testing.assert_allclose(ours, ref["interpolate_e50_e90_ici_emax"], rtol=1e-10, atol=0)
    np.testing.assert_allclose(loess_vertices(p), ref["kd_vertices"], rtol=0, atol=0)
    lower, auc, upper, se = ref["auc_delong_lower_auc_upper_se"]
    np.testing.assert_allclose([v.auc_ci[0], v.auc, v.auc_ci[1], v.auc_se], [lower, auc, upper, se], rtol=1e-12)
    # R's exact local fits (surface = "direct") differ, so the interpolation is what is matched
    assert abs(v.loess_e50 - ref["direct_e50_e90_ici_emax"][0]) > 1e-5


def _slow_local_quadratic(x, y, x0, q):
    """The loess local fit at x0 by an explicit weighted least squares on the q nearest points."""
    dist = np.abs(x - x0)
    h = np.sort(dist)[q - 1]
    w = np.where(dist < h, (1 - (dist / h) ** 3) ** 3, 0.0)
    design = np.column_stack([np.ones_like(x), x - x0, (x - x0) ** 2])
    coef = np.linalg.lstsq(design * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
    return coef[0], coef[1]


def test_loess_fit_is_hermite_interpolation_of_exact_local_fits():
    from calibtest.checks.val_prob import loess_fit, loess_vertices

    rng = np.random.default_rng(5)
    x = rng.uniform(0.05, 0.95, 400)
    y = (rng.uniform(size=400) < x).astype(float)
    q = int(np.floor(0.75 * x.size))
    v = loess_vertices(x)
    fits = np.array([_slow_local_quadratic(x, y, vk, q) for vk in v])
    fitted = loess_fit(x, y)
    for xi, fi in zip(x[:50], fitted[:50]):
        k = np.searchsorted(v, xi) - 1
        h = v[k + 1] - v[k]
        t = (xi - v[k]) / h
        (g0, d0), (g1, d1) = fits[k], fits[k + 1]
        hermite = (2 * t ** 3 - 3 * t ** 2 + 1) * g0 + (-2 * t ** 3 + 3 * t ** 2) * g1 \
            + (t ** 3 - 2 * t ** 2 + t) * h * d0 + (t ** 3 - t ** 2) * h * d1
        assert fi == pytest.approx(hermite, rel=1e-9, abs=1e-12)


def test_delong_interval_against_slow_pairwise_computation():
    rng = np.random.default_rng(11)
    p = np.round(rng.uniform(size=300), 2)  # ties on purpose
    y = (rng.uniform(size=300) < p).astype(int)
    v = val_prob(y=y, probs=p, alpha=0.1)
    pos, neg = p[y == 1], p[y == 0]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    var = v10.var(ddof=1) / pos.size + v01.var(ddof=1) / neg.size
    z = stats.norm.ppf(0.95)
    assert v.auc_se == pytest.approx(math.sqrt(var), rel=1e-12)
    assert v.auc_ci == pytest.approx((psi.mean() - z * math.sqrt(var), psi.mean() + z * math.sqrt(var)), rel=1e-12)


def test_observed_expected_by_hand_and_as_oe_test():
    from calibtest.checks.acceptance import oe_test

    d = load_demo()
    p, y = d["p"].to_numpy(), d["y"].to_numpy()
    v = val_prob("y ~ p", data=d)
    o, e, n = y.sum(), p.sum(), y.size
    se = math.sqrt((1 - o / n) / o)
    z = stats.norm.ppf(0.975)
    assert v.observed_rate == pytest.approx(o / n, rel=1e-15)
    assert v.mean_predicted == pytest.approx(p.mean(), rel=1e-12)
    assert v.oe == pytest.approx(o / e, rel=1e-13)
    assert v.oe_ci == pytest.approx((o / e * math.exp(-z * se), o / e * math.exp(z * se)), rel=1e-12)
    # the same standard error as the TOST of O/E: its (1 - 2 alpha') interval at alpha' = alpha / 2
    tost = oe_test(probs=p, y=y, within=(0.8, 1.25), alpha=0.025)
    assert (tost.ci_lower, tost.ci_upper) == pytest.approx(v.oe_ci, rel=1e-12)
    assert tost.se == pytest.approx(v.oe_se, rel=1e-15)


def test_rerun_loess_r_reference(tmp_path):
    if shutil.which("Rscript") is None:
        pytest.skip("Rscript not installed")
    probe = subprocess.run(["Rscript", "-e", "library(pROC)"], capture_output=True)
    if probe.returncode:
        pytest.skip("R package pROC not installed")
    out = tmp_path / "loess.json"
    subprocess.run(["Rscript", str(REPO / "tests/reference/loess_calibration.R"), str(out)], cwd=REPO, check=True,
                   capture_output=True, timeout=120)
    fresh = json.loads(out.read_text())["datasets"]
    stored = json.loads(LOESS_JSON.read_text())["datasets"]
    for name in stored:
        for key in ("interpolate_e50_e90_ici_emax", "kd_vertices", "auc_delong_lower_auc_upper_se"):
            np.testing.assert_allclose(fresh[name][key], stored[name][key], rtol=1e-12)
