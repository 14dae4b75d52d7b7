"""calib_ci with a survival outcome at a horizon: IPCW estimate, its variance, the censoring
Kaplan-Meier against statsmodels and R, the no-censoring equality with binary calib_ci, input errors."""
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import calibtest as ct
from calibtest.core.censoring import censoring_km, km_influence, unbiased_psi_square_sums
from calibtest.ece.survival import cox_censoring_before, ipcw_influence

REFERENCE = Path(__file__).parents[1] / "reference" / "survival_ipcw.json"


# --------------------------------------------------------------------------- slow, obviously correct versions
def slow_g_before(time, event):
    """G(X_i-) by the product-limit formula, one row and one censoring time at a time."""
    out = np.empty(time.size)
    cens_times = np.unique(time[event == 0])
    for i, s in enumerate(time):
        g = 1.0
        for u in cens_times:
            if u < s:  # censorings strictly before the row's time; R(u) = rows still followed at u
                g *= 1.0 - np.sum((time == u) & (event == 0)) / np.sum(time >= u)
        out[i] = g
    return out


def slow_t(u, bins):
    """(1/n) sum over bins of sum_{i != j} U_i U_j / (c_b - 1), with explicit pairs."""
    total = 0.0
    for b in np.unique(bins):
        idx = np.flatnonzero(bins == b)
        if idx.size < 2:
            continue
        pairs = sum(u[i] * u[j] for i in idx for j in idx if i != j)
        total += pairs / (idx.size - 1)
    return total / u.size


def slow_null_variance(u, bins):
    """V_0 = 2 sum_b (1 / (n (c_b - 1)))^2 sum_{i != j in b} (U_i U_j)^2, with explicit pairs."""
    n = u.size
    total = 0.0
    for b in np.unique(bins):
        idx = np.flatnonzero(bins == b)
        if idx.size < 2:
            continue
        pairs = sum((u[i] * u[j]) ** 2 for i in idx for j in idx if i != j)
        total += pairs / (n * (idx.size - 1)) ** 2
    return 2.0 * total


def slow_psi_square_sum(u):
    """sum_i (2 mu U_i - mu^2)^2 of one bin with mu^2 and mu^3, mu^4 as averages over distinct rows (explicit
    loops over the other rows of the bin; the plug-in mean for fewer than four rows)."""
    c = u.size
    if c < 4:
        mu = u.mean()
        return float(np.sum((2 * mu * u - mu * mu) ** 2))
    total = 0.0
    quads = slow_mean_fourth_power(u)
    for i in range(c):
        others = [j for j in range(c) if j != i]
        pairs = [u[j] * u[k] for j in others for k in others if j != k]
        triples = [u[j] * u[k] * u[l] for j in others for k in others for l in others if len({j, k, l}) == 3]
        total += 4 * u[i] ** 2 * np.mean(pairs) - 4 * u[i] * np.mean(triples) + quads
    return total


def slow_mean_fourth_power(u):
    """mu^4 as the average of U_j U_k U_l U_q over distinct rows (explicit loop)."""
    c = u.size
    return float(np.mean([u[j] * u[k] * u[l] * u[q] for j in range(c) for k in range(c) for l in range(c)
                          for q in range(c) if len({j, k, l, q}) == 4]))
    return total


def ipcw_t(time, event, risk, horizon, bins):
    """T of the Kaplan-Meier IPCW outcomes on fixed bins (vectorised; checked against the loops below)."""
    g = censoring_km(time, event).before(time)
    u = np.where((event == 1) & (time <= horizon), 1.0 / g, 0.0) - risk
    n = u.size
    s = np.bincount(bins, weights=u)
    q = np.bincount(bins, weights=u * u)
    c = np.bincount(bins)
    keep = c >= 2
    return float(np.sum((s[keep] ** 2 - q[keep]) / (c[keep] - 1)) / n)


def simulate(n, seed, *, censoring_rate=0.08, scale=1.6, ties=2):
    """Exponential event times with a covariate, independent exponential censoring; a risk model off by
    ``scale`` in its cumulative hazard (1: calibrated)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.5, 1.5, n)
    lam = 0.1 * np.exp(x)
    t_event = rng.exponential(1 / lam)
    t_cens = rng.exponential(1 / censoring_rate, n) if censoring_rate else np.full(n, np.inf)
    time = np.minimum(t_event, t_cens)
    if ties is not None:
        time = np.round(time, ties)
    event = (t_event <= t_cens).astype(float)
    risk = np.clip(1 - np.exp(-lam * 5.0 * scale), 0.01, 0.99)
    return time, event, risk, x


# --------------------------------------------------------------------------- the censoring distribution
def test_censoring_km_matches_statsmodels_survfunc_right():
    from statsmodels.duration.survfunc import SurvfuncRight
    time, event, _, _ = simulate(500, 1, ties=1)  # many tied times, events and censorings together
    km = censoring_km(time, event)
    sf = SurvfuncRight(time, 1 - event)
    np.testing.assert_allclose(km.at(sf.surv_times), sf.surv_prob, rtol=0, atol=1e-12)
    np.testing.assert_allclose(km.before(time), slow_g_before(time, event), rtol=0, atol=1e-12)


def test_censoring_km_and_cox_match_r_survival():
    ref = json.loads(REFERENCE.read_text())
    time, event = np.array(ref["time_tied"]), np.array(ref["status_tied"], dtype=float)
    km = censoring_km(time, event)
    np.testing.assert_allclose(km.at(np.array(ref["km_times"])), ref["km_surv"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(km.before(time), ref["km_g_before"], rtol=0, atol=1e-12)
    time, event, x = np.array(ref["time"]), np.array(ref["status"], dtype=float), np.array(ref["x"])
    np.testing.assert_allclose(cox_censoring_before(time, event, x[:, None])[0], ref["cox_g_before"], rtol=1e-6)


def test_reverse_km_median_follow_up():
    time = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    event = np.array([1, 0, 1, 0, 0, 1.0])
    # G: at 2, 1 - 1/5 = 0.8; at 4, 0.8 * (1 - 1/3) = 0.533; at 5, 0.533 * (1 - 1/2) = 0.267 <= 0.5
    assert censoring_km(time, event).median() == 5.0


# --------------------------------------------------------------------------- estimate and variance
def test_ipcw_estimate_and_null_variance_match_loops():
    time, event, risk, _ = simulate(150, 2)
    B = 4
    bins = np.floor(risk * B).astype(int)
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=5.0, n_bins=B)
    g = slow_g_before(time, event)
    y_tilde = np.array([1.0 / g[i] if event[i] == 1 and time[i] <= 5.0 else 0.0 for i in range(time.size)])
    u = y_tilde - risk
    assert res.survival.n_censored > 10
    assert res.estimate == pytest.approx(slow_t(u, bins), rel=1e-12)
    v0 = res.sigma0_sq / (res.n ** 2 * res.bin_volume)
    assert v0 == pytest.approx(slow_null_variance(u, bins), rel=1e-10)
    assert res.null_zstat == pytest.approx(res.estimate / math.sqrt(v0), rel=1e-10)
    assert ipcw_t(time, event, risk, 5.0, bins) == pytest.approx(res.estimate, rel=1e-12)


def test_influence_function_matches_the_jackknife_with_the_km_term():
    """Leave-one-out recomputation (Kaplan-Meier G included) gives the empirical influence (n - 1)(T - T_-j);
    the analytic influence with the Kaplan-Meier term follows it row by row, the one with weights as known
    does not."""
    time, event, risk, _ = simulate(400, 3)
    B, h = 5, 5.0
    bins = np.floor(risk * B).astype(int)
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=h, n_bins=B)
    n = time.size
    loo = np.array([ipcw_t(np.delete(time, j), np.delete(event, j), np.delete(risk, j), h, np.delete(bins, j))
                    for j in range(n)])
    empirical = (n - 1) * (res.estimate - loo)
    km = censoring_km(time, event)
    y_tilde = res.data.u[:, 0] + risk
    with_km = ipcw_influence(res.partition.inverse, res.partition.m, res.data.u[:, 0], y_tilde,
                             lambda a: km_influence(km, event, a))
    as_known = ipcw_influence(res.partition.inverse, res.partition.m, res.data.u[:, 0], y_tilde)
    assert np.corrcoef(with_km, empirical)[0, 1] > 0.995
    assert np.corrcoef(as_known, empirical)[0, 1] < 0.97
    # the plug-in mean(IF^2) / n is the jackknife's variance (both carry the plug-in excess of the bin means) ...
    jackknife = (n - 1) / n * np.sum((loo - loo.mean()) ** 2)
    assert np.mean(with_km ** 2) / n == pytest.approx(jackknife, rel=0.06)
    # ... and the reported se replaces its psi^2 part by unbiased bin moments and adds V_0
    v0 = res.sigma0_sq / (n * n * res.bin_volume)
    u = res.data.u[:, 0]
    mu = np.array([u[bins == b].mean() for b in bins])
    plug_psi = 2 * mu * u - mu * mu
    unbiased = unbiased_psi_square_sums(res.partition.inverse, u, res.partition.m).sum()  # checked by loops below
    sigma1 = np.mean(with_km ** 2) - np.var(plug_psi) + unbiased / n - res.estimate ** 2
    assert res.sigma1_sq == pytest.approx(np.mean(with_km ** 2), rel=1e-12)  # the plug-in, as before
    assert res.survival.sigma1_sq_unbiased == pytest.approx(sigma1, rel=1e-9)
    assert res.survival.second_order_variance == pytest.approx(v0, rel=1e-12)
    assert res.se ** 2 == pytest.approx(sigma1 / n + v0, rel=1e-9)


def test_unbiased_psi_square_sums_match_loops_over_distinct_rows():
    rng = np.random.default_rng(11)
    sizes = [1, 2, 3, 4, 5, 7]  # bins below four rows take the plug-in sum
    bins = np.repeat(np.arange(len(sizes)), sizes)
    u = rng.exponential(2.0, bins.size) - 0.8
    got = unbiased_psi_square_sums(bins, u, len(sizes))
    want = [slow_psi_square_sum(u[bins == b]) for b in range(len(sizes))]
    assert got == pytest.approx(want, rel=1e-10, abs=1e-12)


def test_unbiased_psi_square_sums_are_unbiased_by_enumeration():
    """Five independent rows with different three-point laws of common mean mu: the expectation of Psi over
    all 3^5 outcomes is sum_i E[(2 mu U_i - mu^2)^2] exactly; the plug-in's exceeds it."""
    import itertools
    mu = 0.3
    laws = []
    for spread in (0.5, 1.0, 2.0, 4.0, 8.0):  # values mu - spread, mu, mu + 3 spread with probs 0.6, 0.2, 0.2
        laws.append((np.array([mu - spread, mu, mu + 3 * spread]), np.array([0.6, 0.2, 0.2])))
    expected = 0.0
    plugin = 0.0
    want = sum(float(np.sum(p * (2 * mu * v - mu * mu) ** 2)) for v, p in laws)
    zeros = np.zeros(5, dtype=np.intp)
    for pick in itertools.product(range(3), repeat=5):
        u = np.array([laws[i][0][k] for i, k in enumerate(pick)])
        prob = float(np.prod([laws[i][1][k] for i, k in enumerate(pick)]))
        expected += prob * unbiased_psi_square_sums(zeros, u, 1)[0]
        plugin += prob * float(np.sum((2 * u.mean() * u - u.mean() ** 2) ** 2))
    assert all(abs(float(np.sum(p * v)) - mu) < 1e-15 for v, p in laws)
    assert expected == pytest.approx(want, rel=1e-12)
    assert plugin > 1.5 * want


@pytest.mark.slow
def test_heavy_censoring_se_matches_the_spread_of_t():
    """Log-logistic event times, uniform censoring with about 73% of the rows censored before t: the spread
    of T over 150 studies over the median reported se lies within 0.85-1.15 (Monte Carlo s.e. of the ratio
    about 0.06; it was 0.64-0.86 with the plug-in sigma1^2 and no V_0)."""
    rng = np.random.default_rng(2026)
    est, ses, censored = [], [], []
    for _ in range(150):
        x = rng.normal(size=1000)
        log_scale = 0.5 - 0.8 * x
        q = rng.uniform(size=x.size)
        t_event = np.exp(log_scale) * np.sqrt(q / (1 - q))
        t_cens = rng.uniform(0, 1.15, x.size)
        time, event = np.minimum(t_event, t_cens), (t_event <= t_cens).astype(float)
        true_risk = 1 / (1 + np.exp(2 * log_scale))  # P(T <= 1 | x), shape 2
        risk = 1 / (1 + np.exp(-(np.log(true_risk / (1 - true_risk)) * 1.5)))  # too extreme
        res = ct.calib_ci(time=time, event=event, probs=risk, horizon=1.0, n_bins=48)
        est.append(res.estimate)
        ses.append(res.se)
        censored.append(res.survival.n_censored / res.n)
    assert 0.70 < np.mean(censored) < 0.78
    ratio = np.std(est, ddof=1) / np.median(ses)
    assert 0.85 < ratio < 1.15


# --------------------------------------------------------------------------- no censoring before the horizon
def _numbers(res):
    out = res.to_dict()
    for key in ("formula", "y_name", "notes", "horizon", "censoring", "censoring_covariates",
                "n_events_before_horizon", "n_censored_before_horizon", "n_event_free_at_horizon",
                "median_followup", "km_risk_at_horizon", "max_ipcw_weight", "survival_variance"):
        out.pop(key, None)
    return out


@pytest.mark.parametrize("null", ["auto", "asymptotic", "monte-carlo"])
def test_no_censoring_before_horizon_is_binary_calib_ci_exactly(null):
    time, event, risk, _ = simulate(800, 4, censoring_rate=0.0)
    time = time.copy()
    event = event.copy()
    late = time > 12.0
    event[late[:]] = np.where(np.arange(late.sum()) % 2 == 0, 0.0, 1.0)  # censorings after the horizon only
    h = 5.0
    y_t = ((event == 1) & (time <= h)).astype(float)
    df = pd.DataFrame({"futime": time, "status": event, "risk": risk, "y": y_t})
    surv = ct.calib_ci("Surv(futime, status) ~ risk", data=df, horizon=h, null=null, rng=7)
    binary = ct.calib_ci("y ~ risk", data=df, null=null, rng=7)
    assert surv.survival.n_censored == 0 and (event == 0).any()
    assert _numbers(surv) == _numbers(binary)
    assert surv.conditional == binary.conditional
    np.testing.assert_array_equal(surv.bin_table().to_numpy(), binary.bin_table().to_numpy())
    arrays = ct.calib_ci(time=time, event=event, probs=risk, horizon=h, null=null, rng=7)
    assert _numbers(arrays) == _numbers(ct.calib_ci(y=y_t, probs=risk, null=null, rng=7))


def test_formula_and_arrays_agree_and_declared_event_code():
    time, event, risk, _ = simulate(600, 5)
    status = np.where(event == 1, 2, 0)  # event coded 2
    df = pd.DataFrame({"futime": time, "status": status, "risk": risk})
    res = ct.calib_ci("Surv(futime, status == 2) ~ risk", data=df, horizon=5.0)
    arr = ct.calib_ci(time=time, event=event, probs=risk, horizon=5.0)
    assert (res.estimate, res.se, res.null_pvalue, res.ci_upper) == (arr.estimate, arr.se, arr.null_pvalue,
                                                                     arr.ci_upper)
    assert res.survival.event_name == "status == 2" and res.survival.time_name == "futime"
    assert "horizon=5.0" in res.call


def test_summary_dict_and_display_name_the_estimand_horizon_and_censoring():
    time, event, risk, _ = simulate(600, 6)
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=5.0)
    text = str(res.summary())
    assert "ECE^2(t) = E[(P(T <= t | risk) - risk)^2] at t = 5" in text
    assert "IPCW, Kaplan-Meier" in text and f"Events by t:       {res.survival.n_events}" in text
    d = res.to_dict()
    n_before = int(np.sum((event == 0) & (time < 5.0)))
    assert d["horizon"] == 5.0 and d["censoring"] == "km" and d["n_censored_before_horizon"] == n_before
    assert d["n_events_before_horizon"] + d["n_censored_before_horizon"] + d["n_event_free_at_horizon"] == 600
    assert "ECE^2(t)" in res._repr_html_() and "survival at t=5" in repr(res)
    assert "calib_test" not in res.evidence().table.index  # the survival evidence (tests/reporting/test_survival_report.py)
    for method in (res.hosmer_lemeshow, res.val_prob, res.plot_reliability):
        with pytest.raises(ValueError, match="censored before the horizon"):
            method()


def ipcw_t_cox(time, event, risk, horizon, bins, x):
    """T of the Cox-IPCW outcomes on fixed bins (the Cox model refitted on the rows given)."""
    g = cox_censoring_before(time, event, x)[0]
    u = np.where((event == 1) & (time <= horizon), 1.0 / g, 0.0) - risk
    s = np.bincount(bins, weights=u)
    q = np.bincount(bins, weights=u * u)
    c = np.bincount(bins)
    keep = c >= 2
    return float(np.sum((s[keep] ** 2 - q[keep]) / (c[keep] - 1)) / u.size)


def test_cox_influence_matches_the_jackknife():
    """Leave-one-out refits of the Cox censoring model: the analytic influence (coefficients and Breslow
    baseline) follows the empirical one row by row, the one with the weights as known does not."""
    rng = np.random.default_rng(12)
    n, B, h = 300, 5, 5.0
    x = rng.uniform(-1.5, 1.5, n)
    lam = 0.1 * np.exp(x)
    t_event = rng.exponential(1 / lam)
    t_cens = rng.exponential(1 / (0.08 * np.exp(0.8 * x)))
    time, event = np.minimum(t_event, t_cens), (t_event <= t_cens).astype(float)
    risk = np.clip(1 - np.exp(-lam * h * 1.6), 0.01, 0.99)
    bins = np.floor(risk * B).astype(int)
    res = ct.calib_ci(time=time, event=event, probs=risk, horizon=h, n_bins=B, censoring="cox",
                      censoring_covariates=x)
    assert res.estimate == pytest.approx(ipcw_t_cox(time, event, risk, h, bins, x[:, None]), rel=1e-12)
    loo = np.array([ipcw_t_cox(np.delete(time, j), np.delete(event, j), np.delete(risk, j), h, np.delete(bins, j),
                               np.delete(x, j)[:, None]) for j in range(n)])
    empirical = (n - 1) * (res.estimate - loo)
    g, influence = cox_censoring_before(time, event, x[:, None])
    y_tilde = res.data.u[:, 0] + risk
    full = ipcw_influence(res.partition.inverse, res.partition.m, res.data.u[:, 0], y_tilde, influence)
    as_known = ipcw_influence(res.partition.inverse, res.partition.m, res.data.u[:, 0], y_tilde)
    assert np.corrcoef(full, empirical)[0, 1] > 0.995
    assert np.corrcoef(as_known, empirical)[0, 1] < np.corrcoef(full, empirical)[0, 1] - 0.02
    jackknife = (n - 1) / n * np.sum((loo - loo.mean()) ** 2)
    assert np.mean(full ** 2) / n == pytest.approx(jackknife, rel=0.12)  # both carry the plug-in excess
    # with the Cox G the se stays the plug-in one (the corrected form is for the Kaplan-Meier G)
    assert res.se ** 2 == pytest.approx(np.mean(full ** 2) / n, rel=1e-12)
    assert res.survival.sigma1_sq_unbiased is None


def test_cox_censoring_with_covariates():
    time, event, risk, x = simulate(600, 8)
    df = pd.DataFrame({"futime": time, "status": event, "risk": risk, "x": x})
    res = ct.calib_ci("Surv(futime, status) ~ risk", data=df, horizon=5.0, censoring="cox",
                      censoring_covariates=["x"])
    g = cox_censoring_before(time, event, x[:, None])[0]
    u = np.where((event == 1) & (time <= 5.0), 1.0 / g, 0.0) - risk
    np.testing.assert_allclose(res.data.u[:, 0], u, rtol=1e-13)
    assert res.survival.censoring == "cox" and res.survival.covariates == ("x",)
    arr = ct.calib_ci(time=time, event=event, probs=risk, horizon=5.0, censoring="cox", censoring_covariates=x)
    assert arr.estimate == res.estimate
    one = ct.calib_ci("Surv(futime, status) ~ risk", data=df, horizon=5.0, censoring="cox", censoring_covariates="x")
    assert one.estimate == res.estimate and one.se == res.se
    with pytest.raises(ValueError, match="censoring_covariates names 'z'"):
        ct.calib_ci("Surv(futime, status) ~ risk", data=df, horizon=5.0, censoring="cox", censoring_covariates=["z"])
    with pytest.raises(ValueError, match="takes no covariates"):
        ct.calib_ci("Surv(futime, status) ~ risk", data=df, horizon=5.0, censoring_covariates=["x"])


# --------------------------------------------------------------------------- input errors
@pytest.fixture
def surv_df():
    time, event, risk, _ = simulate(300, 9)
    return pd.DataFrame({"futime": time, "status": event.astype(int), "risk": risk})


@pytest.mark.parametrize("change, kwargs, match", [
    (lambda d: d.assign(futime=np.where(d.index == 3, -1.0, d.futime)), {}, "futime must hold finite non-neg"),
    (lambda d: d.assign(futime=np.where(d.index == 3, np.nan, d.futime)), {}, "missing values"),
    (lambda d: d.assign(status=np.where(d.index == 3, 2, d.status)), {}, r"status must be coded 0.*\[2.0\]"),
    (lambda d: d, {"horizon": 1e6}, "beyond the last follow-up"),
    (lambda d: d.assign(risk=np.where(d.index == 3, 1.2, d.risk)), {}, "risk must lie in"),
    (lambda d: d, {"horizon": 1e-9}, "no event at or before horizon"),
    (lambda d: d, {"horizon": -1.0}, "horizon must be > 0"),
    (lambda d: d, {"prevalence": 0.3}, "prevalence= cannot"),
    (lambda d: d, {"null": "conditional"}, "null='conditional'"),
    (lambda d: d, {"method": "bootstrap"}, "method='bootstrap'"),
    (lambda d: d, {"censoring": "cox"}, "needs censoring_covariates"),
    (lambda d: d, {"censoring": "weibull"}, "censoring must be one of"),
])
def test_input_errors_name_the_argument(surv_df, change, kwargs, match):
    kwargs = {"horizon": 5.0, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        ct.calib_ci("Surv(futime, status) ~ risk", data=change(surv_df.copy()), **kwargs)


def test_surv_needs_a_horizon_and_a_horizon_needs_surv(surv_df):
    # a Surv(...) formula is a survival outcome from the front door on (its design): it needs its horizon, and a
    # test of binary labels refuses it with the reason
    with pytest.raises(ValueError, match="a survival outcome needs horizon="):
        ct.calib_ci("Surv(futime, status) ~ risk", data=surv_df)
    with pytest.raises(ValueError, match="draws or tests binary labels.*calib_ci.*horizon="):
        ct.hosmer_lemeshow("Surv(futime, status) ~ risk", data=surv_df)
    with pytest.raises(ValueError, match="horizon= needs a survival outcome"):
        ct.calib_ci("status ~ risk", data=surv_df, horizon=5.0)
    with pytest.raises(ValueError, match="all of time=, event= and probs="):
        ct.calib_ci(time=surv_df.futime, probs=surv_df.risk, horizon=5.0)


def test_missing_drop_drops_rows_with_a_missing_time(surv_df):
    df = surv_df.copy()
    df.loc[[3, 7], "futime"] = np.nan
    res = ct.calib_ci("Surv(futime, status) ~ risk", data=df, horizon=5.0, missing="drop")
    ref = ct.calib_ci("Surv(futime, status) ~ risk", data=df.drop(index=[3, 7]), horizon=5.0)
    assert res.n_dropped == 2 and res.estimate == ref.estimate and res.se == ref.se


def test_cox_breslow_matches_statsmodels_phreg():
    from statsmodels.duration.hazard_regression import PHReg
    from calibtest.core.censoring import cox_breslow
    rng = np.random.default_rng(11)
    n = 400
    x = rng.normal(size=(n, 2))
    time = np.round(rng.exponential(1 / np.exp(x @ np.array([0.5, -0.3]))), 1)  # ties
    status = (rng.uniform(size=n) < 0.7).astype(float)
    x = x - x.mean(axis=0)
    expected = PHReg(time, x, status=status, ties="breslow").fit(disp=False).params
    np.testing.assert_allclose(cox_breslow(time, status, x), expected, rtol=1e-7, atol=1e-9)
